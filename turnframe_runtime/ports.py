"""What an adopter implements around the runtime: the case directory, the workflow executor, the
interpreter, the narrator. Documented `Protocol`s, and the `Executor` base class an adopter's
executor subclasses (its optional `outcome()` defaults to "cannot tell"); `as_executor` is the one
place that adapts a structural `WorkflowExecutor`. The runtime never imports an implementation."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from pydantic import Field

from turnframe_core import codes
from turnframe_core.blocks import AnswerBasis
from turnframe_core.cases import CaseKey
from turnframe_core.commands import CommandBatch
from turnframe_core.errors import TurnframeError
from turnframe_core.events import DomainEvent
from turnframe_core.facts import NarratableFact
from turnframe_core.model import FrozenModel, NonEmptyStr, Revision
from turnframe_core.moves import MoveKind, Referable
from turnframe_core.understanding import Brief, Understanding
from turnframe_core.wording import ClaimClass

__all__ = [
    "AnswerRequest",
    "CaseCandidate",
    "ClaimReviewer",
    "CaseDirectory",
    "ExecutionFailed",
    "ExecutionRejected",
    "ExecutionResult",
    "ExecutionTimeout",
    "Executor",
    "Interpreter",
    "LoadedCase",
    "Narrator",
    "OutcomeUntold",
    "ReviewRequest",
    "ReviewVerdict",
    "RevisionConflict",
    "TransactionalExecutor",
    "TransitionRequest",
    "WorkflowExecutor",
    "as_executor",
]


class CaseCandidate(FrozenModel):
    """A case a conversation may address, with the label a person would use for it."""

    case: CaseKey
    label: NonEmptyStr


class LoadedCase(FrozenModel):
    """A case's state at a revision. An absent state (revision 0) means "not yet", never
    "no longer": completion is a state, not a disappearance."""

    case: CaseKey
    revision: Revision
    state: dict[str, Any] | None = None


class CaseDirectory(Protocol):
    """Which cases exist for an account and conversation, and who may touch them.

    Security relevant: `authorize` must refuse anything the account may not reach; every case the
    runtime projects, offers to a model or lets a card name passes through it first.
    """

    async def candidates(self, account_id: str, conversation_id: str) -> Sequence[CaseCandidate]:
        """The cases this conversation may address, in a stable order."""
        ...

    async def authorize(self, account_id: str, case: CaseKey) -> bool:
        """True only if `account_id` may read and act on `case`. Refuse when unsure."""
        ...

    async def load(self, account_id: str, case: CaseKey) -> LoadedCase:
        """The case's current state and revision (an authorized case only)."""
        ...

    async def find(self, account_id: str, workflow: str, name: str) -> Sequence[CaseCandidate]:
        """Cases of `workflow` whose record matches `name` exactly (no fuzzy matching): a
        reference the user named, of a kind the workflow declares (`Workflow.nameable`), in
        the form it declares. The runtime authorizes every case returned before it loads it
        (decision 0033); the label returned is what the brief shows."""
        ...


class ExecutionResult(FrozenModel):
    """What a batch committed: the revision it reached and the events it produced. A replayed key
    returns the original result with `replayed=True` and changes nothing."""

    new_revision: Revision
    events: tuple[DomainEvent, ...] = Field(min_length=1)
    replayed: bool = False


class RevisionConflict(TurnframeError):
    """The case moved since the command was planned; nothing was applied."""

    code = codes.EXECUTION_REVISION_CONFLICT

    def __init__(self, current_revision: int) -> None:
        super().__init__("the case changed since this command was planned")
        self.current_revision = current_revision


class ExecutionRejected(TurnframeError):
    """The domain refused the command (in its own words); nothing was applied."""

    code = codes.EXECUTION_REJECTED

    def __init__(self, rejection_code: str, explanation: str = "") -> None:
        super().__init__(rejection_code)
        self.rejection_code = rejection_code
        self.explanation = explanation


class ExecutionTimeout(TurnframeError):
    """No answer in time: the command may or may not have been applied (an unknown outcome)."""

    code = codes.EXECUTION_TIMEOUT


class ExecutionFailed(TurnframeError):
    """The executor failed for another reason; nothing was applied."""

    code = codes.EXECUTION_FAILED


class OutcomeUntold(TurnframeError):
    """The executor cannot tell (now, or ever) what became of a command: its outcome stays
    unknown. What `Executor.outcome` raises unless the executor overrides it."""

    code = codes.EXECUTION_OUTCOME_UNTOLD


class WorkflowExecutor(Protocol):
    """Applies command batches to the domain's own state.

    Contract: idempotent on each envelope's idempotency key (a repeated key returns the original
    result and applies nothing); every envelope's expected revision is checked (a mismatch raises
    `RevisionConflict`); a refusal raises `ExecutionRejected`; a timeout raises `ExecutionTimeout`.
    A batch applies all of its commands or none.

    Optionally, `async def outcome(self, idempotency_key: str) -> ExecutionResult | None`: what
    became of one command, asked by recovery to settle an unknown outcome: its result (the
    events it produced) when it took effect, None when it did not and never will. Raise when it
    cannot tell yet; without the method unknown outcomes stay unknown.
    """

    async def execute(self, batch: CommandBatch) -> ExecutionResult: ...


class Executor(ABC):
    """The base class an adopter's executor subclasses; the contract is `WorkflowExecutor`'s."""

    @abstractmethod
    async def execute(self, batch: CommandBatch) -> ExecutionResult:
        """Apply the batch (all or none, idempotent per key) and report what it committed."""

    async def outcome(self, idempotency_key: str) -> ExecutionResult | None:
        """What became of one command, asked by recovery to settle an unknown outcome: its result
        when it took effect, None when it did not and never will. Raise when it cannot tell yet;
        by default it never can (`OutcomeUntold`), so unknown outcomes stay unknown."""
        raise OutcomeUntold("this executor does not tell what became of a command")


class TransactionalExecutor(Executor):
    """An executor whose writes live in the store's own database (decision 0029). A click-only
    turn without a narrator then runs in ONE store transaction: accepted, journaled, executed
    through `execute_in` on that transaction's driver connection, committed and delivered
    together, or (when anything raises) not at all. `execute` still runs a batch in a
    transaction of its own (recovery, text turns, stores of another database).

    Contract beyond `WorkflowExecutor`'s: `execute_in` writes only through `connection` (a
    `psycopg.AsyncConnection` on PostgreSQL, an `aiosqlite.Connection` on SQLite), never begins,
    commits or rolls back; the runtime runs it behind a savepoint, so a typed refusal undoes
    its partial writes. `load_in` reads a case's state through the same connection (the reply
    shows the state this transaction wrote; the directory still authorizes)."""

    @abstractmethod
    async def execute_in(self, connection: Any, batch: CommandBatch) -> ExecutionResult:
        """Apply the batch inside the caller's open transaction on `connection`."""

    @abstractmethod
    async def load_in(self, connection: Any, account_id: str, case: CaseKey) -> LoadedCase:
        """The case's state and revision as the open transaction on `connection` sees it."""


class _StructuralExecutor(Executor):
    """A `WorkflowExecutor` seen as an `Executor`: calls go to it; without its own `outcome`
    it answers as `Executor` does."""

    def __init__(self, executor: WorkflowExecutor) -> None:
        self.executor = executor

    async def execute(self, batch: CommandBatch) -> ExecutionResult:
        return await self.executor.execute(batch)

    async def outcome(self, idempotency_key: str) -> ExecutionResult | None:
        ask = getattr(self.executor, "outcome", None)
        if not callable(ask):
            return await super().outcome(idempotency_key)
        answer: ExecutionResult | None = await ask(idempotency_key)
        return answer


def as_executor(executor: Executor | WorkflowExecutor) -> Executor:
    """`executor` itself when it is an `Executor`; else an `Executor` that delegates to it (its
    `outcome` when it has one). The one place that looks at what an executor object has."""
    if isinstance(executor, Executor):
        return executor
    return _StructuralExecutor(executor)


class Interpreter(Protocol):
    """Reads a user's message into a proposal. It sees only the brief: opaque handles, the
    operations on offer and the card on screen; never database ids and never a write tool."""

    async def understand(self, brief: Brief) -> Understanding: ...


class TransitionRequest(FrozenModel):
    """What the narrator may say in the transition: these facts and nothing else.
    `forbidden_claims` are the claim classes nothing in this turn backs; `findings` say why the
    previous draft was refused.

    Structured narration (the default) reads `refs` (what a move may name: this turn's
    receipts, notices and cards by block id, its facts as `fact.<n>`, open obligations as
    `obligation.<n>`, operations on offer as `operation.<n>`), `moves` (the moves offered here)
    and `variants` (how many phrasings each move has, by move name)."""

    locale: NonEmptyStr
    allowed_facts: tuple[NarratableFact, ...] = ()
    receipt_titles: tuple[str, ...] = ()
    notice_texts: tuple[str, ...] = ()
    card_title: str | None = None
    ask: str | None = None
    forbidden_claims: tuple[ClaimClass, ...] = ()
    findings: tuple[str, ...] = ()
    refs: tuple[Referable, ...] = ()
    moves: tuple[MoveKind, ...] = ()
    variants: Mapping[str, int] = Field(default_factory=dict)


class AnswerRequest(FrozenModel):
    """One question, with the facts its answer may rest on (and, as for a transition, the claim
    classes it may not make, why a previous draft was refused, and what moves may name)."""

    locale: NonEmptyStr
    question_id: NonEmptyStr
    question: str
    basis: AnswerBasis
    allowed_facts: tuple[NarratableFact, ...] = ()
    forbidden_claims: tuple[ClaimClass, ...] = ()
    findings: tuple[str, ...] = ()
    refs: tuple[Referable, ...] = ()
    moves: tuple[MoveKind, ...] = ()
    variants: Mapping[str, int] = Field(default_factory=dict)


class ReviewRequest(FrozenModel):
    """One model-written block to review, with everything the turn lets it state."""

    kind: Literal["answer", "transition"]
    locale: NonEmptyStr
    text: str
    allowed_facts: tuple[NarratableFact, ...] = ()
    receipt_titles: tuple[str, ...] = ()
    notice_texts: tuple[str, ...] = ()
    card_title: str | None = None
    #: the question an answer answers
    question: str | None = None
    forbidden_claims: tuple[ClaimClass, ...] = ()


class ReviewVerdict(FrozenModel):
    passed: bool
    findings: tuple[str, ...] = ()


class Narrator(Protocol):
    """Writes the prose around the server's blocks. Its output is parsed like any model output.

    Structured narration (the default): a draft is moves, `{"kind": "transition", "moves":
    [{"move": "introduce", "ref": "<block id>", "variant": 1}, ...]}` (an answer adds its
    `question_id`), chosen from the request's `moves` and naming only its `refs`; the server
    renders them. Free narration: a draft is text citing only allowed facts, reviewed by a
    `ClaimReviewer`, never by the narrator itself; the wording guard runs on both."""

    async def transition(self, request: TransitionRequest) -> Mapping[str, Any] | str:
        """A transition draft: `{"kind": "transition", "moves": [...]}` (free: `"text"` and
        `"facts_used"` instead of moves)."""
        ...

    async def answer(self, request: AnswerRequest) -> Mapping[str, Any] | str:
        """An answer draft: `{"kind": "answer", "question_id": ..., "moves": [...]}` (free:
        `"text"`, and optionally `"facts_used"`, `"status"`, `"basis"`)."""
        ...


class ClaimReviewer(Protocol):
    """Reviews every model-written block of free narration before it may be shown,
    independently of the narrator that wrote it: does the text state only what the request
    holds, and claim nothing of `forbidden_claims`? A failed review gets one rewrite with its
    findings, then server copy. The deterministic wording guard runs after it whatever it
    answers. Free narration needs one passed as `TurnRuntime(reviewer=...)` (a narrator's own
    `reviewer` attribute does not count); structured narration shows nothing a model wrote and
    calls none."""

    async def review(self, request: ReviewRequest) -> ReviewVerdict: ...
