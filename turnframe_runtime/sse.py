"""Server-sent events for a turn's stream (DESIGN §8), for any ASGI app: pure functions and one
async generator, no web framework.

One stream event is one frame: `id:` its sequence, `event:` its type, `data:` its JSON. A
browser's `EventSource` (or any SSE client) sends the last `id:` it saw back as `Last-Event-ID`
when it reconnects; `parse_last_event_id` turns that header into the `after_sequence` that
`TurnRuntime.resume_stream` takes, so a reconnected client sees every event once, in order.

A `Last-Event-ID` this encoder cannot have sent (anything but a decimal sequence) raises
`InvalidLastEventId` rather than silently restarting from 0: replaying a whole stream to a client
that believes it is resuming would show it every block twice. An absent or empty header is 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator
from typing import Final

from turnframe_core import codes
from turnframe_core.errors import TurnframeError
from turnframe_core.stream import StreamEvent

__all__ = [
    "KEEPALIVE_FRAME",
    "SSE_HEADERS",
    "SSE_MEDIA_TYPE",
    "InvalidLastEventId",
    "encode_event",
    "encode_frame",
    "parse_last_event_id",
    "sse_frames",
]

SSE_MEDIA_TYPE: Final = "text/event-stream"
#: Headers a streamed response needs: no cache may hold it, no proxy may buffer it.
SSE_HEADERS: Final[dict[str, str]] = {"cache-control": "no-store", "x-accel-buffering": "no"}
#: A comment line: clients ignore it; it keeps idle connections (and proxies) from timing out.
KEEPALIVE_FRAME: Final = b": keepalive\n\n"

_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")
_SEQUENCE: Final = re.compile(r"[0-9]{1,18}")  # ASCII digits only (str.isdigit admits others)


class InvalidLastEventId(TurnframeError):
    """A `Last-Event-ID` (or `after`) value that is not a sequence this stream sent."""

    code = codes.STREAM_INVALID_LAST_EVENT_ID


def encode_frame(
    data: str, *, event: str | None = None, id: str | None = None, retry_ms: int | None = None
) -> bytes:
    """One SSE frame. `data` may hold line breaks (each line becomes its own `data:` line, which
    a client joins back with `\\n`); `event` and `id` may not, nor may `id` hold a NUL."""
    lines: list[str] = []
    if retry_ms is not None:
        if retry_ms < 0:
            raise ValueError("retry_ms is a number of milliseconds")
        lines.append(f"retry: {retry_ms}")
    if id is not None:
        if _LINE_BREAK.search(id) or "\0" in id:
            raise ValueError("an SSE id holds no line break and no NUL")
        lines.append(f"id: {id}")
    if event is not None:
        if _LINE_BREAK.search(event) or not event:
            raise ValueError("an SSE event name is one non-empty line")
        lines.append(f"event: {event}")
    lines.extend(f"data: {line}" for line in _LINE_BREAK.split(data))
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def encode_event(event: StreamEvent, *, retry_ms: int | None = None) -> bytes:
    """The frame for one stream event: `id: <sequence>`, `event: <type>`, `data: <its JSON>`."""
    return encode_frame(
        event.model_dump_json(), event=event.type, id=str(event.sequence), retry_ms=retry_ms
    )


def parse_last_event_id(value: str | None) -> int:
    """The `after_sequence` a `Last-Event-ID` header asks for: 0 when absent or empty, else the
    sequence it names. `InvalidLastEventId` for anything else (a sign, a fraction, letters)."""
    if value is None:
        return 0
    value = value.strip(" \t")
    if not value:
        return 0
    if not _SEQUENCE.fullmatch(value):
        raise InvalidLastEventId("Last-Event-ID is the sequence of the last event seen")
    return int(value)


async def with_keepalives(
    frames: AsyncIterable[bytes], keepalive_s: float | None
) -> AsyncGenerator[bytes, None]:
    """Each frame of `frames`, in order; while none arrives for `keepalive_s` seconds, a
    `: keepalive` comment (None: never). An error of `frames` propagates; closing this
    generator (a client that went away) stops reading `frames` and closes them."""
    source = aiter(frames)
    pending: asyncio.Task[bytes] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(source))
            done, _ = await asyncio.wait({pending}, timeout=keepalive_s)
            if not done:
                yield KEEPALIVE_FRAME
                continue
            task, pending = pending, None
            try:
                frame = task.result()
            except StopAsyncIteration:
                return
            yield frame
    finally:
        if pending is not None:
            pending.cancel()
            await asyncio.wait({pending})  # a cancel of this generator still lands
            if not pending.cancelled():
                pending.exception()  # read, so it is not reported as never retrieved
        await _close_quietly(source)


async def sse_frames(
    events: AsyncIterable[StreamEvent],
    *,
    keepalive_s: float | None = 15.0,
    retry_ms: int | None = None,
) -> AsyncIterator[bytes]:
    """Each event of `events` as a frame, in order, with keepalives as `with_keepalives` adds
    them. `retry_ms`, when given, rides on the first frame (the client's reconnection delay).
    An error of `events` propagates; closing this generator (a client that went away) stops
    reading `events` and closes them."""
    source = aiter(events)

    async def encoded() -> AsyncIterator[bytes]:
        first = True
        async for event in source:
            yield encode_event(event, retry_ms=retry_ms if first else None)
            first = False

    frames = with_keepalives(encoded(), keepalive_s)
    try:
        async for frame in frames:
            yield frame
    finally:
        await frames.aclose()
        await _close_quietly(source)  # whatever state `encoded` was left in


async def _close_quietly(source: AsyncIterator[object]) -> None:
    closing = getattr(source, "aclose", None)
    if closing is not None:
        with contextlib.suppress(Exception):
            await closing()
