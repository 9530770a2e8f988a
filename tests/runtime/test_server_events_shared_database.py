"""Two runtimes on one SQL database, each with stores (and conversation locks) of its own, as two
processes have: timers swept by both at once fire once each; the same event sent to both at once
is one turn and one effect (the other meets the turn, or is told it is in progress); the same
event sent to the second while the first runs it is in progress there, never finished twice."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest
from services import Database

from turnframe_core import ServerEvent
from turnframe_runtime import ConversationBusy, TrustedOrigin, TurnInProgress
from turnframe_store import ManualClock
from turnframe_test import DeskHarness

ACCOUNT, CONVERSATION = "acct_1", "conv_1"
DESK = TrustedOrigin("desk")


def _event(day: str) -> ServerEvent:
    return ServerEvent(
        account_id=ACCOUNT,
        conversation_id=CONVERSATION,
        origin="desk",
        idempotency_key=f"remind-{day}",
        workflow="trip",
        case_id="T-100",
        operation="trip.set_travel_date",
        arguments={"travel_date": f"2027-05-{day}"},
    )


@pytest.fixture
async def pair(database: Database) -> AsyncIterator[tuple[DeskHarness, DeskHarness]]:
    """Two runtimes on one database (one travel desk), and a conversation with a trip."""
    clock = ManualClock()
    first = DeskHarness(stores=await database.migrated(clock=clock), clock=clock, origins=[DESK])
    second = DeskHarness(stores=await database.stores(clock=clock), clock=clock, origins=[DESK])
    second.desk, second.directory, second.executor = first.desk, first.directory, first.executor
    second.restart()
    first.ready_trip()
    await first.say("Hello")
    try:
        yield first, second
    finally:
        await first.stores.aclose()
        await second.stores.aclose()


async def _server_turns(desk: DeskHarness) -> list[Any]:
    turns = await desk.stores.conversations.list_turns(ACCOUNT, CONVERSATION)
    return [t for t in turns if t.input.is_server_turn]


async def test_timers_swept_by_two_runtimes_at_once_fire_once_each(
    pair: tuple[DeskHarness, DeskHarness],
) -> None:
    first, second = pair
    days = ("01", "02", "03", "04", "05")
    for day in days:
        await first.runtime.schedule_event(_event(day), at_ms=first.clock())

    fired = await asyncio.gather(first.runtime.fire_due_events(), second.runtime.fire_due_events())

    assert sum(fired) == len(days)
    assert len(await _server_turns(first)) == len(days)
    assert sorted(first.executor.applied.values()) == [1] * len(days)


async def test_one_event_sent_to_two_runtimes_at_once_is_one_turn_and_one_effect(
    pair: tuple[DeskHarness, DeskHarness],
) -> None:
    first, second = pair
    event = _event("01")

    answers = await asyncio.gather(
        first.runtime.server_event(event),
        second.runtime.server_event(event),
        return_exceptions=True,
    )

    turns = [a for a in answers if not isinstance(a, BaseException)]
    assert turns, answers
    assert all(isinstance(a, TurnInProgress) for a in answers if isinstance(a, BaseException))
    assert len({t.turn_id for t in turns}) == 1
    assert list(first.executor.applied.values()) == [1]
    [told] = await _server_turns(first)
    assert await second.runtime.server_event(event) == await first.runtime.load_turn(
        ACCOUNT, told.turn_id
    )


async def test_an_event_sent_again_to_another_runtime_while_the_first_runs_it_is_in_progress(
    pair: tuple[DeskHarness, DeskHarness], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second runtime cannot see the first's conversation lock on SQLite (on PostgreSQL it
    waits for it, here briefly): the turn's marker is younger than a lease, so it is not
    finished a second time beside the first."""
    first, second = pair
    second.config = dataclasses.replace(second.config, conversation_wait_ms=200)
    second.restart()
    event = _event("01")
    held, release = asyncio.Event(), asyncio.Event()
    execute = first.executor.execute

    async def held_once(batch: Any) -> Any:
        if not held.is_set():
            held.set()
            await release.wait()
        return await execute(batch)

    monkeypatch.setattr(first.executor, "execute", held_once)
    running = asyncio.ensure_future(first.runtime.server_event(event))
    await asyncio.wait_for(held.wait(), 15)
    try:
        with pytest.raises((TurnInProgress, ConversationBusy)):
            await second.runtime.server_event(event)
        [marker] = await second.stores.conversations.list_unfinished_turns(10)
        untouched = first.executor.applied.copy()
    finally:
        release.set()
    turn = await running

    assert not marker.phase.is_terminal and not untouched
    assert list(first.executor.applied.values()) == [1]
    assert await second.runtime.server_event(event) == turn
