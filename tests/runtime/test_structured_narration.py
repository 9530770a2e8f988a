"""Structured narration, the default: a narrator chooses moves and the server renders each through
its own copy in the turn's locale. Whatever else a narrator sends (free text, an unknown move, a
ref not in this turn, a variant out of range, a move without copy in the locale) is a typed
finding, never a crash and never shown: one rewrite, then server copy. No reviewer is called.
Free narration is opt-in and needs a reviewer passed explicitly."""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest

from turnframe_core import AnswerBlock, Move, MoveKind, TransitionBlock, codes
from turnframe_runtime import ReviewerRequired, RuntimeConfig, ServerCopy
from turnframe_runtime.copy import CopyGap, MissingCopy, RenderedCopy
from turnframe_runtime.ports import TransitionRequest
from turnframe_test import DeskHarness, ScriptedNarrator, ScriptedReviewer
from turnframe_test.sample.demo import DEMO_LOCALES, EMBEDDED, run_demo
from turnframe_test.sample.narrator import DeskNarrator
from turnframe_test.sample.travel import trip_copy
from turnframe_test.understandings import act, question

NAME = "trip.set_name"
LOCALES = ("en", "it", "de")


def _transition(turn: Any) -> TransitionBlock:
    [block] = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
    return block


def _receipt_ref(request: TransitionRequest) -> str:
    [receipt] = [r for r in request.refs if r.kind == "receipt"]
    return receipt.ref


def _introducing(request: TransitionRequest) -> Mapping[str, Any]:
    """Moves a model would choose for a turn with one receipt."""
    return {
        "kind": "transition",
        "moves": [
            {"move": "acknowledge", "variant": 1},
            {"move": "introduce", "ref": _receipt_ref(request)},
            {"move": "close", "variant": 2},
        ],
    }


async def _named(desk: DeskHarness, locale: str = "en") -> Any:
    desk.ready_trip()
    return await desk.say(
        "Name Grace Hopper",
        act("a1", NAME, "h1", "Grace Hopper", name="Grace Hopper"),
        locale=locale,
    )


async def _findings(desk: DeskHarness, turn: Any) -> list[tuple[str, str, int | None, str]]:
    record = await desk.runtime.replay(desk.account_id, turn.replay_token)
    return [(f.check, f.code, f.move, f.replaced_by) for f in record.prose_findings]


# --- what is shown --------------------------------------------------------------------------------


@pytest.mark.parametrize("locale", LOCALES)
async def test_a_structured_reply_renders_through_server_copy_in_the_turns_locale(
    make_desk, locale: str
) -> None:
    narrator = ScriptedNarrator().expect("transition", _introducing)
    desk: DeskHarness = await make_desk(narrator=narrator)
    turn = await _named(desk, locale)

    transition = _transition(turn)
    [receipt] = [b for b in turn.blocks if b.kind == "receipt"]
    copy = trip_copy().serving(LOCALES)  # the copy the desk serves
    expected = [
        copy.render("turnframe.move.acknowledge.1", locale, {}).text,
        copy.render(
            "turnframe.move.introduce.0", locale, {"says": receipt.title + ".", "kind": "receipt"}
        ).text,
        copy.render("turnframe.move.close.2", locale, {}).text,
    ]
    assert transition.author == "model"
    assert transition.text == " ".join(expected)
    assert [m.move for m in transition.moves] == ["acknowledge", "introduce", "close"]
    assert transition.copy_ref is not None
    assert (transition.copy_ref.template_id, transition.copy_ref.locale) == (
        "turnframe.move.acknowledge.1",
        locale,
    )
    assert [type(f).__name__ for f in transition.facts_used] == ["OperationalOutcome"]
    record = await desk.runtime.replay(desk.account_id, turn.replay_token)
    rendered = [
        r.template_id for r in record.copy_renders if r.template_id.startswith("turnframe.move.")
    ]
    assert rendered == [
        "turnframe.move.acknowledge.1",
        "turnframe.move.introduce.0",
        "turnframe.move.close.2",
    ]
    assert record.prose_findings == ()
    assert await desk.runtime.load_turn(desk.account_id, turn.turn_id) == turn
    narrator.verify()


async def test_the_request_names_what_moves_may_be_about(make_desk) -> None:
    narrator = ScriptedNarrator().transition_moves(Move(move=MoveKind.CLOSE))
    desk: DeskHarness = await make_desk(narrator=narrator)
    turn = await _named(desk)

    [request] = narrator.calls_for("transition")
    [receipt] = [b for b in turn.blocks if b.kind == "receipt"]
    [offer] = turn.offers
    assert [(r.ref, r.kind, r.says) for r in request.refs] == [
        (receipt.block_id, "receipt", receipt.title),
        ("operation.1", "operation", offer.words),
    ]
    assert {MoveKind.INTRODUCE, MoveKind.OFFER, MoveKind.ASK} <= set(request.moves)
    assert MoveKind.EXPLAIN not in request.moves  # no card in this turn
    assert MoveKind.CANNOT_ANSWER not in request.moves
    assert all(request.variants[m.value] >= 3 for m in MoveKind)
    narrator.verify()


async def test_a_structured_answer_states_an_allowed_fact_in_the_workflows_words(
    make_desk,
) -> None:
    def stating(request: Any) -> Mapping[str, Any]:
        [email] = [r for r in request.refs if r.kind == "fact" and "ada@" in r.says]
        return {
            "kind": "answer",
            "question_id": "q1",
            "moves": [{"move": "state", "ref": email.ref, "variant": 1}],
        }

    narrator = ScriptedNarrator().expect("answer", stating)
    desk: DeskHarness = await make_desk(narrator=narrator)
    desk.ready_trip()
    turn = await desk.say("What is my email?", question("q1", "What is my email?", "h1"))

    [answer] = [b for b in turn.blocks if isinstance(b, AnswerBlock)]
    assert (answer.author, answer.status) == ("model", "answered")
    assert answer.text == "What I have on file: email ada@example.com."
    assert [(f.field, f.value) for f in answer.facts_used] == [("email", "ada@example.com")]  # type: ignore[union-attr]
    assert [(m.move, m.ref) for m in answer.moves] == [("state", answer.moves[0].ref)]
    narrator.verify()


async def test_an_answer_that_neither_states_asks_nor_declines_is_no_answer(make_desk) -> None:
    """An answer of courtesies only would be recorded as answering a question it never
    answered: refused (bad shape), rewritten once, then server copy; one that says it cannot
    answer is recorded as unsupported."""
    narrator = ScriptedNarrator()
    narrator.answer_moves("q1", Move(move=MoveKind.GREET), Move(move=MoveKind.CLOSE))
    narrator.answer_moves("q1", Move(move=MoveKind.CANNOT_ANSWER))
    desk: DeskHarness = await make_desk(narrator=narrator)
    desk.ready_trip()
    turn = await desk.say("What is my email?", question("q1", "What is my email?", "h1"))

    [answer] = [b for b in turn.blocks if isinstance(b, AnswerBlock)]
    assert (answer.author, answer.status) == ("model", "unsupported")
    assert [m.move for m in answer.moves] == ["cannot_answer"]
    findings = await _findings(desk, turn)
    assert findings == [("moves", codes.NARRATION_BAD_SHAPE, None, "rewrite")]
    narrator.verify()


async def test_structured_narration_calls_no_reviewer(make_desk) -> None:
    reviewer = ScriptedReviewer()  # raises if asked
    narrator = ScriptedNarrator().transition_moves(Move(move=MoveKind.CLOSE))
    desk: DeskHarness = await make_desk(narrator=narrator, reviewer=reviewer)
    turn = await _named(desk)
    assert _transition(turn).author == "model"
    assert reviewer.requests == []
    narrator.verify()


# --- explaining a card's options ------------------------------------------------------------------

#: the cards a turn shows: the words and act that raise it, its options, and the parameters its
#: workflow words their effects with (the card's metadata)
CARDS: dict[str, tuple[str, Any, tuple[str, ...], Mapping[str, Any]]] = {
    "rebooking": (
        "Rebook the outbound flight",
        act("a1", "trip.request_rebooking", "h1", "Rebook", leg="outbound"),
        ("opt_rebook", "opt_keep"),
        {"leg": "outbound"},
    ),
    "withdrawal": (
        "Please withdraw the trip",
        act("a1", "trip.withdraw", "h1", "withdraw the trip"),
        ("opt_confirm", "opt_decline"),
        {},
    ),
}


def _explaining(options: Sequence[str]) -> Any:
    """Moves a model would choose for a turn with one card: explain each option, in turn."""

    def draft(request: TransitionRequest) -> Mapping[str, Any]:
        [card] = [r for r in request.refs if r.kind == "card"]
        moves = [
            {"move": "explain", "ref": card.ref, "option": option, "variant": variant}
            for variant, option in enumerate(options)
        ]
        return {"kind": "transition", "moves": moves}

    return draft


@pytest.mark.parametrize("locale", LOCALES)
@pytest.mark.parametrize("shown", sorted(CARDS))
async def test_a_shown_cards_options_are_explained_in_the_workflows_words(
    make_desk, shown: str, locale: str
) -> None:
    said, raised, options, params = CARDS[shown]
    narrator = ScriptedNarrator().expect("transition", _explaining(options))
    desk: DeskHarness = await make_desk(narrator=narrator)
    desk.ready_trip()
    turn = await desk.say(said, raised, locale=locale)

    [request] = narrator.calls_for("transition")
    [referred] = [r for r in request.refs if r.kind == "card"]
    copy = trip_copy().serving(LOCALES)  # the copy the desk serves
    effects = {o.option: o.effect for o in referred.options}
    assert None not in effects.values()  # the workflow words every option's effect
    assert effects == {o: copy.render(f"trip.option.{o}", locale, params).text for o in options}
    card = desk.card(turn)
    labels = {o.option_id: o.label for o in card.options}
    expected = [
        copy.render(
            f"turnframe.move.explain.{variant}",
            locale,
            {"card": card.title, "option": labels[option], "effect": effects[option]},
        ).text
        for variant, option in enumerate(options)
    ]
    transition = _transition(turn)
    assert transition.author == "model"
    assert [(m.move, m.option) for m in transition.moves] == [("explain", o) for o in options]
    assert transition.text == " ".join(t.strip() for t in expected)
    assert all(str(effect) in transition.text for effect in effects.values())
    narrator.verify()


# --- what is refused ------------------------------------------------------------------------------

FREE_TEXT = "Your flight is rebooked and the airline confirmed it."
BAD_DRAFTS: list[tuple[str, Any, int | None]] = [
    (codes.NARRATION_FREE_TEXT, FREE_TEXT, None),
    (codes.NARRATION_FREE_TEXT, {"kind": "transition", "text": FREE_TEXT, "facts_used": []}, None),
    (codes.NARRATION_UNKNOWN_MOVE, {"kind": "transition", "moves": [{"move": "rebook"}]}, 0),
    (
        codes.NARRATION_REF_NOT_IN_TURN,
        {"kind": "transition", "moves": [{"move": "close"}, {"move": "introduce", "ref": "blk_x"}]},
        1,
    ),
    (
        codes.NARRATION_REF_NOT_IN_TURN,
        {"kind": "transition", "moves": [{"move": "offer", "ref": "operation.7"}]},
        0,
    ),
    (
        codes.NARRATION_VARIANT_OUT_OF_RANGE,
        {"kind": "transition", "moves": [{"move": "close", "variant": 99}]},
        0,
    ),
    (
        codes.NARRATION_MOVE_NOT_OFFERED,
        {"kind": "transition", "moves": [{"move": "cannot_answer"}]},
        0,
    ),
    (codes.NARRATION_BAD_SHAPE, {"kind": "transition", "moves": []}, None),
    (codes.NARRATION_BAD_SHAPE, {"kind": "answer", "moves": [{"move": "close"}]}, None),
]


@pytest.mark.parametrize(("code", "draft", "index"), BAD_DRAFTS, ids=lambda v: str(v)[:40])
async def test_a_draft_the_server_cannot_render_is_a_typed_finding_never_shown(
    make_desk, code: str, draft: Any, index: int | None
) -> None:
    narrator = ScriptedNarrator().expect("transition", draft).expect("transition", draft)
    desk: DeskHarness = await make_desk(narrator=narrator)
    turn = await _named(desk)

    transition = _transition(turn)
    assert transition.author == "server" and not transition.moves
    assert "rebooked" not in desk.texts(turn)
    assert await _findings(desk, turn) == [("moves", code, index, "server_copy")] * 2
    first, second = narrator.calls_for("transition")
    assert first.findings == () and second.findings
    narrator.verify()


async def test_a_refused_draft_gets_one_rewrite_that_may_pass(make_desk) -> None:
    narrator = ScriptedNarrator().transition_text(FREE_TEXT).expect("transition", _introducing)
    desk: DeskHarness = await make_desk(narrator=narrator)
    turn = await _named(desk)

    transition = _transition(turn)
    assert transition.author == "model" and len(transition.moves) == 3
    assert await _findings(desk, turn) == [("moves", codes.NARRATION_FREE_TEXT, None, "rewrite")]
    record = await desk.runtime.replay(desk.account_id, turn.replay_token)
    drafts = [a for a in record.provider_attempts if a.purpose == "transition"]
    assert [a.code for a in drafts] == [codes.NARRATION_FREE_TEXT, None]
    assert "rebooked" not in record.model_dump_json()
    narrator.verify()


class _WithoutMoveCopyIn:
    """Server copy that has no `state` move in one locale."""

    def __init__(self, copy: ServerCopy, locale: str) -> None:
        self.copy = copy
        self.locale = locale

    def render(self, template_id: str, locale: str, params: Mapping[str, Any]) -> RenderedCopy:
        if locale == self.locale and template_id.startswith("turnframe.move.state."):
            raise MissingCopy([(locale, template_id)])
        return self.copy.render(template_id, locale, params)

    def missing(
        self,
        locales: Iterable[str],
        required: Iterable[str] = (),
        samples: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    ) -> list[CopyGap]:
        return self.copy.missing(locales, required, samples)

    def has(self, template_id: str) -> bool:
        return self.copy.has(template_id)

    def serving(self, locales: Iterable[str]) -> ServerCopy:
        return _WithoutMoveCopyIn(self.copy.serving(locales), self.locale)


async def test_a_move_whose_copy_the_locale_lacks_is_a_typed_finding(make_desk) -> None:
    def stating(request: Any) -> Mapping[str, Any]:
        fact = next(r for r in request.refs if r.kind == "fact")
        return {
            "kind": "answer",
            "question_id": "q1",
            "moves": [{"move": "state", "ref": fact.ref}],
        }

    narrator = ScriptedNarrator().expect("answer", stating).expect("answer", stating)
    desk: DeskHarness = await make_desk(
        narrator=narrator, copy=_WithoutMoveCopyIn(trip_copy(), "it")
    )
    desk.ready_trip()
    turn = await desk.say("Qual è la mia email?", question("q1", "email?", "h1"), locale="it")

    [answer] = [b for b in turn.blocks if isinstance(b, AnswerBlock)]
    assert answer.author == "server"
    assert (
        await _findings(desk, turn)
        == [("moves", codes.NARRATION_COPY_MISSING, 0, "server_copy")] * 2
    )
    narrator.verify()


async def test_a_narrator_that_fails_leaves_server_copy(make_desk) -> None:
    narrator = ScriptedNarrator().expect("transition", RuntimeError("provider down"))
    desk: DeskHarness = await make_desk(narrator=narrator)
    turn = await _named(desk)
    assert _transition(turn).author == "server"
    narrator.verify()


# --- the modes ------------------------------------------------------------------------------------


def test_structured_narration_is_the_default_and_the_mode_is_validated() -> None:
    assert RuntimeConfig().narration == "structured"
    assert RuntimeConfig(narration="free").narration == "free"
    with pytest.raises(ValueError, match="narration"):
        RuntimeConfig(narration="poetic")  # type: ignore[arg-type]


async def test_free_narration_without_an_explicit_reviewer_refuses_to_start(make_desk) -> None:
    narrator = ScriptedNarrator()  # it offers a reviewer of its own: that does not count
    free = RuntimeConfig(locales=LOCALES, narration="free")
    with pytest.raises(ReviewerRequired):
        await make_desk(narrator=narrator, config=free)


async def test_free_narration_shows_reviewed_text(make_desk) -> None:
    narrator = ScriptedNarrator().transition_text("All set.").review_passes()
    free = RuntimeConfig(locales=LOCALES, narration="free")
    desk: DeskHarness = await make_desk(narrator=narrator, reviewer=narrator.reviewer, config=free)
    turn = await _named(desk)
    transition = _transition(turn)
    assert (transition.author, transition.text, transition.moves) == ("model", "All set.", ())
    narrator.verify()


async def test_free_narration_refuses_a_value_nothing_in_the_turn_grounds(
    make_desk, monkeypatch
) -> None:
    """A reference the turn never issued is refused by value grounding (the wording guard alone
    passes the sentence), rewritten once, then server copy; the grounds hold the turn's
    receipt and the user's own words."""
    from turnframe_core import codes
    from turnframe_core.wording import ungrounded_values
    from turnframe_runtime import narration

    seen: list[tuple[str, str, tuple[str, ...]]] = []

    def spied(text: str, locale: str, grounds: Sequence[str], *rest: Any) -> Any:
        seen.append((text, locale, tuple(grounds)))
        return ungrounded_values(text, locale, grounds, *rest)

    monkeypatch.setattr(narration, "ungrounded_values", spied)
    narrator = ScriptedNarrator().transition_text("Your reference is K7XQ2M.").review_passes()
    narrator.transition_text("Your reference is K7XQ2M.").review_passes()
    free = RuntimeConfig(locales=LOCALES, narration="free")
    desk: DeskHarness = await make_desk(narrator=narrator, reviewer=narrator.reviewer, config=free)
    turn = await _named(desk)

    assert _transition(turn).author == "server" and "K7XQ2M" not in desk.texts(turn)
    text, locale, grounds = seen[0]
    [receipt] = [b for b in turn.blocks if b.kind == "receipt"]
    assert (text, locale) == ("Your reference is K7XQ2M.", "en")
    assert receipt.title in grounds and "Name Grace Hopper" in grounds
    record = await desk.stores.replay.get(desk.account_id, turn.turn_id)
    assert {f.code for f in record.prose_findings} == {codes.CLAIM_UNGROUNDED_VALUE}
    narrator.verify()


# --- the sample desk's demo ----------------------------------------------------------------------

SHOWN_ABOVE = {"en": "As shown above:", "it": "Come indicato sopra:", "de": "Wie oben angegeben:"}


@pytest.mark.parametrize("locale", LOCALES)
async def test_the_demo_narrates_with_moves_in_its_language(make_desk, locale: str) -> None:
    out = io.StringIO()
    desk: DeskHarness = await make_desk(outbox=EMBEDDED, narrator=DeskNarrator())
    turns = await run_demo(out, desk=desk, locale=locale)

    narrated = [
        b
        for t in turns
        for b in t.blocks
        if isinstance(b, TransitionBlock) and b.author == "model" and b.moves
    ]
    assert len(narrated) >= 5
    assert all(b.copy_ref is not None and b.copy_ref.locale == locale for b in narrated)
    assert SHOWN_ABOVE[locale] in out.getvalue()
    assert DEMO_LOCALES[locale]["moves"] in out.getvalue()
