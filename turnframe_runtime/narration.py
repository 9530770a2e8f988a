"""Step S: the prose the `Narrator` port makes, checked before it may be shown.

Structured narration (the default, decision 0022): a draft is moves. It parses as moves of its
kind, each move is offered here, names only a thing of this turn and a phrasing it has, and renders
through server copy in the turn's locale; the rendered text then passes the wording guard (a
tripwire: nothing a model wrote is shown, so no reviewer is called).

Free narration: a draft is text. It parses as one draft of its kind (model output yields only
answer and transition drafts), cites only the facts it was given, an explicitly passed
`ClaimReviewer` passes it, the wording guard finds no claim the turn's server blocks do not back,
and every value in it is grounded in the turn (`ungrounded_values`).

Either way a draft refused by any check gets one rewrite with the findings; whenever no draft
passes, the caller's server copy stands in (these functions return None). Every call is recorded
as a provider attempt, and every refusal as a prose finding of the replay record.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from turnframe_core import codes
from turnframe_core.blocks import (
    AnswerBlock,
    AnswerStatus,
    CopyRef,
    MalformedModelOutput,
    TransitionBlock,
    parse_model_output,
)
from turnframe_core.canonical import digest
from turnframe_core.derive import derive_block_id
from turnframe_core.facts import NarratableFact
from turnframe_core.moves import Move, MoveKind, MovesRefused, Referable, check_moves, parse_moves
from turnframe_core.replay import CopyRender, ProseFinding, ProviderAttempt
from turnframe_core.wording import (
    DEFAULT_GUARD,
    GUARDED_LANGUAGES,
    ClaimClass,
    GuardConfig,
    TurnBacking,
    WordingFinding,
    check_wording,
    ungrounded_values,
)
from turnframe_runtime import observe
from turnframe_runtime.calls import ModelCall, take_model_call
from turnframe_runtime.context import AuditTrail, Purpose, TurnContext, provider_attempt
from turnframe_runtime.copy import CopyRenderError, MissingCopy, RenderedCopy, ServerCopy
from turnframe_runtime.ports import (
    AnswerRequest,
    ClaimReviewer,
    Narrator,
    ReviewRequest,
    ReviewVerdict,
    TransitionRequest,
)

__all__ = [
    "SERVER_COPY_GUARD",
    "Grounds",
    "Narration",
    "forbidden_claims",
    "move_template",
    "wording_findings",
]

Kind = Literal["answer", "transition"]


#: The guard as a tripwire over moves: their words are the server's own copy in a locale it
#: serves, so its language is not in question; its claim rules still run.
SERVER_COPY_GUARD: Final = GuardConfig(unchecked_languages=GUARDED_LANGUAGES)


def move_template(move: MoveKind | str, variant: int) -> str:
    """The server copy that renders one phrasing of a move."""
    return f"turnframe.move.{MoveKind(move).value}.{variant}"


@dataclass(frozen=True)
class Grounds:
    """What a turn's prose rests on beside its request: the fact each ref of a move cites
    (structured: a receipt's outcome, a card's availability, a state value), and the words every
    value of free prose must occur in (the turn's facts, receipts, notices, cards and the user's
    own message)."""

    cites: Mapping[str, NarratableFact] = field(default_factory=dict)
    values: tuple[str, ...] = ()


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
    """One turn's calls to the narrator (and, in free narration, to the reviewer)."""

    narrator: Narrator
    #: free narration's reviewer; None: structured narration, which shows nothing a model wrote
    reviewer: ClaimReviewer | None
    turn: TurnContext
    clock: Callable[[], int]
    audit: AuditTrail
    #: the copy moves render through (what is shown is recorded in `audit`)
    copy: ServerCopy
    #: how the guard reads free prose's languages (`RuntimeConfig.guard`)
    guard: GuardConfig = DEFAULT_GUARD

    @property
    def free(self) -> bool:
        """Free narration (the narrator's text, reviewed) rather than structured (moves): the
        kernel gives a reviewer only to free narration."""
        return self.reviewer is not None

    async def answer(
        self, request: AnswerRequest, backing: TurnBacking, grounds: Grounds | None = None
    ) -> AnswerBlock | None:
        """The narrator's answer to one question, if it fits the question and its facts."""
        grounds = grounds or Grounds()

        async def draft(findings: tuple[str, ...]) -> Mapping[str, Any] | str:
            with observe.span("model.answer", question_id=request.question_id):
                return await self.narrator.answer(request.model_copy(update={"findings": findings}))

        block_id = derive_block_id(
            self.turn.account_id, self.turn.turn_id, f"answer:{request.question_id}"
        )
        if self.reviewer is None:  # structured (`free`)
            said = await self._moved(
                "answer", request.question_id, draft, request, backing, grounds
            )
            if said is None:
                return None
            moves, rendered, facts = said
            return AnswerBlock(
                block_id=block_id,
                question_id=request.question_id,
                text=_joined(rendered),
                basis=request.basis,
                status=_answer_status(moves),
                facts_used=facts,
                copy_ref=rendered[0].copy_ref,
                moves=moves,
            )

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
        block = await self._reviewed(
            request.question_id, draft, shaped, review, backing, grounds, self.reviewer
        )
        if not isinstance(block, AnswerBlock):
            return None
        return block.model_copy(update={"basis": request.basis})

    async def transition(
        self, request: TransitionRequest, backing: TurnBacking, grounds: Grounds | None = None
    ) -> TransitionBlock | None:
        """The narrator's transition within the request's facts."""
        grounds = grounds or Grounds()

        async def draft(findings: tuple[str, ...]) -> Mapping[str, Any] | str:
            with observe.span("model.transition"):
                return await self.narrator.transition(
                    request.model_copy(update={"findings": findings})
                )

        turn = self.turn
        block_id = derive_block_id(turn.account_id, turn.turn_id, "transition")
        if self.reviewer is None:  # structured (`free`)
            said = await self._moved("transition", None, draft, request, backing, grounds)
            if said is None:
                return None
            moves, rendered, facts = said
            return TransitionBlock(
                block_id=block_id,
                text=_joined(rendered),
                facts_used=facts,
                copy_ref=rendered[0].copy_ref,
                moves=moves,
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
        block = await self._reviewed(None, draft, shaped, review, backing, grounds, self.reviewer)
        if not isinstance(block, TransitionBlock):
            return None
        return block.model_copy(update={"block_id": block_id})

    # --- structured narration ---------------------------------------------------------------------

    async def _moved(
        self,
        kind: Kind,
        question_id: str | None,
        draft: Callable[[tuple[str, ...]], Awaitable[Mapping[str, Any] | str]],
        request: AnswerRequest | TransitionRequest,
        backing: TurnBacking,
        grounds: Grounds,
    ) -> tuple[tuple[Move, ...], list[_Said], tuple[NarratableFact, ...]] | None:
        """The first draft of two whose moves render and pass the guard: its moves, what each
        rendered, and the facts they cite; or None (server copy stands in)."""
        purpose = Purpose.ANSWER if kind == "answer" else Purpose.TRANSITION
        attempts: list[ProviderAttempt] = []
        refused: list[ProseFinding] = []
        findings: tuple[str, ...] = ()
        try:
            for _round in range(2):
                started = self.clock()
                try:
                    reply = await draft(findings)
                except Exception as exc:
                    attempts.append(
                        provider_attempt(purpose, self.narrator, started, self.clock(), exc)
                    )
                    break
                ended = self.clock()
                try:
                    moves = parse_moves(_as_draft(reply), kind=kind, question_id=question_id)
                    problem = check_moves(
                        moves, refs=request.refs, allowed=request.moves, variants=request.variants
                    )
                    if problem is None and kind == "answer" and _answer_status(moves) is None:
                        problem = MovesRefused(
                            codes.NARRATION_BAD_SHAPE,
                            "an answer states a fact, asks, or says it cannot answer",
                        )
                    if problem is not None:
                        raise problem
                    rendered = self._rendered(moves, request.refs, request.locale)
                except MovesRefused as no:
                    attempts.append(self._drafted(purpose, started, ended, no.code))
                    refused.append(_move_finding(no, kind, question_id))
                    findings = (no.message,)
                    continue
                except Exception:  # whatever a model sent: never the turn's failure
                    code = codes.NARRATION_BAD_SHAPE  # never another layer's code
                    attempts.append(self._drafted(purpose, started, ended, code))
                    refused.append(
                        _move_finding(MovesRefused(code, "unreadable"), kind, question_id)
                    )
                    findings = ("the reply was not a draft of moves",)
                    continue
                # judged in the language the copy rendered in (a turn in a locale the runtime
                # does not serve renders in its default one)
                written_in = rendered[0].render.copy_ref.locale
                flagged = check_wording(
                    _template_words(rendered), written_in, backing, SERVER_COPY_GUARD
                )
                if flagged:
                    attempts.append(self._drafted(purpose, started, ended, flagged[0].code))
                    refused.extend(
                        wording_findings(flagged, kind, question_id, "guard", "server_copy")
                    )
                    findings = tuple(_described(f) for f in flagged)
                    continue
                attempts.append(self._drafted(purpose, started, ended))
                for said in rendered:
                    self.audit.rendered(said.render)
                self.audit.prose_findings.extend(
                    f.model_copy(update={"replaced_by": "rewrite"}) for f in refused
                )
                cited = tuple(
                    grounds.cites[m.ref]
                    for m in moves
                    if m.ref is not None and m.ref in grounds.cites
                )
                return moves, rendered, tuple(dict.fromkeys(cited))
            self.audit.prose_findings.extend(refused)
            return None
        finally:  # every call, in the order made, each draft's once its fate is known
            for attempt in attempts:
                self.audit.attempted(attempt)

    def _drafted(
        self, purpose: Purpose, started: int, ended: int, discarded: str | None = None
    ) -> ProviderAttempt:
        return provider_attempt(purpose, self.narrator, started, ended, discarded=discarded)

    def _rendered(
        self, moves: Sequence[Move], refs: Sequence[Referable], locale: str
    ) -> list[_Said]:
        """Each move rendered through server copy in `locale`; `MovesRefused` (copy missing)
        when one cannot be."""
        by_ref = {r.ref: r for r in refs}
        said: list[_Said] = []
        for index, move in enumerate(moves):
            template_id = move_template(move.move, move.variant)
            params = _params(move, by_ref.get(move.ref) if move.ref is not None else None)
            try:
                rendered = self.copy.render(template_id, locale, params)
            except (MissingCopy, CopyRenderError):
                rendered = None
            if rendered is None or not rendered.text.strip():  # nothing to say it with
                raise MovesRefused(
                    codes.NARRATION_COPY_MISSING,
                    f"move {index} ({move.move.value}) has no copy in this language",
                    index,
                )
            said.append(_Said(rendered, template_id, params))
        return said

    async def _reviewed(
        self,
        question_id: str | None,
        draft: Callable[[tuple[str, ...]], Awaitable[Mapping[str, Any] | str]],
        shaped: Callable[[Sequence[Any]], AnswerBlock | TransitionBlock],
        review: ReviewRequest,
        backing: TurnBacking,
        grounds: Grounds,
        reviewer: ClaimReviewer,
    ) -> AnswerBlock | TransitionBlock | None:
        """Free narration: the first draft of two that passes every check (the facts it may
        cite and the reviewer's request are `review`'s), or None."""
        purpose = Purpose.ANSWER if review.kind == "answer" else Purpose.TRANSITION
        attempts: list[ProviderAttempt] = []
        try:
            return await self._drafts(
                question_id, purpose, draft, shaped, review, backing, grounds, reviewer, attempts
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
        grounds: Grounds,
        reviewer: ClaimReviewer,
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
            noted = take_model_call()  # this draft's, before the review notes its own

            def drafted(
                discarded: str | None = None,
                *,
                at: int = started,
                to: int = ended,
                call: ModelCall | None = noted,
            ) -> ProviderAttempt:
                return provider_attempt(
                    purpose, self.narrator, at, to, discarded=discarded, noted=call
                )

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
            verdict, reviewed = await self._review(
                reviewer, review.model_copy(update={"text": block.text})
            )
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
            flagged = check_wording(block.text, turn.locale, backing, self.guard)
            flagged = flagged or ungrounded_values(
                block.text, turn.locale, grounds.values, self.guard
            )
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

    async def _review(
        self, reviewer: ClaimReviewer, request: ReviewRequest
    ) -> tuple[ReviewVerdict | None, ProviderAttempt]:
        """The reviewer's verdict (None: it failed) and its call."""
        started = self.clock()
        try:
            with observe.span("model.review", kind=request.kind):
                verdict = await reviewer.review(request)
            if not isinstance(verdict, ReviewVerdict):
                raise MalformedModelOutput("a review answers with a ReviewVerdict")
        except Exception as exc:
            return None, provider_attempt(Purpose.REVIEW, reviewer, started, self.clock(), exc)
        return verdict, provider_attempt(Purpose.REVIEW, reviewer, started, self.clock())


@dataclass(frozen=True)
class _Said:
    """One move as server copy rendered it, and the record of that render."""

    rendered: RenderedCopy
    template_id: str
    params: Mapping[str, str]

    @property
    def copy_ref(self) -> CopyRef:
        return self.rendered.copy_ref

    @property
    def render(self) -> CopyRender:
        return CopyRender(
            template_id=self.template_id,
            params=dict(self.params),
            text=self.rendered.text,
            copy_ref=self.rendered.copy_ref,
        )


def _answer_status(moves: Sequence[Move]) -> AnswerStatus | None:
    """What an answer of moves does with its question: answers it (a `state`), asks back (an
    `ask`), or says it cannot (`cannot_answer`); None: none of them, so it is no answer."""
    said = {move.move for move in moves}
    if MoveKind.STATE in said:
        return AnswerStatus.ANSWERED
    if MoveKind.ASK in said:
        return AnswerStatus.CLARIFICATION_REQUESTED
    if MoveKind.CANNOT_ANSWER in said:
        return AnswerStatus.UNSUPPORTED
    return None


def _joined(said: Sequence[_Said]) -> str:
    return " ".join(s.rendered.text.strip() for s in said)


def _template_words(said: Sequence[_Said]) -> str:
    """The words the moves' templates add around what they name: the rendered text without the
    server's own words each move was given (a receipt's title, a fact as its copy words it, an
    option's label and effect), which the server wrote and stand true by themselves. The
    tripwire judges these: composing moves must add no claim of its own."""
    kept = []
    for s in said:
        text = s.rendered.text
        given = (w for k, w in s.params.items() if k != "kind" and w.strip())
        for words in sorted(given, key=len, reverse=True):
            text = text.replace(words, " ")
        kept.append(text.strip())
    return " ".join(kept)


def _params(move: Move, referred: Referable | None) -> dict[str, str]:
    """What a move's copy is given: the words of the thing it names, ending as a sentence (for
    `explain`, the option's label and, when the workflow words it, what choosing it does)."""
    if referred is None:
        return {}
    if move.move is MoveKind.EXPLAIN:
        option = next(o for o in referred.options if o.option == move.option)
        effect = _sentence(option.effect) if option.effect else ""
        return {"card": referred.says, "option": option.says, "effect": effect}
    return {"says": _sentence(referred.says), "kind": referred.kind.value}


def _sentence(words: str) -> str:
    """`words` ending as a sentence does (a full stop added when they end without one)."""
    words = words.strip()
    return words if not words or words[-1] in _ENDINGS else words + "."


#: full stop, question and exclamation marks, ellipsis, and their CJK forms
_ENDINGS: Final = frozenset(".?!\u2026\u3002\uff1f\uff01")


_RULES: Final = {
    codes.NARRATION_FREE_TEXT: "moves.free_text",
    codes.NARRATION_UNKNOWN_MOVE: "moves.unknown_move",
    codes.NARRATION_MOVE_NOT_OFFERED: "moves.not_offered",
    codes.NARRATION_REF_NOT_IN_TURN: "moves.ref_not_in_turn",
    codes.NARRATION_VARIANT_OUT_OF_RANGE: "moves.variant_out_of_range",
    codes.NARRATION_COPY_MISSING: "moves.copy_missing",
    codes.NARRATION_BAD_SHAPE: "moves.bad_shape",
}


def _move_finding(refused: MovesRefused, block: Kind, question_id: str | None) -> ProseFinding:
    return ProseFinding(
        block=block,
        question_id=question_id,
        check="moves",
        code=refused.code,
        rule=_RULES.get(refused.code, "moves.bad_shape"),
        move=refused.index,
        replaced_by="server_copy",
    )


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
