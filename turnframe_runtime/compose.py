"""Steps Q to T: compose the turn's blocks and guard its claims.

Order (DESIGN §4): receipts in the order of the acts that produced them, notices, answers in
question order, the transition, then cards, so the text that introduces a card precedes it.
Receipts render from events read back from the committed ledger. Prose comes from the narrator
when one is wired and its draft passes; otherwise server copy stands in (it never carries an
operational claim of its own). A narrator's request names what its moves may be about (`_refs`):
this turn's receipts, notices and cards by block id, its facts, obligations and offers by position.
The claim guards run last over the composed turn: model prose that
rests on a fact the turn lacks, or whose words claim what no block backs, is replaced by server
copy, and a turn whose server blocks break a rule is never returned.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from turnframe_core import codes
from turnframe_core.blocks import (
    AnswerBasis,
    AnswerBlock,
    AnswerStatus,
    InteractionBlock,
    NoticeBlock,
    NoticeSeverity,
    ReceiptBlock,
    ResponseBlock,
    TransitionBlock,
)
from turnframe_core.cases import CaseKey, CaseRef
from turnframe_core.claims import ClaimGuardViolation, check_claims
from turnframe_core.copytext import Localized, plain
from turnframe_core.derive import derive_block_id, derive_receipt_id, derive_replay_token
from turnframe_core.events import DomainEvent, ReceiptSeverity
from turnframe_core.facts import (
    ActChangedNothing,
    ActRefused,
    AnswerProgress,
    InteractionAlreadyAnswered,
    InteractionAvailable,
    NarratableFact,
    ObligationOpen,
    OperationalOutcome,
    RecordFact,
    StateValue,
)
from turnframe_core.interactions import Interaction, InteractionKind, InteractionStatus
from turnframe_core.moves import REFERS_TO, MoveKind, Referable, ReferableKind, ReferableOption
from turnframe_core.replay import CommittedOutcome, FailedOutcome, OutcomeUnknown
from turnframe_core.turn import AssistantTurn, Expectation, ExpectationKind, Offer, TurnStatus
from turnframe_core.understanding import Question, Understanding
from turnframe_core.wording import (
    DEFAULT_GUARD,
    ClaimClass,
    GuardConfig,
    TurnBacking,
    check_wording,
    value_grounds,
)
from turnframe_core.workflow import Obligation, Workflow
from turnframe_runtime.card_answer import Closed
from turnframe_runtime.cases import CaseBook, in_key_order, workflow_for
from turnframe_runtime.context import (
    NOTHING,
    AuditTrail,
    Executed,
    Noticed,
    TurnContext,
    merge_notices,
    noticed,
)
from turnframe_runtime.copy import (
    CopyRenderError,
    MissingCopy,
    RenderedCopy,
    ServerCopy,
    as_data,
    as_params,
    receipt_title,
)
from turnframe_runtime.narration import (
    Grounds,
    Narration,
    forbidden_claims,
    move_template,
    wording_findings,
)
from turnframe_runtime.ports import AnswerRequest, TransitionRequest
from turnframe_runtime.reduce import CaseInView, Plan

__all__ = ["Composer", "TurnResult"]

_NOTICE_SEVERITY = {
    codes.NOTICE_TURN_INTERRUPTED: NoticeSeverity.WARNING,
    codes.NOTICE_COMMAND_FAILED: NoticeSeverity.ERROR,
    codes.NOTICE_RESULT_UNCONFIRMED: NoticeSeverity.ERROR,
    codes.NOTICE_OUTCOME_UNCERTAIN: NoticeSeverity.WARNING,
    codes.NOTICE_INTERACTION_UNAVAILABLE: NoticeSeverity.ERROR,
    codes.NOTICE_CASE_REFRESH_UNAVAILABLE: NoticeSeverity.ERROR,
    codes.NOTICE_REVISION_CONFLICT: NoticeSeverity.WARNING,
    codes.NOTICE_VERIFICATION_IN_PROGRESS: NoticeSeverity.WARNING,
    codes.NOTICE_ACT_REFUSED: NoticeSeverity.WARNING,
    codes.NOTICE_PARTIAL_RESULT: NoticeSeverity.WARNING,
    codes.NOTICE_STALE_INTERACTION: NoticeSeverity.WARNING,
    codes.NOTICE_MESSAGE_UNREADABLE: NoticeSeverity.WARNING,
}


@dataclass(frozen=True)
class TurnResult:
    """What the turn did, as composition needs it."""

    understanding: Understanding
    plan: Plan
    cases: CaseBook
    readback: Mapping[str, DomainEvent]
    shown: Sequence[Interaction]
    touched: frozenset[CaseKey]
    answered_before: Interaction | None = None
    #: the events a card answered before committed, read back with the turn's own
    answered_events: Sequence[DomainEvent] = ()
    closed: Closed | None = None
    #: what ran this turn, in execution order, as its commit judged it
    executed: Sequence[Executed] = ()
    #: what the turn's steps said about what they did not do, merged in the order it arose
    noticed: Noticed = NOTHING

    def touched_cases(self) -> list[CaseInView]:
        found = (self.cases.get(key) for key in in_key_order(self.touched))
        return [case for case in found if case is not None]


def shown_notices(result: TurnResult) -> Noticed:
    """The notices a turn shows, merged once: what its steps said, in the order it arose, then
    that the answered card was answered before or is closed."""
    return merge_notices(
        result.noticed,
        noticed(codes.NOTICE_ALREADY_ANSWERED) if result.answered_before is not None else NOTHING,
        noticed(result.closed.code) if result.closed is not None else NOTHING,
    )


@dataclass(frozen=True)
class Composer:
    """Composes one turn's blocks."""

    turn: TurnContext
    workflows: Mapping[str, Workflow]
    copy: ServerCopy
    clock: Callable[[], int]
    narration: Narration | None
    audit: AuditTrail
    #: receipt status codes that say a follow-up is scheduled (`DeclaresFollowUps`)
    follow_up_codes: frozenset[str] = frozenset()
    #: receipt status code -> the outcome classes its receipt backs (`DeclaresReceiptClaims`)
    receipt_claims: Mapping[str, tuple[ClaimClass, ...]] = field(default_factory=dict)
    #: how the guard reads free prose's languages (`RuntimeConfig.guard`)
    guard: GuardConfig = DEFAULT_GUARD

    def _render(self, template_id: str, **params: object) -> RenderedCopy:
        return self.copy.render(template_id, self.turn.locale, params)

    def _words(self, text: str | Localized) -> str | None:
        """A workflow's words: its copy reference rendered in the turn's locale, or the text it
        wrote itself; None when its copy cannot be rendered (the turn goes without them)."""
        if not isinstance(text, Localized):
            return text
        try:
            return self.copy.render(text.template_id, self.turn.locale, as_params(text.params)).text
        except (MissingCopy, CopyRenderError):
            return None

    async def compose(self, result: TurnResult) -> AssistantTurn:
        turn = self.turn
        groups: list[tuple[str, Sequence[DomainEvent]]] = []
        for executed in result.executed:
            outcome = executed.outcome
            if isinstance(outcome, CommittedOutcome):
                events = [result.readback[i] for i in outcome.event_ids if i in result.readback]
                groups.append((executed.planned.envelope.case_ref.workflow, events))
        if result.answered_before is not None and result.answered_events:
            groups.append((result.answered_before.case_ref.workflow, result.answered_events))
        receipts = self._receipts(groups)
        notices = self._notices(shown_notices(result))
        cards = self._cards(result.shown)
        backing = self._backing(result, [*receipts, *notices, *cards])
        answers = await self._answers(result, backing, [*receipts, *notices, *cards])
        ask = self._ask(result, cards)
        offers = self._offers(result) if not cards and ask is None else ()
        acted = bool(result.understanding.acts) or turn.input.interaction_response is not None
        answers_only = bool(answers) and not (acted or receipts or notices or cards)
        transition = None
        if not answers_only:
            transition = await self._transition(
                result, receipts, notices, cards, ask, offers, backing
            )
        prose: list[AnswerBlock | TransitionBlock] = list(answers)
        if transition is not None:
            prose.append(transition)
        refused = self._refused(prose, [*receipts, *notices, *cards], backing)
        if refused:  # model prose the turn does not back: server copy replaces it
            questions = {q.question_id: q for q in result.understanding.questions}
            prose = [
                block
                if block.block_id not in refused
                else (
                    self._server_answer(result, questions[block.question_id])
                    if isinstance(block, AnswerBlock) and block.question_id in questions
                    else self._server_transition(result, receipts, cards, ask, offers)
                )
                for block in prose
            ]
        blocks: list[ResponseBlock] = [*receipts, *notices, *prose, *cards]
        violations = check_claims(blocks)
        if violations:  # what the server wrote breaks a rule: a bug; the turn is never returned
            raise ClaimGuardViolation(tuple(violations))
        subjects = tuple(case.case_ref for case in result.touched_cases())
        return self._turn(TurnStatus.COMPLETED, blocks, result.shown, offers, subjects)

    def interrupted(self, shown: Sequence[Interaction]) -> AssistantTurn:
        """The reply of a turn recovery could not finish (nothing of it ran): the interruption
        notice, and the cards it stored, which are real."""
        interrupted = noticed(codes.NOTICE_TURN_INTERRUPTED)
        blocks: list[ResponseBlock] = [*self._notices(interrupted), *self._cards(shown)]
        return self._turn(TurnStatus.INTERRUPTED, blocks, shown, (), ())

    def _turn(
        self,
        status: TurnStatus,
        blocks: Sequence[ResponseBlock],
        shown: Sequence[Interaction],
        offers: tuple[Offer, ...],
        subjects: tuple[CaseRef, ...],
    ) -> AssistantTurn:
        turn = self.turn
        return AssistantTurn(
            turn_id=turn.turn_id,
            conversation_id=turn.conversation_id,
            account_id=turn.account_id,
            status=status,
            locale=turn.locale,
            blocks=tuple(blocks),
            replay_token=derive_replay_token(turn.turn_id),
            created_at=turn.now,
            completed_at=max(turn.now, self.clock()),
            expectations=tuple(
                Expectation(
                    kind=ExpectationKind.AWAITING_SELECTION
                    if c.kind is InteractionKind.SELECT_TARGET
                    else ExpectationKind.AWAITING_CONFIRMATION,
                    case_ref=c.case_ref,
                )
                for c in shown
            ),
            offers=offers,
            subjects=subjects,
        )

    def _cards(self, shown: Sequence[Interaction]) -> list[InteractionBlock]:
        turn = self.turn
        return [
            InteractionBlock.from_view(
                derive_block_id(turn.account_id, turn.turn_id, f"interaction:{c.interaction_id}"),
                c.view(),
            )
            for c in shown
        ]

    def _backing(self, result: TurnResult, server: Sequence[ResponseBlock]) -> TurnBacking:
        """What the turn's server blocks back; with a narrator, also that a follow-up an earlier
        turn promised is still pending for a case the turn is about (one it touched, refused an
        act on, or answers a question about): "you'll hear back here" stays true."""
        if self.narration is None:
            return TurnBacking.of(server, self.follow_up_codes, self.receipt_claims)
        about = {case.case_ref: case for case in result.touched_cases()}
        refused_on = {case_ref for case_ref, _ in result.noticed.refusals}
        for case in result.cases.handles.values():
            if case.case_ref in refused_on:
                about.setdefault(case.case_ref, case)
        for question in result.understanding.questions:
            for case in self._question_cases(result, question):
                about.setdefault(case.case_ref, case)
        pending = any(case.workflow.follow_up_pending(case.state) for case in about.values())
        return TurnBacking.of(
            server, self.follow_up_codes, self.receipt_claims, pending_follow_up=pending
        )

    def _state_facts(self, result: TurnResult) -> list[StateValue]:
        """The narratable values of the cases in view, as facts."""
        return [
            StateValue(case_ref=case.case_ref, field=name, value=value)
            for case in result.cases.handles.values()
            for name, value in case.workflow.narratable_state(case.state).items()
            if value is not None
        ]

    def _refused(
        self,
        prose: Sequence[AnswerBlock | TransitionBlock],
        server: Sequence[ResponseBlock],
        backing: TurnBacking,
    ) -> set[str]:
        """The model-written blocks that break a claim rule over the composed turn: a structural
        one (a fact it cites that the turn lacks) or, for free prose, a wording one (the guard,
        run again whatever the review said). Prose made of moves is server copy whose template
        words the narration's tripwire judged against this same backing. Findings go to the
        record."""
        refused: set[str] = set()
        for violation in check_claims([*server, *prose]):
            if violation.author == "model":
                refused.add(violation.block_id)
                self.audit.claim_violations.append(violation.code)
        for block in prose:
            if block.author != "model" or block.moves:
                continue
            flagged = check_wording(block.text, self.turn.locale, backing, self.guard)
            if flagged:
                refused.add(block.block_id)
                question_id = block.question_id if isinstance(block, AnswerBlock) else None
                self.audit.prose_findings.extend(
                    wording_findings(flagged, block.kind, question_id, "final", "server_copy")
                )
        return refused

    # --- server blocks ---------------------------------------------------------------------------

    def _receipts(
        self, events_by_command: Sequence[tuple[str, Sequence[DomainEvent]]]
    ) -> list[ReceiptBlock]:
        blocks: list[ReceiptBlock] = []
        seen: set[str] = set()
        for workflow_key, events in events_by_command:
            if not events:
                continue
            workflow = workflow_for(self.workflows, workflow_key)
            given = {e.event_id for e in events}
            for spec in workflow.receipts(events):
                receipt_id = derive_receipt_id(spec.status_code, spec.event_ids)
                if receipt_id in seen or not set(spec.event_ids) <= given:
                    continue  # a receipt cites only the committed events it was handed
                seen.add(receipt_id)
                title = self._receipt_title(spec.template_id, spec.params)
                blocks.append(
                    ReceiptBlock(
                        block_id=derive_block_id(
                            self.turn.account_id, self.turn.turn_id, f"receipt:{receipt_id}"
                        ),
                        receipt_id=receipt_id,
                        event_ids=spec.event_ids,
                        status_code=spec.status_code,
                        severity=spec.severity,
                        title=title.text,
                        copy_ref=title.copy_ref,
                    )
                )
        return blocks

    def _receipt_title(self, template_id: str, params: Mapping[str, object]) -> RenderedCopy:
        """The receipt's own title; a template the start check could not see (a workflow that
        does not declare its receipt templates) falls back to a generic one, since the events
        committed and the turn must still get its reply."""
        quoted = as_params(params)
        try:
            return self.copy.render(receipt_title(template_id), self.turn.locale, quoted)
        except (MissingCopy, CopyRenderError):  # no template, or params it cannot format
            return self._render("turnframe.receipt.recorded")

    def _notices(self, said: Noticed) -> list[NoticeBlock]:
        blocks: list[NoticeBlock] = []
        for index, notice in enumerate(said.notices):
            if notice.copy is not None:  # a refusal, in the copy its domain named
                rendered = self.copy.render(
                    notice.copy.template_id, self.turn.locale, notice.copy.params
                )
            else:
                rendered = self.copy.render(notice.code, self.turn.locale, notice.params)
            blocks.append(
                NoticeBlock(
                    block_id=derive_block_id(
                        self.turn.account_id, self.turn.turn_id, f"notice:{notice.code}:{index}"
                    ),
                    code=notice.code,
                    severity=_NOTICE_SEVERITY.get(notice.code, NoticeSeverity.INFO),
                    text=rendered.text,
                    copy_ref=rendered.copy_ref,
                )
            )
        return blocks

    # --- answers ---------------------------------------------------------------------------------

    @staticmethod
    def _question_cases(result: TurnResult, question: Question) -> list[CaseInView]:
        handles = result.cases.handles
        if question.about:
            return [handles[h] for h in question.about if h in handles]
        return list(handles.values())

    @staticmethod
    def _basis(result: TurnResult) -> AnswerBasis:
        if any(isinstance(e.outcome, CommittedOutcome) for e in result.executed):
            return AnswerBasis.COMMITTED_STATE_AFTER_TURN
        return AnswerBasis.CURRENT_COMMITTED_STATE

    def _case_facts(self, case: CaseInView) -> list[NarratableFact]:
        facts: list[NarratableFact] = [
            RecordFact(
                case_ref=case.case_ref,
                label=case.label,
                phase=case.view.phase,
                outcome=case.view.outcome,
            )
        ]
        for name, value in case.workflow.narratable_state(case.state).items():
            if value is not None:
                facts.append(StateValue(case_ref=case.case_ref, field=name, value=value))
        for obligation in case.view.obligations:
            facts.append(
                ObligationOpen(
                    case_ref=case.case_ref,
                    obligation_key=obligation.key,
                    params=obligation.params,
                    sentence=self._sentence(case, obligation),
                )
            )
        return facts

    async def _answers(
        self, result: TurnResult, backing: TurnBacking, server: Sequence[ResponseBlock]
    ) -> list[AnswerBlock]:
        blocks: list[AnswerBlock] = []
        for question in result.understanding.questions:
            cases = self._question_cases(result, question)
            answer = None
            if self.narration is not None and cases:
                facts = tuple(f for case in cases for f in self._case_facts(case))
                refs, cites = self._fact_refs(facts)
                answer = await self.narration.answer(
                    AnswerRequest(
                        locale=self.turn.locale,
                        question_id=question.question_id,
                        question=question.text,
                        basis=self._basis(result),
                        allowed_facts=facts,
                        forbidden_claims=forbidden_claims(backing),
                        **self._moves(refs, _ANSWER_MOVES),
                    ),
                    backing,
                    Grounds(
                        cites=cites,
                        values=value_grounds(server, facts, (self.turn.input.text,)),
                    ),
                )
            blocks.append(answer or self._server_answer(result, question))
        return blocks

    def _server_answer(self, result: TurnResult, question: Question) -> AnswerBlock:
        """Server copy standing in for a model answer: what the records hold, nothing more."""
        cases = self._question_cases(result, question)
        block_id = derive_block_id(
            self.turn.account_id, self.turn.turn_id, f"answer:{question.question_id}"
        )
        if not cases:
            rendered = self._render("turnframe.answer.source_unavailable")
            return AnswerBlock(
                author="server",
                block_id=block_id,
                question_id=question.question_id,
                text=rendered.text,
                status=AnswerStatus.SOURCE_UNAVAILABLE,
                copy_ref=rendered.copy_ref,
            )
        lines: list[str] = []
        facts: list[NarratableFact] = []
        copy_ref = None
        for case in cases:
            values = [
                (name, value)
                for name, value in case.workflow.narratable_state(case.state).items()
                if value is not None
            ]
            facts.extend(StateValue(case_ref=case.case_ref, field=n, value=v) for n, v in values)
            if values:
                listed = ", ".join(self._fact(case, n, v) for n, v in values)
                rendered = self._render(
                    "turnframe.answer.record", label=as_data(case.label), values=listed
                )
            else:
                rendered = self._render("turnframe.answer.nothing_known", label=as_data(case.label))
            lines.append(rendered.text)
            copy_ref = rendered.copy_ref
        return AnswerBlock(
            author="server",
            block_id=block_id,
            question_id=question.question_id,
            text=" ".join(lines),
            basis=self._basis(result),
            facts_used=tuple(facts),
            copy_ref=copy_ref,
        )

    def _fact(self, case: CaseInView, name: str, value: object) -> str:
        """One field of a case as the server states it in the turn's locale: the workflow's
        `<key>.fact.<name>` copy (given the value, to format or word it), else its
        `<key>.field.<name>` label and the value as data, else the field's name and the value."""
        return self._fact_of(case.case_ref.workflow, name, value)

    def _fact_of(self, workflow: str, name: str, value: object) -> str:
        fact = f"{workflow}.fact.{name}"
        if self.copy.has(fact):
            try:
                return self._render(fact, value=value).text
            except CopyRenderError:
                pass  # a value the copy cannot format: stated as data below
        label = f"{workflow}.field.{name}"
        shown = self._render(label).text if self.copy.has(label) else name.replace("_", " ")
        return f"{shown} {as_data(value)}"

    # --- what comes next -------------------------------------------------------------------------

    def _offers(self, result: TurnResult) -> tuple[Offer, ...]:
        """Next steps of the cases the turn touched that owe nothing, limited to operations the
        case offers now (the next turn may take one up)."""
        offers: list[Offer] = []
        for case in result.touched_cases():
            if case.view.obligations:
                continue
            on_offer = {s.operation for s in case.workflow.operations(case.view) if s.proposable}
            offers.extend(
                Offer(case_ref=case.case_ref, operation=step.operation, words=words,
                      arguments=dict(step.arguments))
                for step in case.workflow.next_steps(case.view)
                if step.operation in on_offer and (words := self._words(step.words))
            )  # fmt: skip
        return tuple(offers)

    def _ask(
        self, result: TurnResult, cards: Sequence[InteractionBlock], *, refused: bool = False
    ) -> str | None:
        """The one thing to ask when no card asks it: the first open obligation's sentence of
        a case the turn touched (with `refused`, or else of a case an act of the turn was
        refused on: what it still needs may be why)."""
        if cards:
            return None
        cases = result.touched_cases()
        if refused:
            seen = {case.case_ref for case in cases}
            refused_on = {case_ref for case_ref, _ in result.noticed.refusals}
            cases += [
                case
                for case in result.cases.handles.values()
                if case.case_ref in refused_on and case.case_ref not in seen
            ]
        for case in cases:
            for obligation in case.view.obligations:
                sentence = self._sentence(case, obligation)
                if sentence:
                    return sentence
        return None

    def _sentence(self, case: CaseInView, obligation: Obligation) -> str | None:
        sentence = case.workflow.obligation_sentence(obligation, self.turn.locale)
        return None if sentence is None else self._words(sentence)

    # --- what a narrator's moves may name --------------------------------------------------------

    def _moves(self, refs: Sequence[Referable], offered: frozenset[MoveKind]) -> dict[str, Any]:
        """A request's `refs`, `moves` and `variants`: of the moves `offered` here, those with a
        phrasing in server copy and, for a move that names a thing, a thing it may name."""
        kinds = {r.kind for r in refs}
        variants = {move.value: self._variants(move) for move in MoveKind}
        moves = tuple(
            move
            for move in MoveKind
            if move in offered
            and variants[move.value]
            and (move not in REFERS_TO or bool(kinds & REFERS_TO[move]))
        )
        return {"refs": tuple(refs), "moves": moves, "variants": variants}

    def _variants(self, move: MoveKind) -> int:
        """How many phrasings server copy has for `move` (`turnframe.move.<move>.0`, `.1`, ...)."""
        count = 0
        while count < _MAX_VARIANTS and self.copy.has(move_template(move, count)):
            count += 1
        return count

    def _fact_refs(
        self, facts: Sequence[NarratableFact]
    ) -> tuple[list[Referable], dict[str, NarratableFact]]:
        """The facts a `state` move may name (`fact.<n>`, n their 1-based position among
        `facts`: the values the server can word) and the obligations an `ask` may name
        (`obligation.<n>`, n counting those with a sentence)."""
        refs: list[Referable] = []
        cites: dict[str, NarratableFact] = {}
        asked = 0
        for n, fact in enumerate(facts, 1):
            if isinstance(fact, StateValue):
                ref = f"fact.{n}"
                says = self._fact_of(fact.case_ref.workflow, fact.field, fact.value)
                refs.append(Referable(ref=ref, kind=ReferableKind.FACT, says=says))
                cites[ref] = fact
            elif isinstance(fact, ObligationOpen) and fact.sentence:
                asked += 1
                ref = f"obligation.{asked}"
                refs.append(Referable(ref=ref, kind=ReferableKind.OBLIGATION, says=fact.sentence))
        return refs, cites

    def _block_refs(
        self,
        result: TurnResult,
        receipts: Sequence[ReceiptBlock],
        notices: Sequence[NoticeBlock],
        cards: Sequence[InteractionBlock],
    ) -> tuple[list[Referable], dict[str, NarratableFact]]:
        """The turn's server blocks an `introduce` (or, for a card, an `explain`) may name, by
        block id, with the fact each one backs."""
        refs: list[Referable] = []
        cites: dict[str, NarratableFact] = {}
        for receipt, outcome in zip(receipts, _outcomes(receipts), strict=True):
            refs.append(
                Referable(ref=receipt.block_id, kind=ReferableKind.RECEIPT, says=receipt.title)
            )
            cites[receipt.block_id] = outcome
        refs.extend(
            Referable(ref=n.block_id, kind=ReferableKind.NOTICE, says=n.text) for n in notices
        )
        shown = {c.interaction_id: c for c in result.shown}
        for card, available in zip(cards, _available(cards), strict=True):
            options = tuple(
                ReferableOption(
                    option=o.option_id,
                    says=o.label,
                    effect=self._option_effect(shown[card.interaction_id], o.option_id),
                )
                for o in card.options
            )
            refs.append(
                Referable(
                    ref=card.block_id, kind=ReferableKind.CARD, says=card.title, options=options
                )
            )
            cites[card.block_id] = available
        return refs, cites

    def _option_effect(self, card: Interaction, option_id: str) -> str | None:
        """What choosing a card's option does, in its workflow's `<key>.option.<option id>` copy
        given the card's metadata (None when the workflow does not word it). The start check
        renders that copy with the samples its workflow or catalog declares; a render that
        still fails here is logged and counted as `copy.fallback`, and the option goes without
        its effect."""
        template = f"{card.case_ref.workflow}.option.{option_id}"
        if not self.copy.has(template):
            return None
        try:
            params = as_params(card.payload.metadata)
            return self.copy.render(template, self.turn.locale, params).text
        except CopyRenderError:
            return None

    # --- the transition --------------------------------------------------------------------------

    async def _transition(
        self,
        result: TurnResult,
        receipts: Sequence[ReceiptBlock],
        notices: Sequence[NoticeBlock],
        cards: Sequence[InteractionBlock],
        ask: str | None,
        offers: Sequence[Offer],
        backing: TurnBacking,
    ) -> TransitionBlock:
        if self.narration is not None:
            facts: list[NarratableFact] = [*_outcomes(receipts), *_available(cards)]
            facts.extend(
                ActRefused(case_ref=case_ref, code=r.code, explanation=plain(r.explanation))
                for case_ref, r in result.noticed.refusals
            )
            if result.plan.unchanged:
                unchanged = self._render("turnframe.act.changed_nothing").text
                facts.extend(
                    ActChangedNothing(case_ref=case_ref, operation=operation, explanation=unchanged)
                    for case_ref, operation in result.plan.unchanged
                )
            if result.answered_before is not None:
                facts.append(_already_answered(result.answered_before))
            refs, cites = self._block_refs(result, receipts, notices, cards)
            fact_refs, fact_cites = self._fact_refs(facts)
            steps = [
                Referable(ref=f"operation.{n}", kind=ReferableKind.OPERATION, says=offer.words)
                for n, offer in enumerate(offers, 1)
            ]
            ask_too = ask if ask is not None else self._ask(result, cards, refused=True)
            asked = [] if ask_too is None else [
                Referable(ref="obligation.1", kind=ReferableKind.OBLIGATION, says=ask_too)
            ]  # fmt: skip
            request = TransitionRequest(
                locale=self.turn.locale,
                allowed_facts=tuple(facts),
                receipt_titles=tuple(r.title for r in receipts),
                notice_texts=tuple(n.text for n in notices),
                card_title=cards[0].title if cards else None,
                ask=ask,
                forbidden_claims=forbidden_claims(backing),
                **self._moves((*refs, *fact_refs, *asked, *steps), _TRANSITION_MOVES),
            )
            grounds = Grounds(
                cites={**cites, **fact_cites},
                # and what the cases in view hold now, which a narrator may state
                values=value_grounds(
                    [*receipts, *notices, *cards],
                    [*facts, *self._state_facts(result)],
                    (self.turn.input.text, *(c.label for c in result.cases.handles.values())),
                ),
            )
            written = await self.narration.transition(request, backing, grounds)
            if written is not None:
                return written
        return self._server_transition(result, receipts, cards, ask, offers)

    def _server_transition(
        self,
        result: TurnResult,
        receipts: Sequence[ReceiptBlock],
        cards: Sequence[InteractionBlock],
        ask: str | None,
        offers: Sequence[Offer],
    ) -> TransitionBlock:
        """Server copy standing in for the narrator: what committed this turn (its receipts),
        then the card or the one thing to ask, else an invitation to go on."""
        parts: list[RenderedCopy] = []
        done = [r for r in receipts if any(ev in result.readback for ev in r.event_ids)]
        executed = result.executed
        unknown = any(_may_have_landed(e.outcome) for e in executed)
        for severity, template in _SAYS_BY_SEVERITY:
            shown = [r.title for r in done if r.severity is severity]
            if shown:
                parts.append(self._render(template, items="; ".join(map(_unstopped, shown))))
        if not done and not unknown and (executed or result.plan.act_results):
            parts.append(self._render("turnframe.transition.nothing_done"))
        if cards:
            parts.append(self._render("turnframe.transition.card", title=cards[0].title))
        elif ask:  # the workflow's own sentence, through copy so the block names its source
            parts.append(self._render("turnframe.transition.ask", question=ask))
        elif offers:
            steps = "; ".join(offer.words for offer in offers)
            parts.append(self._render("turnframe.transition.next", steps=steps))
        else:
            parts.append(self._render("turnframe.transition.go_on"))
        return TransitionBlock(
            author="server",
            block_id=derive_block_id(self.turn.account_id, self.turn.turn_id, "transition"),
            text=" ".join(p.text for p in parts),
            facts_used=(*_outcomes(done), *_available(cards)),
            copy_ref=parts[-1].copy_ref,
        )


#: the moves offered in an answer and in a transition (each still needs a phrasing in copy and,
#: when it names a thing, a thing of the turn it may name)
_ANSWER_MOVES: Final = frozenset(
    {
        MoveKind.GREET, MoveKind.THANK, MoveKind.APOLOGIZE, MoveKind.ACKNOWLEDGE, MoveKind.STATE,
        MoveKind.ASK, MoveKind.CANNOT_ANSWER, MoveKind.CLOSE,
    }
)  # fmt: skip
_TRANSITION_MOVES: Final = frozenset(set(MoveKind) - {MoveKind.CANNOT_ANSWER})
#: the most phrasings of one move a request lists
_MAX_VARIANTS: Final = 20

#: what the server's transition says of the receipts of each severity, in this order: it never
#: calls a refusal or a failure "done"
_SAYS_BY_SEVERITY: Final = (
    (ReceiptSeverity.SUCCESS, "turnframe.transition.done"),
    (ReceiptSeverity.INFO, "turnframe.transition.recorded"),
    (ReceiptSeverity.WARNING, "turnframe.transition.check"),
    (ReceiptSeverity.ERROR, "turnframe.transition.not_done"),
)


def _unstopped(title: str) -> str:
    """A receipt title without its closing full stop (the sentence it goes into ends with one)."""
    return title.rstrip().rstrip(".。")


def _outcomes(receipts: Sequence[ReceiptBlock]) -> list[NarratableFact]:
    return [
        OperationalOutcome(
            receipt_id=r.receipt_id, event_ids=r.event_ids, status_code=r.status_code
        )
        for r in receipts
    ]


def _available(cards: Sequence[InteractionBlock]) -> list[NarratableFact]:
    return [
        InteractionAvailable(interaction_id=c.interaction_id, interaction_kind=c.interaction_kind)
        for c in cards
    ]


_PROGRESS = {
    InteractionStatus.ACTIVE: AnswerProgress.RUNNING,  # claimed by a turn still in flight
    InteractionStatus.RESOLVING: AnswerProgress.RUNNING,
    InteractionStatus.RESOLVED: AnswerProgress.DONE,
    InteractionStatus.FAILED: AnswerProgress.FAILED,
}


def _already_answered(card: Interaction) -> NarratableFact:
    """What became of a card's earlier answer: running, done, failed, or closed."""
    return InteractionAlreadyAnswered(
        interaction_id=card.interaction_id,
        option_id=card.resolved_option_id,
        progress=_PROGRESS.get(card.status, AnswerProgress.CLOSED),
    )


def _may_have_landed(outcome: object) -> bool:
    """An outcome after which nobody may say that nothing changed."""
    return isinstance(outcome, OutcomeUnknown) or (
        isinstance(outcome, FailedOutcome) and outcome.code == codes.EXECUTION_UNTRUSTED_RESULT
    )
