"""What the stream log costs a turn on PostgreSQL: text turns through `TurnRuntime` on `SqlStores`
with every turn's stream logged (the default) against the same turns with
`RuntimeConfig(stream_every_turn=False)` (a turn nobody streams logs nothing), measured in one
run, in alternating rounds, each on a private database; the best round of each row is kept.

Rows (one client, one conversation per turn, each turn sets the trip's name: accept, start,
commit and deliver, three commits):
- `no log`: the baseline;
- `every turn logged`: `handle_turn` with the default configuration;
- `streamed (tokens)`: `stream_turn` read to its end, in `tokens` mode.

Run: `.venv/bin/python benchmarks/stream_log.py [--turns N] [--rounds R] [--url URL]`
(URL default: TURNFRAME_TEST_DATABASE_URL, else postgresql+psycopg://postgres@127.0.0.1:5432/test).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from turnframe_core import TurnInput
from turnframe_runtime import RuntimeConfig
from turnframe_store import SqlStores
from turnframe_test import act, understanding
from turnframe_test.postgres import PrivateDatabase
from turnframe_test.sample.desk import DeskHarness

ROWS = ("no log", "every turn logged", "streamed (tokens)")


async def _round(server: str, row: str, turns: int) -> float:
    """Milliseconds per turn for `turns` turns of `row` on a fresh private database."""
    async with PrivateDatabase(server) as db:
        url = db.url.replace("postgresql://", "postgresql+psycopg://", 1)
        stores = await SqlStores.connect(url)
        await stores.migrate()
        config = RuntimeConfig(locales=("en", "it", "de"), stream_every_turn=row != "no log")
        desk = DeskHarness(stores=stores, config=config)
        desk.ready_trip()
        for _ in range(turns):
            desk.interpreter.then(
                understanding(act("a1", "trip.set_name", "h1", "Grace", name="Grace Hopper"))
            )
        inputs = [
            TurnInput(account_id="acct_1", conversation_id=f"conv_{i}", text="Name Grace Hopper")
            for i in range(turns)
        ]
        started = time.perf_counter()
        for turn_input in inputs:
            if row == "streamed (tokens)":
                async for _ in desk.runtime.stream_turn(turn_input, mode="tokens"):
                    pass
            else:
                await desk.runtime.handle_turn(turn_input)
        elapsed = time.perf_counter() - started
        await stores.aclose()
        return elapsed / turns * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--url",
        default=os.environ.get(
            "TURNFRAME_TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
        ),
    )
    args = parser.parse_args()
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for row in ROWS:
            ms = await _round(args.url, row, args.turns)
            best[row] = min(best.get(row, ms), ms)
    base = best["no log"]
    print(f"{'row':<22}{'ms/turn':>10}{'x no log':>10}")
    for row in ROWS:
        print(f"{row:<22}{best[row]:>10.3f}{best[row] / base:>10.2f}")
    print(f"({args.turns} turns per round, best of {args.rounds} alternating rounds)")


if __name__ == "__main__":
    asyncio.run(main())
