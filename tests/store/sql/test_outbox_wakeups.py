"""A relay's wakeups: on PostgreSQL an outbox row wakes the listener when its transaction
commits (not before), and a row of another schema does not; SQLite hands out a plain wait."""

from __future__ import annotations

import asyncio
import time

from turnframe_store import OutboxEntry
from turnframe_test.backends import Databases


def _row(n: int) -> OutboxEntry:
    return OutboxEntry(
        outbox_id=f"obx_{n:026d}",
        command_id=f"cmd_{n:026d}",
        destination="tests.remote",
        idempotency_key=f"key-{n}",
        created_at=1_700_000_000_000,
    )


async def test_a_committed_outbox_row_wakes_the_relays_listener(
    postgres_databases: Databases,
) -> None:
    stores = await postgres_databases.migrated()
    elsewhere = await postgres_databases.migrated()  # another schema on the same server
    async with stores.outbox_wakeups() as wakeups:
        assert await wakeups.wait(0.2) is False  # nothing yet
        await elsewhere.outbox.enqueue(_row(1))
        assert await wakeups.wait(0.3) is False  # another schema's row

        inserted, commit = asyncio.Event(), asyncio.Event()

        async def writer() -> None:
            async with stores.transaction() as tx:
                await tx.outbox.enqueue(_row(2))
                inserted.set()
                await commit.wait()

        task = asyncio.create_task(writer())
        await inserted.wait()
        assert await wakeups.wait(0.3) is False  # not before the COMMIT
        commit.set()
        await task
        started = time.monotonic()
        assert await wakeups.wait(5) is True
        assert time.monotonic() - started < 2


async def test_sqlite_relays_poll(databases: Databases) -> None:
    stores = await databases.migrated()
    async with stores.outbox_wakeups() as wakeups:
        await stores.outbox.enqueue(_row(1))
        started = time.monotonic()
        woke = await wakeups.wait(0.1)
    if databases.backend == "sqlite":
        assert woke is False and time.monotonic() - started >= 0.09
    else:
        assert woke is True
