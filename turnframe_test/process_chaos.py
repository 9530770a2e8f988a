"""Real-process chaos and scale-out on PostgreSQL and Redis (DESIGN §12).

`await ProcessChaos(plan, database_url, broker_url, workdir).run()` starts `plan.runtimes` runtime
processes (`python -m turnframe_test.turn_server`) and `plan.workers` outbox workers
(`turnframe worker`) on one database and one broker, then plays `plan.turns` turns over
`plan.conversations` conversations of the shared travel desk as their users would: each user
writes or clicks, waits for the reply, and sends the same request again (the same turn id) to a
live process when the one it asked died. Clicks include double clicks (two requests at once,
each to a process picked at random) and clicks on a card that has gone stale.

While the users play, runtime processes are SIGKILLed at random moments and started again (a
start recovers what the dead one left), and so are workers. When every user is done, the run
waits for the outbox to drain and every turn to end, stops the processes, and checks the
database alone (`turnframe_test.chaos_checks`). It then checks the users' side: every turn id a
user sent is stored, nothing raised but a busy conversation, every reply a user saw reloads
equal, and the kills and dispatches the plan requires happened.

The report counts processes killed, turns, dispatches, invariant checks and violations.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import random
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from turnframe_core import (
    AssistantTurn,
    InteractionBlock,
    InteractionResponse,
    ReceiptBlock,
    TurnInput,
)
from turnframe_store import NotFound, SqlStores
from turnframe_store.sql.url import parse_url
from turnframe_test.chaos_checks import check_database, rows
from turnframe_test.sample.sayings import SAYINGS
from turnframe_test.sample.travel_pg import PostgresTripDesk

__all__ = ["PLANS", "ChaosPlan", "ChaosReport", "ProcessChaos", "check_database", "run_plan"]

ACCOUNT = "acct_chaos"
#: The turn ids the users send (`turn_<conversation>_<step>`, a double click's second `…b`);
#: every other turn is a follow-up an outbox worker wrote.
_USER_TURN = re.compile(r"turn_\d+_\d+b?")
#: Each process's share of the server's connections (100 by default): 4 runtimes of 16 and
#: 2 workers of 12 (the relay's LISTEN connection included) leave room for the run's own. A
#: conversation lock holds a connection for its turn's length, so a runtime's lock pool bounds
#: the turns it runs at once.
RUNTIME_ENV = {
    "TURNFRAME_TEST_SQL": "pool_size=4,lock_pool_size=8",
    "TURNFRAME_TEST_DESK_POOL": "3",
    "TURNFRAME_TEST_AIRLINE_POOL": "1",  # a runtime never calls the airline
}
#: Outbox timings for the workers: a short lease so a killed worker's rows come back soon.
WORKER_ENV = {
    "TURNFRAME_TEST_OUTBOX": "claim_lease_ms=3000,poll_ms=200,send_timeout_ms=2000",
    "TURNFRAME_TEST_SQL": "pool_size=3,lock_pool_size=4",
    "TURNFRAME_TEST_DESK_POOL": "2",
    "TURNFRAME_TEST_AIRLINE_POOL": "2",
}


@dataclass(frozen=True)
class ChaosPlan:
    """One run: how many processes, how many turns, and what is killed how often."""

    name: str
    runtimes: int = 1
    workers: int = 2
    conversations: int = 20
    turns: int = 200
    #: seconds a runtime lives before a SIGKILL (None: runtimes are never killed)
    runtime_life_s: tuple[float, float] | None = (0.3, 1.5)
    #: seconds a worker lives before a SIGKILL (None: workers are never killed)
    worker_life_s: tuple[float, float] | None = (1.0, 4.0)
    #: what users do: `mixed` (random sayings, clicks, double and stale clicks; `turns` in
    #: all) or `rebook` (each user rebooks both flights of their trip: two dispatches each)
    script: str = "mixed"
    #: users playing at once (None: every conversation at once)
    users_at_once: int | None = None
    #: the run must carry out at least this many dispatches (outbox rows)
    min_dispatches: int = 0
    #: workers that must have been killed at least
    min_worker_kills: int = 0
    seed: int = 18
    #: the users' play gives up (and the run fails) after this many seconds; waiting for the
    #: outbox to drain is bounded apart (180 s), and so is each process's start (120 s)
    deadline_s: float = 900.0


@dataclass
class ChaosReport:
    plan: ChaosPlan
    counts: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: how long the users played (from the first request to the last reply)
    users_seconds: float = 0.0

    def check(self, holds: bool, what: str) -> None:
        self.counts["invariant checks"] += 1
        if not holds:
            self.violations.append(what)

    @property
    def passed(self) -> bool:
        return not self.violations

    def summary(self) -> str:
        c = self.counts
        lines = [
            f"{self.plan.name}: {self.plan.runtimes} runtime and {self.plan.workers} worker "
            f"processes, {self.plan.conversations} conversations, {self.seconds:.1f} s "
            f"(users played {self.users_seconds:.1f} s: "
            f"{self.counts['user turns answered'] / max(self.users_seconds, 1e-9):.0f} turns/s)",
            f"  runtime processes killed {c['runtime kills']}, workers killed "
            f"{c['worker kills']}, requests in flight at a runtime kill "
            f"{c['requests in flight at a kill']}, worker kills with rows in hand "
            f"{c['worker kills with rows in hand']}",
            f"  user turns sent {c['user turns']}, answered {c['user turns answered']}, "
            f"ended failed {c['user turns failed']}, resent after a kill "
            f"{c['resent after a kill']}, busy and resent {c['busy and resent']}, in progress "
            f"and resent {c['in progress and resent']}",
            f"  turns stored {c['turns stored']} (follow-up turns {c['follow-up turns']}), "
            "turns a start recovered: "
            + (
                ", ".join(
                    f"{k[10:]} {v}" for k, v in sorted(c.items()) if k.startswith("recovered ")
                )
                or "none"
            ),
            f"  dispatches (outbox rows) {c['outbox rows']}, airline requests "
            f"{c['airline requests']}, receipts {c['receipts']}, cards {c['cards']}",
            f"  invariant checks {c['invariant checks']}, violations {len(self.violations)}",
        ]
        lines += [f"  VIOLATION {v}" for v in self.violations[:20]]
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {
            "plan": self.plan.name,
            "seconds": round(self.seconds, 2),
            "users_seconds": round(self.users_seconds, 2),
            "counts": dict(self.counts),
            "violations": self.violations,
        }


class _Lost(Exception):
    """The process a request went to died before it answered."""


class _Process:
    """One runtime process slot: started again in place after each kill."""

    def __init__(self, chaos: ProcessChaos, index: int) -> None:
        self.chaos = chaos
        self.index = index
        self.process: asyncio.subprocess.Process | None = None
        self.ready = asyncio.Event()
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the process and wait until it has recovered and says it is ready; a process
        that dies first (or never gets ready) fails the run."""
        self.ready.clear()
        with self.chaos.log("runtime").open("ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                *("-m", "turnframe_test.turn_server", "--db", self.chaos.database_url),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=log,
                env={**os.environ, **RUNTIME_ENV},
                limit=2**24,
            )
        self.chaos.started.append(self.process)
        reader = self._reader = asyncio.create_task(self._read(self.process))
        ready = asyncio.create_task(self.ready.wait())
        await asyncio.wait({ready, reader}, timeout=120, return_when=asyncio.FIRST_COMPLETED)
        ready.cancel()
        if not self.ready.is_set():
            raise RuntimeError(f"runtime process {self.index} did not get ready (see its log)")

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        """Answers to their requests until the process ends; then every request still in
        flight is lost. A line the kill cut short is no answer."""
        assert process.stdout is not None
        try:
            while line := await process.stdout.readline():
                if not line.endswith(b"\n"):
                    break  # torn by the kill
                message = json.loads(line)
                if message.get("ready"):
                    for outcome, count in message["recovered"].items():
                        self.chaos.report.counts[f"recovered {outcome}"] += count
                    self.ready.set()
                    continue
                future = self.pending.pop(message["id"], None)
                if future is not None and not future.done():
                    future.set_result(message)
            await process.wait()
        finally:
            self.ready.clear()
            for future in self.pending.values():
                if not future.done():
                    future.set_exception(_Lost())
            self.pending.clear()

    async def request(self, turn_input: TurnInput) -> dict[str, Any]:
        process = self.process
        if process is None or process.stdin is None or not self.ready.is_set():
            raise _Lost()
        number = self.chaos.next_id()
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[number] = future
        line = json.dumps({"id": number, "input": turn_input.model_dump(mode="json")})
        try:
            process.stdin.write(line.encode() + b"\n")
            await process.stdin.drain()
        except (ConnectionError, RuntimeError):
            self.pending.pop(number, None)
            raise _Lost() from None
        return await future

    async def kill(self) -> int:
        """SIGKILL; how many requests it had in flight."""
        process = self.process
        if process is None or process.returncode is not None:
            return 0
        in_flight = len(self.pending)
        process.send_signal(signal.SIGKILL)
        await process.wait()
        if self._reader is not None:
            await self._reader
        return in_flight

    async def stop(self) -> None:
        process = self.process
        if process is None or process.returncode is not None:
            return
        assert process.stdin is not None
        process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 60)
        except TimeoutError:
            process.kill()
            await process.wait()
        if self._reader is not None:
            await self._reader


class ProcessChaos:
    """A run of `plan` against the database and the broker (both emptied of this account's
    data by the caller: use a database of its own, e.g. `PrivateDatabase`)."""

    def __init__(self, plan: ChaosPlan, database_url: str, broker_url: str, workdir: Path) -> None:
        self.plan = plan
        self.database_url = database_url
        self.broker_url = broker_url
        self.workdir = workdir
        self.report = ChaosReport(plan)
        self.rng = random.Random(plan.seed)
        self.runtimes = [_Process(self, i) for i in range(plan.runtimes)]
        self.workers: list[asyncio.subprocess.Process] = []
        self._forwarding: set[asyncio.Task[None]] = set()
        self._play_ended: float | None = None
        #: every process this run started, killed or not (stopped at the end whatever happens)
        self.started: list[asyncio.subprocess.Process] = []
        #: every turn id a user sent, and those stored
        self.sent: set[str] = set()
        self.stored_user_turns: set[str] = set()
        self.returned: dict[str, AssistantTurn] = {}
        self.users_done = asyncio.Event()
        self._ids = 0

    def log(self, kind: str) -> Path:
        return self.workdir / f"{self.plan.name}-{kind}.log"

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    # --- the run ----------------------------------------------------------------------------

    async def run(self) -> ChaosReport:
        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        killers: list[asyncio.Task[None]] = []
        try:
            await self._open_trips()
            await asyncio.gather(*(r.start() for r in self.runtimes))
            for _ in range(self.plan.workers):
                self.workers.append(await self._start_worker())
            killers = [
                asyncio.create_task(self._kill_runtimes()),
                asyncio.create_task(self._kill_workers()),
            ]
            playing = time.monotonic()
            await self._play(killers)
            self.report.users_seconds = time.monotonic() - playing
            self.users_done.set()
            await asyncio.gather(*killers)
            await self._settled(timeout_s=180)
        finally:
            self.users_done.set()
            for killer in killers:
                killer.cancel()
            await asyncio.gather(*killers, return_exceptions=True)
            await self._stop_all()
        await check_database(self.database_url, self.report)
        await self._read_stored_turns()
        self._check_users()
        await self._check_replies()
        self.report.seconds = time.monotonic() - started
        return self.report

    async def _play(self, killers: list[asyncio.Task[None]]) -> None:
        """The users' play, bounded by the plan's deadline; a killer that fails (a process
        that did not come back) ends it at once with its error."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.plan.deadline_s
        users = asyncio.create_task(self._users())
        waiting: set[asyncio.Task[None]] = {users, *killers}
        try:
            while True:
                done, waiting = await asyncio.wait(
                    waiting, timeout=deadline - loop.time(), return_when=asyncio.FIRST_COMPLETED
                )
                if users in done:
                    users.result()
                    return
                if not done:
                    raise TimeoutError(f"the users did not finish within {self.plan.deadline_s} s")
                for killer in done:  # a killer ends early only when it has nothing to kill
                    if killer.exception() is not None:
                        raise RuntimeError("a killed process did not come back") from (
                            killer.exception()
                        )
        finally:
            if not users.done():
                users.cancel()
                await asyncio.gather(users, return_exceptions=True)

    async def _open_trips(self) -> None:
        conninfo = parse_url(self.database_url)[1]
        stores = await SqlStores.connect(self.database_url)
        await stores.migrate()
        await stores.aclose()
        desk = await PostgresTripDesk(conninfo).open()
        try:
            for n in range(self.plan.conversations):
                await desk.open_trip(
                    ACCOUNT,
                    f"T-{n}",
                    f"Trip {n}",
                    f"conv_{n}",
                    name="Ada Lovelace",
                    email="ada@example.com",
                    travel_date="2027-03-14",
                )
        finally:
            await desk.aclose()

    async def _start_worker(self, *, running: bool = True) -> asyncio.subprocess.Process:
        """Start a `turnframe worker`; with `running`, wait until it says it is running (its
        relay and actors started), and fail the run if it dies first or is not running within
        120 s. Its output goes to the run's worker log."""
        command = [str(Path(sys.executable).parent / "turnframe"), "worker"]
        command += ["--db", self.database_url, "--broker", self.broker_url, "--threads", "4"]
        command += [
            "--heartbeat-timeout-ms",
            "2000",
            "--app",
            "turnframe_test.outbox_app:desk_runtime",
        ]
        log = self.log("worker")
        with log.open("ab") as written:
            worker = await asyncio.create_subprocess_exec(
                *command,
                env={**os.environ, **WORKER_ENV},
                stdout=asyncio.subprocess.PIPE,
                stderr=written,
            )
        self.started.append(worker)
        assert worker.stdout is not None
        said = b""
        if running:
            with contextlib.suppress(TimeoutError):
                said = await asyncio.wait_for(worker.stdout.readline(), 120)
            if not said.startswith(b"turnframe worker: running"):
                raise RuntimeError("a worker process did not get running (see its log)")
        self._forwarding.add(asyncio.create_task(_forward(worker.stdout, said, log)))
        return worker

    async def _kill_runtimes(self) -> None:
        life = self.plan.runtime_life_s
        if life is None:
            return
        rng = random.Random(f"{self.plan.seed}-runtimes")
        while not self.users_done.is_set():
            await asyncio.sleep(rng.uniform(*life))
            if self.users_done.is_set():
                return
            victim = rng.choice(self.runtimes)
            in_flight = await victim.kill()
            self.report.counts["runtime kills"] += 1
            self.report.counts["requests in flight at a kill"] += in_flight
            await asyncio.shield(victim.start())  # started whole even if the run stops now

    async def _kill_workers(self) -> None:
        """A run that counts worker kills (`min_worker_kills`) kills running workers, each slot
        on its own (`_kill_slot`). Any other kills a random worker its random life after its
        start, running or not (those runs are about runtime kills; a worker's full start costs
        3 s or more of CPU here, which a run of short lives cannot pay for each kill)."""
        life = self.plan.worker_life_s
        if life is None or not self.workers:
            return
        if self.plan.min_worker_kills:
            await asyncio.gather(*(self._kill_slot(slot) for slot in range(len(self.workers))))
            return
        rng = random.Random(f"{self.plan.seed}-workers")
        while not self.users_done.is_set():
            await asyncio.sleep(rng.uniform(*life))
            if self.users_done.is_set():
                return
            slot = rng.randrange(len(self.workers))
            victim = self.workers[slot]
            if victim.returncode is None:
                victim.send_signal(signal.SIGKILL)
                await victim.wait()
                self.report.counts["worker kills"] += 1
            self.workers[slot] = await asyncio.shield(self._start_worker(running=False))

    def _killing_workers(self) -> bool:
        """While the users play, and after that until the plan's worker kills are reached
        (the rows they left are still being carried out), for at most `_KILLS_AFTER_PLAY_S`:
        each kill costs a worker's start, which on a small machine can outlast the users'
        play. A run short of its kills then says so in its checks."""
        if not self.users_done.is_set():
            return True
        if self._play_ended is None:
            self._play_ended = time.monotonic()
        late = time.monotonic() - self._play_ended > _KILLS_AFTER_PLAY_S
        return not late and self.report.counts["worker kills"] < self.plan.min_worker_kills

    async def _kill_slot(self, slot: int) -> None:
        """A running worker lives its random life and is killed, counting the rows its relay
        held at that moment. Its successor is started as the victim's life begins and is
        running before the kill, so a kill always meets a worker that relayed rows, never one
        still importing, and kills come as often as a worker can start."""
        life = self.plan.worker_life_s
        assert life is not None
        rng = random.Random(f"{self.plan.seed}-workers-{slot}")
        conninfo = parse_url(self.database_url)[1]
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as c:
            while self._killing_workers():
                successor = asyncio.create_task(self._start_worker())
                try:
                    await asyncio.sleep(rng.uniform(*life))
                    started = await asyncio.shield(successor)
                finally:  # cancelled: the successor is in `started` (stopped with the rest)
                    if not successor.done():
                        successor.cancel()
                        await asyncio.gather(successor, return_exceptions=True)
                if not self._killing_workers():
                    self.workers.append(started)  # stopped with the rest
                    return
                victim = self.workers[slot]
                if victim.returncode is None:
                    # The rows the victim's relay claimed and that are being carried out.
                    ((in_hand,),) = await rows(
                        c,
                        "SELECT count(*) FROM tf_outbox WHERE status = 'dispatching'"
                        " AND claim_worker_id LIKE %s",
                        f"%:{victim.pid}:%",
                    )
                    victim.send_signal(signal.SIGKILL)
                    await victim.wait()
                    self.report.counts["worker kills"] += 1
                    self.report.counts["worker kills with rows in hand"] += in_hand > 0
                self.workers[slot] = started

    async def _settled(self, *, timeout_s: float) -> None:
        """Wait (bounded) until no outbox row is open and every turn has ended."""
        conninfo = parse_url(self.database_url)[1]
        deadline = time.monotonic() + timeout_s
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as c:
            while time.monotonic() < deadline:
                rows = await (
                    await c.execute(
                        "SELECT (SELECT count(*) FROM tf_outbox WHERE status NOT IN"
                        " ('completed', 'failed')),"
                        " (SELECT count(*) FROM tf_turn_phase WHERE phase NOT IN"
                        " ('delivered', 'failed'))"
                    )
                ).fetchone()
                assert rows is not None
                if rows == (0, 0):
                    return
                await asyncio.sleep(0.5)
        self.report.counts["unsettled at the deadline"] += 1

    async def _stop_all(self) -> None:
        """Runtimes end when their input closes; every other process this run started (a
        worker, a runtime left behind by a failure) gets SIGTERM, then SIGKILL."""
        await asyncio.gather(*(r.stop() for r in self.runtimes), return_exceptions=True)
        for process in self.started:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
        for process in self.started:
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()
        await asyncio.gather(*self._forwarding, return_exceptions=True)  # each ends at EOF

    # --- the users --------------------------------------------------------------------------

    async def _users(self) -> None:
        share, extra = divmod(self.plan.turns, self.plan.conversations)
        at_once = asyncio.Semaphore(self.plan.users_at_once or self.plan.conversations)

        async def user(n: int) -> None:
            async with at_once:
                if self.plan.script == "rebook":
                    await self._rebooking_user(n)
                else:
                    await self._user(n, share + (1 if n < extra else 0))

        await asyncio.gather(*(user(n) for n in range(self.plan.conversations)))

    async def _rebooking_user(self, n: int) -> None:
        """Rebooks the outbound flight, then the return one: asks, then confirms on the card
        (a dispatch to the airline); asks again when the card went stale first."""
        conversation, step = f"conv_{n}", 0
        for leg in ("outbound", "return"):
            for _ in range(3):
                asked = await self._send(
                    TurnInput(
                        account_id=ACCOUNT,
                        conversation_id=conversation,
                        turn_id=f"turn_{n}_{step}",
                        text=f"Rebook the {leg} flight",
                    )
                )
                step += 1
                card = _last_card([asked] if asked is not None else [])
                if card is None:
                    continue
                sent = await self._send(_click(conversation, card, f"turn_{n}_{step}"))
                step += 1
                if sent is not None and any(
                    isinstance(b, ReceiptBlock) and b.status_code == "trip.rebooking_sent"
                    for b in sent.blocks
                ):
                    break

    async def _user(self, n: int, turns: int) -> None:
        rng = random.Random(f"{self.plan.seed}-user-{n}")
        conversation = f"conv_{n}"
        seen: list[AssistantTurn] = []
        stale: InteractionBlock | None = None
        step = 0
        while step < turns:
            turn_id = f"turn_{n}_{step}"
            card = _last_card(seen)
            kind = rng.choice(["say", "say", "click", "double", "stale"])
            if kind == "double" and card is not None and step + 1 < turns:
                replies = await asyncio.gather(
                    self._send(_click(conversation, card, turn_id)),
                    self._send(_click(conversation, card, turn_id + "b")),
                )
                seen += [r for r in replies if r is not None]
                stale, step = card, step + 2
                continue
            if kind in ("click", "double") and card is not None:
                request = _click(conversation, card, turn_id)
                stale = card
            elif kind == "stale" and stale is not None:
                request = _click(conversation, stale, turn_id)
            else:
                request = TurnInput(
                    account_id=ACCOUNT,
                    conversation_id=conversation,
                    turn_id=turn_id,
                    text=rng.choice(list(SAYINGS)),
                )
            reply = await self._send(request)
            if reply is not None:
                seen.append(reply)
            step += 1

    async def _send(self, request: TurnInput) -> AssistantTurn | None:
        """The request until it is answered: sent again to a live process when the one asked
        died, and after a short wait when its conversation was busy."""
        counts = self.report.counts
        counts["user turns"] += 1
        self.sent.add(request.turn_id or "")
        for _ in range(2_000):
            runtime = await self._live_runtime()
            try:
                reply = await runtime.request(request)
            except _Lost:
                counts["resent after a kill"] += 1
                await asyncio.sleep(0.05)
                continue
            if "turn" in reply:
                turn = AssistantTurn.model_validate(reply["turn"])
                self.returned[turn.turn_id] = turn
                counts["user turns answered"] += 1
                return turn
            kind = reply["type"]
            if kind == "TurnFailed":  # ended before any effect; a user would write again
                counts["user turns failed"] += 1
                return None
            if kind == "ConversationBusy":
                counts["busy and resent"] += 1
            elif kind == "TurnInProgress":  # unfinished, and no recovery has run on it yet
                counts["in progress and resent"] += 1
            else:
                counts[f"raised {kind}"] += 1
            await asyncio.sleep(0.05)
        self.report.check(False, f"{request.turn_id} was never answered")
        return None

    async def _live_runtime(self) -> _Process:
        while True:
            live = [r for r in self.runtimes if r.ready.is_set()]
            if live:
                return self.rng.choice(live)
            await asyncio.sleep(0.02)

    def _check_users(self) -> None:
        """The users' side and the plan's own requirements: nothing a user sent was lost;
        nothing raised but a busy conversation; with one runtime, whose start recovers before
        it answers, a retry never finds its turn in progress; without kills, no turn ended
        failed; the kills and dispatches the plan asks for happened."""
        counts, plan, check = self.report.counts, self.plan, self.report.check
        lost = self.sent - self.stored_user_turns
        check(not lost, f"{len(lost)} turns users sent were never stored, e.g. {sorted(lost)[:3]}")
        raised = {k: v for k, v in counts.items() if k.startswith("raised ")}
        check(not raised, f"turns raised {raised}")
        if plan.runtimes == 1 or plan.runtime_life_s is None:
            check(
                counts["in progress and resent"] == 0,
                f"{counts['in progress and resent']} retries found their turn still in progress",
            )
        if plan.runtime_life_s is None:
            check(counts["user turns failed"] == 0, "a turn ended failed with nothing killed")
        check(
            counts["outbox rows"] >= plan.min_dispatches,
            f"{counts['outbox rows']} dispatches, fewer than {plan.min_dispatches}",
        )
        check(
            counts["worker kills"] >= plan.min_worker_kills,
            f"{counts['worker kills']} workers killed, fewer than {plan.min_worker_kills}",
        )
        check(
            counts["worker kills with rows in hand"] >= plan.min_worker_kills // 2,
            f"only {counts['worker kills with rows in hand']} worker kills found rows in hand",
        )

    async def _check_replies(self) -> None:
        """Every reply a user saw reloads as it was shown."""
        stores = await SqlStores.connect(self.database_url)
        try:
            for turn_id, shown in self.returned.items():
                try:
                    stored = await stores.conversations.get_assistant_turn(ACCOUNT, turn_id)
                except NotFound:
                    self.report.check(False, f"{turn_id} was shown and is not stored")
                    continue
                self.report.check(stored == shown, f"{turn_id} reloads other than it was shown")
        finally:
            await stores.aclose()

    async def _read_stored_turns(self) -> None:
        """The user turns stored (by the ids users send) and the follow-up turns workers
        wrote (every other id)."""
        conninfo = parse_url(self.database_url)[1]
        async with await psycopg.AsyncConnection.connect(conninfo) as c:
            ids = [r[0] for r in await rows(c, "SELECT turn_id FROM tf_turn")]
        self.stored_user_turns = {i for i in ids if _USER_TURN.fullmatch(i)}
        self.report.counts["follow-up turns"] = len(ids) - len(self.stored_user_turns)


def _last_card(seen: Sequence[AssistantTurn]) -> InteractionBlock | None:
    for turn in reversed(seen):
        cards = [b for b in turn.blocks if isinstance(b, InteractionBlock)]
        if cards:
            return cards[0]
    return None


def _click(conversation: str, card: InteractionBlock, turn_id: str) -> TurnInput:
    return TurnInput(
        account_id=ACCOUNT,
        conversation_id=conversation,
        turn_id=turn_id,
        interaction_response=InteractionResponse(
            interaction_id=card.interaction_id,
            option_id=card.options[0].option_id,
            expected_case_revision=card.case_revision,
        ),
    )


#: The runs the release gates name (`turnframe gates`), and what each shows.
PLANS: dict[str, ChaosPlan] = {
    # One runtime SIGKILLed at random moments during 200 turns, two workers killed too.
    "chaos-runtime-kill": ChaosPlan(
        "chaos-runtime-kill", runtime_life_s=(0.02, 0.35), worker_life_s=(0.5, 2.5)
    ),
    # Two runtimes and two workers; 500 users each rebook both their flights (1,000 dispatches)
    # while workers are SIGKILLed every 0.5 to 2 s (at least 20 times).
    "chaos-worker-kill": ChaosPlan(
        "chaos-worker-kill",
        runtimes=2,
        workers=2,
        conversations=500,
        turns=0,
        script="rebook",
        users_at_once=40,
        runtime_life_s=None,
        worker_life_s=(0.5, 2.0),
        min_dispatches=1_000,
        min_worker_kills=20,
    ),
    # Four runtimes and two workers on one database and one broker; nothing killed.
    "scale-out": ChaosPlan(
        "scale-out",
        runtimes=4,
        workers=2,
        conversations=50,
        turns=1_000,
        runtime_life_s=None,
        worker_life_s=None,
    ),
}


#: how long worker kills go on after the users' play to reach a plan's `min_worker_kills`
_KILLS_AFTER_PLAY_S = 120.0


async def _forward(stream: asyncio.StreamReader, first: bytes, log: Path) -> None:
    """A worker's output, from its first line on, appended to `log` until it ends."""
    with log.open("ab") as written:
        written.write(first)
        while line := await stream.readline():
            written.write(line)
            written.flush()


async def run_plan(plan: ChaosPlan, server_url: str, broker_url: str, workdir: Path) -> ChaosReport:
    """`plan` on a database of its own on the PostgreSQL server `server_url` (dropped after)
    and the broker at `broker_url` (emptied first)."""
    from turnframe_runtime import connect_broker
    from turnframe_test.postgres import PrivateDatabase

    connect_broker(broker_url).flush_all()
    async with PrivateDatabase(server_url) as db:
        return await ProcessChaos(plan, db.url, broker_url, workdir).run()


def main() -> None:
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(prog="python -m turnframe_test.process_chaos")
    parser.add_argument("plan", choices=sorted(PLANS))
    parser.add_argument("--db", required=True, metavar="URL", help="a PostgreSQL server")
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/0", metavar="URL")
    parser.add_argument("--turns", type=int, default=None)
    parser.add_argument("--json", metavar="FILE", default=None)
    args = parser.parse_args()
    plan = PLANS[args.plan]
    if args.turns is not None:
        plan = dataclasses.replace(plan, turns=args.turns)
    workdir = Path(tempfile.mkdtemp(prefix=f"turnframe-{plan.name}-"))
    report = asyncio.run(run_plan(plan, args.db, args.broker, workdir))
    print(report.summary())
    print(f"  logs in {workdir}")
    if args.json:
        Path(args.json).write_text(json.dumps(report.as_json(), indent=2))
    raise SystemExit(0 if report.passed else 1)


if __name__ == "__main__":
    main()
