"""Outbox rows carried out per second by one worker process (relay, dispatch actor, a no-op
sender, the row settled), against a bare dramatiq actor doing the same no-op send in the same
run on the same Redis. PostgreSQL (a private database, dropped afterwards) and Redis on
127.0.0.1; the rows have no conversation, so no follow-up turn is written (the transport's own
cost). The ratio (outbox / bare) is printed last.

Each thread count runs both in the same run. The dispatch work shares one event loop, so the
outbox peaks at fewer actor threads than the bare actor: the last line compares each at its best.

Run: `.venv/bin/python benchmarks/outbox.py [--rows N] [--threads N …]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import threading
import time

import dramatiq

from turnframe_runtime import (
    OutboxConfig,
    OutboxRequest,
    OutboxWorker,
    SendCompleted,
    TemplateCopy,
    TurnRuntime,
    connect_broker,
)
from turnframe_store import OutboxEntry, SqlStores
from turnframe_test.postgres import PrivateDatabase
from turnframe_test.sample.travel import (
    TRIP_COPY,
    TripDesk,
    TripDirectory,
    TripExecutor,
    TripWorkflow,
)

SERVER = os.environ.get(
    "TURNFRAME_TEST_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REDIS = os.environ.get("TURNFRAME_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


class _NoOp:
    async def send(self, request: OutboxRequest) -> SendCompleted:
        return SendCompleted(reference="noop")

    async def reconcile(self, request: OutboxRequest) -> SendCompleted:
        return SendCompleted(reference="noop")


def bare_dramatiq(rows: int, threads: int) -> float:
    """Messages per second through a bare actor whose body is the same no-op send."""
    broker = connect_broker(REDIS)
    broker.flush_all()
    done = threading.Semaphore(0)
    sender = _NoOp()
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()

    def body(n: int) -> None:
        asyncio.run_coroutine_threadsafe(sender.send(None), loop).result()  # type: ignore[arg-type]
        done.release()

    actor = dramatiq.actor(body, actor_name="bench_bare", queue_name="bench_bare", broker=broker)
    worker = dramatiq.Worker(broker, worker_threads=threads, worker_timeout=100)
    started = time.perf_counter()
    for n in range(rows):
        actor.send(n)
    worker.start()
    for _ in range(rows):
        done.acquire()
    elapsed = time.perf_counter() - started
    worker.stop()
    loop.call_soon_threadsafe(loop.stop)
    return rows / elapsed


async def through_outbox(rows: int, threads: int) -> float:
    async with PrivateDatabase(SERVER) as db:
        stores = await SqlStores.connect(db.url)
        await stores.migrate()
        desk = TripDesk()
        runtime = TurnRuntime(
            stores=stores,
            workflows=[TripWorkflow()],
            directory=TripDirectory(desk),
            executor=TripExecutor(desk),
            copy=TemplateCopy(TRIP_COPY),
            senders={"bench": _NoOp()},
            outbox=OutboxConfig(poll_ms=50, batch_size=200),
        )
        for start in range(0, rows, 200):
            async with stores.transaction() as tx:
                for n in range(start, min(start + 200, rows)):
                    await tx.outbox.enqueue(
                        OutboxEntry(
                            outbox_id=f"obx_{n:026d}",
                            command_id=f"cmd_{n:026d}",
                            destination="bench",
                            payload={
                                "account_id": "acct_bench",
                                "conversation_id": None,  # no conversation to tell
                                "case_ref": {
                                    "workflow": "trip",
                                    "case_id": "T-1",
                                    "expected_revision": 1,
                                },
                                "command_type": "bench.noop",
                            },
                            idempotency_key=f"bench-{n}",
                            created_at=1_700_000_000_000 + n,
                        )
                    )
        broker = connect_broker(REDIS)
        broker.flush_all()
        worker = OutboxWorker(runtime, broker, threads=threads)
        started = time.perf_counter()
        await worker.start()
        drained = await worker.drain(300)
        elapsed = time.perf_counter() - started
        await worker.stop()
        await stores.aclose()
        if not drained:
            raise SystemExit("the outbox did not drain")
        return rows / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=2_000)
    parser.add_argument("--threads", type=int, nargs="+", default=[4, 8])
    args = parser.parse_args()
    best_bare = best_outbox = 0.0
    for threads in args.threads:
        bare = bare_dramatiq(args.rows, threads)
        outbox = asyncio.run(through_outbox(args.rows, threads))
        best_bare, best_outbox = max(best_bare, bare), max(best_outbox, outbox)
        print(
            f"{threads:2d} actor threads: bare dramatiq actor {bare:6.0f} messages/s; outbox "
            f"(relay + actor + settle) {outbox:6.0f} rows/s; ratio {outbox / bare:.2f}"
        )
    print(f"best bare dramatiq actor, no-op send:     {best_bare:8.0f} messages/s")
    print(f"best outbox (relay + actor + settle):     {best_outbox:8.0f} rows/s")
    print(f"ratio best outbox / best bare:            {best_outbox / best_bare:8.2f}")


if __name__ == "__main__":
    main()
