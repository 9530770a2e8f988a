"""Shared fixtures. Backends for service tests are chosen in tests/services.py (DESIGN §13); the
store-backend fixture (`store_backend`: memory, SQLite, PostgreSQL) comes from the shipped test
kit's pytest plugin."""

import pytest

pytest_plugins = ("turnframe_test.pytest_plugin", "services")


@pytest.fixture
def turnframe_postgres_url(postgres_url: str) -> str:
    """The `store_backend` fixture's PostgreSQL: the server tests/services.py finds (environment,
    local server or testcontainers), failing under TURNFRAME_REQUIRE_SERVICES=1 when there is
    none."""
    return postgres_url
