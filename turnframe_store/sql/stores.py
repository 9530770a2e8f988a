"""`SqlStores`: every store role on PostgreSQL (psycopg 3) or SQLite (aiosqlite).

`MemoryStores` is the executable specification, and both apply the same rules: argument rules
and fault points come with the shared roles (`roles`), every decision from
`roles`. What is SQL's own:

- `_core`: a write is a list of steps in one transaction; compare-and-swap lives in the writing
  statement, and a read-back of the row lets the rule judge a statement that moved nothing.
- `_statements`: one compiler per dialect and schema; each role's statements are a frozen
  dataclass in the role's module (`_conversations`, `_interactions`, `_journal`, `_events`,
  `_outbox`, `_replay`, `_timers`), built once per dialect and schema.
- `_commits`: the commit bundle is one transaction (one pipeline on PostgreSQL) in its
  normative order, the phase marker folded in.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy.engine import make_url

from turnframe_store.bundle import InTransaction, OutboxWakeups, Stores
from turnframe_store.clock import Clock, system_clock
from turnframe_store.errors import Conflict, MissingExtra
from turnframe_store.faults import FaultPlan
from turnframe_store.locks import ConversationLocks
from turnframe_store.records import CommitBundle, CommitResult
from turnframe_store.sql import _migrate
from turnframe_store.sql._backend import Backend, Hooks
from turnframe_store.sql._commits import SqlCommits
from turnframe_store.sql._conversations import SqlConversations
from turnframe_store.sql._core import SqlCore, Transaction, TxCore
from turnframe_store.sql._events import SqlEvents
from turnframe_store.sql._interactions import SqlInteractions
from turnframe_store.sql._journal import SqlJournal
from turnframe_store.sql._outbox import SqlOutbox
from turnframe_store.sql._replay import SqlReplay
from turnframe_store.sql._statements import compiler_for
from turnframe_store.sql._timers import SqlTimers
from turnframe_store.sql.config import SqlConfig
from turnframe_store.sql.url import parse_url

__all__ = ["SqlStores"]


def _roles(core: SqlCore) -> dict[str, Any]:
    conversations = SqlConversations(core)
    interactions = SqlInteractions(core)
    journal = SqlJournal(core)
    events = SqlEvents(core)
    outbox = SqlOutbox(core)
    replay = SqlReplay(core)
    commits = SqlCommits(
        core,
        conversations=conversations,
        interactions=interactions,
        journal=journal,
        events=events,
        outbox=outbox,
        replay=replay,
    )
    return {
        "conversations": conversations,
        "interactions": interactions,
        "journal": journal,
        "events": events,
        "outbox": outbox,
        "replay": replay,
        "timers": SqlTimers(core),
        "commits": commits,
    }


class _InTransaction(InTransaction):
    """The roles of one open transaction; a savepoint is the database's."""

    _core: TxCore

    @contextlib.asynccontextmanager
    async def savepoint(self) -> AsyncIterator[None]:
        async with self._core.savepoint():
            yield

    async def driver_connection(self) -> Any:
        """This transaction's own driver connection (`psycopg.AsyncConnection` on PostgreSQL,
        `aiosqlite.Connection` on SQLite), for writes that commit with it (decision 0029): do
        not begin, commit or roll back on it."""
        return await self._core.driver_connection()


class SqlStores(Stores):
    """Every store role on one SQL database.

        stores = await SqlStores.connect("sqlite+aiosqlite:///turnframe.db")
        await stores.migrate()          # safe on every start
        ...
        await stores.aclose()

    URLs: `postgresql+psycopg://user:password@host:5432/db` (also `postgresql://`) and
    `sqlite+aiosqlite:///path/to/file.db` (also `sqlite:///…`; no path: in memory).
    """

    def __init__(
        self,
        backend: Backend,
        *,
        url: str,
        config: SqlConfig,
        clock: Clock | None = None,
        faults: FaultPlan | None = None,
    ) -> None:
        self._url = url
        self.config = config
        self.engine = SqlCore(
            backend,
            compiler_for(backend.dialect_name, config.schema),
            clock if clock is not None else system_clock,
            faults if faults is not None else FaultPlan(),
        )
        roles = _roles(self.engine)
        self._commits: SqlCommits = roles["commits"]
        self._locks = ConversationLocks()
        super().__init__(**roles)

    @property
    def transactional(self) -> bool:
        return True

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Stores]:
        """One database transaction (see `Stores.transaction`); on PostgreSQL its first
        statements travel with BEGIN in one pipeline, and COMMIT goes when the block ends."""
        tx = Transaction()
        async with self.engine.backend.writing() as connection:
            try:
                core = TxCore(self.engine, connection, tx)
                view = _InTransaction.assemble(**_roles(core))
                view._core = core
                yield view
            finally:
                tx.closed = True
            if tx.failure is not None:
                raise Conflict("the transaction was rolled back: a call in it failed") from (
                    tx.failure
                )
        if tx.after_commit is not None:  # it committed; the caller never heard
            raise tx.after_commit

    @contextlib.asynccontextmanager
    async def snapshot(self) -> AsyncIterator[Stores]:
        """Reads as of one moment (see `Stores.snapshot`): on PostgreSQL a REPEATABLE READ, READ
        ONLY transaction; on SQLite a read transaction on a connection of its own."""
        tx = Transaction()
        async with self.engine.backend.snapshot() as connection:
            core = TxCore(self.engine, connection, tx)
            view = _InTransaction.assemble(**_roles(core))
            view._core = core
            try:
                yield view
            finally:
                tx.closed = True

    def conversation_lock(
        self, account_id: str, conversation_id: str, timeout_s: float = 10.0
    ) -> contextlib.AbstractAsyncContextManager[None]:
        """On PostgreSQL an advisory lock, held by a transaction of its own on a connection of
        its own (every process on the database serializes; one that dies releases it); on
        SQLite a lock within the process."""
        advisory = getattr(self.engine.backend, "advisory_lock", None)
        if advisory is not None:  # PostgreSQL
            key = _lock_key(self.config.schema, account_id, conversation_id)
            return self._queued_advisory(advisory, key, account_id, conversation_id, timeout_s)
        return self._locks.hold(account_id, conversation_id, timeout_s)

    @contextlib.asynccontextmanager
    async def _queued_advisory(
        self, advisory: Any, key: int, account_id: str, conversation_id: str, timeout_s: float
    ) -> AsyncIterator[None]:
        """This process's turns of one conversation queue within it first (holding no
        connection), so one busy conversation takes one lock connection per process however
        many of its turns wait, and every other conversation keeps its own; the first in line
        then waits on the server for the advisory lock, which the server grants in order. The
        whole wait ends by `timeout_s`."""
        clock = asyncio.get_running_loop().time
        deadline = clock() + timeout_s
        async with (
            self._locks.hold(account_id, conversation_id, timeout_s),
            advisory(key, max(deadline - clock(), 0.0)),
        ):
            yield

    def outbox_wakeups(self) -> contextlib.AbstractAsyncContextManager[OutboxWakeups]:
        """On PostgreSQL a LISTEN on `turnframe_outbox` (the tf_outbox insert trigger notifies
        it when the inserting transaction commits); on SQLite a plain wait (relays poll)."""
        listen = getattr(self.engine.backend, "listen", None)
        if listen is None:
            return super().outbox_wakeups()
        wakeups: contextlib.AbstractAsyncContextManager[OutboxWakeups] = listen(
            "turnframe_outbox", self.config.schema or "public"
        )
        return wakeups

    @classmethod
    async def connect(
        cls,
        url: str,
        config: SqlConfig | None = None,
        *,
        clock: Clock | None = None,
        faults: FaultPlan | None = None,
    ) -> SqlStores:
        """Open the pool (PostgreSQL) or the connections (SQLite); `Unavailable` when the
        database cannot be reached. Run `migrate()` before the first use of a new database.

        The stores belong to the running event loop: a call from another loop raises
        `ForeignEventLoop`. A URL or SQLite path that names no database file raises
        `InvalidDatabaseUrl`; PostgreSQL without the `postgres` extra raises `MissingExtra`.
        """
        config = config or SqlConfig()
        dialect, target = parse_url(url)
        backend: Backend
        if dialect == "postgresql":
            try:
                from turnframe_store.sql._postgres import PostgresBackend
            except ImportError as missing:
                if "psycopg" not in f"{missing.name} {missing}":
                    raise
                raise MissingExtra("PostgreSQL", "postgres") from missing
            backend = await PostgresBackend.open(target, config)
        else:
            from turnframe_store.sql._sqlite import SqliteBackend

            if config.schema is not None:
                raise ValueError("SQLite has no schemas; leave SqlConfig.schema unset")
            backend = await SqliteBackend.open(target, config)
        return cls(backend, url=url, config=config, clock=clock, faults=faults)

    async def commit_in(self, connection: Any, bundle: CommitBundle) -> CommitResult:
        """Commit `bundle` inside the caller's own open transaction (DESIGN §6), so an adopter
        whose state lives in this database commits its executor's writes and the turn's bundle
        together, or neither.

        `connection` is the caller's driver connection to this same database, inside a
        transaction the caller began and will commit: a `psycopg.AsyncConnection` (PostgreSQL)
        or an `aiosqlite.Connection` (SQLite). The bundle runs behind a savepoint: when an item
        fails, its error is raised, nothing of the bundle remains, and the caller's own writes
        and transaction are untouched. Nothing is durable until the caller commits.
        """
        return await self._commits.commit_in(connection, bundle)

    async def migrate(self) -> None:
        """Bring the tf_* tables to the newest revision (alembic). Safe on every start: two
        processes starting together do not race (an advisory lock on PostgreSQL, the write lock
        on SQLite)."""
        self.engine.backend.on_own_loop()
        if not await self.engine.backend.create_tables():
            await asyncio.to_thread(_migrate.upgrade, self._url, self.config.schema)

    @property
    def dialect(self) -> str:
        """`postgresql` or `sqlite`."""
        return self.engine.backend.dialect_name

    @property
    def url(self) -> str:
        """The database URL, its password hidden."""
        return make_url(self._url).render_as_string(hide_password=True)

    @property
    def clock(self) -> Clock:
        return self.engine.clock

    @property
    def faults(self) -> FaultPlan:
        """Arm a fault: `stores.faults.arm(FaultPoint.BEFORE_JOURNAL_INSERT)`."""
        return self.engine.faults

    @property
    def hooks(self) -> Hooks:
        """Internal test seams inside every write transaction (see `_backend.Hooks`)."""
        return self.engine.backend.hooks

    async def aclose(self) -> None:
        await self.engine.backend.aclose()


def _lock_key(schema: str | None, account_id: str, conversation_id: str) -> int:
    """The advisory lock's 64-bit key for one conversation of one schema."""
    raw = hashlib.sha256(f"{schema or ''}\0{account_id}\0{conversation_id}".encode()).digest()
    return int.from_bytes(raw[:8], "big", signed=True)
