"""The chat example's ASGI app (Starlette): turns streamed as server-sent events, resumed after a
disconnect from `Last-Event-ID`, and the stored conversation for a page that reloads.

Routes:
- `GET /`: the chat page (static/index.html);
- `POST /api/conversations/{cid}/turns[?mode=whole|tokens]`: JSON `{"text": …}` or
  `{"interaction_response": {"interaction_id", "option_id", "expected_case_revision"}}`, with an
  optional client `turn_id`; answers `text/event-stream` from `stream_turn` (the turn id is in the
  `x-turn-id` header and on every event);
- `GET /api/turns/{turn_id}/events`: the turn's events after `Last-Event-ID` (or `?after=N`),
  following a running turn to its end; 204 when the client has already seen the last event;
- `GET /api/conversations/{cid}`: the stored assistant turns, oldest first, as stored
  (`turns`), and what the user sent for each (`inputs`, by turn id).

A refused request is a JSON 4xx `{"code": …, "message": …}` with the error's stable code, sent
before any event; a failure after the first event ends the stream with an `error` frame
(`{"code": …}`) and the client resumes from its last sequence.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from examples.chat.desk import CHAT_ACCOUNT, ChatDesk, Database, open_desk
from turnframe_core import (
    InteractionResponse,
    InvalidTurnInput,
    StreamEvent,
    StreamMode,
    TurnframeError,
    TurnInput,
    is_terminal,
)
from turnframe_runtime import (
    ConversationBusy,
    IdempotencyKeyReused,
    StreamExpired,
    TurnFailed,
    TurnInProgress,
)
from turnframe_runtime.sse import (
    SSE_HEADERS,
    SSE_MEDIA_TYPE,
    InvalidLastEventId,
    encode_frame,
    parse_last_event_id,
    sse_frames,
)
from turnframe_store import NotFound

__all__ = ["DEFAULT_DATABASE_FILE", "app", "create_app", "default_database_url"]

STATIC: Final = Path(__file__).resolve().parent / "static"
DEFAULT_DATABASE_FILE: Final = "turnframe-chat.db"
_CONVERSATION: Final = re.compile(r"conv_[a-z0-9][a-z0-9_]{0,63}")
#: how long the client waits before it reconnects by itself (EventSource)
RETRY_MS: Final = 1_000

#: typed refusals and the status each answers with; any other TurnframeError is a 400
_STATUS: Final[tuple[tuple[type[Exception], int], ...]] = (
    (NotFound, 404),
    (StreamExpired, 410),
    (ConversationBusy, 409),
    (TurnInProgress, 409),
    (IdempotencyKeyReused, 409),
    (TurnFailed, 409),
    (InvalidTurnInput, 422),
    (InvalidLastEventId, 400),
)


def default_database_url() -> str:
    """`TURNFRAME_CHAT_DB` when set, else the SQLite file ./turnframe-chat.db."""
    given = os.environ.get("TURNFRAME_CHAT_DB")
    if given:
        return given
    return f"sqlite+aiosqlite:///{Path.cwd().resolve() / DEFAULT_DATABASE_FILE}"


def _refusal(error: Exception) -> JSONResponse:
    status = next((s for kind, s in _STATUS if isinstance(error, kind)), 400)
    code = str(getattr(error, "code", "turnframe.error"))
    message = getattr(error, "message", None) or code
    return JSONResponse({"code": code, "message": str(message)}, status_code=status)


def _invalid(message: str) -> JSONResponse:
    return _refusal(InvalidTurnInput(message))


def _desk(request: Request) -> ChatDesk:
    desk: ChatDesk = request.app.state.desk
    return desk


async def _opened(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    """The first event (a refusal raises before it), or none when the stream is already over."""
    try:
        return [await anext(events)]
    except StopAsyncIteration:
        return []


async def _with_first(
    first: list[StreamEvent], events: AsyncIterator[StreamEvent]
) -> AsyncIterator[StreamEvent]:
    for event in first:
        yield event
        if is_terminal(event):
            return
    async for event in events:
        yield event


async def _frames(events: AsyncIterator[StreamEvent]) -> AsyncIterator[bytes]:
    """The events as SSE frames; a failure after the first one ends the stream with an `error`
    frame carrying its code (the client resumes from the last sequence it saw)."""
    try:
        async for frame in sse_frames(events, retry_ms=RETRY_MS):
            yield frame
    except Exception as failure:
        code = str(getattr(failure, "code", "turnframe.runtime.turn_failed"))
        yield encode_frame(json.dumps({"code": code}), event="error")


def _stream(
    first: list[StreamEvent], events: AsyncIterator[StreamEvent], turn_id: str | None = None
) -> StreamingResponse:
    headers = dict(SSE_HEADERS)
    if first or turn_id:
        headers["x-turn-id"] = turn_id or first[0].turn_id
    return StreamingResponse(
        _frames(_with_first(first, events)), media_type=SSE_MEDIA_TYPE, headers=headers
    )


async def page(request: Request) -> Response:
    return FileResponse(STATIC / "index.html", headers={"cache-control": "no-store"})


async def post_turn(request: Request) -> Response:
    cid = request.path_params["cid"]
    if not _CONVERSATION.fullmatch(cid):
        return _invalid("a conversation id is conv_ and lowercase letters, digits or _")
    try:
        body: Any = await request.json()
    except ValueError:
        return _invalid("the body is a JSON object")
    if not isinstance(body, dict):
        return _invalid("the body is a JSON object")
    try:
        mode = StreamMode(request.query_params.get("mode") or body.get("mode") or "whole")
    except ValueError:
        return _invalid("mode is whole or tokens")
    try:
        answer = body.get("interaction_response")
        turn_input = TurnInput(
            account_id=CHAT_ACCOUNT,
            conversation_id=cid,
            text=body.get("text") or None,
            turn_id=body.get("turn_id") or None,
            locale=body.get("locale") or "en",
            interaction_response=(
                InteractionResponse.model_validate(answer) if answer is not None else None
            ),
        )
    except ValidationError:
        return _invalid("the turn is text or an interaction_response with its ids")
    except InvalidTurnInput as invalid:
        return _refusal(invalid)
    desk = _desk(request)
    desk.open_trip(cid)
    events = aiter(desk.runtime.stream_turn(turn_input, mode=mode))
    try:
        first = await _opened(events)
    except TurnframeError as refused:
        return _refusal(refused)
    return _stream(first, events)


async def turn_events(request: Request) -> Response:
    turn_id = request.path_params["turn_id"]
    try:
        after = parse_last_event_id(
            request.headers.get("last-event-id") or request.query_params.get("after")
        )
    except InvalidLastEventId as bad:
        return _refusal(bad)
    runtime = _desk(request).runtime
    try:
        # A client that saw the last event is told so with 204: an EventSource then stops
        # reconnecting.
        tail = await runtime.stores.conversations.stream_tail(CHAT_ACCOUNT, turn_id)
        if tail is not None and is_terminal(tail) and tail.sequence <= after:
            return Response(status_code=204)
        # The refusals (an unknown turn, a pruned log) without waiting for an event: a turn
        # still running may log its next one much later, and the response starts now (its
        # keepalives hold the connection meanwhile).
        async for _ in runtime.resume_stream(CHAT_ACCOUNT, turn_id, after, follow=False):
            break
    except TurnframeError as refused:
        return _refusal(refused)
    return _stream([], runtime.resume_stream(CHAT_ACCOUNT, turn_id, after), turn_id)


async def conversation(request: Request) -> Response:
    cid = request.path_params["cid"]
    if not _CONVERSATION.fullmatch(cid):
        return _invalid("a conversation id is conv_ and lowercase letters, digits or _")
    try:
        limit = int(request.query_params.get("limit", "50"))
    except ValueError:
        return _invalid("limit is a number of turns")
    runtime = _desk(request).runtime
    try:
        turns = await runtime.load_conversation(CHAT_ACCOUNT, cid, max(1, min(limit, 200)))
    except NotFound:
        turns = ()
    inputs: dict[str, Any] = {}
    for turn in turns:  # what the user sent, for the page to show beside each reply
        with contextlib.suppress(NotFound):
            said = (
                await runtime.stores.conversations.get_user_turn(CHAT_ACCOUNT, turn.turn_id)
            ).input
            inputs[turn.turn_id] = said.model_dump(
                mode="json", include={"text", "interaction_response"}
            )
    return JSONResponse(
        {
            "conversation_id": cid,
            "turns": [turn.model_dump(mode="json") for turn in turns],
            "inputs": inputs,
        },
        headers={"cache-control": "no-store"},
    )


def create_app(database: Database | None = None, *, narrate: bool = True) -> Starlette:
    """The app on `database` (a URL, default `default_database_url()`, or a function opening
    ready stores), opened when the app starts (on its event loop), closed when it stops."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        desk = await open_desk(database or default_database_url(), narrate=narrate)
        app.state.desk = desk
        try:
            yield
        finally:
            await desk.close()

    return Starlette(
        routes=[
            Route("/", page),
            Route("/api/conversations/{cid}/turns", post_turn, methods=["POST"]),
            Route("/api/conversations/{cid}", conversation),
            Route("/api/turns/{turn_id}/events", turn_events),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        lifespan=lifespan,
    )


#: `uvicorn examples.chat.app:app` serves this one (the SQLite file in the current directory)
app = create_app()
