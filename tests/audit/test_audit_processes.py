"""Two processes take turns on one conversation at once on PostgreSQL: the conversation's
advisory lock serializes them, the audit chain links every final record in that order, and every
turn replays verified. (SQLite's conversation lock holds within one process only: processes
sharing a SQLite file must not take turns on one conversation at once.)"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator

import pytest

from turnframe_runtime.audit import read_chain
from turnframe_store import SqlStores
from turnframe_test.audit_kit import assert_conversation_audited
from turnframe_test.postgres import PrivateDatabase

TURNS_EACH = 6
# A process of its own: a runtime on the database, taking TURNS_EACH turns on conv_1.
WRITER = """
import asyncio, sys
from turnframe_core import UlidIdSource
from turnframe_store import SqlStores
from turnframe_test import DeskHarness, act

async def main(url, who, count):
    stores = await SqlStores.connect(url)
    desk = DeskHarness(stores=stores, ids=UlidIdSource())
    desk.ready_trip()
    for n in range(int(count)):
        name = f"{who} Lovelace {'I' * (n % 3 + 1)}"
        await desk.say(name, act("a1", "trip.set_name", "h1", name, name=name))
    await stores.aclose()

asyncio.run(main(*sys.argv[1:]))
"""


@pytest.fixture
async def database_url(postgres_url: str) -> AsyncIterator[str]:
    async with PrivateDatabase(postgres_url) as db:
        yield db.url


@pytest.mark.slow
async def test_two_processes_taking_turns_on_one_conversation_leave_a_verified_chain(
    database_url: str,
) -> None:
    stores = await SqlStores.connect(database_url)
    await stores.migrate()
    writers = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", WRITER, database_url, who, str(TURNS_EACH),
            stderr=asyncio.subprocess.PIPE,
        )
        for who in ("Ada", "Grace")
    ]  # fmt: skip
    outcomes = [await asyncio.wait_for(w.communicate(), 120) for w in writers]
    try:
        assert [w.returncode for w in writers] == [0, 0], [err.decode() for _, err in outcomes]
        chain = await read_chain(stores, "acct_1", "conv_1")
        assert chain.findings == ()
        assert [link.position for link in chain.links] == list(range(2 * TURNS_EACH))
        assert len(chain.records) == len(chain.turn_ids) == 2 * TURNS_EACH
        assert await assert_conversation_audited(stores, "acct_1", "conv_1") == 2 * TURNS_EACH
    finally:
        await stores.aclose()
