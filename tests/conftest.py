"""Shared fixtures. Backends for service tests are chosen in tests/services.py (DESIGN §13); the
store-backend fixture (`store_backend`: memory, SQLite, PostgreSQL) comes from the shipped test
kit's pytest plugin. The runtime and outbox tests take a travel desk on that backend from
`desk` / `make_desk`, so every scenario runs on each."""

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from turnframe_test.audit_kit import assert_conversation_audited
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
async def make_desk(
    store_backend: StoreBackend, request: pytest.FixtureRequest
) -> AsyncIterator[DeskFactory]:
    """`await make_desk(narrator=...)`: a harness on fresh stores of this test's backend.

    When the test is done, every turn of each harness's conversation must replay verified with
    its audit chain intact (`assert_conversation_audited`), so each scenario is also an audit
    test; a test that breaks stored data on purpose says so with `@pytest.mark.unaudited`."""
    made: list[DeskHarness] = []

    async def factory(**kwargs: Any) -> DeskHarness:
        desk = await DeskHarness.on(store_backend, **kwargs)
        made.append(desk)
        return desk

    yield factory
    if request.node.get_closest_marker("unaudited") is None:
        for desk in made:
            await assert_conversation_audited(desk.stores, desk.account_id, desk.conversation_id)


@pytest.fixture
async def desk(make_desk: DeskFactory) -> DeskHarness:
    """A harness with the defaults on fresh stores of this test's backend."""
    return await make_desk()
