"""Shared fixtures. Backends for service tests are chosen in tests/services.py (DESIGN §13); the
store-backend fixture (`store_backend`: memory, SQLite, PostgreSQL) comes from the shipped test
kit's pytest plugin. The runtime and outbox tests take a travel desk on that backend from
`desk` / `make_desk`, so every scenario runs on each."""

from collections.abc import Awaitable, Callable
from functools import partial

import pytest

from turnframe_test.backends import StoreBackend
from turnframe_test.harness import DeskHarness

pytest_plugins = ("turnframe_test.pytest_plugin", "services")

DeskFactory = Callable[..., Awaitable[DeskHarness]]


@pytest.fixture
def turnframe_postgres_url(postgres_url: str) -> str:
    """The `store_backend` fixture's PostgreSQL: the server tests/services.py finds (environment,
    local server or testcontainers), failing under TURNFRAME_REQUIRE_SERVICES=1 when there is
    none."""
    return postgres_url


@pytest.fixture
def make_desk(store_backend: StoreBackend) -> DeskFactory:
    """`await make_desk(narrator=...)`: a harness on fresh stores of this test's backend."""
    return partial(DeskHarness.on, store_backend)


@pytest.fixture
async def desk(make_desk: DeskFactory) -> DeskHarness:
    """A harness with the defaults on fresh stores of this test's backend."""
    return await make_desk()
