"""The executor is a domain port, not a trusted party: what it reports is checked against the
turn's own commands and the committed ledger before any receipt may cite it."""

from __future__ import annotations

import pytest

from turnframe_core import codes
from turnframe_core.replay import FailedOutcome, OutcomeUnknown, TurnPhase
from turnframe_runtime import ExecutionResult
from turnframe_store import JournalStatus
from turnframe_test.harness import DeskHarness
from turnframe_test.understandings import act


def _set_name(name: str):
    return act("a1", "trip.set_name", "h1", name, name=name)


async def _outcome(desk: DeskHarness, turn):
    record = await desk.stores.replay.get("acct_1", turn.turn_id)
    [outcome] = record.command_outcomes
    return outcome.outcome


async def test_an_unexpected_executor_error_is_recorded_by_type_and_message(desk):
    desk.ready_trip()

    async def broken(batch):
        raise ConnectionResetError("the domain database went away mid-call")

    desk.executor.execute = broken  # type: ignore[method-assign]
    turn = await desk.say("Name Grace Hopper", _set_name("Grace Hopper"))
    [entry] = await desk.journal(turn)
    assert entry.status is JournalStatus.OUTCOME_UNKNOWN
    expected = "ConnectionResetError: the domain database went away mid-call"
    for outcome in (entry.outcome, await _outcome(desk, turn)):
        assert isinstance(outcome, OutcomeUnknown)
        assert (outcome.reason, outcome.error) == ("executor_error", expected)
    # Nothing says the request was sent: the executor may never have sent anything.
    assert desk.notice_codes(turn) == [codes.NOTICE_OUTCOME_UNCERTAIN]
    assert "sent" not in desk.texts(turn)
    assert "Nothing was changed" not in desk.texts(turn)


async def test_a_long_executor_error_is_shortened_not_refused(desk):
    desk.ready_trip()

    async def broken(batch):
        raise RuntimeError("x" * 5000)

    desk.executor.execute = broken  # type: ignore[method-assign]
    turn = await desk.say("Name Grace Hopper", _set_name("Grace Hopper"))
    outcome = await _outcome(desk, turn)
    assert isinstance(outcome, OutcomeUnknown)
    assert outcome.error is not None and outcome.error.startswith("RuntimeError: xxx")
    assert len(outcome.error) == 300


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no message")


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (RuntimeError("bad \ud800 byte"), "RuntimeError: bad \\ud800 byte"),
        (RuntimeError("nul \x00 here"), "RuntimeError: nul \\x00 here"),
        (_Unprintable(), "_Unprintable: <the message could not be read>"),
    ],
    ids=["lone-surrogate", "nul", "str-raises"],
)
async def test_an_executor_error_of_any_shape_is_recorded_and_the_turn_replied(
    desk, error: Exception, expected: str
):
    desk.ready_trip()

    async def broken(batch):
        raise error

    desk.executor.execute = broken  # type: ignore[method-assign]
    turn = await desk.say("Name Grace Hopper", _set_name("Grace Hopper"))
    assert desk.notice_codes(turn) == [codes.NOTICE_OUTCOME_UNCERTAIN]
    [entry] = await desk.journal(turn)
    assert isinstance(entry.outcome, OutcomeUnknown) and entry.outcome.error == expected
    # The reply is stored; the turn stays unfinished until recovery asks the executor.
    [unfinished] = await desk.stores.conversations.list_unfinished_turns(10)
    assert (unfinished.turn_id, unfinished.phase) == (turn.turn_id, TurnPhase.COMMITTED)


async def test_a_timeout_still_says_the_request_was_sent(desk):
    desk.ready_trip()
    desk.executor.timeouts.add("trip.set_name")
    turn = await desk.say("Name Grace Hopper", _set_name("Grace Hopper"))
    assert desk.notice_codes(turn) == [codes.NOTICE_VERIFICATION_IN_PROGRESS]
    outcome = await _outcome(desk, turn)
    assert isinstance(outcome, OutcomeUnknown) and outcome.error is None


@pytest.mark.parametrize(
    "stray",
    [{"case_id": "T-200"}, {"command_id": "cmd_other"}],
    ids=["another-case", "another-command"],
)
async def test_events_of_another_case_or_command_make_the_result_untrusted(desk, stray):
    desk.ready_trip("T-100", "Rome trip")
    desk.ready_trip("T-200", "Oslo trip")
    honest = desk.executor.execute

    async def reports_more(batch):
        result = await honest(batch)
        [event] = result.events
        other = event.model_copy(update={"event_id": "evt_stray", **stray})
        return ExecutionResult(new_revision=result.new_revision, events=(event, other))

    desk.executor.execute = reports_more  # type: ignore[method-assign]
    turn = await desk.say("Name Grace Hopper", _set_name("Grace Hopper"))
    assert await desk.events() == []
    assert desk.receipt_codes(turn) == []
    assert desk.notice_codes(turn) == [codes.NOTICE_RESULT_UNCONFIRMED]
    assert "nothing was changed" not in desk.texts(turn).lower()  # it may have landed
    [entry] = await desk.journal(turn)
    assert entry.outcome == FailedOutcome(code=codes.EXECUTION_UNTRUSTED_RESULT)
    assert await _outcome(desk, turn) == entry.outcome


async def test_a_replay_citing_another_commands_events_is_a_failure(desk):
    desk.ready_trip()
    first = await desk.say("Name Grace Hopper", _set_name("Grace Hopper"))
    [earlier] = await desk.events()
    revision = desk.revision()

    async def claims_a_replay(batch):
        # "I saw this key before": but the event it cites is the earlier command's.
        own = batch.envelopes[0].command_id
        cited = earlier.model_copy(update={"command_id": own, "sequence": None})
        return ExecutionResult(new_revision=revision, events=(cited,), replayed=True)

    desk.executor.execute = claims_a_replay  # type: ignore[method-assign]
    turn = await desk.say("Name Ada Lovelace", _set_name("Ada Lovelace"))
    assert desk.receipt_codes(first) == ["trip.name_set"]
    assert desk.receipt_codes(turn) == []
    assert desk.notice_codes(turn) == [codes.NOTICE_RESULT_UNCONFIRMED]
    assert "nothing was changed" not in desk.texts(turn).lower()
    [entry] = await desk.journal(turn)
    assert entry.outcome == FailedOutcome(code=codes.EXECUTION_UNTRUSTED_RESULT)
    assert [e.event_id for e in await desk.events()] == [earlier.event_id]


async def test_a_reconciled_replay_citing_another_commands_events_is_told_as_a_failure(desk):
    """Recovery asks the executor what became of an unknown outcome; an answer that cites an
    earlier command's event is judged by the commit, and the follow-up turn tells what the commit
    judged, not what the executor claimed."""
    desk.ready_trip()
    await desk.say("Name Grace Hopper", _set_name("Grace Hopper"))
    [earlier] = await desk.events()
    revision = desk.revision()

    async def lost(batch):
        raise ConnectionResetError("the answer was lost")

    honest = desk.executor.execute
    desk.executor.execute = lost  # type: ignore[method-assign]
    turn = await desk.say("Name Ada Lovelace", _set_name("Ada Lovelace"))
    desk.executor.execute = honest  # type: ignore[method-assign]
    [entry] = await desk.journal(turn)
    assert entry.status is JournalStatus.OUTCOME_UNKNOWN

    async def claims_a_replay(key: str) -> ExecutionResult:
        cited = earlier.model_copy(update={"command_id": entry.command_id, "sequence": None})
        return ExecutionResult(new_revision=revision, events=(cited,), replayed=True)

    desk.executor.outcome = claims_a_replay  # type: ignore[method-assign]
    await desk.runtime.recover_unfinished()
    [entry] = await desk.journal(turn)
    assert entry.outcome == FailedOutcome(code=codes.EXECUTION_UNTRUSTED_RESULT)
    *_, told = await desk.runtime.load_conversation("acct_1", "conv_1")
    assert told.turn_id != turn.turn_id
    assert desk.receipt_codes(told) == []
    assert codes.NOTICE_RESULT_UNCONFIRMED in desk.notice_codes(told)
    record = await desk.runtime.replay("acct_1", told.replay_token)
    assert earlier.event_id not in record.event_ids
    assert [o.outcome for o in record.command_outcomes] == [entry.outcome]
    assert [e.event_id for e in await desk.events()] == [earlier.event_id]
