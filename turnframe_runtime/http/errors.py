"""The HTTP layer's own refusals and `STATUS`: the one table from a typed error to the status it
answers with (docs/http.md shows it; a test checks the two agree).

A refusal's body is `{"code": <stable code>, "message": <the error's message>}`. An error is
looked up by its class and then its bases, so a subclass answers as its nearest listed base
(`Busy` is an `Unavailable`, yet listed itself as a conflict). An error the table does not list
is a fault of the server: 500 with the library's code, and a fixed message.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from turnframe_core import InvalidTurnInput, TurnframeError, codes
from turnframe_core.ids import InvalidId
from turnframe_core.interactions import (
    AlreadyAnswered,
    FreeformNotAllowed,
    FreeformRequiredMissing,
    FreeformTooLong,
    InteractionExpired,
    InteractionNotActive,
    InteractionNotFound,
    StaleInteraction,
    UnknownOption,
)
from turnframe_runtime.errors import (
    ConversationBusy,
    IdempotencyKeyReused,
    OriginNotVerified,
    ServerEventRefused,
    StreamExpired,
    StreamInterrupted,
    TooManyFollowers,
    TurnFailed,
    TurnInProgress,
)
from turnframe_runtime.sse import InvalidLastEventId
from turnframe_store.errors import Busy, Conflict, NotFound, Timeout, Unavailable

__all__ = [
    "INTERNAL_MESSAGE",
    "STATUS",
    "BodyTooDeep",
    "BodyTooLarge",
    "MalformedRequest",
    "Unauthenticated",
    "refusal_body",
    "status_of",
]

#: what a 500 says (its cause is logged, never sent)
INTERNAL_MESSAGE: Final = "the server could not answer this request"


class Unauthenticated(TurnframeError):
    """The request carries no account: raised by (or on behalf of) the `authenticate` hook."""

    code = codes.HTTP_UNAUTHENTICATED

    def __init__(self, message: str = "authentication required") -> None:
        super().__init__(message)


class MalformedRequest(TurnframeError):
    """The request cannot be read: a body that is not JSON, a `mode` or `limit` out of range."""

    code = codes.HTTP_MALFORMED_REQUEST


class BodyTooLarge(TurnframeError):
    """The body is larger than `HttpLimits.max_body_bytes`."""

    code = codes.HTTP_BODY_TOO_LARGE


class BodyTooDeep(TurnframeError):
    """The body nests deeper than `HttpLimits.max_depth`."""

    code = codes.HTTP_BODY_TOO_DEEP


#: Every typed refusal and its status, most specific first where one class derives from another.
STATUS: Final[Mapping[type[TurnframeError], int]] = MappingProxyType(
    {
        # 400: the request cannot be read
        MalformedRequest: 400,
        InvalidLastEventId: 400,
        # 401: no account, or an event whose sender was not verified
        Unauthenticated: 401,
        OriginNotVerified: 401,
        # 404: missing, or another account's: the same body either way
        NotFound: 404,
        InteractionNotFound: 404,
        # 409: the request conflicts with what is stored or running
        ConversationBusy: 409,
        Busy: 409,
        TurnInProgress: 409,
        TurnFailed: 409,
        IdempotencyKeyReused: 409,
        Conflict: 409,
        AlreadyAnswered: 409,
        InteractionNotActive: 409,
        InteractionExpired: 409,
        StaleInteraction: 409,
        # 410: the stream log was pruned (the stored turn still reads)
        StreamExpired: 410,
        # 413: the body is too large to read
        BodyTooLarge: 413,
        # 422: the request reads, and is not acceptable
        InvalidTurnInput: 422,
        InvalidId: 422,
        BodyTooDeep: 422,
        ServerEventRefused: 422,
        UnknownOption: 422,
        FreeformNotAllowed: 422,
        FreeformRequiredMissing: 422,
        FreeformTooLong: 422,
        # 429: too many readers of one stream in this process
        TooManyFollowers: 429,
        # 503: the store could not answer (or the turn stopped here): try again
        Unavailable: 503,
        Timeout: 503,
        StreamInterrupted: 503,
    }
)


def status_of(error: BaseException) -> int | None:
    """The status `error` answers with: its class's, else its nearest listed base's; None for
    an error the table does not list (a fault: 500)."""
    for kind in type(error).__mro__:
        status = STATUS.get(kind)
        if status is not None:
            return int(status)
    return None


def refusal_body(error: BaseException) -> tuple[int, dict[str, Any]]:
    """The status and JSON body `error` answers with."""
    status = status_of(error)
    if status is None or not isinstance(error, TurnframeError):
        return 500, {"code": codes.code_of(error, codes.ERROR), "message": INTERNAL_MESSAGE}
    body: dict[str, Any] = {"code": error.code, "message": str(error) or error.code}
    if isinstance(error, TurnFailed) and error.failure_code is not None:
        body["failure_code"] = error.failure_code
    return status, body
