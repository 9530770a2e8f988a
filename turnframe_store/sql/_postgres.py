"""The PostgreSQL backend: psycopg 3 from a connection pool (internal; see `_backend.py`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from turnframe_store.bundle import OutboxWakeups
from turnframe_store.errors import Busy, Unavailable
from turnframe_store.sql import errors
from turnframe_store.sql._backend import (
    AtCommit,
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

__all__ = ["PostgresBackend"]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_SNAPSHOT: Final = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
#: the least a lock connection is waited for (a deadline already past still tries once)
_LEAST_WAIT_S: Final = 0.001
_MS: Final = timedelta(milliseconds=1)


class _Listener(OutboxWakeups):
    def __init__(self, conninfo: str, channel: str, payload: str) -> None:
        self._conninfo, self._channel, self._payload = conninfo, channel, payload
        self._connection: psycopg.AsyncConnection[Any] | None = None

    async def _connected(self) -> psycopg.AsyncConnection[Any]:
        if self._connection is None or self._connection.closed:
            connection = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
            await connection.execute(f'LISTEN "{self._channel}"')
            self._connection = connection
        return self._connection

    async def wait(self, timeout_s: float) -> bool:
        started = asyncio.get_running_loop().time()
        try:
            connection = await self._connected()
            async for note in connection.notifies(timeout=timeout_s):
                if note.payload == self._payload:
                    return True
                if asyncio.get_running_loop().time() - started >= timeout_s:
                    break
            return False
        except psycopg.Error:
            await self.close()
            left = timeout_s - (asyncio.get_running_loop().time() - started)
            await asyncio.sleep(max(left, 0))
            return False

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(psycopg.Error):
                await connection.close()


class _PgConnection(Connection):
    """One pooled (or, enlisted, the caller's) psycopg connection.

    psycopg prepares a statement on its fifth use. When a pipeline fails, psycopg may still
    count a statement queued after the failure as prepared although the server skipped it
    (psycopg 3.3.9): its next use fails with InvalidSqlStatementName. So after a failed
    pipeline a connection is `tainted`: it prepares nothing more and uses no prepared statement
    (what runs until the transaction ends), and before it goes back to the pool it forgets
    every prepared statement. A caller's enlisted connection gets no prepared statement of ours.
    """

    def __init__(
        self,
        connection: psycopg.AsyncConnection[Any],
        *,
        transaction: bool,
        prepare: bool = True,
        begin: str = "BEGIN",
    ) -> None:
        self.raw = connection
        self.transaction = transaction
        self.begun = False
        self.tainted = False
        self._prepare: bool | None = None if prepare else False
        self._begin = begin
        self.at_commit = AtCommit() if transaction else None

    def taint(self) -> None:
        self.tainted = True
        self._prepare = False

    async def run(
        self,
        batch: Sequence[tuple[Statement, Params | Many]],
        readbacks: frozenset[int] = frozenset(),
    ) -> Batch:
        # One pipeline: every read-back is sent (it cannot wait for the result before it). A
        # lone statement goes without one: pipeline mode costs more than it saves there.
        if not batch:
            return Batch([])
        connection = self.raw
        if len(batch) == 1 and not (self.transaction and not self.begun):
            statement, params = batch[0]
            cursor = connection.cursor()
            try:
                await self._execute(cursor, statement, params)
            except psycopg.Error as exc:
                if isinstance(params, Many):  # it ran as a pipeline of its own
                    self.taint()
                return Batch([], 0, errors.from_postgres(exc))
            except BaseException:  # cancelled mid-statement: nothing it did is trusted again
                self.taint()
                raise
            return Batch([await _result(cursor, statement)])
        cursors: list[psycopg.AsyncCursor[Any]] = []
        failure: psycopg.Error | None = None
        try:
            async with connection.pipeline() as pipeline:
                try:
                    if self.transaction and not self.begun:
                        self.begun = True
                        await connection.execute(self._begin, prepare=self._prepare)
                    for statement, params in batch:
                        cursor = connection.cursor()
                        cursors.append(cursor)
                        await self._execute(cursor, statement, params)
                    await pipeline.sync()
                except psycopg.Error as exc:
                    failure = exc
        except psycopg.Error as exc:
            failure = failure or exc
        except BaseException:  # cancelled mid-pipeline: as untrusted as a failed one
            self.taint()
            raise
        if failure is not None:
            self.taint()
        if failure is None:
            return Batch([await _result(c, s) for c, (s, _) in zip(cursors, batch, strict=True)])
        # The first statement without a result is the one the server refused (or never got).
        failed_at = next((n for n, c in enumerate(cursors) if c.pgresult is None), 0)
        done = [await _result(c, s) for c, (s, _) in zip(cursors[:failed_at], batch, strict=False)]
        return Batch(done, failed_at, errors.from_postgres(failure))

    async def commit(self) -> None:
        """COMMIT, with the statements kept for it (`at_commit`) in front of it in one pipeline;
        then each receiver gets its statement's result. A failure anywhere in that pipeline may
        have come after COMMIT landed (a lost connection: `Timeout`), unless the server refused
        a statement (then its error: nothing was written)."""
        connection = self.raw
        kept = self.at_commit
        statements: list[tuple[Statement, Params, Any]] = []
        if kept is not None:
            if kept.head is not None and kept.tail:  # (a savepoint may have undone them all)
                statements.append((kept.head, {}, None))
            statements.extend(kept.tail)
            self.at_commit = AtCommit()
        if not statements:
            try:
                await connection.execute("COMMIT", prepare=False)
            except psycopg.Error as exc:
                raise errors.from_postgres(exc, committing=True) from None
            return
        cursors: list[psycopg.AsyncCursor[Any]] = []
        failure: psycopg.Error | None = None
        try:
            async with connection.pipeline() as pipeline:
                try:
                    for statement, params, _ in statements:
                        cursor = connection.cursor()
                        cursors.append(cursor)
                        await self._execute(cursor, statement, params)
                    await connection.execute("COMMIT", prepare=False)
                    await pipeline.sync()
                except psycopg.Error as exc:
                    failure = exc
        except psycopg.Error as exc:
            failure = failure or exc
        except BaseException:
            self.taint()
            raise
        if failure is not None:
            self.taint()  # `_release` rolls back what the server did not commit
            raise errors.from_postgres(failure, committing=True) from None
        for cursor, (statement, _, receive) in zip(cursors, statements, strict=True):
            if receive is not None:
                receive(await _result(cursor, statement))

    async def _execute(
        self, cursor: psycopg.AsyncCursor[Any], statement: Statement, params: Params | Many
    ) -> None:
        if isinstance(params, Many):
            await cursor.executemany(statement.sql, [statement.bind(row) for row in params.rows])
        else:
            await cursor.execute(statement.sql, statement.bind(params), prepare=self._prepare)


async def _forget_prepared(raw: psycopg.AsyncConnection[Any]) -> None:
    """End any transaction with psycopg's own `rollback()`, which also forgets every prepared
    statement on both sides (its cache, and DEALLOCATE ALL on the server); outside a
    transaction, open one to do so."""
    if raw.info.transaction_status is TransactionStatus.IDLE:
        await raw.execute("BEGIN", prepare=False)
    await raw.rollback()


async def _result(cursor: psycopg.AsyncCursor[Any], statement: Statement) -> Result:
    # `cursor.description` builds a Column per field on every access: ask the result instead.
    result = cursor.pgresult
    if result is None or result.nfields == 0:
        return Result([], cursor.rowcount)
    rows = await cursor.fetchall()
    names = statement.columns
    return Result([dict(zip(names, row, strict=True)) for row in rows], len(rows))


class PostgresBackend(Backend):
    dialect_name = "postgresql"

    def __init__(
        self,
        pool: AsyncConnectionPool[psycopg.AsyncConnection[Any]],
        locks: AsyncConnectionPool[psycopg.AsyncConnection[Any]] | None = None,
        conninfo: str = "",
    ) -> None:
        self.pool = pool
        #: connections that hold conversation locks (a turn holds one for its whole length, so
        #: they never compete with the connections its transactions need)
        self.locks = locks
        self.hooks = Hooks()
        self.loop = asyncio.get_running_loop()
        #: where a LISTEN connection of its own goes (`listen`)
        self.conninfo = conninfo

    @contextlib.asynccontextmanager
    async def listen(self, channel: str, payload: str) -> AsyncIterator[OutboxWakeups]:
        """A connection of its own, listening on `channel`; its `wait` returns True on a
        notification whose payload is `payload`. A lost connection is opened again on the next
        wait (the relay polls meanwhile), so a database restart costs one poll interval."""
        self.on_own_loop()
        listener = _Listener(self.conninfo, channel, payload)
        with contextlib.suppress(psycopg.Error):  # listening from here on; else on first wait
            await listener._connected()
        try:
            yield listener
        finally:
            await listener.close()

    @classmethod
    async def open(cls, conninfo: str, config: SqlConfig) -> PostgresBackend:
        # Ours come after any `options` the URL carries (e.g. a search_path), which they keep.
        given = conninfo_to_dict(conninfo).get("options")
        options = f"{given or ''} -c timezone=UTC".strip()
        if config.statement_timeout_ms is not None:
            options += f" -c statement_timeout={config.statement_timeout_ms}"
        if config.read_only:
            options += " -c default_transaction_read_only=on"

        def pool_of(name: str, min_size: int, max_size: int) -> AsyncConnectionPool[Any]:
            return AsyncConnectionPool(
                conninfo,
                kwargs={"autocommit": True, "options": options},
                min_size=min_size,
                max_size=max_size,
                timeout=config.acquire_timeout_s,
                max_idle=config.max_idle_s,
                max_lifetime=config.max_lifetime_s,
                open=False,
                name=name,
            )

        pool = pool_of("turnframe", config.pool_min_size, config.pool_size)
        try:
            await pool.open(wait=config.pool_min_size > 0, timeout=config.acquire_timeout_s)
        except (PoolTimeout, psycopg.Error) as exc:
            await pool.close()
            raise Unavailable(f"could not connect to PostgreSQL ({type(exc).__name__})") from None
        locks = pool_of("turnframe-locks", 0, config.lock_pool_size)
        await locks.open(wait=False)
        return cls(pool, locks, conninfo)

    def time_in(self, ms: int) -> datetime:
        return _EPOCH + ms * _MS

    def time_out(self, value: Any) -> int:
        if not isinstance(value, datetime):
            raise TypeError("a timestamptz column read back as something else")
        return (value - _EPOCH) // _MS

    async def _acquire(self) -> psycopg.AsyncConnection[Any]:
        self.on_own_loop()
        try:
            return await self.pool.getconn()
        except (PoolTimeout, psycopg.Error) as exc:
            raise errors.from_postgres(exc) from None

    async def _release(self, connection: _PgConnection) -> None:
        """Back to the pool, always; a tainted connection cleansed first, or closed when that
        does not finish (an error, a cancellation): the pool replaces a closed connection."""
        raw = connection.raw
        try:
            if connection.tainted:
                try:
                    await _forget_prepared(raw)
                except psycopg.Error:
                    raw.pgconn.finish()
                except BaseException:
                    raw.pgconn.finish()
                    raise
        finally:
            await self.pool.putconn(raw)

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[Connection]:
        connection = _PgConnection(await self._acquire(), transaction=False)
        try:
            yield connection
        finally:
            await self._release(connection)

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[Connection]:
        raw = await self._acquire()
        connection = _PgConnection(raw, transaction=True)
        try:
            try:
                if self.hooks.after_begin is not None:
                    await self.hooks.after_begin(raw.info.backend_pid)
                yield connection
                if self.hooks.before_commit is not None:
                    await self.hooks.before_commit(raw.info.backend_pid)
            except BaseException:
                if connection.begun and not connection.tainted:  # tainted: `_release` rolls back
                    with contextlib.suppress(psycopg.Error):
                        await raw.execute("ROLLBACK", prepare=False)
                raise
            if connection.begun:
                await connection.commit()
        finally:
            await self._release(connection)

    @contextlib.asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Connection]:
        """A REPEATABLE READ, READ ONLY transaction: its snapshot is taken at its first
        statement (sent with BEGIN), and every later read sees the same committed state."""
        connection = _PgConnection(
            await self._acquire(), transaction=True, begin=_SNAPSHOT, prepare=False
        )
        try:
            yield connection
        finally:
            try:
                if connection.begun and not connection.tainted:  # tainted: `_release` rolls back
                    with contextlib.suppress(psycopg.Error):
                        await connection.raw.execute("ROLLBACK", prepare=False)
            finally:
                await self._release(connection)

    @contextlib.asynccontextmanager
    async def enlisted(self, raw: Any) -> AsyncIterator[Connection]:
        self.on_own_loop()
        if not isinstance(raw, psycopg.AsyncConnection):
            raise TypeError("commit_in on PostgreSQL takes a psycopg.AsyncConnection")
        if raw.info.transaction_status is not TransactionStatus.INTRANS:
            raise ValueError("commit_in needs the connection inside an open, healthy transaction")
        async with behind_savepoint(raw.execute, psycopg.Error, errors.from_postgres):
            yield _PgConnection(raw, transaction=False, prepare=False)

    @contextlib.asynccontextmanager
    async def advisory_lock(self, key: int, timeout_s: float) -> AsyncIterator[None]:
        """Hold `pg_advisory_xact_lock(key)` in a transaction of its own until the block ends
        (then rolled back: it wrote nothing, and ending it releases the lock). The server
        queues the waiters of one key in order; the caller queues a process's own waiters first
        (`SqlStores.conversation_lock`), so one connection per process waits for a key. `Busy`
        when the lock is not free by `timeout_s`; `Unavailable` when no lock connection comes
        free by then. Everything, the wait for a connection included, ends by `timeout_s`."""
        self.on_own_loop()
        assert self.locks is not None
        clock = asyncio.get_running_loop().time
        deadline = clock() + timeout_s
        raw = await self._lock_connection(deadline - clock())
        try:
            wait_ms = max(1, int((deadline - clock()) * 1000))
            await raw.execute(
                f"BEGIN; SET LOCAL lock_timeout = {wait_ms};"
                f" SET LOCAL statement_timeout = {wait_ms + 1000};"
                " SET LOCAL idle_in_transaction_session_timeout = 0;"
                f" SELECT pg_advisory_xact_lock({int(key)})",
                prepare=False,
            )
        except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled):
            await self._end_lock(raw)
            raise Busy("another turn of this conversation is running") from None
        except psycopg.Error as exc:
            await self._end_lock(raw)
            raise errors.from_postgres(exc) from None
        except BaseException:
            await self._end_lock(raw)
            raise
        try:
            yield
        finally:
            await self._end_lock(raw)

    async def _lock_connection(self, left_s: float) -> psycopg.AsyncConnection[Any]:
        assert self.locks is not None
        try:
            return await self.locks.getconn(timeout=max(left_s, _LEAST_WAIT_S))
        except (PoolTimeout, psycopg.Error) as exc:
            raise errors.from_postgres(exc) from None

    async def _end_lock(self, raw: psycopg.AsyncConnection[Any]) -> None:
        """Roll the lock's transaction back (releasing the lock) and return the connection."""
        assert self.locks is not None
        try:
            await raw.execute("ROLLBACK", prepare=False)
        except psycopg.Error:
            raw.pgconn.finish()  # the pool replaces it; the server released the lock
        except BaseException:
            raw.pgconn.finish()
            raise
        finally:
            await self.locks.putconn(raw)

    async def aclose(self) -> None:
        self.on_own_loop()
        if self.locks is not None:
            await self.locks.close()
        await self.pool.close()
