"""The relay: due outbox rows claimed by status and handed to the dispatch actor.

Rules (DESIGN §7):
- Rows are claimed by status (pending and due), never after a "last id seen" cursor, so a row
  whose transaction commits after later rows is claimed as soon as it is visible.
- A claim is recorded before its message leaves; a message the broker refuses hands its claim
  back (not counted as an attempt). A relay that dies between the two leaves a claim the
  reaper returns to pending once its lease ran out.
- Unknown outcomes due for reconciliation are leased and handed to the reconcile actor.
- A relay holds at most `max_in_flight` claims (rows dispatching under its claim): a claim's
  lease runs while its message waits in the broker, so claiming more than the workers can
  start within a lease only has claims reaped and published again, and the broker floods with
  stale messages that starve the live ones.
- Between rounds the relay waits for the store's wakeup (PostgreSQL: LISTEN/NOTIFY on insert)
  or at most `poll_ms`; a relay at its bound waits instead for `settled()` (an attempt of this
  process ended) or at most `poll_ms`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from turnframe_runtime import observe
from turnframe_runtime.config import OutboxConfig
from turnframe_store.bundle import OutboxWakeups, Stores
from turnframe_store.records import OutboxEntry

__all__ = ["Relay", "RelayRound", "relay_worker_id"]

_log = logging.getLogger("turnframe_runtime.outbox")

#: hands claimed rows to an actor, in order; for each, whether the broker took it (a row after
#: a refusal is not tried: the broker is away)
Publish = Callable[[Sequence[OutboxEntry]], Awaitable[Sequence[bool]]]


def relay_worker_id() -> str:
    """This relay's name on its claims: host, process and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class RelayRound:
    """What one round did."""

    published: int = 0
    handed_back: int = 0
    reaped: int = 0
    reconciling: int = 0
    #: the relay held `max_in_flight` claims when the round ended (it claims more once some
    #: settle)
    full: bool = False


class Relay:
    """Claims due rows and publishes them; reaps dead claims; leases reconciliations."""

    def __init__(
        self,
        stores: Stores,
        publish: Publish,
        reconcile: Publish,
        *,
        config: OutboxConfig | None = None,
        clock: Callable[[], int],
        worker_id: str | None = None,
        max_in_flight: int | None = None,
    ) -> None:
        self._stores = stores
        self._publish = publish
        self._reconcile = reconcile
        self.config = config or OutboxConfig()
        self._clock = clock
        self.worker_id = worker_id or relay_worker_id()
        #: None: unbounded (a relay driven round by round, as tests do)
        self.max_in_flight = self.config.max_in_flight if max_in_flight is None else max_in_flight
        if self.max_in_flight is not None and self.max_in_flight < 1:
            raise ValueError("a relay's max_in_flight is at least 1")
        self._last_reap = 0
        self._settled = asyncio.Event()

    def settled(self) -> None:
        """An attempt ended in this process: a relay at its bound may claim again. Call on the
        relay's event loop (`loop.call_soon_threadsafe(relay.settled)` from another thread)."""
        self._settled.set()

    async def _room(self) -> int:
        """How many rows this round may still claim (`batch_size` at most)."""
        if self.max_in_flight is None:
            return self.config.batch_size
        held = await self._stores.outbox.claimed_count(self.worker_id)
        return max(0, min(self.config.batch_size, self.max_in_flight - held))

    async def round(self) -> RelayRound:
        """Claim and publish every due row (in batches), reap when a reap is due, and lease the
        reconciliations due."""
        published = handed_back = reaped = reconciling = 0
        full = False
        now = self._clock()
        if now - self._last_reap >= self.config.claim_lease_ms // 4:
            reaped = await self._stores.outbox.release_expired_claims(
                now - self.config.claim_lease_ms
            )
            self._last_reap = now
        self._settled.clear()  # what settles from here on is seen by the next count
        while True:
            room = await self._room()
            if room == 0:
                full = True
                break
            rows = await self._stores.outbox.claim_due(self._clock(), room, self.worker_id)
            taken = list(await self._publish(rows)) if rows else []
            taken += [False] * (len(rows) - len(taken))
            for row, sent in zip(rows, taken, strict=True):
                if sent:
                    published += 1
                    continue
                handed_back += 1
                with contextlib.suppress(Exception):
                    await self._stores.outbox.unclaim(row.outbox_id, self.worker_id)
            if handed_back or len(rows) < room:
                break
        now = self._clock()
        due = await self._stores.outbox.claim_reconciliations(
            now, self.config.batch_size, now + self.config.reconcile_after_ms
        )
        if due:
            reconciling = sum(1 for sent in await self._reconcile(due) if sent)
        return RelayRound(published, handed_back, reaped, reconciling, full)

    async def run(self, stop: asyncio.Event) -> None:
        """Rounds until `stop` is set. A round that fails (the database away) is logged and
        tried again after one poll interval."""
        async with self._stores.outbox_wakeups() as wakeups:
            while not stop.is_set():
                try:
                    done = await self.round()
                    if done.handed_back:
                        observe.event(_log, "outbox.broker_refused", logging.WARNING,
                                      rows=done.handed_back)  # fmt: skip
                except Exception as failure:
                    observe.failure(_log, "outbox.relay_round_failed", failure)
                    done = RelayRound()
                if stop.is_set():
                    break
                if done.full:  # new rows cannot be claimed now: wait for room (or the stop)
                    await _first(self._settled, stop, self.config.poll_ms / 1000)
                    continue
                if done.published >= self.config.batch_size:
                    continue  # more may be due at once
                # Not cancelled midway (a LISTEN connection is left clean): the wait is taken in
                # slices of at most `_STOP_SLICE_S`, so a stop waits at most one slice, however
                # long the poll interval (a test's may outlast it).
                await _wait_for_rows(wakeups, stop, self.config.poll_ms / 1000)


#: The longest a relay's wait for new rows goes without looking at its stop.
_STOP_SLICE_S = 1.0


async def _wait_for_rows(wakeups: OutboxWakeups, stop: asyncio.Event, timeout_s: float) -> None:
    """Wait for the store's word that rows committed, `timeout_s` at most, or for `stop`
    (looked at between slices of at most `_STOP_SLICE_S`)."""
    left = timeout_s
    while left > 0 and not stop.is_set():
        step = min(left, _STOP_SLICE_S)
        if await wakeups.wait(step):
            return
        left -= step


async def _first(one: asyncio.Event, other: asyncio.Event, timeout_s: float) -> None:
    """Wait until either event is set, or `timeout_s` passed."""
    waits = {asyncio.ensure_future(one.wait()), asyncio.ensure_future(other.wait())}
    try:
        await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
