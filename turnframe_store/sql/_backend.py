"""What the SQL store needs from a database backend (internal).

Two backends implement it, each on its native async driver and each in its own module, so
psycopg is imported only when PostgreSQL is used:

- `_postgres.PostgresBackend`: psycopg 3 connections from a pool, in autocommit mode with
  explicit transactions. A write sends BEGIN and its statements in one pipeline (one round trip),
  then the statements kept for commit (`AtCommit`) and COMMIT in one last pipeline, so a
  connection lost in that pipeline (`Timeout`: it may have landed) is told apart from one lost
  before it (`Unavailable`).
- `_sqlite.SqliteBackend`: aiosqlite in WAL mode; one writer connection used by one task at a time
  (`BEGIN IMMEDIATE` also keeps other processes out), and a read connection beside it.

A backend belongs to the event loop that opened it (the pool, the connections' futures and the
locks do): every entry point first checks the running loop and raises `ForeignEventLoop` on
another, at once, rather than waiting on a pool or a lock that loop can never release.

A batch never raises for a statement's own failure: `Batch.failed_at` names the first statement
that failed and `Batch.error` its store error, so the caller can judge the statements before it
first (the commit bundle reports the first failing item in its normative order).
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from turnframe_store.errors import ForeignEventLoop, StoreError

__all__ = [
    "AtCommit",
    "Backend",
    "Batch",
    "Connection",
    "Hooks",
    "Many",
    "Params",
    "Result",
    "Row",
    "Statement",
    "behind_savepoint",
]

Row = dict[str, Any]
Params = Mapping[str, Any]


@dataclass(frozen=True)
class Statement:
    """One compiled statement: its SQL, the values of binds the compiler added, its result names."""

    name: str
    sql: str
    columns: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)

    def bind(self, params: Params) -> Params:
        return {**self.defaults, **params} if self.defaults else params


@dataclass(frozen=True)
class Many:
    """The parameters of a statement run once per row, as one driver call (executemany); it
    returns no rows."""

    rows: Sequence[Params]


@dataclass(frozen=True)
class Result:
    rows: list[Row]
    rowcount: int


@dataclass(frozen=True)
class Batch:
    """The results of the statements that ran, and the first failure (if one failed)."""

    results: list[Result]
    failed_at: int | None = None
    error: StoreError | None = None


@dataclass
class Hooks:
    """Internal test seams, awaited inside every write transaction with the connection's backend
    process id (PostgreSQL; 0 on SQLite): `after_begin` before its first statement,
    `before_commit` right before COMMIT. Raising from either rolls the transaction back."""

    after_begin: Callable[[int], Awaitable[None]] | None = None
    before_commit: Callable[[int], Awaitable[None]] | None = None


@dataclass
class AtCommit:
    """What a write transaction sends with its COMMIT, in its last pipeline (PostgreSQL): `head`
    once, first (the event-order lock), then `tail` in order, each result handed to its
    receiver once the transaction committed. A lock taken there is held only while the server
    runs that pipeline, never across a round trip to the client."""

    head: Statement | None = None
    tail: list[tuple[Statement, Params, Callable[[Result], None]]] = field(default_factory=list)


class Connection(ABC):
    """One connection, inside a read or a write transaction."""

    #: the statements sent with COMMIT (a PostgreSQL write transaction; else None)
    at_commit: AtCommit | None = None

    @abstractmethod
    async def run(
        self,
        batch: Sequence[tuple[Statement, Params | Many]],
        readbacks: frozenset[int] = frozenset(),
    ) -> Batch:
        """Run the statements in order (one given `Many` runs once per row). A statement whose
        index is in `readbacks` reads back the row of the statement before it; a backend may
        skip it (an empty result) when that statement returned rows, since its judge then never
        looks at the read-back."""

    async def fetch(self, statement: Statement, params: Params) -> list[Row]:
        """Run one statement and return its rows; its failure is raised."""
        outcome = await self.run(((statement, params),))
        if outcome.error is not None:
            raise outcome.error
        return outcome.results[0].rows


class Backend(ABC):
    """A database the stores run on: its dialect, its time representation and its transactions.
    Built inside a running event loop, it belongs to that loop (`on_own_loop`)."""

    dialect_name: str
    hooks: Hooks
    loop: asyncio.AbstractEventLoop

    def on_own_loop(self) -> None:
        """Raise `ForeignEventLoop` unless the running loop is the one this backend was opened
        on; every entry point calls it first."""
        if asyncio.get_running_loop() is not self.loop:
            raise ForeignEventLoop()

    @abstractmethod
    def time_in(self, ms: int) -> Any:
        """A millisecond timestamp as the database stores it."""

    @abstractmethod
    def time_out(self, value: Any) -> int:
        """A stored timestamp as integer milliseconds."""

    @abstractmethod
    def reading(self) -> contextlib.AbstractAsyncContextManager[Connection]: ...

    @abstractmethod
    def writing(self) -> contextlib.AbstractAsyncContextManager[Connection]:
        """One transaction: committed when the block ends, rolled back when it raises."""

    @abstractmethod
    def snapshot(self) -> contextlib.AbstractAsyncContextManager[Connection]:
        """A read-only transaction whose every read sees the database as of one moment, on a
        connection of its own (other reads and writes go on beside it); rolled back at the end."""

    @abstractmethod
    def enlisted(self, raw: Any) -> contextlib.AbstractAsyncContextManager[Connection]:
        """A caller's driver connection, inside the caller's open transaction, behind a
        savepoint: released when the block ends, rolled back to when it raises."""

    async def create_tables(self) -> bool:
        """Create the tables itself when migrations cannot reach the database (an in-memory
        SQLite database); False when the migrations must run."""
        return False

    @abstractmethod
    async def aclose(self) -> None: ...


_SAVEPOINT = "tf_commit_bundle"


@contextlib.asynccontextmanager
async def behind_savepoint(
    execute: Callable[[str], Awaitable[Any]],
    driver_error: type[Exception],
    to_store_error: Callable[[Any], StoreError],
) -> AsyncIterator[None]:
    """Run the block behind a savepoint of a caller's open transaction: released when the block
    ends, rolled back to (and released) when it raises; driver errors become store errors."""
    try:
        await execute(f"SAVEPOINT {_SAVEPOINT}")
    except driver_error as exc:
        raise to_store_error(exc) from None
    try:
        yield
    except BaseException:
        with contextlib.suppress(driver_error):
            await execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")
            await execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
        raise
    try:
        await execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
    except driver_error as exc:
        raise to_store_error(exc) from None
