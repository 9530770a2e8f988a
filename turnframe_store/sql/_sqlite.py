"""The SQLite backend: aiosqlite, WAL mode, one writer at a time (internal; see `_backend.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import aiosqlite
import sqlalchemy as sa
from sqlalchemy.dialects import sqlite as sqlite_dialect

from turnframe_store.errors import InvalidDatabaseUrl
from turnframe_store.sql import errors
from turnframe_store.sql._backend import (
    Backend,
    Batch,
    Connection,
    Hooks,
    Many,
    Params,
    Result,
    Statement,
    behind_savepoint,
)
from turnframe_store.sql.config import SqlConfig
from turnframe_store.sql.tables import metadata

__all__ = ["SqliteBackend"]


class _SqliteConnection(Connection):
    def __init__(
        self, connection: aiosqlite.Connection, *, transaction: bool, begin: str = "BEGIN IMMEDIATE"
    ) -> None:
        self.raw = connection
        self.transaction = transaction
        self.begun = False
        self._begin = begin

    async def run(
        self,
        batch: Sequence[tuple[Statement, Params | Many]],
        readbacks: frozenset[int] = frozenset(),
    ) -> Batch:
        done: list[Result] = []
        for index, (statement, params) in enumerate(batch):
            if index in readbacks and done and done[-1].rows:
                done.append(Result([], 0))  # its statement moved the row: nothing to judge
                continue
            try:
                if self.transaction and not self.begun:
                    await self.raw.execute(self._begin)
                    self.begun = True
                done.append(await self._one(statement, params))
            except aiosqlite.Error as exc:
                return Batch(done, index, errors.from_sqlite(exc))
        return Batch(done)

    async def _one(self, statement: Statement, params: Params | Many) -> Result:
        if isinstance(params, Many):
            cursor = await self.raw.executemany(
                statement.sql, [statement.bind(row) for row in params.rows]
            )
        else:
            cursor = await self.raw.execute(statement.sql, statement.bind(params))
        try:
            if cursor.description is None:
                return Result([], cursor.rowcount)
            names = statement.columns
            rows = [dict(zip(names, row, strict=True)) for row in await cursor.fetchall()]
            return Result(rows, len(rows))
        finally:
            await cursor.close()


class SqliteBackend(Backend):
    dialect_name = "sqlite"

    def __init__(
        self,
        writer: aiosqlite.Connection,
        reader: aiosqlite.Connection | None,
        *,
        path: str = "",
        config: SqlConfig | None = None,
    ) -> None:
        self.writer = writer
        self.reader = reader
        #: where a snapshot opens a connection of its own (none for an in-memory database)
        self._path = path
        self._config = config or SqlConfig()
        self.hooks = Hooks()
        self.loop = asyncio.get_running_loop()
        self._write_lock = asyncio.Lock()
        # An in-memory database has one connection: reads then queue behind the writer, so they
        # never see a transaction that is still open.
        self._read_lock = asyncio.Lock() if reader is not None else self._write_lock

    @classmethod
    async def open(cls, path: str, config: SqlConfig) -> SqliteBackend:
        in_memory = path in ("", ":memory:")
        if not in_memory:
            _require_file_path(path)
        if config.read_only:
            if in_memory or not Path(path).is_file():
                raise InvalidDatabaseUrl(f"no SQLite database to read at {path or ':memory:'}")
            try:
                reader = await _connect(path, config, wal=False, read_only=True)
            except aiosqlite.Error as exc:
                raise errors.from_sqlite(exc) from None
            return cls(reader, reader, path=path, config=config)
        try:
            writer = await _connect(path or ":memory:", config, wal=not in_memory)
        except aiosqlite.Error as exc:
            raise errors.from_sqlite(exc) from None
        if in_memory:
            return cls(writer, None)
        try:
            reader = await _connect(path, config, wal=False)
            await reader.execute("PRAGMA query_only = ON")
        except BaseException as exc:
            await writer.close()
            if isinstance(exc, aiosqlite.Error):
                raise errors.from_sqlite(exc) from None
            raise
        return cls(writer, reader, path=path, config=config)

    def time_in(self, ms: int) -> int:
        return ms

    def time_out(self, value: Any) -> int:
        if not isinstance(value, int):
            raise TypeError("a millisecond column read back as something else")
        return value

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[Connection]:
        self.on_own_loop()
        async with self._read_lock:
            yield _SqliteConnection(self.reader or self.writer, transaction=False)

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[Connection]:
        self.on_own_loop()
        async with self._write_lock:
            connection = _SqliteConnection(self.writer, transaction=True)
            try:
                if self.hooks.after_begin is not None:
                    await self.hooks.after_begin(0)
                yield connection
                if self.hooks.before_commit is not None:
                    await self.hooks.before_commit(0)
            except BaseException:
                if connection.begun:
                    with contextlib.suppress(aiosqlite.Error):
                        await self.writer.execute("ROLLBACK")
                raise
            if connection.begun:
                try:
                    await self.writer.execute("COMMIT")
                except aiosqlite.Error as exc:
                    with contextlib.suppress(aiosqlite.Error):
                        await self.writer.execute("ROLLBACK")
                    raise errors.from_sqlite(exc, committing=True) from None

    @contextlib.asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Connection]:
        """A deferred read transaction on a read-only connection of its own: in WAL mode its
        snapshot is taken at its first read and held until it ends, while writers go on. An
        in-memory database (one connection) is copied whole between two writes instead."""
        self.on_own_loop()
        try:
            if self.reader is None:
                raw = await _connect(":memory:", self._config, wal=False)
                async with self._write_lock:
                    await self.writer.backup(raw)
                await raw.execute("PRAGMA query_only = ON")
            else:
                raw = await _connect(self._path, self._config, wal=False, read_only=True)
        except aiosqlite.Error as exc:
            raise errors.from_sqlite(exc) from None
        try:
            yield _SqliteConnection(raw, transaction=True, begin="BEGIN")
        finally:
            with contextlib.suppress(aiosqlite.Error, ValueError):
                await raw.close()

    @contextlib.asynccontextmanager
    async def enlisted(self, raw: Any) -> AsyncIterator[Connection]:
        self.on_own_loop()
        if not isinstance(raw, aiosqlite.Connection):
            raise TypeError("commit_in on SQLite takes an aiosqlite.Connection")
        if not raw.in_transaction:
            raise ValueError("commit_in needs the connection inside an open transaction")
        async with behind_savepoint(raw.execute, aiosqlite.Error, errors.from_sqlite):
            yield _SqliteConnection(raw, transaction=False)

    async def create_tables(self) -> bool:
        self.on_own_loop()
        if self.reader is not None:
            return False
        # In memory: nothing outlives this connection, so there is no history to migrate. The
        # tables are created if missing, all in one transaction under the write lock, so calling
        # `migrate()` again (or while another task writes) is safe.
        dialect = sqlite_dialect.dialect()
        ddl: list[sa.schema.ExecutableDDLElement] = []
        for table in metadata.sorted_tables:
            ddl.append(sa.schema.CreateTable(table, if_not_exists=True))
            ddl.extend(sa.schema.CreateIndex(index, if_not_exists=True) for index in table.indexes)
        async with self._write_lock:
            try:
                await self.writer.execute("BEGIN IMMEDIATE")
                try:
                    for statement in ddl:
                        await self.writer.execute(str(statement.compile(dialect=dialect)))
                except BaseException:
                    with contextlib.suppress(aiosqlite.Error):
                        await self.writer.execute("ROLLBACK")
                    raise
                await self.writer.execute("COMMIT")
            except aiosqlite.Error as exc:
                raise errors.from_sqlite(exc) from None
        return True

    async def aclose(self) -> None:
        self.on_own_loop()
        for connection in (self.reader, self.writer):
            if connection is not None:
                with contextlib.suppress(aiosqlite.Error, ValueError):
                    await connection.close()


def _require_file_path(path: str) -> None:
    """A SQLite file path names a file that is, or may be created, in an existing directory."""
    target = Path(path)
    if target.is_dir():
        raise InvalidDatabaseUrl(f"the SQLite database path {path} is a directory")
    if not target.parent.is_dir():
        raise InvalidDatabaseUrl(f"the SQLite database's directory {target.parent} does not exist")


async def _connect(
    path: str, config: SqlConfig, *, wal: bool, read_only: bool = False
) -> aiosqlite.Connection:
    if read_only:  # the file as it is: no journal mode set, no write possible
        target = f"{Path(path).resolve().as_uri()}?mode=ro"
        connection = aiosqlite.connect(target, isolation_level=None, uri=True)
    else:
        connection = aiosqlite.connect(path, isolation_level=None)
    # aiosqlite runs each connection on a thread of its own, non-daemon by default: a process
    # whose code failed before `aclose()` would wait for it forever at exit. A daemon worker
    # ends with the process; what was committed is durable (synchronous = FULL), and an
    # unfinished transaction is rolled back the next time the file is opened, as after a crash.
    worker = getattr(connection, "_thread", connection)  # aiosqlite < 0.22: it is the thread
    if not isinstance(worker, threading.Thread):
        raise RuntimeError("this aiosqlite version hides its worker thread; pin aiosqlite")
    worker.daemon = True
    await connection
    try:
        await connection.execute(f"PRAGMA busy_timeout = {int(config.sqlite_busy_timeout_ms)}")
        if read_only:
            await connection.execute("PRAGMA query_only = ON")
            return connection
        if wal:
            await connection.execute("PRAGMA journal_mode = WAL")
        await connection.execute("PRAGMA synchronous = FULL")
        await connection.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        await connection.close()
        raise
    return connection
