"""One turn at a time per conversation: the lock a runtime holds around each turn.

`Stores.conversation_lock(account_id, conversation_id, timeout_s)` is an async context manager.
Inside it no other holder of the same conversation's lock runs; a caller that cannot take it
within `timeout_s` gets `Busy` (nothing was written). Memory and SQLite stores lock within the
process (`ConversationLocks`); on PostgreSQL the lock is an advisory lock held by a transaction
of its own, so every process on the database serializes, and a process that dies releases it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from turnframe_store.errors import Busy

__all__ = ["ConversationLocks"]


class ConversationLocks:
    """Per-conversation locks within one process (and one event loop)."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    @contextlib.asynccontextmanager
    async def hold(
        self, account_id: str, conversation_id: str, timeout_s: float
    ) -> AsyncIterator[None]:
        key = (account_id, conversation_id)
        lock, users = self._held.get(key) or (asyncio.Lock(), 0)
        self._held[key] = (lock, users + 1)
        try:
            try:
                await asyncio.wait_for(lock.acquire(), timeout_s)
            except TimeoutError:
                raise Busy("another turn of this conversation is running") from None
            try:
                yield
            finally:
                lock.release()
        finally:
            lock, users = self._held[key]
            if users <= 1:
                del self._held[key]
            else:
                self._held[key] = (lock, users - 1)
