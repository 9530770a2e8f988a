"""`turnframe worker --db URL --broker URL`: the outbox relay, a dramatiq worker, and the timers.

It runs the adopter's runtime (`--app MODULE:FACTORY`, as `turnframe recover`, or
`$TURNFRAME_APP`; one of them is required: a worker never guesses whose outbox it carries out)
with its senders: the relay claims due rows and publishes them, the actors carry them out, and
every `RuntimeConfig.timer_poll_ms` the worker runs the scheduled events that are due
(`fire_due_events`: each claimed with a lease, so any number of workers share them). Run as many
as you like on one database and one broker; SIGTERM or SIGINT stops fetching, finishes the
messages and the events in hand and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from typing import Any

from turnframe_runtime import observe
from turnframe_runtime.cli_app import Unusable, load_runtime
from turnframe_runtime.outbox.worker import OutboxWorker, connect_broker
from turnframe_runtime.runtime import TurnRuntime

__all__ = ["fire_timers", "register"]

_LOG = logging.getLogger("turnframe_runtime.timers")
#: timers claimed per sweep
_TIMER_BATCH = 100


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
        "--no-timers", action="store_true", help="run no scheduled events; other workers do"
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
    timers = None if args.no_timers else asyncio.create_task(fire_timers(runtime, stop))
    print(
        f"turnframe worker: running (relay {'off' if args.no_relay else 'on'}, "
        f"timers {'off' if args.no_timers else 'on'})",
        flush=True,
    )
    try:
        await stop.wait()
    finally:
        if timers is not None:
            with contextlib.suppress(Exception):
                await timers
        await worker.stop()
        await runtime.stores.aclose()


async def fire_timers(runtime: TurnRuntime, stop: asyncio.Event) -> None:
    """Run the due scheduled events until `stop` is set: a full batch is followed at once by
    the next, otherwise the loop waits `RuntimeConfig.timer_poll_ms`. A sweep that fails is
    logged by its code and tried again at the next tick."""
    wait_s = runtime.config.timer_poll_ms / 1000
    while not stop.is_set():
        fired = 0
        try:
            fired = await runtime.fire_due_events(limit=_TIMER_BATCH)
        except Exception as failure:
            observe.failure(_LOG, "timers.sweep_failed", failure)
        if fired >= _TIMER_BATCH:
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), wait_s)
