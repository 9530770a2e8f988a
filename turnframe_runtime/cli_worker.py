"""`turnframe worker --db URL --broker URL`: the outbox relay and a dramatiq worker.

It runs the adopter's runtime (`--app MODULE:FACTORY`, as `turnframe recover`, or
`$TURNFRAME_APP`; one of them is required: a worker never guesses whose outbox it carries out)
with its senders: the relay claims
due rows and publishes them, the actors carry them out. Run as many as you like on one
database and one broker; SIGTERM or SIGINT stops fetching, finishes the messages in hand and
exits.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from typing import Any

from turnframe_runtime.cli_app import Unusable, load_runtime
from turnframe_runtime.outbox.worker import OutboxWorker, connect_broker

__all__ = ["register"]


def register(commands: Any) -> None:
    parser = commands.add_parser("worker", help="run the outbox relay and a dramatiq worker")
    parser.add_argument("--db", metavar="URL", required=True, help="the store's database")
    parser.add_argument(
        "--broker",
        metavar="URL",
        required=True,
        help="redis://host:6379/0, amqp://… (the rabbitmq extra) or stub:// (this process)",
    )
    parser.add_argument(
        "--app",
        metavar="MODULE:FACTORY",
        default=os.environ.get("TURNFRAME_APP"),
        help="builds your TurnRuntime, with its senders, on the database URL (default: "
        "$TURNFRAME_APP; one of the two is required)",
    )
    parser.add_argument("--threads", type=int, default=8, help="actor threads (default 8)")
    parser.add_argument(
        "--no-relay", action="store_true", help="carry out messages only; another runs the relay"
    )
    parser.add_argument(
        "--heartbeat-timeout-ms",
        type=int,
        default=None,
        help="Redis: how long before a dead worker's messages are delivered again",
    )
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    if not args.app or ":" not in args.app:
        print(
            "turnframe worker: --app MODULE:FACTORY (or TURNFRAME_APP) is needed", file=sys.stderr
        )
        return 2
    try:
        asyncio.run(_work(args))
    except Unusable as unusable:
        print(f"turnframe worker: {unusable}", file=sys.stderr)
        return 2
    return 0


async def _work(args: argparse.Namespace) -> None:
    runtime = await load_runtime(args.app, args.db)
    try:
        broker = connect_broker(args.broker, heartbeat_timeout_ms=args.heartbeat_timeout_ms)
    except ValueError as unusable:
        await runtime.stores.aclose()
        raise Unusable(str(unusable)) from None
    worker = OutboxWorker(runtime, broker, threads=args.threads, relay=not args.no_relay)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await worker.start()
    print(f"turnframe worker: running (relay {'off' if args.no_relay else 'on'})", flush=True)
    try:
        await stop.wait()
    finally:
        await worker.stop()
        await runtime.stores.aclose()
