"""The labelled narration corpus, run through real turns: what a narrator writes either reaches
the user as written or is replaced by server copy, and no claim the turn does not back gets
through.

Each entry (tests/data/claims_corpus.jsonl) is a transition a narrator might write, in English,
Italian, German, French or Spanish, labelled with the claim class it makes (or `harmless`) and
the situation it is written for: `none` (the act was refused: no receipt, no card), `receipt` (a
committed change of name: it backs an update or completion only), `card` (a confirmation card
waiting), `follow_up` (a rebooking sent to the airline: a submission, whose receipt says a
follow-up is scheduled). The reviewer passes everything, so the
wording guard alone decides. Run with `-s` for the per-class table.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnframe_core import AssistantTurn, ClaimClass, TransitionBlock, TurnBacking
from turnframe_runtime import TransitionRequest
from turnframe_test import DeskHarness, ScriptedReviewer
from turnframe_test.understandings import act

CORPUS = Path(__file__).parent.parent / "data" / "claims_corpus.jsonl"
_C = ClaimClass
#: what each situation's blocks back, as the travel desk declares its receipts
BACKING = {
    "none": TurnBacking(),
    "receipt": TurnBacking(outcome=True, outcomes=frozenset({_C.UPDATE, _C.COMPLETION})),
    "card": TurnBacking(card=True),
    "follow_up": TurnBacking(outcome=True, follow_up=True, outcomes=frozenset({_C.SUBMISSION})),
}


@dataclass(frozen=True)
class Entry:
    locale: str
    label: str
    situation: str
    text: str

    @property
    def backed(self) -> bool:
        """A harmless sentence, or a claim its situation backs: it should reach the user."""
        return self.label == "harmless" or BACKING[self.situation].backs(ClaimClass(self.label))


def _corpus() -> list[Entry]:
    return [Entry(**json.loads(line)) for line in CORPUS.read_text("utf-8").splitlines() if line]


class _CorpusNarrator:
    """Writes the entry under test, for the turn under test only; a setup turn's narration
    fails, so server copy stands in for it."""

    def __init__(self) -> None:
        self.text: str | None = None

    async def transition(self, request: TransitionRequest) -> dict[str, Any]:
        if self.text is None:
            raise RuntimeError("a setup turn")
        return {"kind": "transition", "text": self.text, "facts_used": []}

    async def answer(self, request: Any) -> Any:
        raise AssertionError("no question in the corpus turns")


async def _turn(
    desk: DeskHarness, narrator: _CorpusNarrator, n: int, entry: Entry
) -> AssistantTurn:
    """The entry's situation, in a conversation of its own, narrated by the entry."""
    desk.conversation_id = f"conv_corpus_{n}"
    trip_id = f"T-{n}"
    say: dict[str, Any] = {"locale": entry.locale}
    if entry.situation == "none":
        desk.ready_trip(trip_id, locked=True)
        narrator.text = entry.text
        return await desk.say("Name Grace Hopper", act("a1", "trip.set_name", "h1", "Grace",
                                                        name="Grace Hopper"), **say)  # fmt: skip
    if entry.situation == "receipt":
        desk.ready_trip(trip_id, name="Ada Lovelace")
        narrator.text = entry.text
        return await desk.say("Name Grace Hopper", act("a1", "trip.set_name", "h1", "Grace",
                                                        name="Grace Hopper"), **say)  # fmt: skip
    if entry.situation == "card":
        desk.ready_trip(trip_id)
        narrator.text = entry.text
        return await desk.say("Withdraw my trip", act("a1", "trip.withdraw", "h1", "Withdraw"),
                              **say)  # fmt: skip
    assert entry.situation == "follow_up", entry.situation
    desk.ready_trip(trip_id)
    narrator.text = None
    asked = await desk.say("Rebook the outbound flight", act("a1", "trip.request_rebooking", "h1",
                           "Rebook the outbound", leg="outbound"), **say)  # fmt: skip
    narrator.text = entry.text
    return await desk.click(asked, "opt_rebook", locale=entry.locale)


def _shown(turn: AssistantTurn, text: str) -> bool:
    prose = [b for b in turn.blocks if isinstance(b, TransitionBlock)]
    return any(b.author == "model" and b.text == text for b in prose)


async def test_no_claim_the_turn_does_not_back_reaches_the_user_and_harmless_prose_does(
    make_desk,
) -> None:
    corpus = _corpus()
    assert len(corpus) >= 150
    assert {e.locale for e in corpus} >= {"en", "it", "de", "fr", "es"}
    narrator = _CorpusNarrator()
    desk: DeskHarness = await make_desk(
        narrator=narrator, reviewer=ScriptedReviewer.passing(), narration="free"
    )
    kept_out: Counter[str] = Counter()
    survived: Counter[str] = Counter()
    total: Counter[str] = Counter()
    leaked: list[Entry] = []
    lost: list[Entry] = []
    for n, entry in enumerate(corpus):
        turn = await _turn(desk, narrator, n, entry)
        shown = _shown(turn, entry.text)
        key = "harmless" if entry.label == "harmless" else (
            f"{entry.label} (backed)" if entry.backed else entry.label
        )  # fmt: skip
        total[key] += 1
        (survived if shown else kept_out)[key] += 1
        if shown and not entry.backed:
            leaked.append(entry)
        if not shown and entry.backed:
            lost.append(entry)
        if not shown:  # what stood in is the server's, and the record says why
            record = await desk.runtime.replay("acct_1", turn.replay_token)
            assert record.prose_findings, entry
            assert {f.replaced_by for f in record.prose_findings} <= {"rewrite", "server_copy"}
    print("\nclass                          entries  kept out  shown")
    for key in sorted(total):
        print(f"{key:30} {total[key]:7} {kept_out[key]:9} {survived[key]:6}")
    for entry in lost:
        print(f"kept out although backed or harmless: [{entry.locale}] {entry.text}")
    harmless_kept = survived["harmless"] / total["harmless"]
    print(f"harmless prose shown: {survived['harmless']}/{total['harmless']} = {harmless_kept:.0%}")
    assert leaked == []  # no unbacked claim reaches the user
    assert harmless_kept >= 0.9, lost
