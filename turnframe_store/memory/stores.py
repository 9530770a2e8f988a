"""`MemoryStores`: every role in memory, sharing one engine (state, lock, clock, fault plan)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from turnframe_store.bundle import InTransaction, Stores
from turnframe_store.clock import Clock, system_clock
from turnframe_store.errors import Conflict
from turnframe_store.faults import FaultPlan
from turnframe_store.memory.commits import MemoryCommits
from turnframe_store.memory.conversations import MemoryConversations
from turnframe_store.memory.engine import MemoryEngine, MemoryTransaction
from turnframe_store.memory.events import MemoryEvents
from turnframe_store.memory.interactions import MemoryInteractions
from turnframe_store.memory.journal import MemoryJournal
from turnframe_store.memory.outbox import MemoryOutbox
from turnframe_store.memory.replay import MemoryReplay
from turnframe_store.memory.timers import MemoryTimers

__all__ = ["MemoryStores"]

_ROLE_CLASSES: dict[str, type] = {
    "conversations": MemoryConversations,
    "interactions": MemoryInteractions,
    "journal": MemoryJournal,
    "events": MemoryEvents,
    "outbox": MemoryOutbox,
    "replay": MemoryReplay,
    "timers": MemoryTimers,
    "commits": MemoryCommits,
}


def _roles(engine: MemoryEngine, classes: dict[str, type]) -> dict[str, Any]:
    return {role: cls(engine) for role, cls in classes.items()}


class _InTransaction(InTransaction):
    """The roles of one open transaction; a savepoint is a mark in its undo log."""

    _engine: MemoryEngine
    _tx: MemoryTransaction

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
        self.engine = MemoryEngine(
            clock if clock is not None else system_clock, faults or FaultPlan()
        )
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
        if not all(getattr(role, "engine", None) is self.engine for role in roles.values()):
            return super().replace(**roles)
        clone = object.__new__(MemoryStores)
        clone.engine = self.engine
        clone._classes = {**self._classes, **{name: type(r) for name, r in roles.items()}}
        current = {name: getattr(self, name) for name in self._classes}
        Stores.__init__(clone, **{**current, **roles})
        return clone

    def in_transaction(self, tx: MemoryTransaction) -> Stores:
        """The roles of this store, bound to `tx`."""
        engine = self.engine.bound(tx)
        view = _InTransaction.assemble(**_roles(engine, self._classes))
        view._engine, view._tx = engine, tx
        return view

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Stores]:
        gate = self.engine.gate
        await gate.enter()
        tx = MemoryTransaction()
        try:
            try:
                yield self.in_transaction(tx)
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
        tx = MemoryTransaction(read_only=True)
        engine = MemoryEngine(self.engine.clock, self.engine.faults, tables=tables, transaction=tx)
        view = _InTransaction.assemble(**_roles(engine, self._classes))
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
