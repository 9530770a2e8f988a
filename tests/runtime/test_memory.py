"""Conversation memory: what earlier replies asked, offered and showed reaches the brief as typed,
bounded context, and what a model makes of it is a proposal the usual reduction judges."""

from __future__ import annotations

from collections.abc import Callable

from turnframe_core import Brief, TurnInput, Understanding, codes
from turnframe_core.canonical import canonical_json
from turnframe_core.cases import CaseKey
from turnframe_core.interactions import Interaction
from turnframe_core.turn import AssistantTurn
from turnframe_core.understanding import (
    MEMORY_ITEMS,
    MEMORY_MAX_CHARS,
    MEMORY_TURNS,
    CardEnding,
    ExpectationKind,
)
from turnframe_runtime.models._schema import request_json
from turnframe_test import ScriptedInterpreter
from turnframe_test.harness import DeskHarness
from turnframe_test.understandings import act, ambiguous_act, understanding

REBOOK = "trip.request_rebooking"
SET_NAME = "trip.set_name"


def _briefs(desk: DeskHarness) -> list[Brief]:
    assert isinstance(desk.interpreter, ScriptedInterpreter)
    return desk.interpreter.briefs


async def _say_reading(
    desk: DeskHarness, text: str, read: Callable[[Brief], Understanding]
) -> AssistantTurn:
    """The user writes `text`; the interpreter reads it with `read`, a function of the brief."""
    assert isinstance(desk.interpreter, ScriptedInterpreter)
    desk.interpreter.then(read)
    desk.clock.advance(1_000)
    return await desk.runtime.handle_turn(
        TurnInput(account_id=desk.account_id, conversation_id=desk.conversation_id, text=text)
    )


async def test_the_first_brief_of_a_conversation_has_no_memory_and_reads_as_before(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    await desk.say("Name Grace Hopper", act("a1", SET_NAME, "h1", "Grace Hopper", name="Grace"))

    [brief] = _briefs(desk)
    assert brief.memory.is_empty
    assert "memory" not in brief.model_dump(mode="json")
    assert '"memory"' not in request_json(brief)


async def test_a_brief_remembers_the_open_question_the_offer_and_the_card_of_earlier_replies(
    desk: DeskHarness,
) -> None:
    desk.ready_trip("T-100", "Rome trip")
    desk.ready_trip("T-200", "Oslo trip")
    await desk.say("Name Grace Hopper", act("a1", SET_NAME, "h1", "Grace Hopper", name="Grace"))
    asked = await desk.say("Rebook Oslo", act("a1", REBOOK, "h2", "Rebook", leg="outbound"))
    card = desk.card(asked)

    await desk.say("hello")

    memory = _briefs(desk)[-1].memory
    [open_question] = memory.open_questions
    assert (open_question.turns_ago, open_question.kind, open_question.handle) == (
        1,
        ExpectationKind.AWAITING_CONFIRMATION,
        "h2",
    )
    assert open_question.interaction_id == card.interaction_id
    assert [(o.turns_ago, o.operation, o.handle) for o in memory.offers] == [(2, REBOOK, "h1")]
    assert [(c.interaction_id, c.handle, c.ending) for c in memory.cards] == [
        (card.interaction_id, "h2", CardEnding.OPEN)
    ]
    assert [(t.turns_ago, t.handles) for t in memory.turns] == [(1, ("h2",)), (2, ("h1",))]
    sent = request_json(_briefs(desk)[-1])
    assert '"memory"' in sent  # a model adapter sends it too
    assert "T-100" not in sent and "T-200" not in sent  # cases only by their handles


async def test_a_card_answered_is_remembered_with_its_option_and_no_longer_asks(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    asked = await desk.say("Rebook it", act("a1", REBOOK, "h1", "Rebook", leg="outbound"))
    card = desk.card(asked)
    await desk.click(card, "opt_rebook")

    await desk.say("thanks")

    memory = _briefs(desk)[-1].memory
    assert memory.open_questions == ()
    remembered = next(c for c in memory.cards if c.interaction_id == card.interaction_id)
    assert (remembered.ending, remembered.chosen_option) == (CardEnding.ANSWERED, "opt_rebook")
    assert remembered.turns_ago == 2


async def test_the_other_one_resolves_against_the_card_answered_before(
    desk: DeskHarness,
) -> None:
    desk.ready_trip("T-100", "Rome trip")
    desk.ready_trip("T-200", "Oslo trip")
    asked = await desk.say(
        "Rebook my outbound flight",
        ambiguous_act("a1", REBOOK, ("h1", "h2"), "Rebook my outbound flight", leg="outbound"),
    )
    oslo = next(o.option_id for o in desk.card(asked).options if o.label == "Oslo trip")
    await desk.click(asked, oslo)

    def the_other_one(brief: Brief) -> Understanding:
        chose = next(c for c in brief.memory.cards if c.chosen_handle is not None)
        [other] = [h for h in chose.choices if h != chose.chosen_handle]
        return understanding(act("a1", REBOOK, other, "the other one", leg="outbound"))

    await _say_reading(desk, "No, the other one", the_other_one)

    events = [(e.case_id, e.event_type) for e in await desk.events()]
    assert events == [
        ("T-200", "trip.rebooking_requested"),
        ("T-100", "trip.rebooking_requested"),
    ]
    # sending the rebooking to the airline still waits for its card
    assert "trip.confirm_rebooking" not in desk.executor.executed  # type: ignore[attr-defined]


async def test_yes_do_that_takes_an_offer_as_a_user_act_the_usual_policy_confirms(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    named = await desk.say("Name Grace Hopper", act("a1", SET_NAME, "h1", "Grace", name="Grace"))
    assert [o.operation for o in named.offers] == [REBOOK]

    def do_that(brief: Brief) -> Understanding:
        [offer] = brief.memory.offers
        assert offer.handle is not None
        return understanding(act("a1", offer.operation, offer.handle, "do that", leg="outbound"))

    taken = await _say_reading(desk, "Yes, do that", do_that)

    assert await desk.event_types() == ["trip.name_set", "trip.rebooking_requested"]
    assert [b.kind for b in taken.blocks][-1] == "interaction"
    # the card still guards sending it to the airline
    assert "trip.confirm_rebooking" not in desk.executor.executed  # type: ignore[attr-defined]


async def test_and_the_return_flight_too_acts_on_the_case_the_last_reply_was_about(
    desk: DeskHarness,
) -> None:
    desk.ready_trip("T-100", "Rome trip")
    desk.ready_trip("T-200", "Oslo trip")
    await desk.say("Rebook Oslo outbound", act("a1", REBOOK, "h2", "Rebook", leg="outbound"))

    def the_return_too(brief: Brief) -> Understanding:
        [case] = brief.memory.turns[0].handles
        return understanding(act("a1", REBOOK, case, "the return flight too", leg="return"))

    await _say_reading(desk, "and the return flight too", the_return_too)

    requested = [
        (e.case_id, e.payload.get("leg"))
        for e in await desk.events()
        if e.event_type == "trip.rebooking_requested"
    ]
    assert requested == [("T-200", "outbound"), ("T-200", "return")]


async def test_memory_never_grants_a_case_the_account_can_no_longer_reach(
    desk: DeskHarness,
) -> None:
    desk.ready_trip("T-100", "Rome trip")
    desk.ready_trip("T-200", "Oslo trip")
    await desk.say("Name Grace Hopper", act("a1", SET_NAME, "h1", "Grace", name="Grace"))
    authorize = desk.runtime.directory.authorize

    async def not_rome(account_id: str, case: CaseKey) -> bool:
        return case.case_id != "T-100" and await authorize(account_id, case)

    desk.runtime.directory.authorize = not_rome  # type: ignore[method-assign]
    seen: list[Brief] = []

    def the_old_handle(brief: Brief) -> Understanding:
        seen.append(brief)
        return understanding(act("a1", REBOOK, "h2", "do that", leg="outbound"))

    refused = await _say_reading(desk, "Yes, do that", the_old_handle)

    [brief] = seen
    assert [h.handle for h in brief.handles] == ["h1"]  # Oslo, handled anew; Rome is gone
    assert [(o.operation, o.handle) for o in brief.memory.offers] == [(REBOOK, None)]
    assert brief.memory.turns == ()
    assert desk.notice_codes(refused) == [codes.NOTICE_NOT_UNDERSTOOD]
    assert await desk.event_types() == ["trip.name_set"]


async def test_the_brief_of_a_200_turn_conversation_stays_within_the_documented_bound(
    desk: DeskHarness,
) -> None:
    for trip in range(1, 13):
        desk.ready_trip(f"T-{trip:03}", f"Trip {trip}")
    reads: list[str] = []
    get = desk.stores.interactions.get

    async def counted(account_id: str, interaction_id: str) -> Interaction:
        reads.append(interaction_id)
        return await get(account_id, interaction_id)

    desk.stores.interactions.get = counted  # type: ignore[method-assign]
    for turn in range(200):
        handle = f"h{turn % 12 + 1}"
        if turn % 2:
            await desk.say("Rebook", act("a1", REBOOK, handle, "Rebook", leg="outbound"))
        else:
            await desk.say("Name Ada", act("a1", SET_NAME, handle, "Ada", name="Ada"))
    reads.clear()

    await desk.say("hello")

    memory = _briefs(desk)[-1].memory
    assert not memory.is_empty
    assert len(canonical_json(memory.model_dump(mode="json"))) <= MEMORY_MAX_CHARS
    assert max(len(memory.offers), len(memory.cards), len(memory.open_questions)) <= MEMORY_ITEMS
    assert all(t.turns_ago <= MEMORY_TURNS for t in memory.turns)
    assert len(reads) <= MEMORY_ITEMS  # one read of the replies, then one per card at most
