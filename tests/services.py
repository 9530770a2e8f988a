"""Where service-backed tests find PostgreSQL and Redis (DESIGN §13), and the SQL store fixtures.

Each service is looked for in order: the URL in `TURNFRAME_TEST_DATABASE_URL` /
`TURNFRAME_TEST_REDIS_URL`; else a local server on 127.0.0.1 (5432 / 6379) when one answers; else
a testcontainers container when a Docker engine answers; else the tests that need it are skipped
with the reason printed. With `TURNFRAME_REQUIRE_SERVICES=1` (CI) a missing service fails them.

SQL store fixtures (`database` and `sql_stores_factory` run once per backend, `sqlite` and
`postgres`): every database is isolated and removed afterwards: a SQLite file in the test's tmp
directory, or a fresh PostgreSQL schema that is dropped.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from turnframe_store import SqlConfig, SqlStores

__all__ = ["Database", "Service", "find_postgres", "find_redis", "require_services"]

LOCAL_POSTGRES = (
    "postgresql+psycopg://postgres@127.0.0.1:5432/test",
    "postgresql+psycopg://postgres@127.0.0.1:5432/postgres",
    f"postgresql+psycopg://{os.environ.get('USER', 'root')}@127.0.0.1:5432/test",
)
LOCAL_REDIS = "redis://127.0.0.1:6379/0"


def require_services() -> bool:
    return os.environ.get("TURNFRAME_REQUIRE_SERVICES") == "1"


@dataclass(frozen=True)
class Service:
    """A service URL, or why there is none."""

    url: str | None
    source: str

    def use(self) -> str:
        """The URL; without one, fail (CI) or skip, naming the reason."""
        if self.url is not None:
            return self.url
        if require_services():
            pytest.fail(f"TURNFRAME_REQUIRE_SERVICES=1 and {self.source}", pytrace=False)
        pytest.skip(self.source)


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

    from turnframe_store.sql._url import parse_url

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


def find_redis(stack: list[Callable[[], None]]) -> Service:
    """A Redis server for the tests (`stack` gets the cleanups)."""
    given = os.environ.get("TURNFRAME_TEST_REDIS_URL")
    if given:
        return Service(given, "TURNFRAME_TEST_REDIS_URL")
    if _answers(6379):
        return Service(LOCAL_REDIS, "local Redis on 127.0.0.1:6379")
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
def _service_cleanups() -> Iterator[list[Callable[[], None]]]:
    stack: list[Callable[[], None]] = []
    yield stack
    while stack:
        stack.pop()()


@pytest.fixture(scope="session")
def postgres_service(_service_cleanups: list[Callable[[], None]]) -> Service:
    return find_postgres(_service_cleanups)


@pytest.fixture(scope="session")
def redis_service(_service_cleanups: list[Callable[[], None]]) -> Service:
    return find_redis(_service_cleanups)


@pytest.fixture
def postgres_url(postgres_service: Service) -> str:
    """The PostgreSQL server's URL (fails under TURNFRAME_REQUIRE_SERVICES=1, else skips)."""
    return postgres_service.use()


@pytest.fixture
def redis_url(redis_service: Service) -> str:
    """The Redis server's URL (fails under TURNFRAME_REQUIRE_SERVICES=1, else skips)."""
    return redis_service.use()


# --- isolated SQL databases ---------------------------------------------------------------------


@dataclass(frozen=True)
class Database:
    """One isolated database for a test: its URL and the store config that reaches it. Stores
    opened through it are closed after the test."""

    backend: str
    url: str
    config: SqlConfig
    opened: list[SqlStores]

    async def stores(self, **kwargs: Any) -> SqlStores:
        """Connected, not migrated."""
        stores = await SqlStores.connect(self.url, self.config, **kwargs)
        self.opened.append(stores)
        return stores

    async def migrated(self, **kwargs: Any) -> SqlStores:
        stores = await self.stores(**kwargs)
        await stores.migrate()
        return stores


class Databases:
    """Makes isolated databases of one backend and removes them all at the end."""

    def __init__(self, backend: str, tmp_path: Path, server: str | None) -> None:
        self.backend = backend
        self.tmp_path = tmp_path
        self.server = server
        self.schemas: list[str] = []
        self.opened: list[SqlStores] = []

    def new(self, **config: Any) -> Database:
        if self.backend == "sqlite":
            path = self.tmp_path / f"tf-{uuid.uuid4().hex[:8]}.db"
            return Database(
                "sqlite", f"sqlite+aiosqlite:///{path}", SqlConfig(**config), self.opened
            )
        assert self.server is not None
        schema = f"tf_test_{uuid.uuid4().hex[:12]}"
        self.schemas.append(schema)
        return Database("postgres", self.server, SqlConfig(schema=schema, **config), self.opened)

    async def migrated(self, **kwargs: Any) -> SqlStores:
        return await self.new().migrated(**kwargs)

    async def close(self) -> None:
        """Close every store, then drop every schema, even when a close fails."""
        failure: BaseException | None = None
        try:
            for stores in self.opened:
                try:
                    await stores.aclose()
                except Exception as exc:  # the others still close; the first failure is raised
                    failure = failure or exc
        finally:
            await self._drop_schemas()
        if failure is not None:
            raise failure

    async def _drop_schemas(self) -> None:
        if self.schemas:
            import psycopg

            from turnframe_store.sql._url import parse_url

            assert self.server is not None
            async with await psycopg.AsyncConnection.connect(
                parse_url(self.server)[1], autocommit=True
            ) as connection:
                for schema in self.schemas:
                    await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


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
def sql_stores_factory(databases: Databases) -> Callable[[], Awaitable[SqlStores]]:
    """A factory of migrated SqlStores, each on its own fresh database (per backend)."""
    return databases.migrated


@pytest.fixture
async def sql_stores(databases: Databases) -> SqlStores:
    """Migrated SqlStores on a fresh database (per backend), closed after the test."""
    return await databases.migrated()
