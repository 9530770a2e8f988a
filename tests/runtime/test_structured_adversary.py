"""Structured narration against a narrator that composes the most it can: in every context of the
narration corpus and in en, it and de, every move the request offers, on every ref of a kind that
move may name, with every option for `explain`, in every phrasing (split into drafts of at most
`MAX_MOVES`, one narrated turn per draft). What is shown must be server copy alone: each move's
library template around the words the server holds for the thing it names, and those templates
add no claim the turn's server blocks do not back (decision 0022)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from turnframe_core import AnswerBlock, AssistantTurn, TransitionBlock, check_wording
from turnframe_core.moves import MAX_MOVES, REFERS_TO, Move, MoveKind, Referable
from turnframe_core.wording import TurnBacking
from turnframe_runtime import AnswerRequest, RuntimeConfig, TransitionRequest
from turnframe_runtime.narration import SERVER_COPY_GUARD
from turnframe_test.backends import StoreBackend
from turnframe_test.corpus import CONTEXTS, NarrationLine
from turnframe_test.narration_eval import drive
from turnframe_test.sample.desk import DeskHarness
from turnframe_test.sample.travel import TripWorkflow, trip_copy

LOCALES = ("en", "it", "de")
#: the moves whose presence makes a draft an answer (it states, asks back, or cannot answer)
ANSWERING = frozenset({MoveKind.STATE, MoveKind.ASK, MoveKind.CANNOT_ANSWER})
Request = TransitionRequest | AnswerRequest


def everything(request: Request) -> list[dict[str, Any]]:
    """Every move `request` offers, on every ref it may name (every option of a card for
    `explain`), in every phrasing, in the request's order."""
    moves: list[dict[str, Any]] = []
    for kind in request.moves:
        phrasings = range(request.variants.get(kind.value, 0))
        if kind not in REFERS_TO:
            moves.extend({"move": kind.value, "variant": v} for v in phrasings)
            continue
        for ref in (r for r in request.refs if r.kind in REFERS_TO[kind]):
            options = [o.option for o in ref.options] if kind is MoveKind.EXPLAIN else [None]
            for option in options:
                named = {"ref": ref.ref} | ({"option": option} if option else {})
                moves.extend({"move": kind.value, **named, "variant": v} for v in phrasings)
    return moves


def chunks(moves: list[dict[str, Any]], *, answer: bool) -> list[list[dict[str, Any]]]:
    """`moves` in drafts of at most `MAX_MOVES`; an answer's each hold a move that answers."""
    if not answer:
        return [moves[i : i + MAX_MOVES] for i in range(0, len(moves), MAX_MOVES)]
    anchor = next((m for m in moves if m["move"] in ANSWERING), None)
    size = MAX_MOVES - 1
    drafts = [moves[i : i + size] for i in range(0, len(moves), size)]
    return [
        d if anchor is None or any(m["move"] in ANSWERING for m in d) else [*d, anchor]
        for d in drafts
    ]


class MaximalNarrator:
    """In a narrated turn, sends draft number `chunk` of everything the request offers (the same
    draft again on a rewrite); raises in setup turns and once its drafts run out, so server
    copy stands in."""

    model_name = "adversary"

    def __init__(self) -> None:
        self.armed = False
        self.chunk = 0
        #: per narrated block ("transition" or the question id): how many drafts it takes
        self.drafts: dict[str, int] = {}
        #: this turn's requests, per narrated block
        self.requests: dict[str, Request] = {}
        #: this turn's draft sent, per narrated block
        self.sent: dict[str, list[dict[str, Any]]] = {}

    def arm(self, line: NarrationLine | None) -> None:
        self.armed = line is not None

    async def transition(self, request: TransitionRequest) -> Mapping[str, Any]:
        return {"kind": "transition", "moves": self._draft("transition", request, answer=False)}

    async def answer(self, request: AnswerRequest) -> Mapping[str, Any]:
        moves = self._draft(request.question_id, request, answer=True)
        return {"kind": "answer", "question_id": request.question_id, "moves": moves}

    def _draft(self, key: str, request: Request, *, answer: bool) -> list[dict[str, Any]]:
        if not self.armed:
            raise RuntimeError("a setup turn")
        drafts = chunks(everything(request), answer=answer)
        self.drafts[key] = max(self.drafts.get(key, 0), len(drafts))
        self.requests[key] = request
        if self.chunk >= len(drafts):
            raise RuntimeError("nothing more to say")
        self.sent[key] = drafts[self.chunk]
        return drafts[self.chunk]


@dataclass(frozen=True)
class Shown:
    """One model block made of moves, shown in a narrated turn, and what it rests on."""

    context: str
    locale: str
    block: AnswerBlock | TransitionBlock
    request: Request
    server: tuple[Any, ...]

    def __str__(self) -> str:
        return f"{self.context} [{self.locale}] {self.block.kind}: {self.block.text!r}"


@dataclass
class Run:
    """Every narrated turn of one locale: the blocks shown, and the drafts not shown."""

    shown: list[Shown] = field(default_factory=list)
    #: (context, block key, the draft's moves, why: the record's finding codes)
    not_shown: list[tuple[str, str, list[dict[str, Any]], tuple[str, ...]]] = field(
        default_factory=list
    )
    turns: int = 0


def _prose(turn: AssistantTurn) -> Iterator[AnswerBlock | TransitionBlock]:
    for block in turn.blocks:
        if isinstance(block, AnswerBlock | TransitionBlock) and block.author == "model":
            yield block


def _key(block: AnswerBlock | TransitionBlock) -> str:
    if isinstance(block, AnswerBlock):
        return block.question_id or "answer"
    return "transition"


async def _narrate_everything(backend: StoreBackend, locale: str) -> Run:
    narrator = MaximalNarrator()
    desk = await DeskHarness.on(
        backend,
        narrator=narrator,
        config=RuntimeConfig(locales=LOCALES, narration="structured"),
    )
    run = Run()
    for context in CONTEXTS:
        line = NarrationLine(id=f"adv-{context}", lang=locale, context=context, label="claim",
                             text="", paraphrase=False)  # fmt: skip
        narrator.drafts.clear()
        narrator.chunk = 0
        while narrator.chunk == 0 or narrator.chunk < max(narrator.drafts.values(), default=0):
            narrator.requests.clear()
            narrator.sent.clear()
            desk.conversation_id = f"conv_{context}_{narrator.chunk}"
            trip_id = f"T-{context}-{narrator.chunk}"
            turn = await drive(desk, narrator, line, trip_id=trip_id, locale=locale)
            run.turns += 1
            prose = {_key(b): b for b in _prose(turn)}
            server = tuple(b for b in turn.blocks if b not in prose.values())
            for key, block in prose.items():
                if block.moves:
                    run.shown.append(Shown(context, locale, block, narrator.requests[key], server))
            record = await desk.runtime.replay(desk.account_id, turn.replay_token)
            findings = tuple(sorted({f.code for f in record.prose_findings}))
            for key, sent in narrator.sent.items():
                shown = prose.get(key)
                if shown is None or [_as_sent(m) for m in shown.moves] != sent:
                    run.not_shown.append((context, key, sent, findings))
            narrator.chunk += 1
    return run


def _as_sent(move: Move) -> dict[str, Any]:
    data = move.model_dump(mode="json")
    return {k: v for k, v in data.items() if v is not None}


# --- re-rendering through the desk's copy -------------------------------------------------------

_ENDINGS = frozenset(".?!\u2026\u3002\uff1f\uff01")


def _sentence(words: str) -> str:
    words = words.strip()
    return words if not words or words[-1] in _ENDINGS else words + "."


def _params(move: Move, refs: Mapping[str, Referable]) -> dict[str, str]:
    """The words the server holds for what `move` names, as its copy takes them."""
    if move.ref is None:
        return {}
    referred = refs[move.ref]
    if move.move is MoveKind.EXPLAIN:
        [option] = [o for o in referred.options if o.option == move.option]
        effect = _sentence(option.effect) if option.effect else ""
        return {"card": referred.says, "option": option.says, "effect": effect}
    return {"says": _sentence(referred.says), "kind": referred.kind.value}


def rerendered(shown: Shown) -> str:
    """The shown block's moves, each rendered through the desk's copy, joined."""
    copy = trip_copy().serving(LOCALES)
    refs = {r.ref: r for r in shown.request.refs}
    return " ".join(
        copy.render(
            f"turnframe.move.{m.move.value}.{m.variant}", shown.locale, _params(m, refs)
        ).text.strip()
        for m in shown.block.moves
    )


def server_words(request: Request) -> list[str]:
    """Every word the server holds for the things of this turn, longest first."""
    words: set[str] = set()
    for ref in request.refs:
        words |= {ref.says.strip(), _sentence(ref.says)}
        for option in ref.options:
            words.add(option.says.strip())
            if option.effect:
                words |= {option.effect.strip(), _sentence(option.effect)}
    return sorted((w for w in words if w), key=len, reverse=True)


def template_words(shown: Shown) -> str:
    text = shown.block.text
    for words in server_words(shown.request):
        text = text.replace(words, " ")
    return text


# --- the aims ------------------------------------------------------------------------------------

_RUNS: dict[str, Run] = {}


async def _run(locale: str, tmp_path: Path) -> Run:
    if locale not in _RUNS:
        async with StoreBackend("memory", tmp_path) as backend:
            _RUNS[locale] = await _narrate_everything(backend, locale)
    return _RUNS[locale]


@pytest.mark.parametrize("locale", LOCALES)
async def test_every_shown_move_is_server_copy_around_the_servers_own_words(
    locale: str, tmp_path: Path
) -> None:
    run = await _run(locale, tmp_path)

    differing = [f"{s}\n  rerendered: {rerendered(s)!r}" for s in run.shown
                 if s.block.text != rerendered(s)]  # fmt: skip
    assert run.shown
    assert differing == [], "\n".join(differing)


@pytest.mark.parametrize("locale", LOCALES)
async def test_composing_moves_adds_no_claim_the_server_words_did_not_carry(
    locale: str, tmp_path: Path
) -> None:
    run = await _run(locale, tmp_path)
    workflow = TripWorkflow()
    follow_ups, claims = workflow.follow_up_receipts(), workflow.receipt_claims()

    claimed = []
    for shown in run.shown:
        backing = TurnBacking.of(shown.server, follow_ups, claims)
        written_in = shown.block.copy_ref.locale if shown.block.copy_ref else locale
        found = check_wording(template_words(shown), written_in, backing, SERVER_COPY_GUARD)
        if found:
            claimed.append(f"{shown}\n  without server words: {template_words(shown)!r}\n"
                           f"  {[(f.code, f.rule, f.excerpt) for f in found]}")  # fmt: skip
    assert run.shown
    assert claimed == [], "\n".join(claimed)


@pytest.mark.parametrize("locale", LOCALES)
async def test_every_draft_of_everything_on_offer_is_shown_so_the_checks_above_see_it(
    locale: str, tmp_path: Path
) -> None:
    """A draft the runtime refuses is replaced by server copy: safe, but then the two tests
    above never read it. Each context also shows something in every draft."""
    run = await _run(locale, tmp_path)

    not_shown = [f"{c} {k} {codes}: {moves}" for c, k, moves, codes in run.not_shown]
    assert not_shown == [], "\n".join(not_shown)
    assert {s.context for s in run.shown} == set(CONTEXTS)
