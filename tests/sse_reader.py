"""A test-side reader of `text/event-stream` bodies, written from the SSE parsing rules (the
WHATWG HTML standard, "Interpreting an event stream"), independent of the encoder under test."""

from __future__ import annotations

import codecs
import re
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from dataclasses import dataclass

__all__ = ["Frame", "read_frames", "read_frames_async"]

_LINE = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Frame:
    """One dispatched event: its `id:`, `event:` and `data:` (lines joined with \\n), plus the
    `retry:` it carried and the comments seen before it."""

    id: str | None
    event: str
    data: str
    retry: int | None = None
    comments: tuple[str, ...] = ()


class _Parser:
    def __init__(self) -> None:
        self.buffer = ""
        self._reset()
        self.comments: list[str] = []

    def _reset(self) -> None:
        self.id: str | None = None
        self.event = ""
        self.data: list[str] = []
        self.retry: int | None = None

    def feed(self, text: str) -> list[Frame]:
        self.buffer += text
        held = ""
        if self.buffer.endswith("\r"):  # it may be the first half of a \r\n
            self.buffer, held = self.buffer[:-1], "\r"
        lines = _LINE.split(self.buffer)
        self.buffer = lines.pop() + held  # the last piece has no line end yet
        frames: list[Frame] = []
        for line in lines:
            frame = self.line(line)
            if frame is not None:
                frames.append(frame)
        return frames

    def line(self, line: str) -> Frame | None:
        if line == "":
            if not self.data:
                self._reset()
                return None
            frame = Frame(
                self.id,
                self.event or "message",
                "\n".join(self.data),
                self.retry,
                tuple(self.comments),
            )
            self._reset()
            self.comments = []
            return frame
        if line.startswith(":"):
            self.comments.append(line[1:].strip())
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            self.data.append(value)
        elif field == "event":
            self.event = value
        elif field == "id" and "\0" not in value:
            self.id = value
        elif field == "retry" and value.isascii() and value.isdigit():
            self.retry = int(value)
        return None


def read_frames(chunks: Iterable[bytes | str]) -> list[Frame]:
    """Every frame of a stream's body, given in chunks that may split lines anywhere."""
    parser = _Parser()
    decoder = codecs.getincrementaldecoder("utf-8")()
    frames: list[Frame] = []
    for chunk in chunks:
        frames.extend(parser.feed(decoder.decode(chunk) if isinstance(chunk, bytes) else chunk))
    return frames


async def read_frames_async(chunks: AsyncIterable[str]) -> AsyncIterator[Frame]:
    """As `read_frames`, frame by frame as they arrive."""
    parser = _Parser()
    async for chunk in chunks:
        for frame in parser.feed(chunk):
            yield frame
