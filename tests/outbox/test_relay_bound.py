"""A relay holds at most `max_in_flight` claims, and one at its bound claims again as soon as an
attempt of its process ends. A claim's lease runs while its message waits in the broker: a relay
that claimed every due row had most of them reaped and published again before a worker thread
reached them, and under load the broker filled with stale messages that starved the live ones
(1,000 rows on two starved workers: 8,000 queued messages, rows at their 39th attempt, none
settled for minutes)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from turnframe_runtime import OutboxConfig, OutboxWorker, Relay, connect_broker
from turnframe_store import MemoryStores, OutboxEntry, OutboxStatus
from turnframe_store import builders as build
from turnframe_store.builders import T0
from turnframe_test import DeskHarness, act


class _Broker:
    """What the relay published, and an event set at each publication."""

    def __init__(self) -> None:
        self.rows: list[OutboxEntry] = []
        self.published = asyncio.Event()

    async def publish(self, rows: Sequence[OutboxEntry]) -> list[bool]:
        self.rows.extend(rows)
        self.published.set()
        return [True] * len(rows)


async def _rows(stores: MemoryStores, count: int) -> None:
    for n in range(count):
        await stores.outbox.enqueue(build.outbox_row(f"obx_{n}", created_at=T0 + n))


def _relay(stores: MemoryStores, broker: _Broker, bound: int | None, **config: Any) -> Relay:
    return Relay(
        stores,
        broker.publish,
        broker.publish,
        config=OutboxConfig(**config),
        clock=lambda: T0 + 100,
        worker_id="relay-1",
        max_in_flight=bound,
    )


async def test_a_relay_claims_no_more_than_its_bound_until_claims_settle() -> None:
    stores = MemoryStores()
    await _rows(stores, 10)
    broker = _Broker()
    relay = _relay(stores, broker, 3, batch_size=2)
    first = await relay.round()
    assert (first.published, first.full) == (3, True)
    assert [r.outbox_id for r in broker.rows] == ["obx_0", "obx_1", "obx_2"]
    assert (await relay.round()).published == 0  # nothing settled: no room
    await stores.outbox.mark_completed("obx_0", 1)
    await stores.outbox.mark_outcome_unknown("obx_1", attempt=1)
    again = await relay.round()
    assert (again.published, again.full) == (2, True)
    assert await stores.outbox.claimed_count("relay-1") == 3
    assert await stores.outbox.pending_count() == 10 - 1  # obx_1 is open (unknown)


async def test_another_relays_claims_leave_this_ones_room_alone() -> None:
    stores = MemoryStores()
    await _rows(stores, 6)
    await stores.outbox.claim_due(T0 + 100, 3, "relay-2")
    broker = _Broker()
    done = await _relay(stores, broker, 2).round()
    assert (done.published, done.full) == (2, True)
    assert [r.outbox_id for r in broker.rows] == ["obx_3", "obx_4"]


async def test_an_unbounded_relay_claims_every_due_row() -> None:
    stores = MemoryStores()
    await _rows(stores, 7)
    broker = _Broker()
    done = await _relay(stores, broker, None, batch_size=3).round()
    assert (done.published, done.full) == (7, False)


async def test_a_relay_at_its_bound_claims_again_when_told_an_attempt_settled() -> None:
    stores = MemoryStores()
    await _rows(stores, 2)
    broker = _Broker()
    relay = _relay(stores, broker, 1, poll_ms=600_000)  # no poll within the test's time
    stop = asyncio.Event()
    running = asyncio.create_task(relay.run(stop))
    try:
        await asyncio.wait_for(broker.published.wait(), 10)
        broker.published.clear()
        assert [r.outbox_id for r in broker.rows] == ["obx_0"]
        await stores.outbox.mark_completed("obx_0", 1)
        relay.settled()
        await asyncio.wait_for(broker.published.wait(), 10)
        assert [r.outbox_id for r in broker.rows] == ["obx_0", "obx_1"]
        assert (await relay.round()).full  # obx_1 is held: the relay waits for room...
    finally:
        stop.set()  # ...or its stop, whichever comes first
        await asyncio.wait_for(running, 10)


async def test_a_worker_at_its_bound_is_refilled_by_its_own_actors(make_desk: Any) -> None:
    """Two rows, one claim at a time, a poll no test waits for: only the actors' word that an
    attempt ended lets the relay claim the second row."""
    desk: DeskHarness = await make_desk(outbox=OutboxConfig(poll_ms=600_000, max_in_flight=1))
    desk.ready_trip()
    commands = []
    for leg in ("outbound", "return"):
        said = f"Rebook the {leg}"
        asked = await desk.say(said, act("a1", "trip.request_rebooking", "h1", said, leg=leg))
        sent = await desk.click(desk.card(asked), "opt_rebook")
        commands.append((await desk.journal(sent))[-1].command_id)
    assert await desk.stores.outbox.pending_count() == 2
    worker = OutboxWorker(desk.runtime, connect_broker("stub://"), threads=2)
    assert worker.relay().max_in_flight == 1  # the config's bound, over twice the threads
    await worker.start()
    try:
        assert await worker.drain(60)
    finally:
        await worker.stop()
    for command_id in commands:
        (row,) = await desk.stores.outbox.list_for_command(command_id)
        assert (row.status, row.attempt_count) == (OutboxStatus.COMPLETED, 1)


async def test_a_workers_relay_holds_twice_its_threads_unless_told(make_desk: Any) -> None:
    desk: DeskHarness = await make_desk()
    broker = connect_broker("stub://")
    assert OutboxWorker(desk.runtime, broker, threads=3).relay().max_in_flight == 6
    relay_only = OutboxWorker(desk.runtime, connect_broker("stub://"), consume=False)
    assert relay_only.relay().max_in_flight == OutboxConfig().batch_size


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_in_flight"):
        _relay(MemoryStores(), _Broker(), 0)
    with pytest.raises(ValueError, match="max_in_flight"):
        OutboxConfig(max_in_flight=0)


async def test_a_relay_waiting_for_new_rows_stops_without_waiting_out_a_long_poll() -> None:
    """Nothing due and not at its bound, the relay waits for rows to commit; its stop ends the
    wait within a slice of it, not after the poll interval (600 s here)."""
    stores = MemoryStores()
    broker = _Broker()
    relay = _relay(stores, broker, 1, poll_ms=600_000)
    stop = asyncio.Event()
    running = asyncio.create_task(relay.run(stop))
    assert not (await relay.round()).full  # nothing claimed: it waits for rows, not for room
    await asyncio.sleep(0.05)  # let the relay reach its wait (not an ordering: any point works)

    stop.set()

    await asyncio.wait_for(running, 5)  # at most one slice (1 s) late
