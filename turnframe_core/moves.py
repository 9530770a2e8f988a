"""Structured narration: the moves a narrator chooses from, and how its draft is read.

A narrator in structured mode writes no words of its own. It picks moves from a closed set
(`MoveKind`), each naming, where the move needs one, a thing of this turn (`Referable.ref`: a
block id, `fact.<n>`, `obligation.<n>` or `operation.<n>`) and a phrasing (`variant`); the server
renders every move through its own copy in the turn's locale. A draft is
`{"kind": "transition", "moves": [...]}` or `{"kind": "answer", "question_id": ..., "moves":
[...]}`. Anything else is refused with a `MovesRefused` whose code says why (free text, an unknown
move, a ref not in this turn, a variant out of range, a bad shape); the error never carries the
draft's words.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from enum import StrEnum
from typing import Any, Final, Literal

from pydantic import model_validator

from turnframe_core import codes
from turnframe_core.errors import TurnframeError
from turnframe_core.limits import MAX_MODEL_OUTPUT_CHARS, json_value_problem
from turnframe_core.model import FrozenModel, NonEmptyStr, Whole

__all__ = [
    "MAX_MOVES",
    "REFERS_TO",
    "REF_MOVES",
    "Move",
    "MoveKind",
    "MovesRefused",
    "Referable",
    "ReferableKind",
    "ReferableOption",
    "check_moves",
    "parse_moves",
]


class MoveKind(StrEnum):
    GREET = "greet"
    THANK = "thank"
    APOLOGIZE = "apologize"
    ACKNOWLEDGE = "acknowledge"
    #: a receipt, notice or card of this turn, by block id
    INTRODUCE = "introduce"
    #: a fact the turn allows, by `fact.<n>`
    STATE = "state"
    #: an option of a card shown in this turn (`ref` the card, `option` its option id)
    EXPLAIN = "explain"
    #: an open obligation's question (`obligation.<n>`) or an offered operation (`operation.<n>`)
    ASK = "ask"
    #: an operation on offer, by `operation.<n>`
    OFFER = "offer"
    CANNOT_ANSWER = "cannot_answer"
    CLOSE = "close"


#: The moves that name a thing of the turn (`ref` required); the others take none.
REF_MOVES: Final = frozenset(
    {MoveKind.INTRODUCE, MoveKind.STATE, MoveKind.EXPLAIN, MoveKind.ASK, MoveKind.OFFER}
)
#: The most moves one draft may hold.
MAX_MOVES: Final = 12


class Move(FrozenModel):
    """One move of a structured draft: what to do, about which thing, in which phrasing."""

    move: MoveKind
    ref: NonEmptyStr | None = None
    option: NonEmptyStr | None = None
    variant: Whole = 0

    @model_validator(mode="after")
    def _shape(self) -> Move:
        if self.move in REF_MOVES and self.ref is None:
            raise ValueError(f"a {self.move.value} move names what it is about (ref)")
        if self.move not in REF_MOVES and self.ref is not None:
            raise ValueError(f"a {self.move.value} move names nothing (no ref)")
        if (self.option is not None) != (self.move is MoveKind.EXPLAIN):
            raise ValueError("an explain move, and only it, names an option")
        return self


class ReferableKind(StrEnum):
    RECEIPT = "receipt"
    NOTICE = "notice"
    CARD = "card"
    FACT = "fact"
    OBLIGATION = "obligation"
    OPERATION = "operation"


class ReferableOption(FrozenModel):
    """One option of a card, as a move may name it: `option` is its option id, `says` its label,
    `effect` what choosing it does, in the workflow's words (when its copy says)."""

    option: NonEmptyStr
    says: str
    effect: str | None = None


class Referable(FrozenModel):
    """A thing of this turn a move may name, with the words the server will use for it."""

    ref: NonEmptyStr
    kind: ReferableKind
    says: str
    #: a card's options
    options: tuple[ReferableOption, ...] = ()


class MovesRefused(TurnframeError):
    """A structured draft the server will not render; `code` says why (`codes.NARRATION_*`),
    `index` names the move at fault when one is."""

    code = codes.NARRATION_BAD_SHAPE

    def __init__(self, code: str, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.code = code  # type: ignore[misc]  # each refusal names its own
        self.index = index


def parse_moves(
    raw: str | Mapping[str, Any],
    *,
    kind: Literal["answer", "transition"],
    question_id: str | None = None,
) -> tuple[Move, ...]:
    """The moves of one structured draft of `kind` (for an answer, of `question_id`), or
    `MovesRefused`. A draft's text that is not a JSON object reads as free text."""
    data: Any = raw
    if isinstance(raw, str):
        if len(raw) > MAX_MODEL_OUTPUT_CHARS:
            raise MovesRefused(codes.NARRATION_BAD_SHAPE, "the draft is too long")
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            raise MovesRefused(codes.NARRATION_FREE_TEXT, "the draft is text, not moves") from None
    problem = json_value_problem(data)
    if problem is not None:
        raise MovesRefused(codes.NARRATION_BAD_SHAPE, f"the draft {problem}")
    if not isinstance(data, Mapping):
        if isinstance(data, str):
            raise MovesRefused(codes.NARRATION_FREE_TEXT, "the draft is text, not moves")
        raise MovesRefused(codes.NARRATION_BAD_SHAPE, "a draft is one JSON object")
    if "text" in data:
        raise MovesRefused(codes.NARRATION_FREE_TEXT, "the draft writes text of its own")
    if data.get("kind") != kind:
        raise MovesRefused(codes.NARRATION_BAD_SHAPE, f"the draft is not one {kind} draft")
    allowed_keys = {"kind", "moves"} | ({"question_id"} if kind == "answer" else set())
    if set(data) - allowed_keys:
        raise MovesRefused(codes.NARRATION_BAD_SHAPE, "the draft holds keys a draft has not")
    if kind == "answer" and data.get("question_id") != question_id:
        raise MovesRefused(codes.NARRATION_BAD_SHAPE, "the answer does not fit its question")
    items = data.get("moves")
    if not isinstance(items, list) or not items:
        raise MovesRefused(codes.NARRATION_BAD_SHAPE, "a draft holds a list of moves")
    if len(items) > MAX_MOVES:
        raise MovesRefused(codes.NARRATION_BAD_SHAPE, f"a draft holds at most {MAX_MOVES} moves")
    moves: list[Move] = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise MovesRefused(codes.NARRATION_BAD_SHAPE, f"move {index} is not an object", index)
        name = item.get("move")
        if not isinstance(name, str) or name not in _MOVE_NAMES:
            raise MovesRefused(
                codes.NARRATION_UNKNOWN_MOVE, f"move {index} is not a known move", index
            )
        try:
            moves.append(Move.model_validate(dict(item)))
        except ValueError:  # pydantic's ValidationError is one
            raise MovesRefused(
                codes.NARRATION_BAD_SHAPE, f"move {index} ({name}) is not well formed", index
            ) from None
    return tuple(moves)


_MOVE_NAMES: Final = frozenset(m.value for m in MoveKind)


def check_moves(
    moves: Sequence[Move],
    *,
    refs: Sequence[Referable],
    allowed: Collection[MoveKind],
    variants: Mapping[str, int],
) -> MovesRefused | None:
    """The first reason these moves cannot be rendered in this turn (a move not offered here, a
    ref or option not in this turn, a variant out of range), or None."""
    by_ref = {r.ref: r for r in refs}
    for index, move in enumerate(moves):
        name = move.move.value
        if move.move not in allowed:
            offered = f"move {index} ({name}) is not offered here"
            return MovesRefused(codes.NARRATION_MOVE_NOT_OFFERED, offered, index)
        if not 0 <= move.variant < variants.get(name, 0):
            return MovesRefused(
                codes.NARRATION_VARIANT_OUT_OF_RANGE,
                f"move {index} ({name}) asks for a phrasing it does not have",
                index,
            )
        if move.ref is None:
            continue
        referred = by_ref.get(move.ref)
        if referred is None or referred.kind not in REFERS_TO[move.move]:
            return MovesRefused(
                codes.NARRATION_REF_NOT_IN_TURN,
                f"move {index} ({name}) names nothing of this turn it can be about",
                index,
            )
        if move.option is not None and move.option not in {o.option for o in referred.options}:
            return MovesRefused(
                codes.NARRATION_REF_NOT_IN_TURN,
                f"move {index} ({name}) names an option the card does not have",
                index,
            )
    return None


_R = ReferableKind
#: What each move that names a thing may name.
REFERS_TO: Final[Mapping[MoveKind, frozenset[ReferableKind]]] = {
    MoveKind.INTRODUCE: frozenset({_R.RECEIPT, _R.NOTICE, _R.CARD}),
    MoveKind.STATE: frozenset({_R.FACT}),
    MoveKind.EXPLAIN: frozenset({_R.CARD}),
    MoveKind.ASK: frozenset({_R.OBLIGATION, _R.OPERATION}),
    MoveKind.OFFER: frozenset({_R.OPERATION}),
}
