"""Store backends for tests: fresh, migrated stores on memory, SQLite or PostgreSQL, each isolated
and removed afterwards (a SQLite file in a scratch directory, a PostgreSQL schema that is dropped).

`StoreBackend` is what a test asks for (the `store_backend` fixture of
`turnframe_test.pytest_plugin` gives one per backend); `Databases` is the SQL half of it, for
tests that need the database itself (its URL, its config) rather than only stores on it.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from turnframe_store import Clock, FaultPlan, MemoryStores, SqlConfig, SqlStores

__all__ = [
    "BACKENDS",
    "Database",
    "Databases",
    "Service",
    "StoreBackend",
    "require_services",
]

#: Every backend a runtime scenario runs on.
BACKENDS: Final = ("memory", "sqlite", "postgres")


def require_services() -> bool:
    """`TURNFRAME_REQUIRE_SERVICES=1` (CI): a missing service fails the test, never skips it."""
    return os.environ.get("TURNFRAME_REQUIRE_SERVICES") == "1"


@dataclass(frozen=True)
class Service:
    """A service URL, or why there is none."""

    url: str | None
    source: str

    def use(self) -> str:
        """The URL; without one, fail (`TURNFRAME_REQUIRE_SERVICES=1`) or skip, naming why."""
        import pytest

        if self.url is not None:
            return self.url
        if require_services():
            pytest.fail(f"TURNFRAME_REQUIRE_SERVICES=1 and {self.source}", pytrace=False)
        pytest.skip(self.source)


@dataclass(frozen=True)
class Database:
    """One isolated database for a test: its URL and the store config that reaches it. Stores
    opened through it are closed with the `Databases` that made it."""

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
    """Makes isolated databases of one SQL backend (`sqlite` files in `tmp_path`, or `postgres`
    schemas on the server at `server`) and removes them all on `close()`."""

    def __init__(self, backend: str, tmp_path: Path, server: str | None) -> None:
        if backend not in ("sqlite", "postgres"):
            raise ValueError(f"no SQL backend named {backend!r}")
        if backend == "postgres" and server is None:
            raise ValueError("PostgreSQL databases need the server's URL")
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

            from turnframe_store.sql.url import parse_url

            assert self.server is not None
            async with await psycopg.AsyncConnection.connect(
                parse_url(self.server)[1], autocommit=True
            ) as connection:
                for schema in self.schemas:
                    await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


class StoreBackend:
    """Fresh, migrated stores of one backend (`memory`, `sqlite` or `postgres`), each on a
    database of its own; `aclose()` (or leaving `async with`) closes them and removes the
    databases.

    `tmp_path` holds the SQLite files; `postgres_url` names the server the PostgreSQL schemas are
    made on (required for `postgres`)."""

    def __init__(self, name: str, tmp_path: Path, postgres_url: str | None = None) -> None:
        if name not in BACKENDS:
            raise ValueError(f"no store backend named {name!r}; one of {BACKENDS}")
        self.name = name
        self._tmp_path = tmp_path
        self._postgres_url = postgres_url
        self._databases = None if name == "memory" else Databases(name, tmp_path, postgres_url)

    def __repr__(self) -> str:
        return f"StoreBackend({self.name!r})"

    async def stores(
        self, *, clock: Clock | None = None, faults: FaultPlan | None = None
    ) -> MemoryStores | SqlStores:
        """Migrated stores on a fresh database, stamping times with `clock`."""
        if self._databases is None:
            return MemoryStores(clock=clock, faults=faults)
        return await self._databases.migrated(clock=clock, faults=faults)

    def scoped(self) -> StoreBackend:
        """The same backend with a lifetime of its own (`async with`): for a test that needs
        fresh stores many times over, such as one per hypothesis example."""
        return StoreBackend(self.name, self._tmp_path, self._postgres_url)

    async def aclose(self) -> None:
        if self._databases is not None:
            await self._databases.close()

    async def __aenter__(self) -> StoreBackend:
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
