"""Scheduled events (`schedule_event`, `fire_due_events`, `cancel_event`), on every backend: a
timer fires once when it is due and never before; two runtimes sweeping at once give one turn; a
timer whose worker died is fired after the lease with one effect; a cancelled timer never fires;
scheduling is verified and idempotent like `server_event`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from turnframe_core import ServerEvent, TurnStatus
from turnframe_core.replay import TurnPhase
from turnframe_runtime import (
    HmacOrigin,
    IdempotencyKeyReused,
    OriginNotVerified,
    RuntimeConfig,
    TrustedOrigin,
)
from turnframe_runtime.cli_worker import fire_timers
from turnframe_store import NotFound, TimerStatus
from turnframe_test import DeskHarness
from turnframe_test.domains.travel import ProcessCrash

BANK = HmacOrigin("bank", b"a shared secret of the bank")
DESK = TrustedOrigin("desk")
ACCOUNT, CONVERSATION = "acct_1", "conv_1"
LEASE_MS = 30_000


def _event(key: str = "remind-1", **fields: Any) -> ServerEvent:
    body: dict[str, Any] = {
        "account_id": ACCOUNT,
        "conversation_id": CONVERSATION,
        "origin": "desk",
        "idempotency_key": key,
        "workflow": "trip",
        "case_id": "T-100",
        "operation": "trip.set_travel_date",
        "arguments": {"travel_date": "2027-05-01"},
    }
    return ServerEvent.model_validate({**body, **fields})


@pytest.fixture
async def desk(make_desk: Any) -> DeskHarness:
    desk: DeskHarness = await make_desk(
        origins=[BANK, DESK],
        config=RuntimeConfig(locales=("en", "it", "de"), timer_lease_ms=LEASE_MS),
    )
    desk.ready_trip()
    await desk.say("Ciao", locale="it")
    return desk


async def _told(desk: DeskHarness) -> list[Any]:
    """The server turns the events became."""
    turns = await desk.stores.conversations.list_turns(ACCOUNT, CONVERSATION)
    return [t for t in turns if t.input.is_server_turn]


async def test_a_timer_fires_once_when_it_is_due_and_never_before(desk: DeskHarness) -> None:
    timer_id = await desk.runtime.schedule_event(_event(), at_ms=desk.clock() + 10_000)

    assert await desk.runtime.fire_due_events() == 0
    desk.clock.advance(9_999)
    assert await desk.runtime.fire_due_events() == 0
    assert desk.executor.applied == {} and await _told(desk) == []
    desk.clock.advance(1)
    assert await desk.runtime.fire_due_events() == 1
    desk.clock.advance(LEASE_MS * 2)
    assert await desk.runtime.fire_due_events() == 0

    [told] = await _told(desk)
    turn = await desk.runtime.load_turn(ACCOUNT, told.turn_id)
    assert desk.receipt_codes(turn) == ["trip.travel_date_set"] and turn.locale == "it"
    assert list(desk.executor.applied.values()) == [1]
    timer = await desk.stores.timers.get(ACCOUNT, timer_id)
    assert timer.status is TimerStatus.FIRED


async def test_scheduling_the_same_event_twice_is_one_timer(desk: DeskHarness) -> None:
    at = desk.clock() + 5_000
    first = await desk.runtime.schedule_event(_event(), at_ms=at)

    assert await desk.runtime.schedule_event(_event(), at_ms=at) == first
    assert len(await desk.stores.timers.for_conversation(ACCOUNT, CONVERSATION)) == 1


@pytest.mark.parametrize(
    ("fields", "later"),
    [({"arguments": {"travel_date": "2027-06-01"}}, 0), ({}, 1)],
    ids=["another-event", "another-time"],
)
async def test_the_same_key_scheduled_differently_is_refused_and_writes_nothing(
    desk: DeskHarness, fields: dict[str, Any], later: int
) -> None:
    at = desk.clock() + 5_000
    await desk.runtime.schedule_event(_event(), at_ms=at)
    before = await desk.stores.timers.for_conversation(ACCOUNT, CONVERSATION)

    with pytest.raises(IdempotencyKeyReused):
        await desk.runtime.schedule_event(_event(**fields), at_ms=at + later)

    assert await desk.stores.timers.for_conversation(ACCOUNT, CONVERSATION) == before


@pytest.mark.parametrize(
    ("fields", "signature", "refused"),
    [
        ({"origin": "bank"}, "0" * 64, OriginNotVerified),
        ({"origin": "nobody"}, None, OriginNotVerified),
        ({"case_id": "T-999"}, None, NotFound),
        ({"conversation_id": "conv_9"}, None, NotFound),
    ],
    ids=["bad-signature", "unknown-origin", "missing-case", "missing-conversation"],
)
async def test_scheduling_is_verified_as_a_server_event_is_and_a_refusal_writes_nothing(
    desk: DeskHarness, fields: dict[str, Any], signature: str | None, refused: type[Exception]
) -> None:
    with pytest.raises(refused):
        await desk.runtime.schedule_event(_event(**fields), at_ms=desk.clock(), signature=signature)

    assert await desk.stores.timers.for_conversation(ACCOUNT, CONVERSATION) == ()


async def test_a_signed_event_is_scheduled_and_fired_with_its_origins_authority(
    desk: DeskHarness,
) -> None:
    event = _event(origin="bank")
    await desk.runtime.schedule_event(
        event, at_ms=desk.clock(), signature=BANK.sign(event.signing_bytes())
    )

    assert await desk.runtime.fire_due_events() == 1

    [told] = await _told(desk)
    [entry] = await desk.journal(told.turn_id)
    assert entry.origin.kind == "external_callback"


async def test_two_runtimes_firing_at_once_give_one_turn(desk: DeskHarness) -> None:
    other = desk.another_process()
    for day in ("01", "02", "03"):
        event = _event(f"remind-{day}", arguments={"travel_date": f"2027-05-{day}"})
        await desk.runtime.schedule_event(event, at_ms=desk.clock())

    fired = await asyncio.gather(desk.runtime.fire_due_events(), other.runtime.fire_due_events())

    assert sum(fired) == 3
    assert len(await _told(desk)) == 3
    assert list(desk.executor.applied.values()) == [1, 1, 1]


async def test_a_timer_whose_worker_died_is_fired_after_the_lease_with_one_effect(
    desk: DeskHarness,
) -> None:
    timer_id = await desk.runtime.schedule_event(_event(), at_ms=desk.clock())
    desk.executor.arm_after_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):  # the worker dies with the command applied, uncommitted
        await desk.runtime.fire_due_events()
    [marker] = await desk.stores.conversations.list_unfinished_turns(10)
    assert marker.phase is TurnPhase.EXECUTING
    restarted = desk.another_process()

    assert await restarted.runtime.fire_due_events() == 0  # its lease still holds it
    desk.clock.advance(LEASE_MS)
    assert await restarted.runtime.fire_due_events() == 1

    assert list(desk.executor.applied.values()) == [1]
    assert await desk.event_types() == ["trip.travel_date_set"]
    [told] = await _told(desk)
    turn = await desk.runtime.load_turn(ACCOUNT, told.turn_id)
    assert turn.status is TurnStatus.COMPLETED
    assert desk.receipt_codes(turn) == ["trip.travel_date_set"]
    assert (await desk.stores.timers.get(ACCOUNT, timer_id)).status is TimerStatus.FIRED


async def test_a_timer_cancelled_before_it_is_due_never_fires(desk: DeskHarness) -> None:
    timer_id = await desk.runtime.schedule_event(_event(), at_ms=desk.clock() + 1_000)

    assert await desk.runtime.cancel_event(ACCOUNT, timer_id) is True
    desk.clock.advance(LEASE_MS * 3)
    assert await desk.runtime.fire_due_events() == 0

    assert desk.executor.applied == {} and await _told(desk) == []
    assert (await desk.stores.timers.get(ACCOUNT, timer_id)).status is TimerStatus.CANCELLED


async def test_a_fired_timer_cannot_be_cancelled_and_another_accounts_is_not_found(
    desk: DeskHarness,
) -> None:
    timer_id = await desk.runtime.schedule_event(_event(), at_ms=desk.clock())
    await desk.runtime.fire_due_events()

    assert await desk.runtime.cancel_event(ACCOUNT, timer_id) is False
    with pytest.raises(NotFound):
        await desk.runtime.cancel_event("acct_2", timer_id)


async def test_an_event_the_domain_refuses_when_it_is_due_ends_its_timer_and_writes_nothing(
    desk: DeskHarness,
) -> None:
    timer_id = await desk.runtime.schedule_event(
        _event(arguments={"travel_date": "not a date"}), at_ms=desk.clock()
    )

    assert await desk.runtime.fire_due_events() == 1

    assert await _told(desk) == [] and desk.executor.applied == {}
    assert (await desk.stores.timers.get(ACCOUNT, timer_id)).status is TimerStatus.FIRED


async def test_an_event_sent_before_its_timer_is_due_makes_the_timer_meet_its_turn(
    desk: DeskHarness,
) -> None:
    await desk.runtime.schedule_event(_event(), at_ms=desk.clock() + 1_000)
    sent = await desk.runtime.server_event(_event())
    desk.clock.advance(1_000)

    assert await desk.runtime.fire_due_events() == 1

    assert [t.turn_id for t in await _told(desk)] == [sent.turn_id]
    assert list(desk.executor.applied.values()) == [1]


async def test_the_worker_loop_fires_due_timers_until_it_is_stopped(desk: DeskHarness) -> None:
    await desk.runtime.schedule_event(_event(), at_ms=desk.clock())
    stop = asyncio.Event()

    looping = asyncio.create_task(fire_timers(desk.runtime, stop))
    for _ in range(500):
        if await _told(desk):
            break
        await asyncio.sleep(0.01)
    stop.set()
    await asyncio.wait_for(looping, 10)

    assert len(await _told(desk)) == 1


async def test_a_turn_still_moving_when_its_timer_is_claimed_again_waits_for_the_next_lease(
    desk: DeskHarness,
) -> None:
    timer_id = await desk.runtime.schedule_event(_event(), at_ms=desk.clock())
    desk.executor.arm_after_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):
        await desk.runtime.fire_due_events()
    [marker] = await desk.stores.conversations.list_unfinished_turns(10)
    desk.clock.advance(LEASE_MS - 1_000)
    # the first worker is alive after all: its turn's marker moves
    await desk.stores.conversations.set_phase(ACCOUNT, marker.turn_id, TurnPhase.COMMITTED)
    desk.clock.advance(1_000)
    other = desk.another_process()

    assert await other.runtime.fire_due_events() == 0  # claimed again, its turn left alone
    assert await desk.stores.conversations.list_unfinished_turns(10) != ()
    desk.clock.advance(LEASE_MS)
    assert await other.runtime.fire_due_events() == 1

    assert list(desk.executor.applied.values()) == [1]
    assert (await desk.stores.timers.get(ACCOUNT, timer_id)).status is TimerStatus.FIRED
