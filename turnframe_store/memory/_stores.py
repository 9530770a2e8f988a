"""MemoryStores' roles: each hook runs one engine operation under the engine's lock."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from turnframe_core.audit_chain import ChainLink
from turnframe_core.cases import CaseKey
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction, InteractionStatus
from turnframe_core.replay import CommandOutcome, ReplayRecord, TurnPhase
from turnframe_core.turn import AssistantTurn
from turnframe_store import _rules as rules
from turnframe_store._roles import (
    CommitRole,
    ConversationRole,
    EventRole,
    InteractionRole,
    JournalRole,
    OutboxRole,
    ReplayRole,
)
from turnframe_store._rules import StreamEntry
from turnframe_store.bundle import Stores
from turnframe_store.clock import Clock, system_clock
from turnframe_store.errors import Conflict, StoreError
from turnframe_store.faults import FaultPlan
from turnframe_store.memory._engine import _Engine
from turnframe_store.memory._transaction import _Transaction
from turnframe_store.records import (
    CommitBundle,
    CommitResult,
    ConversationRecord,
    EventCursor,
    EventPage,
    JournalAdmission,
    JournalEntry,
    OutboxEntry,
    PhaseMarker,
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


class MemoryConversations(ConversationRole):
    def __init__(self, engine: _Engine) -> None:
        super().__init__(engine.faults)
        self._engine = engine

    async def _get_conversation(self, account_id: str, conversation_id: str) -> ConversationRecord:
        t = self._engine.t
        return rules.found(
            await self._engine.read(lambda: t.conversations.get((account_id, conversation_id)))
        )

    async def _get_user_turn(self, account_id: str, turn_id: str) -> UserTurnRecord:
        t = self._engine.t
        return rules.found(await self._engine.read(lambda: t.user_turns.get((account_id, turn_id))))

    async def _get_assistant_turn(self, account_id: str, turn_id: str) -> AssistantTurn:
        text = await self._engine.read(lambda: self._engine.get_assistant_turn(account_id, turn_id))
        return rules.reload_answer(text)

    async def _list_turns(
        self, account_id: str, conversation_id: str
    ) -> tuple[UserTurnRecord, ...]:
        return await self._engine.read(lambda: self._engine.list_turns(account_id, conversation_id))

    async def _recent_turns(
        self, account_id: str, conversation_id: str, limit: int
    ) -> tuple[str, ...]:
        engine = self._engine
        return await engine.read(lambda: engine.recent_turns(account_id, conversation_id, limit))

    async def _get_phase(self, account_id: str, turn_id: str) -> PhaseMarker:
        t = self._engine.t
        return rules.found(await self._engine.read(lambda: t.phases.get((account_id, turn_id))))

    async def _list_unfinished_turns(self, limit: int) -> tuple[PhaseMarker, ...]:
        return await self._engine.read(lambda: self._engine.list_unfinished_turns(limit))

    async def _ensure_conversation(
        self, account_id: str, conversation_id: str
    ) -> ConversationRecord:
        return await self._engine.write(
            lambda undo: self._engine.ensure_conversation(undo, account_id, conversation_id)
        )

    async def _append_user_turn(self, record: UserTurnRecord) -> None:
        await self._engine.write(lambda undo: self._engine.append_user_turn(undo, record))

    async def _append_assistant_turn(
        self, account_id: str, turn: AssistantTurn, phase: TurnPhase | None
    ) -> None:
        await self._engine.write(
            lambda undo: self._engine.append_assistant_turn(undo, account_id, turn, phase)
        )

    async def _set_phase(self, account_id: str, turn_id: str, phase: TurnPhase) -> PhaseMarker:
        return await self._engine.write(
            lambda undo: self._engine.set_phase(undo, account_id, turn_id, phase)
        )

    async def _stream_events(
        self, account_id: str, turn_id: str, after_sequence: int, limit: int
    ) -> tuple[str, ...]:
        engine = self._engine
        return await engine.read(
            lambda: engine.stream_events(account_id, turn_id, after_sequence, limit)
        )

    async def _stream_tail(self, account_id: str, turn_id: str) -> str | None:
        return await self._engine.read(lambda: self._engine.stream_tail(account_id, turn_id))

    async def _append_stream_events(
        self, account_id: str, entries: tuple[StreamEntry, ...]
    ) -> None:
        turn_id = entries[0].turn_id
        await self._engine.write(
            lambda undo: self._engine.append_stream_events(undo, account_id, turn_id, entries)
        )

    async def _prune_stream_events(self, finished_before: int, limit: int) -> int:
        return await self._engine.write(
            lambda undo: self._engine.prune_stream_events(undo, finished_before, limit)
        )


class MemoryInteractions(InteractionRole):
    def __init__(self, engine: _Engine) -> None:
        super().__init__(engine.faults)
        self._engine = engine

    async def _get(self, account_id: str, interaction_id: str) -> Interaction:
        return await self._engine.read(lambda: self._engine.card(account_id, interaction_id))

    async def _open_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[Interaction, ...]:
        return await self._engine.read(
            lambda: self._engine.open_for_conversation(account_id, conversation_id)
        )

    async def _for_case(self, account_id: str, case_key: CaseKey) -> tuple[Interaction, ...]:
        return await self._engine.read(
            lambda: tuple(self._engine.cards_of_case(account_id, case_key))
        )

    async def _insert(self, interaction: Interaction) -> Interaction:
        return await self._engine.write(lambda undo: self._engine.insert_card(undo, interaction))

    async def _insert_replacing_blocking(self, interaction: Interaction) -> tuple[str, ...]:
        return await self._engine.write(
            lambda undo: self._engine.insert_replacing_blocking(undo, interaction)
        )

    async def _begin_resolution(
        self, account_id: str, interaction_id: str, option_id: str
    ) -> Interaction:
        return await self._engine.write(
            lambda undo: self._engine.begin_resolution(undo, account_id, interaction_id, option_id)
        )

    async def _finish(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
        event_ids: tuple[str, ...],
    ) -> Interaction:
        return await self._engine.write(
            lambda undo: self._engine.finish(
                undo, account_id, interaction_id, status, option_id, event_ids
            )
        )

    async def _close(
        self,
        account_id: str,
        interaction_id: str,
        status: InteractionStatus,
        option_id: str | None,
    ) -> Interaction:
        return await self._engine.write(
            lambda undo: self._engine.close_card(
                undo, account_id, interaction_id, status, option_id
            )
        )

    async def _invalidate(
        self, account_id: str, case_key: CaseKey, current_revision: int | None
    ) -> tuple[str, ...]:
        return await self._engine.write(
            lambda undo: self._engine.invalidate(undo, account_id, case_key, current_revision)
        )

    async def _expire_due(self, now: int, limit: int) -> tuple[Interaction, ...]:
        return await self._engine.write(lambda undo: self._engine.expire_due(undo, now, limit))


class MemoryJournal(JournalRole):
    def __init__(self, engine: _Engine) -> None:
        super().__init__(engine.faults)
        self._engine = engine

    async def _get(self, account_id: str, command_id: str) -> JournalEntry:
        return await self._engine.read(lambda: self._engine.entry(account_id, command_id))

    async def _get_by_key(self, account_id: str, idempotency_key: str) -> JournalEntry:
        engine = self._engine

        def read() -> JournalEntry:
            command_id = rules.found(engine.t.journal_by_key.get((account_id, idempotency_key)))
            return engine.entry(account_id, command_id)

        return await engine.read(read)

    async def _for_turn(
        self, account_id: str, turn_id: str, *, unsettled: bool
    ) -> tuple[JournalEntry, ...]:
        entries = await self._engine.read(
            lambda: self._engine.journal_for_turn(account_id, turn_id)
        )
        if unsettled:
            return tuple(e for e in entries if e.status in rules.UNSETTLED_JOURNAL)
        return tuple(entries)

    async def _begin(self, entry: JournalEntry) -> JournalAdmission:
        return await self._engine.write(lambda undo: self._engine.begin(undo, entry))

    async def _mark_executing(self, account_id: str, command_id: str) -> JournalEntry:
        return await self._engine.write(
            lambda undo: self._engine.mark_executing(undo, account_id, command_id)
        )

    async def _complete(
        self, account_id: str, command_id: str, outcome: CommandOutcome
    ) -> JournalEntry:
        return await self._engine.write(
            lambda undo: self._engine.complete(undo, account_id, command_id, outcome)
        )


class MemoryEvents(EventRole):
    def __init__(self, engine: _Engine) -> None:
        super().__init__(engine.faults)
        self._engine = engine

    async def _get_by_ids(
        self, account_id: str, event_ids: tuple[str, ...]
    ) -> tuple[DomainEvent, ...]:
        return await self._engine.read(lambda: self._engine.get_by_ids(account_id, event_ids))

    async def _list_for_case(
        self, account_id: str, case_key: CaseKey, since_revision: int, limit: int
    ) -> tuple[DomainEvent, ...]:
        return await self._engine.read(
            lambda: self._engine.list_for_case(account_id, case_key, since_revision, limit)
        )

    async def _read_from(self, account_id: str, cursor: EventCursor, limit: int) -> EventPage:
        return await self._engine.read(lambda: self._engine.read_from(account_id, cursor, limit))

    async def _append(
        self, account_id: str, events: tuple[DomainEvent, ...]
    ) -> tuple[DomainEvent, ...]:
        return await self._engine.write(lambda undo: self._engine.append(undo, account_id, events))


class MemoryOutbox(OutboxRole):
    def __init__(self, engine: _Engine) -> None:
        super().__init__(engine.faults)
        self._engine = engine

    async def _get(self, outbox_id: str) -> OutboxEntry:
        return await self._engine.read(lambda: self._engine.row(outbox_id))

    async def _list_for_command(self, command_id: str) -> tuple[OutboxEntry, ...]:
        return await self._engine.read(lambda: self._engine.rows_for_command(command_id))

    async def _pending_count(self) -> int:
        return await self._engine.read(self._engine.open_rows)

    async def _enqueue(self, entry: OutboxEntry) -> OutboxEntry:
        return await self._engine.write(lambda undo: self._engine.enqueue(undo, entry))

    async def _claim_due(self, now: int, limit: int, worker_id: str) -> tuple[OutboxEntry, ...]:
        return await self._engine.write(
            lambda undo: self._engine.claim_due(undo, now, limit, worker_id)
        )

    async def _begin_dispatch(self, outbox_id: str, attempt: int, now: int) -> OutboxEntry:
        return await self._engine.write(
            lambda undo: self._engine.begin_dispatch(undo, outbox_id, attempt, now)
        )

    async def _mark_completed(self, outbox_id: str, attempt: int | None) -> OutboxEntry:
        return await self._engine.write(
            lambda undo: self._engine.mark_completed(undo, outbox_id, attempt)
        )

    async def _mark_failed(
        self, outbox_id: str, reason: str, retry_at: int | None, attempt: int | None
    ) -> OutboxEntry:
        return await self._engine.write(
            lambda undo: self._engine.mark_failed(undo, outbox_id, reason, retry_at, attempt)
        )

    async def _mark_outcome_unknown(
        self, outbox_id: str, remote_ref: str | None, check_at: int | None, attempt: int | None
    ) -> OutboxEntry:
        return await self._engine.write(
            lambda undo: self._engine.mark_outcome_unknown(
                undo, outbox_id, remote_ref, check_at, attempt
            )
        )

    async def _unclaim(self, outbox_id: str, worker_id: str) -> OutboxEntry:
        return await self._engine.write(
            lambda undo: self._engine.unclaim(undo, outbox_id, worker_id)
        )

    async def _claim_reconciliations(
        self, now: int, limit: int, until: int
    ) -> tuple[OutboxEntry, ...]:
        return await self._engine.write(
            lambda undo: self._engine.claim_reconciliations(undo, now, limit, until)
        )

    async def _reschedule(self, outbox_id: str, at: int) -> OutboxEntry:
        return await self._engine.write(lambda undo: self._engine.reschedule(undo, outbox_id, at))

    async def _release_expired_claims(self, claimed_before: int) -> int:
        return await self._engine.write(
            lambda undo: self._engine.release_expired_claims(undo, claimed_before)
        )


class MemoryReplay(ReplayRole):
    def __init__(self, engine: _Engine) -> None:
        super().__init__(engine.faults)
        self._engine = engine

    async def _get(self, account_id: str, turn_id: str) -> ReplayRecord:
        return await self._engine.read(lambda: self._engine.replay_record(account_id, turn_id))

    async def _get_by_token(self, account_id: str, replay_token: str) -> ReplayRecord:
        engine = self._engine

        def read() -> ReplayRecord:
            turn_id = rules.found(engine.t.replay_by_token.get((account_id, replay_token)))
            return engine.replay_record(account_id, turn_id)

        return await engine.read(read)

    async def _for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[ReplayRecord, ...]:
        return await self._engine.read(
            lambda: self._engine.replay_for_conversation(account_id, conversation_id)
        )

    async def _last_for_conversation(
        self, account_id: str, conversation_id: str
    ) -> ReplayRecord | None:
        return await self._engine.read(
            lambda: self._engine.last_replay_for_conversation(account_id, conversation_id)
        )

    async def _put(self, record: ReplayRecord) -> None:
        await self._engine.write(lambda undo: self._engine.put_replay(undo, record))

    async def _chain(self, account_id: str, conversation_id: str) -> tuple[ChainLink, ...]:
        return await self._engine.read(
            lambda: self._engine.audit_chain(account_id, conversation_id)
        )

    async def _accounts_with_token(self, replay_token: str) -> tuple[str, ...]:
        return await self._engine.read(lambda: self._engine.accounts_with_token(replay_token))

    async def _accounts_with_conversation(self, conversation_id: str) -> tuple[str, ...]:
        return await self._engine.read(
            lambda: self._engine.accounts_with_conversation(conversation_id)
        )


class MemoryCommits(CommitRole):
    def __init__(self, engine: _Engine) -> None:
        super().__init__(engine.faults)
        self._engine = engine

    async def _commit(self, bundle: CommitBundle) -> CommitResult:
        deferred: list[StoreError] = []
        engine = self._engine
        result = await engine.write(lambda undo: engine.commit(undo, bundle, deferred))
        if deferred:  # the bundle committed (or will, with its transaction); then the call fails
            if engine.transaction is None:
                raise deferred[0]
            engine.transaction.after_commit = deferred[0]
        return result


_ROLE_CLASSES: dict[str, type] = {
    "conversations": MemoryConversations,
    "interactions": MemoryInteractions,
    "journal": MemoryJournal,
    "events": MemoryEvents,
    "outbox": MemoryOutbox,
    "replay": MemoryReplay,
    "commits": MemoryCommits,
}


def _roles(engine: _Engine, classes: dict[str, type]) -> dict[str, Any]:
    return {role: cls(engine) for role, cls in classes.items()}


class _InTransaction(Stores):
    """The roles of one open transaction; a nested transaction joins it."""

    @property
    def transactional(self) -> bool:
        return True

    _engine: _Engine
    _tx: _Transaction

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Stores]:
        yield self

    @contextlib.asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Stores]:
        yield self

    @contextlib.asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        tx = self._tx
        tx.usable()
        mark = tx.undo.mark()
        try:
            yield
        except BaseException:
            with self._engine.lock:
                tx.undo.rollback_to(mark)
            tx.failure = None
            raise
        if tx.failure is not None:
            failure, tx.failure = tx.failure, None
            with self._engine.lock:
                tx.undo.rollback_to(mark)
            raise Conflict("the savepoint was rolled back: a call in it failed") from failure


class MemoryStores(Stores):
    """Every role in memory, sharing one state, one lock, one clock and one fault plan.

    `transaction()` is serializable: while one is open, every other call waits for it to end."""

    def __init__(self, *, clock: Clock | None = None, faults: FaultPlan | None = None) -> None:
        self.engine = _Engine(clock if clock is not None else system_clock, faults or FaultPlan())
        self._classes = dict(_ROLE_CLASSES)
        super().__init__(**_roles(self.engine, self._classes))

    @property
    def transactional(self) -> bool:
        return True

    def conversation_lock(
        self, account_id: str, conversation_id: str, timeout_s: float = 10.0
    ) -> contextlib.AbstractAsyncContextManager[None]:
        return self.engine.conversation_locks.hold(account_id, conversation_id, timeout_s)

    def replace(self, **roles: Any) -> Stores:
        """These stores with roles swapped in. A memory role built on this store's engine (a
        role class altered for a test) is used as given outside transactions and built again
        on each transaction's engine inside one, so the stores stay transactional; any other
        role object gives a plain bundle, which is not."""
        if not all(getattr(role, "_engine", None) is self.engine for role in roles.values()):
            return super().replace(**roles)
        clone = object.__new__(MemoryStores)
        clone.engine = self.engine
        clone._classes = {**self._classes, **{name: type(r) for name, r in roles.items()}}
        current = {name: getattr(self, name) for name in self._classes}
        Stores.__init__(clone, **{**current, **roles})
        return clone

    def _view(self, tx: _Transaction) -> Stores:
        """The roles of this store, bound to `tx`."""
        engine = self.engine.bound(tx)
        view = _InTransaction._of(**_roles(engine, self._classes))
        view._engine, view._tx = engine, tx
        return view

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Stores]:
        gate = self.engine.gate
        await gate.enter()
        tx = _Transaction()
        try:
            try:
                yield self._view(tx)
            except BaseException:
                with self.engine.lock:
                    tx.undo.rollback()
                raise
            if tx.failure is not None:
                with self.engine.lock:
                    tx.undo.rollback()
                raise Conflict("the transaction was rolled back: a call in it failed") from (
                    tx.failure
                )
        finally:
            tx.closed = True
            gate.leave()
        if tx.after_commit is not None:  # it committed; the caller never heard
            raise tx.after_commit

    @contextlib.asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Stores]:
        """Reads of a copy of the state taken between transactions (see `Stores.snapshot`):
        writers go on beside it, and nothing can be written through it."""
        gate = self.engine.gate
        await gate.enter()
        try:
            with self.engine.lock:
                tables = self.engine.t.copy()
        finally:
            gate.leave()
        tx = _Transaction(read_only=True)
        engine = _Engine(self.engine.clock, self.engine.faults, tables=tables, transaction=tx)
        view = _InTransaction._of(**_roles(engine, self._classes))
        view._engine, view._tx = engine, tx
        try:
            yield view
        finally:
            tx.closed = True

    @property
    def clock(self) -> Clock:
        return self.engine.clock

    @property
    def faults(self) -> FaultPlan:
        """Arm a fault: `stores.faults.arm(FaultPoint.BEFORE_JOURNAL_INSERT)`."""
        return self.engine.faults
