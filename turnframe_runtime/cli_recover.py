"""`turnframe recover --db URL --app MODULE:FACTORY`: finish every interrupted turn.

Recovery runs the adopter's own runtime (its workflows, directory, executor and stores), so the
command takes the factory that builds it: `FACTORY(url)` returns a `TurnRuntime` (or an
awaitable of one) on stores opened from the `--db` URL; the command closes them when it is done.
`--app` defaults to the `TURNFRAME_APP` environment variable. Run it when a process starts, and
periodically with `--older-than-ms` set to the longest a turn may take (turns still running are
never touched: each is recovered under its conversation's lock).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from turnframe_runtime.cli_app import Unusable, load_runtime
from turnframe_runtime.recover import RecoveryOutcome, RecoveryReport

__all__ = ["register"]


def register(commands: Any) -> None:
    parser = commands.add_parser("recover", help="finish every turn a crash interrupted")
    parser.add_argument("--db", metavar="URL", required=True, help="the store's database")
    parser.add_argument(
        "--app",
        metavar="MODULE:FACTORY",
        default=os.environ.get("TURNFRAME_APP"),
        help="builds your TurnRuntime on the database URL (default: $TURNFRAME_APP)",
    )
    parser.add_argument(
        "--older-than-ms",
        type=int,
        default=None,
        metavar="MS",
        help="only turns whose marker has not moved for this long (a running system's lease)",
    )
    parser.add_argument("--limit", type=int, default=1_000, help="turns per sweep")
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    if not args.app or ":" not in args.app:
        print(
            "turnframe recover: --app MODULE:FACTORY (or TURNFRAME_APP) is needed", file=sys.stderr
        )
        return 2
    try:
        report = asyncio.run(_recover(args.db, args.app, args.older_than_ms, args.limit))
    except Unusable as unusable:
        print(f"turnframe recover: {unusable}", file=sys.stderr)
        return 2
    print(_summary(report))
    return 1 if report.failed else 0


async def _recover(db: str, app: str, older_than_ms: int | None, limit: int) -> RecoveryReport:
    runtime = await load_runtime(app, db)
    try:
        return await runtime.recover_unfinished(limit=limit, older_than_ms=older_than_ms)
    finally:
        await runtime.stores.aclose()


def _summary(report: RecoveryReport) -> str:
    counts = ", ".join(f"{o.value} {report.count(o)}" for o in RecoveryOutcome)
    unknown = sum(turn.unknown for turn in report.turns)
    lines = [f"recovered {len(report.turns)} turn(s): {counts}; outcomes still unknown {unknown}"]
    lines.extend(f"  not finished: {acct} {turn} ({code})" for acct, turn, code in report.failed)
    return "\n".join(lines)
