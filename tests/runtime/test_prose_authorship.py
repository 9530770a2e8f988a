"""Every prose block of a turn says who wrote it, on every backend, and reads back the same."""

from __future__ import annotations

from turnframe_core import OperationalOutcome
from turnframe_test import DeskHarness, ScriptedNarrator, act, question


def _prose(turn):
    return [b for b in turn.blocks if b.kind in ("answer", "transition")]


async def test_prose_from_server_copy_says_the_server_wrote_it(desk: DeskHarness) -> None:
    desk.ready_trip()
    turn = await desk.say(
        "Name Grace Hopper, and what is my email?",
        act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper"),
        question("q1", "what is my email?", "h1"),
    )
    prose = _prose(turn)
    assert [b.kind for b in prose] == ["answer", "transition"]
    assert all(b.author == "server" and b.copy_ref is not None for b in prose)
    assert await desk.runtime.load_turn("acct_1", turn.turn_id) == turn


async def test_a_narrators_reviewed_draft_says_a_model_wrote_it(make_desk) -> None:
    narrator = ScriptedNarrator().transition_text("All set.").review_passes()
    desk: DeskHarness = await make_desk(
        narrator=narrator, reviewer=narrator.reviewer, narration="free"
    )
    desk.ready_trip()
    turn = await desk.say(
        "Name Grace Hopper", act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
    )
    [transition] = _prose(turn)
    assert (transition.author, transition.copy_ref, transition.text) == ("model", None, "All set.")
    assert await desk.runtime.load_turn("acct_1", turn.turn_id) == turn
    narrator.verify()


async def test_prose_the_guard_discards_is_replaced_by_server_written_copy(make_desk) -> None:
    forged = OperationalOutcome(
        receipt_id="rcp_forged", event_ids=("evt_forged",), status_code="trip.name_set"
    ).model_dump(mode="json")
    narrator = ScriptedNarrator()
    narrator.transition_text("Sent!", [forged]).transition_text("Sent!", [forged])
    desk: DeskHarness = await make_desk(
        narrator=narrator, reviewer=narrator.reviewer, narration="free"
    )
    desk.ready_trip()
    turn = await desk.say(
        "Name Grace Hopper", act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
    )
    [transition] = _prose(turn)
    assert transition.author == "server" and "Sent" not in transition.text
