"""Whatever a model port sends or raises, a turn that committed still gets its reply: composed
from server copy, claim-guarded, stored and returned, the cause in its replay record. Before the
commit, a model's failure has no effect."""

from __future__ import annotations

from typing import Any

import pytest

from turnframe_core import CaseRef, TurnPhase, codes
from turnframe_test import DeskHarness, ScriptedNarrator, act, question

NAME = "trip.set_name"


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def _surrogate_fact(request: Any) -> dict[str, Any]:
    value = {"kind": "state_value", "field": "name", "value": "Ada\ud800",
             "case_ref": CaseRef(workflow="trip", case_id="T-100", expected_revision=2)
             .model_dump(mode="json")}  # fmt: skip
    return {"kind": "transition", "text": "Saved.", "facts_used": [value]}


def _deep_object(request: Any) -> dict[str, Any]:
    """A draft object nested far past any recursion limit (built without recursion)."""
    nested: Any = "leaf"
    for _ in range(100_000):
        nested = [nested]
    return {"kind": "transition", "text": "Saved.", "facts_used": [nested]}


@pytest.mark.parametrize(
    ("reply", "cause"),
    [
        (_deep(100_000), codes.AUTHORSHIP_MALFORMED_OUTPUT),
        (_deep(1_000), codes.AUTHORSHIP_MALFORMED_OUTPUT),
        (_deep_object, codes.AUTHORSHIP_MALFORMED_OUTPUT),
        (_surrogate_fact, codes.AUTHORSHIP_MALFORMED_OUTPUT),
        (RuntimeError("the provider fell over"), "RuntimeError"),
    ],
    ids=[
        "json-past-the-length-cap",
        "json-past-the-depth-cap",
        "object-past-the-recursion-limit",
        "lone-surrogate-in-a-fact",
        "provider-raises",
    ],
)
async def test_a_broken_narration_after_the_commit_still_gives_the_turn_its_reply(
    make_desk, reply: Any, cause: str
) -> None:
    narrator = ScriptedNarrator().expect("transition", reply)
    if not isinstance(reply, RuntimeError):  # a refused draft gets one rewrite
        narrator.expect("transition", reply)
    desk: DeskHarness = await make_desk(
        narrator=narrator, reviewer=narrator.reviewer, narration="free"
    )
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"))
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    [transition] = [b for b in turn.blocks if b.kind == "transition"]
    assert transition.copy_ref is not None  # server copy stood in
    assert (await desk.runtime.load_turn("acct_1", turn.turn_id)) == turn
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert record.phase is TurnPhase.DELIVERED
    failed = [a for a in record.provider_attempts if a.purpose == "transition"]
    assert failed and {a.outcome for a in failed} == {"failed"}
    assert cause in {a.code for a in failed}


async def test_a_broken_answer_draft_is_replaced_by_a_server_answer(make_desk) -> None:
    narrator = ScriptedNarrator().expect("answer", _deep(100_000))
    narrator.expect("answer", _deep(100_000))  # a refused draft gets one rewrite
    desk: DeskHarness = await make_desk(
        narrator=narrator, reviewer=narrator.reviewer, narration="free"
    )
    desk.ready_trip()
    turn = await desk.say("When do I fly?", question("q1", "When do I fly?", "h1"))
    [answer] = [b for b in turn.blocks if b.kind == "answer"]
    assert answer.copy_ref is not None
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    answers = [a.outcome for a in record.provider_attempts if a.purpose == "answer"]
    assert answers == ["failed", "failed"]
    narrator.verify()


async def test_a_refused_understanding_records_why_and_changes_nothing(desk: DeskHarness) -> None:
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper", act("a1", NAME, "h9", "Grace", name="Grace Hopper"))
    assert await desk.events() == []
    assert desk.notice_codes(turn) == [codes.NOTICE_NOT_UNDERSTOOD]
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert record.understanding is None
    # Which handle, operation or argument failed: by code and path, never by value.
    assert [(p.code, p.path) for p in record.understanding_problems] == [
        (codes.UNDERSTANDING_UNKNOWN_HANDLE, "acts[0].target.handle")
    ]
    [attempt] = record.provider_attempts
    assert (attempt.outcome, attempt.code) == ("failed", codes.UNDERSTANDING_REJECTED)


class _OffScript:
    """A narrator whose transition is not a draft at all (a number)."""

    async def transition(self, request: Any) -> Any:
        return 42

    async def answer(self, request: Any) -> Any:
        raise AssertionError("no question was asked")


class _NeverReviews:
    async def review(self, request: Any) -> Any:
        raise AssertionError("nothing passed the checks, so nothing is reviewed")


async def test_a_narration_that_is_not_a_draft_still_gives_the_turn_its_reply(make_desk) -> None:
    desk: DeskHarness = await make_desk(
        narrator=_OffScript(), reviewer=_NeverReviews(), narration="free"
    )
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"))
    [transition] = [b for b in turn.blocks if b.kind == "transition"]
    assert transition.copy_ref is not None
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    codes_seen = {a.code for a in record.provider_attempts if a.purpose == "transition"}
    assert codes_seen == {codes.AUTHORSHIP_MALFORMED_OUTPUT}


class _Saves(_OffScript):
    """A narrator whose draft is fine."""

    async def transition(self, request: Any) -> Any:
        return {"kind": "transition", "text": "Saved.", "facts_used": []}


class _ReviewsWithADict:
    """A reviewer whose verdict is not a verdict."""

    async def review(self, request: Any) -> Any:
        return {"passed": True}


async def test_a_review_that_is_not_a_verdict_still_gives_the_turn_its_reply(make_desk) -> None:
    desk: DeskHarness = await make_desk(
        narrator=_Saves(), reviewer=_ReviewsWithADict(), narration="free"
    )
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"))
    [transition] = [b for b in turn.blocks if b.kind == "transition"]
    assert transition.author == "server" and transition.text != "Saved."
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert record.phase is TurnPhase.DELIVERED
    reviews = [(a.outcome, a.code) for a in record.provider_attempts if a.purpose == "review"]
    assert reviews == [("failed", codes.AUTHORSHIP_MALFORMED_OUTPUT)]


async def test_narration_failing_past_its_own_guards_falls_back_to_server_copy(
    make_desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    from turnframe_runtime.narration import Narration

    async def broken(self: Any, request: Any, backing: Any, grounds: Any = None) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(Narration, "transition", broken)
    desk: DeskHarness = await make_desk(
        narrator=_OffScript(), reviewer=_NeverReviews(), narration="free"
    )
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"))
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    [transition] = [b for b in turn.blocks if b.kind == "transition"]
    assert transition.author == "server"
    assert (await desk.runtime.load_turn("acct_1", turn.turn_id)) == turn
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert record.phase is TurnPhase.DELIVERED
    assert [(a.purpose, a.code) for a in record.provider_attempts if a.purpose == "narrate"] == [
        ("narrate", "RecursionError")
    ]


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


def _with_value(part: Any, value: Any) -> Any:
    """`part` (an act) whose one argument holds `value`, past the argument's own rules (as an
    interpreter that builds its proposal with model_construct would hand it over)."""
    from turnframe_core import ArgumentValue

    [argument] = part.arguments
    forged = ArgumentValue.model_construct(
        name=argument.name, value=value, evidence=argument.evidence
    )
    return part.model_copy(update={"arguments": (forged,)})


@pytest.mark.parametrize(
    "value",
    ["Grace\ud800", "Grace\x00", _nested(30)],
    ids=["lone-surrogate", "nul", "past-the-depth-cap"],
)
async def test_an_unfit_value_from_the_interpreter_is_refused_before_anything_runs(
    desk: DeskHarness, value: Any
) -> None:
    desk.ready_trip()
    part = _with_value(act("a1", NAME, "h1", "Grace", name="Grace"), value)
    turn = await desk.say("Name Grace Hopper", part, turn_id="turn_unfit")
    assert await desk.events() == []
    assert desk.notice_codes(turn) == [codes.NOTICE_NOT_UNDERSTOOD]
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert record.phase is TurnPhase.DELIVERED
    assert [p.code for p in record.understanding_problems] == [codes.UNDERSTANDING_UNFIT_VALUE]
    again = await desk.say("Name Grace Hopper", turn_id="turn_unfit")  # a retry gets the same reply
    assert again == turn


class _OddlyLabelled(_OffScript):
    """A narrator whose description of itself, and whose error, are not what a record holds."""

    model_name = None

    async def transition(self, request: Any) -> Any:
        error = RuntimeError("the provider answered 503")
        error.code = 503  # type: ignore[attr-defined]  # an HTTP library's own kind of code
        raise error


async def test_a_port_that_describes_itself_oddly_still_gets_the_turn_its_reply(
    make_desk,
) -> None:
    desk: DeskHarness = await make_desk(
        narrator=_OddlyLabelled(), reviewer=_NeverReviews(), narration="free"
    )
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"))
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert record.phase is TurnPhase.DELIVERED
    [attempt] = [a for a in record.provider_attempts if a.purpose == "transition"]
    assert (attempt.model, attempt.code) == ("unspecified", "RuntimeError")
