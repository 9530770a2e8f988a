"""The test kit's pytest plugin, loaded wherever turnframe is installed (entry point `pytest11`;
listing it in `pytest_plugins` as well is harmless). It gives:

- `store_backend` (needs pytest-asyncio): a test runs once per store backend, memory, SQLite
  and PostgreSQL, on fresh stores each time:

      async def test_my_workflow_commits_once(store_backend):   # runs three times
          stores = await store_backend.stores(clock=clock)      # migrated, removed afterwards

  The `postgres` case makes its schemas on the server `turnframe_postgres_url` names: by
  default `TURNFRAME_TEST_DATABASE_URL`; override that fixture to find a server another way.
  Without one the case is skipped with the reason printed, or fails when
  `TURNFRAME_REQUIRE_SERVICES=1`.
- the `gate(*numbers)` marker: the test is evidence for those release gates (`turnframe gates
  --tests PATH` counts it).

Nothing here loads the release machinery (the gates table, the process-chaos runs, the turn
server): `turnframe gates` chooses and records its tests through its own plugin,
`turnframe_test.gates_plugin`, which it loads in the pytest session it starts (and this
repository's tests/conftest.py lists).

The suites adopters subclass (store and executor conformance, state exploration, crash
recovery at every fault point) live in `turnframe_test.suites`; docs/gates.md shows them.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from turnframe_test.backends import BACKENDS, Service, StoreBackend

__all__ = ["store_backend", "turnframe_postgres_url"]


@pytest.fixture
def turnframe_postgres_url() -> str:
    """The PostgreSQL server the `postgres` backend makes its schemas on."""
    given = os.environ.get("TURNFRAME_TEST_DATABASE_URL")
    return Service(given or None, "no PostgreSQL: TURNFRAME_TEST_DATABASE_URL is unset").use()


async def _store_backend(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreBackend]:
    """Fresh stores of one backend per call; all closed and removed after the test."""
    name: str = request.param
    server = request.getfixturevalue("turnframe_postgres_url") if name == "postgres" else None
    async with StoreBackend(name, tmp_path, server) as backend:
        yield backend


# An async fixture needs pytest-asyncio; without it, the rest of the plugin still loads (it is
# loaded in every pytest run where turnframe is installed).
if importlib.util.find_spec("pytest_asyncio") is not None:
    import pytest_asyncio

    store_backend = pytest_asyncio.fixture(params=BACKENDS, name="store_backend")(_store_backend)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "gate(*numbers): the test is evidence for these release gates (`turnframe gates`)",
    )
