"""Step S: model-written prose through the `Narrator` port.

A draft is parsed like any model output (answer and transition drafts only) and may cite only the
facts it was given; a transition is also reviewed, and a failed check or review gets one rewrite
with the findings. Every call is recorded as a provider attempt. Whenever no draft passes, the
caller's server copy stands in: these functions return None.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from turnframe_core import codes
from turnframe_core._canonical import digest
from turnframe_core._derive import derive_block_id
from turnframe_core.blocks import (
    AnswerBlock,
    MalformedModelOutput,
    TransitionBlock,
    parse_model_output,
)
from turnframe_runtime.context import AuditTrail, Purpose, TurnContext, failure_code
from turnframe_runtime.ports import AnswerRequest, Narrator, ReviewVerdict, TransitionRequest

__all__ = ["Narration"]


@dataclass(frozen=True)
class Narration:
    """One turn's calls to the narrator."""

    narrator: Narrator
    turn: TurnContext
    clock: Callable[[], int]
    audit: AuditTrail

    async def answer(self, request: AnswerRequest) -> AnswerBlock | None:
        """The narrator's answer to one question, if it fits the question and its facts."""
        started = self.clock()
        try:
            draft = await self.narrator.answer(request)
            parsed = parse_model_output(
                _as_draft(draft), turn_id=self.turn.turn_id, account_id=self.turn.account_id
            )
            answer = parsed[0] if len(parsed) == 1 else None
            if (
                not isinstance(answer, AnswerBlock)
                or answer.question_id != request.question_id
                or not _facts_within(answer.facts_used, request.allowed_facts)
            ):
                raise MalformedModelOutput("the answer does not fit its question")
        except Exception as exc:
            self.audit.attempt(Purpose.ANSWER, self.narrator, started, self.clock(), exc)
            return None
        self.audit.attempt(Purpose.ANSWER, self.narrator, started, self.clock())
        return answer.model_copy(update={"basis": request.basis})

    async def transition(self, request: TransitionRequest) -> TransitionBlock | None:
        """A reviewed transition within the request's facts; one rewrite after a failed check or
        review."""
        findings: tuple[str, ...] = ()
        narrator, audit = self.narrator, self.audit
        for _round in range(2):
            started = self.clock()
            try:
                draft = await narrator.transition(request.model_copy(update={"findings": findings}))
            except Exception as exc:
                audit.attempt(Purpose.TRANSITION, narrator, started, self.clock(), exc)
                return None
            audit.attempt(Purpose.TRANSITION, narrator, started, self.clock())
            try:
                parsed = parse_model_output(
                    _as_draft(draft), turn_id=self.turn.turn_id, account_id=self.turn.account_id
                )
                block = parsed[0] if len(parsed) == 1 else None
                if not isinstance(block, TransitionBlock):
                    raise MalformedModelOutput("not a single transition draft")
                within = _facts_within(block.facts_used, request.allowed_facts)
            except Exception as rejected:  # whatever a model sent: never the turn's failure
                audit.discard_last_attempt(failure_code(rejected))
                findings = ("the reply was not a single transition draft",)
                continue
            if not within:
                audit.discard_last_attempt(codes.CLAIM_UNBACKED_OUTCOME)
                findings = ("the reply rests on facts it was not given",)
                continue
            try:
                verdict = await narrator.review(block.text, request)
                if not isinstance(verdict, ReviewVerdict):
                    raise MalformedModelOutput("a review answers with a ReviewVerdict")
            except Exception as exc:
                audit.attempt(Purpose.REVIEW, narrator, started, self.clock(), exc)
                return None
            if verdict.passed is True:
                return block.model_copy(
                    update={
                        "block_id": derive_block_id(
                            self.turn.account_id, self.turn.turn_id, "transition"
                        )
                    }
                )
            audit.discard_last_attempt("review_failed")
            findings = verdict.findings or ("the review failed",)
        return None


def _as_draft(draft: Mapping[str, Any] | str) -> dict[str, Any] | str:
    if isinstance(draft, str):
        return draft
    if not isinstance(draft, Mapping):
        raise MalformedModelOutput("a draft is a JSON object or its text")
    return dict(draft)


def _facts_within(used: Sequence[Any], allowed: Sequence[Any]) -> bool:
    allowed_digests = {digest(fact) for fact in allowed}
    return all(digest(fact) in allowed_digests for fact in used)
