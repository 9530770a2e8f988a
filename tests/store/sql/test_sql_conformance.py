"""SqlStores passes the store conformance suite on SQLite and on PostgreSQL, like MemoryStores."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from turnframe_store import SqlStores, Stores
from turnframe_store.conformance import run_all


async def test_the_sql_store_passes_the_store_conformance_suite(
    sql_stores_factory: Callable[[], Awaitable[SqlStores]],
) -> None:
    report = await run_all(sql_stores_factory)

    assert report.passed, report.describe()


async def test_an_in_memory_sqlite_store_passes_the_store_conformance_suite() -> None:
    async def factory() -> Stores:
        stores = await SqlStores.connect("sqlite+aiosqlite://")
        await stores.migrate()
        return stores

    report = await run_all(factory)

    assert report.passed, report.describe()
