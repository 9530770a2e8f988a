"""The narrator is told what the turn did in the facts core defines: a domain's refusal in its
own words, an act that changed nothing, a card answered before. A draft may rest on them."""

from __future__ import annotations

from typing import Any

from turnframe_core import codes
from turnframe_core.facts import (
    ActChangedNothing,
    ActRefused,
    AnswerProgress,
    InteractionAlreadyAnswered,
)
from turnframe_runtime import TransitionRequest
from turnframe_test import DeskHarness, ScriptedReviewer
from turnframe_test.understandings import act

LOCKED = "This trip is locked by the travel desk."


class _Cites:
    """A narrator whose transition cites every fact of one kind it is given."""

    def __init__(self, kind: type) -> None:
        self.kind = kind
        self.requests: list[TransitionRequest] = []

    def facts(self) -> list[Any]:
        return [f for f in self.requests[-1].allowed_facts if isinstance(f, self.kind)]

    async def transition(self, request: TransitionRequest) -> dict[str, Any]:
        self.requests.append(request)
        cited = [f.model_dump(mode="json") for f in request.allowed_facts
                 if isinstance(f, self.kind)]  # fmt: skip
        return {"kind": "transition", "text": "As the facts say.", "facts_used": cited}

    async def answer(self, request: Any) -> dict[str, Any]:
        raise AssertionError("no question in these turns")


async def test_an_execution_refusal_is_told_in_the_domains_own_words(desk: DeskHarness) -> None:
    desk.ready_trip(locked=True)
    turn = await desk.say(
        "Name Grace Hopper", act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
    )
    assert await desk.events() == []
    assert desk.notice_codes(turn) == [codes.NOTICE_ACT_REFUSED]
    assert LOCKED in desk.texts(turn)
    assert "did not go through" not in desk.texts(turn)


async def test_the_narrator_gets_the_domains_refusal(make_desk) -> None:
    narrator = _Cites(ActRefused)
    desk: DeskHarness = await make_desk(
        narrator=narrator, reviewer=ScriptedReviewer.passing(), narration="free"
    )
    trip = desk.ready_trip(locked=True)
    turn = await desk.say(
        "Name Grace Hopper", act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
    )
    [fact] = narrator.facts()
    assert (fact.code, fact.explanation) == ("trip.locked", LOCKED)
    assert fact.case_ref is not None and fact.case_ref.case_id == trip.trip_id
    [transition] = [b for b in turn.blocks if b.kind == "transition"]
    assert transition.text == "As the facts say." and transition.facts_used == (fact,)


async def test_the_narrator_hears_that_an_act_changed_nothing(make_desk) -> None:
    narrator = _Cites(ActChangedNothing)
    desk: DeskHarness = await make_desk(
        narrator=narrator, reviewer=ScriptedReviewer.passing(), narration="free"
    )
    desk.ready_trip(name="Grace Hopper")
    turn = await desk.say(
        "Name Grace Hopper", act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
    )
    assert await desk.events() == []
    [fact] = narrator.facts()
    assert fact.operation == "trip.set_name" and fact.case_ref.case_id == "T-100"
    assert fact.explanation  # server copy: the case is already so
    [transition] = [b for b in turn.blocks if b.kind == "transition"]
    assert transition.facts_used == (fact,)


async def test_the_narrator_hears_that_a_card_was_answered_before(make_desk) -> None:
    narrator = _Cites(InteractionAlreadyAnswered)
    desk: DeskHarness = await make_desk(
        narrator=narrator, reviewer=ScriptedReviewer.passing(), narration="free"
    )
    desk.ready_trip()
    asked = await desk.say(
        "Rebook the outbound flight",
        act("a1", "trip.request_rebooking", "h1", "Rebook", leg="outbound"),
    )
    card = desk.card(asked)
    await desk.click(card, "opt_rebook")
    assert narrator.facts() == []  # the first answer is not "answered before"
    again = await desk.click(card, "opt_rebook")
    [fact] = narrator.facts()
    assert fact == InteractionAlreadyAnswered(
        interaction_id=card.interaction_id, option_id="opt_rebook", progress=AnswerProgress.DONE
    )
    assert desk.notice_codes(again) == [codes.NOTICE_ALREADY_ANSWERED]
