"""The alembic migrations: they build exactly the table models, run safely on every start, and
two processes starting together do not race."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from services import Database
from sqlalchemy.pool import NullPool

from turnframe_core.replay import TurnPhase
from turnframe_core.turn import TurnInput
from turnframe_store import UserTurnRecord
from turnframe_store.sql._migrate import VERSION_TABLE
from turnframe_store.sql.tables import metadata
from turnframe_store.sql.url import sync_url

#: the last revision (0003: tf_replay.erased_at, decision 0032)
HEAD = "0003"
TABLES = {
    "tf_conversation",
    "tf_turn",
    "tf_turn_phase",
    "tf_interaction",
    "tf_command_journal",
    "tf_domain_event",
    "tf_outbox",
    "tf_replay",
    "tf_stream_event",
    "tf_audit_link",
    "tf_timer",
}


def _inspect(database: Database, read: Any) -> Any:
    engine = sa.create_engine(sync_url(database.url), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            if database.config.schema is not None:
                connection.exec_driver_sql(f'SET search_path TO "{database.config.schema}"')
            return read(connection)
    finally:
        engine.dispose()


def _differences(connection: sa.Connection) -> list[Any]:
    context = MigrationContext.configure(
        connection, opts={"compare_type": True, "version_table": VERSION_TABLE}
    )
    return compare_metadata(context, metadata)


def _versions(connection: sa.Connection) -> list[str]:
    return [row[0] for row in connection.exec_driver_sql(f"SELECT * FROM {VERSION_TABLE}")]


async def test_the_migrated_schema_is_exactly_the_table_models(database: Database) -> None:
    await database.migrated()

    differences = await asyncio.to_thread(_inspect, database, _differences)

    assert differences == []


async def test_the_migrations_create_every_table_and_record_their_version(
    database: Database,
) -> None:
    await database.migrated()

    names = await asyncio.to_thread(
        _inspect, database, lambda c: set(sa.inspect(c).get_table_names())
    )
    versions = await asyncio.to_thread(_inspect, database, _versions)

    assert names == TABLES | {VERSION_TABLE}
    assert versions == [HEAD]


async def test_migrating_again_on_the_next_start_keeps_the_data(database: Database) -> None:
    first = await database.migrated()
    await first.conversations.ensure_conversation("acct_1", "conv_1")
    await first.conversations.append_user_turn(
        UserTurnRecord(
            account_id="acct_1",
            conversation_id="conv_1",
            turn_id="turn_1",
            received_at=1,
            input=TurnInput(account_id="acct_1", conversation_id="conv_1", text="hi"),
        )
    )

    second = await database.migrated()

    assert (await second.conversations.get_phase("acct_1", "turn_1")).phase is TurnPhase.RECEIVED
    assert await asyncio.to_thread(_inspect, database, _versions) == [HEAD]


async def test_the_in_process_guard_lets_stores_in_one_process_migrate_together(
    database: Database,
) -> None:
    starting = [await database.stores() for _ in range(3)]

    await asyncio.gather(*(stores.migrate() for stores in starting))

    assert await asyncio.to_thread(_inspect, database, _versions) == [HEAD]
    assert await asyncio.to_thread(_inspect, database, _differences) == []


_MIGRATE = """
import asyncio, sys
from turnframe_store import SqlConfig, SqlStores

async def main():
    stores = await SqlStores.connect(sys.argv[1], SqlConfig(schema=sys.argv[2] or None))
    try:
        await stores.migrate()
    finally:
        await stores.aclose()

asyncio.run(main())
"""


@pytest.mark.slow
async def test_two_processes_migrating_together_do_not_race(database: Database) -> None:
    schema = database.config.schema or ""
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", _MIGRATE, database.url, schema, stderr=asyncio.subprocess.PIPE
        )
        for _ in range(3)
    ]

    outcomes = [await process.communicate() for process in processes]

    assert [p.returncode for p in processes] == [0, 0, 0], [err for _, err in outcomes]
    assert await asyncio.to_thread(_inspect, database, _versions) == [HEAD]
    assert await asyncio.to_thread(_inspect, database, _differences) == []
