"""Where a turn's time goes: µs per turn per bucket, and what a turn sends to PostgreSQL.

For a click-only turn and a text turn (the shapes of `turn_memory.py` and `turn_pg.py`), on
MemoryStores and on PostgreSQL, with the library's default `RuntimeConfig`:
- wall µs per turn (mean of N turns, no profiler);
- the same turns again under cProfile, each function's own time put in a bucket by the module
  it lives in (psycopg, pydantic, canonical JSON and hashing, asyncio, waiting on the socket,
  SQLAlchemy, copy rendering, telemetry, the runtime, the store, the core, the rest); a bucket's
  µs per turn is its share of the profiled time times the unprofiled wall time, so the buckets
  add up to the wall time (the profiler's own overhead spreads over them in proportion);
- on PostgreSQL, per turn: statements and round trips (counted from libpq's protocol trace of
  every connection the stores open: an Execute or a statement of a simple Query is a statement,
  a Sync or a simple Query is a round trip), transaction ids (the server's xid counter,
  `pg_snapshot_xmax(pg_current_snapshot())`, before and after; it is cluster-wide, so run it on
  a quiet server) and transactions (`pg_stat_database`, commits and rollbacks). The raw psycopg
  floor of `turn_pg.py` (the same rows in one transaction) is counted the same way beside it.

Run: `.venv/bin/python benchmarks/turn_buckets.py [--turns N] [--stores memory,postgresql]
[--url URL]`. PostgreSQL work goes to a private database, dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psycopg
import turn_pg
from psycopg import pq

from turnframe_core import TurnInput, UlidIdSource
from turnframe_runtime import RuntimeConfig
from turnframe_store import SqlConfig, SqlStores
from turnframe_store.sql.url import parse_url
from turnframe_test.postgres import PrivateDatabase
from turnframe_test.sample.desk import DeskHarness

BUCKETS = (
    "psycopg",
    "pydantic",
    "canonical JSON + hashing",
    "asyncio",
    "waiting on the socket",
    "SQLAlchemy",
    "copy (jinja2, babel)",
    "telemetry",
    "turnframe runtime",
    "turnframe store",
    "turnframe core",
    "the rest",
)

_BY_PATH = (
    ("/psycopg", "psycopg"),
    ("/pydantic", "pydantic"),
    ("/json/", "canonical JSON + hashing"),
    ("/hashlib", "canonical JSON + hashing"),
    ("/base64", "canonical JSON + hashing"),
    ("turnframe_core/canonical", "canonical JSON + hashing"),
    ("/asyncio/", "asyncio"),
    ("/selectors", "asyncio"),
    ("/sqlalchemy/", "SQLAlchemy"),
    ("/jinja2/", "copy (jinja2, babel)"),
    ("/babel/", "copy (jinja2, babel)"),
    ("/markupsafe/", "copy (jinja2, babel)"),
    ("turnframe_runtime/copy/", "copy (jinja2, babel)"),
    ("/opentelemetry/", "telemetry"),
    ("turnframe_runtime/observe", "telemetry"),
    ("turnframe_runtime/", "turnframe runtime"),
    ("turnframe_store/", "turnframe store"),
    ("turnframe_core/", "turnframe core"),
)

_BY_NAME = (
    ("pydantic_core", "pydantic"),
    ("psycopg", "psycopg"),
    ("orjson", "canonical JSON + hashing"),
    ("_json", "canonical JSON + hashing"),
    ("_hashlib", "canonical JSON + hashing"),
    ("openssl_", "canonical JSON + hashing"),
    ("'poll' of 'select", "waiting on the socket"),
    ("'select' of 'select", "waiting on the socket"),
    ("_asyncio", "asyncio"),
    ("_contextvars", "asyncio"),
)


def bucket_of(filename: str, name: str) -> str:
    if filename == "~":  # a builtin: its name says whose it is
        return next((b for key, b in _BY_NAME if key in name), "the rest")
    return next((b for key, b in _BY_PATH if key in filename), "the rest")


def buckets(profile: cProfile.Profile) -> dict[str, float]:
    """Each bucket's share of the profiled time."""
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    own: dict[str, float] = dict.fromkeys(BUCKETS, 0.0)
    for (filename, _line, name), (_cc, _nc, tottime, _ct, _callers) in stats.items():
        own[bucket_of(filename, name)] += tottime
    total = sum(own.values()) or 1.0
    return {b: t / total for b, t in own.items()}


Turns = Callable[[int, str], Awaitable[Callable[[], Awaitable[None]]]]


async def _measure(prepare: Turns, n: int) -> tuple[float, dict[str, float]]:
    """Wall µs per turn over `n` turns, then the bucket shares of `n` more under cProfile."""
    await (await prepare(max(n // 10, 5), "w"))()  # warm: imports, caches, prepared statements
    run = await prepare(n, "t")
    started = time.perf_counter()
    await run()
    wall = (time.perf_counter() - started) / n * 1e6
    run = await prepare(n, "p")
    profile = cProfile.Profile()
    profile.enable()
    await run()
    profile.disable()
    return wall, buckets(profile)


# --- the turns (memory or PostgreSQL) ------------------------------------------------------


def _turns(kind: str, desk: DeskHarness) -> Turns:
    """Prepares `n` turns of `kind` on `desk` (untimed) and returns what runs them."""
    rounds = iter(range(1_000_000))

    async def prepare(n: int, tag: str) -> Callable[[], Awaitable[None]]:
        tag = f"{tag}{next(rounds)}"
        inputs: list[TurnInput] = await (
            turn_pg._prepare_clicks(desk, tag, n) if kind == "click" else _texts(desk, tag, n)
        )

        async def run() -> None:
            for turn_input in inputs:
                await desk.runtime.handle_turn(turn_input)

        return run

    return prepare


async def _texts(desk: DeskHarness, tag: str, n: int) -> list[TurnInput]:
    return turn_pg._prepare_texts(desk, tag, n)


# --- PostgreSQL ------------------------------------------------------------------------------


class Trace:
    """libpq's protocol trace of every connection psycopg opens while installed."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="tf_trace_"))
        self.connections: list[psycopg.AsyncConnection[Any]] = []
        self._connect: Any = None

    def install(self) -> None:
        original = psycopg.AsyncConnection.connect.__func__  # type: ignore[attr-defined]
        self._connect = original
        trace = self

        async def connect(cls: Any, *args: Any, **kwargs: Any) -> Any:
            connection = await original(cls, *args, **kwargs)
            trace.watch(connection)
            return connection

        psycopg.AsyncConnection.connect = classmethod(connect)  # type: ignore[method-assign,assignment]

    def watch(self, connection: psycopg.AsyncConnection[Any]) -> None:
        path = self.directory / f"{len(self.connections)}.trace"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        connection.pgconn.trace(fd)
        connection.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        self.connections.append(connection)

    def uninstall(self) -> None:
        psycopg.AsyncConnection.connect = classmethod(self._connect)  # type: ignore[method-assign]

    def counts(self) -> dict[str, int]:
        """Statements and round trips sent so far (every trace flushed first)."""
        for connection in self.connections:
            if not connection.closed:
                connection.pgconn.untrace()
        statements = round_trips = 0
        for path in self.directory.glob("*.trace"):
            for line in path.read_text(errors="replace").splitlines():
                fields = line.split("\t")
                if len(fields) < 3 or fields[0] != "F":
                    continue
                message = fields[2].split(" ")[0]
                if message == "Execute":
                    statements += 1
                elif message == "Sync":
                    round_trips += 1
                elif message == "Query":
                    text = line.split("\t", 3)[-1]
                    statements += sum(1 for part in text.split(";") if part.strip(' "'))
                    round_trips += 1
        return {"statements": statements, "round trips": round_trips}


async def _server(conninfo: str, database: str) -> tuple[int, int]:
    """The cluster's next transaction id, and the database's transactions so far."""
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as c:
        await c.execute("SELECT pg_stat_clear_snapshot()")
        cursor = await c.execute(
            "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint,"
            " xact_commit + xact_rollback FROM pg_stat_database WHERE datname = %s",
            (database,),
        )
        row = await cursor.fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


async def _pg_desk(url: str) -> DeskHarness:
    stores = await SqlStores.connect(url, SqlConfig(pool_size=2, pool_min_size=1))
    return DeskHarness(
        stores=stores, ids=UlidIdSource(), config=RuntimeConfig(locales=("en", "it"))
    )


async def _count_pg(
    db: PrivateDatabase, kind: str, n: int, docs: turn_pg.Documents
) -> dict[str, float]:
    """Statements, round trips, xids and transactions per turn, for `n` turns counted alone."""
    conninfo = parse_url(db.url)[1]
    database = str(psycopg.conninfo.conninfo_to_dict(conninfo)["dbname"])
    trace = Trace()
    if kind.startswith("floor"):
        click = kind == "floor-click"
        tag = f"cnt{kind[6]}"
        await turn_pg._floor_setup(conninfo, tag, n, docs, click)
        trace.install()
        try:
            xid, xacts = await _server(conninfo, database)
            async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as c:
                for i in range(n):
                    await turn_pg._floor_turn(c, f"{tag}{'c' if click else 't'}{i}", docs, click)
                counted = trace.counts()
        finally:
            trace.uninstall()
    else:
        desk = await _pg_desk(db.url)
        prepare = _turns(kind, desk)
        run = await prepare(n, "cnt")
        await desk.stores.aclose()
        trace.install()
        try:
            xid, xacts = await _server(conninfo, database)
            desk.use_stores(
                await SqlStores.connect(db.url, SqlConfig(pool_size=2, pool_min_size=1))
            )
            await run()
            counted = trace.counts()
            await desk.stores.aclose()
        finally:
            trace.uninstall()
    xid_after, xacts_after = await _server(conninfo, database)
    per = {k: v / n for k, v in counted.items()}
    per["transaction ids"] = (xid_after - xid) / n
    per["transactions"] = (xacts_after - xacts) / n
    return per


# --- the report ------------------------------------------------------------------------------


def _table(rows: dict[str, tuple[float, dict[str, float]]]) -> None:
    names = list(rows)
    print(f"{'µs per turn':<28}" + "".join(f"{n:>18}" for n in names))
    for bucket in BUCKETS:
        cells = "".join(f"{rows[n][0] * rows[n][1][bucket]:>18.0f}" for n in names)
        print(f"{bucket:<28}{cells}")
    print(f"{'total (wall, no profiler)':<28}" + "".join(f"{rows[n][0]:>18.0f}" for n in names))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--stores", default="memory,postgresql")
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "TURNFRAME_TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        ),
    )
    args = parser.parse_args()
    stores = args.stores.split(",")
    rows: dict[str, tuple[float, dict[str, float]]] = {}
    if "memory" in stores:
        for kind in ("click", "text"):
            rows[f"memory {kind}"] = await _measure(_turns(kind, DeskHarness()), args.turns)
    counts: dict[str, dict[str, float]] = {}
    if "postgresql" in stores:
        async with PrivateDatabase(args.url) as db:
            migrating = await SqlStores.connect(db.url)
            await migrating.migrate()
            await migrating.aclose()
            docs = await turn_pg._documents(db.url, "docs")
            for kind in ("click", "text"):
                desk = await _pg_desk(db.url)
                try:
                    rows[f"postgresql {kind}"] = await _measure(_turns(kind, desk), args.turns)
                finally:
                    await desk.stores.aclose()
            for kind in ("floor-click", "click", "floor-text", "text"):
                counts[kind] = await _count_pg(db, kind, 50, docs)
    _table(rows)
    if counts:
        print()
        print(f"{'PostgreSQL, per turn':<28}" + "".join(f"{k:>14}" for k in counts))
        for what in ("statements", "round trips", "transaction ids", "transactions"):
            cells = "".join(f"{counts[k][what]:>14.2f}" for k in counts)
            print(f"{what:<28}{cells}")
    print(f"({args.turns} turns per row; library default RuntimeConfig; buckets from cProfile)")


if __name__ == "__main__":
    asyncio.run(main())
