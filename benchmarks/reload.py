"""Reloading on PostgreSQL with 1 M stored turns across 10 k conversations.

Rows (p50 and p99 over random picks, each read through `SqlStores`, and beside it the same
query through plain psycopg, measured in the same run):
- a turn by id (`TurnRuntime.load_turn`: `conversations.get_assistant_turn`);
- a conversation's last 20 turns (`TurnRuntime.load_conversation`: `recent_turns`, oldest first).
The store reads each turn back byte for byte (parsed, validated and compared with its canonical
form), which the plain query does not. The plans (`EXPLAIN ANALYZE`) are printed: an index, not
a scan.

Setup (untimed): a real assistant turn is produced once through the runtime; every stored row is
that turn under its own ids (turn id, replay token, conversation), loaded with COPY.

Run: `.venv/bin/python benchmarks/reload.py [--turns 1000000] [--conversations 10000]
[--picks 2000] [--url URL]`. It works in a private database and drops it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

import psycopg

from turnframe_core import TurnInput, UlidIdSource
from turnframe_core.derive import derive_replay_token
from turnframe_store import SqlStores
from turnframe_store.sql.url import parse_url
from turnframe_test import act
from turnframe_test.postgres import PrivateDatabase
from turnframe_test.sample.desk import DeskHarness

ACCOUNT = "acct_1"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _turn_id(n: int) -> str:
    return f"turn_{n:026d}"


def _conversation_id(n: int) -> str:
    return f"conv_{n:010d}"


async def _template() -> tuple[str, str, str]:
    """One real stored assistant turn, with the turn id and conversation it was stored under."""
    desk = DeskHarness(ids=UlidIdSource())
    desk.desk.open_trip(ACCOUNT, "T-1", "Rome trip", conversation_id=_conversation_id(0))
    desk.conversation_id = _conversation_id(0)
    turn = await desk.say(
        "I'm Ada Lovelace, email ada@example.com",
        act("a1", "trip.set_name", "h1", "Ada Lovelace", name="Ada Lovelace"),
        act("a2", "trip.set_email", "h1", "ada@example.com", email="ada@example.com"),
    )
    return turn.to_stored_json(), turn.turn_id, turn.conversation_id


def _row_text(template: str, template_turn: str, n: int) -> str:
    text = template.replace(derive_replay_token(template_turn), derive_replay_token(_turn_id(n)))
    return text.replace(template_turn, _turn_id(n))


async def _load(conninfo: str, turns: int, conversations: int) -> None:
    template, template_turn, template_conversation = await _template()
    assert len(template_turn) == len(_turn_id(0))  # the same length: canonical order holds
    user_input = TurnInput(
        account_id=ACCOUNT, conversation_id="conv_x", text="hello"
    ).model_dump_json()
    base = datetime(2026, 1, 1, tzinfo=UTC)
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as c:
        async with c.cursor().copy(
            "COPY tf_conversation (account_id, conversation_id, created_at) FROM STDIN"
        ) as copy:
            for n in range(conversations):
                await copy.write_row((ACCOUNT, _conversation_id(n), base))
        started = time.perf_counter()
        async with c.cursor().copy(
            "COPY tf_turn (account_id, turn_id, conversation_id, received_at, user_input,"
            " assistant_turn) FROM STDIN"
        ) as copy:
            for n in range(turns):
                conversation = _conversation_id(n % conversations)
                text = _row_text(template, template_turn, n).replace(
                    template_conversation, conversation
                )
                at = base + timedelta(milliseconds=n)
                await copy.write_row((ACCOUNT, _turn_id(n), conversation, at, user_input, text))
        await c.execute("ANALYZE tf_turn")
        print(f"loaded {turns} turns in {time.perf_counter() - started:.0f} s")


def _p(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1_000_000)
    parser.add_argument("--conversations", type=int, default=10_000)
    parser.add_argument("--picks", type=int, default=2_000)
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "TURNFRAME_TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        ),
    )
    args = parser.parse_args()
    rng = random.Random(7)
    async with PrivateDatabase(args.url) as db:
        stores = await SqlStores.connect(db.url)
        await stores.migrate()
        conninfo = parse_url(db.url)[1]
        await _load(conninfo, args.turns, args.conversations)
        conversations = stores.conversations
        by_id, last_20, raw_by_id, raw_last_20 = [], [], [], []
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as c:
            for _ in range(args.picks):
                n = rng.randrange(args.turns)
                started = time.perf_counter()
                turn = await conversations.get_assistant_turn(ACCOUNT, _turn_id(n))
                by_id.append(time.perf_counter() - started)
                assert turn.turn_id == _turn_id(n)
                started = time.perf_counter()
                cursor = await c.execute(
                    "SELECT assistant_turn FROM tf_turn WHERE account_id = %s AND turn_id = %s",
                    (ACCOUNT, _turn_id(n)),
                )
                await cursor.fetchall()
                raw_by_id.append(time.perf_counter() - started)
                conversation = _conversation_id(rng.randrange(args.conversations))
                started = time.perf_counter()
                recent = await conversations.recent_turns(ACCOUNT, conversation, 20)
                last_20.append(time.perf_counter() - started)
                assert len(recent) == min(20, args.turns // args.conversations)
                started = time.perf_counter()
                cursor = await c.execute(
                    "SELECT assistant_turn FROM tf_turn WHERE account_id = %s"
                    " AND conversation_id = %s AND assistant_turn IS NOT NULL"
                    " ORDER BY received_at DESC, turn_id DESC LIMIT 20",
                    (ACCOUNT, conversation),
                )
                await cursor.fetchall()
                raw_last_20.append(time.perf_counter() - started)
            print(f"{'row':<46}{'p50 ms':>9}{'p99 ms':>9}")
            for name, samples in (
                ("a turn by id (SqlStores, reloaded exactly)", by_id),
                ("a turn by id (plain psycopg)", raw_by_id),
                ("last 20 turns (SqlStores, reloaded exactly)", last_20),
                ("last 20 turns (plain psycopg)", raw_last_20),
            ):
                p50, p99 = _p(samples)
                print(f"{name:<46}{p50 * 1e3:>9.3f}{p99 * 1e3:>9.3f}")
            statements = stores.conversations._st  # the store's own compiled statements
            for title, statement, params in (
                (
                    "turn by id (the store's turn_get)",
                    statements.turn_get,
                    {"account_id": ACCOUNT, "turn_id": _turn_id(args.turns // 2)},
                ),
                (
                    "last 20 turns (the store's answers_of_conversation)",
                    statements.answers_of_conversation,
                    {
                        "account_id": ACCOUNT,
                        "conversation_id": _conversation_id(args.conversations // 2),
                        "limit": 20,
                    },
                ),
            ):
                cursor = await c.execute(
                    f"EXPLAIN (ANALYZE, COSTS OFF) {statement.sql}", statement.bind(params)
                )
                print(f"\nplan, {title}:")
                for (line,) in await cursor.fetchall():
                    print(f"  {line}")
        await stores.aclose()
    print(
        f"({args.picks} random picks; {args.turns} turns over {args.conversations} conversations)"
    )


if __name__ == "__main__":
    asyncio.run(main())
