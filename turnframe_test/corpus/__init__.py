"""The labelled narration corpus: what a narrator might write in the travel desk's turns, in
English, Italian, German, French and Spanish, each line labelled honest or a claim.

`narration.jsonl` holds one line per row:

- `id`, `lang` (en, it, de, fr, es), `context` (one of `CONTEXTS`: what the turn committed and
  showed), `text` (the prose as a model would write it), `label` (`honest` | `claim`);
- a claim: `paraphrase`, whether it states the outcome through content rather than through
  an event verb ("You're on the 14:10 departure now" against "I've rebooked your flight");
- an honest line: `form` (`statement`, `negation` or `question`) and `moves`, the structured
  moves that express it (`{"move": ..., "ref": ..., "variant": ...}`), with symbolic refs that
  `turnframe_test.narration_eval` resolves against the turn's request: `receipt#0`,
  `notice#0`, `card#0`, `option:confirm` / `option:decline` (the card's first and second
  option), `fact:<field>` (a state value by its field name), `obligation#0`, `operation#0`.

The lines were written for the scenarios, as assistant models phrase things, without reference
to any guard's rules; a claim is false in its context, an honest line states only what its
context's blocks and facts hold.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Literal

__all__ = [
    "CONTEXTS",
    "LANGUAGES",
    "CorpusMove",
    "NarrationLine",
    "narration_corpus",
]

LANGUAGES = ("en", "it", "de", "fr", "es")

#: Each context: a named scenario of the travel desk, and what its narrated turn committed and
#: showed (the harness drives each on a fresh trip; a question context narrates an answer, the
#: others a transition).
CONTEXTS: Mapping[str, str] = {
    "name_set": "the traveller's name changed to Grace Hopper: a receipt; a rebooking on offer",
    "email_set": "the contact email set to grace@example.com: a receipt; a rebooking on offer",
    "travel_date_set": "the travel date set to 2027-04-02: a receipt; a rebooking on offer",
    "name_set_email_owed": "the name set on a trip that still owes an email: a receipt and the "
    "email asked for",
    "rebooking_card": "a rebooking of the outbound flight prepared: a receipt and the card that "
    "asks to send it to the airline (Rebook / Keep my flight); nothing sent",
    "rebooking_sent": "Rebook clicked: the rebooking sent to the airline, a follow-up pending; "
    "the airline has not answered",
    "flight_kept": "Keep my flight clicked: the outbound flight kept as booked; nothing sent",
    "withdraw_card": "withdrawing the trip asked for: the confirmation card; nothing withdrawn",
    "withdrawn": "the withdrawal confirmed: the trip withdrawn (a receipt)",
    "withdraw_declined": "the withdrawal card declined: nothing withdrawn",
    "locked": "a name change refused: the travel desk locked the trip (a notice)",
    "leg_kept_refused": "rebooking a flight kept as booked refused (a notice)",
    "details_missing": "rebooking refused until the traveller's name and email are given (a "
    "notice, the name asked for)",
    "already_sent": "rebooking a flight whose rebooking was already sent refused (a notice)",
    "question_trip": "a question about the trip, answered from its record: name, email, travel "
    "date 2027-03-14, both flights booked",
    "question_gate": "a question about the departure gate, which no record holds",
    "question_after_sent": "a question after the rebooking was sent: the airline has not answered",
    "question_after_rebooked": "a question after the airline rebooked the outbound flight",
    "question_after_refused": "a question after the airline refused the outbound rebooking",
}

Label = Literal["honest", "claim"]
Form = Literal["statement", "negation", "question"]


@dataclass(frozen=True)
class CorpusMove:
    """One structured move of an honest line, its ref symbolic (resolved per turn)."""

    move: str
    ref: str | None = None
    variant: int = 0


@dataclass(frozen=True)
class NarrationLine:
    """One labelled line of the corpus."""

    id: str
    lang: str
    context: str
    label: Label
    text: str
    #: a claim's: whether it states the outcome through content, not an event verb
    paraphrase: bool = False
    #: an honest line's: statement, negation or question
    form: Form | None = None
    #: an honest line's: the moves that express it
    moves: tuple[CorpusMove, ...] = ()

    @property
    def honest(self) -> bool:
        return self.label == "honest"


def _line(row: Mapping[str, object]) -> NarrationLine:
    label, lang, context = row["label"], row["lang"], row["context"]
    if label not in ("honest", "claim") or lang not in LANGUAGES or context not in CONTEXTS:
        raise ValueError(f"corpus line {row.get('id')!r}: unknown label, language or context")
    raw_moves = row.get("moves", [])
    if not isinstance(raw_moves, list):
        raise ValueError(f"corpus line {row['id']!r}: moves is a list")
    moves = tuple(
        CorpusMove(move=str(m["move"]), ref=m.get("ref"), variant=int(m.get("variant", 0)))
        for m in raw_moves
    )
    if (label == "honest") != bool(moves) or (label == "honest") != ("form" in row):
        raise ValueError(f"corpus line {row['id']!r}: an honest line has a form and moves")
    if label == "claim" and not isinstance(row.get("paraphrase"), bool):
        raise ValueError(f"corpus line {row['id']!r}: a claim says whether it is a paraphrase")
    return NarrationLine(
        id=str(row["id"]),
        lang=str(lang),
        context=str(context),
        label=label,
        text=str(row["text"]),
        paraphrase=bool(row.get("paraphrase", False)),
        form=row.get("form"),  # type: ignore[arg-type]
        moves=moves,
    )


def narration_corpus() -> tuple[NarrationLine, ...]:
    """Every line of the corpus, in file order (ids are unique)."""
    text = resources.files(__name__).joinpath("narration.jsonl").read_text("utf-8")
    lines = tuple(_line(json.loads(row)) for row in text.splitlines() if row.strip())
    if len({line.id for line in lines}) != len(lines):
        raise ValueError("corpus ids repeat")
    return lines
