"""pytest fixtures that run a test once per store backend: memory, SQLite and PostgreSQL.

Enable it in a `conftest.py`:

    pytest_plugins = ("turnframe_test.pytest_plugin",)

    async def test_my_workflow_commits_once(store_backend):   # runs three times
        stores = await store_backend.stores(clock=clock)      # fresh, migrated, removed afterwards
        ...

The `postgres` case makes its schemas on the server `turnframe_postgres_url` names: by default
`TURNFRAME_TEST_DATABASE_URL`; override that fixture to find a server another way. Without one the
case is skipped with the reason printed, or fails when `TURNFRAME_REQUIRE_SERVICES=1`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from turnframe_test.backends import BACKENDS, Service, StoreBackend

__all__ = ["store_backend", "turnframe_postgres_url"]


@pytest.fixture
def turnframe_postgres_url() -> str:
    """The PostgreSQL server the `postgres` backend makes its schemas on."""
    given = os.environ.get("TURNFRAME_TEST_DATABASE_URL")
    return Service(given or None, "no PostgreSQL: TURNFRAME_TEST_DATABASE_URL is unset").use()


@pytest_asyncio.fixture(params=BACKENDS)
async def store_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreBackend]:
    """Fresh stores of one backend per call; all closed and removed after the test."""
    name: str = request.param
    server = request.getfixturevalue("turnframe_postgres_url") if name == "postgres" else None
    async with StoreBackend(name, tmp_path, server) as backend:
        yield backend
