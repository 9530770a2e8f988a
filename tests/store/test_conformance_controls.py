"""Broken-store controls: each breaks one rule of MemoryStores and must fail exactly its check.

The five rules of DESIGN §6 each have a control here: total account scoping
(`foreign_card_visible`), compare-and-swap (`blind_journal_completion`), immutability
(`mutable_card_payload`, `rewritten_assistant_turn`), specified ordering
(`unsorted_journal_for_turn`) and stable codes (`loose_conflict_code`). Every other check has a
control too, so no check in the suite is one that cannot fail.

Most controls break a store hook (`_insert`, `_complete`, …), behind the argument rules the
shared roles apply; the controls of the argument checks break those rules instead.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from turnframe_core.audit_chain import ChainLink
from turnframe_core.canonical import canonical_json
from turnframe_core.cases import CaseKey
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_core.replay import CommandOutcome, ReplayRecord, TurnPhase
from turnframe_core.stream import StreamEvent, is_terminal, parse_stream_event
from turnframe_core.turn import AssistantTurn
from turnframe_store import Conflict, InvalidRecord, NotFound, Stores
from turnframe_store.conformance import CHECKS, run_all
from turnframe_store.memory import (
    MemoryBundleWriter,
    MemoryCommits,
    MemoryConversations,
    MemoryEvents,
    MemoryInteractions,
    MemoryJournal,
    MemoryOutbox,
    MemoryReplay,
    MemoryStores,
    MemoryTimers,
    MemoryTransaction,
    UndoLog,
)
from turnframe_store.records import (
    CommitBundle,
    CommitResult,
    ConversationRecord,
    EventCursor,
    EventPage,
    Fresh,
    JournalAdmission,
    JournalEntry,
    OutboxEntry,
    OutboxStatus,
    PhaseMarker,
    Replay,
    TimerRecord,
    TimerStatus,
    UserTurnRecord,
)
from turnframe_store.roles import conversations as turn_rules
from turnframe_store.roles import rules
from turnframe_store.roles import timers as timer_rules
from turnframe_store.roles.conversations import StreamEntry

# --- conversations ------------------------------------------------------------------------------


class RecreatedConversation(MemoryConversations):
    """ensure_conversation rewrites an existing conversation instead of returning it."""

    async def ensure_conversation(
        self, account_id: str, conversation_id: str
    ) -> ConversationRecord:
        engine = self.engine
        key = (account_id, conversation_id)
        found = await engine.read(lambda: engine.t.conversations.get(key))
        if found is None:
            return await super().ensure_conversation(account_id, conversation_id)
        moved = found.model_copy(update={"created_at": found.created_at + 1})
        await engine.write(lambda undo: undo.put(engine.t.conversations, key, moved))
        return moved


class RewrittenAssistantTurn(MemoryConversations):
    """A stored assistant turn is overwritten by the next one."""

    async def _append_assistant_turn(
        self, account_id: str, turn: AssistantTurn, phase: TurnPhase | None
    ) -> None:
        engine = self.engine

        def write(undo: UndoLog) -> None:
            undo.remove(engine.t.assistant_turns, (account_id, turn.turn_id))
            self.append_assistant_turn_in(undo, account_id, turn, phase)

        await engine.write(write)


class PhaseLeavesTerminal(MemoryConversations):
    """set_phase moves any marker anywhere."""

    async def _set_phase(self, account_id: str, turn_id: str, phase: TurnPhase) -> PhaseMarker:
        engine = self.engine

        def write(undo: UndoLog) -> PhaseMarker:
            marker = engine.t.phases.get((account_id, turn_id))
            if marker is None:
                raise NotFound()
            moved = marker.model_copy(update={"phase": phase, "updated_at": engine.clock()})
            undo.put(engine.t.phases, (account_id, turn_id), moved)
            if phase.is_terminal:
                undo.remove(engine.t.unfinished, (account_id, turn_id))
            else:
                undo.put(engine.t.unfinished, (account_id, turn_id), None)
            return moved

        return await engine.write(write)


class ForgetfulUnfinished(MemoryConversations):
    """A turn interrupted right after it was received is not listed for recovery."""

    async def list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]:
        markers = await super().list_unfinished_turns(limit)
        return tuple(m for m in markers if m.phase is not TurnPhase.RECEIVED)


class _LooseConflict(Conflict):
    code = "conflict"


class LooseConflictCode(MemoryConversations):
    """A repeated user turn raises a Conflict without its stable code."""

    async def append_user_turn(self, record: UserTurnRecord) -> None:
        try:
            await super().append_user_turn(record)
        except Conflict as exc:
            raise _LooseConflict(exc.message) from None


# --- stream logs --------------------------------------------------------------------------------


class StreamByTime(MemoryConversations):
    """stream_events sorts a log by the events' times instead of their sequences."""

    async def _stream_events(
        self, account_id: str, turn_id: str, after_sequence: int, limit: int
    ) -> tuple[str, ...]:
        texts = await super()._stream_events(account_id, turn_id, after_sequence, limit)
        return tuple(sorted(texts, key=lambda text: parse_stream_event(text).at))


class InclusiveStreamCursor(MemoryConversations):
    """stream_events also returns the event at `after_sequence`."""

    async def _stream_events(
        self, account_id: str, turn_id: str, after_sequence: int, limit: int
    ) -> tuple[str, ...]:
        return await super()._stream_events(account_id, turn_id, after_sequence - 1, limit)


class FirstAsTail(MemoryConversations):
    """stream_tail returns the first logged event."""

    async def _stream_tail(self, account_id: str, turn_id: str) -> str | None:
        first = await self._stream_events(account_id, turn_id, 0, 1)
        return first[0] if first else None


def _logged(engine: Any, account_id: str, entries: tuple[StreamEntry, ...]) -> list[StreamEntry]:
    return list(engine.t.stream.get((account_id, entries[0].turn_id), []))


class RefusedStreamRepeat(MemoryConversations):
    """append_stream_events refuses every event at a logged sequence, even the same one."""

    async def _append_stream_events(
        self, account_id: str, entries: tuple[StreamEntry, ...]
    ) -> None:
        if entries[0].sequence <= len(_logged(self.engine, account_id, entries)):
            raise Conflict("the sequence is logged")
        await super()._append_stream_events(account_id, entries)


class SequenceOnlyRepeat(MemoryConversations):
    """append_stream_events takes any event at a logged sequence for the logged one."""

    async def _append_stream_events(
        self, account_id: str, entries: tuple[StreamEntry, ...]
    ) -> None:
        logged = _logged(self.engine, account_id, entries)
        as_logged = tuple(
            logged[e.sequence - 1] if e.sequence <= len(logged) else e for e in entries
        )
        await super()._append_stream_events(account_id, as_logged)


async def _blind_stream(engine: Any, account_id: str, entries: tuple[StreamEntry, ...]) -> None:
    """Log the entries after the logged ones, judging nothing."""

    def write(undo: UndoLog) -> None:
        for entry in entries:
            undo.index(engine.t.stream, (account_id, entry.turn_id), entry)

    await engine.write(write)


class GapAccepted(MemoryConversations):
    """append_stream_events logs a batch that leaves a gap after an open log."""

    async def _append_stream_events(
        self, account_id: str, entries: tuple[StreamEntry, ...]
    ) -> None:
        logged = _logged(self.engine, account_id, entries)
        turn = (account_id, entries[0].turn_id) in self.engine.t.user_turns
        open_log = not logged or not logged[-1].terminal
        if turn and open_log and entries[0].sequence > len(logged) + 1:
            await _blind_stream(self.engine, account_id, entries)
            return
        await super()._append_stream_events(account_id, entries)


class StreamPastTerminal(MemoryConversations):
    """append_stream_events logs events after a terminal one."""

    async def _append_stream_events(
        self, account_id: str, entries: tuple[StreamEntry, ...]
    ) -> None:
        logged = _logged(self.engine, account_id, entries)
        if logged and logged[-1].terminal and entries[0].sequence == len(logged) + 1:
            await _blind_stream(self.engine, account_id, entries)
            return
        await super()._append_stream_events(account_id, entries)


class UnjudgedStreamBatch(MemoryConversations):
    """append_stream_events logs a batch without judging it on its own."""

    async def append_stream_events(self, account_id: str, events: Sequence[StreamEvent]) -> None:
        rules.text(account_id, *(event.turn_id for event in events))
        entries = tuple(
            StreamEntry(e.turn_id, e.sequence, e.type, is_terminal(e), e.at, canonical_json(e))
            for e in events
        )
        await self._append_stream_events(account_id, entries)


class StreamWithoutTurn(MemoryConversations):
    """append_stream_events logs a stream for a turn it does not have."""

    async def _append_stream_events(
        self, account_id: str, entries: tuple[StreamEntry, ...]
    ) -> None:
        engine = self.engine
        key = (account_id, entries[0].turn_id)
        if key in engine.t.user_turns:
            await super()._append_stream_events(account_id, entries)
            return

        def write(undo: UndoLog) -> None:
            log = engine.t.stream.get(key, [])
            low, high = turn_rules.stream_window(entries)
            known = turn_rules.stream_append(entries, log[max(low - 1, 0) : high])
            for entry in entries[known:]:
                undo.index(engine.t.stream, key, entry)

        await engine.write(write)


class ForeignStreamVisible(MemoryConversations):
    """stream_events finds a log by its turn id in any account."""

    async def _stream_events(
        self, account_id: str, turn_id: str, after_sequence: int, limit: int
    ) -> tuple[str, ...]:
        for owner, logged_turn in self.engine.t.stream:
            if logged_turn == turn_id:
                return await super()._stream_events(owner, turn_id, after_sequence, limit)
        return ()


class PruneIgnoresMarker(MemoryConversations):
    """prune_stream_events prunes an ended log whatever its turn's marker says."""

    async def _prune_stream_events(self, finished_before: int, limit: int) -> int:
        engine = self.engine

        def write(undo: UndoLog) -> int:
            ended = sorted(
                (log[-1].at, key)
                for key, log in engine.t.stream.items()
                if log and log[-1].terminal and log[-1].at < finished_before
            )[:limit]
            for _, key in ended:
                undo.remove(engine.t.stream, key)
            return len(ended)

        return await engine.write(write)


class InclusivePrune(MemoryConversations):
    """prune_stream_events also prunes logs that ended exactly at the cutoff."""

    async def _prune_stream_events(self, finished_before: int, limit: int) -> int:
        return await super()._prune_stream_events(finished_before + 1, limit)


# --- interactions -------------------------------------------------------------------------------


def _case_of(card: Interaction) -> tuple[str, str, str]:
    return (card.account_id, card.case_ref.workflow, card.case_ref.case_id)


class SecondBlockingCard(MemoryInteractions):
    """insert ignores the one-open-blocking-card-per-case slot."""

    async def _insert(self, interaction: Interaction) -> Interaction:
        engine = self.engine

        def write(undo: UndoLog) -> Interaction:
            undo.remove(engine.t.blocking_slot, _case_of(interaction))
            return self.insert_in(undo, interaction)

        return await engine.write(write)


class ForeignCardVisible(MemoryInteractions):
    """get finds a card by id in any account."""

    async def _get(self, account_id: str, interaction_id: str) -> Interaction:
        engine = self.engine
        for (_, found_id), card in engine.t.cards.items():
            if found_id == interaction_id:
                return card
        raise NotFound()


class ReplacingResolving(MemoryInteractions):
    """insert_replacing_blocking also replaces a card that is being resolved."""

    async def _insert_replacing_blocking(self, interaction: Interaction) -> tuple[str, ...]:
        engine = self.engine

        def write(undo: UndoLog) -> tuple[str, ...]:
            holder_id = engine.t.blocking_slot.get(_case_of(interaction))
            if holder_id is None or holder_id == interaction.interaction_id:
                self.insert_in(undo, interaction)
                return ()
            holder = engine.t.cards[(interaction.account_id, holder_id)]
            self.move_card(undo, holder.model_copy(update={"status": "invalidated"}))
            self.insert_in(undo, interaction)
            return (holder_id,)

        return await engine.write(write)


class BlindCardResolution(MemoryInteractions):
    """begin_resolution claims a card whatever its status."""

    async def _begin_resolution(
        self, account_id: str, interaction_id: str, option_id: str
    ) -> Interaction:
        engine = self.engine

        def write(undo: UndoLog) -> Interaction:
            card = self.card(account_id, interaction_id)
            if card.payload.option(option_id) is None:
                raise InvalidRecord("unknown option")
            claimed = card.model_copy(
                update={"status": InteractionStatus.RESOLVING, "resolved_option_id": option_id}
            )
            return self.move_card(undo, claimed)

        return await engine.write(write)


class MutableCardPayload(MemoryInteractions):
    """insert overwrites a stored card that has the same id."""

    async def _insert(self, interaction: Interaction) -> Interaction:
        engine = self.engine

        def write(undo: UndoLog) -> Interaction:
            key = (interaction.account_id, interaction.interaction_id)
            if key in engine.t.cards:
                undo.put(engine.t.cards, key, interaction)
                return interaction
            return self.insert_in(undo, interaction)

        return await engine.write(write)


class RevisionBlindInvalidation(MemoryInteractions):
    """invalidate_for_revision also invalidates revision-independent cards."""

    async def _invalidate(
        self, account_id: str, case_key: CaseKey, current_revision: int | None
    ) -> tuple[str, ...]:
        if current_revision is None:
            return await super()._invalidate(account_id, case_key, current_revision)
        engine = self.engine

        def write(undo: UndoLog) -> tuple[str, ...]:
            stale = [
                card
                for card in self.cards_of_case(account_id, case_key)
                if card.status is InteractionStatus.ACTIVE
                and card.bound_revision != current_revision
            ]
            for card in stale:
                self.move_card(
                    undo, card.transition(InteractionStatus.INVALIDATED, at=engine.clock())
                )
            return tuple(card.interaction_id for card in stale)

        return await engine.write(write)


class EagerExpiry(MemoryInteractions):
    """expire_due expires every active card that has an expiry, due or not."""

    async def _expire_due(self, now: int, limit: int) -> tuple[Interaction, ...]:
        engine = self.engine

        def write(undo: UndoLog) -> tuple[Interaction, ...]:
            cards = [engine.t.cards[key] for key in engine.t.cards_expiring]
            due = [c for c in cards if c.status is InteractionStatus.ACTIVE]
            due.sort(key=lambda c: (c.expires_at or 0, c.account_id, c.interaction_id))
            return tuple(
                self.move_card(undo, c.transition(InteractionStatus.EXPIRED, at=now))
                for c in due[:limit]
            )

        return await engine.write(write)


# --- journal ------------------------------------------------------------------------------------


class BlindJournalCompletion(MemoryJournal):
    """complete overwrites whatever outcome is stored."""

    async def _complete(
        self, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry:
        engine = self.engine

        def write(undo: UndoLog) -> JournalEntry:
            settled = self.entry(account_id, command_id).settled(outcome, at=engine.clock())
            undo.put(engine.t.journal, (account_id, command_id), settled)
            return settled

        return await engine.write(write)


class RacyJournalAdmission(MemoryJournal):
    """begin looks the key up and inserts in two steps, letting other callers in between."""

    async def _begin(self, entry: JournalEntry) -> JournalAdmission:
        engine = self.engine
        account = entry.account_id

        def look() -> JournalAdmission | None:
            stored_id = engine.t.journal_by_key.get((account, entry.idempotency_key))
            if stored_id is not None:
                stored = engine.t.journal[(account, stored_id)]
                if not stored.same_command(entry):
                    raise Conflict("another command")
                return Replay(entry=stored)
            if (account, entry.command_id) in engine.t.journal:
                raise Conflict("command id under another key")
            return None

        found = await engine.read(look)
        if found is not None:
            return found
        await asyncio.sleep(0)

        def write(undo: UndoLog) -> JournalAdmission:
            undo.put(engine.t.journal, (account, entry.command_id), entry)
            undo.put(engine.t.journal_by_key, (account, entry.idempotency_key), entry.command_id)
            if entry.command_id not in engine.t.journal_by_turn.get((account, entry.turn_id), []):
                undo.index(engine.t.journal_by_turn, (account, entry.turn_id), entry.command_id)
            return Fresh(entry=entry)

        return await engine.write(write)


class ReadmittingJournal(MemoryJournal):
    """begin admits a settled command again, as fresh."""

    async def _begin(self, entry: JournalEntry) -> JournalAdmission:
        engine = self.engine

        def write(undo: UndoLog) -> JournalAdmission:
            key = (entry.account_id, entry.idempotency_key)
            stored_id = engine.t.journal_by_key.get(key)
            if stored_id is not None:
                stored = engine.t.journal[(entry.account_id, stored_id)]
                if stored.status.is_terminal and stored.same_command(entry):
                    undo.put(engine.t.journal, (entry.account_id, stored_id), entry)
                    return Fresh(entry=entry)
            return self.begin_in(undo, entry)

        return await engine.write(write)


class KeyReuseAccepted(MemoryJournal):
    """begin replays a stored key whatever command comes with it."""

    async def _begin(self, entry: JournalEntry) -> JournalAdmission:
        engine = self.engine

        def write(undo: UndoLog) -> JournalAdmission:
            stored_id = engine.t.journal_by_key.get((entry.account_id, entry.idempotency_key))
            if stored_id is not None:
                return Replay(entry=engine.t.journal[(entry.account_id, stored_id)])
            return self.begin_in(undo, entry)

        return await engine.write(write)


class UnsortedJournalForTurn(MemoryJournal):
    """for_turn sorts by command id instead of (created_at, command_id)."""

    async def for_turn(self, account_id: str, turn_id: str) -> tuple[JournalEntry, ...]:
        entries = await super().for_turn(account_id, turn_id)
        return tuple(sorted(entries, key=lambda e: e.command_id))


# --- events -------------------------------------------------------------------------------------


class SortedBatchAppend(MemoryEvents):
    """append orders a batch by event id instead of keeping the given order."""

    async def append(
        self, account_id: str, events: Sequence[DomainEvent]
    ) -> tuple[DomainEvent, ...]:
        return await super().append(account_id, sorted(events, key=lambda e: e.event_id))


class PartialEventAppend(MemoryEvents):
    """append writes a batch event by event, so a duplicate leaves the events before it."""

    async def append(
        self, account_id: str, events: Sequence[DomainEvent]
    ) -> tuple[DomainEvent, ...]:
        appended: list[DomainEvent] = []
        for event in events:
            appended.extend(await super().append(account_id, [event]))
        return tuple(appended)


class SkippingPager(MemoryEvents):
    """read_from drops the last event of a full page but moves the cursor past it."""

    async def read_from(self, account_id: str, cursor: EventCursor, limit: int) -> EventPage:
        page = await super().read_from(account_id, cursor, limit)
        if len(page.events) < limit:
            return page
        return EventPage(events=page.events[:-1], next_cursor=page.next_cursor)


class InclusiveCaseHistory(MemoryEvents):
    """list_for_case includes the `since` revision itself."""

    async def _list_for_case(
        self, account_id: str, case_key: CaseKey, since_revision: int, limit: int
    ) -> tuple[DomainEvent, ...]:
        return await super()._list_for_case(account_id, case_key, since_revision - 1, limit)


# --- outbox -------------------------------------------------------------------------------------


class DuplicateOutboxKey(MemoryOutbox):
    """enqueue checks only the outbox id, not (destination, idempotency_key)."""

    async def _enqueue(self, entry: OutboxEntry) -> OutboxEntry:
        engine = self.engine

        def write(undo: UndoLog) -> OutboxEntry:
            if entry.outbox_id in engine.t.outbox:
                raise Conflict("stored id")
            undo.put(engine.t.outbox, entry.outbox_id, entry)
            undo.put(engine.t.outbox_by_key, (entry.destination, entry.idempotency_key), "x")
            undo.index(engine.t.outbox_by_command, entry.command_id, entry.outbox_id)
            undo.put(engine.t.outbox_pending, entry.outbox_id, None)
            return entry

        return await engine.write(write)


class RacyOutboxClaim(MemoryOutbox):
    """claim_due selects and claims in two steps, letting other claimers in between."""

    async def _claim_due(self, now: int, limit: int, worker_id: str) -> tuple[OutboxEntry, ...]:
        engine = self.engine

        def select() -> list[str]:
            rows = [engine.t.outbox[i] for i in engine.t.outbox_pending]
            due = [r for r in rows if r.next_attempt_at is None or r.next_attempt_at <= now]
            due.sort(key=lambda r: (r.created_at, r.outbox_id))
            return [r.outbox_id for r in due[:limit]]

        picked = await engine.read(select)
        await asyncio.sleep(0)

        def claim(undo: UndoLog) -> tuple[OutboxEntry, ...]:
            claimed = []
            for outbox_id in picked:
                row = engine.t.outbox[outbox_id]
                claimed.append(
                    self.move_row(
                        undo,
                        row,
                        status=OutboxStatus.DISPATCHING,
                        attempt_count=row.attempt_count + 1,
                        claim_worker_id=worker_id,
                        claim_taken_at=now,
                    )
                )
            return tuple(claimed)

        return await engine.write(claim)


class RescheduleDueNow(MemoryOutbox):
    """reschedule ignores the time it is given and makes the row due at once."""

    async def _reschedule(self, outbox_id: str, at: int) -> OutboxEntry:
        engine = self.engine

        def write(undo: UndoLog) -> OutboxEntry:
            row = self.row(outbox_id)
            if row.status not in (OutboxStatus.PENDING, OutboxStatus.OUTCOME_UNKNOWN):
                raise Conflict("not reschedulable")
            return self.move_row(undo, row, status=OutboxStatus.PENDING, next_attempt_at=None)

        return await engine.write(write)


class CountingUnclaim(MemoryOutbox):
    """unclaim hands the row back but keeps the attempt it never made."""

    async def _unclaim(self, outbox_id: str, worker_id: str) -> OutboxEntry:
        engine = self.engine

        def write(undo: UndoLog) -> OutboxEntry:
            row = self.row(outbox_id)
            if row.status is not OutboxStatus.DISPATCHING or row.claim_worker_id != worker_id:
                raise Conflict("not this worker's claim")
            return self.move_row(
                undo, row, status=OutboxStatus.PENDING, claim_worker_id=None, claim_taken_at=None
            )

        return await engine.write(write)


class ForgetfulReaper(MemoryOutbox):
    """the reaper returns a begun claim without recording that its outcome is unknown."""

    async def _release_expired_claims(self, claimed_before: int) -> int:
        engine = self.engine

        def write(undo: UndoLog) -> int:
            stale = [
                r
                for r in engine.t.outbox.values()
                if r.status is OutboxStatus.DISPATCHING and (r.claim_taken_at or 0) < claimed_before
            ]
            for row in stale:
                self.move_row(
                    undo,
                    row,
                    status=OutboxStatus.PENDING,
                    next_attempt_at=None,
                    claim_worker_id=None,
                    claim_taken_at=None,
                    dispatch_started_at=None,
                )
            return len(stale)

        return await engine.write(write)


class AnyAttemptSettles(MemoryOutbox):
    """mark_completed, mark_failed and mark_outcome_unknown ignore the attempt they are given."""

    async def _mark_completed(self, outbox_id: str, attempt: int | None) -> OutboxEntry:
        return await super()._mark_completed(outbox_id, None)

    async def _mark_failed(
        self, outbox_id: str, reason: str, retry_at: int | None, attempt: int | None
    ) -> OutboxEntry:
        return await super()._mark_failed(outbox_id, reason, retry_at, None)

    async def _mark_outcome_unknown(
        self, outbox_id: str, remote_ref: str | None, check_at: int | None, attempt: int | None
    ) -> OutboxEntry:
        return await super()._mark_outcome_unknown(outbox_id, remote_ref, check_at, None)


class RepeatableBegin(MemoryOutbox):
    """begin_dispatch accepts the same attempt beginning again."""

    async def _begin_dispatch(self, outbox_id: str, attempt: int, now: int) -> OutboxEntry:
        row = self.row(outbox_id)
        if row.dispatch_started_at is not None and row.attempt_count == attempt:
            return row
        return await super()._begin_dispatch(outbox_id, attempt, now)


class UnleasedReconciliation(MemoryOutbox):
    """claim_reconciliations hands out the due rows without leasing them."""

    async def _claim_reconciliations(
        self, now: int, limit: int, until: int
    ) -> tuple[OutboxEntry, ...]:
        engine = self.engine

        def read() -> tuple[OutboxEntry, ...]:
            rows = [
                r
                for r in engine.t.outbox.values()
                if r.status is OutboxStatus.OUTCOME_UNKNOWN
                and (r.next_attempt_at is None or r.next_attempt_at <= now)
            ]
            return tuple(sorted(rows, key=lambda r: (r.created_at, r.outbox_id))[:limit])

        return await engine.read(read)


class CountsEveryClaim(MemoryOutbox):
    """claimed_count counts every dispatching row, whoever claimed it."""

    async def _claimed_count(self, worker_id: str) -> int:
        t = self.engine.t
        return await self.engine.read(lambda: len(t.outbox_dispatching))


class LeaseFromClaim(MemoryOutbox):
    """begin_dispatch leaves the claim's lease running from the claim, not the attempt."""

    async def _begin_dispatch(self, outbox_id: str, attempt: int, now: int) -> OutboxEntry:
        taken = self.row(outbox_id).claim_taken_at
        began = await super()._begin_dispatch(outbox_id, attempt, now)
        engine = self.engine
        return await engine.write(lambda undo: self.move_row(undo, began, claim_taken_at=taken))


class InclusiveReaper(MemoryOutbox):
    """release_expired_claims also releases claims taken exactly at the limit."""

    async def _release_expired_claims(self, claimed_before: int) -> int:
        return await super()._release_expired_claims(claimed_before + 1)


# --- arguments ----------------------------------------------------------------------------------


class BoolLimitAccepted(MemoryConversations):
    """list_unfinished_turns takes `True` for a limit of one (what MemoryStores once did)."""

    async def list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]:
        if isinstance(limit, bool):
            return await self._list_unfinished_turns(int(limit))
        return await super().list_unfinished_turns(limit)


class UncheckedReaperTime(MemoryOutbox):
    """release_expired_claims takes any value for its time."""

    async def release_expired_claims(self, claimed_before: int) -> int:
        return await self._release_expired_claims(claimed_before)


class NulIdNotFound(MemoryConversations):
    """get_phase looks any id up, so an id no store can hold is merely not found."""

    async def get_phase(self, account_id: str, turn_id: str) -> PhaseMarker:
        return await self._get_phase(account_id, turn_id)


class NulKeyEnqueued(MemoryOutbox):
    """enqueue stores a row whatever its destination and key hold."""

    async def enqueue(self, entry: OutboxEntry) -> OutboxEntry:
        if entry.status is not OutboxStatus.PENDING:
            raise InvalidRecord("an outbox row is enqueued pending")
        return await self._enqueue(entry)


# --- timers -------------------------------------------------------------------------------------


class RewritingTimers(MemoryTimers):
    """schedule overwrites a stored timer id with whatever it is given."""

    async def _schedule(self, record: TimerRecord) -> TimerRecord:
        engine = self.engine

        def write(undo: UndoLog) -> TimerRecord:
            key = (record.account_id, record.timer_id)
            if key not in engine.t.timers:
                return self.schedule_in(undo, record)
            if not engine.t.timers[key].same_schedule(record):
                undo.put(engine.t.timers, key, record)
            return engine.t.timers[key]

        return await engine.write(write)


class TimersById(MemoryTimers):
    """for_conversation sorts by timer id alone."""

    async def _for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[TimerRecord, ...]:
        rows = await super()._for_conversation(account_id, conversation_id)
        return tuple(sorted(rows, key=lambda r: r.timer_id))


class ForeignTimerVisible(MemoryTimers):
    """get finds a timer by its id in any account."""

    async def _get(self, account_id: str, timer_id: str) -> TimerRecord:
        engine = self.engine

        def read() -> TimerRecord:
            for (_, stored_id), row in engine.t.timers.items():
                if stored_id == timer_id:
                    return row
            raise NotFound()

        return await engine.read(read)


class RacyTimerClaim(MemoryTimers):
    """claim_due selects and claims in two steps, letting other claimers in between."""

    async def _claim_due(
        self, now: int, lease_ms: int, limit: int, worker_id: str
    ) -> tuple[TimerRecord, ...]:
        engine = self.engine

        def select() -> list[TimerRecord]:
            rows = [engine.t.timers[key] for key in engine.t.timers_open]
            due = [r for r in rows if timer_rules.claimable(r, now, lease_ms)]
            return sorted(due, key=timer_rules.by_due_time)[:limit]

        picked = await engine.read(select)
        await asyncio.sleep(0)

        def claim(undo: UndoLog) -> tuple[TimerRecord, ...]:
            return tuple(
                self.move_timer(
                    undo,
                    engine.t.timers[(r.account_id, r.timer_id)],
                    status=TimerStatus.CLAIMED,
                    worker_id=worker_id,
                    claimed_at=now,
                )
                for r in picked
            )

        return await engine.write(claim)


class EndlessLease(MemoryTimers):
    """claim_due never claims a claimed timer again, however long ago its lease ran out."""

    async def _claim_due(
        self, now: int, lease_ms: int, limit: int, worker_id: str
    ) -> tuple[TimerRecord, ...]:
        return await super()._claim_due(now, rules.MAX_MILLIS, limit, worker_id)


class AnyWorkerRefires(MemoryTimers):
    """mark_fired accepts a fired timer again from any worker."""

    async def _mark_fired(self, account_id: str, timer_id: str, worker_id: str) -> TimerRecord:
        row = await self._get(account_id, timer_id)
        if row.status is TimerStatus.FIRED:
            return row
        return await super()._mark_fired(account_id, timer_id, worker_id)


class CancelUnfires(MemoryTimers):
    """cancel moves a fired timer to cancelled."""

    async def _cancel(self, account_id: str, timer_id: str) -> TimerRecord:
        engine = self.engine

        def write(undo: UndoLog) -> TimerRecord:
            row = self.timer(account_id, timer_id)
            if row.status is TimerStatus.CANCELLED:
                return row
            return self.move_timer(undo, row, status=TimerStatus.CANCELLED, fired_at=None)

        return await engine.write(write)


class UncheckedLease(MemoryTimers):
    """claim_due takes any value for its lease."""

    async def claim_due(
        self, now: int, lease_ms: int, limit: int, worker_id: str
    ) -> tuple[TimerRecord, ...]:
        rules.worker(worker_id)
        return await self._claim_due(rules.instant(now), lease_ms, rules.limit(limit), worker_id)


class UndoLessTimers(MemoryTimers):
    """schedule writes its timer past the undo log, so a transaction that rolls back keeps it."""

    async def _schedule(self, record: TimerRecord) -> TimerRecord:
        engine = self.engine

        def write(undo: UndoLog) -> TimerRecord:
            stored = self.schedule_in(UndoLog(), record)  # its undo steps are dropped
            return stored

        return await engine.write(write)


# --- replay and commit --------------------------------------------------------------------------


class OverwritingReplay(MemoryReplay):
    """put overwrites a final replay record."""

    async def _put(self, record: ReplayRecord) -> None:
        engine = self.engine

        def write(undo: UndoLog) -> None:
            key = (record.account_id, record.turn_id)
            if key in engine.t.replay:
                undo.put(engine.t.replay, key, record)
                return
            self.put_in(undo, record)

        await engine.write(write)


class RelinkingReplay(MemoryReplay):
    """put links a final record again each time it is put again (a repeat)."""

    async def _put(self, record: ReplayRecord) -> None:
        engine = self.engine

        def write(undo: UndoLog) -> None:
            stored = engine.t.replay.get((record.account_id, record.turn_id))
            self.put_in(undo, record)
            if record.phase.is_terminal and stored is not None and stored.phase.is_terminal:
                conversation = (record.account_id, record.conversation_id)
                chain = engine.t.audit_chain.get(conversation, [])
                undo.index(engine.t.audit_chain, conversation, ChainLink.after(chain[-1], record))

        await engine.write(write)


class EraseBlindReplay(MemoryReplay):
    """unerased_before lists erased turns too."""

    async def _unerased_before(self, before: int, limit: int) -> tuple[tuple[str, str], ...]:
        t = self.engine.t
        held = sorted(
            (r.recorded_at, key)
            for key, r in t.replay.items()
            if r.phase.is_terminal and r.recorded_at < before
        )
        return tuple(key for _, key in held[:limit])


class OneAccountReplay(MemoryReplay):
    """accounts_with_token names only the first account holding the token."""

    async def _accounts_with_token(self, replay_token: str) -> tuple[str, ...]:
        return (await super()._accounts_with_token(replay_token))[:1]


class UnlinkedBundle(MemoryCommits):
    """commit writes the bundle's final record but not its audit link."""

    async def _commit(self, bundle: CommitBundle) -> CommitResult:
        result = await super()._commit(bundle)
        engine = self.engine
        conversation = (bundle.account_id, bundle.conversation_id)
        await engine.write(lambda undo: undo.put(engine.t.audit_chain, conversation, []))
        return result


class ForgetfulErasure(MemoryCommits):
    """erase_turn rewrites every document of the turn but its user turn."""

    def erase_turn_in(self, undo: UndoLog, account_id: str, turn_id: str) -> Any:
        key = (account_id, turn_id)
        words = self.engine.t.user_turns.get(key)
        erased = super().erase_turn_in(undo, account_id, turn_id)
        if words is not None:
            undo.put(self.engine.t.user_turns, key, words)
        return erased


class EagerErasure(MemoryCommits):
    """erase_turn erases a turn that is still running, as if it were final."""

    def erase_turn_in(self, undo: UndoLog, account_id: str, turn_id: str) -> Any:
        key = (account_id, turn_id)
        record = self.engine.t.replay.get(key)
        if record is not None and not record.phase.is_terminal:
            undo.put(
                self.engine.t.replay, key, record.model_copy(update={"phase": TurnPhase.FAILED})
            )
        return super().erase_turn_in(undo, account_id, turn_id)


class HalfBundle(MemoryCommits):
    """commit applies items in place and never undoes them when a later item fails."""

    async def _commit(self, bundle: CommitBundle) -> CommitResult:
        with self.engine.lock:
            return self.commit_in(UndoLog(), bundle)


def _accept_and_journal(roles: MemoryCommits, undo: UndoLog, bundle: CommitBundle) -> list[Any]:
    """The bundle stages before its completions, as the real writer applies them."""
    if bundle.user_turn is not None:
        user = bundle.user_turn
        roles.conversations.ensure_conversation_in(undo, user.account_id, user.conversation_id)
        roles.conversations.append_user_turn_in(undo, user)
    admissions = [roles.journal.begin_in(undo, entry) for entry in bundle.journal_admissions]
    for command_id in bundle.journal_starts:
        roles.journal.mark_executing_in(undo, bundle.account_id, command_id)
    return admissions


def _answer(roles: MemoryCommits, undo: UndoLog, bundle: CommitBundle) -> None:
    if bundle.assistant_turn is not None:
        roles.conversations.append_assistant_turn_in(
            undo, bundle.account_id, bundle.assistant_turn, None
        )


def _stream(roles: MemoryCommits, undo: UndoLog, bundle: CommitBundle) -> None:
    """The bundle's last stage, as the real writer applies it."""
    if bundle.stream_events:
        entries = turn_rules.stream_entries(bundle.stream_events)
        roles.conversations.append_stream_events_in(
            undo, bundle.account_id, bundle.turn_id, entries
        )


class InsertsFirstBundle(MemoryCommits):
    """commit inserts new cards before it finishes and invalidates the old ones."""

    async def _commit(self, bundle: CommitBundle) -> CommitResult:
        engine, account = self.engine, bundle.account_id

        def write(undo: UndoLog) -> CommitResult:
            admissions = _accept_and_journal(self, undo, bundle)
            for completion in bundle.journal_completions:
                self.journal.complete_in(undo, account, completion.command_id, completion.outcome)
            events = self.events.append_in(undo, account, bundle.events)
            for card in bundle.interaction_inserts:
                self.interactions.insert_in(undo, card)
            for finish in bundle.interaction_finishes:
                self.interactions.finish_in(undo, account, finish)
            invalidated: list[str] = []
            for item in bundle.invalidations:
                invalidated.extend(
                    self.interactions.invalidate_in(
                        undo, account, item.case_key, item.current_revision
                    )
                )
            for row in bundle.outbox:
                self.outbox.enqueue_in(undo, row)
            _answer(self, undo, bundle)
            if bundle.replay is not None:
                self.replay.put_in(undo, bundle.replay)
            if bundle.phase is not None:
                self.conversations.set_phase_in(undo, account, bundle.turn_id, bundle.phase)
            _stream(self, undo, bundle)
            return CommitResult(
                admissions=tuple(admissions), events=events, invalidated=tuple(invalidated)
            )

        return await engine.write(write)


class LateJudgedBundle(MemoryCommits):
    """commit judges its card finishes only after the later stages ran (invalidations first)."""

    async def _commit(self, bundle: CommitBundle) -> CommitResult:
        engine, account = self.engine, bundle.account_id

        def write(undo: UndoLog) -> CommitResult:
            admissions = _accept_and_journal(self, undo, bundle)
            for completion in bundle.journal_completions:
                self.journal.complete_in(undo, account, completion.command_id, completion.outcome)
            events = self.events.append_in(undo, account, bundle.events)
            invalidated: list[str] = []
            for item in bundle.invalidations:
                invalidated.extend(
                    self.interactions.invalidate_in(
                        undo, account, item.case_key, item.current_revision
                    )
                )
            for finish in bundle.interaction_finishes:
                self.interactions.finish_in(undo, account, finish)
            for card in bundle.interaction_inserts:
                self.interactions.insert_in(undo, card)
            for row in bundle.outbox:
                self.outbox.enqueue_in(undo, row)
            _answer(self, undo, bundle)
            if bundle.replay is not None:
                self.replay.put_in(undo, bundle.replay)
            if bundle.phase is not None:
                self.conversations.set_phase_in(undo, account, bundle.turn_id, bundle.phase)
            _stream(self, undo, bundle)
            return CommitResult(
                admissions=tuple(admissions), events=events, invalidated=tuple(invalidated)
            )

        return await engine.write(write)


# --- the table ----------------------------------------------------------------------------------

#: control name -> (role name, broken role class, the one check it must fail)


class _BrokenBundleWriter(MemoryBundleWriter):
    skip_starts = False
    overwrite_answers = False
    replace_stream = False

    def start(self, command_id: str) -> None:
        if not self.skip_starts:
            super().start(command_id)

    def answer(self, turn: AssistantTurn) -> None:
        if self.overwrite_answers:
            self.undo.put(self.engine.t.assistant_turns, (self.account_id, turn.turn_id), "")
            self.engine.t.assistant_turns[(self.account_id, turn.turn_id)] = turn.to_stored_json()
            return
        super().answer(turn)

    def stream(self, entries: tuple[StreamEntry, ...]) -> None:
        if self.replace_stream:
            key = (self.account_id, self.turn_id)
            log = self.engine.t.stream.get(key, [])
            low, high = turn_rules.stream_window(entries)
            known = turn_rules.stream_append(entries, log[max(low - 1, 0) : high])
            self.undo.put(self.engine.t.stream, key, list(entries[known:]))
            return
        super().stream(entries)


class _BrokenBundles(MemoryCommits):
    writer: type[MemoryBundleWriter] = _BrokenBundleWriter


class _NoStartsWriter(_BrokenBundleWriter):
    skip_starts = True


class _OverwritingWriter(_BrokenBundleWriter):
    overwrite_answers = True


class _StreamReplacingWriter(_BrokenBundleWriter):
    replace_stream = True


class BundleReplacesStream(_BrokenBundles):
    """A bundle's stream events replace the turn's logged ones."""

    writer = _StreamReplacingWriter


class BundleSkipsStarts(_BrokenBundles):
    """A bundle's journal starts move nothing."""

    writer = _NoStartsWriter


class BundleOverwritesAnswers(_BrokenBundles):
    """A bundle's assistant turn overwrites the stored one."""

    writer = _OverwritingWriter


class NewestFirstRecentTurns(MemoryConversations):
    """recent_turns lists the newest reply first."""

    async def _recent_turns(
        self, account_id: str, conversation_id: str, limit: int
    ) -> tuple[str, ...]:
        return tuple(reversed(await super()._recent_turns(account_id, conversation_id, limit)))


class FeedByTurnId(MemoryConversations):
    """The feed lists a conversation's replies by turn id, not by their place in the chain."""

    async def _feed(
        self, account_id: str, conversation_id: str, after_position: int, limit: int
    ) -> tuple[tuple[int, str, str | None], ...]:
        every = await super()._feed(account_id, conversation_id, -1, 1_000)
        by_id = sorted(every, key=lambda row: row[1])
        return tuple(
            (position, turn_id, text)
            for position, (_, turn_id, text) in enumerate(by_id)
            if position > after_position
        )[:limit]


CONTROLS: dict[str, tuple[str, type[Any], str]] = {
    "stream_by_time": (
        "conversations",
        StreamByTime,
        "check_stream_events_are_logged_in_order_and_read_back_equal",
    ),
    "inclusive_stream_cursor": (
        "conversations",
        InclusiveStreamCursor,
        "check_a_stream_is_read_after_a_sequence_at_most_limit_events_at_a_time",
    ),
    "first_as_tail": (
        "conversations",
        FirstAsTail,
        "check_the_stream_tail_is_the_last_logged_event",
    ),
    "refused_stream_repeat": (
        "conversations",
        RefusedStreamRepeat,
        "check_a_logged_stream_event_repeated_unchanged_is_accepted_and_not_logged_again",
    ),
    "sequence_only_repeat": (
        "conversations",
        SequenceOnlyRepeat,
        "check_a_different_event_at_a_logged_sequence_is_a_conflict",
    ),
    "gap_accepted": (
        "conversations",
        GapAccepted,
        "check_a_stream_event_that_leaves_a_gap_is_a_conflict",
    ),
    "stream_past_terminal": (
        "conversations",
        StreamPastTerminal,
        "check_nothing_is_logged_after_a_terminal_event",
    ),
    "unjudged_stream_batch": (
        "conversations",
        UnjudgedStreamBatch,
        "check_an_invalid_stream_batch_is_refused_and_writes_nothing",
    ),
    "stream_without_turn": (
        "conversations",
        StreamWithoutTurn,
        "check_a_stream_is_logged_only_beside_its_user_turn",
    ),
    "foreign_stream_visible": (
        "conversations",
        ForeignStreamVisible,
        "check_another_accounts_stream_is_invisible",
    ),
    "inclusive_prune": (
        "conversations",
        InclusivePrune,
        "check_the_prune_sweep_deletes_only_logs_that_ended_before_the_cutoff",
    ),
    "prune_ignores_marker": (
        "conversations",
        PruneIgnoresMarker,
        "check_the_prune_sweep_keeps_the_log_of_a_turn_that_has_not_ended",
    ),
    "bundle_replaces_stream": (
        "commits",
        BundleReplacesStream,
        "check_a_commit_bundle_logs_its_stream_events_after_its_assistant_turn",
    ),
    "feed_by_turn_id": (
        "conversations",
        FeedByTurnId,
        "check_the_feed_reads_a_conversations_replies_in_commit_order_after_a_position",
    ),
    "newest_first_recent_turns": (
        "conversations",
        NewestFirstRecentTurns,
        "check_recent_turns_are_the_last_replies_oldest_first",
    ),
    "bundle_skips_starts": (
        "commits",
        BundleSkipsStarts,
        "check_a_commit_bundle_accepts_a_turn_and_journals_its_commands_once",
    ),
    "bundle_overwrites_answers": (
        "commits",
        BundleOverwritesAnswers,
        "check_a_commit_bundle_stores_the_assistant_turn_once",
    ),
    "recreated_conversation": (
        "conversations",
        RecreatedConversation,
        "check_a_user_turn_is_recorded_once_with_its_received_phase",
    ),
    "rewritten_assistant_turn": (
        "conversations",
        RewrittenAssistantTurn,
        "check_an_assistant_turn_is_written_once_and_reloads_identical",
    ),
    "phase_leaves_terminal": (
        "conversations",
        PhaseLeavesTerminal,
        "check_the_phase_marker_never_leaves_a_terminal_phase",
    ),
    "forgetful_unfinished": (
        "conversations",
        ForgetfulUnfinished,
        "check_unfinished_turns_are_listed_after_an_interruption",
    ),
    "loose_conflict_code": (
        "conversations",
        LooseConflictCode,
        "check_store_errors_carry_their_stable_codes",
    ),
    "second_blocking_card": (
        "interactions",
        SecondBlockingCard,
        "check_a_second_open_blocking_card_for_a_case_is_a_conflict",
    ),
    "foreign_card_visible": (
        "interactions",
        ForeignCardVisible,
        "check_another_accounts_records_are_not_found_exactly_like_missing_ones",
    ),
    "replacing_resolving": (
        "interactions",
        ReplacingResolving,
        "check_a_blocking_card_is_replaced_only_while_it_is_active",
    ),
    "blind_card_resolution": (
        "interactions",
        BlindCardResolution,
        "check_card_resolution_is_compare_and_swap_and_a_repeat_is_accepted",
    ),
    "mutable_card_payload": (
        "interactions",
        MutableCardPayload,
        "check_interaction_payloads_are_immutable",
    ),
    "revision_blind_invalidation": (
        "interactions",
        RevisionBlindInvalidation,
        "check_revision_invalidation_spares_revision_independent_cards",
    ),
    "eager_expiry": (
        "interactions",
        EagerExpiry,
        "check_the_expiry_sweep_expires_only_due_active_cards",
    ),
    "blind_journal_completion": (
        "journal",
        BlindJournalCompletion,
        "check_journal_completion_is_compare_and_swap",
    ),
    "racy_journal_admission": (
        "journal",
        RacyJournalAdmission,
        "check_journal_admission_is_fresh_exactly_once_per_key_under_interleaving",
    ),
    "readmitting_journal": (
        "journal",
        ReadmittingJournal,
        "check_a_settled_journal_entry_is_replayed_not_readmitted",
    ),
    "key_reuse_accepted": (
        "journal",
        KeyReuseAccepted,
        "check_a_reused_idempotency_key_with_a_different_command_is_refused",
    ),
    "unsorted_journal_for_turn": (
        "journal",
        UnsortedJournalForTurn,
        "check_lists_follow_their_named_sort_keys",
    ),
    "sorted_batch_append": (
        "events",
        SortedBatchAppend,
        "check_events_append_in_order_and_read_back_by_id",
    ),
    "partial_event_append": (
        "events",
        PartialEventAppend,
        "check_a_duplicate_event_id_appends_nothing",
    ),
    "skipping_pager": (
        "events",
        SkippingPager,
        "check_paging_by_sequence_skips_and_repeats_nothing_while_the_ledger_grows",
    ),
    "inclusive_case_history": (
        "events",
        InclusiveCaseHistory,
        "check_case_history_is_read_since_a_revision",
    ),
    "duplicate_outbox_key": (
        "outbox",
        DuplicateOutboxKey,
        "check_outbox_enqueue_refuses_duplicates_and_non_pending_rows",
    ),
    "racy_outbox_claim": (
        "outbox",
        RacyOutboxClaim,
        "check_an_outbox_row_is_claimed_by_one_worker_only",
    ),
    "reschedule_due_now": (
        "outbox",
        RescheduleDueNow,
        "check_a_rescheduled_outbox_row_waits_until_it_is_due",
    ),
    "counting_unclaim": (
        "outbox",
        CountingUnclaim,
        "check_an_unused_claim_is_handed_back_without_counting_an_attempt",
    ),
    "forgetful_reaper": (
        "outbox",
        ForgetfulReaper,
        "check_the_reaper_records_that_a_begun_attempt_never_answered",
    ),
    "any_attempt_settles": (
        "outbox",
        AnyAttemptSettles,
        "check_only_the_claims_own_attempt_settles_it",
    ),
    "repeatable_begin": (
        "outbox",
        RepeatableBegin,
        "check_an_attempt_begins_once",
    ),
    "unleased_reconciliation": (
        "outbox",
        UnleasedReconciliation,
        "check_unknown_outcomes_are_leased_to_one_reconciler_at_a_time",
    ),
    "counts_every_claim": (
        "outbox",
        CountsEveryClaim,
        "check_a_workers_claims_in_flight_are_counted",
    ),
    "lease_from_claim": (
        "outbox",
        LeaseFromClaim,
        "check_a_begun_attempt_holds_its_claim_a_lease_from_its_start",
    ),
    "inclusive_reaper": (
        "outbox",
        InclusiveReaper,
        "check_the_reaper_releases_expired_claims",
    ),
    "rewriting_timers": (
        "timers",
        RewritingTimers,
        "check_a_timer_is_scheduled_once_and_another_under_its_id_is_a_conflict",
    ),
    "timers_by_id": ("timers", TimersById, "check_a_conversations_timers_are_listed_by_due_time"),
    "foreign_timer_visible": (
        "timers",
        ForeignTimerVisible,
        "check_another_accounts_timers_are_not_found_exactly_like_missing_ones",
    ),
    "racy_timer_claim": (
        "timers",
        RacyTimerClaim,
        "check_a_due_timer_is_claimed_by_one_worker_only",
    ),
    "endless_lease": ("timers", EndlessLease, "check_a_claim_whose_lease_ran_out_is_claimed_again"),
    "any_worker_refires": (
        "timers",
        AnyWorkerRefires,
        "check_only_the_claiming_worker_marks_a_timer_fired",
    ),
    "cancel_unfires": ("timers", CancelUnfires, "check_a_timer_is_cancelled_until_it_fires"),
    "unchecked_lease": (
        "timers",
        UncheckedLease,
        "check_timer_arguments_are_refused_before_anything_is_written",
    ),
    "overwriting_replay": (
        "replay",
        OverwritingReplay,
        "check_a_replay_record_is_upserted_until_its_phase_is_terminal",
    ),
    "relinking_replay": (
        "replay",
        RelinkingReplay,
        "check_a_record_is_linked_into_its_conversations_chain_once_when_final",
    ),
    "one_account_replay": (
        "replay",
        OneAccountReplay,
        "check_an_auditor_finds_the_accounts_of_a_token_and_of_a_conversation",
    ),
    "unlinked_bundle": (
        "commits",
        UnlinkedBundle,
        "check_a_commit_bundle_links_the_record_it_makes_final",
    ),
    "erase_blind_replay": (
        "replay",
        EraseBlindReplay,
        "check_the_retention_sweep_lists_final_turns_still_holding_words_oldest_first",
    ),
    "forgetful_erasure": (
        "commits",
        ForgetfulErasure,
        "check_erasing_a_turn_rewrites_its_words_and_keeps_its_digests",
    ),
    "eager_erasure": (
        "commits",
        EagerErasure,
        "check_a_running_turn_keeps_its_words_and_a_foreign_one_is_not_found",
    ),
    "half_bundle": (
        "commits",
        HalfBundle,
        "check_a_commit_bundle_with_an_invalid_item_writes_nothing",
    ),
    "inserts_first_bundle": (
        "commits",
        InsertsFirstBundle,
        "check_a_commit_bundle_applies_its_items_in_the_normative_order",
    ),
    "late_judged_bundle": (
        "commits",
        LateJudgedBundle,
        "check_each_bundle_item_is_judged_on_the_state_its_own_stage_left",
    ),
    "bool_limit_accepted": (
        "conversations",
        BoolLimitAccepted,
        "check_a_limit_is_a_whole_number_from_one_to_the_maximum",
    ),
    "unchecked_reaper_time": (
        "outbox",
        UncheckedReaperTime,
        "check_times_and_revisions_are_whole_numbers_in_their_range",
    ),
    "nul_id_not_found": (
        "conversations",
        NulIdNotFound,
        "check_an_id_with_a_nul_or_a_lone_surrogate_is_invalid_for_every_reader",
    ),
    "nul_key_enqueued": (
        "outbox",
        NulKeyEnqueued,
        "check_an_id_with_a_nul_or_a_lone_surrogate_is_invalid_for_every_writer",
    ),
}


# --- transactions: the broken part is the unit of work itself -----------------------------------


class _BrokenTransactions(MemoryStores):
    """MemoryStores whose `transaction()` breaks one promise (each subclass names which)."""

    keep_on_raise = False
    keep_when_doomed = False
    discard_on_success = False
    take_the_gate = True

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Stores]:
        if self.take_the_gate:
            await self.engine.gate.enter()
        tx = MemoryTransaction()
        try:
            try:
                yield self.in_transaction(tx)
            except BaseException:
                if not self.keep_on_raise:
                    tx.undo.rollback()
                raise
            if tx.failure is not None and not self.keep_when_doomed:
                tx.undo.rollback()
                raise Conflict("rolled back") from tx.failure
            if self.discard_on_success:
                tx.undo.rollback()
        finally:
            tx.closed = True
            if self.take_the_gate:
                self.engine.gate.leave()


class DiscardingTransactions(_BrokenTransactions):
    """A transaction that ends well is rolled back anyway."""

    discard_on_success = True


class KeepOnRaise(_BrokenTransactions):
    """A transaction whose block raises keeps what it wrote."""

    keep_on_raise = True


class IgnoredDoom(_BrokenTransactions):
    """A transaction with a failed call commits the rest when the caller caught the error."""

    keep_when_doomed = True


class DirtyTransactions(_BrokenTransactions):
    """An open transaction's writes are visible to everyone at once."""

    take_the_gate = False


class HollowSavepoints(MemoryStores):
    """A savepoint undoes nothing: a failure inside it dooms the whole transaction."""

    def transaction(self) -> Any:  # type: ignore[override]
        manager = super().transaction()

        @contextlib.asynccontextmanager
        async def hollow() -> AsyncIterator[None]:
            yield

        @contextlib.asynccontextmanager
        async def wrapped() -> AsyncIterator[Stores]:
            async with manager as tx:
                tx.savepoint = hollow  # type: ignore[method-assign]
                yield tx

        return wrapped()


class LiveSnapshots(MemoryStores):
    """A snapshot that reads the live state: a commit made while it reads shows up in it."""

    @contextlib.asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Stores]:
        yield self


TRANSACTION_CONTROLS: dict[str, tuple[type[MemoryStores], str]] = {
    "discarding_transactions": (
        DiscardingTransactions,
        "check_a_transaction_commits_its_writes_together_and_sees_them_inside",
    ),
    "keep_on_raise": (KeepOnRaise, "check_a_transaction_whose_block_raises_leaves_nothing"),
    "ignored_doom": (IgnoredDoom, "check_a_failed_call_dooms_its_transaction_even_when_caught"),
    "dirty_transactions": (DirtyTransactions, "check_nobody_else_sees_an_open_transactions_writes"),
    "hollow_savepoints": (HollowSavepoints, "check_a_failed_savepoint_undoes_only_its_own_writes"),
    "live_snapshots": (LiveSnapshots, "check_a_snapshot_reads_one_moment_and_writes_nothing"),
}


def broken_stores(role: str, broken: type[Any]):  # type: ignore[no-untyped-def]
    async def factory() -> Stores:
        memory = MemoryStores()
        return memory.replace(**{role: broken(memory.engine)})

    return factory


@pytest.mark.parametrize("control", sorted(CONTROLS))
async def test_a_store_that_breaks_one_rule_fails_exactly_the_check_for_it(control: str) -> None:
    role, broken, expected = CONTROLS[control]

    report = await run_all(broken_stores(role, broken))

    assert report.failed_names == (expected,), report.describe()


@pytest.mark.parametrize("control", sorted(TRANSACTION_CONTROLS))
async def test_a_store_whose_transactions_break_one_promise_fails_exactly_its_check(
    control: str,
) -> None:
    broken, expected = TRANSACTION_CONTROLS[control]

    async def factory() -> Stores:
        return broken()

    report = await run_all(factory)

    assert report.failed_names == (expected,), report.describe()


async def test_a_timers_role_that_writes_past_the_undo_log_fails_the_rollback_check() -> None:
    """Every role is part of a transaction; the transaction controls above own that check, so
    the timers' control is run here."""
    report = await run_all(broken_stores("timers", UndoLessTimers))

    assert report.failed_names == ("check_a_transaction_whose_block_raises_leaves_nothing",), (
        report.describe()
    )


def test_every_check_of_the_suite_has_a_control_that_fails_it() -> None:
    targets = [expected for _, _, expected in CONTROLS.values()]
    targets += [expected for _, expected in TRANSACTION_CONTROLS.values()]

    assert sorted(targets) == sorted(CHECKS)
