"""The travel desk as an app for `turnframe eval` (docs/eval.md), its model ports scripted by
the corpus itself:

    turnframe eval turnframe_test/sample/eval_corpus.jsonl \\
        --app turnframe_test.sample.eval_app:scripted_runtime

Each input's `scripted` answers say what the interpreter understands (`understanding`: acts
with their operation, handle and arguments, and questions with the handles they are about,
every one quoting the user's words) and which moves the narrator chooses (`transition`,
`answer`: moves with symbolic refs such as `receipt#0`, `fact:email` or `option:confirm`,
resolved against each request as in the narration corpus). An input that scripts no
narration gets server copy. A case's `fixture` may give its trip's fields (`{"trip": {...}}`,
over a trip with every detail filled in; a field set to null is left out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from turnframe_core import Brief, CaseKey, Understanding
from turnframe_runtime import (
    AnswerRequest,
    CaseCandidate,
    EvaluatedTurn,
    LoadedCase,
    RuntimeConfig,
    TransitionRequest,
    TurnRuntime,
    evaluated_turn,
)
from turnframe_store import SqlStores, system_clock
from turnframe_test.corpus import CorpusMove
from turnframe_test.narration_eval import resolve
from turnframe_test.sample.airline import FakeAirline
from turnframe_test.sample.travel import (
    TripDesk,
    TripDirectory,
    TripExecutor,
    TripWorkflow,
    trip_copy,
)
from turnframe_test.scripted import UnexpectedCall
from turnframe_test.understandings import act, question, understanding

__all__ = ["CorpusInterpreter", "CorpusNarrator", "EvalDirectory", "scripted_runtime"]

#: the trip every case starts from, unless its fixture says otherwise
READY_TRIP: Mapping[str, Any] = {
    "trip_id": "T-100",
    "label": "Rome trip",
    "name": "Ada Lovelace",
    "email": "ada@example.com",
    "travel_date": "2027-03-14",
}


def _current() -> EvaluatedTurn:
    turn = evaluated_turn()
    if turn is None:
        raise UnexpectedCall("a corpus port was called outside `turnframe eval`")
    return turn


class CorpusInterpreter:
    """Understands each input as its `scripted.understanding` says."""

    model_name = "corpus-interpreter"

    async def understand(self, brief: Brief) -> Understanding:
        turn = _current()
        scripted = turn.input.scripted.get("understanding")
        if scripted is None:
            raise UnexpectedCall(
                f"case {turn.case.id} scripts no understanding for input {turn.index}"
            )
        quote = turn.input.text or ""
        acts = [
            act(
                f"a{n}",
                a["operation"],
                a.get("handle"),
                quote,
                **a.get("arguments", {}),
            )
            for n, a in enumerate(scripted.get("acts", ()), start=1)
        ]
        questions = [
            question(f"q{n}", quote, *q.get("about", ()))
            for n, q in enumerate(scripted.get("questions", ()), start=1)
        ]
        return understanding(*acts, *questions)


class CorpusNarrator:
    """Chooses each input's scripted moves (`scripted.transition`, `scripted.answer`)."""

    model_name = "corpus-narrator"

    async def transition(self, request: TransitionRequest) -> Mapping[str, Any]:
        return {"kind": "transition", "moves": self._moves("transition", request)}

    async def answer(self, request: AnswerRequest) -> Mapping[str, Any]:
        return {
            "kind": "answer",
            "question_id": request.question_id,
            "moves": self._moves("answer", request),
        }

    @staticmethod
    def _moves(purpose: str, request: TransitionRequest | AnswerRequest) -> list[dict[str, Any]]:
        turn = _current()
        moves: Sequence[Mapping[str, Any]] | None = turn.input.scripted.get(purpose)
        if moves is None:  # server copy stands in
            raise UnexpectedCall(f"case {turn.case.id} scripts no {purpose} here")
        return [resolve(CorpusMove(**m), request) for m in moves]


class EvalDirectory(TripDirectory):
    """The desk's directory, opening each case's trip (from its fixture) the first time the
    case's account is looked at."""

    def _seed(self, account_id: str) -> None:
        turn = evaluated_turn()
        if turn is None or turn.account_id != account_id:
            return
        if any(account == account_id for account, _ in self.desk.trips):
            return
        fields = {**READY_TRIP, **turn.case.fixture.get("trip", {})}
        fields = {k: v for k, v in fields.items() if v is not None}
        trip_id, label = fields.pop("trip_id"), fields.pop("label")
        self.desk.open_trip(
            account_id, trip_id, label, conversation_id=turn.conversation_id, **fields
        )

    async def candidates(self, account_id: str, conversation_id: str) -> Sequence[CaseCandidate]:
        self._seed(account_id)
        return await super().candidates(account_id, conversation_id)

    async def authorize(self, account_id: str, case: CaseKey) -> bool:
        self._seed(account_id)
        return await super().authorize(account_id, case)

    async def load(self, account_id: str, case: CaseKey) -> LoadedCase:
        self._seed(account_id)
        return await super().load(account_id, case)

    async def candidates_for_account(self, account_id: str) -> list[CaseCandidate]:
        self._seed(account_id)
        return await super().candidates_for_account(account_id)


async def scripted_runtime(url: str) -> TurnRuntime:
    """The travel desk on the (migrated) database at `url`, with the corpus's scripted ports and
    a desk of its own."""
    desk = TripDesk()
    return TurnRuntime(
        stores=await SqlStores.connect(url),
        workflows=[TripWorkflow()],
        directory=EvalDirectory(desk),
        executor=TripExecutor(desk, clock_ms=system_clock),
        interpreter=CorpusInterpreter(),
        narrator=CorpusNarrator(),
        senders={"airline": FakeAirline()},
        copy=trip_copy(),
        config=RuntimeConfig(locales=("en", "it", "de")),
    )
