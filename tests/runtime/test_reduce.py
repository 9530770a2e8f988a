"""Reduction is whole-turn and total: every act gets exactly one result, nothing runs before it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from turnframe_core.cases import CaseRef
from turnframe_core.turn import TurnInput
from turnframe_runtime.cards import CardFactory
from turnframe_runtime.context import TurnContext
from turnframe_runtime.copy import TemplateCopy
from turnframe_runtime.reduce import ActResult, CaseInView, reduce_turn
from turnframe_test.domains.travel import TRIP_COPY, TripDesk, TripWorkflow
from turnframe_test.understandings import act, constraint, understanding

WORKFLOW = TripWorkflow()
OPERATIONS = [
    ("trip.set_name", {"name": "Grace Hopper"}),
    ("trip.set_name", {"name": "R2D2"}),  # refused by the domain
    ("trip.set_email", {"email": "grace@example.com"}),
    ("trip.request_rebooking", {"leg": "outbound"}),
    ("trip.keep_leg", {"leg": "return"}),
    ("trip.withdraw", {}),
    ("trip.confirm_rebooking", {"leg": "outbound"}),  # not proposable
]


def _case() -> CaseInView:
    desk = TripDesk()
    trip = desk.open_trip("acct_1", "T-1", "Rome trip", name="Ada Lovelace", email="a@b.co")
    ref = CaseRef(workflow="trip", case_id="T-1", expected_revision=trip.revision)
    return CaseInView(ref, "Rome trip", trip.state, WORKFLOW.project(ref, trip.state), WORKFLOW)


def _cards() -> CardFactory:
    """The runtime's own card builder, for one fixed turn."""
    turn = TurnContext(
        TurnInput(account_id="acct_1", conversation_id="conv_1", text="x"), "turn_1", 1
    )
    return CardFactory(turn, TemplateCopy(TRIP_COPY), max_selection_candidates=5)


acts = st.lists(st.sampled_from(range(len(OPERATIONS))), min_size=1, max_size=6)


@settings(max_examples=80, deadline=None)
@given(acts, st.data())
def test_a_plans_commands_agree_with_its_act_results(chosen, data):
    """Ready commands belong to exactly the ready acts, cards to exactly the waiting ones (that
    every act has one result is asserted inside reduce_turn and, end to end, in
    test_safety_paths)."""
    parts = []
    for i, index in enumerate(chosen):
        operation, arguments = OPERATIONS[index]
        links = {}
        if i and data.draw(st.booleans()):
            earlier = f"a{data.draw(st.integers(1, i))}"
            links[data.draw(st.sampled_from(["corrects", "cancels"]))] = earlier
        parts.append(act(f"a{i + 1}", operation, "h1", "words", **links, **arguments))
    plan = reduce_turn(
        account_id="acct_1",
        turn_id="turn_1",
        understanding=understanding(*parts),
        handles={"h1": _case()},
        card_case=None,
        cards=_cards(),
    )
    assert list(plan.act_results) == [p.act_id for p in parts]
    ready_acts = {c.act_id for c in plan.ready}
    assert ready_acts == {a for a, r in plan.act_results.items() if r is ActResult.READY}
    assert set(plan.awaiting) == {
        a for a, r in plan.act_results.items() if r is ActResult.AWAITING_CONFIRMATION
    }


@settings(max_examples=40, deadline=None)
@given(acts)
def test_reducing_the_same_turn_twice_gives_the_same_plan(chosen):
    parts = [act(f"a{i + 1}", *OPERATIONS[k][:1], "h1", "w", **OPERATIONS[k][1])
             for i, k in enumerate(chosen)]  # fmt: skip

    def plan():
        return reduce_turn(account_id="acct_1", turn_id="turn_1",
                           understanding=understanding(*parts), handles={"h1": _case()},
                           card_case=None, cards=_cards()).summary()  # fmt: skip

    assert plan() == plan()


def test_a_destructive_act_is_blocked_by_do_not_delete():
    plan = reduce_turn(
        account_id="acct_1",
        turn_id="turn_1",
        understanding=understanding(
            act("a1", "trip.withdraw", "h1", "withdraw"), constraint("do_not_delete", "withdraw")
        ),
        handles={"h1": _case()},
        card_case=None,
        cards=_cards(),
    )
    assert plan.act_results == {"a1": ActResult.BLOCKED_BY_CONSTRAINT}
    assert plan.ready == [] and plan.awaiting == {}


def test_ask_before_applying_sends_even_a_low_risk_act_through_a_card():
    plan = reduce_turn(
        account_id="acct_1",
        turn_id="turn_1",
        understanding=understanding(
            act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper"),
            constraint("ask_before_applying", "Grace Hopper"),
        ),
        handles={"h1": _case()},
        card_case=None,
        cards=_cards(),
    )
    assert plan.act_results == {"a1": ActResult.AWAITING_CONFIRMATION}
