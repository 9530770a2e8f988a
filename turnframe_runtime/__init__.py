"""turnframe_runtime: the turn pipeline (reduction, execution, the commit bundle, composition,
server copy and the ports an adopter implements).

What this module exports is the public API; the stage modules behind it may change freely.
"""

from turnframe_runtime.config import OutboxConfig, RuntimeConfig
from turnframe_runtime.copy import CatalogCopy, MissingCopy, RenderedCopy, ServerCopy
from turnframe_runtime.errors import (
    ConversationBusy,
    IdempotencyKeyReused,
    ReviewerRequired,
    StoresWithoutTransactions,
    StreamExpired,
    StreamInterrupted,
    TurnFailed,
    TurnInProgress,
    UnknownWorkflow,
)
from turnframe_runtime.outbox.dispatch import (
    DispatchOutcome,
    NoSender,
    OutboxDispatcher,
    follow_up_turn_id,
)
from turnframe_runtime.outbox.ports import (
    AppliesExternalAnswers,
    NotReceived,
    OutboxRequest,
    OutboxSender,
    SendCompleted,
    SendFailed,
    SendResult,
    SendUnknown,
)
from turnframe_runtime.outbox.relay import Relay, RelayRound
from turnframe_runtime.outbox.worker import OutboxWorker, connect_broker
from turnframe_runtime.ports import (
    AnswerRequest,
    CaseCandidate,
    CaseDirectory,
    ClaimReviewer,
    ExecutionFailed,
    ExecutionRejected,
    ExecutionResult,
    ExecutionTimeout,
    Interpreter,
    LoadedCase,
    Narrator,
    ReviewRequest,
    ReviewVerdict,
    RevisionConflict,
    TransitionRequest,
    WorkflowExecutor,
)
from turnframe_runtime.recover import RecoveredTurn, RecoveryOutcome, RecoveryReport
from turnframe_runtime.runtime import TurnRuntime
from turnframe_runtime.sse import (
    InvalidLastEventId,
    encode_event,
    parse_last_event_id,
    sse_frames,
)

__all__ = [
    "InvalidLastEventId",
    "encode_event",
    "parse_last_event_id",
    "sse_frames",
    "AnswerRequest",
    "AppliesExternalAnswers",
    "CaseCandidate",
    "CaseDirectory",
    "CatalogCopy",
    "ClaimReviewer",
    "ConversationBusy",
    "StreamExpired",
    "StreamInterrupted",
    "DispatchOutcome",
    "ExecutionFailed",
    "ExecutionRejected",
    "ExecutionResult",
    "ExecutionTimeout",
    "IdempotencyKeyReused",
    "Interpreter",
    "LoadedCase",
    "MissingCopy",
    "Narrator",
    "NoSender",
    "NotReceived",
    "OutboxConfig",
    "OutboxDispatcher",
    "OutboxRequest",
    "OutboxSender",
    "OutboxWorker",
    "RecoveredTurn",
    "RecoveryOutcome",
    "RecoveryReport",
    "Relay",
    "RelayRound",
    "RenderedCopy",
    "ReviewRequest",
    "ReviewVerdict",
    "ReviewerRequired",
    "RevisionConflict",
    "RuntimeConfig",
    "SendCompleted",
    "SendFailed",
    "SendResult",
    "SendUnknown",
    "ServerCopy",
    "StoresWithoutTransactions",
    "TransitionRequest",
    "TurnFailed",
    "TurnInProgress",
    "TurnRuntime",
    "UnknownWorkflow",
    "WorkflowExecutor",
    "connect_broker",
    "follow_up_turn_id",
]
