"""What a card answer does is decided once, from the stored action, and only the winner of the
card acts on it."""

from __future__ import annotations

import asyncio
from typing import Any

from turnframe_core import (
    ApplyOperation,
    CaseRef,
    ConfirmsAct,
    DefersAct,
    Interaction,
    InteractionBlock,
    InteractionKind,
    InteractionOption,
    InteractionPayload,
    InteractionStatus,
    MeetsRequirement,
    codes,
)
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


async def _ambiguous_naming(desk: DeskHarness):
    desk.ready_trip("T-100", "Rome trip")
    desk.ready_trip("T-200", "Oslo trip")
    name = {"name": "Grace Hopper"}
    turn = await desk.say(
        "Name Grace Hopper",
        ambiguous_act("a1", "trip.set_name", ("h1", "h2"), "Name Grace Hopper", **name),
    )
    return turn, next(o.option_id for o in desk.card(turn).options if o.label == "Oslo trip")


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
    turn, oslo = await _ambiguous_naming(desk)
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


def _withdraw() -> ApplyOperation:
    return ApplyOperation(operation=WITHDRAW)


def _block(card: Interaction) -> InteractionBlock:
    return InteractionBlock.from_view("blk_test", card.view())


async def test_an_option_refused_for_want_of_a_trusted_origin_says_so_in_server_copy(
    desk: DeskHarness,
):
    trip = desk.ready_trip()
    case = CaseRef(workflow="trip", case_id="T-100", expected_revision=trip.revision)
    payload = InteractionPayload(
        title="Cancel the trip?",
        options=(
            InteractionOption(
                option_id="opt_go", label="Go", action=ApplyOperation(operation=WITHDRAW)
            ),
        ),
    )
    card = Interaction.create(
        interaction_id="int_pick", account_id="acct_1", conversation_id="conv_1",
        case_ref=case, kind=InteractionKind.SINGLE_SELECT, payload=payload,
        created_by_turn="turn_0", created_at=1,
    )  # fmt: skip
    await desk.stores.conversations.ensure_conversation("acct_1", "conv_1")
    await desk.stores.interactions.insert(card)
    turn = await desk.click(_block(card), "opt_go")
    assert await desk.events() == []
    notices = [b for b in turn.blocks if b.kind == "notice"]
    assert [n.code for n in notices] == [codes.NOTICE_ACT_REFUSED]
    assert notices[0].text == "This needs your explicit confirmation, so it was not done."
    assert "turnframe." not in notices[0].text


async def test_a_selection_card_stored_before_typed_purposes_still_runs_its_act(
    desk: DeskHarness,
):
    card, oslo = await _ambiguous_withdrawal(desk)
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    deferred = stored.payload.purpose
    assert isinstance(deferred, DefersAct)
    legacy_payload = stored.payload.model_copy(
        update={
            "purpose": None,
            "metadata": {
                "deferred_act": deferred.act.model_dump(mode="json"),
                "constraints": [c.model_dump(mode="json") for c in deferred.constraints],
            },
        }
    )
    legacy = Interaction.create(
        interaction_id="int_legacy", account_id="acct_1", conversation_id="conv_1",
        case_ref=stored.case_ref, kind=stored.kind, payload=legacy_payload,
        created_by_turn=stored.created_by_turn, created_at=stored.created_at,
        blocking=False, revision_independent=True,
    )  # fmt: skip
    await desk.stores.interactions.insert(legacy)
    after = await desk.click(_block(legacy), oslo)
    confirm = desk.card(after)
    assert confirm.interaction_kind.value == "confirm_command"
    assert codes.NOTICE_COMMAND_FAILED not in desk.notice_codes(after)


async def test_the_loser_of_a_selection_race_records_no_decision_for_what_it_never_ran(
    desk: DeskHarness,
):
    turn, oslo = await _ambiguous_naming(desk)
    load = desk.runtime.directory.load

    async def slow_load(*args: Any) -> Any:
        await asyncio.sleep(0)
        return await load(*args)

    desk.runtime.directory.load = slow_load  # type: ignore[method-assign]
    first, second = await asyncio.gather(desk.click(turn, oslo), desk.click(turn, oslo))
    for after in (first, second):
        record = await desk.runtime.replay("acct_1", after.replay_token)
        ran = {o.command_id for o in record.command_outcomes}
        assert {d.command_id for d in record.policy_decisions} == ran
    assert (await desk.event_types()).count("trip.name_set") == 1
