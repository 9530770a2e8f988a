"""Paths where an effect could slip past its rules: each must end in all of it or none of it."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnframe_core import InteractionStatus, codes
from turnframe_core.replay import TurnPhase
from turnframe_runtime import RuntimeConfig
from turnframe_store import FaultPoint, JournalStatus, Timeout, Unavailable
from turnframe_test.harness import DeskHarness
from turnframe_test.understandings import act, ambiguous_act, question

REBOOK = "trip.request_rebooking"


async def _card(desk: DeskHarness):
    turn = await desk.say(
        "Rebook the outbound flight", act("a1", REBOOK, "h1", "Rebook", leg="outbound")
    )
    return desk.card(turn)


async def test_a_card_whose_command_has_an_unknown_outcome_cannot_be_answered_again(make_desk):
    # The second click waits (boundedly) for the card to settle; here it never does.
    desk = await make_desk(config=RuntimeConfig(locales=("en", "it")))
    desk.ready_trip()
    card = await _card(desk)
    desk.executor.timeouts.add("trip.confirm_rebooking")
    await desk.click(card, "opt_rebook")
    desk.executor.timeouts.clear()
    again = await desk.click(card, "opt_rebook")
    assert desk.notice_codes(again) == [codes.NOTICE_ALREADY_ANSWERED]
    assert "trip.confirm_rebooking" not in desk.executor.executed  # never blindly retried
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.RESOLVING  # held until reconciliation settles it


async def test_a_deferred_act_cannot_collide_with_an_act_of_the_turn_that_answers_its_card(desk):
    desk.ready_trip("T-100", "Rome trip")
    desk.ready_trip("T-200", "Oslo trip")
    asked = await desk.say(
        "Rebook my outbound flight",
        ambiguous_act("a1", REBOOK, ("h1", "h2"), "Rebook my outbound flight", leg="outbound"),
    )
    oslo = next(o.option_id for o in desk.card(asked).options if o.label == "Oslo trip")
    turn = await desk.click(
        asked,
        oslo,
        text="Oslo. And my name on Rome is Grace Hopper",
        parts=[act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")],
    )
    events = [(e.case_id, e.event_type) for e in await desk.events()]
    assert events == [("T-200", "trip.rebooking_requested"), ("T-100", "trip.name_set")]
    assert sorted(desk.receipt_codes(turn)) == ["trip.name_set", "trip.rebooking_requested"]


async def test_a_confirmation_on_a_case_the_same_turn_changes_is_bound_to_the_new_revision(desk):
    desk.ready_trip()
    turn = await desk.say(
        "Name Grace Hopper and withdraw the trip",
        act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper"),
        act("a2", "trip.withdraw", "h1", "withdraw the trip"),
    )
    card = desk.card(turn)
    assert card.case_revision == desk.revision()
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.ACTIVE
    confirmed = await desk.click(card, "opt_confirm")
    assert desk.receipt_codes(confirmed) == ["trip.withdrawn"]


async def test_two_concurrent_clicks_on_one_card_execute_once(desk):
    desk.ready_trip()
    card = await _card(desk)
    first, second = await asyncio.gather(
        desk.click(card, "opt_rebook"), desk.click(card, "opt_rebook")
    )
    assert (await desk.event_types()).count("trip.rebooking_sent") == 1
    # Both show what committed; exactly one says the card was answered already.
    assert [desk.receipt_codes(t) for t in (first, second)] == [["trip.rebooking_sent"]] * 2
    answered = [t for t in (first, second) if codes.NOTICE_ALREADY_ANSWERED in desk.notice_codes(t)]
    assert len(answered) == 1


async def test_a_turn_that_fails_before_any_effect_ends_failed(desk):
    desk.ready_trip()
    desk.stores.faults.arm(FaultPoint.BEFORE_JOURNAL_INSERT, error=Unavailable("down"))
    with pytest.raises(Unavailable):
        await desk.say(
            "Name Grace Hopper",
            act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper"),
        )
    assert await desk.events() == []
    assert await desk.stores.conversations.list_unfinished_turns(10) == ()
    [turn] = await desk.stores.conversations.list_turns("acct_1", "conv_1")
    marker = await desk.stores.conversations.get_phase("acct_1", turn.turn_id)
    assert marker.phase is TurnPhase.FAILED
    record = await desk.stores.replay.get("acct_1", turn.turn_id)
    assert record.failure_code == Unavailable.code


async def test_a_timed_out_bundle_leaves_a_journal_entry_that_replays_by_its_key(desk):
    desk.ready_trip()
    # The commit bundle's own crossing (the start point's is the first): it never lands.
    desk.stores.faults.arm(
        FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT, error=Timeout("lost"), skip=1
    )
    with pytest.raises(Timeout):
        await desk.say(
            "Name Grace Hopper",
            act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper"),
        )
    [marker] = await desk.stores.conversations.list_unfinished_turns(10)
    [entry] = await desk.journal(marker.turn_id)
    assert entry.status is JournalStatus.EXECUTING
    revision = desk.revision()
    # What recovery does: re-run the journaled command by its key; the executor replays.
    from turnframe_core import CommandBatch, CommandEnvelope, PerCase

    envelope = CommandEnvelope.build(
        command_id=entry.command_id, turn_id=entry.turn_id, account_id=entry.account_id,
        case_ref=entry.case_ref, origin=entry.origin, command_type=entry.command_type,
        payload=entry.payload,
    )  # fmt: skip
    assert envelope.idempotency_key == entry.idempotency_key
    result = await desk.executor.execute(
        CommandBatch(batch_id="bat_recover", scope=PerCase(), envelopes=(envelope,))
    )
    assert result.replayed and desk.revision() == revision


async def test_a_hypothetical_question_never_acts(desk):
    desk.ready_trip()
    turn = await desk.say(
        "What would happen if I rebooked the outbound flight?",
        question("q1", "What would happen if I rebooked the outbound flight?", "h1",
                 hypothetical=True),
    )  # fmt: skip
    assert await desk.events() == []
    assert await desk.journal(turn) == ()
    assert desk.kinds(turn) == ["answer"]


async def test_a_handle_the_brief_never_issued_reaches_no_case(desk):
    desk.ready_trip()
    turn = await desk.say(
        "Rename T-999 to Bob", act("a1", "trip.set_name", "h7", "Rename T-999 to Bob", name="Bob")
    )
    assert await desk.events() == []
    assert await desk.journal(turn) == ()
    assert desk.notice_codes(turn) == [codes.NOTICE_NOT_UNDERSTOOD]


OPERATIONS = [
    ("trip.set_name", {"name": "Grace Hopper"}),
    ("trip.set_name", {"name": "R2D2"}),
    ("trip.set_email", {"email": "grace@example.com"}),
    ("trip.set_travel_date", {"travel_date": "2027-03-14"}),
    ("trip.request_rebooking", {"leg": "outbound"}),
    ("trip.keep_leg", {"leg": "return"}),
    ("trip.withdraw", {}),
]


@settings(
    max_examples=25,
    deadline=None,
    # Each example makes its own stores (`scoped`), so sharing the test's backend is safe.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(chosen=st.lists(st.sampled_from(range(len(OPERATIONS))), min_size=1, max_size=5))
async def test_every_act_ends_in_exactly_one_visible_result(store_backend, chosen):
    async with store_backend.scoped() as backend:
        desk = await DeskHarness.on(backend)
        desk.ready_trip()
        parts = [
            act(f"a{i + 1}", OPERATIONS[k][0], "h1", "words", **OPERATIONS[k][1])
            for i, k in enumerate(chosen)
        ]
        turn = await desk.say("words: Grace Hopper, R2D2", *parts)
        record = await desk.runtime.replay("acct_1", turn.replay_token)
        results = record.reduction_plan["act_results"]
        assert list(results) == [p.act_id for p in parts]
        entries = await desk.journal(turn)
        refusals = [
            b.text for b in turn.blocks if getattr(b, "code", "") == codes.NOTICE_ACT_REFUSED
        ]
        cards = [b for b in turn.blocks if b.kind == "interaction"]
        ready = [a for a, r in results.items() if r == "ready"]
        waiting = [a for a, r in results.items() if r == "awaiting_confirmation"]
        refused = [a for a, r in results.items() if r == "refused"]
        # a ready act ran (journaled, not waiting); a waiting act shows a card; a refused act
        # says why, one notice per distinct reason
        ran = [e for e in entries if e.status is not JournalStatus.AWAITING_CONFIRMATION]
        assert len(ran) >= len(ready)
        assert cards or not waiting  # (a follow-up card may appear without a waiting act)
        plan = record.reduction_plan
        reasons = {r["code"] for r in (*plan["refusals"], *plan["policy_refusals"])}
        assert len(set(refusals)) >= len(reasons)
        assert bool(refused) == bool(refusals)


async def test_a_deferred_confirmation_whose_case_cannot_be_refreshed_says_so(desk):
    desk.ready_trip()
    load = desk.runtime.directory.load
    calls = {"n": 0}

    async def flaky(account_id, case):
        calls["n"] += 1
        if calls["n"] > 1:  # the refresh after the commit fails
            from turnframe_store import Unavailable

            raise Unavailable("the domain database is down")
        return await load(account_id, case)

    desk.runtime.directory.load = flaky  # type: ignore[method-assign]
    turn = await desk.say(
        "Name Grace Hopper and withdraw the trip",
        act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper"),
        act("a2", "trip.withdraw", "h1", "withdraw the trip"),
    )
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    assert not [b for b in turn.blocks if b.kind == "interaction"]
    assert codes.NOTICE_CASE_REFRESH_UNAVAILABLE in desk.notice_codes(turn)
    assert codes.NOTICE_INTERACTION_UNAVAILABLE in desk.notice_codes(turn)
