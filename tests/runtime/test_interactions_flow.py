"""Cards through the pipeline: persisted before mention, answered once, stale answers refused."""

from __future__ import annotations

from turnframe_core import InteractionStatus, codes
from turnframe_core.blocks import InteractionBlock
from turnframe_test.harness import DeskHarness
from turnframe_test.understandings import act

REBOOK = "trip.request_rebooking"


async def _card(desk: DeskHarness) -> InteractionBlock:
    turn = await desk.say(
        "Rebook the outbound flight", act("a1", REBOOK, "h1", "Rebook", leg="outbound")
    )
    return desk.card(turn)


async def test_a_card_is_persisted_before_the_turn_that_shows_it_is_returned(desk):
    desk.ready_trip()
    card = await _card(desk)
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.ACTIVE
    assert stored.view().model_dump() == {
        k: v for k, v in card.model_dump().items() if k not in ("kind", "author", "block_id")
    }


async def test_a_stale_click_is_refused_and_the_current_card_offered(desk):
    desk.ready_trip()
    card = await _card(desk)
    desk.desk.touch("acct_1", "T-100", note="a desk agent added a note")  # revision moves
    turn = await desk.click(card, "opt_rebook")
    assert "trip.rebooking_sent" not in await desk.event_types()
    assert desk.notice_codes(turn) == [codes.NOTICE_STALE_INTERACTION]
    current = desk.card(turn)
    assert current.interaction_id != card.interaction_id
    assert current.case_revision == desk.revision()
    old = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert old.status is InteractionStatus.INVALIDATED
    clicked = await desk.click(current, "opt_rebook")
    assert desk.receipt_codes(clicked) == ["trip.rebooking_sent"]


async def test_keep_my_flight_declines_and_records_the_kept_leg(desk):
    desk.ready_trip()
    card = await _card(desk)
    turn = await desk.click(card, "opt_keep")
    assert await desk.event_types() == ["trip.rebooking_requested", "trip.leg_kept"]
    assert desk.receipt_codes(turn) == ["trip.leg_kept"]
    assert codes.NOTICE_INSTRUCTION_DECLINED in desk.notice_codes(turn)
    again = await desk.say(
        "Rebook the outbound flight", act("a1", REBOOK, "h1", "Rebook", leg="outbound")
    )
    assert desk.notice_codes(again) == [codes.NOTICE_ACT_REFUSED]  # a kept leg is protected
    assert (await desk.event_types()).count("trip.rebooking_requested") == 1


async def test_an_edit_invalidates_a_card_bound_to_the_earlier_revision(desk):
    desk.ready_trip()
    card = await _card(desk)
    await desk.say(
        "My email is grace@example.com",
        act("a1", "trip.set_email", "h1", "grace@example.com", email="grace@example.com"),
    )
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.INVALIDATED


async def test_a_revision_conflict_applies_nothing_and_says_so(desk):
    desk.ready_trip()
    execute = desk.executor.execute

    async def moved_first(batch):  # another writer commits between planning and execution
        desk.desk.touch("acct_1", "T-100", note="concurrent edit")
        return await execute(batch)

    desk.executor.execute = moved_first  # type: ignore[method-assign]
    turn = await desk.say(
        "Name Grace Hopper", act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
    )
    assert await desk.events() == []
    assert desk.notice_codes(turn) == [codes.NOTICE_REVISION_CONFLICT]
    [entry] = await desk.journal(turn)
    assert entry.outcome is not None and entry.outcome.kind == "revision_conflict"


async def test_an_unknown_option_is_refused_before_anything_is_written(desk):
    import pytest

    from turnframe_core.interactions import UnknownOption

    desk.ready_trip()
    card = await _card(desk)
    turns_before = await desk.stores.conversations.list_turns("acct_1", "conv_1")
    with pytest.raises(UnknownOption):
        await desk.click(card, "opt_upgrade_to_first_class")
    assert await desk.stores.conversations.list_turns("acct_1", "conv_1") == turns_before


async def test_a_record_that_owes_nothing_ends_on_the_next_steps_it_offers(desk):
    desk.ready_trip()
    turn = await desk.say(
        "Name Grace Hopper", act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
    )
    assert [(o.operation, o.words) for o in turn.offers] == [(REBOOK, "Rebook a flight")]
    transition = next(b for b in turn.blocks if b.kind == "transition")
    assert transition.text.endswith("You could next: Rebook a flight.")


async def test_a_record_that_still_owes_something_asks_for_it_and_offers_nothing(desk):
    desk.trip()
    turn = await desk.say(
        "Name Grace Hopper", act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
    )
    assert turn.offers == ()
    transition = next(b for b in turn.blocks if b.kind == "transition")
    assert transition.text.endswith("Which email address should we use?")
