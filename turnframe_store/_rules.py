"""Every decision a store makes, written once; `MemoryStores` and `SqlStores` both apply it.

A backend supplies storage: how a record is found, kept and moved. What a store accepts, and
which move follows which, is decided here:

- argument rules: a limit, a time, a revision, an id or key (`limit`, `instant`, `text`, …);
- status sets, derived from the enums and the status machines (core's `can_transition` for cards,
  `JournalStatus.can_move_to` for the journal, the outbox machine below);
- one judge per write. A judge looks at the stored record and the request and answers
  `Verdict.MOVE` (write it) or `Verdict.REPEAT` (the same settlement again: accepted, nothing
  written), or raises the store error (nothing written).

SqlStores states the status sets in its compare-and-swap WHERE clauses (taking them from here),
and when an UPDATE moves nothing it asks the same judge about the row it reads back.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final, Protocol, TypeVar, get_args

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError

from turnframe_core.canonical import CanonicalJsonError, canonical_json
from turnframe_core.cases import CaseKey, CaseRef
from turnframe_core.derive import derive_replay_token
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction, InteractionStatus, can_transition
from turnframe_core.replay import CommandOutcome, ReplayRecord, TurnPhase
from turnframe_core.stream import StreamEvent, is_terminal, parse_stream_event
from turnframe_core.turn import AssistantTurn
from turnframe_store.errors import Conflict, Corrupt, InvalidRecord, NotFound, StoreError
from turnframe_store.faults import FaultPoint
from turnframe_store.records import (
    _FINISH_STATUSES,
    CaseInvalidation,
    CommitBundle,
    ConversationRecord,
    JournalEntry,
    JournalStatus,
    OutboxEntry,
    OutboxStatus,
    PhaseMarker,
    Replay,
    UserTurnRecord,
    stream_event_problems,
)

T = TypeVar("T")


class Verdict(Enum):
    """What a judge allows: the move, or an accepted repeat that writes nothing."""

    MOVE = "move"
    REPEAT = "repeat"


def found(record: T | None) -> T:
    """The record, or `NotFound` (a missing record and another account's look alike)."""
    if record is None:
        raise NotFound()
    return record


# --- arguments ----------------------------------------------------------------------------------

#: The most records one call may ask for. A larger page is a caller's bug; backends would meet it
#: as an integer overflow, each in its own way.
MAX_LIMIT: Final = 100_000
#: The last millisecond a store keeps, 9999-12-31T23:59:59.999Z: Python's `datetime`, and with it
#: the PostgreSQL backend, ends there.
MAX_MILLIS: Final = 253_402_300_799_999
#: Revisions and event sequences are 64-bit signed integers in every store.
MAX_INTEGER: Final = 2**63 - 1


def _whole(value: object, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidRecord(f"{what} is a whole number from {low} to {high}")
    return value


def limit(value: object) -> int:
    """A page size: an int (never a bool) from 1 to `MAX_LIMIT`."""
    return _whole(value, 1, MAX_LIMIT, "a limit")


def instant(value: object) -> int:
    """A time argument: integer milliseconds from the epoch to `MAX_MILLIS`."""
    return _whole(value, 0, MAX_MILLIS, "a time")


def whole(value: object) -> int:
    """A revision or a sequence: an int (never a bool) from 0 to `MAX_INTEGER`."""
    return _whole(value, 0, MAX_INTEGER, "a revision or sequence")


def after_sequence(value: object) -> int:
    """Where a read of a stream resumes: an int (never a bool) from -1 to `MAX_INTEGER`."""
    return _whole(value, -1, MAX_INTEGER, "a sequence to read after")


def text(*values: str | None) -> None:
    """Each id or key is text every store can keep and compare: a str with no NUL (PostgreSQL
    refuses it) and no lone surrogate (no UTF-8 encoder takes one). None (an absent optional
    value) passes."""
    for value in values:
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidRecord("an id or key is a string")
        if "\x00" in value or not (value.isascii() or _encodes(value)):
            raise InvalidRecord("an id or key holds a NUL or a lone surrogate")


def _encodes(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def case(key: CaseKey | CaseRef | CaseInvalidation) -> None:
    """A case's workflow and id follow `text` (read as fields: a record built without
    validation may hold what a `CaseKey` refuses)."""
    text(key.workflow, key.case_id)


def record_keys(record: Interaction | JournalEntry | DomainEvent | OutboxEntry) -> None:
    """The free-text keys a record brings into columns of their own (case ids, types,
    destinations) follow `text`; prefixed ids cannot break it."""
    if isinstance(record, Interaction):
        case(record.case_ref)
    elif isinstance(record, JournalEntry):
        case(record.case_ref)
        text(record.command_type)
    elif isinstance(record, DomainEvent):
        text(record.workflow, record.case_id, record.event_type)
    else:
        text(
            record.destination,
            record.idempotency_key,
            record.claim_worker_id,
            record.last_failure,
            record.remote_ref,
        )


def bundle_keys(bundle: CommitBundle) -> None:
    """`record_keys` for every record a bundle writes, and the rules of its single items."""
    for entry in bundle.journal_admissions:
        admissible(entry)
    text(*bundle.journal_starts)
    if bundle.assistant_turn is not None and not bundle.assistant_turn.status.is_terminal:
        raise InvalidRecord("only a terminal assistant turn is stored")
    records: tuple[DomainEvent | Interaction | JournalEntry | OutboxEntry, ...] = (
        *bundle.journal_admissions,
        *bundle.events,
        *bundle.interaction_inserts,
        *bundle.outbox,
    )
    for record in records:
        record_keys(record)
    for invalidation in bundle.invalidations:
        case(invalidation)
    if bundle.stream_events:
        stream_entries(bundle.stream_events)


def turn_phase(value: str) -> TurnPhase:
    try:
        return TurnPhase(value)
    except ValueError:
        raise InvalidRecord("not a turn phase") from None


def settlement(value: str) -> InteractionStatus:
    """The status a finish settles a card into: one a resolving card may move to."""
    try:
        status = InteractionStatus(value)
    except ValueError:
        raise InvalidRecord("not a card status") from None
    if status not in SETTLEMENTS:
        raise InvalidRecord("a finish settles a card as resolved, failed or active")
    return status


def worker(worker_id: str) -> None:
    text(worker_id)
    if not worker_id:
        raise InvalidRecord("a claim names its worker")


def reason(value: str) -> None:
    text(value)
    if not value:
        raise InvalidRecord("a failure names its reason")


# --- conversations, turns and the phase marker --------------------------------------------------

TERMINAL_PHASES: Final = frozenset(phase for phase in TurnPhase if phase.is_terminal)


def new_conversation(account_id: str, conversation_id: str, at: int) -> ConversationRecord:
    try:
        return ConversationRecord(
            account_id=account_id, conversation_id=conversation_id, created_at=at
        )
    except ValidationError:
        raise InvalidRecord("not a well-formed account or conversation id") from None


def own_turn(account_id: str, turn: AssistantTurn) -> None:
    if turn.account_id != account_id:
        raise InvalidRecord("the assistant turn belongs to another account")


def answer_text(turn: AssistantTurn) -> str:
    """The canonical text a store keeps for an assistant turn: only a terminal one is kept."""
    if not turn.status.is_terminal:
        raise InvalidRecord("only a terminal assistant turn is stored")
    try:
        return turn.to_stored_json()
    except CanonicalJsonError:
        raise InvalidRecord("the assistant turn has no canonical form") from None


def answer(turn: AssistantTurn, conversation_id: str | None, stored: str | None) -> str | None:
    """Judge storing `turn` beside its user turn (of `conversation_id`, None when there is
    none) that already holds `stored`: the text to write, or None for the same turn again."""
    if conversation_id is None:
        raise NotFound()
    if turn.conversation_id != conversation_id:
        raise InvalidRecord("the assistant turn belongs to another conversation")
    written = answer_text(turn)
    if stored is None:
        return written
    if stored != written:
        raise Conflict("the assistant turn is already stored with other content")
    return None


def reload_answer(text: str) -> AssistantTurn:
    """The assistant turn a store kept as `text`, which must reload byte for byte. A turn of
    another schema major raises `UnsupportedSchemaVersion` unchanged: it is not corrupt."""
    try:
        turn = AssistantTurn.from_stored_json(text)
    except ValidationError:
        raise Corrupt("the stored assistant turn does not read back") from None
    if turn.to_stored_json() != text:
        raise Corrupt("the stored assistant turn does not reload byte for byte")
    return turn


def move_phase(marker: PhaseMarker, phase: TurnPhase) -> Verdict:
    """A marker moves anywhere until its phase is terminal; the same phase again is a repeat."""
    if marker.phase is phase:
        return Verdict.REPEAT
    if marker.phase in TERMINAL_PHASES:
        raise Conflict("the turn's phase is final")
    return Verdict.MOVE


# --- stream events ------------------------------------------------------------------------------


_STREAM_EVENT_TYPES: Final = get_args(get_args(StreamEvent)[0])


@dataclass(frozen=True)
class StreamEntry:
    """A stream event as a store logs it: its JSON `text`, and the columns beside it."""

    turn_id: str
    sequence: int
    event_type: str
    terminal: bool
    at: int
    text: str


def stream_entries(events: Sequence[StreamEvent]) -> tuple[StreamEntry, ...]:
    """The entries a batch of stream events is logged as, judged on its own: a non-empty list of
    one turn's events, sequences running on by one from 1 up to `MAX_INTEGER`, times up to
    `MAX_MILLIS`, a terminal event only last, each with a JSON form. Else `InvalidRecord`."""
    listed = tuple(events)
    if not listed:
        raise InvalidRecord("no stream events to append")
    if not all(isinstance(event, _STREAM_EVENT_TYPES) for event in listed):
        raise InvalidRecord("not a stream event")
    for event in listed:
        _whole(event.sequence, 1, MAX_INTEGER, "a stream event sequence")
        instant(event.at)
    problems = stream_event_problems(listed)
    if problems:
        raise InvalidRecord(problems[0])
    text(listed[0].turn_id)
    entries: list[StreamEntry] = []
    for event in listed:
        # pydantic's own JSON (fields in model order): several times faster than the canonical
        # form for events that carry a whole turn, and as stable for one model; an event is
        # compared with its repeat only as written by the same code.
        try:
            written = event.model_dump_json()
            if "NaN" in written or "Infinity" in written:  # a number JSON has not?
                canonical_json(event)  # raises for one; a string that says so is fine
        except (PydanticSerializationError, CanonicalJsonError, ValueError):
            raise InvalidRecord("the stream event has no JSON form") from None
        if not (written.isascii() or _encodes(written)):
            raise InvalidRecord("the stream event holds a lone surrogate")
        entries.append(
            StreamEntry(
                event.turn_id, event.sequence, event.type, is_terminal(event), event.at, written
            )
        )
    return tuple(entries)


def stream_append(batch: Sequence[StreamEntry], logged: Sequence[StreamEntry]) -> int:
    """Judge logging `batch` beside `logged`, the turn's logged entries from the sequence before
    the batch's first to its last (sorted by sequence): how many of the batch's first entries
    are logged already (each must equal the logged one); the rest are new. The first new entry
    comes right after the last logged one (1 for an empty log), never after a terminal one.
    Else `Conflict`."""
    stored = {entry.sequence: entry.text for entry in logged}
    known = 0
    for entry in batch:
        if entry.sequence not in stored:
            break
        if stored[entry.sequence] != entry.text:
            raise Conflict("another stream event is logged at this sequence")
        known += 1
    if known == len(batch):
        return known
    last = logged[-1] if logged else None
    if batch[known].sequence != (last.sequence if last is not None else 0) + 1:
        raise Conflict("the stream event does not follow the last logged one")
    if last is not None and last.terminal:
        raise Conflict("the turn's stream has ended")
    return known


def stream_window(batch: Sequence[StreamEntry]) -> tuple[int, int]:
    """The sequences `stream_append` needs logged entries of (both ends included)."""
    return batch[0].sequence - 1, batch[-1].sequence


def reload_stream_event(stored: str) -> StreamEvent:
    """The stream event a store logged as `stored`."""
    try:
        return parse_stream_event(stored)
    except ValidationError:
        raise Corrupt("a logged stream event does not read back") from None


# --- interactions (cards) -----------------------------------------------------------------------

OPEN_CARD_STATUSES: Final = frozenset(status for status in InteractionStatus if status.is_open)
#: Where a resolving card may go: what a finish settles it into (`InteractionFinish` checks
#: the same set).
SETTLEMENTS: Final = _FINISH_STATUSES
#: The card fields that move; everything else is the card as created and never changes.
CARD_LIFECYCLE: Final = frozenset(
    {"status", "resolved_at", "resolved_option_id", "resolution_event_ids"}
)


@functools.cache
def card_sources(target: InteractionStatus) -> frozenset[InteractionStatus]:
    """The statuses a card may leave for `target` (the core's status machine)."""
    return frozenset(status for status in InteractionStatus if can_transition(status, target))


def new_card(card: Interaction) -> None:
    if card.status is not InteractionStatus.ACTIVE:
        raise InvalidRecord("a new card is active")
    if card.resolved_at is not None or card.resolved_option_id or card.resolution_event_ids:
        raise InvalidRecord("a new card carries no resolution")


def reinsert(stored: Interaction, card: Interaction) -> Interaction:
    """Inserting a stored card's id again: the same card (lifecycle aside) gives the stored one,
    unchanged (never reactivated); another card is `Conflict`."""
    if stored.model_dump(exclude=set(CARD_LIFECYCLE)) == card.model_dump(
        exclude=set(CARD_LIFECYCLE)
    ):
        return stored
    raise Conflict("another card is stored under this id")


def blocking_slot(card: Interaction, holder: str | None) -> None:
    """One open blocking card per case: `holder` is the id of the case's open blocking card."""
    if card.blocking and holder is not None:
        raise Conflict("the case already has an open blocking card")


def replace_holder(holder: Interaction) -> None:
    """Only an active blocking card is replaced (invalidated); one being resolved is not."""
    if holder.status not in card_sources(InteractionStatus.INVALIDATED):
        raise Conflict("the case's blocking card is being resolved")


def offered(card: Interaction, option_id: str | None) -> None:
    if option_id is not None and card.payload.option(option_id) is None:
        raise InvalidRecord("the card does not offer this option")


def claim(card: Interaction, option_id: str) -> Verdict:
    """begin_resolution: one of the card's options, on an active card; a repeat is `Conflict`
    (a card has one winner)."""
    offered(card, option_id)
    if card.status not in card_sources(InteractionStatus.RESOLVING):
        raise Conflict("the card is not active")
    return Verdict.MOVE


def finish(
    card: Interaction,
    status: InteractionStatus,
    option_id: str | None,
    event_ids: tuple[str, ...],
) -> Verdict:
    """Settle a resolving card (with the claimed option, when one is named); the same
    settlement again is a repeat."""
    if card.status in card_sources(status):
        if option_id is not None and option_id != card.resolved_option_id:
            raise Conflict("another option was claimed")
        return Verdict.MOVE
    if card.status is status and (
        status is InteractionStatus.ACTIVE
        or (
            option_id in (None, card.resolved_option_id)
            and (status is InteractionStatus.FAILED or event_ids == card.resolution_event_ids)
        )
    ):
        return Verdict.REPEAT
    raise Conflict("the card is settled otherwise")


def close(card: Interaction, status: InteractionStatus, option_id: str | None) -> Verdict:
    """Decline or dismiss an active card; the same close again is a repeat."""
    if card.status in card_sources(status):
        offered(card, option_id)
        return Verdict.MOVE
    if card.status is status and option_id in (None, card.resolved_option_id):
        return Verdict.REPEAT
    raise Conflict("the card is not active")


def stale(card: Interaction, current_revision: int | None) -> bool:
    """Invalidated when its case moves: an active card bound to another revision (revision-
    independent cards are spared); with no revision (administrative), every active card."""
    if card.status not in card_sources(InteractionStatus.INVALIDATED):
        return False
    if current_revision is None:
        return True
    return not (card.revision_independent or card.bound_revision == current_revision)


def by_creation(card: Interaction) -> tuple[int, str]:
    """The order of a conversation's or a case's cards (and of invalidated ids)."""
    return (card.created_at, card.interaction_id)


def by_expiry(card: Interaction) -> tuple[int, str, str]:
    """The order of the expiry sweep, across accounts."""
    return (card.expires_at or 0, card.account_id, card.interaction_id)


def due_to_expire(card: Interaction, now: int) -> bool:
    return (
        card.status in card_sources(InteractionStatus.EXPIRED)
        and card.expires_at is not None
        and card.expires_at <= now
    )


# --- command journal ----------------------------------------------------------------------------


@functools.cache
def journal_sources(target: JournalStatus) -> frozenset[JournalStatus]:
    """The statuses an entry may leave for `target` (the journal's status machine)."""
    return frozenset(status for status in JournalStatus if status.can_move_to(target))


UNSETTLED_JOURNAL: Final = frozenset(status for status in JournalStatus if status.is_unsettled)
#: An entry is admitted before it runs: in a status that may still start executing.
ADMISSIBLE_JOURNAL: Final = journal_sources(JournalStatus.EXECUTING)
#: Where an executing command may end: the statuses an outcome settles an entry into.
JOURNAL_SETTLEMENTS: Final = frozenset(
    status for status in JournalStatus if JournalStatus.EXECUTING.can_move_to(status)
)


def admissible(entry: JournalEntry) -> None:
    if entry.status not in ADMISSIBLE_JOURNAL:
        raise InvalidRecord("a journal entry is admitted pending or awaiting confirmation")


def readmit(stored: JournalEntry, entry: JournalEntry) -> Replay:
    """`entry` under a stored idempotency key: the stored entry again when it is the same
    command (whatever its command id), else `Conflict`."""
    if not stored.same_command(entry):
        raise Conflict("the idempotency key was used for another command")
    return Replay(entry=stored)


def command_id_taken() -> Conflict:
    return Conflict("the command id is stored under another idempotency key")


def start(entry: JournalEntry) -> Verdict:
    if entry.status is JournalStatus.EXECUTING:
        return Verdict.REPEAT
    if entry.status not in journal_sources(JournalStatus.EXECUTING):
        raise Conflict(f"a {entry.status.value} command does not start executing")
    return Verdict.MOVE


def settles(outcome: CommandOutcome) -> JournalStatus:
    """The status `outcome` settles an entry into; an outcome that settles nothing is refused."""
    target = JournalStatus.for_outcome(outcome)
    if target not in JOURNAL_SETTLEMENTS:
        raise InvalidRecord("this outcome does not settle a command")
    return target


def complete(entry: JournalEntry, outcome: CommandOutcome) -> Verdict:
    """Record `outcome` along the status machine; the same outcome again is a repeat."""
    target = JournalStatus.for_outcome(outcome)
    if entry.status is target and entry.outcome == outcome:
        return Verdict.REPEAT
    if entry.status not in journal_sources(target):
        raise Conflict(f"a {entry.status.value} command cannot be settled this way")
    return Verdict.MOVE


# --- event ledger -------------------------------------------------------------------------------


def batch_problem(account_id: str, batch: Sequence[DomainEvent]) -> tuple[int, StoreError] | None:
    """The first event of a batch that breaks a rule on its own (another account, a sequence
    already set, an id twice in the batch), with its position. A stored id before it is
    reported first (`event_stored`): the events are judged in order."""
    seen: set[str] = set()
    for index, event in enumerate(batch):
        if event.account_id != account_id:
            return index, InvalidRecord("an event belongs to another account")
        if event.sequence is not None:
            return index, InvalidRecord("an event is appended without a sequence")
        if event.event_id in seen:
            return index, event_stored()
        seen.add(event.event_id)
    return None


def event_stored() -> Conflict:
    return Conflict("an event id is already in the ledger")


# --- outbox -------------------------------------------------------------------------------------

OPEN_OUTBOX: Final = frozenset(status for status in OutboxStatus if not status.is_terminal)


@dataclass(frozen=True)
class OutboxMove:
    """One move of the outbox's status machine: the statuses it leaves, the one it reaches."""

    sources: frozenset[OutboxStatus]
    target: OutboxStatus


_S = OutboxStatus
OUTBOX_CLAIM: Final = OutboxMove(frozenset({_S.PENDING}), _S.DISPATCHING)
OUTBOX_COMPLETE: Final = OutboxMove(frozenset({_S.DISPATCHING, _S.OUTCOME_UNKNOWN}), _S.COMPLETED)
OUTBOX_RETRY: Final = OutboxMove(OPEN_OUTBOX, _S.PENDING)
OUTBOX_FAIL: Final = OutboxMove(OPEN_OUTBOX, _S.FAILED)
#: Also fills in the remote reference of an unknown outcome that has none (`report_unknown`).
OUTBOX_REPORT_UNKNOWN: Final = OutboxMove(frozenset({_S.DISPATCHING}), _S.OUTCOME_UNKNOWN)
OUTBOX_RESCHEDULE: Final = OutboxMove(frozenset({_S.PENDING, _S.OUTCOME_UNKNOWN}), _S.PENDING)
OUTBOX_RELEASE: Final = OutboxMove(frozenset({_S.DISPATCHING}), _S.PENDING)
#: A claim handed back unused (its message never reached the broker): not an attempt.
OUTBOX_UNCLAIM: Final = OutboxMove(frozenset({_S.DISPATCHING}), _S.PENDING)
#: Unknown outcomes due for reconciliation are leased (still unknown) until `until`.
OUTBOX_RECONCILE: Final = OutboxMove(frozenset({_S.OUTCOME_UNKNOWN}), _S.OUTCOME_UNKNOWN)


def _outbox_move(row: OutboxEntry, move: OutboxMove, refusal: str) -> Verdict:
    if row.status not in move.sources:
        raise Conflict(f"a {row.status.value} row {refusal}")
    return Verdict.MOVE


def enqueueable(entry: OutboxEntry) -> None:
    if entry.status is not OutboxStatus.PENDING:
        raise InvalidRecord("an outbox row is enqueued pending")


def by_enqueueing(row: OutboxEntry) -> tuple[int, str]:
    """The order of a command's rows and of a claim."""
    return (row.created_at, row.outbox_id)


def due(row: OutboxEntry, now: int) -> bool:
    return row.status in OUTBOX_CLAIM.sources and (
        row.next_attempt_at is None or row.next_attempt_at <= now
    )


def begin_dispatch_row(row: OutboxEntry, attempt: int) -> Verdict:
    """Only the claim's own attempt begins, and only once."""
    if row.status is not OutboxStatus.DISPATCHING or row.attempt_count != attempt:
        raise Conflict("the row is not dispatching that attempt")
    if row.dispatch_started_at is not None:
        raise Conflict("that attempt began already")
    return Verdict.MOVE


def same_attempt(row: OutboxEntry, attempt: int | None) -> None:
    """An answer settles only the attempt that got it (a reaped claim's worker is too late)."""
    if attempt is None:
        return
    if row.attempt_count != attempt or row.status not in (
        OutboxStatus.DISPATCHING,
        OutboxStatus.OUTCOME_UNKNOWN,
    ):
        raise Conflict("the row moved on from that attempt")


def due_for_reconciliation(row: OutboxEntry, now: int) -> bool:
    return row.status in OUTBOX_RECONCILE.sources and (
        row.next_attempt_at is None or row.next_attempt_at <= now
    )


def unclaim_row(row: OutboxEntry, worker_id: str) -> Verdict:
    """Only the claimer hands a claim back, and only while it holds it."""
    _outbox_move(row, OUTBOX_UNCLAIM, "holds no claim")
    if row.claim_worker_id != worker_id:
        raise Conflict("the row is claimed by another worker")
    return Verdict.MOVE


def claim_expired(row: OutboxEntry, claimed_before: int) -> bool:
    """The reaper releases claims taken strictly before its limit."""
    return row.status in OUTBOX_RELEASE.sources and (row.claim_taken_at or 0) < claimed_before


def complete_row(row: OutboxEntry, attempt: int | None = None) -> Verdict:
    if row.status is OUTBOX_COMPLETE.target:
        return Verdict.REPEAT
    same_attempt(row, attempt)
    return _outbox_move(row, OUTBOX_COMPLETE, "does not complete")


def fail_row(
    row: OutboxEntry, reason: str, retry_at: int | None, attempt: int | None = None
) -> Verdict:
    """Back to pending due at `retry_at`, or (without it) failed; the same failure again is a
    repeat."""
    if retry_at is None and row.status is OUTBOX_FAIL.target and row.last_failure == reason:
        return Verdict.REPEAT
    same_attempt(row, attempt)
    if retry_at is not None:
        return _outbox_move(row, OUTBOX_RETRY, "does not fail")
    return _outbox_move(row, OUTBOX_FAIL, "does not fail")


def report_unknown(row: OutboxEntry, remote_ref: str | None, attempt: int | None = None) -> Verdict:
    """dispatching -> outcome_unknown, for the attempt given (`same_attempt`). A repeat is
    accepted and fills in a missing remote reference (a MOVE); a different remote reference is
    `Conflict`."""
    same_attempt(row, attempt)
    if row.status is OUTBOX_REPORT_UNKNOWN.target:
        if remote_ref is None or remote_ref == row.remote_ref:
            return Verdict.REPEAT
        if row.remote_ref is not None:
            raise Conflict("the row names another remote reference")
        return Verdict.MOVE
    return _outbox_move(row, OUTBOX_REPORT_UNKNOWN, "was not being dispatched")


def reschedule_row(row: OutboxEntry) -> Verdict:
    return _outbox_move(row, OUTBOX_RESCHEDULE, "is not rescheduled")


# --- replay records -----------------------------------------------------------------------------


def derived_token(record: ReplayRecord) -> None:
    if record.replay_token != derive_replay_token(record.turn_id):
        raise InvalidRecord("the replay token is not derived from the turn id")


def put_replay(stored: ReplayRecord, record: ReplayRecord) -> Verdict:
    """Upsert until the stored phase is terminal; then only the identical record is accepted."""
    if stored == record:
        return Verdict.REPEAT
    if stored.conversation_id != record.conversation_id:
        raise Conflict("the turn's replay record belongs to another conversation")
    if stored.phase in TERMINAL_PHASES:
        raise Conflict("the turn's replay record is final")
    return Verdict.MOVE


# --- commit bundle ------------------------------------------------------------------------------


class BundleWriter(Protocol):
    """How one store applies each item of a commit bundle, inside the bundle's transaction."""

    def accept(self, record: UserTurnRecord) -> None: ...

    def admit(self, entry: JournalEntry) -> None: ...

    def start(self, command_id: str) -> None: ...

    def answer(self, turn: AssistantTurn) -> None: ...

    def complete(self, command_id: str, outcome: CommandOutcome) -> None: ...

    def append(self, events: tuple[DomainEvent, ...]) -> None: ...

    def finish(
        self,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
        event_ids: tuple[str, ...],
    ) -> None: ...

    def invalidate(self, case_key: CaseKey, current_revision: int) -> None: ...

    def insert(self, card: Interaction) -> None: ...

    def enqueue(self, row: OutboxEntry) -> None: ...

    def put_replay(self, record: ReplayRecord) -> None: ...

    def set_phase(self, phase: TurnPhase) -> None: ...

    def stream(self, entries: tuple[StreamEntry, ...]) -> None: ...

    def reach(self, point: FaultPoint) -> None: ...


def write_bundle(bundle: CommitBundle, writer: BundleWriter) -> None:
    """Hand the bundle's items to `writer` in the normative order (user turn, journal
    admissions, journal starts, journal completions, events, card finishes, invalidations, card
    inserts, outbox rows, assistant turn, replay record, phase marker, stream events), each
    fault point where its stage names it, only when that stage writes something (decision
    0002)."""
    if bundle.user_turn is not None:
        writer.accept(bundle.user_turn)
    if bundle.journal_admissions:
        writer.reach(FaultPoint.BEFORE_JOURNAL_INSERT)
        for entry in bundle.journal_admissions:
            writer.admit(entry)
    for command_id in bundle.journal_starts:
        writer.start(command_id)
    for completion in bundle.journal_completions:
        writer.complete(completion.command_id, completion.outcome)
    if bundle.journal_admissions or bundle.journal_completions:
        writer.reach(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT)
    if bundle.events:
        writer.append(bundle.events)
        writer.reach(FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK)
    for settled in bundle.interaction_finishes:
        writer.finish(settled.interaction_id, settled.status, settled.option_id, settled.event_ids)
    for invalidation in bundle.invalidations:
        writer.invalidate(invalidation.case_key, invalidation.current_revision)
    for card in bundle.interaction_inserts:
        writer.insert(card)
    if bundle.interaction_inserts:
        writer.reach(FaultPoint.AFTER_INTERACTION_PERSISTENCE)
    for row in bundle.outbox:
        writer.enqueue(row)
    if bundle.assistant_turn is not None:
        writer.reach(FaultPoint.BEFORE_RESPONSE_PERSISTENCE)
        writer.answer(bundle.assistant_turn)
    if bundle.replay is not None:
        writer.put_replay(bundle.replay)
    if bundle.phase is not None:
        writer.set_phase(bundle.phase)
    if bundle.stream_events:
        writer.stream(stream_entries(bundle.stream_events))
