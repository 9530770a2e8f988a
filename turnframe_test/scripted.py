"""Scripted model ports: an Interpreter, a Narrator and a ClaimReviewer that do exactly what the
script says and fail loudly on anything else, so a test proves which model calls a turn made."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from turnframe_core import Brief, Move, Understanding
from turnframe_runtime import AnswerRequest, ReviewRequest, ReviewVerdict, TransitionRequest

__all__ = [
    "ScriptExhausted",
    "ScriptedInterpreter",
    "ScriptedNarrator",
    "ScriptedReviewer",
    "UnexpectedCall",
]

InterpreterStep = Understanding | Callable[[Brief], Understanding] | BaseException


class ScriptExhausted(AssertionError):
    """A port was called more often than its script allows."""


class UnexpectedCall(AssertionError):
    """A port was called for something its script did not declare."""


class ScriptedInterpreter:
    """Returns the scripted understandings in order (a step may be a function of the brief, or an
    exception to raise). Records every brief it was shown."""

    def __init__(self, *steps: InterpreterStep) -> None:
        self._steps: deque[InterpreterStep] = deque(steps)
        self.briefs: list[Brief] = []

    def then(self, step: InterpreterStep) -> ScriptedInterpreter:
        self._steps.append(step)
        return self

    async def understand(self, brief: Brief) -> Understanding:
        self.briefs.append(brief)
        if not self._steps:
            raise ScriptExhausted("the interpreter was called with no step left in its script")
        step = self._steps.popleft()
        if isinstance(step, BaseException):
            raise step
        if isinstance(step, Understanding):
            return step
        return step(brief)

    @property
    def calls(self) -> int:
        return len(self.briefs)

    def verify(self) -> None:
        if self._steps:
            raise AssertionError(f"{len(self._steps)} scripted understanding(s) were never used")


NarratorReply = Mapping[str, Any] | str | ReviewVerdict | BaseException | Callable[[Any], Any]


@dataclass
class _Expected:
    purpose: str
    reply: NarratorReply


@dataclass
class ScriptedNarrator:
    """Expects calls in a declared order (`transition`, `answer`, `review`) and answers each with
    its scripted reply: moves (`transition_moves`, `answer_moves`) for structured narration,
    text (`transition_text`, `answer_text`) and verdicts for free narration. Any call out of
    script raises `UnexpectedCall`, so a test that forgets a model call, or a pipeline that
    makes one too many, fails.

    The `review` steps are answered by `reviewer`, a separate `ClaimReviewer` that reads the
    same script (free narration needs it passed explicitly, `reviewer=narrator.reviewer`): one
    list says in which order the narrator writes and the reviewer judges."""

    _script: deque[_Expected] = field(default_factory=deque)
    calls: list[tuple[str, Any]] = field(default_factory=list)
    #: Calls the script did not declare. The runtime may swallow the raised error (narration
    #: failures after commit only change wording), so `verify()` reports them regardless.
    violations: list[str] = field(default_factory=list)

    def expect(self, purpose: str, reply: NarratorReply) -> ScriptedNarrator:
        if purpose not in ("transition", "answer", "review"):
            raise ValueError(f"unknown narration purpose {purpose!r}")
        self._script.append(_Expected(purpose, reply))
        return self

    def transition_moves(self, *moves: Move | Mapping[str, Any]) -> ScriptedNarrator:
        """A structured transition: these moves (`Move`s, or the dicts a model would send)."""
        return self.expect("transition", {"kind": "transition", "moves": _drafted(moves)})

    def answer_moves(self, question_id: str, *moves: Move | Mapping[str, Any]) -> ScriptedNarrator:
        """A structured answer to `question_id`: these moves."""
        return self.expect(
            "answer", {"kind": "answer", "question_id": question_id, "moves": _drafted(moves)}
        )

    def transition_text(self, text: str, facts: list[Any] | None = None) -> ScriptedNarrator:
        return self.expect(
            "transition", {"kind": "transition", "text": text, "facts_used": facts or []}
        )

    def answer_text(self, question_id: str, text: str, **extra: Any) -> ScriptedNarrator:
        return self.expect(
            "answer", {"kind": "answer", "question_id": question_id, "text": text, **extra}
        )

    def review_passes(self) -> ScriptedNarrator:
        return self.expect("review", ReviewVerdict(passed=True))

    def review_fails(self, *findings: str) -> ScriptedNarrator:
        return self.expect("review", ReviewVerdict(passed=False, findings=findings))

    def _next(self, purpose: str, request: Any) -> Any:
        self.calls.append((purpose, request))
        if not self._script:
            self.violations.append(f"unscripted narrator call: {purpose}")
            raise ScriptExhausted(self.violations[-1])
        expected = self._script[0]
        if expected.purpose != purpose:
            self.violations.append(
                f"narrator asked for {purpose}, script expects {expected.purpose}"
            )
            raise UnexpectedCall(self.violations[-1])
        self._script.popleft()
        reply = expected.reply
        if isinstance(reply, BaseException):
            raise reply
        if callable(reply):
            return reply(request)
        return reply

    async def transition(self, request: TransitionRequest) -> Mapping[str, Any] | str:
        reply = self._next("transition", request)
        assert isinstance(reply, Mapping | str)
        return reply

    async def answer(self, request: AnswerRequest) -> Mapping[str, Any] | str:
        reply = self._next("answer", request)
        assert isinstance(reply, Mapping | str)
        return reply

    @property
    def reviewer(self) -> _ScriptReviewer:
        """The `ClaimReviewer` that answers this script's `review` steps."""
        return _ScriptReviewer(self)

    def calls_for(self, purpose: str) -> list[Any]:
        return [request for p, request in self.calls if p == purpose]

    def verify(self) -> None:
        """Raise if any call was out of script or any scripted call was never made."""
        if self.violations:
            raise AssertionError("; ".join(self.violations))
        if self._script:
            left = ", ".join(e.purpose for e in self._script)
            raise AssertionError(f"scripted narrator calls never made: {left}")


def _drafted(moves: tuple[Move | Mapping[str, Any], ...]) -> list[Any]:
    """Moves as a model sends them (a `Move` without the fields it leaves unset)."""
    return [
        m.model_dump(mode="json", exclude_defaults=True) if isinstance(m, Move) else dict(m)
        for m in moves
    ]


@dataclass(frozen=True)
class _ScriptReviewer:
    """A `ClaimReviewer` reading a `ScriptedNarrator`'s `review` steps."""

    script: ScriptedNarrator

    @property
    def model_name(self) -> str:
        return "scripted-reviewer"

    async def review(self, request: ReviewRequest) -> ReviewVerdict:
        reply = self.script._next("review", request)
        assert isinstance(reply, ReviewVerdict)
        return reply


class ScriptedReviewer:
    """A `ClaimReviewer` on its own: answers with its verdicts in order, or with `always` for
    every review. Records every request it was shown."""

    def __init__(self, *verdicts: ReviewVerdict, always: ReviewVerdict | None = None) -> None:
        self._verdicts: deque[ReviewVerdict] = deque(verdicts)
        self._always = always
        self.requests: list[ReviewRequest] = []

    @classmethod
    def passing(cls) -> ScriptedReviewer:
        """Passes everything: leaves the wording guard as the only check of what a draft says."""
        return cls(always=ReviewVerdict(passed=True))

    async def review(self, request: ReviewRequest) -> ReviewVerdict:
        self.requests.append(request)
        if self._verdicts:
            return self._verdicts.popleft()
        if self._always is not None:
            return self._always
        raise ScriptExhausted("the reviewer was called with no verdict left in its script")
