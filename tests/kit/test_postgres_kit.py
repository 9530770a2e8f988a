"""The test kit's PostgreSQL pieces, as the real-process runs use them: processes that start
together each open the shared airline ledger and trip desk on one fresh database."""

from __future__ import annotations

import asyncio

from turnframe_store.sql.url import parse_url
from turnframe_test.postgres import PrivateDatabase
from turnframe_test.sample.airline import PostgresAirlineLedger
from turnframe_test.sample.travel_pg import PostgresTripDesk


async def test_processes_starting_together_create_the_kits_tables_without_a_race(
    postgres_url: str,
) -> None:
    """CREATE TABLE IF NOT EXISTS alone fails on pg_type's unique index when two sessions create
    one table at the same moment (a chaos run's runtimes once failed to start on it)."""
    for _ in range(3):
        async with PrivateDatabase(postgres_url) as db:
            conninfo = parse_url(db.url)[1]
            opened = await asyncio.gather(
                *(PostgresAirlineLedger(conninfo, pool_size=1).open() for _ in range(4)),
                *(PostgresTripDesk(conninfo, pool_size=1).open() for _ in range(4)),
            )
            for piece in opened:
                await piece.aclose()
