"""Store-level records: what the stores keep beside the core types, and the commit bundle.

Every record is a frozen pydantic model with snake_case keys and integer-millisecond timestamps
(DESIGN §3). Records are shared values: treat their dict payloads as read-only.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import ConfigDict, Field, model_validator

from turnframe_core.canonical import CanonicalJsonError, Digest, canonical_json
from turnframe_core.cases import CaseKey, CaseRef, WorkflowKey
from turnframe_core.commands import CommandEnvelope, CommandOrigin
from turnframe_core.events import DomainEvent
from turnframe_core.ids import (
    AccountId,
    CommandId,
    ConversationId,
    EventId,
    InteractionId,
    OptionId,
    OutboxId,
    TurnId,
)
from turnframe_core.interactions import Interaction, InteractionStatus, can_transition
from turnframe_core.model import Remembering
from turnframe_core.replay import (
    AwaitingConfirmationOutcome,
    CommandOutcome,
    CommittedOutcome,
    IdempotentReplayOutcome,
    OutcomeUnknown,
    ReplayRecord,
    TurnPhase,
)
from turnframe_core.stream import StreamEvent, is_terminal
from turnframe_core.turn import AssistantTurn, TurnInput
from turnframe_store.errors import InvalidRecord

__all__ = [
    "CaseInvalidation",
    "CommitBundle",
    "CommitResult",
    "ConversationRecord",
    "EventCursor",
    "EventPage",
    "FeedEntry",
    "Fresh",
    "InteractionFinish",
    "JournalAdmission",
    "JournalCompletion",
    "JournalEntry",
    "JournalStatus",
    "OUTBOX_CLAIM_EXPIRED",
    "OutboxEntry",
    "OutboxStatus",
    "PhaseMarker",
    "Replay",
    "TimerRecord",
    "TimerStatus",
    "UserTurnRecord",
    "stream_event_problems",
]

#: Integer milliseconds since the Unix epoch.
Millis = Annotated[int, Field(ge=0)]
NonEmptyStr = Annotated[str, Field(min_length=1)]


class _Record(Remembering):
    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


# --- conversations and turns --------------------------------------------------------------------


class ConversationRecord(_Record):
    account_id: AccountId
    conversation_id: ConversationId
    created_at: Millis


class UserTurnRecord(_Record):
    """A user turn as received; its `input` belongs to the same account, conversation and turn."""

    account_id: AccountId
    conversation_id: ConversationId
    turn_id: TurnId
    received_at: Millis
    input: TurnInput

    @model_validator(mode="after")
    def _input_matches(self) -> UserTurnRecord:
        if self.input.account_id != self.account_id:
            raise ValueError("input.account_id differs from account_id")
        if self.input.conversation_id != self.conversation_id:
            raise ValueError("input.conversation_id differs from conversation_id")
        if self.input.turn_id is not None and self.input.turn_id != self.turn_id:
            raise ValueError("input.turn_id differs from turn_id")
        return self


class PhaseMarker(_Record):
    """How far one turn got (the crash-recovery marker), stamped by the store clock."""

    account_id: AccountId
    conversation_id: ConversationId
    turn_id: TurnId
    phase: TurnPhase
    updated_at: Millis


class FeedEntry(_Record):
    """One link of a conversation's audit chain as its feed reads it: `position` (from 0, in
    commit order), the turn whose final record it links, and that turn's stored assistant turn
    exactly as stored (None: the record is final without a stored reply, e.g. a failed turn)."""

    position: Annotated[int, Field(ge=0)]
    turn_id: TurnId
    turn: AssistantTurn | None


# --- command journal ----------------------------------------------------------------------------


class JournalStatus(StrEnum):
    PENDING = "pending"
    #: Journaled with a confirmation card; runs only once the card is confirmed. Crash recovery
    #: never resumes it.
    AWAITING_CONFIRMATION = "awaiting_confirmation"
    EXECUTING = "executing"
    COMMITTED = "committed"
    FAILED = "failed"
    OUTCOME_UNKNOWN = "outcome_unknown"

    @property
    def is_terminal(self) -> bool:
        return self in (JournalStatus.COMMITTED, JournalStatus.FAILED)

    @property
    def is_unsettled(self) -> bool:
        """Not final and not waiting on the user: what recovery resumes or reconciles."""
        return self in (
            JournalStatus.PENDING,
            JournalStatus.EXECUTING,
            JournalStatus.OUTCOME_UNKNOWN,
        )

    def can_move_to(self, target: JournalStatus) -> bool:
        """The journal's status machine (a repeat of a settled status is not a move)."""
        return target in _JOURNAL_MOVES.get(self, frozenset())

    @classmethod
    def for_outcome(cls, outcome: CommandOutcome) -> JournalStatus:
        """The status an outcome settles an entry into."""
        if isinstance(outcome, CommittedOutcome | IdempotentReplayOutcome):
            return cls.COMMITTED
        if isinstance(outcome, OutcomeUnknown):
            return cls.OUTCOME_UNKNOWN
        if isinstance(outcome, AwaitingConfirmationOutcome):
            return cls.AWAITING_CONFIRMATION
        return cls.FAILED


_SETTLED = frozenset({JournalStatus.COMMITTED, JournalStatus.FAILED, JournalStatus.OUTCOME_UNKNOWN})
_JOURNAL_MOVES: dict[JournalStatus, frozenset[JournalStatus]] = {
    JournalStatus.PENDING: _SETTLED | {JournalStatus.EXECUTING},
    JournalStatus.AWAITING_CONFIRMATION: _SETTLED | {JournalStatus.EXECUTING},
    JournalStatus.EXECUTING: _SETTLED,
    JournalStatus.OUTCOME_UNKNOWN: frozenset({JournalStatus.COMMITTED, JournalStatus.FAILED}),
}


class JournalEntry(_Record):
    """One admitted command and its persisted outcome. The command part never changes."""

    account_id: AccountId
    command_id: CommandId
    idempotency_key: Digest
    turn_id: TurnId
    case_ref: CaseRef
    command_type: NonEmptyStr
    payload: dict[str, Any] = Field(default_factory=dict)
    origin: CommandOrigin
    status: JournalStatus = JournalStatus.PENDING
    outcome: CommandOutcome | None = None
    created_at: Millis
    completed_at: Millis | None = None

    @model_validator(mode="after")
    def _outcome_matches_status(self) -> JournalEntry:
        if self.outcome is None:
            if self.status in _SETTLED:
                raise ValueError(f"a {self.status.value} entry records its outcome")
        elif JournalStatus.for_outcome(self.outcome) is not self.status:
            raise ValueError(f"a {self.outcome.kind} outcome does not fit a {self.status.value}")
        if (self.completed_at is None) == (self.status in _SETTLED):
            raise ValueError("completed_at is set exactly when an outcome settles the entry")
        return self

    @classmethod
    def from_envelope(
        cls,
        envelope: CommandEnvelope,
        *,
        now: int,
        status: JournalStatus = JournalStatus.PENDING,
    ) -> JournalEntry:
        """A new entry for `envelope`, pending (or awaiting confirmation), created at `now`."""
        return cls(
            account_id=envelope.account_id,
            command_id=envelope.command_id,
            idempotency_key=envelope.idempotency_key,
            turn_id=envelope.turn_id,
            case_ref=envelope.case_ref,
            command_type=envelope.command_type,
            payload=envelope.payload,
            origin=envelope.origin,
            status=status,
            created_at=now,
        )

    def same_command(self, other: JournalEntry) -> bool:
        """Same case (with its expected revision), type and payload: what a reused key matches."""
        return (
            self.case_ref == other.case_ref
            and self.command_type == other.command_type
            and self.payload == other.payload
        )

    def settled(self, outcome: CommandOutcome, *, at: int) -> JournalEntry:
        """This entry with `outcome` recorded (no status-machine check: the store does that)."""
        return self.model_copy(
            update={
                "status": JournalStatus.for_outcome(outcome),
                "outcome": outcome,
                "completed_at": at,
            }
        )


class Fresh(_Record):
    """Admission won: this caller executes the command."""

    kind: Literal["fresh"] = "fresh"
    entry: JournalEntry


class Replay(_Record):
    """The key was admitted before: `entry` is the stored entry; never execute it again here."""

    kind: Literal["replay"] = "replay"
    entry: JournalEntry


JournalAdmission = Annotated[Fresh | Replay, Field(discriminator="kind")]


# --- outbox -------------------------------------------------------------------------------------


class OutboxStatus(StrEnum):
    PENDING = "pending"
    DISPATCHING = "dispatching"
    #: Sent, answer unknown: settled by reconciliation, never blindly resent.
    OUTCOME_UNKNOWN = "outcome_unknown"
    COMPLETED = "completed"
    FAILED = "failed"

    @property
    def is_terminal(self) -> bool:
        return self in (OutboxStatus.COMPLETED, OutboxStatus.FAILED)


#: What the reaper records as the last failure of a row whose attempt had begun: its outcome was
#: never recorded, so the next attempt asks the destination before it sends.
OUTBOX_CLAIM_EXPIRED: Final = "turnframe.outbox.claim_expired"


class OutboxEntry(_Record):
    """One external side effect awaiting dispatch. A system queue row: no account column."""

    outbox_id: OutboxId
    command_id: CommandId
    destination: NonEmptyStr
    payload: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: NonEmptyStr
    status: OutboxStatus = OutboxStatus.PENDING
    attempt_count: int = Field(default=0, ge=0)
    next_attempt_at: Millis | None = None
    created_at: Millis
    completed_at: Millis | None = None
    claim_worker_id: str | None = None
    claim_taken_at: Millis | None = None
    #: when an actor began this claim's attempt (it may have reached the destination since)
    dispatch_started_at: Millis | None = None
    last_failure: str | None = None
    remote_ref: str | None = None

    @model_validator(mode="after")
    def _lifecycle_is_consistent(self) -> OutboxEntry:
        claimed = self.claim_worker_id is not None
        if claimed != (self.claim_taken_at is not None):
            raise ValueError("claim_worker_id and claim_taken_at are set together")
        if claimed != (self.status is OutboxStatus.DISPATCHING):
            raise ValueError("a row carries a claim exactly while it is dispatching")
        if self.dispatch_started_at is not None and not claimed:
            raise ValueError("only a claimed row has a dispatch under way")
        if (self.completed_at is not None) != self.status.is_terminal:
            raise ValueError("completed_at is set exactly when the row is completed or failed")
        return self


# --- timers -------------------------------------------------------------------------------------


class TimerStatus(StrEnum):
    PENDING = "pending"
    #: Leased to a worker since `claimed_at`; claimed again by anyone once the lease expires.
    CLAIMED = "claimed"
    FIRED = "fired"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in (TimerStatus.FIRED, TimerStatus.CANCELLED)


class TimerRecord(_Record):
    """An event to fire at `due_at`, stored with its conversation. `event` is the canonical JSON
    of a JSON object, opaque to the store; the lifecycle fields move (pending -> claimed ->
    fired, or cancelled before it fired)."""

    account_id: AccountId
    conversation_id: ConversationId
    timer_id: NonEmptyStr
    due_at: Millis
    event: NonEmptyStr
    status: TimerStatus = TimerStatus.PENDING
    worker_id: str | None = None
    claimed_at: Millis | None = None
    fired_at: Millis | None = None
    created_at: Millis

    @model_validator(mode="after")
    def _lifecycle_is_consistent(self) -> TimerRecord:
        if not _canonical_object(self.event):
            raise ValueError("event is the canonical JSON of a JSON object")
        if (self.worker_id is None) != (self.claimed_at is None):
            raise ValueError("worker_id and claimed_at are set together")
        if self.worker_id == "":
            raise ValueError("a claim names its worker")
        if self.status is TimerStatus.PENDING and self.worker_id is not None:
            raise ValueError("a pending timer carries no claim")
        if self.status in (TimerStatus.CLAIMED, TimerStatus.FIRED) and self.worker_id is None:
            raise ValueError(f"a {self.status.value} timer carries its claim")
        if (self.fired_at is not None) != (self.status is TimerStatus.FIRED):
            raise ValueError("fired_at is set exactly when the timer fired")
        return self

    def same_schedule(self, other: TimerRecord) -> bool:
        """Same conversation, due time and event (`created_at` aside): what scheduling the same
        timer again must match."""
        return (
            self.account_id == other.account_id
            and self.conversation_id == other.conversation_id
            and self.timer_id == other.timer_id
            and self.due_at == other.due_at
            and self.event == other.event
        )


def _canonical_object(text: str) -> bool:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    if not isinstance(value, dict):
        return False
    try:
        return canonical_json(value) == text
    except CanonicalJsonError:
        return False


# --- event ledger -------------------------------------------------------------------------------


class EventCursor(_Record):
    """A reader's position in one account's event stream: the last sequence it has seen."""

    START: ClassVar[EventCursor]

    sequence: int = Field(default=0, ge=0)


EventCursor.START = EventCursor()


class EventPage(_Record):
    """Events after a cursor, in sequence order; an empty page leaves the cursor unchanged."""

    events: tuple[DomainEvent, ...]
    next_cursor: EventCursor

    @property
    def caught_up(self) -> bool:
        return not self.events


# --- commit bundle ------------------------------------------------------------------------------

#: Where a resolving card may go: what a finish settles it into (the core's status machine).
FINISH_STATUSES = frozenset(
    status for status in InteractionStatus if can_transition(InteractionStatus.RESOLVING, status)
)


class JournalCompletion(_Record):
    command_id: CommandId
    outcome: CommandOutcome


class InteractionFinish(_Record):
    """Settle a resolving card: resolved, failed, or released back to active."""

    interaction_id: InteractionId
    status: InteractionStatus
    option_id: OptionId | None = None
    event_ids: tuple[EventId, ...] = ()

    @model_validator(mode="after")
    def _settles(self) -> InteractionFinish:
        if self.status not in FINISH_STATUSES:
            raise ValueError("a finish settles a card as resolved, failed or active")
        return self


class CaseInvalidation(_Record):
    """The case is now at `current_revision`: its cards bound to another revision go stale."""

    workflow: WorkflowKey
    case_id: NonEmptyStr
    current_revision: int = Field(ge=0)

    @property
    def case_key(self) -> CaseKey:
        return CaseKey(workflow=self.workflow, case_id=self.case_id)


class CommitBundle(_Record):
    """What one durable point of a turn writes, applied all-or-nothing in this field order.

    - `user_turn`: the turn as received (its conversation is created if missing, its marker set
      to `received`);
    - `journal_admissions`: this turn's commands, admitted as `journal.begin` would;
    - `journal_starts`: commands moved to `executing`;
    - `journal_completions` … `outbox`: what the turn's commands did;
    - `assistant_turn`: the exact turn as returned, stored once;
    - `replay`, `phase`: the turn's replay record and phase marker;
    - `stream_events`: what the turn's stream publishes once this commits, logged with
      `append_stream_events`' rules (after the assistant turn, so `turn.completed` is never
      logged for a turn that is not stored).
    """

    account_id: AccountId
    conversation_id: ConversationId
    turn_id: TurnId
    user_turn: UserTurnRecord | None = None
    journal_admissions: tuple[JournalEntry, ...] = ()
    journal_starts: tuple[CommandId, ...] = ()
    journal_completions: tuple[JournalCompletion, ...] = ()
    events: tuple[DomainEvent, ...] = ()
    interaction_finishes: tuple[InteractionFinish, ...] = ()
    invalidations: tuple[CaseInvalidation, ...] = ()
    interaction_inserts: tuple[Interaction, ...] = ()
    outbox: tuple[OutboxEntry, ...] = ()
    assistant_turn: AssistantTurn | None = None
    replay: ReplayRecord | None = None
    phase: TurnPhase | None = None
    stream_events: tuple[StreamEvent, ...] = ()

    def problems(self) -> tuple[str, ...]:
        """Why this bundle cannot be committed, judged on its own (empty: it can be tried)."""
        found: list[str] = []
        if self.is_empty:
            found.append("the bundle writes nothing")
        user = self.user_turn
        if user is not None and (
            user.account_id != self.account_id
            or user.conversation_id != self.conversation_id
            or user.turn_id != self.turn_id
        ):
            found.append("the user turn belongs to another turn")
        for entry in self.journal_admissions:
            if entry.account_id != self.account_id or entry.turn_id != self.turn_id:
                found.append("an admitted command belongs to another turn")
        if _repeats(e.command_id for e in self.journal_admissions):
            found.append("a command is admitted twice")
        if _repeats(self.journal_starts):
            found.append("a command is started twice")
        if _repeats(c.command_id for c in self.journal_completions):
            found.append("a command is completed twice")
        if any(
            JournalStatus.for_outcome(c.outcome) not in _SETTLED for c in self.journal_completions
        ):
            found.append("a journal completion does not settle its command")
        if any(e.account_id != self.account_id for e in self.events):
            found.append("an event belongs to another account")
        if any(e.sequence is not None for e in self.events):
            found.append("an event already has a sequence")
        if _repeats(e.event_id for e in self.events):
            found.append("an event id repeats")
        if _repeats(f.interaction_id for f in self.interaction_finishes):
            found.append("a card is finished twice")
        for card in self.interaction_inserts:
            if card.account_id != self.account_id:
                found.append("a card belongs to another account")
            if card.conversation_id != self.conversation_id:
                found.append("a card belongs to another conversation")
            if card.created_by_turn != self.turn_id:
                found.append("a card was created by another turn")
            if card.status is not InteractionStatus.ACTIVE:
                found.append("a new card is not active")
        if _repeats(c.interaction_id for c in self.interaction_inserts):
            found.append("a card is inserted twice")
        if any(row.status is not OutboxStatus.PENDING for row in self.outbox):
            found.append("an outbox row is not pending")
        if _repeats(row.outbox_id for row in self.outbox):
            found.append("an outbox row repeats")
        if self.replay is not None and (
            self.replay.account_id != self.account_id
            or self.replay.conversation_id != self.conversation_id
            or self.replay.turn_id != self.turn_id
        ):
            found.append("the replay record belongs to another turn")
        answer = self.assistant_turn
        if answer is not None and (
            answer.account_id != self.account_id
            or answer.conversation_id != self.conversation_id
            or answer.turn_id != self.turn_id
        ):
            found.append("the assistant turn belongs to another turn")
        found.extend(stream_event_problems(self.stream_events, self.turn_id))
        return tuple(dict.fromkeys(found))

    def require_valid(self) -> None:
        """Raise `InvalidRecord` naming the first problem; every store calls this first."""
        found = self.problems()
        if found:
            raise InvalidRecord(f"invalid commit bundle: {found[0]}")

    @property
    def is_empty(self) -> bool:
        return not (
            self.user_turn is not None
            or self.journal_admissions
            or self.journal_starts
            or self.assistant_turn is not None
            or self.journal_completions
            or self.events
            or self.interaction_finishes
            or self.invalidations
            or self.interaction_inserts
            or self.outbox
            or self.replay is not None
            or self.phase is not None
            or bool(self.stream_events)
        )


def stream_event_problems(events: Iterable[StreamEvent], turn_id: str | None = None) -> list[str]:
    """Why a list of stream events cannot be appended as one, judged on its own (empty: fine):
    one turn, sequences running on by one, a terminal event only last."""
    found: list[str] = []
    listed = list(events)
    turn = turn_id if turn_id is not None else (listed[0].turn_id if listed else None)
    if any(e.turn_id != turn for e in listed):
        found.append("a stream event belongs to another turn")
    if any(b.sequence != a.sequence + 1 for a, b in itertools.pairwise(listed)):
        found.append("stream event sequences do not run on by one")
    if any(e.sequence < 1 for e in listed):
        found.append("a stream event sequence is below 1")
    if any(is_terminal(e) for e in listed[:-1]):
        found.append("a terminal stream event is not the last")
    return found


class CommitResult(_Record):
    """What a commit assigned: the journal's answer to each admission (in order), the events
    as the ledger stored them (sequences assigned; inside an open transaction a store may leave
    them unset until COMMIT, decision 0027), the cards it invalidated."""

    admissions: tuple[JournalAdmission, ...] = ()
    events: tuple[DomainEvent, ...] = ()
    invalidated: tuple[InteractionId, ...] = ()


def _repeats(values: Iterable[str]) -> bool:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            return True
        seen.add(value)
    return False
