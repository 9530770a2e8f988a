"""turnframe_runtime: the turn pipeline (reduction, execution, the commit bundle, composition,
server copy and the ports an adopter implements).

What this module exports is the public API; the stage modules behind it may change freely.
"""

from turnframe_runtime.config import RuntimeConfig
from turnframe_runtime.copy import CatalogCopy, MissingCopy, RenderedCopy, ServerCopy
from turnframe_runtime.errors import (
    ConversationBusy,
    IdempotencyKeyReused,
    ReviewerRequired,
    StoresWithoutTransactions,
    TurnFailed,
    TurnInProgress,
    UnknownWorkflow,
)
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

__all__ = [
    "AnswerRequest",
    "CaseCandidate",
    "CaseDirectory",
    "CatalogCopy",
    "ClaimReviewer",
    "ConversationBusy",
    "ExecutionFailed",
    "ExecutionRejected",
    "ExecutionResult",
    "ExecutionTimeout",
    "IdempotencyKeyReused",
    "Interpreter",
    "LoadedCase",
    "MissingCopy",
    "Narrator",
    "RecoveredTurn",
    "RecoveryOutcome",
    "RecoveryReport",
    "RenderedCopy",
    "ReviewRequest",
    "ReviewVerdict",
    "ReviewerRequired",
    "RevisionConflict",
    "RuntimeConfig",
    "ServerCopy",
    "StoresWithoutTransactions",
    "TransitionRequest",
    "TurnFailed",
    "TurnInProgress",
    "TurnRuntime",
    "UnknownWorkflow",
    "WorkflowExecutor",
]
