"""Driver failures reach callers only as the store's closed error surface, with their codes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import psycopg.errors as pg
import pytest
from psycopg_pool import PoolTimeout

from turnframe_core import codes
from turnframe_store import (
    Conflict,
    InvalidRecord,
    NotFound,
    SqlConfig,
    SqlStores,
    Timeout,
    Unavailable,
)
from turnframe_store.sql._migrate import upgrade
from turnframe_store.sql.errors import from_postgres, from_sqlite


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (pg.UniqueViolation("duplicate key"), Conflict),
        (pg.ForeignKeyViolation("no parent"), NotFound),
        (pg.CheckViolation("negative revision"), InvalidRecord),
        (pg.NotNullViolation("missing column"), InvalidRecord),
        (pg.QueryCanceled("statement timeout"), Timeout),
        (pg.UndefinedTable("no tf_turn"), Unavailable),
        (pg.DeadlockDetected("deadlock"), Unavailable),
        (psycopg.OperationalError("server closed the connection"), Unavailable),
        (PoolTimeout("no connection"), Unavailable),
    ],
)
def test_a_postgres_failure_maps_to_its_store_error(
    failure: Exception, expected: type[Exception]
) -> None:
    assert type(from_postgres(failure)) is expected


@pytest.mark.parametrize(
    "failure",
    [psycopg.OperationalError("server closed the connection"), psycopg.InterfaceError("gone")],
)
def test_a_connection_lost_while_committing_is_a_timeout_not_unavailable(
    failure: Exception,
) -> None:
    assert type(from_postgres(failure, committing=True)) is Timeout
    assert type(from_postgres(failure, committing=False)) is Unavailable


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (sqlite3.IntegrityError("UNIQUE constraint failed: tf_turn.turn_id"), Conflict),
        (sqlite3.IntegrityError("FOREIGN KEY constraint failed"), NotFound),
        (sqlite3.IntegrityError("CHECK constraint failed: revision"), InvalidRecord),
        (sqlite3.OperationalError("database is locked"), Unavailable),
        (sqlite3.OperationalError("no such table: tf_turn"), Unavailable),
    ],
)
def test_a_sqlite_failure_maps_to_its_store_error(
    failure: Exception, expected: type[Exception]
) -> None:
    assert type(from_sqlite(failure)) is expected


def test_a_sqlite_failure_while_committing_is_a_timeout() -> None:
    assert type(from_sqlite(sqlite3.OperationalError("disk I/O"), committing=True)) is Timeout


def test_mapped_errors_carry_stable_codes_and_no_values() -> None:
    mapped = from_postgres(pg.UniqueViolation("Key (turn_id)=(turn_secret) already exists"))

    assert mapped.code == codes.STORE_CONFLICT
    assert "turn_secret" not in str(mapped)


async def test_an_unreachable_database_is_unavailable_at_connect() -> None:
    with pytest.raises(Unavailable):
        await SqlStores.connect(
            "postgresql+psycopg://nobody@127.0.0.1:1/none", SqlConfig(acquire_timeout_s=0.5)
        )


async def test_migrating_an_unreachable_database_is_unavailable() -> None:
    stores = await SqlStores.connect(
        "postgresql+psycopg://nobody@127.0.0.1:1/none",
        SqlConfig(pool_min_size=0, acquire_timeout_s=0.5),
    )
    try:
        with pytest.raises(Unavailable):
            await stores.migrate()
    finally:
        await stores.aclose()


def test_migrating_a_file_that_is_no_database_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"not a database, " * 512)

    with pytest.raises(Unavailable):
        upgrade(f"sqlite+aiosqlite:///{path}")


def test_the_migration_refuses_a_schema_that_is_no_identifier() -> None:
    with pytest.raises(ValueError):
        upgrade("postgresql+psycopg://nobody@127.0.0.1:1/none", 'x"; DROP SCHEMA public; --')


async def test_a_store_used_before_migrate_says_so(tmp_path: Path) -> None:
    stores = await SqlStores.connect(f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}")
    try:
        with pytest.raises(Unavailable, match="migrate"):
            await stores.conversations.ensure_conversation("acct_1", "conv_1")
    finally:
        await stores.aclose()


@pytest.mark.parametrize(
    "url", ["mysql://root@localhost/db", "postgresql+asyncpg://u@h/db", "not a url"]
)
async def test_an_unsupported_database_url_is_refused(url: str) -> None:
    with pytest.raises(ValueError):
        await SqlStores.connect(url)


def test_a_config_out_of_range_is_refused() -> None:
    for bad in (
        {"pool_size": 0},
        {"pool_min_size": 11},
        {"statement_timeout_ms": 0},
        {"schema": "Robert'); DROP"},
    ):
        with pytest.raises(ValueError):
            SqlConfig(**bad)  # type: ignore[arg-type]


async def test_a_stored_card_that_no_longer_matches_its_hash_reads_as_corrupt(
    sql_stores: SqlStores,
) -> None:
    from turnframe_store import Corrupt
    from turnframe_store.sql._backend import Statement
    from turnframe_test import confirm_card

    card = confirm_card()
    await sql_stores.interactions.insert(card)
    schema = sql_stores.config.schema
    table = f'"{schema}".tf_interaction' if schema else "tf_interaction"
    tamper = Statement(
        "tamper",
        f"UPDATE {table} SET interaction = replace(interaction, "
        f"'{card.payload.title}', 'Something else')",
    )
    async with sql_stores.engine.backend.writing() as connection:
        assert (await connection.run([(tamper, {})])).error is None

    with pytest.raises(Corrupt):
        await sql_stores.interactions.get(card.account_id, card.interaction_id)
