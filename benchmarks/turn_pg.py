"""Turns per second through TurnRuntime on PostgreSQL, against the raw psycopg floor.

Rows, measured in one run, in alternating rounds (the best round of each row is kept):
- floor, click-only: plain psycopg (async, pipeline mode) writing in ONE transaction the rows a
  click-only turn writes: the user turn and its marker, the card claimed and resolved, the journal
  entry started and settled, the event, the stale cards invalidated, the outbox row, the replay
  record, the assistant turn and its marker; the documents are a real turn's;
- runtime, click-only: a click on a rebooking card through `TurnRuntime` on `SqlStores`
  (admission, claim, journal, executor, commit bundle with an outbox row, receipt read back,
  re-projection, the stored turn);
- click, local executor: the same click with a `TransactionalExecutor` whose trip rows live in
  the same database (`turnframe_test.sample.local_trip`): the whole turn in one transaction
  (decision 0029), against the click floor;
- floor, text and runtime, text: the same for a text turn with two acts and a question.
Each row runs with 1 and with 4 client processes (each on its own conversations); the rate is
all turns over the slowest client's time. Commits per turn are what PostgreSQL counts for a
private database (`pg_stat_database.xact_commit`, less one per session start).

Run: `.venv/bin/python benchmarks/turn_pg.py [--turns N] [--rounds R] [--clients 1,4] [--url URL]
[--stream-log every|streamed]`
(URL default: TURNFRAME_TEST_DATABASE_URL, else postgresql+psycopg://postgres@127.0.0.1:5432/test).
It works in a private database and drops it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from turnframe_core import InteractionBlock, InteractionResponse, TurnInput, UlidIdSource
from turnframe_runtime import RuntimeConfig
from turnframe_store import SqlConfig, SqlStores
from turnframe_store.sql.url import parse_url
from turnframe_test import act, question, understanding
from turnframe_test.postgres import PrivateDatabase
from turnframe_test.sample.desk import DeskHarness
from turnframe_test.sample.local_trip import LocalTripDesk

ACCOUNT = "acct_1"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
KINDS = ("floor-click", "click", "local-click", "floor-text", "text")
LABELS = {"local-click": "click, local executor"}


def _ts(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


# --- the runtime ---------------------------------------------------------------------------------


async def _desk(url: str, local: bool = False) -> DeskHarness:
    stores = await SqlStores.connect(url, SqlConfig(pool_size=2, pool_min_size=1))
    # `--stream-log every`: turns nobody streams keep a stream log too (the default keeps none).
    every_turn = os.environ.get("TURNFRAME_BENCH_STREAM_LOG", "streamed") == "every"
    config = RuntimeConfig(locales=("en", "it"), stream_every_turn=every_turn)
    desk = DeskHarness(stores=stores, ids=UlidIdSource(), config=config)
    if local:  # the trips in this database (`local_tables` made them): a local executor
        desk.directory = desk.executor = LocalTripDesk(desk.desk, stores)
        desk.restart()
    return desk


def _use_stores(desk: DeskHarness, stores: SqlStores) -> None:
    desk.use_stores(stores)
    if isinstance(desk.executor, LocalTripDesk):
        desk.executor.stores = stores


async def local_tables(url: str) -> None:
    """The local executor's tables, once per database."""
    stores = await SqlStores.connect(url)
    try:
        await LocalTripDesk(DeskHarness().desk, stores).create()
    finally:
        await stores.aclose()


async def _prepare_clicks(desk: DeskHarness, tag: str, n: int) -> list[TurnInput]:
    """Untimed: per conversation one trip and one open rebooking card."""
    inputs = []
    for i in range(n):
        conversation = f"conv_{tag}c{i}"
        desk.desk.open_trip(
            ACCOUNT, f"T-{tag}c{i}", f"Trip {i}", conversation_id=conversation,
            name="Ada Lovelace", email="ada@example.com",
        )  # fmt: skip
        if isinstance(desk.executor, LocalTripDesk):
            await desk.executor.open_trips()
        desk.interpreter.then(
            understanding(act("a1", "trip.request_rebooking", "h1", "rebook", leg="outbound"))
        )
        asked = await desk.runtime.handle_turn(
            TurnInput(account_id=ACCOUNT, conversation_id=conversation, text="rebook")
        )
        card: InteractionBlock = desk.card(asked)
        inputs.append(
            TurnInput(
                account_id=ACCOUNT,
                conversation_id=conversation,
                interaction_response=InteractionResponse(
                    interaction_id=card.interaction_id,
                    option_id="opt_rebook",
                    expected_case_revision=card.case_revision,
                ),
            )
        )
    return inputs


def _prepare_texts(desk: DeskHarness, tag: str, n: int) -> list[TurnInput]:
    inputs = []
    for i in range(n):
        conversation = f"conv_{tag}t{i}"
        desk.desk.open_trip(ACCOUNT, f"T-{tag}t{i}", f"Trip {i}", conversation_id=conversation)
        desk.interpreter.then(
            understanding(
                act("a1", "trip.set_name", "h1", "Ada Lovelace", name="Ada Lovelace"),
                act("a2", "trip.set_email", "h1", "ada@example.com", email="ada@example.com"),
                question("q1", "When do I fly?", "h1"),
            )
        )
        inputs.append(
            TurnInput(
                account_id=ACCOUNT,
                conversation_id=conversation,
                text="I'm Ada Lovelace, email ada@example.com. When do I fly?",
            )
        )
    return inputs


# --- the floor -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Documents:
    """A real turn's documents, written again by the floor under other keys."""

    user_input: str
    assistant_turn: str
    replay: str
    card: str
    entry: str
    outcome: str
    event_payload: str
    outbox_payload: str


async def _documents(url: str, tag: str) -> Documents:
    """Run one real click turn and take its documents from the database."""
    desk = await _desk(url)
    [click] = await _prepare_clicks(desk, f"{tag}doc", 1)
    turn = await desk.runtime.handle_turn(click)
    await desk.stores.aclose()
    conninfo = parse_url(url)[1]
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as c:

        async def one(sql: str, *params: Any) -> str:
            cursor = await c.execute(sql, params)
            row = await cursor.fetchone()
            assert row is not None
            return str(row[0])

        key = (ACCOUNT, turn.turn_id)
        return Documents(
            user_input=await one(
                "SELECT user_input FROM tf_turn WHERE account_id=%s AND turn_id=%s", *key
            ),
            assistant_turn=await one(
                "SELECT assistant_turn FROM tf_turn WHERE account_id=%s AND turn_id=%s", *key
            ),
            replay=await one(
                "SELECT record FROM tf_replay WHERE account_id=%s AND turn_id=%s", *key
            ),
            card=await one("SELECT interaction FROM tf_interaction LIMIT 1"),
            entry=await one(
                "SELECT entry FROM tf_command_journal WHERE status='committed' LIMIT 1"
            ),
            outcome=await one(
                "SELECT outcome FROM tf_command_journal WHERE status='committed' LIMIT 1"
            ),
            event_payload=await one("SELECT payload FROM tf_domain_event LIMIT 1"),
            outbox_payload=await one("SELECT payload FROM tf_outbox LIMIT 1"),
        )


TURN = (
    "INSERT INTO tf_turn (account_id, turn_id, conversation_id, received_at, user_input)"
    " VALUES (%s, %s, %s, %s, %s)"
)
PHASE = (
    "INSERT INTO tf_turn_phase (account_id, turn_id, conversation_id, phase, updated_at)"
    " VALUES (%s, %s, %s, 'received', %s)"
)
CLAIM = (
    "UPDATE tf_interaction SET status = 'resolving', resolved_option_id = %s"
    " WHERE account_id = %s AND interaction_id = %s AND status = 'active' RETURNING status"
)
START = (
    "UPDATE tf_command_journal SET status = 'executing' WHERE account_id = %s"
    " AND command_id = %s AND status IN ('pending', 'awaiting_confirmation') RETURNING status"
)
JOURNAL = (
    "INSERT INTO tf_command_journal (account_id, command_id, idempotency_key, turn_id, workflow,"
    " case_id, expected_revision, command_type, entry, status, created_at)"
    " VALUES (%s, %s, %s, %s, 'trip', %s, 1, 'trip.set_name', %s, 'executing', %s)"
)
SETTLE = (
    "UPDATE tf_command_journal SET status = 'committed', outcome = %s, completed_at = %s"
    " WHERE account_id = %s AND command_id = %s AND status = 'executing' RETURNING status"
)
EVENT = (
    "INSERT INTO tf_domain_event (account_id, event_id, workflow, case_id, case_revision,"
    " command_id, event_type, payload, occurred_at)"
    " VALUES (%s, %s, 'trip', %s, 2, %s, 'trip.rebooking_sent', %s, %s) RETURNING sequence"
)
RESOLVE = (
    "UPDATE tf_interaction SET status = 'resolved', resolved_at = %s, resolution_event_ids = %s"
    " WHERE account_id = %s AND interaction_id = %s AND status = 'resolving' RETURNING status"
)
INVALIDATE = (
    "UPDATE tf_interaction SET status = 'invalidated', resolved_at = %s WHERE account_id = %s"
    " AND workflow = 'trip' AND case_id = %s AND case_revision < 2 AND NOT revision_independent"
    " AND status IN ('active', 'resolving') RETURNING interaction_id"
)
OUTBOX = (
    "INSERT INTO tf_outbox (outbox_id, command_id, destination, payload, idempotency_key, status,"
    " attempt_count, created_at) VALUES (%s, %s, 'airline', %s, %s, 'pending', 0, %s)"
)
REPLAY = (
    "INSERT INTO tf_replay (account_id, turn_id, conversation_id, replay_token, phase,"
    " first_recorded_at, recorded_at, record) VALUES (%s, %s, %s, %s, 'delivered', %s, %s, %s)"
)
ANSWER = (
    "UPDATE tf_turn SET assistant_turn = %s WHERE account_id = %s AND turn_id = %s"
    " AND assistant_turn IS NULL RETURNING turn_id"
)
DELIVERED = (
    "UPDATE tf_turn_phase SET phase = 'delivered', updated_at = %s WHERE account_id = %s"
    " AND turn_id = %s RETURNING phase"
)


async def _floor_setup(conninfo: str, tag: str, n: int, docs: Documents, click: bool) -> None:
    """Untimed: each floor turn's conversation (and, for clicks, its card and waiting entry)."""
    now = _ts(int(time.time() * 1000))
    connecting = psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    async with await connecting as c, c.transaction():
        for i in range(n):
            k = f"{tag}{'c' if click else 't'}{i}"
            await c.execute(
                "INSERT INTO tf_conversation VALUES (%s, %s, %s)", (ACCOUNT, f"conv_f{k}", now)
            )
            if not click:
                continue
            await c.execute(
                "INSERT INTO tf_interaction (account_id, interaction_id, conversation_id,"
                " workflow, case_id, case_revision, blocking, revision_independent,"
                " interaction, status, created_at, resolution_event_ids)"
                " VALUES (%s, %s, %s, 'trip', %s, 1, true, false, %s, 'active', %s, '[]')",
                (ACCOUNT, f"int_f{k}", f"conv_f{k}", f"T-f{k}", docs.card, now),
            )
            await c.execute(
                "INSERT INTO tf_command_journal (account_id, command_id, idempotency_key,"
                " turn_id, workflow, case_id, expected_revision, command_type, entry, status,"
                " created_at) VALUES (%s, %s, %s, %s, 'trip', %s, 1, 'trip.confirm_rebooking',"
                " %s, 'awaiting_confirmation', %s)",
                (ACCOUNT, f"cmd_f{k}", f"key_f{k}", f"turn_p{k}", f"T-f{k}", docs.entry, now),
            )


async def _floor_turn(
    c: psycopg.AsyncConnection[Any], k: str, docs: Documents, click: bool
) -> None:
    now = _ts(int(time.time() * 1000))
    turn, conv, case = f"turn_f{k}", f"conv_f{k}", f"T-f{k}"
    async with c.pipeline(), c.transaction():
        await c.execute(TURN, (ACCOUNT, turn, conv, now, docs.user_input))
        await c.execute(PHASE, (ACCOUNT, turn, conv, now))
        commands = [f"cmd_f{k}"] if click else [f"cmd_f{k}a", f"cmd_f{k}b"]
        if click:
            await c.execute(CLAIM, ("opt_rebook", ACCOUNT, f"int_f{k}"))
            await c.execute(START, (ACCOUNT, commands[0]))
        else:
            for command in commands:
                await c.execute(
                    JOURNAL, (ACCOUNT, command, f"key_{command}", turn, case, docs.entry, now)
                )
        for command in commands:
            await c.execute(SETTLE, (docs.outcome, now, ACCOUNT, command))
            await c.execute(
                EVENT, (ACCOUNT, f"evt_{command}", case, command, docs.event_payload, now)
            )
        if click:
            await c.execute(RESOLVE, (now, f'["evt_{commands[0]}"]', ACCOUNT, f"int_f{k}"))
        await c.execute(INVALIDATE, (now, ACCOUNT, case))
        if click:
            await c.execute(
                OUTBOX, (f"obx_f{k}", commands[0], docs.outbox_payload, f"key_f{k}", now)
            )
        await c.execute(REPLAY, (ACCOUNT, turn, conv, f"rpl_f{k}", now, now, docs.replay))
        await c.execute(ANSWER, (docs.assistant_turn, ACCOUNT, turn))
        await c.execute(DELIVERED, (now, ACCOUNT, turn))


# --- one client ----------------------------------------------------------------------------------


async def _client(kind: str, url: str, tag: str, n: int, docs: Documents | None, go: Any) -> float:
    """Prepare (untimed), wait for every client, run `n` turns; the seconds they took."""
    conninfo = parse_url(url)[1]
    if kind.startswith("floor"):
        assert docs is not None
        click = kind == "floor-click"
        await _floor_setup(conninfo, tag, n, docs, click)
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as c:
            await asyncio.to_thread(go.wait)
            started = time.perf_counter()
            for i in range(n):
                await _floor_turn(c, f"{tag}{'c' if click else 't'}{i}", docs, click)
            return time.perf_counter() - started
    desk = await _desk(url, local=kind == "local-click")
    try:
        inputs = (
            await _prepare_clicks(desk, tag, n)
            if kind.endswith("click")
            else _prepare_texts(desk, tag, n)
        )
        await asyncio.to_thread(go.wait)
        started = time.perf_counter()
        for turn_input in inputs:
            await desk.runtime.handle_turn(turn_input)
        return time.perf_counter() - started
    finally:
        await desk.stores.aclose()


def _process(
    kind: str, url: str, tag: str, n: int, docs: Documents | None, go: Any, out: Any
) -> None:
    out.put(asyncio.run(_client(kind, url, tag, n, docs, go)))


def run_round(kind: str, url: str, clients: int, n: int, docs: Documents, round_no: int) -> float:
    """Turns per second of all clients together."""
    context = mp.get_context("spawn")
    go = context.Barrier(clients)
    out = context.Queue()
    processes = [
        context.Process(
            target=_process,
            args=(kind, url, f"r{round_no}p{p}{kind[0]}{clients}x", n, docs, go, out),
        )
        for p in range(clients)
    ]
    for process in processes:
        process.start()
    seconds = [out.get(timeout=600) for _ in processes]
    for process in processes:
        process.join()
    return clients * n / max(seconds)


async def commits_per_turn(db: PrivateDatabase, kind: str, n: int, docs: Documents) -> float:
    """What the server counts for `n` turns of `kind`, prepared untimed and counted alone."""
    url, tag, click = db.url, f"cnt{kind[0]}{len(kind)}", kind.endswith("click")
    conninfo = parse_url(url)[1]
    if kind.startswith("floor"):
        await _floor_setup(conninfo, tag, n, docs, click)
        before = await db.commits()
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as c:
            for i in range(n):
                await _floor_turn(c, f"{tag}{'c' if click else 't'}{i}", docs, click)
        return (await db.commits() - before) / n
    desk = await _desk(url, local=kind == "local-click")
    inputs = await _prepare_clicks(desk, tag, n) if click else _prepare_texts(desk, tag, n)
    await desk.stores.aclose()
    before = await db.commits()
    _use_stores(desk, await SqlStores.connect(url, SqlConfig(pool_size=2, pool_min_size=1)))
    for turn_input in inputs:
        await desk.runtime.handle_turn(turn_input)
    await desk.stores.aclose()
    return (await db.commits() - before) / n


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300, help="turns per client per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default="1,4")
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "TURNFRAME_TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        ),
    )
    parser.add_argument(
        "--stream-log",
        choices=("every", "streamed"),
        default="streamed",
        help="RuntimeConfig.stream_every_turn: log only streamed turns' streams (the library's "
        "default since decision 0028; these turns are not streamed, so they log nothing), or "
        "every turn's (the default before it)",
    )
    args = parser.parse_args()
    os.environ["TURNFRAME_BENCH_STREAM_LOG"] = args.stream_log  # the client processes read it
    async with PrivateDatabase(args.url) as db:
        stores = await SqlStores.connect(db.url)
        await stores.migrate()
        await stores.aclose()
        await local_tables(db.url)
        docs = await _documents(db.url, "docs")
        commits = {kind: await commits_per_turn(db, kind, 20, docs) for kind in KINDS}
        print(f"{'row':<22}{'clients':>8}{'turns/s':>10}{'x floor':>9}{'commits/turn':>14}")
        for clients in (int(c) for c in args.clients.split(",")):
            best: dict[str, float] = {}
            for round_no in range(args.rounds):
                for kind in KINDS:
                    rate = await asyncio.to_thread(
                        run_round, kind, db.url, clients, args.turns, docs, round_no
                    )
                    best[kind] = max(best.get(kind, 0.0), rate)
            for kind in KINDS:
                floor = best[f"floor-{kind.split('-')[-1]}"]
                print(
                    f"{LABELS.get(kind, kind):<22}{clients:>8}{best[kind]:>10.0f}"
                    f"{best[kind] / floor:>9.2f}{commits[kind]:>14.2f}"
                )
        print(f"({args.turns} turns per client per round, best of {args.rounds} rounds)")


if __name__ == "__main__":
    asyncio.run(main())
