"""Turns per second through real runtime processes on one PostgreSQL and one Redis: the
`scale-out` plan (1,000 turns over 50 conversations, 2 outbox workers, nothing killed) with 4
runtime processes, against the same plan with 1 runtime process measured in the same run. Each
run's database is its own and is dropped afterwards. Prints each run's rate and the ratio
(4 runtimes / 1) last; the rate counts the users' play only (first request to last reply).

Run: `.venv/bin/python benchmarks/scale_out.py [--db URL] [--broker URL] [--runtimes 1 2 4]`.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import tempfile
from pathlib import Path

from turnframe_test.process_chaos import PLANS, run_plan


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--runtimes", type=int, nargs="+", default=[1, 4])
    args = parser.parse_args()
    rates: dict[int, float] = {}
    for runtimes in args.runtimes:
        plan = dataclasses.replace(
            PLANS["scale-out"], name=f"scale-out-{runtimes}", runtimes=runtimes
        )
        workdir = Path(tempfile.mkdtemp(prefix="turnframe-bench-"))
        report = asyncio.run(run_plan(plan, args.db, args.broker, workdir))
        assert report.passed, report.summary()
        rates[runtimes] = report.counts["user turns answered"] / report.users_seconds
        turns = report.counts["user turns answered"]
        print(
            f"{runtimes} runtime process(es): {rates[runtimes]:.1f} turns/s "
            f"({turns} turns in {report.users_seconds:.1f} s)"
        )
    base = rates[args.runtimes[0]]
    for runtimes, rate in rates.items():
        print(f"ratio {runtimes} / {args.runtimes[0]} runtime(s): {rate / base:.2f}")


if __name__ == "__main__":
    main()
