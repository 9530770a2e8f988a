"""The integration scenarios: the real pipeline, real stores (each scenario on memory, SQLite and
PostgreSQL), the sample travel desk and scripted model ports. One behaviour each."""

from __future__ import annotations

import pytest

from turnframe_core import InteractionStatus, codes
from turnframe_core.blocks import AnswerStatus, InteractionBlock, TransitionBlock
from turnframe_core.facts import OperationalOutcome
from turnframe_core.interactions import FreeformNotAllowed, InteractionNotFound, InteractionResponse
from turnframe_core.replay import OutcomeUnknown, RejectedOutcome, TurnPhase
from turnframe_core.turn import TurnInput
from turnframe_store import FaultPoint, JournalStatus, NotFound, Timeout
from turnframe_test.harness import DeskHarness
from turnframe_test.scripted import ScriptedNarrator
from turnframe_test.understandings import act, ambiguous_act, constraint, question

NAME = "trip.set_name"
EMAIL = "trip.set_email"
DATE = "trip.set_travel_date"
REBOOK = "trip.request_rebooking"
WITHDRAW = "trip.withdraw"


async def _rebooking_card(desk: DeskHarness):
    turn = await desk.say(
        "Rebook the outbound flight", act("a1", REBOOK, "h1", "Rebook the outbound", leg="outbound")
    )
    return turn, desk.card(turn)


# 1
async def test_a_correction_that_leaves_the_value_unchanged_causes_no_mutation(desk):
    desk.ready_trip()
    turn = await desk.say(
        "Change the name to Bob, actually leave it as Ada Lovelace",
        act("a1", NAME, "h1", "Change the name to Bob", name="Bob"),
        act("a2", NAME, "h1", "leave it as Ada Lovelace", corrects="a1", name="Ada Lovelace"),
    )
    assert await desk.events() == []
    assert desk.revision() == 1
    assert await desk.journal(turn) == ()
    assert desk.receipt_codes(turn) == []


# 2
async def test_one_message_sets_several_independent_fields_atomically(desk):
    desk.trip(name="Ada Lovelace", email="ada@example.com")
    turn = await desk.say(
        "I'm Grace Hopper and I travel on 2027-05-01",
        act("a1", NAME, "h1", "Grace Hopper", name="Grace Hopper"),
        act("a2", DATE, "h1", "2027-05-01", travel_date="2027-05-01"),
    )
    assert await desk.event_types() == ["trip.name_set", "trip.travel_date_set"]
    assert desk.revision() == 2  # one per-case batch: one revision
    assert desk.receipt_codes(turn) == ["trip.name_set", "trip.travel_date_set"]
    assert [e.status for e in await desk.journal(turn)] == [JournalStatus.COMMITTED] * 2


# 3
async def test_an_action_and_a_question_both_receive_results(make_desk):
    narrator = ScriptedNarrator().answer_text("q1", "You fly on 14 March.").review_passes()
    narrator.transition_text("Saved.").review_passes()
    desk = await make_desk(narrator=narrator, reviewer=narrator.reviewer, narration="free")
    desk.ready_trip()
    turn = await desk.say(
        "Set the name to Grace Hopper. When do I fly?",
        act("a1", NAME, "h1", "Grace Hopper", name="Grace Hopper"),
        question("q1", "When do I fly?", "h1"),
    )
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    answers = [b for b in turn.blocks if b.kind == "answer"]
    assert [(a.question_id, a.status) for a in answers] == [("q1", AnswerStatus.ANSWERED)]
    narrator.verify()


async def test_a_question_before_an_action_both_receive_results(make_desk):
    """The other order in one message: the question is asked first, the act comes after."""
    narrator = ScriptedNarrator().answer_text("q1", "You fly on 14 March.").review_passes()
    narrator.transition_text("Saved.").review_passes()
    desk = await make_desk(narrator=narrator, reviewer=narrator.reviewer, narration="free")
    desk.ready_trip()
    turn = await desk.say(
        "When do I fly? And set the name to Grace Hopper.",
        question("q1", "When do I fly?", "h1"),
        act("a1", NAME, "h1", "Grace Hopper", name="Grace Hopper"),
    )
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    answers = [b for b in turn.blocks if b.kind == "answer"]
    assert [(a.question_id, a.status) for a in answers] == [("q1", AnswerStatus.ANSWERED)]
    narrator.verify()


async def test_every_record_names_the_workflow_version_that_projected_its_cases(desk):
    """A stored turn says which version of each workflow read its cases (a behaviour change
    ships under a new version), and the audit shows it."""
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"))
    record = await desk.runtime.replay(desk.account_id, turn.replay_token)
    assert [(w.key, w.version) for w in record.workflow_versions] == [
        ("trip", desk.workflow.version)
    ]
    audit = await desk.runtime.audit(desk.account_id, turn.replay_token)
    assert audit.which_state_was_loaded["workflow_versions"] == [
        {"key": "trip", "version": desk.workflow.version}
    ]


# 4
async def test_a_card_response_and_text_coexist_in_one_turn(desk):
    desk.ready_trip()
    _, card = await _rebooking_card(desk)
    turn = await desk.click(
        card,
        "opt_rebook",
        text="Rebook. Which date do I travel?",
        parts=[question("q1", "Which date do I travel?", "h1")],
    )
    assert "trip.rebooking_sent" in desk.receipt_codes(turn)
    answers = [b for b in turn.blocks if b.kind == "answer"]
    assert len(answers) == 1 and answers[0].status is AnswerStatus.ANSWERED


# 5
async def test_two_open_cases_of_the_same_kind_produce_a_selection_card(desk):
    desk.ready_trip("T-100", "Rome trip")
    desk.ready_trip("T-200", "Oslo trip")
    turn = await desk.say(
        "Rebook my outbound flight",
        ambiguous_act("a1", REBOOK, ("h1", "h2"), "Rebook my outbound flight", leg="outbound"),
    )
    assert await desk.events() == []
    card = desk.card(turn)
    assert card.interaction_kind.value == "select_target"
    assert len(card.options) >= 3  # both candidates and a way out
    assert {o.label for o in card.options} >= {"Rome trip", "Oslo trip"}


async def test_a_selection_click_runs_the_deferred_act_on_the_chosen_case_only(desk):
    desk.ready_trip("T-100", "Rome trip")
    desk.ready_trip("T-200", "Oslo trip")
    turn = await desk.say(
        "Rebook my outbound flight",
        ambiguous_act("a1", REBOOK, ("h1", "h2"), "Rebook my outbound flight", leg="outbound"),
    )
    oslo = next(o.option_id for o in desk.card(turn).options if o.label == "Oslo trip")
    after = await desk.click(turn, oslo)
    events = await desk.events()
    assert [(e.case_id, e.event_type) for e in events] == [("T-200", "trip.rebooking_requested")]
    assert desk.card(after).title == "Rebook the outbound flight?"


# 6
async def test_a_malformed_second_act_causes_zero_acts_to_execute(desk):
    desk.ready_trip()
    turn = await desk.say(
        "Name Grace Hopper and fly me to the moon",
        act("a1", NAME, "h1", "Name Grace Hopper", name="Grace Hopper"),
        act("a2", "trip.fly_to_moon", "h1", "fly me to the moon"),
    )
    assert await desk.events() == []
    assert await desk.journal(turn) == ()
    assert desk.notice_codes(turn) == [codes.NOTICE_NOT_UNDERSTOOD]


# 7
async def test_a_stale_confirmation_after_an_edit_is_rejected(desk):
    desk.ready_trip()
    _, card = await _rebooking_card(desk)
    edited = await desk.say(
        "Actually my email is grace@example.com",
        act("a1", EMAIL, "h1", "grace@example.com", email="grace@example.com"),
    )
    fresh = desk.card(edited)  # re-projection derived a fresh card at the new revision
    assert fresh.interaction_id != card.interaction_id
    turn = await desk.click(card, "opt_rebook")
    assert "trip.rebooking_sent" not in await desk.event_types()
    assert desk.notice_codes(turn) == [codes.NOTICE_STALE_INTERACTION]
    assert desk.card(turn).interaction_id == fresh.interaction_id  # the current card is offered


# 8
async def test_a_double_click_executes_at_most_once(desk):
    desk.ready_trip()
    _, card = await _rebooking_card(desk)
    first = await desk.click(card, "opt_rebook")
    second = await desk.click(card, "opt_rebook")
    assert (await desk.event_types()).count("trip.rebooking_sent") == 1
    assert desk.notice_codes(second) == [codes.NOTICE_ALREADY_ANSWERED]
    assert desk.receipt_codes(second) == desk.receipt_codes(first) == ["trip.rebooking_sent"]


# 9
async def test_a_client_cannot_change_a_call_to_action_meaning_by_changing_a_value(desk):
    desk.ready_trip()
    _request, card = await _rebooking_card(desk)
    with pytest.raises(FreeformNotAllowed):
        await desk.click(card, "opt_rebook", freeform="inbound leg, business class")
    assert "trip.rebooking_sent" not in await desk.event_types()
    turn = await desk.click(card, "opt_rebook")
    sent = [e for e in await desk.events() if e.event_type == "trip.rebooking_sent"]
    assert [e.payload for e in sent] == [{"leg": "outbound"}]
    assert desk.receipt_codes(turn) == ["trip.rebooking_sent"]


# 10
async def test_a_failed_command_cannot_produce_a_resolved_looking_receipt(desk):
    desk.ready_trip(locked=True)
    turn = await desk.say(
        "Set the name to Grace Hopper", act("a1", NAME, "h1", "Grace Hopper", name="Grace Hopper")
    )
    assert desk.receipt_codes(turn) == []
    assert await desk.events() == []
    # The domain refused it: its own words, never a generic failure (hardening item 10).
    assert desk.notice_codes(turn) == [codes.NOTICE_ACT_REFUSED]
    assert "locked by the travel desk" in " ".join(getattr(b, "text", "") for b in turn.blocks)
    [entry] = await desk.journal(turn)
    assert entry.status is JournalStatus.FAILED
    assert isinstance(entry.outcome, RejectedOutcome) and entry.outcome.code == "trip.locked"


# 11
async def test_failed_interaction_persistence_cannot_produce_text_referring_to_a_visible_card(
    make_desk,
):
    narrator = ScriptedNarrator().transition_text("Nothing was done.").review_passes()
    desk = await make_desk(narrator=narrator, reviewer=narrator.reviewer, narration="free")
    desk.ready_trip()
    desk.stores.faults.arm(FaultPoint.AFTER_INTERACTION_PERSISTENCE)
    turn = await desk.say("Withdraw my trip", act("a1", WITHDRAW, "h1", "Withdraw my trip"))
    assert not [b for b in turn.blocks if isinstance(b, InteractionBlock)]
    assert desk.notice_codes(turn) == [codes.NOTICE_INTERACTION_UNAVAILABLE]
    [request] = narrator.calls_for("transition")
    assert request.card_title is None
    assert not any(f.kind == "interaction_available" for f in request.allowed_facts)
    open_cards = await desk.stores.interactions.open_for_conversation("acct_1", "conv_1")
    assert open_cards == ()  # the half-persisted card is withdrawn, never answerable
    assert await desk.journal(turn) == ()
    narrator.verify()


# 12
async def test_an_interpreter_failure_before_commit_falls_back_with_no_effect(desk):
    desk.ready_trip()
    desk.interpreter.then(RuntimeError("provider unavailable"))
    desk.clock.advance(1_000)
    turn = await desk.runtime.handle_turn(
        TurnInput(account_id="acct_1", conversation_id="conv_1", text="Set the name to Grace")
    )
    assert await desk.events() == []
    assert await desk.journal(turn) == ()
    assert desk.notice_codes(turn) == [codes.NOTICE_MESSAGE_UNREADABLE]
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert [(a.purpose, a.outcome) for a in record.provider_attempts] == [("understand", "failed")]


# 13
async def test_a_provider_failure_after_commit_regenerates_narration_without_repeating_commands(
    make_desk,
):
    narrator = ScriptedNarrator().expect("transition", TimeoutError("provider timed out"))
    desk = await make_desk(narrator=narrator, reviewer=narrator.reviewer, narration="free")
    desk.ready_trip()
    turn = await desk.say(
        "Set the name to Grace Hopper", act("a1", NAME, "h1", "Grace Hopper", name="Grace Hopper")
    )
    assert await desk.event_types() == ["trip.name_set"]
    assert len(await desk.journal(turn)) == 1
    transition = next(b for b in turn.blocks if isinstance(b, TransitionBlock))
    assert "Grace Hopper" in transition.text  # server copy stood in, from the receipt
    assert desk.executor.executed == [NAME]
    narrator.verify()


# 14
async def test_a_database_timeout_during_an_atomic_batch_leaves_no_hidden_partial_state(desk):
    desk.ready_trip()
    # The commit bundle's own crossing (the start point's is the first): it never lands.
    desk.stores.faults.arm(
        FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT, error=Timeout("lost"), skip=1
    )
    with pytest.raises(Timeout):
        await desk.say(
            "Set the name to Grace Hopper",
            act("a1", NAME, "h1", "Grace Hopper", name="Grace Hopper"),
        )
    assert await desk.events() == []
    [turn_id] = [m.turn_id for m in await desk.stores.conversations.list_unfinished_turns(10)]
    [entry] = await desk.journal(turn_id)
    assert entry.status is JournalStatus.EXECUTING  # resumable by its key
    with pytest.raises(NotFound):
        await desk.stores.conversations.get_assistant_turn("acct_1", turn_id)
    await desk.runtime.recover_unfinished()  # and recovery resumes it: applied once
    assert await desk.event_types() == ["trip.name_set"]
    assert list(desk.executor.applied.values()) == [1]


# 15
async def test_an_external_timeout_becomes_an_unknown_outcome_rather_than_a_blind_retry(desk):
    desk.ready_trip()
    _, card = await _rebooking_card(desk)
    desk.executor.timeouts.add("trip.confirm_rebooking")
    turn = await desk.click(card, "opt_rebook")
    entries = [e for e in await desk.journal(turn) if e.command_type == "trip.confirm_rebooking"]
    assert [e.status for e in entries] == [JournalStatus.OUTCOME_UNKNOWN]
    assert isinstance(entries[0].outcome, OutcomeUnknown)
    assert desk.receipt_codes(turn) == []
    assert codes.NOTICE_VERIFICATION_IN_PROGRESS in desk.notice_codes(turn)
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert len(record.pending_reconciliations()) == 1
    assert "trip.confirm_rebooking" not in desk.executor.executed


# 16
async def test_a_read_only_question_during_a_workflow_does_not_lose_the_active_case(desk):
    desk.ready_trip()
    _, card = await _rebooking_card(desk)
    revision = desk.revision()
    turn = await desk.say("When do I travel?", question("q1", "When do I travel?", "h1"))
    assert desk.kinds(turn) == ["answer"]  # a question-only turn has no acknowledgement
    assert desk.revision() == revision
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.ACTIVE


# 17
async def test_a_question_unsupported_by_current_sources_stays_explicit(make_desk):
    narrator = ScriptedNarrator()
    desk = await make_desk(narrator=narrator, reviewer=narrator.reviewer, narration="free")
    turn = await desk.say("What is my booking reference?", question("q1", "What is my reference?"))
    [answer] = [b for b in turn.blocks if b.kind == "answer"]
    assert answer.status is AnswerStatus.SOURCE_UNAVAILABLE and answer.text
    assert narrator.calls == []


# 18
async def test_a_reload_returns_the_same_ordered_blocks_and_interaction_state(desk):
    desk.ready_trip()
    turn, card = await _rebooking_card(desk)
    reloaded = await desk.runtime.load_turn("acct_1", turn.turn_id)
    assert reloaded == turn
    assert reloaded.to_stored_json() == turn.to_stored_json()
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.ACTIVE and desk.card(reloaded) == card


# 19
async def test_identifiers_that_name_nothing_or_another_tenants_record_leak_nothing(make_desk):
    other = await make_desk(account_id="acct_2")
    desk = await make_desk(stores=other.stores)
    desk.ready_trip()
    other.ready_trip("T-900", "Paris trip")
    _foreign_turn, foreign_card = await _rebooking_card(other)
    errors = []
    for interaction_id in (foreign_card.interaction_id, "int_doesnotexist"):
        response = InteractionResponse(
            interaction_id=interaction_id,
            option_id="opt_rebook",
            expected_case_revision=foreign_card.case_revision,
        )
        with pytest.raises(InteractionNotFound) as info:
            await desk.runtime.handle_turn(
                TurnInput(
                    account_id="acct_1", conversation_id="conv_1", interaction_response=response
                )
            )
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1])
    assert (str(errors[0]), repr(errors[0])) == (str(errors[1]), repr(errors[1]))
    assert await desk.stores.conversations.list_turns("acct_1", "conv_1") == ()


# 20
async def test_a_claim_nothing_backs_leaves_no_trace_in_the_record(make_desk):
    forged = OperationalOutcome(
        receipt_id="rcp_forged", event_ids=("evt_forged",), status_code="trip.name_set"
    )
    narrator = ScriptedNarrator()
    narrator.transition_text("Sent! Your name was changed.", [forged.model_dump(mode="json")])
    narrator.transition_text("Sent! Your name was changed.").review_fails("claims it was sent")
    desk = await make_desk(narrator=narrator, reviewer=narrator.reviewer, narration="free")
    desk.ready_trip(locked=True)
    turn = await desk.say(
        "Set the name to Grace Hopper", act("a1", NAME, "h1", "Grace Hopper", name="Grace Hopper")
    )
    text = " ".join(getattr(b, "text", "") or "" for b in turn.blocks)
    assert "Sent" not in text and "sent" not in text
    assert desk.notice_codes(turn) == [codes.NOTICE_ACT_REFUSED]
    assert desk.receipt_codes(turn) == []
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    discarded = [
        (a.purpose, a.outcome, a.code)
        for a in record.provider_attempts
        if a.purpose != "understand"
    ]
    assert discarded == [
        ("transition", "failed", codes.CLAIM_UNBACKED_OUTCOME),
        ("transition", "failed", codes.CLAIM_REVIEW_FAILED),
        ("review", "succeeded", None),
    ]
    assert [(f.check, f.rule, f.replaced_by) for f in record.prose_findings] == [
        ("facts", "facts.not_given", "server_copy"),
        ("review", "review", "server_copy"),
    ]
    assert "Sent" not in record.model_dump_json()  # the record keeps no trace of the claim
    narrator.verify()


async def test_a_click_only_turn_makes_no_interpreter_call(desk):
    desk.ready_trip()
    _, card = await _rebooking_card(desk)
    calls = desk.interpreter.calls
    turn = await desk.click(card, "opt_rebook")
    assert desk.interpreter.calls == calls
    assert desk.receipt_codes(turn) == ["trip.rebooking_sent"]


async def test_a_consequential_act_waits_for_the_card_its_policy_names(desk):
    desk.ready_trip()
    asked = await desk.say("Cancel that trip", act("a1", WITHDRAW, "h1", "Cancel that trip"))
    card = desk.card(asked)
    assert card.interaction_kind.value == "confirm_command"
    [entry] = await desk.journal(asked)
    assert (entry.status, entry.command_type) == (JournalStatus.AWAITING_CONFIRMATION, WITHDRAW)
    assert await desk.events() == []
    confirmed = await desk.click(card, "opt_confirm")
    assert await desk.event_types() == ["trip.withdrawn"]
    assert desk.receipt_codes(confirmed) == ["trip.withdrawn"]
    [same] = await desk.journal(asked)
    assert same.status is JournalStatus.COMMITTED
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.RESOLVED


async def test_declining_a_confirmation_runs_nothing_and_says_so(desk):
    desk.ready_trip()
    asked = await desk.say("Cancel that trip", act("a1", WITHDRAW, "h1", "Cancel that trip"))
    declined = await desk.click(asked, "opt_decline")
    assert await desk.events() == []
    assert desk.notice_codes(declined) == [codes.NOTICE_INSTRUCTION_DECLINED]
    [entry] = await desk.journal(asked)
    assert entry.status is JournalStatus.FAILED


async def test_an_answers_only_turn_has_no_acknowledgement(make_desk):
    narrator = ScriptedNarrator().answer_text("q1", "You travel on 14 March.").review_passes()
    desk = await make_desk(narrator=narrator, reviewer=narrator.reviewer, narration="free")
    desk.ready_trip()
    turn = await desk.say("When do I travel?", question("q1", "When do I travel?", "h1"))
    assert desk.kinds(turn) == ["answer"]
    narrator.verify()


async def test_do_not_submit_blocks_a_submission_even_from_a_click(desk):
    desk.ready_trip()
    _, card = await _rebooking_card(desk)
    turn = await desk.click(
        card,
        "opt_rebook",
        text="Rebook, but do not submit anything yet",
        parts=[constraint("do_not_submit", "do not submit anything")],
    )
    assert "trip.rebooking_sent" not in await desk.event_types()
    assert codes.NOTICE_NOTHING_SUBMITTED in desk.notice_codes(turn)
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.ACTIVE  # still answerable later


async def test_a_cancellation_wins_over_the_act_it_cancels(desk):
    desk.ready_trip()
    turn = await desk.say(
        "Rename me to Bob. No wait, forget that.",
        act("a1", NAME, "h1", "Rename me to Bob", name="Bob"),
        act("a2", NAME, "h1", "forget that", cancels="a1", name="Bob"),
    )
    assert await desk.events() == []
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert record.reduction_plan is not None
    assert record.reduction_plan["act_results"] == {"a1": "cancelled", "a2": "cancellation"}


async def test_every_turn_records_its_phase_and_replay_record(desk):
    desk.ready_trip()
    turn = await desk.say(
        "Set the name to Grace Hopper", act("a1", NAME, "h1", "Grace Hopper", name="Grace Hopper")
    )
    marker = await desk.stores.conversations.get_phase("acct_1", turn.turn_id)
    assert marker.phase is TurnPhase.DELIVERED
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert record.phase is TurnPhase.DELIVERED
    assert record.response_block_ids == tuple(b.block_id for b in turn.blocks)
    assert [o.outcome.kind for o in record.command_outcomes] == ["committed"]
    assert record.event_ids == tuple(e.event_id for e in await desk.events())
