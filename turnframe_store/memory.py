"""`MemoryStores`: the deterministic in-memory reference implementation of every store role.

- One `threading.Lock` guards all state. Every method does its work synchronously under it and
  awaits nothing while holding it, so the store is safe across event loops and threads.
- Lifecycle times (completed_at, updated_at, resolved_at, …) come from the injectable clock.
- Every list is sorted by the key its protocol names, never by dict or insertion order.
- Every write applies in place while recording undo steps; a failure replays them backwards. A
  commit therefore costs O(items in the bundle), never O(state).
- Fault points (`turnframe_store.faults`) fire through `MemoryStores.faults`.

The role classes (`MemoryConversations`, …) share one `_Engine`; they are public for tests that
need to alter one role, but adopters use `MemoryStores`.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, Final, TypeVar

from pydantic import ValidationError

from turnframe_core.canonical import CanonicalJsonError
from turnframe_core.cases import CaseKey
from turnframe_core.events import DomainEvent
from turnframe_core.ids import derive_replay_token
from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_core.replay import CommandOutcome, ReplayRecord, TurnPhase
from turnframe_core.turn import AssistantTurn
from turnframe_store.bundle import Stores
from turnframe_store.clock import Clock, system_clock
from turnframe_store.errors import Conflict, Corrupt, InvalidRecord, NotFound
from turnframe_store.faults import FaultPlan, FaultPoint
from turnframe_store.records import (
    CommitBundle,
    CommitResult,
    ConversationRecord,
    EventCursor,
    EventPage,
    Fresh,
    JournalAdmission,
    JournalEntry,
    JournalStatus,
    OutboxEntry,
    OutboxStatus,
    PhaseMarker,
    Replay,
    UserTurnRecord,
)

__all__ = [
    "MemoryCommits",
    "MemoryConversations",
    "MemoryEvents",
    "MemoryInteractions",
    "MemoryJournal",
    "MemoryOutbox",
    "MemoryReplay",
    "MemoryStores",
]

K = TypeVar("K")
V = TypeVar("V")
T = TypeVar("T")
R = TypeVar("R")

_LIFECYCLE: Final[set[str]] = {
    "status",
    "resolved_at",
    "resolved_option_id",
    "resolution_event_ids",
}
_FINISH: Final = frozenset(
    {InteractionStatus.RESOLVED, InteractionStatus.FAILED, InteractionStatus.ACTIVE}
)
_OPEN_OUTBOX: Final = frozenset(
    {OutboxStatus.PENDING, OutboxStatus.DISPATCHING, OutboxStatus.OUTCOME_UNKNOWN}
)
_NO_CLAIM: Final[dict[str, Any]] = {"claim_worker_id": None, "claim_taken_at": None}


class _UndoLog:
    """The steps that reverse what one write did, replayed backwards on failure."""

    __slots__ = ("_steps",)

    def __init__(self) -> None:
        self._steps: list[Callable[[], object]] = []

    def put(self, table: dict[K, V], key: K, value: V) -> None:
        if key in table:
            self._steps.append(partial(table.__setitem__, key, table[key]))
        else:
            self._steps.append(partial(table.__delitem__, key))
        table[key] = value

    def remove(self, table: dict[K, V], key: K) -> None:
        if key in table:
            self._steps.append(partial(table.__setitem__, key, table[key]))
            del table[key]

    def index(self, table: dict[K, list[T]], key: K, value: T) -> None:
        """Append `value` to the list at `key` (creating it)."""
        items = table.get(key)
        if items is None:
            items = []
            self.put(table, key, items)
        items.append(value)
        self._steps.append(items.pop)

    def step(self, undo: Callable[[], object]) -> None:
        self._steps.append(undo)

    def rollback(self) -> None:
        while self._steps:
            self._steps.pop()()


Key2 = tuple[str, str]
Key3 = tuple[str, str, str]


class _Tables:
    """All state. Keys lead with the account except on the outbox (a system queue)."""

    def __init__(self) -> None:
        self.conversations: dict[Key2, ConversationRecord] = {}
        self.user_turns: dict[Key2, UserTurnRecord] = {}
        self.turns_by_conversation: dict[Key2, list[str]] = {}
        self.assistant_turns: dict[Key2, str] = {}
        self.phases: dict[Key2, PhaseMarker] = {}
        self.unfinished: dict[Key2, None] = {}
        self.cards: dict[Key2, Interaction] = {}
        self.blocking_slot: dict[Key3, str] = {}
        self.cards_by_case: dict[Key3, list[str]] = {}
        self.cards_by_conversation: dict[Key2, list[str]] = {}
        self.cards_expiring: dict[Key2, None] = {}
        self.journal: dict[Key2, JournalEntry] = {}
        self.journal_by_key: dict[Key2, str] = {}
        self.journal_by_turn: dict[Key2, list[str]] = {}
        self.events: dict[Key2, DomainEvent] = {}
        self.events_by_account: dict[str, list[DomainEvent]] = {}
        self.events_by_case: dict[Key3, list[DomainEvent]] = {}
        self.last_sequence = 0
        self.outbox: dict[str, OutboxEntry] = {}
        self.outbox_by_key: dict[Key2, str] = {}
        self.outbox_by_command: dict[str, list[str]] = {}
        self.outbox_pending: dict[str, None] = {}
        self.outbox_dispatching: dict[str, None] = {}
        self.replay: dict[Key2, ReplayRecord] = {}
        self.replay_first_put: dict[Key2, int] = {}
        self.replay_by_token: dict[Key2, str] = {}
        self.replay_by_conversation: dict[Key2, list[str]] = {}


def _limit(limit: int) -> int:
    if not isinstance(limit, int) or limit < 1:
        raise InvalidRecord("a limit is a positive integer")
    return limit


def _sequence(event: DomainEvent) -> int:
    return event.sequence or 0


def _case3(account_id: str, workflow: str, case_id: str) -> Key3:
    return (account_id, workflow, case_id)


class _Engine:
    """The shared state and every operation on it. Operations run under `lock`; writes take an
    undo log and leave no trace when they raise."""

    def __init__(self, clock: Clock, faults: FaultPlan) -> None:
        self.lock = threading.Lock()
        self.clock = clock
        self.faults = faults
        self.t = _Tables()

    def write(self, op: Callable[[_UndoLog], R]) -> R:
        with self.lock:
            undo = _UndoLog()
            try:
                return op(undo)
            except BaseException:
                undo.rollback()
                raise

    def read(self, op: Callable[[], R]) -> R:
        with self.lock:
            return op()

    # --- conversations --------------------------------------------------------------------------

    def ensure_conversation(
        self, undo: _UndoLog, account_id: str, conversation_id: str
    ) -> ConversationRecord:
        key = (account_id, conversation_id)
        found = self.t.conversations.get(key)
        if found is not None:
            return found
        try:
            record = ConversationRecord(
                account_id=account_id, conversation_id=conversation_id, created_at=self.clock()
            )
        except ValidationError:
            raise InvalidRecord("not a well-formed account or conversation id") from None
        undo.put(self.t.conversations, key, record)
        return record

    def append_user_turn(self, undo: _UndoLog, record: UserTurnRecord) -> None:
        conversation = (record.account_id, record.conversation_id)
        if conversation not in self.t.conversations:
            raise NotFound()
        key = (record.account_id, record.turn_id)
        if key in self.t.user_turns:
            raise Conflict("the turn is already recorded")
        undo.put(self.t.user_turns, key, record)
        undo.index(self.t.turns_by_conversation, conversation, record.turn_id)
        marker = PhaseMarker(
            account_id=record.account_id,
            conversation_id=record.conversation_id,
            turn_id=record.turn_id,
            phase=TurnPhase.RECEIVED,
            updated_at=self.clock(),
        )
        undo.put(self.t.phases, key, marker)
        undo.put(self.t.unfinished, key, None)

    def append_assistant_turn(
        self, undo: _UndoLog, account_id: str, turn: AssistantTurn, phase: TurnPhase | None
    ) -> None:
        if turn.account_id != account_id:
            raise InvalidRecord("the assistant turn belongs to another account")
        key = (account_id, turn.turn_id)
        user = self.t.user_turns.get(key)
        if user is None:
            raise NotFound()
        if turn.conversation_id != user.conversation_id:
            raise InvalidRecord("the assistant turn belongs to another conversation")
        if not turn.status.is_terminal:
            raise InvalidRecord("only a terminal assistant turn is stored")
        try:
            text = turn.to_stored_json()
        except CanonicalJsonError:
            raise InvalidRecord("the assistant turn has no canonical form") from None
        stored = self.t.assistant_turns.get(key)
        if stored is None:
            undo.put(self.t.assistant_turns, key, text)
        elif stored != text:
            raise Conflict("the assistant turn is already stored with other content")
        if phase is not None:
            self.set_phase(undo, account_id, turn.turn_id, phase)

    def get_assistant_turn(self, account_id: str, turn_id: str) -> str:
        text = self.t.assistant_turns.get((account_id, turn_id))
        if text is None:
            raise NotFound()
        return text

    def set_phase(
        self, undo: _UndoLog, account_id: str, turn_id: str, phase: TurnPhase
    ) -> PhaseMarker:
        try:
            phase = TurnPhase(phase)
        except ValueError:
            raise InvalidRecord("not a turn phase") from None
        key = (account_id, turn_id)
        marker = self.t.phases.get(key)
        if marker is None:
            raise NotFound()
        if marker.phase is phase:
            return marker
        if marker.phase.is_terminal:
            raise Conflict("the turn's phase is final")
        moved = marker.model_copy(update={"phase": phase, "updated_at": self.clock()})
        undo.put(self.t.phases, key, moved)
        if phase.is_terminal:
            undo.remove(self.t.unfinished, key)
        return moved

    def list_turns(self, account_id: str, conversation_id: str) -> tuple[UserTurnRecord, ...]:
        ids = self.t.turns_by_conversation.get((account_id, conversation_id), ())
        turns = [self.t.user_turns[(account_id, turn_id)] for turn_id in ids]
        return tuple(sorted(turns, key=lambda r: (r.received_at, r.turn_id)))

    def list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]:
        markers = [self.t.phases[key] for key in self.t.unfinished]
        markers.sort(key=lambda m: (m.updated_at, m.account_id, m.turn_id))
        return tuple(markers[: _limit(limit)])

    # --- interactions ---------------------------------------------------------------------------

    def card(self, account_id: str, interaction_id: str) -> Interaction:
        card = self.t.cards.get((account_id, interaction_id))
        if card is None:
            raise NotFound()
        return card

    def cards_of_case(self, account_id: str, case_key: CaseKey) -> list[Interaction]:
        ids = self.t.cards_by_case.get(_case3(account_id, case_key.workflow, case_key.case_id), ())
        cards = [self.t.cards[(account_id, interaction_id)] for interaction_id in ids]
        return sorted(cards, key=lambda c: (c.created_at, c.interaction_id))

    def open_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[Interaction, ...]:
        ids = self.t.cards_by_conversation.get((account_id, conversation_id), ())
        cards = [self.t.cards[(account_id, interaction_id)] for interaction_id in ids]
        opened = [card for card in cards if card.status.is_open]
        return tuple(sorted(opened, key=lambda c: (c.created_at, c.interaction_id)))

    def _move_card(self, undo: _UndoLog, card: Interaction) -> Interaction:
        key = (card.account_id, card.interaction_id)
        undo.put(self.t.cards, key, card)
        if not card.status.is_open:
            case = _case3(card.account_id, card.case_ref.workflow, card.case_ref.case_id)
            if self.t.blocking_slot.get(case) == card.interaction_id:
                undo.remove(self.t.blocking_slot, case)
            undo.remove(self.t.cards_expiring, key)
        return card

    def insert_card(self, undo: _UndoLog, card: Interaction) -> Interaction:
        if card.status is not InteractionStatus.ACTIVE:
            raise InvalidRecord("a new card is active")
        if card.resolved_at is not None or card.resolved_option_id or card.resolution_event_ids:
            raise InvalidRecord("a new card carries no resolution")
        key = (card.account_id, card.interaction_id)
        stored = self.t.cards.get(key)
        if stored is not None:
            if stored.model_dump(exclude=_LIFECYCLE) == card.model_dump(exclude=_LIFECYCLE):
                return stored
            raise Conflict("another card is stored under this id")
        case = _case3(card.account_id, card.case_ref.workflow, card.case_ref.case_id)
        if card.blocking and case in self.t.blocking_slot:
            raise Conflict("the case already has an open blocking card")
        undo.put(self.t.cards, key, card)
        undo.index(self.t.cards_by_case, case, card.interaction_id)
        undo.index(
            self.t.cards_by_conversation,
            (card.account_id, card.conversation_id),
            card.interaction_id,
        )
        if card.blocking:
            undo.put(self.t.blocking_slot, case, card.interaction_id)
        if card.expires_at is not None:
            undo.put(self.t.cards_expiring, key, None)
        return card

    def insert_replacing_blocking(self, undo: _UndoLog, card: Interaction) -> tuple[str, ...]:
        replaced: tuple[str, ...] = ()
        if card.blocking:
            case = _case3(card.account_id, card.case_ref.workflow, card.case_ref.case_id)
            holder_id = self.t.blocking_slot.get(case)
            if holder_id is not None and holder_id != card.interaction_id:
                holder = self.t.cards[(card.account_id, holder_id)]
                if holder.status is not InteractionStatus.ACTIVE:
                    raise Conflict("the case's blocking card is being resolved")
                self._move_card(
                    undo, holder.transition(InteractionStatus.INVALIDATED, at=self.clock())
                )
                replaced = (holder_id,)
        self.insert_card(undo, card)
        return replaced

    def begin_resolution(
        self, undo: _UndoLog, account_id: str, interaction_id: str, option_id: str
    ) -> Interaction:
        card = self.card(account_id, interaction_id)
        if card.payload.option(option_id) is None:
            raise InvalidRecord("the card does not offer this option")
        if card.status is not InteractionStatus.ACTIVE:
            raise Conflict("the card is not active")
        return self._move_card(
            undo,
            card.transition(InteractionStatus.RESOLVING, at=self.clock(), option_id=option_id),
        )

    def finish(
        self,
        undo: _UndoLog,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
        event_ids: Sequence[str],
    ) -> Interaction:
        try:
            status = InteractionStatus(status)
        except ValueError:
            raise InvalidRecord("not a card status") from None
        if status not in _FINISH:
            raise InvalidRecord("a finish settles a card as resolved, failed or active")
        card = self.card(account_id, interaction_id)
        events = tuple(event_ids)
        if card.status is InteractionStatus.RESOLVING:
            if option_id is not None and option_id != card.resolved_option_id:
                raise Conflict("another option was claimed")
            settled = card.transition(
                status, at=self.clock(), option_id=card.resolved_option_id, event_ids=events
            )
            return self._move_card(undo, settled)
        if card.status is status and (
            status is InteractionStatus.ACTIVE
            or (
                (option_id is None or option_id == card.resolved_option_id)
                and (status is InteractionStatus.FAILED or events == card.resolution_event_ids)
            )
        ):
            return card
        raise Conflict("the card is settled otherwise")

    def close_card(
        self,
        undo: _UndoLog,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
    ) -> Interaction:
        """active -> declined | dismissed; the same close again is accepted."""
        card = self.card(account_id, interaction_id)
        if card.status is InteractionStatus.ACTIVE:
            if option_id is not None and card.payload.option(option_id) is None:
                raise InvalidRecord("the card does not offer this option")
            return self._move_card(
                undo, card.transition(status, at=self.clock(), option_id=option_id)
            )
        if card.status is status and option_id in (None, card.resolved_option_id):
            return card
        raise Conflict("the card is not active")

    def invalidate(
        self,
        undo: _UndoLog,
        account_id: str,
        case_key: CaseKey,
        current_revision: int | None,
    ) -> tuple[str, ...]:
        """Invalidate the case's active cards; with a revision, only stale, revision-bound ones."""
        invalidated: list[str] = []
        for card in self.cards_of_case(account_id, case_key):
            if card.status is not InteractionStatus.ACTIVE:
                continue
            if current_revision is not None and (
                card.revision_independent or card.bound_revision == current_revision
            ):
                continue
            self._move_card(undo, card.transition(InteractionStatus.INVALIDATED, at=self.clock()))
            invalidated.append(card.interaction_id)
        return tuple(invalidated)

    def expire_due(self, undo: _UndoLog, now: int, limit: int) -> tuple[Interaction, ...]:
        due = [
            card
            for card in (self.t.cards[key] for key in self.t.cards_expiring)
            if card.status is InteractionStatus.ACTIVE
            and card.expires_at is not None
            and card.expires_at <= now
        ]
        due.sort(key=lambda c: (c.expires_at or 0, c.account_id, c.interaction_id))
        return tuple(
            self._move_card(undo, card.transition(InteractionStatus.EXPIRED, at=now))
            for card in due[: _limit(limit)]
        )

    # --- command journal ------------------------------------------------------------------------

    def entry(self, account_id: str, command_id: str) -> JournalEntry:
        entry = self.t.journal.get((account_id, command_id))
        if entry is None:
            raise NotFound()
        return entry

    def begin(self, undo: _UndoLog, entry: JournalEntry) -> JournalAdmission:
        if entry.status not in (JournalStatus.PENDING, JournalStatus.AWAITING_CONFIRMATION):
            raise InvalidRecord("a journal entry is admitted pending or awaiting confirmation")
        account_id = entry.account_id
        stored_id = self.t.journal_by_key.get((account_id, entry.idempotency_key))
        if stored_id is not None:
            stored = self.t.journal[(account_id, stored_id)]
            if not stored.same_command(entry):
                raise Conflict("the idempotency key was used for another command")
            return Replay(entry=stored)
        key = (account_id, entry.command_id)
        if key in self.t.journal:
            raise Conflict("the command id is stored under another idempotency key")
        undo.put(self.t.journal, key, entry)
        undo.put(self.t.journal_by_key, (account_id, entry.idempotency_key), entry.command_id)
        undo.index(self.t.journal_by_turn, (account_id, entry.turn_id), entry.command_id)
        return Fresh(entry=entry)

    def mark_executing(self, undo: _UndoLog, account_id: str, command_id: str) -> JournalEntry:
        entry = self.entry(account_id, command_id)
        if entry.status is JournalStatus.EXECUTING:
            return entry
        if not entry.status.can_move_to(JournalStatus.EXECUTING):
            raise Conflict(f"a {entry.status.value} command does not start executing")
        moved = entry.model_copy(update={"status": JournalStatus.EXECUTING})
        undo.put(self.t.journal, (account_id, command_id), moved)
        return moved

    def complete(
        self, undo: _UndoLog, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry:
        target = JournalStatus.for_outcome(outcome)
        if target in (JournalStatus.AWAITING_CONFIRMATION,):
            raise InvalidRecord("this outcome does not settle a command")
        entry = self.entry(account_id, command_id)
        if entry.status is target and entry.outcome == outcome:
            return entry
        if not entry.status.can_move_to(target):
            raise Conflict(f"a {entry.status.value} command cannot be settled this way")
        settled = entry.settled(outcome, at=self.clock())
        undo.put(self.t.journal, (account_id, command_id), settled)
        return settled

    def journal_for_turn(self, account_id: str, turn_id: str) -> list[JournalEntry]:
        ids = self.t.journal_by_turn.get((account_id, turn_id), ())
        entries = [self.t.journal[(account_id, command_id)] for command_id in ids]
        return sorted(entries, key=lambda e: (e.created_at, e.command_id))

    # --- event ledger ---------------------------------------------------------------------------

    def append(
        self, undo: _UndoLog, account_id: str, events: Iterable[DomainEvent]
    ) -> tuple[DomainEvent, ...]:
        batch = tuple(events)
        seen: set[str] = set()
        for event in batch:
            if event.account_id != account_id:
                raise InvalidRecord("an event belongs to another account")
            if event.sequence is not None:
                raise InvalidRecord("an event is appended without a sequence")
            if event.event_id in seen or (account_id, event.event_id) in self.t.events:
                raise Conflict("an event id is already in the ledger")
            seen.add(event.event_id)
        appended: list[DomainEvent] = []
        previous = sequence = self.t.last_sequence
        for event in batch:
            sequence += 1
            stored = event.model_copy(update={"sequence": sequence})
            undo.put(self.t.events, (account_id, event.event_id), stored)
            undo.index(self.t.events_by_account, account_id, stored)
            undo.index(
                self.t.events_by_case, _case3(account_id, event.workflow, event.case_id), stored
            )
            appended.append(stored)
        self.t.last_sequence = sequence
        undo.step(partial(setattr, self.t, "last_sequence", previous))
        return tuple(appended)

    def get_by_ids(self, account_id: str, event_ids: Iterable[str]) -> tuple[DomainEvent, ...]:
        found = {
            event.event_id: event
            for event in (self.t.events.get((account_id, event_id)) for event_id in event_ids)
            if event is not None
        }
        return tuple(sorted(found.values(), key=_sequence))

    def list_for_case(
        self, account_id: str, case_key: CaseKey, since_revision: int, limit: int
    ) -> tuple[DomainEvent, ...]:
        _limit(limit)
        history = self.t.events_by_case.get(
            _case3(account_id, case_key.workflow, case_key.case_id), ()
        )
        found: list[DomainEvent] = []
        for event in history:
            if event.case_revision > since_revision:
                found.append(event)
                if len(found) == limit:
                    break
        return tuple(found)

    def read_from(self, account_id: str, cursor: EventCursor, limit: int) -> EventPage:
        stream = self.t.events_by_account.get(account_id, [])
        start = bisect.bisect_right(stream, cursor.sequence, key=_sequence)
        page = tuple(stream[start : start + _limit(limit)])
        next_cursor = EventCursor(sequence=_sequence(page[-1])) if page else cursor
        return EventPage(events=page, next_cursor=next_cursor)

    # --- outbox ---------------------------------------------------------------------------------

    def row(self, outbox_id: str) -> OutboxEntry:
        row = self.t.outbox.get(outbox_id)
        if row is None:
            raise NotFound()
        return row

    def _move_row(self, undo: _UndoLog, row: OutboxEntry, **changes: Any) -> OutboxEntry:
        moved = row.model_copy(update=changes)
        undo.put(self.t.outbox, row.outbox_id, moved)
        for status, index in (
            (OutboxStatus.PENDING, self.t.outbox_pending),
            (OutboxStatus.DISPATCHING, self.t.outbox_dispatching),
        ):
            if moved.status is status:
                undo.put(index, row.outbox_id, None)
            else:
                undo.remove(index, row.outbox_id)
        return moved

    def enqueue(self, undo: _UndoLog, entry: OutboxEntry) -> OutboxEntry:
        if entry.status is not OutboxStatus.PENDING:
            raise InvalidRecord("an outbox row is enqueued pending")
        by_key = (entry.destination, entry.idempotency_key)
        if entry.outbox_id in self.t.outbox or by_key in self.t.outbox_by_key:
            raise Conflict("the outbox row is already enqueued")
        undo.put(self.t.outbox, entry.outbox_id, entry)
        undo.put(self.t.outbox_by_key, by_key, entry.outbox_id)
        undo.index(self.t.outbox_by_command, entry.command_id, entry.outbox_id)
        undo.put(self.t.outbox_pending, entry.outbox_id, None)
        return entry

    def claim_due(
        self, undo: _UndoLog, now: int, limit: int, worker_id: str
    ) -> tuple[OutboxEntry, ...]:
        if not worker_id:
            raise InvalidRecord("a claim names its worker")
        due = [
            row
            for row in (self.t.outbox[outbox_id] for outbox_id in self.t.outbox_pending)
            if row.next_attempt_at is None or row.next_attempt_at <= now
        ]
        due.sort(key=lambda r: (r.created_at, r.outbox_id))
        return tuple(
            self._move_row(
                undo,
                row,
                status=OutboxStatus.DISPATCHING,
                attempt_count=row.attempt_count + 1,
                claim_worker_id=worker_id,
                claim_taken_at=now,
            )
            for row in due[: _limit(limit)]
        )

    def mark_completed(self, undo: _UndoLog, outbox_id: str) -> OutboxEntry:
        row = self.row(outbox_id)
        if row.status is OutboxStatus.COMPLETED:
            return row
        if row.status not in (OutboxStatus.DISPATCHING, OutboxStatus.OUTCOME_UNKNOWN):
            raise Conflict(f"a {row.status.value} row does not complete")
        return self._move_row(
            undo, row, status=OutboxStatus.COMPLETED, completed_at=self.clock(), **_NO_CLAIM
        )

    def mark_failed(
        self, undo: _UndoLog, outbox_id: str, reason: str, retry_at: int | None
    ) -> OutboxEntry:
        if not reason:
            raise InvalidRecord("a failure names its reason")
        row = self.row(outbox_id)
        if retry_at is None and row.status is OutboxStatus.FAILED and row.last_failure == reason:
            return row
        if row.status not in _OPEN_OUTBOX:
            raise Conflict(f"a {row.status.value} row does not fail")
        if retry_at is not None:
            return self._move_row(
                undo,
                row,
                status=OutboxStatus.PENDING,
                next_attempt_at=retry_at,
                last_failure=reason,
                **_NO_CLAIM,
            )
        return self._move_row(
            undo,
            row,
            status=OutboxStatus.FAILED,
            completed_at=self.clock(),
            last_failure=reason,
            **_NO_CLAIM,
        )

    def mark_outcome_unknown(
        self, undo: _UndoLog, outbox_id: str, remote_ref: str | None
    ) -> OutboxEntry:
        row = self.row(outbox_id)
        if row.status is OutboxStatus.OUTCOME_UNKNOWN:
            if remote_ref is None or remote_ref == row.remote_ref:
                return row
            if row.remote_ref is not None:
                raise Conflict("the row names another remote reference")
            return self._move_row(undo, row, remote_ref=remote_ref)
        if row.status is not OutboxStatus.DISPATCHING:
            raise Conflict(f"a {row.status.value} row was not being dispatched")
        return self._move_row(
            undo,
            row,
            status=OutboxStatus.OUTCOME_UNKNOWN,
            remote_ref=remote_ref if remote_ref is not None else row.remote_ref,
            **_NO_CLAIM,
        )

    def reschedule(self, undo: _UndoLog, outbox_id: str, at: int) -> OutboxEntry:
        row = self.row(outbox_id)
        if row.status not in (OutboxStatus.PENDING, OutboxStatus.OUTCOME_UNKNOWN):
            raise Conflict(f"a {row.status.value} row is not rescheduled")
        return self._move_row(undo, row, status=OutboxStatus.PENDING, next_attempt_at=at)

    def release_expired_claims(self, undo: _UndoLog, claimed_before: int) -> int:
        stale = [
            row
            for row in (self.t.outbox[outbox_id] for outbox_id in self.t.outbox_dispatching)
            if (row.claim_taken_at or 0) < claimed_before
        ]
        stale.sort(key=lambda r: (r.claim_taken_at or 0, r.outbox_id))
        for row in stale:
            self._move_row(
                undo, row, status=OutboxStatus.PENDING, next_attempt_at=None, **_NO_CLAIM
            )
        return len(stale)

    def rows_for_command(self, command_id: str) -> tuple[OutboxEntry, ...]:
        rows = [self.t.outbox[i] for i in self.t.outbox_by_command.get(command_id, ())]
        return tuple(sorted(rows, key=lambda r: (r.created_at, r.outbox_id)))

    # --- replay records -------------------------------------------------------------------------

    def put_replay(self, undo: _UndoLog, record: ReplayRecord) -> None:
        if record.replay_token != derive_replay_token(record.turn_id):
            raise InvalidRecord("the replay token is not derived from the turn id")
        key = (record.account_id, record.turn_id)
        stored = self.t.replay.get(key)
        if stored is None:
            undo.put(self.t.replay, key, record)
            undo.put(self.t.replay_first_put, key, record.recorded_at)
            undo.put(
                self.t.replay_by_token, (record.account_id, record.replay_token), record.turn_id
            )
            undo.index(
                self.t.replay_by_conversation,
                (record.account_id, record.conversation_id),
                record.turn_id,
            )
            return
        if stored == record:
            return
        if stored.conversation_id != record.conversation_id:
            raise Conflict("the turn's replay record belongs to another conversation")
        if stored.phase.is_terminal:
            raise Conflict("the turn's replay record is final")
        undo.put(self.t.replay, key, record)

    def replay_record(self, account_id: str, turn_id: str) -> ReplayRecord:
        record = self.t.replay.get((account_id, turn_id))
        if record is None:
            raise NotFound()
        return record

    def replay_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[ReplayRecord, ...]:
        turns = self.t.replay_by_conversation.get((account_id, conversation_id), ())
        ordered = sorted(turns, key=lambda t: self._replay_order(account_id, t))
        return tuple(self.t.replay[(account_id, turn_id)] for turn_id in ordered)

    def last_replay_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> ReplayRecord | None:
        turns = self.t.replay_by_conversation.get((account_id, conversation_id), ())
        if not turns:
            return None
        last = max(turns, key=lambda t: self._replay_order(account_id, t))
        return self.t.replay[(account_id, last)]

    def _replay_order(self, account_id: str, turn_id: str) -> tuple[int, str]:
        return (self.t.replay_first_put[(account_id, turn_id)], turn_id)

    # --- commit ---------------------------------------------------------------------------------

    def commit(self, undo: _UndoLog, bundle: CommitBundle) -> CommitResult:
        account_id = bundle.account_id
        for completion in bundle.journal_completions:
            self.complete(undo, account_id, completion.command_id, completion.outcome)
        if bundle.journal_completions:
            self.faults.reach(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT)
        events = self.append(undo, account_id, bundle.events)
        if events:
            self.faults.reach(FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK)
        for finish in bundle.interaction_finishes:
            self.finish(
                undo,
                account_id,
                finish.interaction_id,
                finish.status,
                finish.option_id,
                finish.event_ids,
            )
        invalidated: list[str] = []
        for invalidation in bundle.invalidations:
            invalidated.extend(
                self.invalidate(
                    undo, account_id, invalidation.case_key, invalidation.current_revision
                )
            )
        for card in bundle.interaction_inserts:
            self.insert_card(undo, card)
        if bundle.interaction_inserts:
            self.faults.reach(FaultPoint.AFTER_INTERACTION_PERSISTENCE)
        for row in bundle.outbox:
            self.enqueue(undo, row)
        if bundle.replay is not None:
            self.put_replay(undo, bundle.replay)
        if bundle.phase is not None:
            self.set_phase(undo, account_id, bundle.turn_id, bundle.phase)
        return CommitResult(events=events, invalidated=tuple(invalidated))


# --- roles --------------------------------------------------------------------------------------


class _Role:
    def __init__(self, engine: _Engine) -> None:
        self._engine = engine


class MemoryConversations(_Role):
    async def get_conversation(self, account_id: str, conversation_id: str) -> ConversationRecord:
        found = self._engine.read(
            lambda: self._engine.t.conversations.get((account_id, conversation_id))
        )
        if found is None:
            raise NotFound()
        return found

    async def get_user_turn(self, account_id: str, turn_id: str) -> UserTurnRecord:
        found = self._engine.read(lambda: self._engine.t.user_turns.get((account_id, turn_id)))
        if found is None:
            raise NotFound()
        return found

    async def get_assistant_turn(self, account_id: str, turn_id: str) -> AssistantTurn:
        text = self._engine.read(lambda: self._engine.get_assistant_turn(account_id, turn_id))
        try:
            turn = AssistantTurn.from_stored_json(text)
        except ValidationError:
            raise Corrupt("the stored assistant turn does not read back") from None
        if turn.to_stored_json() != text:
            raise Corrupt("the stored assistant turn does not reload byte for byte")
        return turn

    async def list_turns(self, account_id: str, conversation_id: str) -> tuple[UserTurnRecord, ...]:
        return self._engine.read(lambda: self._engine.list_turns(account_id, conversation_id))

    async def get_phase(self, account_id: str, turn_id: str) -> PhaseMarker:
        found = self._engine.read(lambda: self._engine.t.phases.get((account_id, turn_id)))
        if found is None:
            raise NotFound()
        return found

    async def list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]:
        return self._engine.read(lambda: self._engine.list_unfinished_turns(limit))

    async def ensure_conversation(
        self, account_id: str, conversation_id: str
    ) -> ConversationRecord:
        return self._engine.write(
            lambda undo: self._engine.ensure_conversation(undo, account_id, conversation_id)
        )

    async def append_user_turn(self, record: UserTurnRecord) -> None:
        self._engine.write(lambda undo: self._engine.append_user_turn(undo, record))

    async def append_assistant_turn(
        self, account_id: str, turn: AssistantTurn, *, phase: TurnPhase | None = None
    ) -> None:
        self._engine.faults.reach(FaultPoint.BEFORE_RESPONSE_PERSISTENCE)
        self._engine.write(
            lambda undo: self._engine.append_assistant_turn(undo, account_id, turn, phase)
        )

    async def set_phase(self, account_id: str, turn_id: str, phase: TurnPhase) -> PhaseMarker:
        return self._engine.write(
            lambda undo: self._engine.set_phase(undo, account_id, turn_id, phase)
        )


class MemoryInteractions(_Role):
    async def get(self, account_id: str, interaction_id: str) -> Interaction:
        return self._engine.read(lambda: self._engine.card(account_id, interaction_id))

    async def open_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[Interaction, ...]:
        return self._engine.read(
            lambda: self._engine.open_for_conversation(account_id, conversation_id)
        )

    async def for_case(self, account_id: str, case_key: CaseKey) -> tuple[Interaction, ...]:
        return self._engine.read(lambda: tuple(self._engine.cards_of_case(account_id, case_key)))

    async def insert(self, interaction: Interaction) -> Interaction:
        stored = self._engine.write(lambda undo: self._engine.insert_card(undo, interaction))
        self._engine.faults.reach(FaultPoint.AFTER_INTERACTION_PERSISTENCE)
        return stored

    async def insert_replacing_blocking(self, interaction: Interaction) -> tuple[str, ...]:
        replaced = self._engine.write(
            lambda undo: self._engine.insert_replacing_blocking(undo, interaction)
        )
        self._engine.faults.reach(FaultPoint.AFTER_INTERACTION_PERSISTENCE)
        return replaced

    async def begin_resolution(
        self, account_id: str, interaction_id: str, option_id: str
    ) -> Interaction:
        return self._engine.write(
            lambda undo: self._engine.begin_resolution(undo, account_id, interaction_id, option_id)
        )

    async def finish(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None = None,
        event_ids: Sequence[str] = (),
    ) -> Interaction:
        return self._engine.write(
            lambda undo: self._engine.finish(
                undo, account_id, interaction_id, status, option_id, event_ids
            )
        )

    async def decline(
        self, account_id: str, interaction_id: str, option_id: str | None = None
    ) -> Interaction:
        return self._engine.write(
            lambda undo: self._engine.close_card(
                undo, account_id, interaction_id, InteractionStatus.DECLINED, option_id
            )
        )

    async def dismiss(self, account_id: str, interaction_id: str) -> Interaction:
        return self._engine.write(
            lambda undo: self._engine.close_card(
                undo, account_id, interaction_id, InteractionStatus.DISMISSED, None
            )
        )

    async def invalidate_for_revision(
        self, account_id: str, case_key: CaseKey, current_revision: int
    ) -> tuple[str, ...]:
        return self._engine.write(
            lambda undo: self._engine.invalidate(undo, account_id, case_key, current_revision)
        )

    async def invalidate_case_cards(self, account_id: str, case_key: CaseKey) -> tuple[str, ...]:
        return self._engine.write(
            lambda undo: self._engine.invalidate(undo, account_id, case_key, None)
        )

    async def expire_due(self, now: int, limit: int) -> tuple[Interaction, ...]:
        return self._engine.write(lambda undo: self._engine.expire_due(undo, now, limit))


class MemoryJournal(_Role):
    async def get(self, account_id: str, command_id: str) -> JournalEntry:
        return self._engine.read(lambda: self._engine.entry(account_id, command_id))

    async def get_by_key(self, account_id: str, idempotency_key: str) -> JournalEntry:
        def read() -> JournalEntry:
            command_id = self._engine.t.journal_by_key.get((account_id, idempotency_key))
            if command_id is None:
                raise NotFound()
            return self._engine.entry(account_id, command_id)

        return self._engine.read(read)

    async def for_turn(self, account_id: str, turn_id: str) -> tuple[JournalEntry, ...]:
        return self._engine.read(lambda: tuple(self._engine.journal_for_turn(account_id, turn_id)))

    async def unsettled_for_turn(self, account_id: str, turn_id: str) -> tuple[JournalEntry, ...]:
        entries = self._engine.read(lambda: self._engine.journal_for_turn(account_id, turn_id))
        return tuple(entry for entry in entries if entry.status.is_unsettled)

    async def begin(self, entry: JournalEntry) -> JournalAdmission:
        self._engine.faults.reach(FaultPoint.BEFORE_JOURNAL_INSERT)
        admission = self._engine.write(lambda undo: self._engine.begin(undo, entry))
        if isinstance(admission, Fresh):
            self._engine.faults.reach(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT)
        return admission

    async def mark_executing(self, account_id: str, command_id: str) -> JournalEntry:
        return self._engine.write(
            lambda undo: self._engine.mark_executing(undo, account_id, command_id)
        )

    async def complete(
        self, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry:
        return self._engine.write(
            lambda undo: self._engine.complete(undo, account_id, command_id, outcome)
        )


class MemoryEvents(_Role):
    async def get_by_ids(
        self, account_id: str, event_ids: Sequence[str]
    ) -> tuple[DomainEvent, ...]:
        return self._engine.read(lambda: self._engine.get_by_ids(account_id, event_ids))

    async def list_for_case(
        self, account_id: str, case_key: CaseKey, since_revision: int, limit: int
    ) -> tuple[DomainEvent, ...]:
        return self._engine.read(
            lambda: self._engine.list_for_case(account_id, case_key, since_revision, limit)
        )

    async def read_from(self, account_id: str, cursor: EventCursor, limit: int) -> EventPage:
        return self._engine.read(lambda: self._engine.read_from(account_id, cursor, limit))

    async def append(
        self, account_id: str, events: Sequence[DomainEvent]
    ) -> tuple[DomainEvent, ...]:
        appended = self._engine.write(lambda undo: self._engine.append(undo, account_id, events))
        self._engine.faults.reach(FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK)
        return appended


class MemoryOutbox(_Role):
    async def get(self, outbox_id: str) -> OutboxEntry:
        return self._engine.read(lambda: self._engine.row(outbox_id))

    async def list_for_command(self, command_id: str) -> tuple[OutboxEntry, ...]:
        return self._engine.read(lambda: self._engine.rows_for_command(command_id))

    async def enqueue(self, entry: OutboxEntry) -> OutboxEntry:
        return self._engine.write(lambda undo: self._engine.enqueue(undo, entry))

    async def claim_due(self, now: int, limit: int, worker_id: str) -> tuple[OutboxEntry, ...]:
        self._engine.faults.reach(FaultPoint.BEFORE_OUTBOX_DISPATCH)
        return self._engine.write(lambda undo: self._engine.claim_due(undo, now, limit, worker_id))

    async def mark_completed(self, outbox_id: str) -> OutboxEntry:
        self._engine.faults.reach(FaultPoint.AFTER_OUTBOX_DISPATCH)
        return self._engine.write(lambda undo: self._engine.mark_completed(undo, outbox_id))

    async def mark_failed(
        self, outbox_id: str, reason: str, retry_at: int | None = None
    ) -> OutboxEntry:
        self._engine.faults.reach(FaultPoint.AFTER_OUTBOX_DISPATCH)
        return self._engine.write(
            lambda undo: self._engine.mark_failed(undo, outbox_id, reason, retry_at)
        )

    async def mark_outcome_unknown(
        self, outbox_id: str, remote_ref: str | None = None
    ) -> OutboxEntry:
        self._engine.faults.reach(FaultPoint.AFTER_OUTBOX_DISPATCH)
        return self._engine.write(
            lambda undo: self._engine.mark_outcome_unknown(undo, outbox_id, remote_ref)
        )

    async def reschedule(self, outbox_id: str, at: int) -> OutboxEntry:
        return self._engine.write(lambda undo: self._engine.reschedule(undo, outbox_id, at))

    async def release_expired_claims(self, claimed_before: int) -> int:
        return self._engine.write(
            lambda undo: self._engine.release_expired_claims(undo, claimed_before)
        )


class MemoryReplay(_Role):
    async def get(self, account_id: str, turn_id: str) -> ReplayRecord:
        return self._engine.read(lambda: self._engine.replay_record(account_id, turn_id))

    async def get_by_token(self, account_id: str, replay_token: str) -> ReplayRecord:
        def read() -> ReplayRecord:
            turn_id = self._engine.t.replay_by_token.get((account_id, replay_token))
            if turn_id is None:
                raise NotFound()
            return self._engine.replay_record(account_id, turn_id)

        return self._engine.read(read)

    async def for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[ReplayRecord, ...]:
        return self._engine.read(
            lambda: self._engine.replay_for_conversation(account_id, conversation_id)
        )

    async def last_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> ReplayRecord | None:
        return self._engine.read(
            lambda: self._engine.last_replay_for_conversation(account_id, conversation_id)
        )

    async def put(self, record: ReplayRecord) -> None:
        self._engine.write(lambda undo: self._engine.put_replay(undo, record))


class MemoryCommits(_Role):
    async def commit(self, bundle: CommitBundle) -> CommitResult:
        bundle.require_valid()
        return self._engine.write(lambda undo: self._engine.commit(undo, bundle))


class MemoryStores(Stores):
    """Every role in memory, sharing one state, one lock, one clock and one fault plan."""

    def __init__(self, *, clock: Clock | None = None, faults: FaultPlan | None = None) -> None:
        self.engine = _Engine(clock if clock is not None else system_clock, faults or FaultPlan())
        super().__init__(
            conversations=MemoryConversations(self.engine),
            interactions=MemoryInteractions(self.engine),
            journal=MemoryJournal(self.engine),
            events=MemoryEvents(self.engine),
            outbox=MemoryOutbox(self.engine),
            replay=MemoryReplay(self.engine),
            commits=MemoryCommits(self.engine),
        )

    @property
    def clock(self) -> Clock:
        return self.engine.clock

    @property
    def faults(self) -> FaultPlan:
        """Arm a fault: `stores.faults.arm(FaultPoint.BEFORE_JOURNAL_INSERT)`."""
        return self.engine.faults
