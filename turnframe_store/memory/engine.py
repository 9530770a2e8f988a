"""MemoryStores' engine: the state every role shares, the lock and gate that serialize it, and
the open transaction a bound engine writes into. It stores nothing itself; the roles
(`conversations`, `interactions`, …) write the state.

Operations run under `lock`; a write takes an undo log and leaves no trace when it raises. An
operation outside a transaction waits at the `gate` while a transaction is open; an engine bound
to a transaction (`bound`) writes into the transaction's undo log instead, so the whole
transaction is undone when it fails.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar

from turnframe_store._transaction import TransactionState
from turnframe_store.clock import Clock
from turnframe_store.errors import Conflict, NotFound, StoreError
from turnframe_store.faults import FaultPlan
from turnframe_store.locks import ConversationLocks
from turnframe_store.memory.state import Tables, UndoLog
from turnframe_store.roles.rules import Role

__all__ = ["Gate", "MemoryEngine", "MemoryRole", "MemoryTransaction"]

R = TypeVar("R")


class Gate:
    """One transaction at a time. An operation outside it waits while one is open; it polls
    rather than waiting on one event loop's future, so the store stays usable from several event
    loops and threads. The task holding the gate may not wait for it (that would never end)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: object = None

    async def enter(self) -> None:
        me = asyncio.current_task()
        delay = 0.00005
        while not self._lock.acquire(blocking=False):
            if self._owner is me and me is not None:
                raise RuntimeError(
                    "a store call outside the open transaction, from the task holding it: use "
                    "the transaction's stores"
                )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.002)
        self._owner = me

    def leave(self) -> None:
        self._owner = None
        self._lock.release()


class MemoryTransaction(TransactionState):
    """One open transaction, and the undo steps of everything it wrote (`read_only`: a
    snapshot's, which writes nothing)."""

    def __init__(self, *, read_only: bool = False) -> None:
        super().__init__()
        self.undo = UndoLog()
        self.read_only = read_only


class MemoryEngine:
    """The state every memory role shares, its lock, and the transaction it writes in (if any).
    Operations run under `lock`; a write takes an undo log and leaves no trace when it raises."""

    def __init__(
        self,
        clock: Clock,
        faults: FaultPlan,
        *,
        tables: Tables | None = None,
        lock: threading.Lock | None = None,
        gate: Gate | None = None,
        transaction: MemoryTransaction | None = None,
        conversation_locks: ConversationLocks | None = None,
    ) -> None:
        self.lock = lock if lock is not None else threading.Lock()
        self.gate = gate if gate is not None else Gate()
        self.clock = clock
        self.faults = faults
        self.t = tables if tables is not None else Tables()
        self.transaction = transaction
        self.conversation_locks = conversation_locks or ConversationLocks()

    def bound(self, transaction: MemoryTransaction) -> MemoryEngine:
        """This engine's state, written inside `transaction`."""
        return MemoryEngine(
            self.clock,
            self.faults,
            tables=self.t,
            lock=self.lock,
            gate=self.gate,
            transaction=transaction,
            conversation_locks=self.conversation_locks,
        )

    async def write(self, op: Callable[[UndoLog], R]) -> R:
        tx = self.transaction
        if tx is not None:
            tx.usable()
            if tx.read_only:
                raise Conflict("nothing is written through a snapshot")
            with self.lock:
                undo = UndoLog()
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
                undo = UndoLog()
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


class MemoryRole(Role):
    """A memory role: built on an engine, whose fault plan its public methods fire."""

    def __init__(self, engine: MemoryEngine) -> None:
        super().__init__(engine.faults)
        self.engine = engine
