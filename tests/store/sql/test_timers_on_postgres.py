"""Timers on PostgreSQL under concurrency: several processes' sweeps (each `SqlStores` its own
pool) share due timers and expired claims without handing one timer to two workers."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from services import Database, Databases

from turnframe_store import SqlStores, TimerStatus
from turnframe_store.sql.url import parse_url

T0 = 1_700_000_000_000
LEASE = 60_000
TIMERS = 1000


@pytest.fixture
async def database(postgres_databases: Databases) -> Database:
    return postgres_databases.new()


async def _seed(database: Database) -> None:
    """TIMERS pending timers, due one second apart, across three accounts' conversations."""
    async with await psycopg.AsyncConnection.connect(
        parse_url(database.url)[1],
        autocommit=True,
        options=f"-c search_path={database.config.schema}",
    ) as connection:
        await connection.execute(
            "INSERT INTO tf_conversation (account_id, conversation_id, created_at)"
            " SELECT 'acct_' || a, 'conv_1', to_timestamp(1700000000) FROM generate_series(0, 2) a"
        )
        await connection.execute(
            "INSERT INTO tf_timer (account_id, timer_id, conversation_id, due_at, event, status,"
            " created_at)"
            " SELECT 'acct_' || (n %% 3), 'tmr_' || n, 'conv_1', to_timestamp(1700000000 + n),"
            " '{}', 'pending', to_timestamp(1700000000) FROM generate_series(1, %s) AS n",
            (TIMERS,),
        )


async def _sweep(stores: SqlStores, now: int, worker: str, got: list[str]) -> list[str]:
    while batch := await stores.timers.claim_due(now, LEASE, 9, worker):
        got.extend(f"{row.account_id}/{row.timer_id}" for row in batch)
    return got


async def test_a_sweep_held_open_is_skipped_not_waited_for_and_no_timer_is_claimed_twice(
    database: Database,
) -> None:
    setup = await database.migrated()
    await _seed(database)
    claimers = [await database.stores() for _ in range(4)]
    now = T0 + 10_000_000
    held, release = asyncio.Event(), asyncio.Event()
    fired = False

    async def hold(pid: int) -> None:
        nonlocal fired
        if not fired:
            fired = True
            held.set()
            await release.wait()

    # w0's first claim is held open with its rows locked; w1 claims meanwhile and skips them.
    claimers[0].hooks.before_commit = hold
    opening = asyncio.create_task(claimers[0].timers.claim_due(now, LEASE, 9, "w0"))
    await held.wait()
    try:
        beside = await asyncio.wait_for(claimers[1].timers.claim_due(now, LEASE, 9, "w1"), 5)
    finally:
        release.set()
    first = await opening
    assert [row.timer_id for row in first] == [f"tmr_{n}" for n in range(1, 10)]
    assert [row.timer_id for row in beside] == [f"tmr_{n}" for n in range(10, 19)]

    claimed = await asyncio.gather(
        _sweep(claimers[0], now, "w0", [f"{r.account_id}/{r.timer_id}" for r in first]),
        _sweep(claimers[1], now, "w1", [f"{r.account_id}/{r.timer_id}" for r in beside]),
        _sweep(claimers[2], now, "w2", []),
        _sweep(claimers[3], now, "w3", []),
    )

    handed = [timer for got in claimed for timer in got]
    assert len(handed) == len(set(handed)) == TIMERS
    for worker, got in enumerate(claimed):
        for timer in got[:25]:
            account, timer_id = timer.split("/")
            row = await setup.timers.get(account, timer_id)
            assert (row.status, row.worker_id, row.claimed_at) == (
                TimerStatus.CLAIMED,
                f"w{worker}",
                now,
            )


async def test_claims_whose_lease_ran_out_are_shared_by_concurrent_sweeps_once_each(
    database: Database,
) -> None:
    await database.migrated()
    await _seed(database)
    first = await database.stores()
    now = T0 + 10_000_000
    assert len(await _sweep(first, now, "w-dead", [])) == TIMERS
    claimers = [await database.stores() for _ in range(4)]

    within = await asyncio.gather(
        *(c.timers.claim_due(now + LEASE - 1, LEASE, 50, f"w{n}") for n, c in enumerate(claimers))
    )
    later = now + LEASE
    claimed: list[Any] = await asyncio.gather(
        *(_sweep(c, later, f"w{n}", []) for n, c in enumerate(claimers))
    )

    assert within == [(), (), (), ()]
    handed = [timer for got in claimed for timer in got]
    assert len(handed) == len(set(handed)) == TIMERS
    assert all(got for got in claimed)  # every sweep took a share
