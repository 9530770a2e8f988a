"""Step S: model-written prose through the `Narrator` port, reviewed before it may be shown.

Every draft, answer or transition alike, passes four checks in order: it parses as one draft of
its kind (model output yields only answer and transition drafts), it cites only the facts it was
given, an independent `ClaimReviewer` passes it, and the deterministic wording guard finds no
claim the turn's server blocks do not back. A draft refused by any check gets one rewrite with
the findings; whenever no draft passes, the caller's server copy stands in (these functions
return None). Every call is recorded as a provider attempt, and every refusal as a prose finding
of the replay record.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from turnframe_core import codes
from turnframe_core.blocks import (
    AnswerBlock,
    MalformedModelOutput,
    TransitionBlock,
    parse_model_output,
)
from turnframe_core.canonical import digest
from turnframe_core.derive import derive_block_id
from turnframe_core.replay import ProseFinding, ProviderAttempt
from turnframe_core.wording import ClaimClass, TurnBacking, WordingFinding, check_wording
from turnframe_runtime import observe
from turnframe_runtime.context import AuditTrail, Purpose, TurnContext, provider_attempt
from turnframe_runtime.ports import (
    AnswerRequest,
    ClaimReviewer,
    Narrator,
    ReviewRequest,
    ReviewVerdict,
    TransitionRequest,
)

__all__ = ["Narration", "forbidden_claims", "wording_findings"]

Kind = Literal["answer", "transition"]


def forbidden_claims(backing: TurnBacking) -> tuple[ClaimClass, ...]:
    """The claim classes nothing in the turn backs (what the narrator and reviewer are told)."""
    return tuple(claim for claim in ClaimClass if not backing.backs(claim))


def wording_findings(
    findings: Sequence[WordingFinding],
    block: Kind,
    question_id: str | None,
    check: Literal["guard", "final"],
    replaced_by: Literal["rewrite", "server_copy"],
) -> list[ProseFinding]:
    """The wording guard's findings on `draft` as the replay record keeps them (by rule and
    span, never by the words)."""
    return [
        ProseFinding(
            block=block,
            question_id=question_id,
            check=check,
            code=f.code,
            rule=f.rule,
            claim_class=f.claim_class,
            span=f.span,
            replaced_by=replaced_by,
        )
        for f in findings
    ]


@dataclass(frozen=True)
class Narration:
    """One turn's calls to the narrator and the reviewer."""

    narrator: Narrator
    reviewer: ClaimReviewer
    turn: TurnContext
    clock: Callable[[], int]
    audit: AuditTrail

    async def answer(self, request: AnswerRequest, backing: TurnBacking) -> AnswerBlock | None:
        """The narrator's reviewed answer to one question, if it fits the question and its
        facts."""

        async def draft(findings: tuple[str, ...]) -> Mapping[str, Any] | str:
            with observe.span("model.answer", question_id=request.question_id):
                return await self.narrator.answer(request.model_copy(update={"findings": findings}))

        def shaped(parsed: Sequence[Any]) -> AnswerBlock:
            answer = parsed[0] if len(parsed) == 1 else None
            if not isinstance(answer, AnswerBlock) or answer.question_id != request.question_id:
                raise MalformedModelOutput("the answer does not fit its question")
            return answer

        review = ReviewRequest(
            kind="answer",
            locale=request.locale,
            text="",
            allowed_facts=request.allowed_facts,
            question=request.question,
            forbidden_claims=request.forbidden_claims,
        )
        block = await self._reviewed(request.question_id, draft, shaped, review, backing)
        if not isinstance(block, AnswerBlock):
            return None
        return block.model_copy(update={"basis": request.basis})

    async def transition(
        self, request: TransitionRequest, backing: TurnBacking
    ) -> TransitionBlock | None:
        """A reviewed transition within the request's facts."""

        async def draft(findings: tuple[str, ...]) -> Mapping[str, Any] | str:
            with observe.span("model.transition"):
                return await self.narrator.transition(
                    request.model_copy(update={"findings": findings})
                )

        def shaped(parsed: Sequence[Any]) -> TransitionBlock:
            block = parsed[0] if len(parsed) == 1 else None
            if not isinstance(block, TransitionBlock):
                raise MalformedModelOutput("not a single transition draft")
            return block

        review = ReviewRequest(
            kind="transition",
            locale=request.locale,
            text="",
            allowed_facts=request.allowed_facts,
            receipt_titles=request.receipt_titles,
            notice_texts=request.notice_texts,
            card_title=request.card_title,
            forbidden_claims=request.forbidden_claims,
        )
        block = await self._reviewed(None, draft, shaped, review, backing)
        if not isinstance(block, TransitionBlock):
            return None
        turn = self.turn
        return block.model_copy(
            update={"block_id": derive_block_id(turn.account_id, turn.turn_id, "transition")}
        )

    async def _reviewed(
        self,
        question_id: str | None,
        draft: Callable[[tuple[str, ...]], Awaitable[Mapping[str, Any] | str]],
        shaped: Callable[[Sequence[Any]], AnswerBlock | TransitionBlock],
        review: ReviewRequest,
        backing: TurnBacking,
    ) -> AnswerBlock | TransitionBlock | None:
        """The first draft of two that passes every check (the facts it may cite and the
        reviewer's request are `review`'s), or None."""
        purpose = Purpose.ANSWER if review.kind == "answer" else Purpose.TRANSITION
        attempts: list[ProviderAttempt] = []
        try:
            return await self._drafts(
                question_id, purpose, draft, shaped, review, backing, attempts
            )
        finally:  # every call, in the order made, each draft's once its fate is known
            for attempt in attempts:
                self.audit.attempted(attempt)

    async def _drafts(
        self,
        question_id: str | None,
        purpose: Purpose,
        draft: Callable[[tuple[str, ...]], Awaitable[Mapping[str, Any] | str]],
        shaped: Callable[[Sequence[Any]], AnswerBlock | TransitionBlock],
        review: ReviewRequest,
        backing: TurnBacking,
        attempts: list[ProviderAttempt],
    ) -> AnswerBlock | TransitionBlock | None:
        """`_reviewed`'s rounds; `attempts` gets each call as it ends (a draft's once it is
        known whether its answer was discarded)."""
        kind, allowed = review.kind, review.allowed_facts
        audit, clock, turn = self.audit, self.clock, self.turn
        findings: tuple[str, ...] = ()
        # Marked once the outcome is known: a rewrite shown, or server copy.
        refused: list[ProseFinding] = []
        for _round in range(2):
            started = clock()
            try:
                reply = await draft(findings)
            except Exception as exc:
                attempts.append(provider_attempt(purpose, self.narrator, started, clock(), exc))
                break
            ended = clock()

            def drafted(
                discarded: str | None = None, *, at: int = started, to: int = ended
            ) -> ProviderAttempt:
                return provider_attempt(purpose, self.narrator, at, to, discarded=discarded)

            try:
                block = shaped(
                    parse_model_output(
                        _as_draft(reply), turn_id=turn.turn_id, account_id=turn.account_id
                    )
                )
            except Exception as rejected:  # whatever a model sent: never the turn's failure
                attempts.append(drafted(codes.code_of(rejected)))
                findings = (f"the reply was not a single {kind} draft",)
                continue
            if not _facts_within(block.facts_used, allowed):
                attempts.append(drafted(codes.CLAIM_UNBACKED_OUTCOME))
                refused.append(
                    ProseFinding(
                        block=kind,
                        question_id=question_id,
                        check="facts",
                        code=codes.CLAIM_UNBACKED_OUTCOME,
                        rule="facts.not_given",
                        replaced_by="server_copy",
                    )
                )
                findings = ("the reply rests on facts it was not given",)
                continue
            verdict, reviewed = await self._review(review.model_copy(update={"text": block.text}))
            if verdict is None:  # the reviewer failed: nothing unreviewed is ever shown
                attempts.extend((drafted(), reviewed))
                break
            if not verdict.passed:
                attempts.extend((drafted(codes.CLAIM_REVIEW_FAILED), reviewed))
                refused.append(
                    ProseFinding(
                        block=kind,
                        question_id=question_id,
                        check="review",
                        code=codes.CLAIM_REVIEW_FAILED,
                        rule="review",
                        replaced_by="server_copy",
                    )
                )
                findings = verdict.findings or ("the review failed",)
                continue
            flagged = check_wording(block.text, turn.locale, backing)
            if flagged:
                attempts.extend((drafted(flagged[0].code), reviewed))
                refused.extend(wording_findings(flagged, kind, question_id, "guard", "server_copy"))
                findings = tuple(_described(f) for f in flagged)
                continue
            attempts.extend((drafted(), reviewed))
            audit.prose_findings.extend(
                f.model_copy(update={"replaced_by": "rewrite"}) for f in refused
            )
            return block
        audit.prose_findings.extend(refused)
        return None

    async def _review(self, request: ReviewRequest) -> tuple[ReviewVerdict | None, ProviderAttempt]:
        """The reviewer's verdict (None: it failed) and its call."""
        started = self.clock()
        try:
            with observe.span("model.review", kind=request.kind):
                verdict = await self.reviewer.review(request)
            if not isinstance(verdict, ReviewVerdict):
                raise MalformedModelOutput("a review answers with a ReviewVerdict")
        except Exception as exc:
            return None, provider_attempt(Purpose.REVIEW, self.reviewer, started, self.clock(), exc)
        return verdict, provider_attempt(Purpose.REVIEW, self.reviewer, started, self.clock())


def _described(finding: WordingFinding) -> str:
    """A wording finding as the narrator's rewrite reads it."""
    if finding.claim_class is None:
        return f"{finding.rule}: {finding.excerpt}"
    claimed = finding.claim_class.value.replace("_", " ")
    return f"claims {claimed} with nothing in this turn to back it: {finding.excerpt}"


def _as_draft(draft: Mapping[str, Any] | str) -> dict[str, Any] | str:
    if isinstance(draft, str):
        return draft
    if not isinstance(draft, Mapping):
        raise MalformedModelOutput("a draft is a JSON object or its text")
    return dict(draft)


def _facts_within(used: Sequence[Any], allowed: Sequence[Any]) -> bool:
    allowed_digests = {digest(fact) for fact in allowed}
    return all(digest(fact) in allowed_digests for fact in used)
