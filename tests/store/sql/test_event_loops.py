"""`SqlStores` belong to the event loop that connected them (their pool, connections and locks
do): a call from another running loop raises `ForeignEventLoop` at once, on SQLite and
PostgreSQL, and the stores keep working on their own loop."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from turnframe_core import codes
from turnframe_store import ForeignEventLoop, NotFound, SqlStores


def _on_another_loop(call: Callable[[], Awaitable[Any]]) -> tuple[BaseException | None, float]:
    """Run `call` on a new event loop in a thread of its own: what it raised, how long it took."""
    outcome: list[tuple[BaseException | None, float]] = []

    def thread() -> None:
        async def run() -> None:
            started = time.monotonic()
            try:
                await call()
            except BaseException as error:
                outcome.append((error, time.monotonic() - started))
            else:
                outcome.append((None, time.monotonic() - started))

        asyncio.run(run())

    worker = threading.Thread(target=thread)
    worker.start()
    worker.join(30)
    assert outcome, "the other loop's call never finished"
    return outcome[0]


async def test_a_read_from_another_event_loop_raises_foreign_event_loop(
    sql_stores: SqlStores,
) -> None:
    await sql_stores.conversations.ensure_conversation("acct_1", "conv_1")

    error, took = _on_another_loop(
        lambda: sql_stores.conversations.get_conversation("acct_1", "conv_1")
    )

    assert isinstance(error, ForeignEventLoop)
    assert error.code == codes.STORE_FOREIGN_EVENT_LOOP
    assert "event loop" in str(error)
    assert took < 1.0


async def test_a_write_and_a_transaction_from_another_event_loop_raise_foreign_event_loop(
    sql_stores: SqlStores,
) -> None:
    async def in_transaction() -> None:
        async with sql_stores.transaction() as tx:
            await tx.conversations.ensure_conversation("acct_1", "conv_2")

    write, _ = _on_another_loop(
        lambda: sql_stores.conversations.ensure_conversation("acct_1", "conv_1")
    )
    transaction, _ = _on_another_loop(in_transaction)

    assert isinstance(write, ForeignEventLoop)
    assert isinstance(transaction, ForeignEventLoop)
    with pytest.raises(NotFound):
        await sql_stores.conversations.get_conversation("acct_1", "conv_1")


async def test_many_calls_from_other_loops_fail_at_once_and_the_own_loop_carries_on(
    sql_stores: SqlStores,
) -> None:
    async def burst() -> None:
        await asyncio.gather(
            *(
                sql_stores.conversations.ensure_conversation("acct_1", f"conv_{n}")
                for n in range(20)
            )
        )

    errors = [_on_another_loop(burst) for _ in range(3)]

    assert all(isinstance(error, ForeignEventLoop) and took < 1.0 for error, took in errors)
    created = await sql_stores.conversations.ensure_conversation("acct_1", "conv_own")
    assert created.conversation_id == "conv_own"
