"""What each durable point of a turn leaves behind (decision 0006), on every store backend."""

from __future__ import annotations

from typing import Any

import pytest

from turnframe_core import (
    CaseRef,
    Interaction,
    InteractionBlock,
    InteractionKind,
    InteractionOption,
    InteractionPayload,
    InteractionStatus,
    ResolveClarification,
    TurnPhase,
)
from turnframe_store import FaultPoint, JournalStatus, NotFound, Unavailable
from turnframe_test import DeskHarness, act

REBOOK = "trip.request_rebooking"


async def test_the_journal_is_committed_before_the_executor_runs(desk: DeskHarness) -> None:
    desk.ready_trip()
    seen: list[tuple[JournalStatus, TurnPhase]] = []
    execute = desk.executor.execute

    async def watching(batch: Any) -> Any:
        for envelope in batch.envelopes:  # read through the stores, outside the turn
            entry = await desk.stores.journal.get("acct_1", envelope.command_id)
            marker = await desk.stores.conversations.get_phase("acct_1", envelope.turn_id)
            seen.append((entry.status, marker.phase))
        return await execute(batch)

    desk.executor.execute = watching  # type: ignore[method-assign]
    await desk.say("Name Grace Hopper", act("a1", "trip.set_name", "h1", "G", name="Grace Hopper"))
    assert seen == [(JournalStatus.EXECUTING, TurnPhase.EXECUTING)]


async def test_a_delivery_that_fails_leaves_the_commit_and_a_record_that_says_so(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    desk.stores.faults.arm(FaultPoint.BEFORE_RESPONSE_PERSISTENCE, error=Unavailable("down"))
    with pytest.raises(Unavailable):
        await desk.say("Name Ada Byron", act("a1", "trip.set_name", "h1", "Ada", name="Ada Byron"))
    [marker] = await desk.stores.conversations.list_unfinished_turns(10)
    assert marker.phase is TurnPhase.COMMITTED
    record = await desk.stores.replay.get("acct_1", marker.turn_id)
    assert record.phase is TurnPhase.COMMITTED
    assert [o.command_type for o in record.command_outcomes] == ["trip.set_name"]
    assert await desk.event_types() == ["trip.name_set"]
    with pytest.raises(NotFound):
        await desk.stores.conversations.get_assistant_turn("acct_1", marker.turn_id)


async def test_a_card_claimed_to_resolve_marks_the_turn_executing(desk: DeskHarness) -> None:
    """A claimed card is an effect recovery must finish, even when no command runs."""
    trip = desk.ready_trip()
    case = CaseRef(workflow="trip", case_id="T-100", expected_revision=trip.revision)
    payload = InteractionPayload(
        title="Which seat?",
        options=(
            InteractionOption(
                option_id="opt_window", label="Window", action=ResolveClarification(answer_key="w")
            ),
        ),
    )
    card = Interaction.create(
        interaction_id="int_seat", account_id="acct_1", conversation_id="conv_1",
        case_ref=case, kind=InteractionKind.SINGLE_SELECT, payload=payload,
        created_by_turn="turn_0", created_at=1, blocking=False,
    )  # fmt: skip
    await desk.stores.conversations.ensure_conversation("acct_1", "conv_1")
    await desk.stores.interactions.insert(card)
    load = desk.runtime.directory.load
    calls = 0

    async def down_after_the_click(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls > 1:  # the refresh after the start fails: the turn stops there
            raise RuntimeError("the domain is down")
        return await load(*args)

    desk.runtime.directory.load = down_after_the_click  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        await desk.click(InteractionBlock.from_view("blk_x", card.view()), "opt_window")
    [marker] = await desk.stores.conversations.list_unfinished_turns(10)
    assert marker.phase is TurnPhase.EXECUTING
    stored = await desk.stores.interactions.get("acct_1", "int_seat")
    assert stored.status is InteractionStatus.RESOLVING
