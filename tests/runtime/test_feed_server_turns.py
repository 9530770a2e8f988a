"""Server turns reach a conversation's feed (issue 30, item 3: "Both reach the feed"): the
receipt turn of an outside event sent to this runtime wakes a follower at once, and the receipt
turn of a timer fired by a worker elsewhere (another runtime on the same stores) reaches it by
polling; in both cases the item is the stored turn, byte for byte, after the turns before it."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from turnframe_core import ServerEvent
from turnframe_runtime import FeedItem, HmacOrigin, RuntimeConfig, TrustedOrigin
from turnframe_test import DeskHarness

BANK = HmacOrigin("bank", b"a shared secret of the bank")
DESK = TrustedOrigin("desk")
#: long enough that only a wake-up delivers within a test's wait
NEVER_POLL = RuntimeConfig(
    locales=("en", "it", "de"), stream_poll_ms=600_000, stream_poll_max_ms=600_000
)
WAIT = 15


def _event(desk: DeskHarness, origin: str, key: str) -> ServerEvent:
    return ServerEvent.model_validate(
        {
            "account_id": desk.account_id,
            "conversation_id": desk.conversation_id,
            "origin": origin,
            "idempotency_key": key,
            "workflow": "trip",
            "case_id": "T-100",
            "operation": "trip.set_travel_date",
            "arguments": {"travel_date": "2027-05-01"},
        }
    )


async def _next(feed: Any) -> FeedItem:
    item: FeedItem = await asyncio.wait_for(anext(feed), WAIT)
    return item


async def test_a_verified_events_receipt_turn_wakes_a_follower_at_once(make_desk: Any) -> None:
    desk: DeskHarness = await make_desk(origins=[BANK, DESK], config=NEVER_POLL)
    desk.ready_trip()
    said = await desk.say("Ciao", locale="it")
    feed = desk.runtime.follow_conversation(desk.account_id, desk.conversation_id)
    try:
        first = await _next(feed)
        waiting = asyncio.ensure_future(_next(feed))  # caught up: only a wake-up delivers
        event = _event(desk, "bank", "refill-ready-1")
        turn = await desk.runtime.server_event(event, signature=BANK.sign(event.signing_bytes()))
        item = await waiting
    finally:
        await feed.aclose()

    assert first.turn.turn_id == said.turn_id
    assert (item.sequence, item.turn.turn_id) == (first.sequence + 1, turn.turn_id)
    assert item.turn.to_stored_json() == turn.to_stored_json()
    assert desk.receipt_codes(item.turn) == ["trip.travel_date_set"]
    assert item.turn.locale == "it"  # the conversation's locale, not the sender's


async def test_a_timer_fired_by_a_worker_elsewhere_reaches_a_follower_by_polling(
    make_desk: Any,
) -> None:
    quick = dataclasses.replace(NEVER_POLL, stream_poll_ms=5, stream_poll_max_ms=20)
    desk: DeskHarness = await make_desk(origins=[BANK, DESK], config=quick)
    desk.ready_trip()
    await desk.say("Hello")
    # the worker: another runtime (its own hub, so no in-process wake-up) on the same stores
    worker = desk.another_process()
    timer_id = await desk.runtime.schedule_event(
        _event(desk, "desk", "deadline-1"), at_ms=desk.clock() + 60_000
    )
    feed = desk.runtime.follow_conversation(desk.account_id, desk.conversation_id)
    try:
        first = await _next(feed)
        waiting = asyncio.ensure_future(_next(feed))
        desk.clock.advance(60_000)
        assert await worker.runtime.fire_due_events() == 1
        item = await waiting
    finally:
        await feed.aclose()

    assert item.sequence == first.sequence + 1 and item.turn.turn_id != first.turn.turn_id
    assert desk.receipt_codes(item.turn) == ["trip.travel_date_set"]
    stored = await desk.runtime.load_turn(desk.account_id, item.turn.turn_id)
    assert item.turn.to_stored_json() == stored.to_stored_json()
    assert (await desk.stores.timers.get(desk.account_id, timer_id)).status.value == "fired"
