"""What erasure costs (decision 0032), each against a baseline measured in the same run.

Rows:
- record digest: a sealed record's digest (scheme 2, each personal field digested on its own)
  against the same record's digest taken whole (scheme 1, what records were written with
  before); every final turn pays it once for its chain link;
- erase one turn: `CommitStore.erase_turn` of a finished text turn (user turn, reply, record,
  events, command, stream log rewritten in one transaction) against running that turn
  (`handle_turn`, scripted interpreter), on MemoryStores and on SQLite.

Run: `.venv/bin/python benchmarks/erasure.py [--turns N]`
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from turnframe_core import TurnInput
from turnframe_store import SqlStores
from turnframe_store.clock import ManualClock
from turnframe_test.sample.desk import DeskHarness
from turnframe_test.understandings import act, question, understanding

PERSON = "Ada Lovelace"


def _median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


async def _turns_then_erasures(desk: DeskHarness, count: int) -> tuple[list[float], list[float]]:
    turned: list[float] = []
    ids: list[tuple[str, str]] = []
    for i in range(count):
        conversation = f"conv_e{i}"
        desk.desk.open_trip("acct_1", f"T-{i}", f"Trip {i}", conversation_id=conversation,
                            name="Grace Hopper", email="grace@example.com")  # fmt: skip
        desk.interpreter.then(
            understanding(
                act("a1", "trip.set_name", "h1", PERSON, name=PERSON),
                question("q1", f"Is {PERSON} set?", "h1"),
            )
        )
        said = TurnInput(account_id="acct_1", conversation_id=conversation,
                         text=f"My name is {PERSON}. Is {PERSON} set?")  # fmt: skip
        started = time.perf_counter()
        turn = await desk.runtime.handle_turn(said)
        turned.append(time.perf_counter() - started)
        ids.append(("acct_1", turn.turn_id))
    erased: list[float] = []
    for account_id, turn_id in ids:
        started = time.perf_counter()
        result = await desk.stores.commits.erase_turn(account_id, turn_id)
        erased.append(time.perf_counter() - started)
        assert result.erased and not result.kept, result
    return turned, erased


def _digests(count: int) -> tuple[float, float]:
    from turnframe_core.replay import SEALED_DIGEST_SCHEME
    from turnframe_store import builders as build

    record = build.replay_record("turn_1").model_copy(
        update={"understanding": {"acts": [{"name": PERSON, "n": i} for i in range(20)]}}
    )
    sealed = record.model_copy(update={"digest_scheme": SEALED_DIGEST_SCHEME})
    timings: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(count):
        for scheme, subject in ((1, record), (2, sealed)):
            fresh = subject.model_copy()  # the digest is cached per instance
            started = time.perf_counter()
            fresh.digest()
            timings[scheme].append(time.perf_counter() - started)
    return _median_us(timings[1]), _median_us(timings[2])


async def main(turns: int) -> None:
    whole, sealed = _digests(2_000)
    print(
        f"record digest: whole {whole:.1f} µs, sealed {sealed:.1f} µs, ratio {sealed / whole:.2f}x"
    )
    memory = DeskHarness()
    turned, erased = await _turns_then_erasures(memory, turns)
    t, e = _median_us(turned), _median_us(erased)
    print(f"memory: turn {t:.0f} µs, erase one turn {e:.0f} µs, ratio {e / t:.2f}x ({turns} turns)")
    with tempfile.TemporaryDirectory() as folder:
        clock = ManualClock()
        stores = await SqlStores.connect(f"sqlite:///{Path(folder) / 'erasure.db'}", clock=clock)
        await stores.migrate()
        try:
            sqlite = DeskHarness(stores=stores, clock=clock)
            turned, erased = await _turns_then_erasures(sqlite, turns)
        finally:
            await stores.aclose()
    t, e = _median_us(turned), _median_us(erased)
    print(f"sqlite: turn {t:.0f} µs, erase one turn {e:.0f} µs, ratio {e / t:.2f}x ({turns} turns)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    asyncio.run(main(parser.parse_args().turns))
