"""The role objects every store hands out: each public method applies the argument rules
(`_rules`) and fires the fault points that name it (decision 0002), then calls its store's hook
of the same name with a leading underscore. A store implements the hooks: storage and its
compare-and-swap, never the argument rules or where a fault point fires.

Arguments are checked before anything else (a fault point included): a call a store must refuse
for its arguments alone leaves everything as it was.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from turnframe_core.audit_chain import ChainLink
from turnframe_core.cases import CaseKey
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_core.replay import CommandOutcome, ReplayRecord, TurnPhase
from turnframe_core.stream import StreamEvent
from turnframe_core.turn import AssistantTurn
from turnframe_store import _rules as rules
from turnframe_store._rules import StreamEntry
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
    OutboxEntry,
    PhaseMarker,
    UserTurnRecord,
)

__all__ = [
    "CommitRole",
    "ConversationRole",
    "EventRole",
    "InteractionRole",
    "JournalRole",
    "OutboxRole",
    "ReplayRole",
]


class _Role:
    def __init__(self, faults: FaultPlan) -> None:
        self._faults = faults


class ConversationRole(_Role, ABC):
    async def get_conversation(self, account_id: str, conversation_id: str) -> ConversationRecord:
        rules.text(account_id, conversation_id)
        return await self._get_conversation(account_id, conversation_id)

    async def get_user_turn(self, account_id: str, turn_id: str) -> UserTurnRecord:
        rules.text(account_id, turn_id)
        return await self._get_user_turn(account_id, turn_id)

    async def get_assistant_turn(self, account_id: str, turn_id: str) -> AssistantTurn:
        rules.text(account_id, turn_id)
        return await self._get_assistant_turn(account_id, turn_id)

    async def list_turns(self, account_id: str, conversation_id: str) -> tuple[UserTurnRecord, ...]:
        rules.text(account_id, conversation_id)
        return await self._list_turns(account_id, conversation_id)

    async def recent_turns(
        self, account_id: str, conversation_id: str, limit: int
    ) -> tuple[AssistantTurn, ...]:
        rules.text(account_id, conversation_id)
        texts = await self._recent_turns(account_id, conversation_id, rules.limit(limit))
        return tuple(rules.reload_answer(text) for text in texts)

    async def get_phase(self, account_id: str, turn_id: str) -> PhaseMarker:
        rules.text(account_id, turn_id)
        return await self._get_phase(account_id, turn_id)

    async def list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]:
        return await self._list_unfinished_turns(rules.limit(limit))

    async def ensure_conversation(
        self, account_id: str, conversation_id: str
    ) -> ConversationRecord:
        rules.text(account_id, conversation_id)
        return await self._ensure_conversation(account_id, conversation_id)

    async def append_user_turn(self, record: UserTurnRecord) -> None:
        await self._append_user_turn(record)

    async def append_assistant_turn(
        self, account_id: str, turn: AssistantTurn, *, phase: TurnPhase | None = None
    ) -> None:
        rules.text(account_id)
        rules.own_turn(account_id, turn)
        moved = None if phase is None else rules.turn_phase(phase)
        self._faults.reach(FaultPoint.BEFORE_RESPONSE_PERSISTENCE)
        await self._append_assistant_turn(account_id, turn, moved)

    async def set_phase(self, account_id: str, turn_id: str, phase: TurnPhase) -> PhaseMarker:
        rules.text(account_id, turn_id)
        return await self._set_phase(account_id, turn_id, rules.turn_phase(phase))

    async def stream_events(
        self, account_id: str, turn_id: str, after_sequence: int, limit: int
    ) -> tuple[StreamEvent, ...]:
        rules.text(account_id, turn_id)
        after, most = rules.after_sequence(after_sequence), rules.limit(limit)
        texts = await self._stream_events(account_id, turn_id, after, most)
        return tuple(rules.reload_stream_event(text) for text in texts)

    async def stream_tail(self, account_id: str, turn_id: str) -> StreamEvent | None:
        rules.text(account_id, turn_id)
        text = await self._stream_tail(account_id, turn_id)
        return None if text is None else rules.reload_stream_event(text)

    async def append_stream_events(self, account_id: str, events: Sequence[StreamEvent]) -> None:
        rules.text(account_id)
        await self._append_stream_events(account_id, rules.stream_entries(events))

    async def prune_stream_events(self, finished_before: int, limit: int) -> int:
        return await self._prune_stream_events(rules.instant(finished_before), rules.limit(limit))

    @abstractmethod
    async def _get_conversation(
        self, account_id: str, conversation_id: str
    ) -> ConversationRecord: ...

    @abstractmethod
    async def _get_user_turn(self, account_id: str, turn_id: str) -> UserTurnRecord: ...

    @abstractmethod
    async def _get_assistant_turn(self, account_id: str, turn_id: str) -> AssistantTurn: ...

    @abstractmethod
    async def _list_turns(
        self, account_id: str, conversation_id: str
    ) -> tuple[UserTurnRecord, ...]: ...

    @abstractmethod
    async def _recent_turns(
        self, account_id: str, conversation_id: str, limit: int
    ) -> tuple[str, ...]:
        """The stored texts of the last `limit` assistant turns, oldest first."""

    @abstractmethod
    async def _get_phase(self, account_id: str, turn_id: str) -> PhaseMarker: ...

    @abstractmethod
    async def _list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]: ...

    @abstractmethod
    async def _ensure_conversation(
        self, account_id: str, conversation_id: str
    ) -> ConversationRecord: ...

    @abstractmethod
    async def _append_user_turn(self, record: UserTurnRecord) -> None: ...

    @abstractmethod
    async def _append_assistant_turn(
        self, account_id: str, turn: AssistantTurn, phase: TurnPhase | None
    ) -> None: ...

    @abstractmethod
    async def _set_phase(self, account_id: str, turn_id: str, phase: TurnPhase) -> PhaseMarker: ...

    @abstractmethod
    async def _stream_events(
        self, account_id: str, turn_id: str, after_sequence: int, limit: int
    ) -> tuple[str, ...]:
        """The logged texts of the turn's events after `after_sequence`, by sequence."""

    @abstractmethod
    async def _stream_tail(self, account_id: str, turn_id: str) -> str | None: ...

    @abstractmethod
    async def _append_stream_events(
        self, account_id: str, entries: tuple[StreamEntry, ...]
    ) -> None:
        """Judge with `_rules.stream_append` on the logged entries of `_rules.stream_window`."""

    @abstractmethod
    async def _prune_stream_events(self, finished_before: int, limit: int) -> int: ...


class InteractionRole(_Role, ABC):
    async def get(self, account_id: str, interaction_id: str) -> Interaction:
        rules.text(account_id, interaction_id)
        return await self._get(account_id, interaction_id)

    async def open_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[Interaction, ...]:
        rules.text(account_id, conversation_id)
        return await self._open_for_conversation(account_id, conversation_id)

    async def for_case(self, account_id: str, case_key: CaseKey) -> tuple[Interaction, ...]:
        rules.text(account_id)
        rules.case(case_key)
        return await self._for_case(account_id, case_key)

    async def insert(self, interaction: Interaction) -> Interaction:
        rules.record_keys(interaction)
        stored = await self._insert(interaction)
        self._faults.reach(FaultPoint.AFTER_INTERACTION_PERSISTENCE)
        return stored

    async def insert_replacing_blocking(self, interaction: Interaction) -> tuple[str, ...]:
        rules.record_keys(interaction)
        replaced = await self._insert_replacing_blocking(interaction)
        self._faults.reach(FaultPoint.AFTER_INTERACTION_PERSISTENCE)
        return replaced

    async def begin_resolution(
        self, account_id: str, interaction_id: str, option_id: str
    ) -> Interaction:
        rules.text(account_id, interaction_id, option_id)
        return await self._begin_resolution(account_id, interaction_id, option_id)

    async def finish(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None = None,
        event_ids: Sequence[str] = (),
    ) -> Interaction:
        events = tuple(event_ids)
        rules.text(account_id, interaction_id, option_id, *events)
        settled = rules.settlement(status)
        return await self._finish(account_id, interaction_id, settled, option_id, events)

    async def decline(
        self, account_id: str, interaction_id: str, option_id: str | None = None
    ) -> Interaction:
        rules.text(account_id, interaction_id, option_id)
        return await self._close(account_id, interaction_id, InteractionStatus.DECLINED, option_id)

    async def dismiss(self, account_id: str, interaction_id: str) -> Interaction:
        rules.text(account_id, interaction_id)
        return await self._close(account_id, interaction_id, InteractionStatus.DISMISSED, None)

    async def invalidate_for_revision(
        self, account_id: str, case_key: CaseKey, current_revision: int
    ) -> tuple[str, ...]:
        rules.text(account_id)
        rules.case(case_key)
        return await self._invalidate(account_id, case_key, rules.whole(current_revision))

    async def invalidate_case_cards(self, account_id: str, case_key: CaseKey) -> tuple[str, ...]:
        rules.text(account_id)
        rules.case(case_key)
        return await self._invalidate(account_id, case_key, None)

    async def expire_due(self, now: int, limit: int) -> tuple[Interaction, ...]:
        return await self._expire_due(rules.instant(now), rules.limit(limit))

    @abstractmethod
    async def _get(self, account_id: str, interaction_id: str) -> Interaction: ...

    @abstractmethod
    async def _open_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[Interaction, ...]: ...

    @abstractmethod
    async def _for_case(self, account_id: str, case_key: CaseKey) -> tuple[Interaction, ...]: ...

    @abstractmethod
    async def _insert(self, interaction: Interaction) -> Interaction:
        """Judge with `_rules.new_card`, `_rules.reinsert` and `_rules.blocking_slot`."""

    @abstractmethod
    async def _insert_replacing_blocking(self, interaction: Interaction) -> tuple[str, ...]: ...

    @abstractmethod
    async def _begin_resolution(
        self, account_id: str, interaction_id: str, option_id: str
    ) -> Interaction: ...

    @abstractmethod
    async def _finish(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
        event_ids: tuple[str, ...],
    ) -> Interaction: ...

    @abstractmethod
    async def _close(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
    ) -> Interaction:
        """active -> `status` (declined or dismissed)."""

    @abstractmethod
    async def _invalidate(
        self, account_id: str, case_key: CaseKey, current_revision: int | None
    ) -> tuple[str, ...]:
        """The case's stale cards (`_rules.stale`), invalidated; their ids in list order."""

    @abstractmethod
    async def _expire_due(self, now: int, limit: int) -> tuple[Interaction, ...]: ...


class JournalRole(_Role, ABC):
    async def get(self, account_id: str, command_id: str) -> JournalEntry:
        rules.text(account_id, command_id)
        return await self._get(account_id, command_id)

    async def get_by_key(self, account_id: str, idempotency_key: str) -> JournalEntry:
        rules.text(account_id, idempotency_key)
        return await self._get_by_key(account_id, idempotency_key)

    async def for_turn(self, account_id: str, turn_id: str) -> tuple[JournalEntry, ...]:
        rules.text(account_id, turn_id)
        return await self._for_turn(account_id, turn_id, unsettled=False)

    async def unsettled_for_turn(self, account_id: str, turn_id: str) -> tuple[JournalEntry, ...]:
        rules.text(account_id, turn_id)
        return await self._for_turn(account_id, turn_id, unsettled=True)

    async def begin(self, entry: JournalEntry) -> JournalAdmission:
        rules.record_keys(entry)
        rules.admissible(entry)
        self._faults.reach(FaultPoint.BEFORE_JOURNAL_INSERT)
        admission = await self._begin(entry)
        if isinstance(admission, Fresh):
            self._faults.reach(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT)
        return admission

    async def mark_executing(self, account_id: str, command_id: str) -> JournalEntry:
        rules.text(account_id, command_id)
        return await self._mark_executing(account_id, command_id)

    async def complete(
        self, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry:
        rules.text(account_id, command_id)
        rules.settles(outcome)
        return await self._complete(account_id, command_id, outcome)

    @abstractmethod
    async def _get(self, account_id: str, command_id: str) -> JournalEntry: ...

    @abstractmethod
    async def _get_by_key(self, account_id: str, idempotency_key: str) -> JournalEntry: ...

    @abstractmethod
    async def _for_turn(
        self, account_id: str, turn_id: str, *, unsettled: bool
    ) -> tuple[JournalEntry, ...]:
        """The turn's entries (only the `_rules.UNSETTLED_JOURNAL` ones when `unsettled`)."""

    @abstractmethod
    async def _begin(self, entry: JournalEntry) -> JournalAdmission: ...

    @abstractmethod
    async def _mark_executing(self, account_id: str, command_id: str) -> JournalEntry: ...

    @abstractmethod
    async def _complete(
        self, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry: ...


class EventRole(_Role, ABC):
    async def get_by_ids(
        self, account_id: str, event_ids: Sequence[str]
    ) -> tuple[DomainEvent, ...]:
        ids = tuple(dict.fromkeys(event_ids))
        rules.text(account_id, *ids)
        return await self._get_by_ids(account_id, ids)

    async def list_for_case(
        self, account_id: str, case_key: CaseKey, since_revision: int, limit: int
    ) -> tuple[DomainEvent, ...]:
        rules.text(account_id)
        rules.case(case_key)
        since = rules.whole(since_revision)
        return await self._list_for_case(account_id, case_key, since, rules.limit(limit))

    async def read_from(self, account_id: str, cursor: EventCursor, limit: int) -> EventPage:
        rules.text(account_id)
        rules.whole(cursor.sequence)
        return await self._read_from(account_id, cursor, rules.limit(limit))

    async def append(
        self, account_id: str, events: Sequence[DomainEvent]
    ) -> tuple[DomainEvent, ...]:
        batch = tuple(events)
        rules.text(account_id)
        for event in batch:
            rules.record_keys(event)
        appended = await self._append(account_id, batch)
        self._faults.reach(FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK)
        return appended

    @abstractmethod
    async def _get_by_ids(
        self, account_id: str, event_ids: tuple[str, ...]
    ) -> tuple[DomainEvent, ...]:
        """`event_ids` holds each id once."""

    @abstractmethod
    async def _list_for_case(
        self, account_id: str, case_key: CaseKey, since_revision: int, limit: int
    ) -> tuple[DomainEvent, ...]: ...

    @abstractmethod
    async def _read_from(self, account_id: str, cursor: EventCursor, limit: int) -> EventPage: ...

    @abstractmethod
    async def _append(
        self, account_id: str, events: tuple[DomainEvent, ...]
    ) -> tuple[DomainEvent, ...]:
        """Judge the batch with `_rules.batch_problem` and `_rules.event_stored`, then append."""


class OutboxRole(_Role, ABC):
    async def get(self, outbox_id: str) -> OutboxEntry:
        rules.text(outbox_id)
        return await self._get(outbox_id)

    async def list_for_command(self, command_id: str) -> tuple[OutboxEntry, ...]:
        rules.text(command_id)
        return await self._list_for_command(command_id)

    async def pending_count(self) -> int:
        return await self._pending_count()

    async def enqueue(self, entry: OutboxEntry) -> OutboxEntry:
        rules.record_keys(entry)
        rules.enqueueable(entry)
        return await self._enqueue(entry)

    async def claim_due(self, now: int, limit: int, worker_id: str) -> tuple[OutboxEntry, ...]:
        moment, most = rules.instant(now), rules.limit(limit)
        rules.worker(worker_id)
        self._faults.reach(FaultPoint.BEFORE_OUTBOX_DISPATCH)
        return await self._claim_due(moment, most, worker_id)

    async def begin_dispatch(self, outbox_id: str, attempt: int, now: int) -> OutboxEntry:
        rules.text(outbox_id)
        return await self._begin_dispatch(outbox_id, rules.whole(attempt), rules.instant(now))

    async def mark_completed(self, outbox_id: str, attempt: int | None = None) -> OutboxEntry:
        rules.text(outbox_id)
        at = None if attempt is None else rules.whole(attempt)
        self._faults.reach(FaultPoint.AFTER_OUTBOX_DISPATCH)
        return await self._mark_completed(outbox_id, at)

    async def mark_failed(
        self,
        outbox_id: str,
        reason: str,
        retry_at: int | None = None,
        attempt: int | None = None,
    ) -> OutboxEntry:
        rules.text(outbox_id)
        rules.reason(reason)
        retry = None if retry_at is None else rules.instant(retry_at)
        at = None if attempt is None else rules.whole(attempt)
        self._faults.reach(FaultPoint.AFTER_OUTBOX_DISPATCH)
        return await self._mark_failed(outbox_id, reason, retry, at)

    async def mark_outcome_unknown(
        self,
        outbox_id: str,
        remote_ref: str | None = None,
        check_at: int | None = None,
        attempt: int | None = None,
    ) -> OutboxEntry:
        rules.text(outbox_id, remote_ref)
        check = None if check_at is None else rules.instant(check_at)
        at = None if attempt is None else rules.whole(attempt)
        self._faults.reach(FaultPoint.AFTER_OUTBOX_DISPATCH)
        return await self._mark_outcome_unknown(outbox_id, remote_ref, check, at)

    async def unclaim(self, outbox_id: str, worker_id: str) -> OutboxEntry:
        rules.text(outbox_id)
        rules.worker(worker_id)
        return await self._unclaim(outbox_id, worker_id)

    async def claim_reconciliations(
        self, now: int, limit: int, until: int
    ) -> tuple[OutboxEntry, ...]:
        moment, most, lease = rules.instant(now), rules.limit(limit), rules.instant(until)
        return await self._claim_reconciliations(moment, most, lease)

    async def reschedule(self, outbox_id: str, at: int) -> OutboxEntry:
        rules.text(outbox_id)
        return await self._reschedule(outbox_id, rules.instant(at))

    async def release_expired_claims(self, claimed_before: int) -> int:
        return await self._release_expired_claims(rules.instant(claimed_before))

    @abstractmethod
    async def _get(self, outbox_id: str) -> OutboxEntry: ...

    @abstractmethod
    async def _list_for_command(self, command_id: str) -> tuple[OutboxEntry, ...]: ...

    @abstractmethod
    async def _pending_count(self) -> int: ...

    @abstractmethod
    async def _enqueue(self, entry: OutboxEntry) -> OutboxEntry: ...

    @abstractmethod
    async def _claim_due(self, now: int, limit: int, worker_id: str) -> tuple[OutboxEntry, ...]: ...

    @abstractmethod
    async def _begin_dispatch(self, outbox_id: str, attempt: int, now: int) -> OutboxEntry: ...

    @abstractmethod
    async def _mark_completed(self, outbox_id: str, attempt: int | None) -> OutboxEntry: ...

    @abstractmethod
    async def _mark_failed(
        self, outbox_id: str, reason: str, retry_at: int | None, attempt: int | None
    ) -> OutboxEntry: ...

    @abstractmethod
    async def _mark_outcome_unknown(
        self, outbox_id: str, remote_ref: str | None, check_at: int | None, attempt: int | None
    ) -> OutboxEntry: ...

    @abstractmethod
    async def _unclaim(self, outbox_id: str, worker_id: str) -> OutboxEntry: ...

    @abstractmethod
    async def _claim_reconciliations(
        self, now: int, limit: int, until: int
    ) -> tuple[OutboxEntry, ...]: ...

    @abstractmethod
    async def _reschedule(self, outbox_id: str, at: int) -> OutboxEntry: ...

    @abstractmethod
    async def _release_expired_claims(self, claimed_before: int) -> int: ...


class ReplayRole(_Role, ABC):
    async def get(self, account_id: str, turn_id: str) -> ReplayRecord:
        rules.text(account_id, turn_id)
        return await self._get(account_id, turn_id)

    async def get_by_token(self, account_id: str, replay_token: str) -> ReplayRecord:
        rules.text(account_id, replay_token)
        return await self._get_by_token(account_id, replay_token)

    async def for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[ReplayRecord, ...]:
        rules.text(account_id, conversation_id)
        return await self._for_conversation(account_id, conversation_id)

    async def last_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> ReplayRecord | None:
        rules.text(account_id, conversation_id)
        return await self._last_for_conversation(account_id, conversation_id)

    async def put(self, record: ReplayRecord) -> None:
        await self._put(record)

    async def chain(self, account_id: str, conversation_id: str) -> tuple[ChainLink, ...]:
        rules.text(account_id, conversation_id)
        return await self._chain(account_id, conversation_id)

    async def accounts_with_token(self, replay_token: str) -> tuple[str, ...]:
        rules.text(replay_token)
        return await self._accounts_with_token(replay_token)

    async def accounts_with_conversation(self, conversation_id: str) -> tuple[str, ...]:
        rules.text(conversation_id)
        return await self._accounts_with_conversation(conversation_id)

    @abstractmethod
    async def _chain(self, account_id: str, conversation_id: str) -> tuple[ChainLink, ...]: ...

    @abstractmethod
    async def _accounts_with_token(self, replay_token: str) -> tuple[str, ...]: ...

    @abstractmethod
    async def _accounts_with_conversation(self, conversation_id: str) -> tuple[str, ...]: ...

    @abstractmethod
    async def _get(self, account_id: str, turn_id: str) -> ReplayRecord: ...

    @abstractmethod
    async def _get_by_token(self, account_id: str, replay_token: str) -> ReplayRecord: ...

    @abstractmethod
    async def _for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[ReplayRecord, ...]: ...

    @abstractmethod
    async def _last_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> ReplayRecord | None: ...

    @abstractmethod
    async def _put(self, record: ReplayRecord) -> None:
        """Judge with `_rules.derived_token` and `_rules.put_replay`, then upsert."""


class CommitRole(_Role, ABC):
    async def commit(self, bundle: CommitBundle) -> CommitResult:
        self._check(bundle)
        return await self._commit(bundle)

    @staticmethod
    def _check(bundle: CommitBundle) -> None:
        """What every commit checks before it writes anything."""
        bundle.require_valid()
        rules.bundle_keys(bundle)

    @abstractmethod
    async def _commit(self, bundle: CommitBundle) -> CommitResult:
        """Apply the bundle all-or-nothing, its items in `_rules.write_bundle`'s order."""
