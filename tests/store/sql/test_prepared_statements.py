"""A failed pipeline must not leave a PostgreSQL connection whose prepared statements psycopg
and the server disagree on (psycopg 3.3.9 can count a statement queued after the failure as
prepared although the server skipped it): every later statement still runs, in the same
transaction behind a savepoint and on the connections the pool hands out afterwards."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from services import Databases

from turnframe_store import SqlStores
from turnframe_store.sql._backend import Statement
from turnframe_store.sql.url import parse_url
from turnframe_test.waits import until


@pytest.fixture
async def stores(postgres_databases: Databases) -> SqlStores:
    """Migrated stores on a private schema (closed with it by the fixture)."""
    return await postgres_databases.migrated()


async def _sleeping(databases: Databases, pid: int) -> bool:
    """Whether the server session `pid` is running a `pg_sleep` right now."""
    server = parse_url(databases.server or "")[1]
    async with await psycopg.AsyncConnection.connect(server, autocommit=True) as c:
        cursor = await c.execute("SELECT query FROM pg_stat_activity WHERE pid = %s AND "
                                 "state = 'active'", (pid,))  # fmt: skip
        row = await cursor.fetchone()
    return row is not None and "pg_sleep" in row[0]


def _statements(stores: SqlStores) -> tuple[Statement, ...]:
    schema = stores.config.schema
    table = f'"{schema}".tf_probe' if schema else "tf_probe"
    return (
        Statement("probe_create", f"CREATE TABLE IF NOT EXISTS {table} (id int PRIMARY KEY)"),
        Statement("probe_select", "SELECT %(n)s::int AS n", ("n",)),
        Statement("probe_insert", f"INSERT INTO {table} VALUES (%(id)s)"),
        Statement("probe_add", "SELECT %(n)s::int + 1 AS n", ("n",)),
        Statement("probe_text", "SELECT %(n)s::text AS t", ("t",)),
    )


async def test_failed_pipelines_never_leave_a_statement_the_server_does_not_know(
    stores: SqlStores,
) -> None:
    backend = stores.engine.backend
    create, select, insert, add, text = _statements(stores)
    async with backend.writing() as connection:
        assert (await connection.run([(create, {})])).error is None
    async with backend.writing() as connection:
        assert (await connection.run([(insert, {"id": 1}), (select, {"n": 0})])).error is None
    errors = []
    for n in range(16):  # past psycopg's threshold of five uses, several times over
        duplicate = n % 2 == 1  # odd rounds fail in the middle of the pipeline
        batch = [
            (select, {"n": n}),
            (insert, {"id": 1 if duplicate else 100 + n}),
            (add, {"n": n}),
            (text, {"n": n}),
        ]
        async with backend.writing() as connection:
            outcome = await connection.run(batch)
        errors.append(None if outcome.error is None else type(outcome.error).__name__)
    assert errors == [("Conflict" if n % 2 else None) for n in range(16)]


async def test_a_transaction_goes_on_after_a_failed_pipeline_behind_a_savepoint(
    stores: SqlStores,
) -> None:
    backend = stores.engine.backend
    create, select, insert, add, text = _statements(stores)
    async with backend.writing() as connection:
        assert (await connection.run([(create, {})])).error is None
        assert (await connection.run([(insert, {"id": 1})])).error is None
    savepoint = Statement("probe_sp", "SAVEPOINT probe")
    back = Statement("probe_back", "ROLLBACK TO SAVEPOINT probe")
    async with backend.writing() as connection:
        for n in range(12):
            failing = [(savepoint, {}), (select, {"n": n}), (insert, {"id": 1}),
                       (add, {"n": n}), (text, {"n": n})]  # fmt: skip
            outcome = await connection.run(failing)
            assert outcome.failed_at == 2, n
            assert (await connection.run([(back, {})])).error is None
            after = await connection.run([(add, {"n": n}), (text, {"n": n})])
            assert after.error is None, (n, after.error)


async def test_a_pipeline_cancelled_midway_leaves_no_statement_the_server_does_not_know(
    postgres_databases: Databases,
) -> None:
    stores = await postgres_databases.new(pool_size=1, pool_min_size=1).migrated()
    backend = stores.engine.backend
    _, select, _, add, text = _statements(stores)
    sleep = Statement("probe_sleep", "SELECT pg_sleep(%(d)s::float) AS x", ("x",))
    # A rolled-back transaction (psycopg then starts counting uses afresh), then enough uses
    # that sleep and add are prepared before and text in the pipeline that is cancelled.
    with pytest.raises(KeyError):
        async with backend.writing() as connection:
            await connection.run([(sleep, {"d": 0}), (add, {"n": 0})])
            raise KeyError("rolled back")
    pids: set[int] = set()

    async def seen(pid: int) -> None:
        pids.add(pid)

    stores.hooks.before_commit = seen
    for n in range(5):
        async with backend.writing() as connection:
            batch = [(sleep, {"d": 0}), (add, {"n": n}), (text, {"n": n})]
            assert (await connection.run(batch)).error is None

    async def cancelled() -> None:
        async with backend.writing() as connection:
            await connection.run([(sleep, {"d": 5}), (add, {"n": 9}), (text, {"n": 9})])

    task = asyncio.create_task(cancelled())
    (pid,) = pids  # the pool's one connection
    await until(lambda: _sleeping(postgres_databases, pid), "the pipeline's sleep on the server")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for n in range(3):  # the one pooled connection, after the cancellation
        async with backend.writing() as connection:
            outcome = await connection.run([(select, {"n": n}), (add, {"n": n}),
                                            (text, {"n": n})])  # fmt: skip
            assert outcome.error is None, (n, outcome.error)


async def test_a_tainted_connection_cancelled_on_its_way_back_still_returns_to_the_pool(
    postgres_databases: Databases,
) -> None:
    stores = await postgres_databases.new(
        pool_size=1, pool_min_size=1, acquire_timeout_s=2
    ).migrated()
    backend = stores.engine.backend
    create, select, insert, _, _ = _statements(stores)
    async with backend.writing() as connection:
        assert (await connection.run([(create, {}), (insert, {"id": 1})])).error is None

    async def doomed() -> None:
        me = asyncio.current_task()
        assert me is not None
        async with backend.writing() as connection:
            failed = await connection.run([(select, {"n": 1}), (insert, {"id": 1})])
            assert failed.error is not None  # the pipeline failed: the connection is tainted
            asyncio.get_running_loop().call_soon(me.cancel)  # cancelled while it is released
            raise RuntimeError("the conflict, raised by the store")

    with pytest.raises(asyncio.CancelledError):  # the cancel landed during the release
        await asyncio.create_task(doomed())
    async with backend.reading() as connection:  # the pool's one slot came back
        assert (await connection.run([(select, {"n": 7})])).results[0].rows == [{"n": 7}]
