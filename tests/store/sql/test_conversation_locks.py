"""Conversation locks on PostgreSQL: a turn waiting for its conversation holds no shared
connection, so one busy conversation cannot starve the others of lock connections, and every
wait ends by its timeout (the wait for a connection included)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from turnframe_core import Brief, TurnInput, UlidIdSource, Understanding
from turnframe_runtime import ConversationBusy, RuntimeConfig
from turnframe_store import Busy, SqlStores, StoreError
from turnframe_test import DeskHarness, act, understanding
from turnframe_test.backends import Databases


async def _stores(databases: Databases, **config: Any) -> SqlStores:
    return await databases.new(**config).migrated()


async def _hold(
    stores: SqlStores,
    account: str,
    conversation: str,
    release: asyncio.Event,
    held: asyncio.Event | None = None,
) -> None:
    async with stores.conversation_lock(account, conversation, 5.0):
        if held is not None:
            held.set()
        await release.wait()


async def test_waiters_for_one_conversation_leave_lock_connections_to_the_others(
    postgres_databases: Databases,
) -> None:
    stores = await _stores(postgres_databases, lock_pool_size=2, acquire_timeout_s=1.0)
    release, held = asyncio.Event(), asyncio.Event()
    holder = asyncio.create_task(_hold(stores, "acct_a", "conv_busy", release, held))
    await asyncio.wait_for(held.wait(), 10)
    waiters = [
        asyncio.create_task(_hold(stores, "acct_a", "conv_busy", release)) for _ in range(10)
    ]
    await asyncio.sleep(0.2)  # the waiters are waiting (were any not, this proves less)
    try:
        async with stores.conversation_lock("acct_b", "conv_other", 2.0):
            pass  # another account's conversation takes its lock at once
    finally:
        release.set()
        await asyncio.gather(holder, *waiters)


@pytest.mark.parametrize("where", ["this process", "another process"])
async def test_a_wait_for_a_busy_conversation_ends_by_its_timeout(
    postgres_databases: Databases, where: str
) -> None:
    """With its one lock connection held, a waiter is refused by its own timeout, not by the
    pool's longer acquire timeout added to it."""
    database = postgres_databases.new(lock_pool_size=1, acquire_timeout_s=5.0)
    stores = await database.migrated()
    other = stores if where == "this process" else await database.stores()
    release, held = asyncio.Event(), asyncio.Event()
    holder = asyncio.create_task(_hold(stores, "acct_a", "conv_1", release, held))
    await asyncio.wait_for(held.wait(), 10)
    started = time.monotonic()
    try:
        with pytest.raises(Busy):
            async with other.conversation_lock("acct_a", "conv_1", 0.3):
                pass
        waited = time.monotonic() - started
    finally:
        release.set()
        await holder
    assert waited < 1.5, waited  # its 0.3 s, not the pool's 5 s
    async with other.conversation_lock("acct_a", "conv_1", 2.0):  # free again: taken
        pass


async def test_a_conversation_flooded_by_one_account_leaves_another_accounts_turns_alone(
    postgres_databases: Databases,
) -> None:
    stores = await _stores(postgres_databases, lock_pool_size=3, acquire_timeout_s=2.0)
    config = RuntimeConfig(conversation_wait_ms=10_000)
    flooder, other = (
        DeskHarness(
            stores=stores,
            account_id=account,
            conversation_id=conversation,
            config=config,
            ids=UlidIdSource(),
        )
        for account, conversation in (("acct_flood", "conv_f"), ("acct_calm", "conv_c"))
    )
    for desk in (flooder, other):
        desk.ready_trip()
        slow = desk is flooder  # each flooding turn holds its conversation a while

        async def name(brief: Brief, slow: bool = slow) -> Understanding:
            if slow:
                await asyncio.sleep(0.05)
            return understanding(act("a1", "trip.set_name", "h1", "Ada", name="Ada Lovelace"))

        desk.interpreter.understand = name  # type: ignore[method-assign]

    def said(desk: DeskHarness, n: int) -> TurnInput:
        return TurnInput(
            account_id=desk.account_id, conversation_id=desk.conversation_id, text=f"Ada {n}"
        )

    flood = [asyncio.create_task(flooder.runtime.handle_turn(said(flooder, n))) for n in range(40)]
    calm: list[Any] = []
    took: list[float] = []
    for n in range(12):
        started = time.monotonic()
        try:
            calm.append(await other.runtime.handle_turn(said(other, n)))
        except StoreError as failure:
            calm.append(failure)
        took.append(time.monotonic() - started)
    flooded = await asyncio.gather(*flood, return_exceptions=True)

    assert [type(t).__name__ for t in calm] == ["AssistantTurn"] * 12
    # Each in its own time, not behind the flood (2 s of it) nor the pool's 2 s acquire wait.
    assert max(took) < 1.5, took
    assert all(not isinstance(t, BaseException) or isinstance(t, ConversationBusy) for t in flooded)
