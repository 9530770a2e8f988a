"""The runtime's own errors (each with its stable code)."""

from __future__ import annotations

from turnframe_core import codes
from turnframe_core.errors import TurnframeError

__all__ = [
    "ConversationBusy",
    "IdempotencyKeyReused",
    "InvalidSubject",
    "OriginNotVerified",
    "ReviewerRequired",
    "ServerEventRefused",
    "StoresWithoutTransactions",
    "TurnFailed",
    "TurnInProgress",
    "UnknownSubject",
    "UnknownWorkflow",
]


class TurnInProgress(TurnframeError):
    """The client's turn id was accepted before and has no reply yet (running, or awaiting
    recovery); nothing new was written."""

    code = codes.RUNTIME_TURN_IN_PROGRESS


class TurnFailed(TurnframeError):
    """The client's turn id names a turn that ended `failed` before any effect; nothing new was
    written. `failure_code` is the code its replay record keeps. Send the request again with a
    new turn id."""

    code = codes.RUNTIME_TURN_FAILED

    def __init__(self, message: str, failure_code: str | None = None) -> None:
        super().__init__(message)
        self.failure_code = failure_code


class UnknownWorkflow(TurnframeError):
    """A case names a workflow this runtime does not run."""

    code = codes.RUNTIME_UNKNOWN_WORKFLOW


class StoresWithoutTransactions(TurnframeError):
    """The runtime was given stores whose calls cannot commit together (a bundle assembled from
    separate role objects): a turn's durable points need `Stores.transaction()`."""

    code = codes.RUNTIME_STORES_WITHOUT_TRANSACTIONS


class IdempotencyKeyReused(TurnframeError):
    """The client's turn id was used before for a different request (another conversation, other
    words or another card answer); nothing was written. A retry must send the same request."""

    code = codes.RUNTIME_IDEMPOTENCY_KEY_REUSED


class ReviewerRequired(TurnframeError):
    """Free narration (`RuntimeConfig(narration="free")`) was wired without a `ClaimReviewer`
    passed to the runtime: prose a model wrote is always reviewed by a port other than the one
    that wrote it (a narrator's own `reviewer` does not count). Structured narration needs none:
    nothing a model wrote is shown."""

    code = codes.RUNTIME_REVIEWER_REQUIRED


class ConversationBusy(TurnframeError):
    """Another turn of this conversation was still running when the wait ran out
    (`RuntimeConfig.conversation_wait_ms`); nothing was written. Send the turn again."""

    code = codes.RUNTIME_CONVERSATION_BUSY


class StreamExpired(TurnframeError):
    """The turn finished so long ago that its stream log was pruned; read the turn itself
    (`load_turn`)."""

    code = codes.STREAM_EXPIRED


class StreamInterrupted(TurnframeError):
    """The turn stopped running in this process before its stream ended (its task was
    cancelled); once recovery finished it, `resume_stream` gives the rest."""

    code = codes.STREAM_INTERRUPTED


class TooManyFollowers(TurnframeError):
    """The turn already has `RuntimeConfig.stream_followers_per_turn` stream readers in this
    process, or the conversation `RuntimeConfig.feed_followers_per_conversation` feed readers;
    nothing was read. Try again later (or read the stored turns)."""

    code = codes.STREAM_TOO_MANY_FOLLOWERS


class OriginNotVerified(TurnframeError):
    """A server event named an origin this runtime does not know, or its signature did not
    verify; nothing was written. The message never says which of the two."""

    code = codes.SERVER_EVENT_ORIGIN_NOT_VERIFIED


class ServerEventRefused(TurnframeError):
    """The event's operation cannot run on its case: the workflow does not offer it there, or
    its `compile` refused it (`refusal_code`: the domain's code), or no origin or card could
    authorize its commands; nothing was written."""

    code = codes.SERVER_EVENT_REFUSED

    def __init__(self, message: str, refusal_code: str | None = None) -> None:
        super().__init__(message)
        self.refusal_code = refusal_code


class UnknownSubject(TurnframeError):
    """The account holds no such subject to erase or export. Another account's subject gives
    this same error, word for word: nothing is revealed, nothing is written."""

    code = codes.ERASURE_UNKNOWN_SUBJECT


class InvalidSubject(TurnframeError):
    """The account or subject given to erase or export is not a well-formed id; nothing was
    read or written."""

    code = codes.ERASURE_INVALID_SUBJECT
