"""MemoryStores' transactions: the gate that admits one at a time, and the open transaction's
undo log and the error that doomed it."""

from __future__ import annotations

import asyncio
import threading

from turnframe_store._transaction import TransactionState
from turnframe_store.memory._state import _UndoLog

__all__ = ["_Gate", "_Transaction"]


class _Gate:
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


class _Transaction(TransactionState):
    """One open transaction, and the undo steps of everything it wrote (`read_only`: a
    snapshot's, which writes nothing)."""

    def __init__(self, *, read_only: bool = False) -> None:
        super().__init__()
        self.undo = _UndoLog()
        self.read_only = read_only
