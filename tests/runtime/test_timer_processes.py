"""Timers across real processes on PostgreSQL: a `turnframe worker` SIGKILLed while it fires a
due timer (its command applied at the desk, the turn not committed) leaves the timer claimed;
another worker claims it once the lease runs out, meets the dead worker's turn and finishes it
by idempotency key: one command applied, one receipt turn, the timer fired."""

from __future__ import annotations

import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from worker_processes import start_worker, stop_workers

from turnframe_core import ServerEvent, TurnInput
from turnframe_core.replay import TurnPhase
from turnframe_runtime import TurnRuntime
from turnframe_store import TimerStatus
from turnframe_store.sql.url import parse_url
from turnframe_test.outbox_app import EVENT_ORIGIN, desk_runtime
from turnframe_test.postgres import PrivateDatabase
from turnframe_test.sample.travel_pg import PostgresTripDesk
from turnframe_test.waits import until

pytestmark = pytest.mark.slow

ACCOUNT, CONVERSATION = "acct_t", "conv_t"
RUNTIME_ENV = {"TURNFRAME_TEST_RUNTIME": "timer_lease_ms=2000,timer_poll_ms=100"}


@dataclass
class Shared:
    url: str
    runtime: TurnRuntime
    desk: PostgresTripDesk
    log: Path
    workers: list[subprocess.Popen[bytes]]

    def start_worker(self, **env: str) -> subprocess.Popen[bytes]:
        worker = start_worker(
            self.url, "stub://", self.log, {**RUNTIME_ENV, **env}, "--threads", "1"
        )
        self.workers.append(worker)
        return worker


@pytest.fixture
async def shared(
    postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Shared]:
    for name, value in RUNTIME_ENV.items():  # this process's runtime leases as the workers do
        monkeypatch.setenv(name, value)
    async with PrivateDatabase(postgres_url) as db:
        runtime = await desk_runtime(db.url)
        desk = runtime.directory
        assert isinstance(desk, PostgresTripDesk)
        state = Shared(db.url, runtime, desk, tmp_path / "workers.log", [])
        try:
            yield state
        finally:
            stop_workers(state.workers)
            await runtime.stores.aclose()
            await desk.aclose()


async def _until(check: Callable[[], Awaitable[bool]], timeout_s: float, log: Path) -> None:
    """`waits.until`, and what the workers logged when it fails."""
    try:
        await until(check, check.__name__, timeout_s=timeout_s, every_s=0.1)
    except AssertionError as failed:
        said = log.read_text(errors="replace")[-4000:]
        raise AssertionError(f"{failed}; workers said:\n{said}") from None


async def test_a_worker_killed_mid_fire_is_finished_by_another_with_one_effect(
    shared: Shared, tmp_path: Path
) -> None:
    runtime = shared.runtime
    await shared.desk.open_trip(ACCOUNT, "T-1", "Lisbon trip", CONVERSATION)
    await runtime.handle_turn(
        TurnInput(account_id=ACCOUNT, conversation_id=CONVERSATION, text="Ciao", locale="it")
    )
    event = ServerEvent(
        account_id=ACCOUNT,
        conversation_id=CONVERSATION,
        origin=EVENT_ORIGIN,
        idempotency_key="deadline-1",
        workflow="trip",
        case_id="T-1",
        operation="trip.set_travel_date",
        arguments={"travel_date": "2027-09-01"},
    )
    timer_id = await runtime.schedule_event(event, at_ms=int(time.time() * 1000))
    marker = tmp_path / "stalled"
    dying = shared.start_worker(
        TURNFRAME_TEST_STALL_AFTER="trip.set_travel_date", TURNFRAME_TEST_STALL_MARKER=str(marker)
    )

    async def stalled() -> bool:
        return marker.exists()

    await _until(stalled, 60, shared.log)
    dying.kill()  # SIGKILL: the command is applied at the desk, its turn never committed
    dying.wait(timeout=15)
    timer = await runtime.stores.timers.get(ACCOUNT, timer_id)
    assert timer.status is TimerStatus.CLAIMED
    [unfinished] = await runtime.stores.conversations.list_unfinished_turns(10)
    assert unfinished.phase is TurnPhase.EXECUTING

    shared.start_worker()

    async def fired() -> bool:
        done = await runtime.stores.timers.get(ACCOUNT, timer_id)
        return done.status is TimerStatus.FIRED

    await _until(fired, 60, shared.log)
    async with await psycopg.AsyncConnection.connect(parse_url(shared.url)[1]) as connection:
        row = await (await connection.execute("SELECT count(*) FROM travel_applied")).fetchone()
    assert row is not None and row[0] == 1  # one effect, however often it was sent
    turn = await runtime.load_turn(ACCOUNT, unfinished.turn_id)
    receipts = [b.status_code for b in turn.blocks if b.kind == "receipt"]  # type: ignore[union-attr]
    assert receipts == ["trip.travel_date_set"] and turn.locale == "it"
    assert await runtime.stores.conversations.list_unfinished_turns(10) == ()
    state = await shared.desk.state(ACCOUNT, "T-1")
    assert state is not None and state["travel_date"] == "2027-09-01"
