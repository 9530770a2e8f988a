"""MemoryStores' operations on its state: storage only; every decision comes from `_rules`.

Operations run under `lock`; a write takes an undo log and leaves no trace when it raises. An
operation outside a transaction waits at the `gate` while a transaction is open; an engine bound
to a transaction (`bound`) writes into the transaction's undo log instead, so the whole
transaction is undone when it fails.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Final, TypeVar

from turnframe_core.audit_chain import ChainLink
from turnframe_core.cases import CaseKey
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_core.replay import CommandOutcome, ReplayRecord, TurnPhase
from turnframe_core.turn import AssistantTurn
from turnframe_store import _rules as rules
from turnframe_store._rules import StreamEntry, Verdict
from turnframe_store.clock import Clock
from turnframe_store.errors import Conflict, NotFound, StoreError
from turnframe_store.faults import FaultPlan, FaultPoint
from turnframe_store.locks import ConversationLocks
from turnframe_store.memory._state import Key3, _Tables, _UndoLog
from turnframe_store.memory._transaction import _Gate, _Transaction
from turnframe_store.records import (
    OUTBOX_CLAIM_EXPIRED,
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
    UserTurnRecord,
)

__all__ = ["_Engine"]

R = TypeVar("R")

_NO_CLAIM: Final[dict[str, Any]] = {
    "claim_worker_id": None,
    "claim_taken_at": None,
    "dispatch_started_at": None,
}


def _sequence(event: DomainEvent) -> int:
    return event.sequence or 0


def _case3(account_id: str, workflow: str, case_id: str) -> Key3:
    return (account_id, workflow, case_id)


def _case_of(card: Interaction) -> Key3:
    return _case3(card.account_id, card.case_ref.workflow, card.case_ref.case_id)


class _Engine:
    """The shared state and every operation on it. Operations run under `lock`; writes take an
    undo log and leave no trace when they raise."""

    def __init__(
        self,
        clock: Clock,
        faults: FaultPlan,
        *,
        tables: _Tables | None = None,
        lock: threading.Lock | None = None,
        gate: _Gate | None = None,
        transaction: _Transaction | None = None,
        conversation_locks: ConversationLocks | None = None,
    ) -> None:
        self.lock = lock if lock is not None else threading.Lock()
        self.gate = gate if gate is not None else _Gate()
        self.clock = clock
        self.faults = faults
        self.t = tables if tables is not None else _Tables()
        self.transaction = transaction
        self.conversation_locks = conversation_locks or ConversationLocks()

    def bound(self, transaction: _Transaction) -> _Engine:
        """This engine's state, written inside `transaction`."""
        return _Engine(
            self.clock,
            self.faults,
            tables=self.t,
            lock=self.lock,
            gate=self.gate,
            transaction=transaction,
            conversation_locks=self.conversation_locks,
        )

    async def write(self, op: Callable[[_UndoLog], R]) -> R:
        tx = self.transaction
        if tx is not None:
            tx.usable()
            if tx.read_only:
                raise Conflict("nothing is written through a snapshot")
            with self.lock:
                undo = _UndoLog()
                try:
                    value = op(undo)
                except BaseException as exc:
                    undo.rollback()
                    if isinstance(exc, StoreError):
                        tx.failure = exc
                    raise
                tx.undo.extend(undo)
                return value
        await self.gate.enter()
        try:
            with self.lock:
                undo = _UndoLog()
                try:
                    return op(undo)
                except BaseException:
                    undo.rollback()
                    raise
        finally:
            self.gate.leave()

    async def read(self, op: Callable[[], R]) -> R:
        tx = self.transaction
        if tx is not None:
            tx.usable()
            with self.lock:
                try:
                    return op()
                except StoreError as exc:
                    if not isinstance(exc, NotFound):
                        tx.failure = exc
                    raise
        await self.gate.enter()
        try:
            with self.lock:
                return op()
        finally:
            self.gate.leave()

    # --- conversations --------------------------------------------------------------------------

    def ensure_conversation(
        self, undo: _UndoLog, account_id: str, conversation_id: str
    ) -> ConversationRecord:
        key = (account_id, conversation_id)
        found = self.t.conversations.get(key)
        if found is not None:
            return found
        record = rules.new_conversation(account_id, conversation_id, self.clock())
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
        key = (account_id, turn.turn_id)
        user = self.t.user_turns.get(key)
        text = rules.answer(
            turn,
            None if user is None else user.conversation_id,
            self.t.assistant_turns.get(key),
        )
        if text is not None:
            undo.put(self.t.assistant_turns, key, text)
        if phase is not None:
            self.set_phase(undo, account_id, turn.turn_id, phase)

    def get_assistant_turn(self, account_id: str, turn_id: str) -> str:
        return rules.found(self.t.assistant_turns.get((account_id, turn_id)))

    def set_phase(
        self, undo: _UndoLog, account_id: str, turn_id: str, phase: TurnPhase
    ) -> PhaseMarker:
        key = (account_id, turn_id)
        marker = rules.found(self.t.phases.get(key))
        if rules.move_phase(marker, phase) is Verdict.REPEAT:
            return marker
        moved = marker.model_copy(update={"phase": phase, "updated_at": self.clock()})
        undo.put(self.t.phases, key, moved)
        if phase in rules.TERMINAL_PHASES:
            undo.remove(self.t.unfinished, key)
        return moved

    def list_turns(self, account_id: str, conversation_id: str) -> tuple[UserTurnRecord, ...]:
        ids = self.t.turns_by_conversation.get((account_id, conversation_id), ())
        turns = [self.t.user_turns[(account_id, turn_id)] for turn_id in ids]
        return tuple(sorted(turns, key=lambda r: (r.received_at, r.turn_id)))

    def recent_turns(self, account_id: str, conversation_id: str, limit: int) -> tuple[str, ...]:
        texts: list[str] = []
        for record in reversed(self.list_turns(account_id, conversation_id)):
            text = self.t.assistant_turns.get((account_id, record.turn_id))
            if text is not None:
                texts.append(text)
                if len(texts) == limit:
                    break
        return tuple(reversed(texts))

    def list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]:
        markers = [self.t.phases[key] for key in self.t.unfinished]
        markers.sort(key=lambda m: (m.updated_at, m.account_id, m.turn_id))
        return tuple(markers[:limit])

    # --- stream events --------------------------------------------------------------------------

    def append_stream_events(
        self, undo: _UndoLog, account_id: str, turn_id: str, entries: tuple[StreamEntry, ...]
    ) -> None:
        key = (account_id, turn_id)
        if key not in self.t.user_turns:
            raise NotFound()
        log = self.t.stream.get(key, [])
        low, high = rules.stream_window(entries)
        known = rules.stream_append(entries, log[max(low - 1, 0) : high])
        for entry in entries[known:]:
            undo.index(self.t.stream, key, entry)

    def stream_events(
        self, account_id: str, turn_id: str, after_sequence: int, limit: int
    ) -> tuple[str, ...]:
        log = self.t.stream.get((account_id, turn_id), [])
        start = max(after_sequence, 0)
        return tuple(entry.text for entry in log[start : start + limit])

    def stream_tail(self, account_id: str, turn_id: str) -> str | None:
        log = self.t.stream.get((account_id, turn_id))
        return log[-1].text if log else None

    def prune_stream_events(self, undo: _UndoLog, finished_before: int, limit: int) -> int:
        ended = sorted(
            (log[-1].at, key)
            for key, log in self.t.stream.items()
            if log
            and log[-1].terminal
            and log[-1].at < finished_before
            and _turn_ended(self.t.phases.get(key))
        )[:limit]
        for _, key in ended:
            undo.remove(self.t.stream, key)
        return len(ended)

    # --- interactions ---------------------------------------------------------------------------

    def card(self, account_id: str, interaction_id: str) -> Interaction:
        return rules.found(self.t.cards.get((account_id, interaction_id)))

    def cards_of_case(self, account_id: str, case_key: CaseKey) -> list[Interaction]:
        ids = self.t.cards_by_case.get(_case3(account_id, case_key.workflow, case_key.case_id), ())
        cards = [self.t.cards[(account_id, interaction_id)] for interaction_id in ids]
        return sorted(cards, key=rules.by_creation)

    def open_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[Interaction, ...]:
        ids = self.t.cards_by_conversation.get((account_id, conversation_id), ())
        cards = [self.t.cards[(account_id, interaction_id)] for interaction_id in ids]
        opened = [card for card in cards if card.status in rules.OPEN_CARD_STATUSES]
        return tuple(sorted(opened, key=rules.by_creation))

    def _move_card(self, undo: _UndoLog, card: Interaction) -> Interaction:
        key = (card.account_id, card.interaction_id)
        undo.put(self.t.cards, key, card)
        if card.status not in rules.OPEN_CARD_STATUSES:
            case = _case_of(card)
            if self.t.blocking_slot.get(case) == card.interaction_id:
                undo.remove(self.t.blocking_slot, case)
            undo.remove(self.t.cards_expiring, key)
        return card

    def insert_card(self, undo: _UndoLog, card: Interaction) -> Interaction:
        rules.new_card(card)
        key = (card.account_id, card.interaction_id)
        stored = self.t.cards.get(key)
        if stored is not None:
            return rules.reinsert(stored, card)
        case = _case_of(card)
        rules.blocking_slot(card, self.t.blocking_slot.get(case))
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
        holder_id = self.t.blocking_slot.get(_case_of(card)) if card.blocking else None
        if holder_id is not None and holder_id != card.interaction_id:
            holder = self.t.cards[(card.account_id, holder_id)]
            rules.replace_holder(holder)
            self._move_card(undo, holder.transition(InteractionStatus.INVALIDATED, at=self.clock()))
            replaced = (holder_id,)
        self.insert_card(undo, card)
        return replaced

    def begin_resolution(
        self, undo: _UndoLog, account_id: str, interaction_id: str, option_id: str
    ) -> Interaction:
        card = self.card(account_id, interaction_id)
        rules.claim(card, option_id)
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
        event_ids: Iterable[str],
    ) -> Interaction:
        card = self.card(account_id, interaction_id)
        events = tuple(event_ids)
        if rules.finish(card, status, option_id, events) is Verdict.REPEAT:
            return card
        settled = card.transition(
            status, at=self.clock(), option_id=card.resolved_option_id, event_ids=events
        )
        return self._move_card(undo, settled)

    def close_card(
        self,
        undo: _UndoLog,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
    ) -> Interaction:
        card = self.card(account_id, interaction_id)
        if rules.close(card, status, option_id) is Verdict.REPEAT:
            return card
        return self._move_card(undo, card.transition(status, at=self.clock(), option_id=option_id))

    def invalidate(
        self,
        undo: _UndoLog,
        account_id: str,
        case_key: CaseKey,
        current_revision: int | None,
    ) -> tuple[str, ...]:
        invalidated: list[str] = []
        for card in self.cards_of_case(account_id, case_key):
            if rules.stale(card, current_revision):
                moved = card.transition(InteractionStatus.INVALIDATED, at=self.clock())
                self._move_card(undo, moved)
                invalidated.append(card.interaction_id)
        return tuple(invalidated)

    def expire_due(self, undo: _UndoLog, now: int, limit: int) -> tuple[Interaction, ...]:
        cards = (self.t.cards[key] for key in self.t.cards_expiring)
        due = [card for card in cards if rules.due_to_expire(card, now)]
        due.sort(key=rules.by_expiry)
        return tuple(
            self._move_card(undo, card.transition(InteractionStatus.EXPIRED, at=now))
            for card in due[:limit]
        )

    # --- command journal ------------------------------------------------------------------------

    def entry(self, account_id: str, command_id: str) -> JournalEntry:
        return rules.found(self.t.journal.get((account_id, command_id)))

    def begin(self, undo: _UndoLog, entry: JournalEntry) -> JournalAdmission:
        account_id = entry.account_id
        stored_id = self.t.journal_by_key.get((account_id, entry.idempotency_key))
        if stored_id is not None:
            return rules.readmit(self.t.journal[(account_id, stored_id)], entry)
        key = (account_id, entry.command_id)
        if key in self.t.journal:
            raise rules.command_id_taken()
        undo.put(self.t.journal, key, entry)
        undo.put(self.t.journal_by_key, (account_id, entry.idempotency_key), entry.command_id)
        undo.index(self.t.journal_by_turn, (account_id, entry.turn_id), entry.command_id)
        return Fresh(entry=entry)

    def mark_executing(self, undo: _UndoLog, account_id: str, command_id: str) -> JournalEntry:
        entry = self.entry(account_id, command_id)
        if rules.start(entry) is Verdict.REPEAT:
            return entry
        moved = entry.model_copy(update={"status": JournalStatus.EXECUTING})
        undo.put(self.t.journal, (account_id, command_id), moved)
        return moved

    def complete(
        self, undo: _UndoLog, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry:
        entry = self.entry(account_id, command_id)
        if rules.complete(entry, outcome) is Verdict.REPEAT:
            return entry
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
        problem = rules.batch_problem(account_id, batch)
        judged = batch if problem is None else batch[: problem[0]]
        if any((account_id, event.event_id) in self.t.events for event in judged):
            raise rules.event_stored()
        if problem is not None:
            raise problem[1]
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
        page = tuple(stream[start : start + limit])
        next_cursor = EventCursor(sequence=_sequence(page[-1])) if page else cursor
        return EventPage(events=page, next_cursor=next_cursor)

    # --- outbox ---------------------------------------------------------------------------------

    def row(self, outbox_id: str) -> OutboxEntry:
        return rules.found(self.t.outbox.get(outbox_id))

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
        rows = (self.t.outbox[outbox_id] for outbox_id in self.t.outbox_pending)
        due = [row for row in rows if rules.due(row, now)]
        due.sort(key=rules.by_enqueueing)
        return tuple(
            self._move_row(
                undo,
                row,
                status=rules.OUTBOX_CLAIM.target,
                attempt_count=row.attempt_count + 1,
                claim_worker_id=worker_id,
                claim_taken_at=now,
            )
            for row in due[:limit]
        )

    def begin_dispatch(self, undo: _UndoLog, outbox_id: str, attempt: int, now: int) -> OutboxEntry:
        row = self.row(outbox_id)
        rules.begin_dispatch_row(row, attempt)
        return self._move_row(undo, row, dispatch_started_at=now)

    def mark_completed(self, undo: _UndoLog, outbox_id: str, attempt: int | None) -> OutboxEntry:
        row = self.row(outbox_id)
        if rules.complete_row(row, attempt) is Verdict.REPEAT:
            return row
        return self._move_row(
            undo,
            row,
            status=rules.OUTBOX_COMPLETE.target,
            completed_at=self.clock(),
            **_NO_CLAIM,
        )

    def mark_failed(
        self,
        undo: _UndoLog,
        outbox_id: str,
        reason: str,
        retry_at: int | None,
        attempt: int | None,
    ) -> OutboxEntry:
        row = self.row(outbox_id)
        if rules.fail_row(row, reason, retry_at, attempt) is Verdict.REPEAT:
            return row
        if retry_at is not None:
            return self._move_row(
                undo,
                row,
                status=rules.OUTBOX_RETRY.target,
                next_attempt_at=retry_at,
                last_failure=reason,
                **_NO_CLAIM,
            )
        return self._move_row(
            undo,
            row,
            status=rules.OUTBOX_FAIL.target,
            completed_at=self.clock(),
            last_failure=reason,
            **_NO_CLAIM,
        )

    def mark_outcome_unknown(
        self,
        undo: _UndoLog,
        outbox_id: str,
        remote_ref: str | None,
        check_at: int | None,
        attempt: int | None = None,
    ) -> OutboxEntry:
        row = self.row(outbox_id)
        if rules.report_unknown(row, remote_ref, attempt) is Verdict.REPEAT:
            return row
        first = row.status is not rules.OUTBOX_REPORT_UNKNOWN.target
        return self._move_row(
            undo,
            row,
            status=rules.OUTBOX_REPORT_UNKNOWN.target,
            remote_ref=remote_ref if remote_ref is not None else row.remote_ref,
            next_attempt_at=check_at if first else row.next_attempt_at,
            **_NO_CLAIM,
        )

    def unclaim(self, undo: _UndoLog, outbox_id: str, worker_id: str) -> OutboxEntry:
        row = self.row(outbox_id)
        rules.unclaim_row(row, worker_id)
        return self._move_row(
            undo,
            row,
            status=rules.OUTBOX_UNCLAIM.target,
            attempt_count=max(row.attempt_count - 1, 0),
            next_attempt_at=None,
            **_NO_CLAIM,
        )

    def claim_reconciliations(
        self, undo: _UndoLog, now: int, limit: int, until: int
    ) -> tuple[OutboxEntry, ...]:
        due = [row for row in self.t.outbox.values() if rules.due_for_reconciliation(row, now)]
        due.sort(key=rules.by_enqueueing)
        return tuple(self._move_row(undo, row, next_attempt_at=until) for row in due[:limit])

    def open_rows(self) -> int:
        return sum(1 for row in self.t.outbox.values() if not row.status.is_terminal)

    def reschedule(self, undo: _UndoLog, outbox_id: str, at: int) -> OutboxEntry:
        row = self.row(outbox_id)
        rules.reschedule_row(row)
        return self._move_row(undo, row, status=rules.OUTBOX_RESCHEDULE.target, next_attempt_at=at)

    def release_expired_claims(self, undo: _UndoLog, claimed_before: int) -> int:
        rows = (self.t.outbox[outbox_id] for outbox_id in self.t.outbox_dispatching)
        stale = [row for row in rows if rules.claim_expired(row, claimed_before)]
        stale.sort(key=lambda r: (r.claim_taken_at or 0, r.outbox_id))
        for row in stale:
            began = row.dispatch_started_at is not None
            self._move_row(
                undo,
                row,
                status=rules.OUTBOX_RELEASE.target,
                next_attempt_at=None,
                last_failure=OUTBOX_CLAIM_EXPIRED if began else row.last_failure,
                **_NO_CLAIM,
            )
        return len(stale)

    def rows_for_command(self, command_id: str) -> tuple[OutboxEntry, ...]:
        rows = [self.t.outbox[i] for i in self.t.outbox_by_command.get(command_id, ())]
        return tuple(sorted(rows, key=rules.by_enqueueing))

    # --- replay records -------------------------------------------------------------------------

    def put_replay(self, undo: _UndoLog, record: ReplayRecord) -> None:
        rules.derived_token(record)
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
        elif rules.put_replay(stored, record) is Verdict.MOVE:
            undo.put(self.t.replay, key, record)
        if record.phase.is_terminal and key not in self.t.audit_linked:
            conversation = (record.account_id, record.conversation_id)
            chain = self.t.audit_chain.get(conversation, [])
            link = ChainLink.after(chain[-1] if chain else None, record)
            undo.index(self.t.audit_chain, conversation, link)
            undo.put(self.t.audit_linked, key, None)

    def audit_chain(self, account_id: str, conversation_id: str) -> tuple[ChainLink, ...]:
        return tuple(self.t.audit_chain.get((account_id, conversation_id), ()))

    def accounts_with_token(self, replay_token: str) -> tuple[str, ...]:
        return tuple(sorted({a for (a, token) in self.t.replay_by_token if token == replay_token}))

    def accounts_with_conversation(self, conversation_id: str) -> tuple[str, ...]:
        found = {a for (a, c) in self.t.replay_by_conversation if c == conversation_id}
        return tuple(sorted(found))

    def replay_record(self, account_id: str, turn_id: str) -> ReplayRecord:
        return rules.found(self.t.replay.get((account_id, turn_id)))

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

    def commit(
        self, undo: _UndoLog, bundle: CommitBundle, deferred: list[StoreError] | None = None
    ) -> CommitResult:
        """Write the bundle; a fault that fires once it committed goes to `deferred`."""
        writer = _BundleWriter(self, undo, bundle, deferred if deferred is not None else [])
        rules.write_bundle(bundle, writer)
        return CommitResult(
            admissions=tuple(writer.admissions),
            events=writer.events,
            invalidated=tuple(writer.invalidated),
        )


class _BundleWriter:
    """Applies each item of one bundle to the engine, on the bundle's undo log."""

    def __init__(
        self,
        engine: _Engine,
        undo: _UndoLog,
        bundle: CommitBundle,
        deferred: list[StoreError] | None = None,
    ) -> None:
        self.engine = engine
        self.undo = undo
        #: a fault to raise once the bundle committed
        self.deferred: list[StoreError] = deferred if deferred is not None else []
        self.account_id = bundle.account_id
        self.turn_id = bundle.turn_id
        self.events: tuple[DomainEvent, ...] = ()
        self.invalidated: list[str] = []
        self.admissions: list[JournalAdmission] = []

    def accept(self, record: UserTurnRecord) -> None:
        self.engine.ensure_conversation(self.undo, record.account_id, record.conversation_id)
        self.engine.append_user_turn(self.undo, record)

    def admit(self, entry: JournalEntry) -> None:
        self.admissions.append(self.engine.begin(self.undo, entry))

    def start(self, command_id: str) -> None:
        self.engine.mark_executing(self.undo, self.account_id, command_id)

    def answer(self, turn: AssistantTurn) -> None:
        self.engine.append_assistant_turn(self.undo, self.account_id, turn, None)

    def complete(self, command_id: str, outcome: CommandOutcome) -> None:
        self.engine.complete(self.undo, self.account_id, command_id, outcome)

    def append(self, events: tuple[DomainEvent, ...]) -> None:
        self.events = self.engine.append(self.undo, self.account_id, events)

    def finish(
        self,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
        event_ids: tuple[str, ...],
    ) -> None:
        engine, undo = self.engine, self.undo
        engine.finish(undo, self.account_id, interaction_id, status, option_id, event_ids)

    def invalidate(self, case_key: CaseKey, current_revision: int) -> None:
        moved = self.engine.invalidate(self.undo, self.account_id, case_key, current_revision)
        self.invalidated.extend(moved)

    def insert(self, card: Interaction) -> None:
        self.engine.insert_card(self.undo, card)

    def enqueue(self, row: OutboxEntry) -> None:
        self.engine.enqueue(self.undo, row)

    def put_replay(self, record: ReplayRecord) -> None:
        self.engine.put_replay(self.undo, record)

    def set_phase(self, phase: TurnPhase) -> None:
        self.engine.set_phase(self.undo, self.account_id, self.turn_id, phase)

    def stream(self, entries: tuple[StreamEntry, ...]) -> None:
        self.engine.append_stream_events(self.undo, self.account_id, self.turn_id, entries)

    def reach(self, point: FaultPoint) -> None:
        if point is FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK:  # fires once committed
            fault = self.engine.faults.take(point)
            if fault is not None:
                self.deferred.append(fault)
            return
        self.engine.faults.reach(point)


def _turn_ended(marker: PhaseMarker | None) -> bool:
    """Whether the turn's marker is terminal (a log is pruned only once its turn ended)."""
    return marker is not None and marker.phase in rules.TERMINAL_PHASES
