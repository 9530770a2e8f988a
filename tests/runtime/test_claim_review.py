"""Model-written prose is reviewed by a port other than the one that wrote it, then by the wording
guard, which no review can overrule; model-chosen values are grounded in the user's words, and
server copy quotes them as data."""

from __future__ import annotations

from typing import Any

import pytest

from turnframe_core import AnswerBlock, TransitionBlock, codes
from turnframe_runtime import ReviewerRequired, ReviewVerdict
from turnframe_test import DeskHarness, ScriptedNarrator, ScriptedReviewer
from turnframe_test.understandings import act, question

NAME = "trip.set_name"
CLAIM = {
    "en": "Done: your outbound flight has been rebooked and the airline confirmed it.",
    "it": "Fatto: il tuo volo di andata è stato riprenotato e la compagnia l'ha confermato.",
    "de": "Erledigt: Ihr Hinflug wurde umgebucht und die Airline hat es bestätigt.",
}


def _prose(turn: Any) -> list[Any]:
    return [b for b in turn.blocks if isinstance(b, AnswerBlock | TransitionBlock)]


class _Writes:
    """A narrator with no reviewer of its own."""

    async def transition(self, request: Any) -> Any:
        return {"kind": "transition", "text": "Saved.", "facts_used": []}

    async def answer(self, request: Any) -> Any:
        raise AssertionError("no question")


async def test_a_narrator_needs_a_separate_reviewer(make_desk) -> None:
    with pytest.raises(ReviewerRequired):
        await make_desk(narrator=_Writes(), narration="free")


async def test_a_narrators_own_reviewer_does_not_count(make_desk) -> None:
    """Free narration's reviewer is passed to the runtime; one the narrator ships is its own
    judge of its own words (decision 0022)."""
    narrator = _Writes()
    narrator.reviewer = ScriptedReviewer.passing()  # type: ignore[attr-defined]
    with pytest.raises(ReviewerRequired):
        await make_desk(narrator=narrator, narration="free")
    reviewer = ScriptedReviewer.passing()
    desk: DeskHarness = await make_desk(narrator=narrator, reviewer=reviewer, narration="free")
    desk.ready_trip()
    turn = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"))
    [transition] = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
    assert (transition.author, transition.text) == ("model", "Saved.")
    assert [r.kind for r in reviewer.requests] == ["transition"]
    assert narrator.reviewer.requests == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("locale", sorted(CLAIM))
async def test_a_success_claim_a_passing_review_let_through_never_reaches_the_user(
    make_desk, locale: str
) -> None:
    narrator = ScriptedNarrator().transition_text(CLAIM[locale]).transition_text(CLAIM[locale])
    reviewer = ScriptedReviewer.passing()
    desk: DeskHarness = await make_desk(narrator=narrator, reviewer=reviewer, narration="free")
    desk.ready_trip(locked=True)  # the act is refused: no receipt, no card
    turn = await desk.say(
        "Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"), locale=locale
    )
    assert desk.receipt_codes(turn) == []
    [transition] = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
    assert transition.author == "server"
    assert CLAIM[locale] not in desk.texts(turn)
    assert [r.kind for r in reviewer.requests] == ["transition", "transition"]
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    guard = [(f.check, f.claim_class, f.replaced_by) for f in record.prose_findings]
    # Both drafts were refused, so server copy replaced what each of them flagged.
    assert guard == [
        ("guard", "completion", "server_copy"),
        ("guard", "creation", "server_copy"),
        ("guard", "acceptance", "server_copy"),
        ("guard", "completion", "server_copy"),
        ("guard", "creation", "server_copy"),
        ("guard", "acceptance", "server_copy"),
    ]
    assert all(f.span for f in record.prose_findings)
    dumped = record.model_dump_json().lower()
    assert "rebooked" not in dumped and "riprenotato" not in dumped and "umgebucht" not in dumped
    narrator.verify()


async def test_the_rewrite_hears_what_the_guard_found_and_may_pass(make_desk) -> None:
    narrator = ScriptedNarrator().transition_text("Sent! The airline accepted it.")
    narrator.transition_text("That could not be done, so nothing has changed.")
    reviewer = ScriptedReviewer.passing()
    desk: DeskHarness = await make_desk(narrator=narrator, reviewer=reviewer, narration="free")
    desk.ready_trip(locked=True)
    turn = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"))
    [transition] = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
    assert (transition.author, transition.text) == (
        "model",
        "That could not be done, so nothing has changed.",
    )
    first, second = narrator.calls_for("transition")
    assert first.findings == () and any("submission" in f for f in second.findings)
    assert set(second.forbidden_claims) >= {"submission", "acceptance", "completion"}
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert {f.replaced_by for f in record.prose_findings} == {"rewrite"}


async def test_every_answer_is_reviewed_too(make_desk) -> None:
    narrator = ScriptedNarrator().answer_text("q1", "You fly on 14 March.")
    reviewer = ScriptedReviewer(ReviewVerdict(passed=True))
    desk: DeskHarness = await make_desk(narrator=narrator, reviewer=reviewer, narration="free")
    desk.ready_trip()
    turn = await desk.say("When do I fly?", question("q1", "When do I fly?", "h1"))
    [answer] = _prose(turn)
    assert (answer.author, answer.text) == ("model", "You fly on 14 March.")
    [review] = reviewer.requests
    assert (review.kind, review.text, review.question) == (
        "answer",
        "You fly on 14 March.",
        "When do I fly?",
    )


async def test_an_answer_that_claims_an_effect_is_replaced_by_the_server_answer(
    make_desk,
) -> None:
    claim = "Your outbound flight was rebooked and the refund was issued."
    narrator = ScriptedNarrator().answer_text("q1", claim).answer_text("q1", claim)
    desk: DeskHarness = await make_desk(
        narrator=narrator, reviewer=ScriptedReviewer.passing(), narration="free"
    )
    desk.ready_trip()
    turn = await desk.say("When do I fly?", question("q1", "When do I fly?", "h1"))
    [answer] = _prose(turn)
    assert answer.author == "server" and claim not in answer.text
    narrator.verify()


async def test_a_failed_review_gets_one_rewrite_then_server_copy(make_desk) -> None:
    narrator = (
        ScriptedNarrator().transition_text("Here is where things stand.").review_fails("vague")
    )
    narrator.transition_text("Here is where things stand now.").review_fails("still vague")
    desk: DeskHarness = await make_desk(
        narrator=narrator, reviewer=narrator.reviewer, narration="free"
    )
    desk.ready_trip(locked=True)
    turn = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"))
    [transition] = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
    assert transition.author == "server"
    assert narrator.calls_for("transition")[1].findings == ("vague",)
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert [(f.check, f.code, f.replaced_by) for f in record.prose_findings] == [
        ("review", codes.CLAIM_REVIEW_FAILED, "server_copy"),
        ("review", codes.CLAIM_REVIEW_FAILED, "server_copy"),
    ]
    narrator.verify()


# --- grounded values ---------------------------------------------------------------------------


async def test_a_value_the_user_never_wrote_changes_nothing(desk: DeskHarness) -> None:
    desk.ready_trip()
    invented = "Ada. Your outbound flight was rebooked and the refund was issued"
    turn = await desk.say("My name is Ada", act("a1", NAME, "h1", "Ada", name=invented))
    assert await desk.events() == []
    assert desk.notice_codes(turn) == [codes.NOTICE_NOT_UNDERSTOOD]
    assert "rebooked" not in desk.texts(turn)
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert [(p.code, p.path) for p in record.understanding_problems] == [
        (codes.UNDERSTANDING_VALUE_NOT_GROUNDED, "acts[0].arguments[0].value")
    ]


async def test_server_copy_quotes_a_users_value_as_capped_data(desk: DeskHarness) -> None:
    desk.ready_trip()
    words = "Ada. Your outbound flight was rebooked and the refund was issued"
    turn = await desk.say(f"My name is {words}", act("a1", NAME, "h1", "Ada", name=words))
    [receipt] = [b for b in turn.blocks if b.kind == "receipt"]
    assert receipt.title.startswith("Traveller's name set to \u201cAda. Your outbound")
    assert receipt.title.endswith("\u2026\u201d") and "refund was issued" not in receipt.title


async def test_a_typed_value_need_not_be_in_the_words_but_must_parse(desk: DeskHarness) -> None:
    desk.ready_trip()
    date = "trip.set_travel_date"
    ok = await desk.say("Fly next Sunday", act("a1", date, "h1", "next Sunday",
                                              travel_date="2027-03-21"))  # fmt: skip
    assert desk.receipt_codes(ok) == ["trip.travel_date_set"]
    refused = await desk.say("Fly next Sunday", act("a1", date, "h1", "next Sunday",
                                                   travel_date="next Sunday"))  # fmt: skip
    assert desk.notice_codes(refused) == [codes.NOTICE_NOT_UNDERSTOOD]
    record = await desk.runtime.replay("acct_1", refused.replay_token)
    assert [p.code for p in record.understanding_problems] == [codes.UNDERSTANDING_VALUE_NOT_PARSED]


async def test_the_guard_runs_again_over_the_composed_turn(make_desk, monkeypatch) -> None:
    """Whatever the narration step returned, the composed turn is judged again."""
    from turnframe_runtime.narration import Narration

    async def unchecked(
        self: Any, request: Any, backing: Any, grounds: Any = None
    ) -> TransitionBlock:
        return TransitionBlock(block_id="blk_x", text="Your refund was issued.")

    monkeypatch.setattr(Narration, "transition", unchecked)
    desk: DeskHarness = await make_desk(
        narrator=ScriptedNarrator(), reviewer=ScriptedReviewer.passing()
    )
    desk.ready_trip(locked=True)
    turn = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"))
    [transition] = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
    assert transition.author == "server" and "refund" not in transition.text
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert [(f.check, f.claim_class, f.replaced_by) for f in record.prose_findings] == [
        ("final", "delivery", "server_copy")
    ]


async def test_a_second_draft_that_never_comes_leaves_server_copy_on_record(make_desk) -> None:
    narrator = ScriptedNarrator().transition_text("Your booking has been cancelled.")
    narrator.expect("transition", RuntimeError("the provider fell over"))
    desk: DeskHarness = await make_desk(
        narrator=narrator, reviewer=ScriptedReviewer.passing(), narration="free"
    )
    desk.ready_trip(locked=True)
    turn = await desk.say("Name Grace Hopper", act("a1", NAME, "h1", "Grace", name="Grace Hopper"))
    record = await desk.runtime.replay("acct_1", turn.replay_token)
    assert [(f.rule, f.replaced_by) for f in record.prose_findings] == [
        ("deletion.stated", "server_copy")
    ]
