"""A PostgreSQL database of its own, whose transactions the server counts (for the commit budget
test and the benchmarks): `pg_stat_database` counts per database, so nothing else may share it;
the kit's tables created without a race; and `blocked_behind`, a wait for sessions queued behind
another's lock."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from types import TracebackType
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from turnframe_store.sql.url import parse_url
from turnframe_test.waits import until

__all__ = ["PrivateDatabase", "blocked_behind", "create_tables"]

#: the advisory lock key the test kit's own tables are created under (any constant will do)
_DDL_LOCK = 0x7475726E_6B697421


async def blocked_behind(url: str, pid: int, *, count: int = 1, timeout_s: float = 30.0) -> None:
    """Return once `count` sessions of the server at `url` wait on a lock the session `pid`
    holds (`pg_blocking_pids`): how a test knows a second writer is queued behind the first,
    rather than sleeping and hoping. `AssertionError` after `timeout_s`."""
    async with await psycopg.AsyncConnection.connect(parse_url(url)[1], autocommit=True) as c:

        async def queued() -> bool:
            cursor = await c.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                (pid,),
            )
            row = await cursor.fetchone()
            return row is not None and row[0] >= count

        await until(queued, f"{count} sessions behind {pid}", timeout_s=timeout_s)


async def create_tables(
    connection: psycopg.AsyncConnection[Any], statements: Sequence[str]
) -> None:
    """Run `CREATE TABLE IF NOT EXISTS …` statements as one transaction under an advisory lock:
    PostgreSQL's IF NOT EXISTS is not safe against another process creating the same table at
    the same moment (it fails on pg_type's unique index), and processes of a run start together."""
    async with connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK,))
        for statement in statements:
            await connection.execute(statement)


class PrivateDatabase:
    """`async with PrivateDatabase(server_url) as db:` creates a database, drops it at the end.

    `server_url` names any database on the server (it is where the counts are read from);
    `db.url` is the new one's URL.
    """

    def __init__(self, server_url: str) -> None:
        self.name = f"tf_private_{uuid.uuid4().hex[:12]}"
        self._server = parse_url(server_url)[1]
        self.url = make_url(server_url).set(database=self.name).render_as_string(False)

    async def __aenter__(self) -> PrivateDatabase:
        async with await psycopg.AsyncConnection.connect(self._server, autocommit=True) as c:
            await c.execute(f'CREATE DATABASE "{self.name}"')
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        async with await psycopg.AsyncConnection.connect(self._server, autocommit=True) as c:
            await c.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    async def commits(self, *, timeout_s: float = 15.0) -> int:
        """The server's count of committed transactions in this database (`xact_commit`) less
        the one each new session commits while it starts, read once no session is connected:
        a backend reports its counts before it leaves `pg_stat_activity`, so close every
        connection to the database first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        async with await psycopg.AsyncConnection.connect(self._server, autocommit=True) as c:
            while True:
                cursor = await c.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (self.name,)
                )
                row = await cursor.fetchone()
                if row is None or row[0] == 0:
                    break
                if loop.time() > deadline:
                    raise TimeoutError(f"sessions are still connected to {self.name}")
                await asyncio.sleep(0.02)
            await c.execute("SELECT pg_stat_clear_snapshot()")
            cursor = await c.execute(
                "SELECT xact_commit - sessions FROM pg_stat_database WHERE datname = %s",
                (self.name,),
            )
            row = await cursor.fetchone()
            return int(row[0]) if row is not None else 0
