"""Real dramatiq worker processes on PostgreSQL and Redis, started and stopped by the test:
1,000 external commands carried out by 2 `turnframe worker` processes, each taking effect at
the airline exactly once; the same with workers SIGKILLed mid-dispatch at least 20 times, and
across a Redis restart that loses every queued message; a row whose transaction commits after
later rows is still carried out; a silent airline ends in an unknown outcome, a notice, then
reconciliation and the follow-up receipt.

The rows are enqueued as the confirmation turns enqueue them (test_dispatch.py follows a turn
to its row); the trips live in the shared travel desk's tables."""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
import redis
from worker_processes import start_worker, stop_workers

from turnframe_core import derive_id
from turnframe_core.derive import derive_outbox_id
from turnframe_runtime import TurnRuntime, connect_broker
from turnframe_runtime.outbox.worker import OUTBOX_QUEUE
from turnframe_store import OutboxEntry, OutboxStatus
from turnframe_store.sql.url import parse_url
from turnframe_test.domains.travel_pg import PostgresTripDesk
from turnframe_test.outbox_app import desk_runtime
from turnframe_test.postgres import PrivateDatabase

#: it empties (and restarts) the shared Redis broker: never beside another test that uses it
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("redis")]

ACCOUNT = "acct_w"
#: the claims both workers' relays hold at most (twice each worker's 4 threads)
IN_FLIGHT = 2 * 2 * 4
QUEUE = f"dramatiq:{OUTBOX_QUEUE}"
WORKER_ENV = {"TURNFRAME_TEST_OUTBOX": "claim_lease_ms=3000,poll_ms=200,send_timeout_ms=2000"}


@dataclass
class Shared:
    url: str
    conninfo: str
    broker_url: str
    runtime: TurnRuntime
    desk: PostgresTripDesk
    workers: list[subprocess.Popen[bytes]]
    log: Path

    def start_worker(self, **env: str) -> subprocess.Popen[bytes]:
        options = ("--threads", "4", "--heartbeat-timeout-ms", "2000")
        worker = start_worker(self.url, self.broker_url, self.log, {**WORKER_ENV, **env}, *options)
        self.workers.append(worker)
        return worker

    async def open_rows(self) -> int:
        return await self.runtime.stores.outbox.pending_count()

    async def drained(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if await self.open_rows() == 0:
                return True
            await asyncio.sleep(0.2)
        return False

    async def scalar(self, sql: str) -> int:
        async with await psycopg.AsyncConnection.connect(self.conninfo) as connection:
            row = await (await connection.execute(sql)).fetchone()
        assert row is not None
        return int(row[0])


@pytest.fixture
async def shared(postgres_url: str, redis_url: str, tmp_path: Path) -> AsyncIterator[Shared]:
    async with PrivateDatabase(postgres_url) as db:
        runtime = await desk_runtime(db.url)
        desk = runtime.directory
        assert isinstance(desk, PostgresTripDesk)
        connect_broker(redis_url).flush_all()
        state = Shared(
            db.url, parse_url(db.url)[1], redis_url, runtime, desk, [], tmp_path / "workers.log"
        )
        try:
            yield state
        finally:
            stop_workers(state.workers)
            await runtime.stores.aclose()
            await desk.aclose()


def _row(n: int, conversation: str, created_at: int) -> OutboxEntry:
    command_id = derive_id("cmd", "tests.outbox.command", {"n": n})
    return OutboxEntry(
        outbox_id=derive_outbox_id(ACCOUNT, command_id),
        command_id=command_id,
        destination="airline",
        payload={
            "account_id": ACCOUNT,
            "conversation_id": conversation,
            "locale": "en",
            "case_ref": {"workflow": "trip", "case_id": f"T-{n}", "expected_revision": 2},
            "command_type": "trip.confirm_rebooking",
            "payload": {"leg": "outbound"},
        },
        idempotency_key=f"key-{n}",
        created_at=created_at,
    )


async def _trips_and_rows(shared: Shared, count: int, conversations: int) -> list[OutboxEntry]:
    """`count` trips whose outbound rebooking was sent, and their outbox rows."""
    rows = []
    for n in range(count):
        conversation = f"conv_w{n % conversations}"
        await shared.desk.open_trip(
            ACCOUNT,
            f"T-{n}",
            f"Trip {n}",
            conversation,
            name="Ada Lovelace",
            email="ada@example.com",
            legs={
                "outbound": {"status": "rebooking_sent", "kept": False},
                "return": {"status": "booked", "kept": False},
            },
        )
        rows.append(_row(n, conversation, 1_700_000_000_000 + n))
    for start in range(0, count, 100):
        async with shared.runtime.stores.transaction() as tx:
            for row in rows[start : start + 100]:
                await tx.outbox.enqueue(row)
    return rows


async def _assert_exactly_once(shared: Shared, count: int) -> dict[str, int]:
    """Each key took effect once at the airline and once on its trip; every row completed;
    every conversation was told. Returns the counts."""
    # A follow-up turn a killed worker left is finished by the workers' own recovery sweep.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and await shared.scalar(
        "SELECT count(*) FROM tf_turn_phase WHERE phase <> 'delivered'"
    ):
        await asyncio.sleep(0.5)
    counts = {
        "airline keys": await shared.scalar("SELECT count(*) FROM fake_airline_request"),
        "airline requests": await shared.scalar(
            "SELECT coalesce(sum(requests), 0) FROM fake_airline_request"
        ),
        "completed rows": await shared.scalar(
            "SELECT count(*) FROM tf_outbox WHERE status = 'completed'"
        ),
        "answers applied": await shared.scalar(
            "SELECT count(*) FROM travel_applied"
            " WHERE command->>'command_type' = 'trip.record_airline_answer'"
        ),
        "rebooked events": await shared.scalar(
            "SELECT count(*) FROM tf_domain_event WHERE event_type = 'trip.rebooked'"
        ),
        "follow-up turns delivered": await shared.scalar(
            "SELECT count(*) FROM tf_turn_phase WHERE phase = 'delivered'"
        ),
    }
    print(counts)
    assert counts["airline keys"] == count
    assert counts["completed rows"] == count
    assert counts["answers applied"] == count
    assert counts["rebooked events"] == count
    assert counts["follow-up turns delivered"] == count
    for n in random.Random(7).sample(range(count), 20):
        state = await shared.desk.state(ACCOUNT, f"T-{n}")
        assert state is not None and state["legs"]["outbound"]["status"] == "rebooked"
    return counts


async def _queued_peak(broker_url: str, stop: asyncio.Event) -> int:
    """The most messages seen waiting in the outbox queue, sampled until `stop`."""
    client = redis.Redis.from_url(broker_url)
    peak = 0
    try:
        while not stop.is_set():
            peak = max(peak, int(await asyncio.to_thread(client.llen, QUEUE)))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1)
    finally:
        client.close()
    return peak


async def test_two_workers_carry_out_1000_commands_each_exactly_once(shared: Shared) -> None:
    await _trips_and_rows(shared, 1_000, 100)
    stop = asyncio.Event()
    sampling = asyncio.create_task(_queued_peak(shared.broker_url, stop))
    shared.start_worker()
    shared.start_worker()
    drained = await shared.drained(240)
    stop.set()
    peak = await sampling
    attempts = await shared.scalar("SELECT max(attempt_count) FROM tf_outbox")
    print(f"queued at most {peak} messages; the most attempts of a row: {attempts}")
    assert drained, f"{await shared.open_rows()} rows still open"
    counts = await _assert_exactly_once(shared, 1_000)
    assert counts["airline requests"] == 1_000  # nobody died: nothing was even sent twice
    # Each relay holds at most twice its 4 threads' claims: the broker never floods with
    # claims reaped (and published again) before a thread reached them. Unbounded, two starved
    # workers queued 8,000 messages for these 1,000 rows and settled none for minutes.
    assert peak <= 2 * IN_FLIGHT, f"{peak} messages queued"


async def test_workers_killed_mid_dispatch_lose_and_double_nothing(shared: Shared) -> None:
    await _trips_and_rows(shared, 1_000, 100)
    live = [shared.start_worker(), shared.start_worker()]
    kills, rng = 0, random.Random(13)
    deadline = time.monotonic() + 240
    while kills < 20 and time.monotonic() < deadline:
        await asyncio.sleep(rng.uniform(0.3, 0.8))
        victim = live.pop(rng.randrange(len(live)))
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        kills += 1
        live.append(shared.start_worker())
    assert kills >= 20
    opened_before = await shared.open_rows()
    print(f"killed {kills} workers; rows still open then: {opened_before}")
    assert opened_before > 0  # the kills came while rows were being carried out
    assert await shared.drained(240), f"{await shared.open_rows()} rows still open"
    counts = await _assert_exactly_once(shared, 1_000)
    # Every attempt a killed worker began was asked about before anything was sent again.
    assert counts["airline requests"] == 1_000


async def test_a_row_committed_after_later_rows_is_still_carried_out(shared: Shared) -> None:
    for n in range(3):
        await shared.desk.open_trip(ACCOUNT, f"T-{n}", f"Trip {n}", "conv_late")
    late, *later = [_row(n, "conv_late", 1_700_000_000_000 + n) for n in range(3)]
    inserted, commit = asyncio.Event(), asyncio.Event()

    async def late_writer() -> None:  # the oldest row, in a transaction that commits last
        async with shared.runtime.stores.transaction() as tx:
            await tx.outbox.enqueue(late)
            inserted.set()
            await commit.wait()

    writer = asyncio.create_task(late_writer())
    await inserted.wait()
    for row in later:
        await shared.runtime.stores.outbox.enqueue(row)
    shared.start_worker()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = [await shared.runtime.stores.outbox.get(r.outbox_id) for r in later]
        if all(r.status is OutboxStatus.COMPLETED for r in done):
            break
        await asyncio.sleep(0.2)
    assert all(r.status is OutboxStatus.COMPLETED for r in done)
    commit.set()
    await writer
    assert await shared.drained(60), "the late row was skipped"
    assert (await shared.runtime.stores.outbox.get(late.outbox_id)).status is (
        OutboxStatus.COMPLETED
    )


def _restart_redis(url: str) -> None:
    """Stop the local Redis (losing every queued message: it keeps no data) and start it
    again, as the machine's guide starts it."""
    host, port = "127.0.0.1", url.rsplit(":", 1)[1].split("/")[0]
    if shutil.which("redis-server") is None or "127.0.0.1" not in url:
        pytest.fail("restarting Redis needs the local redis-server on 127.0.0.1")
    subprocess.run(["redis-cli", "-h", host, "-p", port, "shutdown", "nosave"], check=False)
    time.sleep(2)
    subprocess.run(
        [
            *("redis-server", "--daemonize", "yes", "--bind", "127.0.0.1", "-::1"),
            *("--port", port, "--save", "", "--appendonly", "no"),
        ],
        check=True,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ping = subprocess.run(["redis-cli", "-h", host, "-p", port, "ping"], capture_output=True)
        if ping.stdout.strip() == b"PONG":
            return
        time.sleep(0.2)
    pytest.fail("Redis did not come back")


async def test_every_row_is_carried_out_across_a_redis_restart(shared: Shared) -> None:
    await _trips_and_rows(shared, 1_000, 100)
    shared.start_worker()
    shared.start_worker()
    while await shared.open_rows() > 700:  # well under way
        await asyncio.sleep(0.05)
    await asyncio.to_thread(_restart_redis, shared.broker_url)
    print(f"Redis restarted with {await shared.open_rows()} rows open")
    assert await shared.drained(240), f"{await shared.open_rows()} rows still open"
    counts = await _assert_exactly_once(shared, 1_000)
    assert counts["airline requests"] == 1_000


async def _told(shared: Shared, conversation_id: str) -> list[str | None]:
    """The notice and receipt codes a conversation's turns showed, in order."""
    turns = await shared.runtime.load_conversation(ACCOUNT, conversation_id)
    return [
        getattr(b, "code", None) or getattr(b, "status_code", None)
        for turn in turns
        for b in turn.blocks
        if b.kind in ("notice", "receipt")
    ]


async def test_a_silent_airline_is_reconciled_and_the_traveller_told_twice(
    shared: Shared,
) -> None:
    silent = {  # the airline acts and never answers
        "TURNFRAME_TEST_AIRLINE": "silent",
        "TURNFRAME_TEST_OUTBOX": "claim_lease_ms=3000,poll_ms=200,send_timeout_ms=300,"
        "reconcile_after_ms=1000",
    }
    await _trips_and_rows(shared, 20, 20)
    shared.start_worker(**silent)
    shared.start_worker(**silent)
    assert await shared.drained(120), f"{await shared.open_rows()} rows still open"
    assert await shared.scalar("SELECT sum(requests) FROM fake_airline_request") == 20
    told = ["turnframe.notice.verification_in_progress", "trip.rebooked"]
    for n in range(20):
        # A worker settles the row, then tells the conversation: the telling may come a moment
        # after the row is done.
        deadline = time.monotonic() + 60
        while (codes_seen := await _told(shared, f"conv_w{n}")) != told:
            if time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert codes_seen == told
