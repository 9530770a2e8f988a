"""Recovery finishes every interrupted turn (DESIGN §9), one test per branch, on every backend:
an ended turn is left alone; nothing journaled ends `interrupted`; journaled commands run again
by key; settled commands get their reply composed again; unknown outcomes are asked of the
executor; a card whose commands never took effect is active again; a turn that lost a card to
another answer never touches it."""

from __future__ import annotations

import pytest

from turnframe_core import (
    InteractionBlock,
    InteractionStatus,
    NoticeBlock,
    ReceiptBlock,
    TurnInput,
    TurnPhase,
    TurnStatus,
    codes,
    verify_chain,
)
from turnframe_runtime import RecoveryOutcome
from turnframe_store import FaultPoint, JournalStatus, NotFound, Timeout
from turnframe_test import DeskHarness, ScriptedNarrator, act, understanding
from turnframe_test.domains.travel import ProcessCrash

NAME = "trip.set_name"
REBOOK = "trip.request_rebooking"
WITHDRAW = "trip.withdraw"


def _name(turn_id: str = "turn_r1", text: str = "Name Grace Hopper") -> TurnInput:
    return TurnInput(account_id="acct_1", conversation_id="conv_1", text=text, turn_id=turn_id)


async def _say(desk: DeskHarness, turn_input: TurnInput):
    desk.interpreter.then(understanding(act("a1", NAME, "h1", "Grace", name="Grace Hopper")))
    desk.clock.advance(1_000)
    return await desk.runtime.handle_turn(turn_input)


async def _rebooking_card(desk: DeskHarness) -> InteractionBlock:
    """The card that asks to confirm rebooking the outbound flight."""
    asked = await desk.say(
        "Rebook the outbound", act("a1", REBOOK, "h1", "Rebook the outbound", leg="outbound")
    )
    return desk.card(asked)


async def _marker(desk: DeskHarness, turn_id: str) -> TurnPhase:
    return (await desk.stores.conversations.get_phase("acct_1", turn_id)).phase


async def test_a_turn_that_ended_is_left_as_it_is(desk: DeskHarness) -> None:
    desk.ready_trip()
    turn = await _say(desk, _name())
    assert (await desk.runtime.recover_unfinished()).turns == ()
    again = await desk.runtime.recover_turn("acct_1", turn.turn_id)
    assert again.outcome is RecoveryOutcome.FINISHED
    assert await desk.runtime.load_turn("acct_1", turn.turn_id) == turn


async def test_a_turn_with_nothing_journaled_ends_interrupted_and_its_retry_gets_it(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    desk.stores.faults.arm(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT)  # the start point
    with pytest.raises(Timeout):
        await _say(desk, _name())
    assert await _marker(desk, "turn_r1") is TurnPhase.RECEIVED
    report = await desk.runtime.recover_unfinished()
    assert [(t.turn_id, t.outcome) for t in report.turns] == [
        ("turn_r1", RecoveryOutcome.INTERRUPTED)
    ]
    retried = await _say(desk, _name())  # the client's retry gets the finished turn
    assert retried.status is TurnStatus.INTERRUPTED
    assert [b.code for b in retried.blocks if isinstance(b, NoticeBlock)] == [
        codes.NOTICE_TURN_INTERRUPTED
    ]
    assert await desk.events() == [] and desk.executor.executed == []
    record = await desk.runtime.replay("acct_1", retried.replay_token)
    assert (record.phase, record.failure_code) == (
        TurnPhase.DELIVERED,
        codes.RUNTIME_TURN_INTERRUPTED,
    )
    assert desk.interpreter.calls == 1  # recovery resubmits no model request


@pytest.mark.parametrize("applied", [False, True], ids=["before-the-request", "after-it"])
async def test_journaled_commands_run_again_by_key_and_take_effect_once(
    desk: DeskHarness, applied: bool
) -> None:
    desk.ready_trip()
    if applied:
        desk.executor.arm_after_remote_request(ProcessCrash())
    else:
        desk.executor.arm_before_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):
        await _say(desk, _name())
    assert await _marker(desk, "turn_r1") is TurnPhase.EXECUTING
    [recovered] = (await desk.runtime.recover_unfinished()).turns
    assert recovered.outcome is RecoveryOutcome.RESUMED
    assert list(desk.executor.applied.values()) == [1]
    assert await desk.event_types() == ["trip.name_set"]
    turn = await desk.runtime.load_turn("acct_1", "turn_r1")
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    assert [e.status for e in await desk.journal(turn)] == [JournalStatus.COMMITTED]
    assert await _marker(desk, "turn_r1") is TurnPhase.DELIVERED


async def test_a_click_that_crashed_mid_way_resolves_its_card_on_recovery(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    card = await _rebooking_card(desk)
    desk.executor.arm_after_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):
        await desk.click(card, "opt_rebook")
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.RESOLVING
    [recovered] = (await desk.runtime.recover_unfinished()).turns
    assert recovered.outcome is RecoveryOutcome.RESUMED
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.RESOLVED
    assert list(desk.executor.applied.values()) == [1, 1]  # the request, then the rebooking
    turn = await desk.runtime.load_turn("acct_1", recovered.turn_id)
    assert desk.receipt_codes(turn) == ["trip.rebooking_sent"]


async def test_a_settled_turn_gets_the_reply_it_would_have_had(make_desk) -> None:
    control: DeskHarness = await make_desk()
    crashed: DeskHarness = await make_desk()
    for desk in (control, crashed):
        desk.ready_trip()
    crashed.stores.faults.arm(FaultPoint.BEFORE_RESPONSE_PERSISTENCE)
    expected = await _say(control, _name())
    with pytest.raises(Exception):  # noqa: B017 - whatever the store raised, the commit stands
        await _say(crashed, _name())
    assert await _marker(crashed, "turn_r1") is TurnPhase.COMMITTED
    [recovered] = (await crashed.runtime.recover_unfinished()).turns
    assert recovered.outcome is RecoveryOutcome.REGENERATED
    turn = await crashed.runtime.load_turn("acct_1", "turn_r1")
    assert turn.blocks == expected.blocks  # byte for byte, server copy on both sides
    assert turn.to_stored_json().replace(str(turn.completed_at), "") == (
        expected.to_stored_json().replace(str(expected.completed_at), "")
    )
    assert list(crashed.executor.applied.values()) == [1]


async def test_an_unknown_outcome_is_asked_of_the_executor_and_settled(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    card = await _rebooking_card(desk)
    desk.executor.arm_after_remote_request(RuntimeError("the airline's answer was lost"))
    turn = await desk.click(card, "opt_rebook")
    assert desk.notice_codes(turn) == [codes.NOTICE_OUTCOME_UNCERTAIN]
    assert await _marker(desk, turn.turn_id) is TurnPhase.COMMITTED  # not finished yet
    [recovered] = (await desk.runtime.recover_unfinished()).turns
    assert (recovered.outcome, recovered.unknown) == (RecoveryOutcome.RECONCILED, 0)
    assert await _marker(desk, turn.turn_id) is TurnPhase.DELIVERED
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.RESOLVED
    assert await desk.event_types() == ["trip.rebooking_requested", "trip.rebooking_sent"]
    assert list(desk.executor.applied.values()) == [1, 1]
    assert await desk.runtime.load_turn("acct_1", turn.turn_id) == turn  # the reply stands
    # The user is told what settled, by a server-written turn whose receipt cites the event.
    *_, told = await desk.runtime.load_conversation("acct_1", "conv_1")
    assert told.turn_id != turn.turn_id
    assert desk.receipt_codes(told) == ["trip.rebooking_sent"]
    record = await desk.runtime.replay("acct_1", told.replay_token)
    assert record.input.is_server_turn
    sent = [e for e in await desk.events() if e.event_type == "trip.rebooking_sent"]
    assert list(record.event_ids) == [e.event_id for e in sent]
    rows = await desk.stores.outbox.list_for_command(sent[0].command_id)
    assert list(record.outbox_ids) == [r.outbox_id for r in rows] != []  # the airline's row


async def test_an_outcome_the_executor_cannot_tell_stays_unknown_and_unfinished(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    desk.executor.arm_after_remote_request(RuntimeError("lost"))
    turn = await _say(desk, _name())

    async def cannot_tell(key: str):
        raise TimeoutError("the remote side does not answer")

    desk.executor.outcome = cannot_tell  # type: ignore[method-assign]
    [recovered] = (await desk.runtime.recover_unfinished()).turns
    assert (recovered.outcome, recovered.unknown) == (RecoveryOutcome.RECONCILED, 1)
    assert await _marker(desk, turn.turn_id) is TurnPhase.COMMITTED


async def test_a_receipt_regenerated_cites_only_committed_events(desk: DeskHarness) -> None:
    desk.ready_trip()
    desk.executor.arm_before_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):
        await _say(desk, _name())
    await desk.runtime.recover_unfinished()
    turn = await desk.runtime.load_turn("acct_1", "turn_r1")
    ledger = {e.event_id for e in await desk.events()}
    for receipt in (b for b in turn.blocks if isinstance(b, ReceiptBlock)):
        assert set(receipt.event_ids) <= ledger


async def test_a_commit_that_landed_unheard_is_finished_by_recovery(make_desk) -> None:
    """`after_commit_before_event_readback`: the commit landed and the turn never read it back.
    With a narrator the reply was not stored yet: recovery composes it from the ledger."""
    narrator = ScriptedNarrator()
    desk: DeskHarness = await make_desk(
        narrator=narrator, reviewer=narrator.reviewer, narration="free"
    )
    desk.ready_trip()
    desk.stores.faults.arm(FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK)
    with pytest.raises(Timeout):
        await _say(desk, _name())
    assert await desk.event_types() == ["trip.name_set"]  # it landed
    assert await _marker(desk, "turn_r1") is TurnPhase.COMMITTED
    [recovered] = (await desk.runtime.recover_unfinished()).turns
    assert recovered.outcome is RecoveryOutcome.REGENERATED
    turn = await _say(desk, _name())  # the retry gets the finished turn
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    assert list(desk.executor.applied.values()) == [1]
    narrator.verify()  # recovery asked no model


async def test_without_a_narrator_a_commit_that_landed_unheard_already_holds_its_reply(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    desk.stores.faults.arm(FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK)
    with pytest.raises(Timeout):
        await _say(desk, _name())
    assert await _marker(desk, "turn_r1") is TurnPhase.DELIVERED  # stored with the commit
    turn = await _say(desk, _name())
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    assert (await desk.runtime.recover_unfinished()).turns == ()


async def test_a_retry_of_an_interrupted_turn_finishes_it_at_once(desk: DeskHarness) -> None:
    """No turn of a conversation runs beside another, so a turn id accepted before with no
    reply was interrupted: its retry finishes it rather than answer "in progress"."""
    desk.ready_trip()
    desk.executor.arm_before_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):
        await _say(desk, _name())
    turn = await _say(desk, _name())
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    assert list(desk.executor.applied.values()) == [1]
    assert await _marker(desk, "turn_r1") is TurnPhase.DELIVERED


async def test_a_new_turn_finishes_the_interrupted_one_before_it_and_the_chain_holds(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    desk.executor.arm_before_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):
        await _say(desk, _name())
    await _say(desk, _name("turn_r2", "Name Grace Hopper please"))
    assert await _marker(desk, "turn_r1") is TurnPhase.DELIVERED  # finished first
    records = await desk.stores.replay.for_conversation("acct_1", "conv_1")
    assert [r.turn_id for r in records] == ["turn_r1", "turn_r2"]
    assert verify_chain(records) == []


async def test_a_reconciled_turn_keeps_its_record_so_the_chain_holds(desk: DeskHarness) -> None:
    desk.ready_trip()
    desk.executor.arm_after_remote_request(RuntimeError("lost"))
    first = await _say(desk, _name())
    await _say(desk, _name("turn_r2", "Name Grace Hopper please"))
    await desk.runtime.recover_unfinished()
    assert await _marker(desk, first.turn_id) is TurnPhase.DELIVERED
    records = await desk.stores.replay.for_conversation("acct_1", "conv_1")
    assert verify_chain(records) == []


async def test_a_command_that_never_took_effect_settles_failed_and_the_card_reopens(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    card = await _rebooking_card(desk)
    desk.executor.arm_before_remote_request(RuntimeError("the line dropped"))  # nothing applied
    turn = await desk.click(card, "opt_rebook")
    assert desk.notice_codes(turn) == [codes.NOTICE_OUTCOME_UNCERTAIN]
    [recovered] = (await desk.runtime.recover_unfinished()).turns
    assert (recovered.outcome, recovered.unknown) == (RecoveryOutcome.RECONCILED, 0)
    [entry] = [e for e in await desk.journal(turn) if e.command_type == "trip.confirm_rebooking"]
    assert (entry.status, entry.outcome.code) == (JournalStatus.FAILED, codes.EXECUTION_NOT_APPLIED)
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.ACTIVE  # nothing took effect: ask again
    *_, told = await desk.runtime.load_conversation("acct_1", "conv_1")
    assert (told.turn_id != turn.turn_id, desk.receipt_codes(told)) == (True, [])
    assert desk.notice_codes(told) == [codes.NOTICE_COMMAND_FAILED]
    again = await desk.click(card, "opt_rebook")
    assert desk.receipt_codes(again) == ["trip.rebooking_sent"]


async def test_a_turn_that_lost_the_card_never_releases_the_winners_claim(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    card = await _rebooking_card(desk)
    desk.executor.arm_after_remote_request(RuntimeError("lost"))  # the winner: unknown outcome
    await desk.click(card, "opt_rebook")
    desk.stores.faults.arm(FaultPoint.BEFORE_RESPONSE_PERSISTENCE)
    with pytest.raises(Exception):  # noqa: B017 - the loser's reply is never stored
        await desk.click(card, "opt_keep")
    report = await desk.runtime.recover_unfinished()
    # The winner is reconciled (a follow-up turn tells of it, after the loser); the loser ran
    # nothing, so it ends interrupted, and leaves the card to its winner.
    loser, winner = report.turns  # the loser was finished first, for the follow-up to follow it
    assert (winner.outcome, loser.outcome) == (
        RecoveryOutcome.RECONCILED,
        RecoveryOutcome.INTERRUPTED,
    )
    assert winner.earlier == (loser,)
    ended = await desk.runtime.load_turn("acct_1", loser.turn_id)
    assert ended.status is TurnStatus.INTERRUPTED
    *_, told = await desk.runtime.load_conversation("acct_1", "conv_1")
    assert desk.receipt_codes(told) == ["trip.rebooking_sent"]
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.RESOLVED  # the winner's, settled by asking
    assert list(desk.executor.applied.values()) == [1, 1]


async def test_a_new_turn_after_an_interrupted_one_plans_on_the_cases_as_they_now_are(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    desk.executor.arm_before_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):
        await _say(desk, _name())
    desk.interpreter.then(
        understanding(act("a1", "trip.set_email", "h1", "mail", email="g@example.com"))
    )
    desk.clock.advance(1_000)
    turn = await desk.runtime.handle_turn(
        TurnInput(
            account_id="acct_1",
            conversation_id="conv_1",
            text="My email is g@example.com",
            turn_id="turn_r2",
        )
    )
    assert desk.receipt_codes(turn) == ["trip.email_set"]  # not a revision conflict
    assert await desk.event_types() == ["trip.name_set", "trip.email_set"]


async def test_a_new_turn_whose_predecessor_cannot_be_finished_now_is_refused_and_writes_nothing(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    desk.executor.arm_before_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):
        await _say(desk, _name())
    desk.stores.faults.arm(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT)  # recovery's commit
    with pytest.raises(Timeout):
        await _say(desk, _name("turn_r2", "Name Grace Hopper please"))
    with pytest.raises(NotFound):
        await desk.stores.conversations.get_user_turn("acct_1", "turn_r2")
    await _say(desk, _name("turn_r2", "Name Grace Hopper please"))  # once the store is back
    records = await desk.stores.replay.for_conversation("acct_1", "conv_1")
    assert [r.turn_id for r in records] == ["turn_r1", "turn_r2"]
    assert verify_chain(records) == []
    assert list(desk.executor.applied.values()) == [1]


async def test_a_won_card_that_runs_nothing_is_active_again_after_a_crash(
    desk: DeskHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from turnframe_runtime.follow_up import FollowUp
    from turnframe_test import ambiguous_act

    desk.ready_trip("T-100", "Rome trip")
    desk.ready_trip("T-200", "Oslo trip")
    asked = await desk.say(
        "Cancel my trip", ambiguous_act("a1", "trip.withdraw", ("h1", "h2"), "Cancel my trip")
    )
    card = desk.card(asked)  # which trip? (the chosen one then asks for its own confirmation)
    oslo = next(o.option_id for o in card.options if o.label == "Oslo trip")

    async def crash(self: object, *args: object) -> None:
        raise ProcessCrash()

    monkeypatch.setattr(FollowUp, "refresh", crash)  # the process dies between start and commit
    with pytest.raises(ProcessCrash):
        await desk.click(card, oslo)
    monkeypatch.undo()
    assert (await desk.stores.interactions.get("acct_1", card.interaction_id)).status is (
        InteractionStatus.RESOLVING
    )
    [recovered] = (await desk.runtime.recover_unfinished()).turns
    assert recovered.outcome is RecoveryOutcome.INTERRUPTED
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.ACTIVE


async def test_a_card_stays_resolving_while_one_of_its_commands_is_still_unknown(
    make_desk,
) -> None:
    from turnframe_core import CompiledCommand
    from turnframe_test.domains.travel import CONFIRM_REBOOKING, TripWorkflow

    class TwoCommands(TripWorkflow):
        """Confirming a rebooking also sets a travel date (two commands behind one card)."""

        def compile(self, act: object, view: object, state: object) -> object:
            out = super().compile(act, view, state)  # type: ignore[arg-type]
            if getattr(act, "operation", "") == CONFIRM_REBOOKING and isinstance(out, list):
                out = [*out, CompiledCommand(command_type="trip.set_travel_date",
                                             payload={"travel_date": "2030-01-01"})]  # fmt: skip
            return out

    desk: DeskHarness = await make_desk(workflow=TwoCommands())
    desk.ready_trip()
    card = await _rebooking_card(desk)
    desk.executor.arm_before_remote_request(RuntimeError("the line dropped"))
    turn = await desk.click(card, "opt_rebook")
    keys = {e.command_type: e.idempotency_key for e in await desk.journal(turn)}

    async def half_known(key: str) -> None:
        if key == keys[CONFIRM_REBOOKING]:
            return None  # never took effect
        raise TimeoutError("cannot tell yet")

    desk.executor.outcome = half_known  # type: ignore[method-assign]
    [recovered] = (await desk.runtime.recover_unfinished()).turns
    assert recovered.unknown == 1
    stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
    assert stored.status is InteractionStatus.RESOLVING  # not reopened while one may land


async def test_the_sweep_can_be_asked_for_one_turn_and_reads_as_its_turns(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    desk.executor.arm_before_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):
        await _say(desk, _name())
    report = await desk.runtime.recover_unfinished(account_id="acct_1", turn_id="turn_r1")
    assert len(report) == 1
    assert [t.outcome for t in report] == [RecoveryOutcome.RESUMED]
    with pytest.raises(ValueError):
        await desk.runtime.recover_unfinished(turn_id="turn_r1")


async def test_a_committed_click_on_an_earlier_card_is_recovered_with_its_receipts(
    make_desk,
) -> None:
    """The card's command was journaled by the turn that raised it; the click committed it and
    crashed before its reply was stored. Recovery finds what the click committed from its record
    and the ledger (not from the card, `resolved` by then), and the reply is the one the same
    click gets without the crash."""
    replies = []
    for crash in (False, True):
        desk: DeskHarness = await make_desk()
        desk.ready_trip()
        asked = await desk.say("Cancel that trip", act("a1", WITHDRAW, "h1", "Cancel that trip"))
        if not crash:
            replies.append(await desk.click(asked, "opt_confirm", turn_id="turn_click"))
            continue
        desk.stores.faults.arm(FaultPoint.BEFORE_RESPONSE_PERSISTENCE)
        with pytest.raises(Exception):  # noqa: B017 - whatever the store raised, it committed
            await desk.click(asked, "opt_confirm", turn_id="turn_click")
        card = desk.card(asked)
        stored = await desk.stores.interactions.get("acct_1", card.interaction_id)
        assert stored.status is InteractionStatus.RESOLVED  # the commit landed
        [recovered] = (await desk.runtime.recover_unfinished()).turns
        assert recovered.outcome is RecoveryOutcome.REGENERATED
        replies.append(await desk.runtime.load_turn("acct_1", "turn_click"))
        assert await desk.event_types() == ["trip.withdrawn"]  # nothing ran twice
    expected, turn = replies
    assert turn.status is TurnStatus.COMPLETED
    assert [b.kind for b in turn.blocks] == [b.kind for b in expected.blocks]
    assert turn.blocks == expected.blocks
