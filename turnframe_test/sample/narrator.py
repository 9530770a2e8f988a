"""The travel desk's narrator: it chooses moves as a model in structured narration does (nothing
it returns is words of its own), deterministically, so the demo and the chat example show
structured narration without a model. The server renders every move in the turn's language."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from turnframe_core import MoveKind, ReferableKind, StateValue
from turnframe_runtime import AnswerRequest, TransitionRequest

__all__ = ["DeskNarrator"]


class DeskNarrator:
    """Introduces what the turn shows (its receipts and notices, then its card), then asks the
    open question, offers the next step or closes; answers state the record's values (only
    `fields` when given), else say they cannot answer. Phrasings change from turn to turn."""

    model_name = "desk-narrator"

    def __init__(self, fields: frozenset[str] | None = None) -> None:
        self.fields = fields
        self._turns = 0

    async def transition(self, request: TransitionRequest) -> Mapping[str, Any] | str:
        self._turns += 1
        offered = set(request.moves)
        moves: list[dict[str, Any]] = []
        if MoveKind.INTRODUCE in offered:
            for kind in (ReferableKind.RECEIPT, ReferableKind.NOTICE, ReferableKind.CARD):
                moves.extend(
                    self._move(request, "introduce", ref.ref)
                    for ref in request.refs
                    if ref.kind is kind
                )
        cards = any(r.kind is ReferableKind.CARD for r in request.refs)
        asked = [r.ref for r in request.refs if r.kind is ReferableKind.OBLIGATION]
        steps = [r.ref for r in request.refs if r.kind is ReferableKind.OPERATION]
        if cards:
            pass  # the card asks
        elif asked and MoveKind.ASK in offered:
            moves.append(self._move(request, "ask", asked[0]))
        elif steps and MoveKind.OFFER in offered:
            moves.append(self._move(request, "offer", steps[0]))
        elif MoveKind.CLOSE in offered:
            moves.append(self._move(request, "close"))
        return {"kind": "transition", "moves": moves}

    async def answer(self, request: AnswerRequest) -> Mapping[str, Any] | str:
        self._turns += 1
        facts = [
            ref.ref
            for ref in request.refs
            if ref.kind is ReferableKind.FACT and self._states(request, ref.ref)
        ]
        # one phrasing after another, so a list of values does not read as a form
        moves = [self._move(request, "state", ref, turn=n) for n, ref in enumerate(facts)]
        if not moves:
            moves.append(self._move(request, "cannot_answer"))
        return {"kind": "answer", "question_id": request.question_id, "moves": moves}

    def _states(self, request: AnswerRequest, ref: str) -> bool:
        """Whether `ref` (`fact.<n>`) names a value this narrator states."""
        fact = request.allowed_facts[int(ref.removeprefix("fact.")) - 1]
        return isinstance(fact, StateValue) and (self.fields is None or fact.field in self.fields)

    def _move(
        self,
        request: AnswerRequest | TransitionRequest,
        move: str,
        ref: str | None = None,
        *,
        turn: int = 0,
    ) -> dict[str, Any]:
        variants = request.variants.get(move, 1) or 1
        chosen: dict[str, Any] = {"move": move, "variant": (self._turns + turn) % variants}
        if ref is not None:
            chosen["ref"] = ref
        return chosen
