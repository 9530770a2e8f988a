"""What a card answer does is decided once, from the stored action, and only the winner of the
card acts on it."""

from __future__ import annotations

import asyncio
from typing import Any

from turnframe_core import InteractionStatus, codes
from turnframe_core.interactions import ConfirmsAct, DefersAct, MeetsRequirement
from turnframe_test.harness import DeskHarness
from turnframe_test.understandings import act, ambiguous_act

WITHDRAW = "trip.withdraw"


async def _ambiguous_withdrawal(desk: DeskHarness):
    desk.ready_trip("T-100", "Rome trip")
    desk.ready_trip("T-200", "Oslo trip")
    turn = await desk.say(
        "Cancel my trip", ambiguous_act("a1", WITHDRAW, ("h1", "h2"), "Cancel my trip")
    )
    card = desk.card(turn)
    oslo = next(o.option_id for o in card.options if o.label == "Oslo trip")
    return card, oslo


async def test_the_loser_of_a_selection_race_raises_no_card_of_its_own(desk: DeskHarness):
    card, oslo = await _ambiguous_withdrawal(desk)
    load = desk.runtime.directory.load

    async def slow_load(*args: Any) -> Any:  # both clicks pass admission before either claims
        await asyncio.sleep(0)
        return await load(*args)

    desk.runtime.directory.load = slow_load  # type: ignore[method-assign]
    first, second = await asyncio.gather(desk.click(card, oslo), desk.click(card, oslo))
    shown = [t for t in (first, second) if "interaction" in desk.kinds(t)]
    lost = [t for t in (first, second) if codes.NOTICE_ALREADY_ANSWERED in desk.notice_codes(t)]
    assert len(shown) == 1 and len(lost) == 1
    open_cards = [
        c
        for c in await desk.stores.interactions.open_for_conversation("acct_1", "conv_1")
        if c.case_ref.case_id == "T-200"
    ]
    assert [c.interaction_id for c in open_cards] == [desk.card(shown[0]).interaction_id]
    assert [c.created_by_turn for c in open_cards] == [shown[0].turn_id]


async def test_a_selection_records_the_policy_decision_of_every_command_it_runs(desk: DeskHarness):
    desk.ready_trip("T-100", "Rome trip")
    desk.ready_trip("T-200", "Oslo trip")
    turn = await desk.say(
        "Name Grace Hopper",
        ambiguous_act(
            "a1", "trip.set_name", ("h1", "h2"), "Name Grace Hopper", name="Grace Hopper"
        ),
    )
    oslo = next(o.option_id for o in desk.card(turn).options if o.label == "Oslo trip")
    after = await desk.click(turn, oslo)
    assert desk.receipt_codes(after) == ["trip.name_set"]
    record = await desk.runtime.replay("acct_1", after.replay_token)
    ran = {o.command_id for o in record.command_outcomes}
    decided = {d.command_id for d in record.policy_decisions if d.allowed}
    assert ran and ran <= decided


async def test_every_card_the_runtime_raises_says_why_in_a_typed_purpose(desk: DeskHarness):
    card, oslo = await _ambiguous_withdrawal(desk)
    selection = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert isinstance(selection.payload.purpose, DefersAct)
    assert selection.payload.purpose.act.operation == WITHDRAW
    confirm = desk.card(await desk.click(card, oslo))
    stored = await desk.stores.interactions.get("acct_1", confirm.interaction_id)
    assert isinstance(stored.payload.purpose, ConfirmsAct)
    assert stored.status is InteractionStatus.ACTIVE


async def test_a_follow_up_card_names_the_requirement_it_meets(desk: DeskHarness):
    desk.ready_trip()
    turn = await desk.say(
        "Rebook the outbound flight",
        act("a1", "trip.request_rebooking", "h1", "Rebook", leg="outbound"),
    )
    stored = await desk.stores.interactions.get("acct_1", desk.card(turn).interaction_id)
    assert isinstance(stored.payload.purpose, MeetsRequirement)
