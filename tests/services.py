"""Where the project's service-backed tests find PostgreSQL (DESIGN §13); the SQL store fixtures.

PostgreSQL is looked for in order: the URL in `TURNFRAME_TEST_DATABASE_URL`; else a local server on
127.0.0.1:5432 when one answers; else a testcontainers container when a Docker engine answers; else
the tests that need it are skipped with the reason printed. With `TURNFRAME_REQUIRE_SERVICES=1`
(CI) a missing service fails them. The server found here is also the one the `store_backend`
fixture's `postgres` case uses (tests/conftest.py).

SQL store fixtures (`database` runs once per backend, `sqlite` and
`postgres`): every database is isolated and removed afterwards: a SQLite file in the test's tmp
directory, or a fresh PostgreSQL schema that is dropped (`turnframe_test.backends.Databases`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from turnframe_store import SqlStores
from turnframe_test.backends import Database, Databases, Service, require_services

__all__ = ["Database", "Databases", "Service", "find_postgres", "require_services"]

LOCAL_POSTGRES = (
    "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
    f"postgresql+psycopg://{os.environ.get('USER', 'root')}@127.0.0.1:5432/test",
)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _docker_engine() -> bool:
    try:
        import docker  # testcontainers' client

        docker.from_env(timeout=2).ping()
    except Exception:
        return False
    return True


def _postgres_logs_in(url: str) -> bool:
    import psycopg

    from turnframe_store.sql.url import parse_url

    try:
        with psycopg.connect(parse_url(url)[1], connect_timeout=3):
            return True
    except psycopg.Error:
        return False


def find_postgres(stack: list[Callable[[], None]]) -> Service:
    """A PostgreSQL server the tests may create schemas in (`stack` gets the cleanups)."""
    given = os.environ.get("TURNFRAME_TEST_DATABASE_URL")
    if given:
        if not _postgres_logs_in(given):
            return Service(None, "TURNFRAME_TEST_DATABASE_URL is set but PostgreSQL refused it")
        return Service(given, "TURNFRAME_TEST_DATABASE_URL")
    if _answers(5432):
        for url in LOCAL_POSTGRES:
            if _postgres_logs_in(url):
                return Service(url, "local PostgreSQL on 127.0.0.1:5432")
        return Service(None, "PostgreSQL answers on 127.0.0.1:5432 but refused every login tried")
    if _docker_engine():
        from testcontainers.postgres import PostgresContainer

        container = PostgresContainer("postgres:16", driver="psycopg")
        container.start()
        stack.append(container.stop)
        return Service(container.get_connection_url(), "testcontainers postgres:16")
    return Service(
        None,
        "no PostgreSQL: TURNFRAME_TEST_DATABASE_URL is unset, nothing answers on "
        "127.0.0.1:5432 and no Docker engine runs testcontainers",
    )


@pytest.fixture(scope="session")
def _service_cleanups() -> Iterator[list[Callable[[], None]]]:
    stack: list[Callable[[], None]] = []
    yield stack
    while stack:
        stack.pop()()


@pytest.fixture(scope="session")
def postgres_service(_service_cleanups: list[Callable[[], None]]) -> Service:
    return find_postgres(_service_cleanups)


@pytest.fixture
def postgres_url(postgres_service: Service) -> str:
    """The PostgreSQL server's URL (fails under TURNFRAME_REQUIRE_SERVICES=1, else skips)."""
    return postgres_service.use()


def _redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_timeout=2).ping())
    except redis.RedisError:
        return False


def find_redis(stack: list[Callable[[], None]]) -> Service:
    """A Redis server the outbox tests' brokers may use (`stack` gets the cleanups)."""
    given = os.environ.get("TURNFRAME_TEST_REDIS_URL")
    if given:
        if not _redis_answers(given):
            return Service(None, "TURNFRAME_TEST_REDIS_URL is set but Redis does not answer")
        return Service(given, "TURNFRAME_TEST_REDIS_URL")
    if _answers(6379) and _redis_answers("redis://127.0.0.1:6379/0"):
        return Service("redis://127.0.0.1:6379/0", "local Redis on 127.0.0.1:6379")
    if _docker_engine():
        from testcontainers.redis import RedisContainer

        container = RedisContainer("redis:7")
        container.start()
        stack.append(container.stop)
        host, port = container.get_container_host_ip(), container.get_exposed_port(6379)
        return Service(f"redis://{host}:{port}/0", "testcontainers redis:7")
    return Service(
        None,
        "no Redis: TURNFRAME_TEST_REDIS_URL is unset, nothing answers on 127.0.0.1:6379 and "
        "no Docker engine runs testcontainers",
    )


@pytest.fixture(scope="session")
def redis_service(_service_cleanups: list[Callable[[], None]]) -> Service:
    return find_redis(_service_cleanups)


@pytest.fixture
def redis_url(redis_service: Service) -> str:
    """The Redis server's URL (fails under TURNFRAME_REQUIRE_SERVICES=1, else skips)."""
    return redis_service.use()


# --- isolated SQL databases ---------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
async def databases(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Databases]:
    """Isolated databases of one backend, all removed after the test."""
    server = request.getfixturevalue("postgres_url") if request.param == "postgres" else None
    made = Databases(request.param, tmp_path, server)
    try:
        yield made
    finally:
        await made.close()


@pytest.fixture
async def postgres_databases(postgres_url: str, tmp_path: Path) -> AsyncIterator[Databases]:
    """Isolated PostgreSQL schemas, all dropped after the test."""
    made = Databases("postgres", tmp_path, postgres_url)
    try:
        yield made
    finally:
        await made.close()


@pytest.fixture
def database(databases: Databases) -> Database:
    """One isolated database (per backend)."""
    return databases.new()


@pytest.fixture
async def sql_stores(databases: Databases) -> SqlStores:
    """Migrated SqlStores on a fresh database (per backend), closed after the test."""
    return await databases.migrated()
