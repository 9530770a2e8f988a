"""The stores every conformance check runs on: each backend once, a fresh store per check."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from turnframe_store import ManualClock, MemoryStores, SqlStores, Stores
from turnframe_test.backends import Databases

StoresFactory = Callable[[], Awaitable[Stores]]

#: memory (the wall clock and a clock that never moves), SQLite (a file and in memory), PostgreSQL.
CONFORMANCE_BACKENDS = ("memory", "memory-still-clock", "sqlite", "sqlite-in-memory", "postgres")


@pytest.fixture(params=CONFORMANCE_BACKENDS)
async def conformance_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoresFactory]:
    """A factory of fresh stores of one backend; whatever it opened is closed afterwards."""
    backend: str = request.param
    if backend == "memory":
        yield _memory(still_clock=False)
    elif backend == "memory-still-clock":
        yield _memory(still_clock=True)
    elif backend == "sqlite-in-memory":
        opened: list[SqlStores] = []

        async def in_memory() -> Stores:
            stores = await SqlStores.connect("sqlite+aiosqlite://")
            opened.append(stores)
            await stores.migrate()
            return stores

        yield in_memory
        for stores in opened:
            await stores.aclose()
    else:
        server = request.getfixturevalue("postgres_url") if backend == "postgres" else None
        databases = Databases(backend, tmp_path, server)
        try:
            yield databases.migrated
        finally:
            await databases.close()


def _memory(*, still_clock: bool) -> StoresFactory:
    async def factory() -> Stores:
        return MemoryStores(clock=ManualClock() if still_clock else None)

    return factory
