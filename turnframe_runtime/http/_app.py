"""`create_app`: the library's ASGI app (Starlette) over one `TurnRuntime` (docs/http.md).

Every route but the webhook asks the adopter's `authenticate` hook for the account first; the
account never comes from a body. A refusal is a JSON `{"code", "message"}` with the status
`errors.STATUS` gives, sent before any event: a posted turn's stream is answered only once its
first event is logged (a refused turn logs none). A failure after the first event ends the
stream with an `error` frame carrying its code; the client resumes from the last id it saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from base64 import b32encode
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, TypeVar

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from turnframe_core import InvalidTurnInput, TurnframeError, codes
from turnframe_core.ids import IdPrefix, InvalidId, is_account_id, require_prefixed
from turnframe_core.replay import TurnPhase
from turnframe_core.server_events import ServerEvent
from turnframe_core.stream import StreamEvent, StreamMode, TurnCompleted, is_terminal
from turnframe_core.stream import TurnFailed as TurnFailedEvent
from turnframe_core.turn import AssistantTurn, TurnInput
from turnframe_runtime.errors import (
    OriginNotVerified,
    StreamInterrupted,
    TurnFailed,
    TurnInProgress,
)
from turnframe_runtime.feed import FeedItem
from turnframe_runtime.http._body import JSON_MEDIA_TYPE, read_json
from turnframe_runtime.http._options import CorsConfig, HttpLimits
from turnframe_runtime.http.errors import (
    INTERNAL_MESSAGE,
    MalformedRequest,
    Unauthenticated,
    refusal_body,
)
from turnframe_runtime.runtime import TurnRuntime
from turnframe_runtime.sse import (
    SSE_HEADERS,
    SSE_MEDIA_TYPE,
    encode_frame,
    parse_last_event_id,
    sse_frames,
    with_keepalives,
)
from turnframe_store.errors import NotFound

__all__ = ["Authenticate", "RuntimeSource", "create_app", "new_turn_id"]

#: The runtime itself (the adopter opens and closes it), or a function opening it as an async
#: context manager: entered when the app starts, left when it stops.
RuntimeSource = TurnRuntime | Callable[[], AbstractAsyncContextManager[TurnRuntime]]
#: The request's account id; None (or raising `Unauthenticated`) refuses it with 401.
Authenticate = Callable[[Request], Awaitable[str | None]]

#: how long a client waits before it reconnects by itself (EventSource's `retry:`)
RETRY_MS: Final = 1_000
_DEFAULT_TURNS: Final = 50
_BODY_FIELDS: Final = frozenset({"text", "locale", "turn_id", "interaction_response"})

_log = logging.getLogger("turnframe.http")

T = TypeVar("T")


def new_turn_id() -> str:
    """A turn id nobody can guess: 160 random bits from `secrets`, in the turn id format."""
    return "turn_" + b32encode(secrets.token_bytes(20)).decode("ascii").lower()


def create_app(
    runtime: RuntimeSource,
    *,
    authenticate: Authenticate,
    cors: CorsConfig | None = None,
    limits: HttpLimits = HttpLimits(),  # noqa: B008  (frozen: one shared default is safe)
    on_conversation: Callable[[str, str], Awaitable[None]] | None = None,
) -> Starlette:
    """The turn routes over `runtime` (docs/http.md), to serve alone or mount in an app.

    `authenticate(request)` names the request's account (None or `Unauthenticated`: 401);
    `on_conversation(account_id, conversation_id)` is awaited before each posted turn with
    words runs (never for a click alone). It must be idempotent: it runs for every such turn,
    a retry included, and before the runtime's own refusals (a busy conversation, a reused id),
    so it may run for a turn that is then refused.
    A runtime given as a factory is opened by this app's lifespan: mounted in another app, run
    that lifespan there too (`lifespan=app.router.lifespan_context`)."""
    api = _Api(runtime, authenticate, limits, on_conversation)
    middleware = [] if cors is None else [_cors(cors)]
    return Starlette(
        routes=[
            Route("/conversations/{cid}/turns", api.post_turn, methods=["POST"]),
            Route("/conversations/{cid}/turns", api.conversation_turns, methods=["GET"]),
            Route("/turns/{turn_id}/events", api.turn_events, methods=["GET"]),
            Route("/turns/{turn_id}", api.turn, methods=["GET"]),
            Route("/conversations/{cid}/feed", api.feed, methods=["GET"]),
            Route("/events/{origin}", api.server_event, methods=["POST"]),
        ],
        middleware=middleware,
        lifespan=api.lifespan,
        exception_handlers={Exception: _fault},
    )


def _cors(cors: CorsConfig) -> Middleware:
    headers = ["content-type", "last-event-id", "authorization", "x-turnframe-signature"]
    return Middleware(
        CORSMiddleware,
        allow_origins=list(cors.allow_origins),
        allow_methods=["GET", "POST"],
        allow_headers=[*headers, *cors.allow_headers],
        allow_credentials=cors.allow_credentials,
        expose_headers=["x-turn-id"],
        max_age=cors.max_age_s,
    )


async def _fault(request: Request, error: Exception) -> Response:
    """An error no route turned into a refusal: 500, the same body whatever it was (the server
    logs the error itself)."""
    return JSONResponse(
        {"code": codes.ERROR, "message": INTERNAL_MESSAGE},
        status_code=500,
        headers={"cache-control": "no-store"},
    )


def _refused(error: BaseException) -> JSONResponse:
    status, body = refusal_body(error)
    if status >= 500:
        _log.error("request failed: %s", body["code"], exc_info=error)
    return JSONResponse(body, status_code=status, headers={"cache-control": "no-store"})


def _refusing(
    handler: Callable[[_Api, Request], Awaitable[Response]],
) -> Callable[[_Api, Request], Awaitable[Response]]:
    """A route whose typed errors answer as `errors.STATUS` says."""

    async def route(api: _Api, request: Request) -> Response:
        try:
            return await handler(api, request)
        except TurnframeError as refused:
            return _refused(refused)

    route.__name__ = handler.__name__
    route.__doc__ = handler.__doc__
    return route


class _Api:
    """The routes and what they share: the runtime, the hooks and the limits."""

    def __init__(
        self,
        runtime: RuntimeSource,
        authenticate: Authenticate,
        limits: HttpLimits,
        on_conversation: Callable[[str, str], Awaitable[None]] | None,
    ) -> None:
        self._source = runtime
        self._runtime = runtime if isinstance(runtime, TurnRuntime) else None
        self._authenticate = authenticate
        self._limits = limits
        self._on_conversation = on_conversation

    @contextlib.asynccontextmanager
    async def lifespan(self, app: object) -> AsyncIterator[None]:
        if isinstance(self._source, TurnRuntime):
            yield
            return
        async with self._source() as runtime:
            self._runtime = runtime
            try:
                yield
            finally:
                self._runtime = None

    @property
    def runtime(self) -> TurnRuntime:
        if self._runtime is None:
            raise RuntimeError(
                "the runtime is not open: this app's lifespan did not run (mounted in another "
                "app, pass lifespan=app.router.lifespan_context to that app)"
            )
        return self._runtime

    async def _account(self, request: Request) -> str:
        account = await self._authenticate(request)
        if account is None:
            raise Unauthenticated()
        if not is_account_id(account):
            raise TypeError("authenticate returned something that is not an account id")
        return account

    # --- routes -----------------------------------------------------------------------------------

    @_refusing
    async def post_turn(self, request: Request) -> Response:
        """POST /conversations/{cid}/turns[?mode=whole|tokens]: run one turn, streamed as SSE
        (or, with `Accept: application/json`, answered with the stored turn)."""
        account = await self._account(request)
        mode = _mode(request.query_params.get("mode"))
        body = await read_json(request, self._limits)
        turn_input = _turn_input(account, request.path_params["cid"], body)
        # A click answers a card the conversation already showed: nothing to open for it (and
        # a card from elsewhere is refused without the hook having written anything).
        if self._on_conversation is not None and not turn_input.is_click_only:
            await self._on_conversation(account, turn_input.conversation_id)
        runtime = self.runtime
        assert turn_input.turn_id is not None
        if _wants_json(request):
            turn = await _completed(aiter(runtime.stream_turn(turn_input, mode)))
            answer = await self._turn_json(account, turn)
            answer.headers["x-turn-id"] = turn.turn_id
            return answer
        # A refusal raises here, before any event: the turn's first event says it was taken.
        events = await _admitted(aiter(runtime.stream_turn(turn_input, mode)), None)
        return self._stream(account, turn_input.turn_id, events)

    @_refusing
    async def turn_events(self, request: Request) -> Response:
        """GET /turns/{turn_id}/events: the turn's events after `Last-Event-ID` (or `?after=`),
        following a running turn to its end; 204 when the client saw its last event."""
        account = await self._account(request)
        turn_id = _path_id("turn", request.path_params["turn_id"])
        after = parse_last_event_id(
            request.headers.get("last-event-id") or request.query_params.get("after")
        )
        runtime = self.runtime
        # A client that saw the last event is told so with 204: an EventSource stops there.
        tail = await runtime.stores.conversations.stream_tail(account, turn_id)
        if tail is not None and is_terminal(tail) and tail.sequence <= after:
            return Response(status_code=204)
        # One reader, answered once it was admitted or had its first event: the refusals (an
        # unknown turn, a pruned log, too many readers) are statuses, never an error frame; a
        # running turn may log its next event much later, and keepalives hold the connection.
        admitted = asyncio.Event()
        events = await _admitted(
            runtime.resume_stream(account, turn_id, after, admitted=admitted),
            self._limits.keepalive_s,
            admitted,
        )
        return self._stream(account, turn_id, events)

    @_refusing
    async def turn(self, request: Request) -> Response:
        """GET /turns/{turn_id}: the stored turn and the ids of its follow-up turns."""
        account = await self._account(request)
        turn_id = _path_id("turn", request.path_params["turn_id"])
        runtime = self.runtime
        try:
            turn = await runtime.load_turn(account, turn_id)
        except NotFound:
            marker = await runtime.stores.conversations.get_phase(account, turn_id)  # NotFound
            if marker.phase is TurnPhase.FAILED:
                raise TurnFailed("this turn failed; send it again with a new turn id") from None
            raise TurnInProgress("this turn has no reply yet") from None
        return await self._turn_json(account, turn)

    @_refusing
    async def conversation_turns(self, request: Request) -> Response:
        """GET /conversations/{cid}/turns?limit=: the last `limit` stored turns, oldest first,
        and what the user sent for each (by turn id)."""
        account = await self._account(request)
        cid = _path_id("conv", request.path_params["cid"])
        limit = _limit(request.query_params.get("limit"), self._limits.max_turns)
        runtime = self.runtime
        conversations = runtime.stores.conversations
        await conversations.get_conversation(account, cid)  # NotFound, the same for any account
        turns = await runtime.load_conversation(account, cid, limit)
        inputs: dict[str, Any] = {}
        for turn in turns:
            with contextlib.suppress(NotFound):  # a server-written turn has no user input
                said = (await conversations.get_user_turn(account, turn.turn_id)).input
                if said.is_server_turn:
                    continue
                inputs[turn.turn_id] = said.model_dump(
                    mode="json", include={"text", "interaction_response", "locale"}
                )
        return JSONResponse(
            {
                "conversation_id": cid,
                "turns": [turn.model_dump(mode="json") for turn in turns],
                "inputs": inputs,
            },
            headers={"cache-control": "no-store"},
        )

    @_refusing
    async def feed(self, request: Request) -> Response:
        """GET /conversations/{cid}/feed: every stored turn of the conversation after
        `Last-Event-ID` (or `?after=`) as an `event: turn` frame whose id is its feed sequence,
        then each turn as it is stored (server-written follow-ups included), never ending."""
        account = await self._account(request)
        cid = _path_id("conv", request.path_params["cid"])
        after = parse_last_event_id(
            request.headers.get("last-event-id") or request.query_params.get("after")
        )
        admitted = asyncio.Event()
        items = await _admitted(
            self.runtime.follow_conversation(account, cid, after, admitted=admitted),
            self._limits.keepalive_s,
            admitted,
        )
        frames = _feed_frames(items)
        return StreamingResponse(
            _ending_with_error(with_keepalives(frames, self._limits.keepalive_s)),
            media_type=SSE_MEDIA_TYPE,
            headers=dict(SSE_HEADERS),
        )

    @_refusing
    async def server_event(self, request: Request) -> Response:
        """POST /events/{origin}: an event from outside (a `ServerEvent` as JSON, its origin
        the path's) signed in `x-turnframe-signature`; answered with the server turn it
        became. The signature is the authentication: `authenticate` is not asked, and an
        origin that takes events unsigned (`TrustedOrigin`) is never served here."""
        name = request.path_params["origin"]
        body = await read_json(request, self._limits)
        if not isinstance(body, dict):
            raise InvalidTurnInput("the body is a server event as a JSON object")
        if body.get("origin", name) != name:
            raise InvalidTurnInput("the event's origin is the one its path names")
        runtime = self.runtime
        origin = runtime.origins.get(name)
        if origin is None or not origin.requires_signature:
            raise OriginNotVerified("the event's origin was not verified")
        event = ServerEvent.model_validate({**body, "origin": name})
        signature = request.headers.get("x-turnframe-signature")
        turn = await runtime.server_event(event, signature=signature)
        return JSONResponse(
            {"turn": turn.model_dump(mode="json")}, headers={"cache-control": "no-store"}
        )

    # --- answers ----------------------------------------------------------------------------------

    async def _follow_ups(self, account: str, turn_id: str) -> list[str]:
        return list(await self.runtime.follow_up_turns(account, turn_id))

    async def _turn_json(self, account: str, turn: AssistantTurn) -> JSONResponse:
        follow_ups = await self._follow_ups(account, turn.turn_id)
        return JSONResponse(
            {"turn": turn.model_dump(mode="json"), "follow_up_turn_ids": follow_ups},
            headers={"cache-control": "no-store"},
        )

    def _stream(
        self, account: str, turn_id: str, events: AsyncIterator[StreamEvent]
    ) -> StreamingResponse:
        return StreamingResponse(
            _ending_with_error(self._frames(account, turn_id, events)),
            media_type=SSE_MEDIA_TYPE,
            headers={**SSE_HEADERS, "x-turn-id": turn_id},
        )

    async def _frames(
        self, account: str, turn_id: str, events: AsyncIterator[StreamEvent]
    ) -> AsyncGenerator[bytes, None]:
        """The events as SSE frames, then (after a `turn.completed`) the turn's follow-ups as
        one `follow_ups` frame when it has any."""
        ended: list[StreamEvent] = []

        async def noted() -> AsyncIterator[StreamEvent]:
            async for event in events:
                if is_terminal(event):
                    ended.append(event)
                yield event

        frames = sse_frames(noted(), keepalive_s=self._limits.keepalive_s, retry_ms=RETRY_MS)
        try:
            async for frame in frames:
                yield frame
        finally:
            await _close(frames)
        if ended and isinstance(ended[0], TurnCompleted):
            follow_ups = await self._follow_ups(account, turn_id)
            if follow_ups:
                yield encode_frame(json.dumps({"turn_ids": follow_ups}), event="follow_ups")


# --- reading the request ------------------------------------------------------------------------


def _mode(value: str | None) -> StreamMode:
    try:
        return StreamMode(value or StreamMode.WHOLE)
    except ValueError:
        raise MalformedRequest("mode is whole or tokens") from None


def _limit(value: str | None, most: int) -> int:
    if value is None:
        return min(_DEFAULT_TURNS, most)
    if not (value.isascii() and value.isdigit()) or len(value) > 9 or int(value) < 1:
        raise MalformedRequest("limit is a positive number of turns")
    return min(int(value), most)


def _path_id(prefix: IdPrefix, value: str) -> str:
    """A path's id; one that no record can have answers as a missing record (the same 404)."""
    try:
        return require_prefixed(prefix, value)
    except InvalidId:
        raise NotFound() from None


def _turn_input(account: str, conversation_id: str, body: Any) -> TurnInput:
    """The posted turn: the account from `authenticate`, the conversation from the path, and
    from the body only the words, locale, turn id and card answer. A server-assigned turn id is
    random (`new_turn_id`)."""
    if not isinstance(body, dict):
        raise InvalidTurnInput("the body is a JSON object")
    if not body.keys() <= _BODY_FIELDS:
        raise InvalidTurnInput("the body holds text, locale, turn_id and interaction_response only")
    given = {key: value for key, value in body.items() if value is not None}
    given.setdefault("turn_id", new_turn_id())
    return TurnInput.model_validate(
        {**given, "account_id": account, "conversation_id": conversation_id}
    )


def _wants_json(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    types = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return JSON_MEDIA_TYPE in types and SSE_MEDIA_TYPE not in types


# --- reading the turn ---------------------------------------------------------------------------


async def _admitted(
    items: AsyncIterator[T], wait_s: float | None, admitted: asyncio.Event | None = None
) -> AsyncIterator[T]:
    """`items`, once their first step was taken (a refusal raises here, before any answer),
    `admitted` was set, or `wait_s` seconds ran (None: the first step only): the same reader,
    counted once, its first step carried on.

    A reader's admission (too many readers, a conversation the account does not have) comes
    before its first item and before `admitted` is set: it is answered with its status. A quiet
    conversation's first item may come much later; the answer starts once the reader was
    admitted (or after `wait_s`), and its keepalives hold the connection meanwhile."""
    first = asyncio.ensure_future(anext(items))
    waiting: set[asyncio.Task[Any]] = {first}
    if admitted is not None:
        waiting.add(asyncio.ensure_future(admitted.wait()))
    try:
        try:
            await asyncio.wait(waiting, timeout=wait_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waiting - {first}:
                await _cancelled(task)
        failure = None if not first.done() else first.exception()
        if failure is not None and not isinstance(failure, StopAsyncIteration):
            raise failure
    except BaseException:
        await _cancelled(first)
        await _close(items)
        raise
    return _carried_on(first, items)


async def _carried_on(first: asyncio.Task[T], items: AsyncIterator[T]) -> AsyncIterator[T]:
    try:
        try:
            yield await first
        except StopAsyncIteration:
            return
        async for item in items:
            yield item
    finally:
        await _cancelled(first)
        await _close(items)


async def _cancelled(task: asyncio.Task[Any]) -> None:
    """`task` ended: cancelled unless it had ended, its outcome read."""
    if not task.done():
        task.cancel()
        await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # read, so it is not reported as never retrieved


async def _feed_frames(items: AsyncIterator[FeedItem]) -> AsyncGenerator[bytes, None]:
    first = True
    try:
        async for item in items:
            yield encode_frame(
                item.turn.model_dump_json(),
                event="turn",
                id=str(item.sequence),
                retry_ms=RETRY_MS if first else None,
            )
            first = False
    finally:
        await _close(items)


async def _ending_with_error(frames: AsyncGenerator[bytes, None]) -> AsyncIterator[bytes]:
    """`frames`, of which a failure after the first ends the stream with an `error` frame
    carrying its code (a fault, not a refusal, is logged); closing this closes `frames`."""
    try:
        async for frame in frames:
            yield frame
    except Exception as failure:
        code = codes.code_of(failure, codes.ERROR)
        if not isinstance(failure, TurnframeError):
            _log.error("stream failed: %s", code, exc_info=failure)
        yield encode_frame(json.dumps({"code": code}), event="error")
    finally:
        await frames.aclose()


async def _completed(events: AsyncIterator[StreamEvent]) -> AssistantTurn:
    """The stored turn the stream ends with; a turn that ended failed raises `TurnFailed`."""
    try:
        async for event in events:
            if isinstance(event, TurnCompleted):
                return event.turn
            if isinstance(event, TurnFailedEvent):
                raise TurnFailed("the turn failed; send it again with a new turn id", event.code)
        raise StreamInterrupted("the turn stopped before its end; read it again later")
    finally:
        await _close(events)


async def _close(events: AsyncIterator[Any]) -> None:
    closing = getattr(events, "aclose", None)
    if closing is not None:
        await closing()
