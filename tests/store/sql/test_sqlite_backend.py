"""The embedded SQLite store: WAL mode, one writer at a time across processes, an exclusive
outbox claim, and nothing of an uncommitted write visible to a reader."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
from services import Database

from turnframe_core.replay import TurnPhase
from turnframe_core.turn import TurnInput
from turnframe_store import OutboxEntry, SqlConfig, SqlStores, Unavailable, UserTurnRecord

T0 = 1_700_000_000_000


@pytest.fixture
async def database(tmp_path: Path) -> AsyncIterator[Database]:
    """One SQLite file; every store opened on it is closed after the test."""
    made = Database("sqlite", f"sqlite+aiosqlite:///{tmp_path / 'embedded.db'}", SqlConfig(), [])
    try:
        yield made
    finally:
        for stores in made.opened:
            await stores.aclose()


def _path(database: Database) -> str:
    return database.url.removeprefix("sqlite+aiosqlite:///")


def _row(n: int) -> OutboxEntry:
    return OutboxEntry(
        outbox_id=f"obx_{n:04d}",
        command_id=f"cmd_{n:04d}",
        destination="embedded.remote",
        idempotency_key=f"key-{n}",
        created_at=T0 + n,
    )


async def test_the_sqlite_file_is_written_ahead_in_wal_mode(database: Database) -> None:
    await database.migrated()

    with sqlite3.connect(_path(database)) as connection:
        (mode,) = connection.execute("PRAGMA journal_mode").fetchone()

    assert mode == "wal"


async def test_two_stores_on_one_file_never_hand_out_the_same_outbox_row(
    database: Database,
) -> None:
    first = await database.migrated()
    second = await database.stores()
    for n in range(200):
        await first.outbox.enqueue(_row(n))

    async def claim_all(stores: SqlStores, worker: str) -> list[str]:
        got: list[str] = []
        while batch := await stores.outbox.claim_due(T0 + 10_000, 7, worker):
            got.extend(row.outbox_id for row in batch)
        return got

    claimed = await asyncio.gather(
        *(claim_all(s, f"w{n}") for n, s in enumerate((first, second, first, second)))
    )
    handed = [outbox_id for got in claimed for outbox_id in got]
    leftover = await second.outbox.claim_due(T0 + 10_000, 10, "w9")

    assert len(handed) == len(set(handed)) == 200
    assert leftover == ()


async def test_a_writer_held_out_past_the_busy_timeout_is_unavailable_and_writes_nothing(
    database: Database,
) -> None:
    await database.migrated()
    impatient = replace(database, config=replace(database.config, sqlite_busy_timeout_ms=100))
    stores = await impatient.stores()
    locked, release = threading.Event(), threading.Event()

    def other_process_writing() -> None:
        connection = sqlite3.connect(_path(database), isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        locked.set()
        release.wait(10)
        connection.rollback()
        connection.close()

    holder = threading.Thread(target=other_process_writing)
    holder.start()
    try:
        await asyncio.to_thread(locked.wait, 10)
        with pytest.raises(Unavailable):
            await stores.conversations.ensure_conversation("acct_1", "conv_1")
        release.set()
        await asyncio.to_thread(holder.join, 10)
        created = await stores.conversations.ensure_conversation("acct_1", "conv_1")
    finally:
        release.set()

    assert created.conversation_id == "conv_1"


async def test_a_write_rolled_back_before_commit_is_never_seen_by_a_reader(
    database: Database,
) -> None:
    writer = await database.migrated()
    reader = await database.stores()
    held, release = asyncio.Event(), asyncio.Event()
    await writer.conversations.ensure_conversation("acct_1", "conv_1")

    async def hold_then_abort(pid: int) -> None:
        writer.hooks.before_commit = None
        held.set()
        await release.wait()
        raise RuntimeError("aborted before COMMIT")

    writer.hooks.before_commit = hold_then_abort
    appending = asyncio.create_task(
        writer.conversations.append_user_turn(
            UserTurnRecord(
                account_id="acct_1",
                conversation_id="conv_1",
                turn_id="turn_1",
                received_at=T0,
                input=TurnInput(account_id="acct_1", conversation_id="conv_1", text="hi"),
            )
        )
    )
    await held.wait()
    while_open = await reader.conversations.list_turns("acct_1", "conv_1")
    release.set()
    with pytest.raises(RuntimeError):
        await appending
    after = await reader.conversations.list_turns("acct_1", "conv_1")
    unfinished = await reader.conversations.list_unfinished_turns(10)

    assert while_open == after == ()
    assert [m for m in unfinished if m.phase is TurnPhase.RECEIVED] == []


async def test_migrating_an_in_memory_database_again_keeps_its_tables_and_rows() -> None:
    stores = await SqlStores.connect("sqlite+aiosqlite://")
    try:
        await stores.migrate()
        await stores.conversations.ensure_conversation("acct_a", "conv_1")

        await stores.migrate()
        await asyncio.gather(stores.migrate(), stores.outbox.enqueue(_row(1)))

        assert (await stores.conversations.get_conversation("acct_a", "conv_1")).created_at > 0
        assert (await stores.outbox.get("obx_0001")).command_id == "cmd_0001"
    finally:
        await stores.aclose()
