"""`TurnRuntime`: one user turn in, one persisted `AssistantTurn` out (DESIGN §5, steps A-V).

The order is the safety property:
- read and judge first (conversation, cases, the card answer): a refused answer writes nothing;
- accept the turn (user turn, phase `received`, replay record), then understand (a click-only turn
  makes no model call), then reduce the WHOLE turn before any effect;
- persist pre-execution cards, journal every command before it runs, execute batches, and write
  ONE all-or-nothing commit bundle;
- render receipts from events read back from the committed ledger, persist follow-up cards,
  compose, run the claim guard, persist the exact turn, then report it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from turnframe_core import codes
from turnframe_core.blocks import (
    AnswerBasis,
    AnswerBlock,
    AnswerStatus,
    InteractionBlock,
    MalformedModelOutput,
    NoticeBlock,
    NoticeSeverity,
    ReceiptBlock,
    TransitionBlock,
    parse_model_output,
)
from turnframe_core.canonical import digest
from turnframe_core.cases import CaseKey, CaseRef
from turnframe_core.claims import check_claims, ensure_claims
from turnframe_core.commands import (
    CommandBatch,
    CommandEnvelope,
    CommandOrigin,
    ConfirmationPolicy,
    ConfirmedInteraction,
    ExternalSaga,
    PerCase,
    origin_for_answer,
    origin_satisfies,
    scope_key,
)
from turnframe_core.errors import TurnframeError
from turnframe_core.events import DomainEvent
from turnframe_core.facts import (
    ActRefused,
    InteractionAvailable,
    NarratableFact,
    ObligationOpen,
    OperationalOutcome,
    RecordFact,
    StateValue,
)
from turnframe_core.ids import (
    IdSource,
    UlidIdSource,
    derive_batch_id,
    derive_block_id,
    derive_command_id,
    derive_interaction_id,
    derive_outbox_id,
    derive_receipt_id,
    derive_replay_token,
)
from turnframe_core.interactions import (
    AcceptedAnswer,
    ActionClass,
    AlreadyAnswered,
    ApplyOperation,
    ConfirmCommands,
    DeclineAndRecord,
    DeclineCommands,
    Dismiss,
    Interaction,
    InteractionExpired,
    InteractionKind,
    InteractionNotActive,
    InteractionOption,
    InteractionPayload,
    InteractionStatus,
    OptionStyle,
    ResolutionChannel,
    ReviewEntry,
    SelectTarget,
    StaleInteraction,
    validate_answer,
)
from turnframe_core.replay import (
    CommandOutcome,
    CommandOutcomeRecord,
    CommittedOutcome,
    FailedOutcome,
    OutcomeUnknown,
    PolicyDecisionRecord,
    ProviderAttempt,
    RejectedOutcome,
    ReplayRecord,
    RevisionConflictOutcome,
    TargetResolutionRecord,
    TurnPhase,
    WorkflowVersion,
)
from turnframe_core.turn import (
    AssistantTurn,
    Expectation,
    ExpectationKind,
    Offer,
    TurnInput,
    TurnStatus,
)
from turnframe_core.understanding import (
    AmbiguousTarget,
    Brief,
    CardTarget,
    Constraint,
    HandleTarget,
    OfferedCard,
    OfferedHandle,
    OfferedOperation,
    ProposedAct,
    Understanding,
    UnderstandingRejected,
    validate_understanding,
)
from turnframe_core.workflow import (
    DomainRefusal,
    ResolvedAct,
    ViewInvariantViolation,
    WorkflowDefinition,
    check_view,
)
from turnframe_runtime.config import RuntimeConfig
from turnframe_runtime.copy import CatalogCopy, MissingCopy, RenderedCopy, ServerCopy
from turnframe_runtime.ports import (
    AnswerRequest,
    CaseDirectory,
    ExecutionFailed,
    ExecutionRejected,
    ExecutionResult,
    ExecutionTimeout,
    Interpreter,
    Narrator,
    RevisionConflict,
    TransitionRequest,
    WorkflowExecutor,
)
from turnframe_runtime.reduce import (
    BLOCKING_NOTICE,
    CaseInView,
    Plan,
    PlannedCommand,
    blocking_constraint,
    group_by_case,
    reduce_turn,
)
from turnframe_store.bundle import Stores
from turnframe_store.errors import Conflict, NotFound, StoreError
from turnframe_store.records import (
    CaseInvalidation,
    CommitBundle,
    Fresh,
    InteractionFinish,
    JournalCompletion,
    JournalEntry,
    JournalStatus,
    OutboxEntry,
    UserTurnRecord,
)

__all__ = ["TurnInProgress", "TurnRuntime", "UnknownWorkflow"]

_NOTICE_SEVERITY = {
    codes.NOTICE_COMMAND_FAILED: NoticeSeverity.ERROR,
    codes.NOTICE_INTERACTION_UNAVAILABLE: NoticeSeverity.ERROR,
    codes.NOTICE_CASE_REFRESH_UNAVAILABLE: NoticeSeverity.ERROR,
    codes.NOTICE_REVISION_CONFLICT: NoticeSeverity.WARNING,
    codes.NOTICE_VERIFICATION_IN_PROGRESS: NoticeSeverity.WARNING,
    codes.NOTICE_ACT_REFUSED: NoticeSeverity.WARNING,
    codes.NOTICE_PARTIAL_RESULT: NoticeSeverity.WARNING,
    codes.NOTICE_STALE_INTERACTION: NoticeSeverity.WARNING,
    codes.NOTICE_MESSAGE_UNREADABLE: NoticeSeverity.WARNING,
}
CONFIRM_OPTION = "opt_confirm"
DECLINE_OPTION = "opt_decline"
NONE_OF_THESE_OPTION = "opt_none"


class TurnInProgress(TurnframeError):
    """The client's turn id was accepted before and has no reply yet (running, or awaiting
    recovery); nothing new was written."""

    code = codes.RUNTIME_TURN_IN_PROGRESS


class UnknownWorkflow(TurnframeError):
    code = codes.RUNTIME_UNKNOWN_WORKFLOW


@dataclass
class _Notice:
    code: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Executed:
    """One command that ran (or tried to) this turn, in execution order."""

    planned: PlannedCommand
    outcome: CommandOutcome
    events: tuple[DomainEvent, ...] = ()
    #: events a replayed execution returned that the ledger already holds (not appended again)
    in_ledger: frozenset[str] = frozenset()


@dataclass
class _Turn:
    """Everything one turn learns as it advances (private working state)."""

    input: TurnInput
    turn_id: str
    now: int
    cases: dict[CaseKey, CaseInView] = field(default_factory=dict)
    handles: dict[str, CaseInView] = field(default_factory=dict)
    card: Interaction | None = None
    accepted: AcceptedAnswer | None = None
    answered_before: Interaction | None = None
    closed_card: tuple[Interaction, str] | None = None
    understanding: Understanding | None = None
    plan: Plan | None = None
    card_commands: list[PlannedCommand] = field(default_factory=list)
    card_declines: list[JournalEntry] = field(default_factory=list)
    card_resolving: bool = False
    dismissing: bool = False
    confirm_ids: list[str] = field(default_factory=list)
    declining: bool = False
    selection_awaiting: dict[str, list[PlannedCommand]] = field(default_factory=dict)
    notices: list[_Notice] = field(default_factory=list)
    refusals: list[tuple[CaseRef | None, DomainRefusal]] = field(default_factory=list)
    pending_cards: list[tuple[str, Interaction]] = field(default_factory=list)
    #: acts whose confirmation card waits for this turn's commit (their case changes first)
    deferred_confirmations: list[str] = field(default_factory=list)
    claim_violations: list[str] = field(default_factory=list)
    offers: tuple[Offer, ...] = ()
    audit_once: dict[str, Any] | None = None
    shown_cards: list[Interaction] = field(default_factory=list)
    executed: list[_Executed] = field(default_factory=list)
    readback: dict[str, DomainEvent] = field(default_factory=dict)
    touched: set[CaseKey] = field(default_factory=set)
    provider_attempts: list[ProviderAttempt] = field(default_factory=list)
    policy_decisions: list[PolicyDecisionRecord] = field(default_factory=list)
    target_resolutions: list[TargetResolutionRecord] = field(default_factory=list)
    interactions_created: list[str] = field(default_factory=list)
    outbox_ids: list[str] = field(default_factory=list)
    record: ReplayRecord | None = None

    @property
    def account_id(self) -> str:
        return self.input.account_id

    @property
    def conversation_id(self) -> str:
        return self.input.conversation_id

    @property
    def locale(self) -> str:
        return self.input.locale

    def notice(self, code: str, **params: Any) -> None:
        """Add a notice; the same code with the same parameters is said once."""
        if all((n.code, n.params) != (code, params) for n in self.notices):
            self.notices.append(_Notice(code, params))

    @property
    def effects_started(self) -> bool:
        return bool(self.executed) or self.card_resolving


class TurnRuntime:
    """Runs conversational turns safely. Build one per process and share it."""

    def __init__(
        self,
        *,
        stores: Stores,
        workflows: Sequence[WorkflowDefinition],
        directory: CaseDirectory,
        executor: WorkflowExecutor,
        interpreter: Interpreter | None = None,
        narrator: Narrator | None = None,
        copy: ServerCopy | None = None,
        config: RuntimeConfig | None = None,
        clock: Callable[[], int] | None = None,
        ids: IdSource | None = None,
    ) -> None:
        self.stores = stores
        self.workflows = {w.key: w for w in workflows}
        if len(self.workflows) != len(workflows):
            raise ValueError("workflow keys must be unique")
        self.directory = directory
        self.executor = executor
        self.interpreter = interpreter
        self.narrator = narrator
        self.copy: ServerCopy = copy or CatalogCopy()
        self.config = config or RuntimeConfig()
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)
        self.ids = ids or UlidIdSource(self.clock)
        missing = self.copy.missing(self.config.locales)
        if missing:
            raise MissingCopy(missing)

    # --- public API -----------------------------------------------------------------------------

    async def load_turn(self, account_id: str, turn_id: str) -> AssistantTurn:
        """The stored assistant turn, exactly as it was returned."""
        return await self.stores.conversations.get_assistant_turn(account_id, turn_id)

    async def replay(self, account_id: str, replay_token: str) -> ReplayRecord:
        """The turn's audit record (read-only: executes nothing, calls no model)."""
        return await self.stores.replay.get_by_token(account_id, replay_token)

    async def handle_turn(self, turn_input: TurnInput) -> AssistantTurn:
        """Run one turn end to end and return the AssistantTurn it persisted."""
        account = turn_input.account_id
        if turn_input.turn_id is not None:
            prior = await self._prior_reply(account, turn_input.turn_id)
            if prior is not None:
                return prior
        t = _Turn(
            input=turn_input,
            turn_id=turn_input.turn_id or self.ids.new_id("turn"),
            now=self.clock(),
        )
        # Read and judge before writing anything: a refused card answer writes nothing.
        if not turn_input.is_click_only:  # a click needs only the cases its card names
            await self._load_cases(t)  # D/E
        await self._admit_card_answer(t)  # C
        await self._accept(t)  # A/B
        try:
            await self._understand(t)  # G
            self._reduce(t)  # J/K
            await self._advance(t, TurnPhase.REDUCED)
            await self._prepare(t)  # L
            await self._execute_and_commit(t)  # M/N
        except BaseException as failure:
            await self._fail_before_effects(t, failure)
            raise
        await self._follow_up(t)  # O/P
        turn = await self._compose(t)  # Q-T
        await self._deliver(t, turn)  # U/V
        return turn

    async def _fail_before_effects(self, t: _Turn, failure: BaseException) -> None:
        """A turn that failed before any command could run ends `failed`; one that may have
        effects is left at its phase for recovery to finish by idempotency key."""
        if t.effects_started or t.record is None:
            return
        entries = await self.stores.journal.unsettled_for_turn(t.account_id, t.turn_id)
        if entries:
            return
        code = getattr(failure, "code", codes.RUNTIME_TURN_FAILED)
        try:
            await self.stores.replay.put(self._record(t, TurnPhase.FAILED, failure_code=str(code)))
            await self.stores.conversations.set_phase(t.account_id, t.turn_id, TurnPhase.FAILED)
        except StoreError:
            pass  # the marker stays unfinished: recovery restarts interpretation

    # --- A/B: accept ----------------------------------------------------------------------------

    async def _prior_reply(self, account_id: str, turn_id: str) -> AssistantTurn | None:
        try:
            return await self.stores.conversations.get_assistant_turn(account_id, turn_id)
        except NotFound:
            pass
        try:
            await self.stores.conversations.get_user_turn(account_id, turn_id)
        except NotFound:
            return None
        raise TurnInProgress("this turn was accepted before and has no reply yet")

    async def _accept(self, t: _Turn) -> None:
        conversations = self.stores.conversations
        await conversations.ensure_conversation(t.account_id, t.conversation_id)
        record = UserTurnRecord(
            account_id=t.account_id,
            conversation_id=t.conversation_id,
            turn_id=t.turn_id,
            received_at=t.now,
            input=t.input,
        )
        try:
            await conversations.append_user_turn(record)
        except Conflict:
            raise TurnInProgress("this turn was accepted before and has no reply yet") from None
        previous = await self.stores.replay.last_for_conversation(t.account_id, t.conversation_id)
        t.record = ReplayRecord(
            turn_id=t.turn_id,
            conversation_id=t.conversation_id,
            account_id=t.account_id,
            replay_token=derive_replay_token(t.turn_id),
            phase=TurnPhase.RECEIVED,
            recorded_at=t.now,
            input=t.input,
            previous_digest=previous.digest() if previous is not None else None,
            loaded_cases=tuple(case.case_ref for case in t.cases.values()),
            workflow_versions=tuple(
                sorted(
                    {
                        WorkflowVersion(key=c.workflow.key, version=c.workflow.version)
                        for c in t.cases.values()
                    },
                    key=lambda v: v.key,
                )
            ),
        )
        await self.stores.replay.put(t.record)  # the `received` marker came with the user turn

    async def _advance(self, t: _Turn, phase: TurnPhase) -> None:
        await self.stores.conversations.set_phase(t.account_id, t.turn_id, phase)

    # --- D/E: load and project ------------------------------------------------------------------

    def _workflow(self, key: str) -> WorkflowDefinition:
        workflow = self.workflows.get(key)
        if workflow is None:
            raise UnknownWorkflow("a case names a workflow this runtime does not run")
        return workflow

    async def _load_case(self, t: _Turn, case: CaseKey, label: str | None) -> CaseInView | None:
        if case in t.cases:
            return t.cases[case]
        if not await self.directory.authorize(t.account_id, case):
            return None
        workflow = self._workflow(case.workflow)
        loaded = await self.directory.load(t.account_id, case)
        case_ref = CaseRef(
            workflow=case.workflow, case_id=case.case_id, expected_revision=loaded.revision
        )
        view = workflow.project(case_ref, loaded.state)
        violations = check_view(view)
        if violations:
            raise ViewInvariantViolation(tuple(violations))
        in_view = CaseInView(
            case_ref=case_ref,
            label=label or view.label or case.case_id,
            state=loaded.state,
            view=view,
            workflow=workflow,
        )
        t.cases[case] = in_view
        return in_view

    async def _load_cases(self, t: _Turn) -> None:
        candidates = await self.directory.candidates(t.account_id, t.conversation_id)
        for candidate in candidates:
            in_view = await self._load_case(t, candidate.case, candidate.label)
            if in_view is not None:
                t.handles[f"h{len(t.handles) + 1}"] = in_view

    # --- C: the card answer ---------------------------------------------------------------------

    async def _admit_card_answer(self, t: _Turn) -> None:
        response = t.input.interaction_response
        if response is None:
            return
        card: Interaction | None
        try:
            card = await self.stores.interactions.get(t.account_id, response.interaction_id)
        except NotFound:
            card = None
        current = 0
        if card is not None and card.conversation_id == t.conversation_id:
            case = await self._load_case(t, card.case_ref.key, None)
            if case is None:
                card = None  # a case the account may not reach answers like a missing card
            else:
                current = case.case_ref.expected_revision
        try:
            t.accepted = validate_answer(
                card,
                response,
                account_id=t.account_id,
                conversation_id=t.conversation_id,
                current_revision=current,
                now=t.now,
            )
            t.card = card
            if isinstance(t.accepted.action, SelectTarget):  # the chosen case, authorized too
                await self._load_case(t, t.accepted.action.case_ref.key, None)
        except AlreadyAnswered as answered:
            t.answered_before = answered.interaction
        except StaleInteraction as outdated:
            t.closed_card = (outdated.interaction, codes.NOTICE_STALE_INTERACTION)
        except (InteractionNotActive, InteractionExpired) as closed:
            code = (
                codes.NOTICE_STALE_INTERACTION
                if closed.interaction.status is InteractionStatus.INVALIDATED
                else codes.NOTICE_INTERACTION_CLOSED
            )
            t.closed_card = (closed.interaction, code)

    # --- G: understand --------------------------------------------------------------------------

    def _brief(self, t: _Turn) -> Brief:
        operations: dict[str, OfferedOperation] = {}
        for case in t.handles.values():
            for spec in case.workflow.operations(case.view):
                if spec.proposable and spec.operation not in operations:
                    names = tuple(a.name for a in spec.arguments)
                    required = tuple(a.name for a in spec.arguments if a.required)
                    operations[spec.operation] = OfferedOperation(
                        operation=spec.operation, arguments=names, required=required
                    )
        card_on_screen = None
        if t.card is not None:
            card_on_screen = OfferedCard(
                interaction_id=t.card.interaction_id,
                option_ids=tuple(o.option_id for o in t.card.payload.options),
                accepts_text=False,
            )
        return Brief(
            text=t.input.text,
            locale=t.locale,
            handles=tuple(
                OfferedHandle(handle=h, label=c.label, workflow=c.case_ref.workflow)
                for h, c in t.handles.items()
            ),
            operations=tuple(operations.values()),
            card_on_screen=card_on_screen,
        )

    async def _understand(self, t: _Turn) -> None:
        text = (t.input.text or "").strip()
        if text:
            if self.interpreter is None:
                t.notice(codes.NOTICE_MESSAGE_UNREADABLE)
            else:
                brief = self._brief(t)
                started = self.clock()
                try:
                    proposal = await self.interpreter.understand(brief)
                except Exception as exc:  # any provider failure before commit: no effect
                    t.provider_attempts.append(self._attempt(t, "understand", started, exc))
                    t.notice(codes.NOTICE_MESSAGE_UNREADABLE)
                else:
                    t.provider_attempts.append(self._attempt(t, "understand", started, None))
                    try:
                        t.understanding = validate_understanding(proposal, brief)
                    except UnderstandingRejected:
                        t.notice(codes.NOTICE_NOT_UNDERSTOOD)
        await self._advance(t, TurnPhase.INTERPRETED)

    def _attempt(
        self, t: _Turn, purpose: str, started: int, exc: Exception | None
    ) -> ProviderAttempt:
        port = self.interpreter if purpose == "understand" else self.narrator
        return ProviderAttempt(
            attempt=1 + sum(1 for a in t.provider_attempts if a.purpose == purpose),
            purpose=purpose,
            provider=type(port).__name__,
            model=getattr(port, "model_name", "unspecified"),
            outcome="failed" if exc is not None else "succeeded",
            code=getattr(exc, "code", None) or (type(exc).__name__ if exc else None),
            latency_ms=max(0, self.clock() - started),
        )

    # --- J/K: reduce ----------------------------------------------------------------------------

    def _reduce(self, t: _Turn) -> None:
        if t.accepted is not None and t.card is not None:
            self._reduce_card_answer(t, t.accepted, t.card)
        understanding = t.understanding or Understanding()
        card_case = t.cases.get(t.card.case_ref.key) if t.card is not None else None
        t.plan = reduce_turn(
            account_id=t.account_id,
            turn_id=t.turn_id,
            understanding=understanding,
            handles=t.handles,
            card_case=card_case,
            confirmation_origin=lambda act_id, case, compiled, command_ids: self._confirmation(
                t, act_id, case, compiled, command_ids
            ),
        )
        for act in understanding.acts:
            self._record_target(t, act)
        self._report_plan(t, t.plan)
        for act_id, cases in t.plan.selections.items():
            self._selection_card(t, act_id, cases)

    def _refusal_text(self, t: _Turn, refusal: DomainRefusal) -> str:
        """The domain's own sentence; the runtime's own refusals read from server copy."""
        template = f"turnframe.refusal.{refusal.code.rsplit('.', 1)[-1]}"
        if refusal.explanation == refusal.code and self.copy.has(template):
            return self.copy.render(template, t.locale, {}).text
        return refusal.explanation

    def _refuse(self, t: _Turn, case_ref: CaseRef | None, refusal: DomainRefusal) -> None:
        text = self._refusal_text(t, refusal)
        t.refusals.append((case_ref, refusal.model_copy(update={"explanation": text})))
        t.notice(codes.NOTICE_ACT_REFUSED, explanation=text)

    def _report_plan(self, t: _Turn, plan: Plan) -> None:
        """Every act that will not run says why: refusals, blocks by a constraint, policy."""
        for _act_id, case_ref, refusal in plan.refusals:
            self._refuse(t, case_ref, refusal)
        for code in plan.blocked_notices:
            t.notice(code)
        for _act_id, code in plan.policy_refusals:
            self._refuse(t, None, DomainRefusal(code=code, explanation=code))

    def _record_target(self, t: _Turn, act: ProposedAct) -> None:
        target = act.target
        if isinstance(target, HandleTarget) and target.handle in t.handles:
            record = TargetResolutionRecord(
                act_id=act.act_id, resolution="exact", case_ref=t.handles[target.handle].case_ref
            )
        elif isinstance(target, AmbiguousTarget):
            record = TargetResolutionRecord(
                act_id=act.act_id,
                resolution="ambiguous",
                candidates=tuple(t.handles[h].case_ref for h in target.handles),
            )
        elif isinstance(target, CardTarget) and t.card is not None:
            record = TargetResolutionRecord(
                act_id=act.act_id, resolution="exact", case_ref=t.card.case_ref
            )
        else:
            record = TargetResolutionRecord(act_id=act.act_id, resolution="missing")
        t.target_resolutions.append(record)

    def _confirmation(
        self,
        t: _Turn,
        act_id: str,
        case: CaseInView,
        compiled: Sequence[Any],
        command_ids: Sequence[str],
    ) -> CommandOrigin:
        """Build (not yet persist) the confirmation card an act waits for; return the origin its
        confirmed commands will carry."""
        summary = next(
            (
                s.summary
                for s in case.workflow.operations(case.view)
                if s.operation == compiled[0].command_type
            ),
            compiled[0].command_type,
        )
        render = self.copy.render
        policies = [case.workflow.policy(c.command_type) for c in compiled]
        review = any(p.confirmation is ConfirmationPolicy.REVIEW_CARD for p in policies)
        kind = InteractionKind.REVIEW_CHANGES if review else InteractionKind.CONFIRM_COMMAND
        entries = tuple(
            ReviewEntry(field=name, label=name.replace("_", " "), after=str(value))
            for command in compiled
            for name, value in command.payload.items()
        )
        payload = InteractionPayload(
            title=render("turnframe.card.confirm.title", t.locale, {"summary": summary}).text,
            review_entries=entries if review else (),
            options=(
                InteractionOption(
                    option_id=CONFIRM_OPTION,
                    style=OptionStyle.PRIMARY,
                    label=render("turnframe.card.confirm.confirm", t.locale, {}).text,
                    action=ConfirmCommands(command_ids=tuple(command_ids)),
                ),
                InteractionOption(
                    option_id=DECLINE_OPTION,
                    label=render("turnframe.card.confirm.decline", t.locale, {}).text,
                    action=DeclineCommands(),
                ),
            ),
            metadata={"act_id": act_id},
        )
        card = Interaction.create(
            interaction_id=derive_interaction_id(t.turn_id, f"confirm:{act_id}"),
            account_id=t.account_id,
            conversation_id=t.conversation_id,
            case_ref=case.case_ref,
            kind=kind,
            payload=payload,
            created_by_turn=t.turn_id,
            created_at=t.now,
        )
        t.pending_cards.append((act_id, card))
        return ConfirmedInteraction(
            interaction_id=card.interaction_id,
            payload_hash=card.payload_hash,
            interaction_kind=card.kind,
            action_class=ActionClass.CONFIRMS_COMMANDS,
            channel=ResolutionChannel.CLICK,
        )

    def _selection_card(self, t: _Turn, act_id: str, cases: Sequence[CaseInView]) -> None:
        act = next(a for a in (t.understanding or Understanding()).acts if a.act_id == act_id)
        shown = list(cases)[: self.config.max_selection_candidates]
        options = [
            InteractionOption(
                option_id=f"opt_case{i}",
                label=case.label,
                action=SelectTarget(case_ref=case.case_ref),
            )
            for i, case in enumerate(shown, start=1)
        ]
        options.append(
            InteractionOption(
                option_id=NONE_OF_THESE_OPTION,
                label=self.copy.render("turnframe.card.select.none", t.locale, {}).text,
                action=Dismiss(),
            )
        )
        payload = InteractionPayload(
            title=self.copy.render("turnframe.card.select.title", t.locale, {}).text,
            options=tuple(options),
            metadata={
                "deferred_act": act.model_dump(mode="json"),
                "constraints": [
                    c.model_dump(mode="json")
                    for c in (t.understanding or Understanding()).constraints
                ],
            },
        )
        card = Interaction.create(
            interaction_id=derive_interaction_id(t.turn_id, f"select_target:{act_id}"),
            account_id=t.account_id,
            conversation_id=t.conversation_id,
            case_ref=shown[0].case_ref,
            kind=InteractionKind.SELECT_TARGET,
            payload=payload,
            created_by_turn=t.turn_id,
            created_at=t.now,
            blocking=False,
            revision_independent=True,
        )
        t.pending_cards.append((act_id, card))

    def _reduce_card_answer(self, t: _Turn, accepted: AcceptedAnswer, card: Interaction) -> None:
        """The card's own act goes before the message's acts; its meaning is the stored action.

        Claiming the card is single-winner: a confirming or applying answer moves it to
        `resolving` (step L), a declining one to `declined`, a dismissal to `dismissed`, each by
        compare-and-swap; only the winner's commands run.
        """
        case = t.cases[card.case_ref.key]
        action = accepted.action
        t.touched.add(case.case_ref.key)
        constraints = frozenset(c.kind for c in (t.understanding or Understanding()).constraints)

        def admit(commands: list[PlannedCommand]) -> bool:
            for command in commands:
                blocked = blocking_constraint(constraints, command.policy)
                if blocked is not None:
                    t.notice(BLOCKING_NOTICE[blocked])
                    return False  # the card stays open: the user can answer it later
            t.card_commands.extend(commands)
            return bool(commands)

        if isinstance(action, ConfirmCommands):
            t.card_resolving = True  # its journaled commands are gathered at step L
            t.confirm_ids = list(action.command_ids)
        elif isinstance(action, DeclineCommands | DeclineAndRecord):
            t.declining = True
            t.notice(codes.NOTICE_INSTRUCTION_DECLINED)
            if isinstance(action, DeclineAndRecord):
                operation, arguments = action.operation, dict(action.arguments)
                admit(self._compile_for_card(t, case, operation, arguments, accepted, "record"))
        elif isinstance(action, ApplyOperation):
            arguments = dict(action.arguments)
            if action.freeform_argument and accepted.freeform_input is not None:
                arguments[action.freeform_argument] = accepted.freeform_input
            commands = self._compile_for_card(
                t, case, action.operation, arguments, accepted, "apply"
            )
            t.card_resolving = admit(commands)
        elif isinstance(action, SelectTarget):
            t.card_resolving = True
            self._reduce_selection(t, card, action)
        elif isinstance(action, Dismiss):
            t.dismissing = True
        else:
            t.card_resolving = True  # clarification, custom: the card resolves, nothing runs

    def _reduce_selection(self, t: _Turn, card: Interaction, action: SelectTarget) -> None:
        """Plan the act a selection card deferred, on the chosen case only, under the
        constraints of the turn that deferred it and of this one."""
        chosen = t.cases.get(action.case_ref.key)
        deferred = card.payload.metadata.get("deferred_act")
        if chosen is None or not isinstance(deferred, dict):
            t.notice(codes.NOTICE_COMMAND_FAILED)  # fail closed: the stored card is unusable
            return
        act = ProposedAct.model_validate(
            {**deferred, "target": {"kind": "handle", "handle": "hsel"}}
        )
        earlier = [
            Constraint.model_validate(c) for c in card.payload.metadata.get("constraints", [])
        ]
        now = list((t.understanding or Understanding()).constraints)
        scope = f"select:{card.interaction_id}:"
        sub = reduce_turn(
            account_id=t.account_id,
            turn_id=t.turn_id,
            understanding=Understanding(acts=(act,), constraints=(*earlier, *now)),
            handles={"hsel": chosen},
            card_case=None,
            confirmation_origin=lambda act_id, c, compiled, ids: self._confirmation(
                t, act_id, c, compiled, ids
            ),
            act_scope=scope,
        )
        t.card_commands.extend(sub.ready)
        self._report_plan(t, sub)
        t.selection_awaiting = {scope + act_id: cmds for act_id, cmds in sub.awaiting.items()}

    def _compile_for_card(
        self,
        t: _Turn,
        case: CaseInView,
        operation: str,
        arguments: dict[str, Any],
        accepted: AcceptedAnswer,
        purpose: str,
    ) -> list[PlannedCommand]:
        resolved = ResolvedAct(
            act_id=f"card.{purpose}",
            operation=operation,
            case_ref=case.case_ref,
            arguments=arguments,
            evidence_digest=accepted.payload_hash,
        )
        compiled = case.workflow.compile(resolved, case.view, case.state)
        if isinstance(compiled, DomainRefusal):
            t.refusals.append((case.case_ref, compiled))
            t.notice(codes.NOTICE_ACT_REFUSED, explanation=compiled.explanation)
            return []
        origin = origin_for_answer(accepted)
        planned: list[PlannedCommand] = []
        for position, command in enumerate(compiled):
            policy = case.workflow.policy(command.command_type)
            envelope = CommandEnvelope.build(
                command_id=_card_command_id(t.turn_id, accepted.interaction_id, position),
                turn_id=t.turn_id,
                account_id=t.account_id,
                case_ref=case.case_ref,
                origin=origin,
                command_type=command.command_type,
                payload=dict(command.payload),
            )
            allowed = origin_satisfies(origin, policy)
            _decided(t, envelope, policy, allowed)
            if not allowed:
                t.notice(codes.NOTICE_ACT_REFUSED, explanation=codes.POLICY_TRUSTED_ORIGIN_REQUIRED)
                return []
            planned.append(PlannedCommand(f"card.{purpose}", envelope, policy))
        return planned

    # --- L: persist pre-execution cards, journal ------------------------------------------------

    async def _prepare(self, t: _Turn) -> None:
        assert t.plan is not None
        if t.card is not None and t.accepted is not None:
            await self._gather_card_commands(t, t.card)
            await self._claim_card(t, t.card, t.accepted)
        # Cards the acts wait for: persisted first, then their commands journaled as awaiting
        # confirmation. A card on a case this turn also changes is planned after the commit,
        # against the revision the commit leaves (else the commit would invalidate it at once).
        changing = {c.envelope.case_ref.key for c in (*t.card_commands, *t.plan.ready)}
        awaiting = {**t.plan.awaiting, **t.selection_awaiting}
        for act_id, interaction in list(t.pending_cards):
            if interaction.case_ref.key in changing and act_id in t.plan.awaiting:
                t.deferred_confirmations.append(act_id)
                continue
            await self._persist_card(t, interaction, awaiting.get(act_id, []))

    async def _gather_card_commands(self, t: _Turn, card: Interaction) -> None:
        """A confirming click runs exactly the commands journaled with its card; a declining one
        settles them. Anything else found in the journal fails the answer closed."""
        if not (t.confirm_ids or t.declining):
            return
        confirm_ids = t.confirm_ids or [
            cid
            for option in card.payload.options
            if isinstance(option.action, ConfirmCommands)
            for cid in option.action.command_ids
        ]
        gathered: list[PlannedCommand] = []
        for command_id in confirm_ids:
            try:
                entry = await self.stores.journal.get(t.account_id, command_id)
            except NotFound:
                continue
            if entry.status is not JournalStatus.AWAITING_CONFIRMATION:
                continue
            if t.declining:
                t.card_declines.append(entry)
                continue
            planned = self._journaled_command(t, entry, card)
            if planned is not None:
                gathered.append(planned)
        if t.declining:
            return
        constraints = frozenset(c.kind for c in (t.understanding or Understanding()).constraints)
        blocked = [b for b in (blocking_constraint(constraints, c.policy) for c in gathered) if b]
        if blocked:
            for kind in blocked:
                t.notice(BLOCKING_NOTICE[kind])
            t.card_resolving = False  # the card stays open for a later answer
        elif len(gathered) != len(confirm_ids):
            t.notice(codes.NOTICE_COMMAND_FAILED)  # fail closed: the card's commands moved
            t.card_resolving = False
        else:
            t.card_commands.extend(gathered)

    async def _claim_card(self, t: _Turn, card: Interaction, accepted: AcceptedAnswer) -> None:
        """Move the card out of `active` by compare-and-swap; losing the race means another
        answer won, and this one becomes a second click (nothing of it runs)."""
        interactions = self.stores.interactions
        try:
            if t.declining:
                await interactions.decline(t.account_id, card.interaction_id, accepted.option_id)
            elif t.dismissing:
                await interactions.dismiss(t.account_id, card.interaction_id)
            elif t.card_resolving:
                await interactions.begin_resolution(
                    t.account_id, card.interaction_id, accepted.option_id
                )
            else:
                return
        except Conflict:
            t.answered_before = await interactions.get(t.account_id, card.interaction_id)
            t.card_commands.clear()
            t.card_declines.clear()
            t.card_resolving = t.declining = t.dismissing = False
            t.notices = [n for n in t.notices if n.code != codes.NOTICE_INSTRUCTION_DECLINED]

    async def _persist_card(
        self, t: _Turn, interaction: Interaction, commands: Sequence[PlannedCommand]
    ) -> bool:
        """Persist a pre-execution card, then journal the commands it will confirm. Any failure
        withdraws the card: it never appears as a block and `interaction_unavailable` says so."""
        try:
            if interaction.blocking:
                await self.stores.interactions.insert_replacing_blocking(interaction)
            else:
                await self.stores.interactions.insert(interaction)
            for command in commands:
                entry = JournalEntry.from_envelope(
                    command.envelope, now=t.now, status=JournalStatus.AWAITING_CONFIRMATION
                )
                await self.stores.journal.begin(entry)
        except StoreError:
            await self._withdraw_card(t, interaction)
            t.notice(codes.NOTICE_INTERACTION_UNAVAILABLE)
            return False
        t.shown_cards.append(interaction)
        t.interactions_created.append(interaction.interaction_id)
        t.touched.add(interaction.case_ref.key)
        return True

    async def _withdraw_card(self, t: _Turn, interaction: Interaction) -> None:
        """A card that failed to persist fully must never stay answerable."""
        with contextlib.suppress(StoreError):
            await self.stores.interactions.dismiss(t.account_id, interaction.interaction_id)

    def _journaled_command(
        self, t: _Turn, entry: JournalEntry, card: Interaction
    ) -> PlannedCommand | None:
        origin = entry.origin
        if not (
            isinstance(origin, ConfirmedInteraction)
            and origin.interaction_id == card.interaction_id
            and origin.payload_hash == card.payload_hash
        ):
            return None  # the journaled command is not the one this card confirms
        workflow = self._workflow(entry.case_ref.workflow)
        policy = workflow.policy(entry.command_type)
        envelope = CommandEnvelope.build(
            command_id=entry.command_id,
            turn_id=entry.turn_id,
            account_id=entry.account_id,
            case_ref=entry.case_ref,
            origin=origin,
            command_type=entry.command_type,
            payload=entry.payload,
        )
        if envelope.idempotency_key != entry.idempotency_key or not origin_satisfies(
            origin, policy
        ):
            return None
        _decided(t, envelope, policy, True)
        return PlannedCommand("card.confirm", envelope, policy)

    # --- M/N: execute, commit -------------------------------------------------------------------

    async def _execute_and_commit(self, t: _Turn) -> None:
        assert t.plan is not None and t.record is not None
        ready = [*t.card_commands, *t.plan.ready]
        for command in t.plan.ready:
            _decided(t, command.envelope, command.policy, True)
        if ready:
            await self._advance(t, TurnPhase.EXECUTING)
        groups = group_by_case(ready)
        journal = self.stores.journal
        # Journal admission for every command of the turn before the first effect, so recovery
        # finds the whole plan by key whatever batch a crash interrupts.
        for command in ready:
            if command.envelope.turn_id == t.turn_id:
                admission = await journal.begin(
                    JournalEntry.from_envelope(command.envelope, now=t.now)
                )
                if not isinstance(admission, Fresh):
                    raise TurnInProgress("a command of this turn was admitted before")
        for case_key, commands in groups.items():
            t.touched.add(case_key)
            for command in commands:
                await journal.mark_executing(t.account_id, command.envelope.command_id)
            t.executed.extend(await self._run_batch(t, case_key, commands))
        await self._commit(t)

    async def _run_batch(
        self, t: _Turn, case_key: CaseKey, commands: list[PlannedCommand]
    ) -> list[_Executed]:
        external = next((c.policy.atomicity for c in commands if c.is_external), None)
        scope = external if external is not None else PerCase()
        batch = CommandBatch(
            batch_id=derive_batch_id(
                t.turn_id, case_key.workflow, case_key.case_id, scope_key(scope)
            ),
            scope=scope,
            envelopes=tuple(c.envelope for c in commands),
        )
        outcome: CommandOutcome
        try:
            result: ExecutionResult = await self.executor.execute(batch)
        except RevisionConflict as conflict:
            t.notice(codes.NOTICE_REVISION_CONFLICT)
            outcome = RevisionConflictOutcome(current_revision=conflict.current_revision)
            return [_Executed(c, outcome) for c in commands]
        except ExecutionRejected as rejected:
            t.notice(codes.NOTICE_COMMAND_FAILED)
            outcome = RejectedOutcome(
                code=rejected.rejection_code, explanation=rejected.explanation
            )
            return [_Executed(c, outcome) for c in commands]
        except ExecutionTimeout:
            t.notice(codes.NOTICE_VERIFICATION_IN_PROGRESS)
            return [
                _Executed(
                    c, OutcomeUnknown(attempt_id=c.envelope.command_id, reason="execution_timeout")
                )
                for c in commands
            ]
        except ExecutionFailed as failed:
            t.notice(codes.NOTICE_COMMAND_FAILED)
            outcome = FailedOutcome(code=failed.message or codes.EXECUTION_FAILED)
            return [_Executed(c, outcome) for c in commands]
        except Exception:  # anything else: the effect may have landed, so it is not a failure
            t.notice(codes.NOTICE_VERIFICATION_IN_PROGRESS)
            return [
                _Executed(
                    c, OutcomeUnknown(attempt_id=c.envelope.command_id, reason="executor_error")
                )
                for c in commands
            ]
        in_ledger: frozenset[str] = frozenset()
        if result.replayed:  # the executor saw these keys before: some events may be stored
            stored = await self.stores.events.get_by_ids(
                t.account_id, [e.event_id for e in result.events]
            )
            in_ledger = frozenset(e.event_id for e in stored)
        executed = []
        for command in commands:
            own = tuple(e for e in result.events if e.command_id == command.envelope.command_id)
            executed.append(
                _Executed(
                    command,
                    CommittedOutcome(
                        new_revision=result.new_revision, event_ids=tuple(e.event_id for e in own)
                    ),
                    own,
                    in_ledger,
                )
            )
        return executed

    async def _commit(self, t: _Turn) -> None:
        assert t.record is not None
        completions = [
            JournalCompletion(command_id=e.planned.envelope.command_id, outcome=e.outcome)
            for e in t.executed
        ]
        completions += [
            JournalCompletion(
                command_id=entry.command_id, outcome=FailedOutcome(code=codes.EXECUTION_DECLINED)
            )
            for entry in t.card_declines
        ]
        events = tuple(ev for e in t.executed for ev in e.events if ev.event_id not in e.in_ledger)
        finishes: list[InteractionFinish] = []
        card_commands = {c.envelope.command_id for c in t.card_commands}
        card_runs = [e for e in t.executed if e.planned.envelope.command_id in card_commands]
        unknown = any(isinstance(e.outcome, OutcomeUnknown) for e in card_runs)
        # A card whose command has an unknown outcome stays `resolving` (it holds the slot and a
        # second click is a duplicate) until reconciliation settles the command.
        if t.card is not None and t.card_resolving and t.accepted is not None and not unknown:
            committed = [e for e in card_runs if isinstance(e.outcome, CommittedOutcome)]
            if not card_runs or committed:
                status = InteractionStatus.RESOLVED
            elif self.config.restore_card_after_failed_command:
                status = InteractionStatus.ACTIVE
            else:
                status = InteractionStatus.FAILED
            finishes.append(
                InteractionFinish(
                    interaction_id=t.card.interaction_id,
                    status=status,
                    option_id=t.accepted.option_id,
                    event_ids=tuple(ev.event_id for e in committed for ev in e.events),
                )
            )
        invalidations: dict[CaseKey, int] = {}
        outbox: list[OutboxEntry] = []
        for executed in t.executed:
            outcome = executed.outcome
            if not isinstance(outcome, CommittedOutcome):
                continue
            envelope = executed.planned.envelope
            invalidations[envelope.case_ref.key] = outcome.new_revision
            atomicity = executed.planned.policy.atomicity
            if isinstance(atomicity, ExternalSaga):
                outbox_id = derive_outbox_id(envelope.command_id)
                outbox.append(
                    OutboxEntry(
                        outbox_id=outbox_id,
                        command_id=envelope.command_id,
                        destination=atomicity.saga,
                        payload={
                            "account_id": envelope.account_id,
                            "case_ref": envelope.case_ref.model_dump(mode="json"),
                            "command_type": envelope.command_type,
                            "payload": envelope.payload,
                        },
                        idempotency_key=envelope.idempotency_key,
                        created_at=t.now,
                    )
                )
                t.outbox_ids.append(outbox_id)
        if not (completions or finishes):
            return
        record = self._record(t, TurnPhase.COMMITTED)
        bundle = CommitBundle(
            account_id=t.account_id,
            conversation_id=t.conversation_id,
            turn_id=t.turn_id,
            journal_completions=tuple(completions),
            events=events,
            interaction_finishes=tuple(finishes),
            invalidations=tuple(
                CaseInvalidation(workflow=k.workflow, case_id=k.case_id, current_revision=r)
                for k, r in invalidations.items()
            ),
            outbox=tuple(outbox),
            replay=record,
            phase=TurnPhase.COMMITTED,
        )
        result = await self.stores.commits.commit(bundle)
        t.record = record
        await self._settle_invalidated(t, result.invalidated)
        # Receipts cite only what the ledger returns: read the committed events back.
        committed_ids = [ev.event_id for e in t.executed for ev in e.events]
        if committed_ids:
            stored = await self.stores.events.get_by_ids(t.account_id, committed_ids)
            t.readback = {ev.event_id: ev for ev in stored}
            if len(t.readback) != len(set(committed_ids)):
                t.notice(codes.NOTICE_VERIFICATION_IN_PROGRESS)  # committed, not yet readable

    async def _settle_invalidated(self, t: _Turn, invalidated: Sequence[str]) -> None:
        """Commands journaled with a card the commit invalidated can never be confirmed: settle
        them as failed so nothing waits on them (best effort; recovery never resumes them)."""
        for interaction_id in invalidated:
            with contextlib.suppress(StoreError):
                card = await self.stores.interactions.get(t.account_id, interaction_id)
                for option in card.payload.options:
                    if not isinstance(option.action, ConfirmCommands):
                        continue
                    for command_id in option.action.command_ids:
                        entry = await self.stores.journal.get(t.account_id, command_id)
                        if entry.status is JournalStatus.AWAITING_CONFIRMATION:
                            await self.stores.journal.complete(
                                t.account_id,
                                command_id,
                                FailedOutcome(code=codes.EXECUTION_CARD_INVALIDATED),
                            )

    # --- O/P: re-project, follow-up cards -------------------------------------------------------

    async def _follow_up(self, t: _Turn) -> None:
        """Re-project every case the turn touched (or whose card was answered late), raise the
        confirmations deferred past the commit, then the blocking cards the views now need."""
        refresh = set(t.touched)
        offer_current: set[CaseKey] = set()
        for late in (t.closed_card[0] if t.closed_card else None, t.answered_before):
            if late is not None:
                refresh.add(late.case_ref.key)
                offer_current.add(late.case_ref.key)
        for key in sorted(refresh, key=lambda k: (k.workflow, k.case_id)):
            label = t.cases[key].label if key in t.cases else None
            t.cases.pop(key, None)
            try:
                case = await self._load_case(t, key, label)
            except StoreError:
                t.notice(codes.NOTICE_CASE_REFRESH_UNAVAILABLE)
                continue
            if case is None:
                continue
            for handle, old in list(t.handles.items()):
                if old.case_ref.key == key:
                    t.handles[handle] = case
            await self._raise_deferred_confirmations(t, case)
            await self._ensure_card(t, case, offer=key in offer_current)
        if t.deferred_confirmations:  # their case could not be refreshed: no card, and say so
            t.deferred_confirmations.clear()
            t.notice(codes.NOTICE_INTERACTION_UNAVAILABLE)

    async def _raise_deferred_confirmations(self, t: _Turn, case: CaseInView) -> None:
        understanding = t.understanding or Understanding()
        for act_id in list(t.deferred_confirmations):
            act = next(a for a in understanding.acts if a.act_id == act_id)
            waiting = t.plan.awaiting[act_id] if t.plan else []
            if not waiting or waiting[0].envelope.case_ref.key != case.case_ref.key:
                continue
            t.deferred_confirmations.remove(act_id)
            t.pending_cards = [(a, c) for a, c in t.pending_cards if a != act_id]
            replan = reduce_turn(
                account_id=t.account_id,
                turn_id=t.turn_id,
                understanding=Understanding(
                    acts=(act.model_copy(update={"target": HandleTarget(handle="hdef")}),),
                    constraints=understanding.constraints,
                ),
                handles={"hdef": case},
                card_case=None,
                confirmation_origin=lambda a, c, compiled, ids: self._confirmation(
                    t, a, c, compiled, ids
                ),
            )
            self._report_plan(t, replan)
            for pending_act, interaction in list(t.pending_cards):
                if pending_act == act_id and act_id in replan.awaiting:
                    await self._persist_card(t, interaction, replan.awaiting[act_id])

    async def _ensure_card(self, t: _Turn, case: CaseInView, *, offer: bool) -> None:
        """One open blocking card per case: keep (and, when `offer`, show) the one bound to the
        current revision; else derive the view's requirement, unless it was answered at this
        revision ("not now" means "ask again when the record changes")."""
        requirement = case.view.blocking_interaction
        revision = case.case_ref.expected_revision
        existing = await self.stores.interactions.for_case(t.account_id, case.case_ref.key)
        current = [
            c
            for c in existing
            if c.status.is_open and c.blocking
            and (c.revision_independent or c.bound_revision == revision)
        ]  # fmt: skip
        if current:
            card = current[0]
            matches = requirement is not None and (
                card.payload.metadata.get("requirement_key") == requirement.key
            )
            shown = any(c.interaction_id == card.interaction_id for c in t.shown_cards)
            if (offer or matches) and not shown and card.status is InteractionStatus.ACTIVE:
                t.shown_cards.append(card)
            return
        if requirement is None:
            return
        for card in existing:
            if (
                card.payload.metadata.get("requirement_key") == requirement.key
                and card.bound_revision == revision
                and card.status
                in (
                    InteractionStatus.RESOLVED,
                    InteractionStatus.DECLINED,
                    InteractionStatus.DISMISSED,
                )
            ):
                return
        payload = case.workflow.build_interaction(requirement, case.view, case.state)
        payload = payload.model_copy(
            update={"metadata": {**payload.metadata, "requirement_key": requirement.key}}
        )
        card = Interaction.create(
            interaction_id=derive_interaction_id(
                t.turn_id,
                f"follow_up:{case.case_ref.workflow}:{case.case_ref.case_id}:{requirement.key}",
            ),
            account_id=t.account_id,
            conversation_id=t.conversation_id,
            case_ref=case.case_ref,
            kind=requirement.kind,
            payload=payload,
            created_by_turn=t.turn_id,
            created_at=t.now,
            blocking=requirement.blocking,
            revision_independent=requirement.revision_independent,
            expires_at=t.now + requirement.expires_in_ms if requirement.expires_in_ms else None,
        )
        await self._persist_card(t, card, ())

    # --- Q-T: compose ---------------------------------------------------------------------------

    def _receipts(
        self, t: _Turn, events_by_command: Sequence[tuple[str, Sequence[DomainEvent]]]
    ) -> list[ReceiptBlock]:
        blocks: list[ReceiptBlock] = []
        seen: set[str] = set()
        for workflow_key, events in events_by_command:
            if not events:
                continue
            workflow = self._workflow(workflow_key)
            given = {e.event_id for e in events}
            for spec in workflow.receipts(events):
                receipt_id = derive_receipt_id(spec.status_code, spec.event_ids)
                if receipt_id in seen or not set(spec.event_ids) <= given:
                    continue  # a receipt cites only the committed events it was handed
                seen.add(receipt_id)
                title = self.copy.render(f"{spec.template_id}.title", t.locale, spec.params)
                blocks.append(
                    ReceiptBlock(
                        block_id=derive_block_id(t.turn_id, f"receipt:{receipt_id}"),
                        receipt_id=receipt_id,
                        event_ids=spec.event_ids,
                        status_code=spec.status_code,
                        severity=spec.severity,
                        title=title.text,
                        copy_ref=title.copy_ref,
                    )
                )
        return blocks

    async def _compose(self, t: _Turn) -> AssistantTurn:
        # Receipts: this turn's commits, read back from the ledger, in act order.
        groups: list[tuple[str, Sequence[DomainEvent]]] = []
        for executed in t.executed:
            if isinstance(executed.outcome, CommittedOutcome):
                events = [t.readback[i] for i in executed.outcome.event_ids if i in t.readback]
                groups.append((executed.planned.envelope.case_ref.workflow, events))
        if t.answered_before is not None:
            t.notice(codes.NOTICE_ALREADY_ANSWERED)
            ids = list(t.answered_before.resolution_event_ids)
            if ids:
                old = await self.stores.events.get_by_ids(t.account_id, ids)
                groups.append((t.answered_before.case_ref.workflow, old))
        if t.closed_card is not None:
            t.notice(t.closed_card[1])
        receipts = self._receipts(t, groups)
        notices = [
            NoticeBlock(
                block_id=derive_block_id(t.turn_id, f"notice:{n.code}:{index}"),
                code=n.code,
                severity=_NOTICE_SEVERITY.get(n.code, NoticeSeverity.INFO),
                text=(rendered := self.copy.render(n.code, t.locale, n.params)).text,
                copy_ref=rendered.copy_ref,
            )
            for index, n in enumerate(t.notices)
        ]
        cards = [
            InteractionBlock.from_view(
                derive_block_id(t.turn_id, f"interaction:{c.interaction_id}"), c.view()
            )
            for c in t.shown_cards
        ]
        answers = await self._answers(t)
        if not cards and self._ask(t, cards) is None:
            t.offers = self._offers(t)
        understanding = t.understanding or Understanding()
        acted = bool(understanding.acts) or t.input.interaction_response is not None
        answers_only = bool(answers) and not (acted or receipts or notices or cards)
        transition = None if answers_only else await self._transition(t, receipts, notices, cards)
        blocks: list[Any] = [*receipts, *notices, *answers]
        if transition is not None:
            blocks.append(transition)
        blocks.extend(cards)
        violations = check_claims(blocks)
        if violations:  # model prose rests on something the turn lacks: server copy replaces it
            t.claim_violations.extend(v.code for v in violations)
            blocks = [*receipts, *notices]
            blocks.extend(self._server_answer(t, q) for q in understanding.questions)
            if transition is not None:
                blocks.append(self._server_transition(t, receipts, cards, self._ask(t, cards)))
            blocks.extend(cards)
            ensure_claims(blocks)  # still broken: a server bug; the turn is never returned
        subjects = tuple(
            t.cases[k].case_ref
            for k in sorted(t.touched, key=lambda k: (k.workflow, k.case_id))
            if k in t.cases
        )
        expectations = tuple(
            Expectation(
                kind=ExpectationKind.AWAITING_SELECTION
                if c.kind is InteractionKind.SELECT_TARGET
                else ExpectationKind.AWAITING_CONFIRMATION,
                case_ref=c.case_ref,
            )
            for c in t.shown_cards
        )
        await self.stores.conversations.set_phase(t.account_id, t.turn_id, TurnPhase.COMPOSED)
        return AssistantTurn(
            turn_id=t.turn_id,
            conversation_id=t.conversation_id,
            account_id=t.account_id,
            status=TurnStatus.COMPLETED,
            locale=t.locale,
            blocks=tuple(blocks),
            replay_token=derive_replay_token(t.turn_id),
            created_at=t.now,
            completed_at=max(t.now, self.clock()),
            expectations=expectations,
            offers=t.offers,
            subjects=subjects,
        )

    def _case_facts(self, case: CaseInView, locale: str) -> list[NarratableFact]:
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
                    sentence=case.workflow.obligation_sentence(obligation, locale),
                )
            )
        return facts

    def _question_cases(self, t: _Turn, about: Sequence[str]) -> list[CaseInView]:
        if about:
            return [t.handles[h] for h in about if h in t.handles]
        return list(t.handles.values())

    def _server_answer(self, t: _Turn, question: Any) -> AnswerBlock:
        """Server copy standing in for a model answer: what the records hold, nothing more."""
        cases = self._question_cases(t, question.about)
        block_id = derive_block_id(t.turn_id, f"answer:{question.question_id}")
        render = self.copy.render
        if not cases:
            rendered = render("turnframe.answer.source_unavailable", t.locale, {})
            return AnswerBlock(
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
                listed = ", ".join(f"{n.replace('_', ' ')} {v}" for n, v in values)
                rendered = render(
                    "turnframe.answer.record", t.locale, {"label": case.label, "values": listed}
                )
            else:
                rendered = render("turnframe.answer.nothing_known", t.locale, {"label": case.label})
            lines.append(rendered.text)
            copy_ref = rendered.copy_ref
        return AnswerBlock(
            block_id=block_id,
            question_id=question.question_id,
            text=" ".join(lines),
            basis=self._basis(t),
            facts_used=tuple(facts),
            copy_ref=copy_ref,
        )

    def _basis(self, t: _Turn) -> AnswerBasis:
        committed = any(isinstance(e.outcome, CommittedOutcome) for e in t.executed)
        return (
            AnswerBasis.COMMITTED_STATE_AFTER_TURN
            if committed
            else AnswerBasis.CURRENT_COMMITTED_STATE
        )

    async def _answers(self, t: _Turn) -> list[AnswerBlock]:
        understanding = t.understanding or Understanding()
        blocks: list[AnswerBlock] = []
        for question in understanding.questions:
            cases = self._question_cases(t, question.about)
            if self.narrator is None or not cases:
                blocks.append(self._server_answer(t, question))
                continue
            allowed = tuple(f for case in cases for f in self._case_facts(case, t.locale))
            request = AnswerRequest(
                locale=t.locale,
                question_id=question.question_id,
                question=question.text,
                basis=self._basis(t),
                allowed_facts=allowed,
            )
            started = self.clock()
            try:
                draft = await self.narrator.answer(request)
                parsed = parse_model_output(_as_draft(draft), turn_id=t.turn_id)
                answer = parsed[0] if len(parsed) == 1 else None
                if (
                    not isinstance(answer, AnswerBlock)
                    or answer.question_id != question.question_id
                    or not _facts_within(answer.facts_used, allowed)
                ):
                    raise MalformedModelOutput("the answer does not fit its question")
            except Exception as exc:
                t.provider_attempts.append(self._attempt(t, "answer", started, exc))
                blocks.append(self._server_answer(t, question))
                continue
            t.provider_attempts.append(self._attempt(t, "answer", started, None))
            blocks.append(answer.model_copy(update={"basis": request.basis}))
        return blocks

    def _offers(self, t: _Turn) -> tuple[Offer, ...]:
        """Next steps of the cases the turn touched that owe nothing, limited to operations
        the case offers now (the next turn may take one up)."""
        offers: list[Offer] = []
        for key in sorted(t.touched, key=lambda k: (k.workflow, k.case_id)):
            case = t.cases.get(key)
            if case is None or case.view.obligations:
                continue
            on_offer = {s.operation for s in case.workflow.operations(case.view) if s.proposable}
            offers.extend(
                Offer(case_ref=case.case_ref, operation=step.operation, words=step.words,
                      arguments=dict(step.arguments))
                for step in case.workflow.next_steps(case.view)
                if step.operation in on_offer
            )  # fmt: skip
        return tuple(offers)

    def _ask(self, t: _Turn, cards: Sequence[InteractionBlock]) -> str | None:
        if cards:
            return None
        for key in sorted(t.touched, key=lambda k: (k.workflow, k.case_id)):
            case = t.cases.get(key)
            if case is None:
                continue
            for obligation in case.view.obligations:
                sentence = case.workflow.obligation_sentence(obligation, t.locale)
                if sentence:
                    return sentence
        return None

    async def _transition(
        self,
        t: _Turn,
        receipts: Sequence[ReceiptBlock],
        notices: Sequence[NoticeBlock],
        cards: Sequence[InteractionBlock],
    ) -> TransitionBlock:
        outcomes: list[NarratableFact] = [
            OperationalOutcome(
                receipt_id=r.receipt_id, event_ids=r.event_ids, status_code=r.status_code
            )
            for r in receipts
        ]
        available: list[NarratableFact] = [
            InteractionAvailable(
                interaction_id=c.interaction_id, interaction_kind=c.interaction_kind
            )
            for c in cards
        ]
        refused: list[NarratableFact] = [
            ActRefused(case_ref=case_ref, code=r.code, explanation=r.explanation)
            for case_ref, r in t.refusals
        ]
        ask = self._ask(t, cards)
        request = TransitionRequest(
            locale=t.locale,
            allowed_facts=(*outcomes, *available, *refused),
            receipt_titles=tuple(r.title for r in receipts),
            notice_texts=tuple(n.text for n in notices),
            card_title=cards[0].title if cards else None,
            ask=ask,
        )
        if self.narrator is not None:
            findings: tuple[str, ...] = ()
            for _round in range(2):  # one rewrite after a failed check or review, then server copy
                started = self.clock()
                try:
                    draft = await self.narrator.transition(
                        request.model_copy(update={"findings": findings})
                    )
                except Exception as exc:
                    t.provider_attempts.append(self._attempt(t, "transition", started, exc))
                    break
                t.provider_attempts.append(self._attempt(t, "transition", started, None))
                try:
                    parsed = parse_model_output(_as_draft(draft), turn_id=t.turn_id)
                    block = parsed[0] if len(parsed) == 1 else None
                    if not isinstance(block, TransitionBlock):
                        raise MalformedModelOutput("not a single transition draft")
                except TurnframeError as rejected:
                    t.provider_attempts[-1] = self._rejected(t.provider_attempts[-1], rejected.code)
                    findings = ("the reply was not a single transition draft",)
                    continue
                if not _facts_within(block.facts_used, request.allowed_facts):
                    t.provider_attempts[-1] = self._rejected(
                        t.provider_attempts[-1], codes.CLAIM_UNBACKED_OUTCOME
                    )
                    findings = ("the reply rests on facts it was not given",)
                    continue
                try:
                    verdict = await self.narrator.review(block.text, request)
                except Exception as exc:
                    t.provider_attempts.append(self._attempt(t, "review", started, exc))
                    break
                if verdict.passed:
                    return block.model_copy(
                        update={"block_id": derive_block_id(t.turn_id, "transition")}
                    )
                t.provider_attempts[-1] = self._rejected(t.provider_attempts[-1], "review_failed")
                findings = verdict.findings or ("the review failed",)
        return self._server_transition(t, receipts, cards, ask)

    @staticmethod
    def _rejected(attempt: ProviderAttempt, code: str) -> ProviderAttempt:
        """A call that answered, but whose answer was discarded (and why)."""
        return attempt.model_copy(update={"outcome": "failed", "code": code})

    def _server_transition(
        self,
        t: _Turn,
        receipts: Sequence[ReceiptBlock],
        cards: Sequence[InteractionBlock],
        ask: str | None,
    ) -> TransitionBlock:
        """Server copy standing in for the narrator: what committed this turn (its receipts),
        then the card or the one thing to ask, else an invitation to go on."""
        render = self.copy.render
        parts: list[RenderedCopy | str] = []
        done = [r for r in receipts if any(ev in t.readback for ev in r.event_ids)]
        unknown = any(isinstance(e.outcome, OutcomeUnknown) for e in t.executed)
        if done:
            parts.append(
                render(
                    "turnframe.transition.done",
                    t.locale,
                    {"items": "; ".join(r.title for r in done)},
                )
            )
        elif not unknown and (t.executed or (t.plan is not None and t.plan.act_results)):
            parts.append(render("turnframe.transition.nothing_done", t.locale, {}))
        if cards:
            parts.append(render("turnframe.transition.card", t.locale, {"title": cards[0].title}))
        elif ask:
            parts.append(ask)
        elif t.offers:
            steps = "; ".join(offer.words for offer in t.offers)
            parts.append(render("turnframe.transition.next", t.locale, {"steps": steps}))
        else:
            parts.append(render("turnframe.transition.go_on", t.locale, {}))
        rendered = [p for p in parts if not isinstance(p, str)]
        facts: list[NarratableFact] = [
            OperationalOutcome(receipt_id=r.receipt_id, event_ids=r.event_ids,
                               status_code=r.status_code)
            for r in done
        ]  # fmt: skip
        facts.extend(
            InteractionAvailable(
                interaction_id=c.interaction_id, interaction_kind=c.interaction_kind
            )
            for c in cards
        )
        return TransitionBlock(
            block_id=derive_block_id(t.turn_id, "transition"),
            text=" ".join(p if isinstance(p, str) else p.text for p in parts),
            facts_used=tuple(facts),
            copy_ref=rendered[-1].copy_ref if rendered else None,
        )

    # --- U/V: persist and finish ----------------------------------------------------------------

    def _record(self, t: _Turn, phase: TurnPhase, **extra: Any) -> ReplayRecord:
        assert t.record is not None
        plan = t.plan
        outcomes = tuple(
            CommandOutcomeRecord(
                command_id=e.planned.envelope.command_id,
                command_type=e.planned.envelope.command_type,
                idempotency_key=e.planned.envelope.idempotency_key,
                case_ref=e.planned.envelope.case_ref,
                origin=e.planned.envelope.origin,
                outcome=e.outcome,
            )
            for e in t.executed
        )
        if t.audit_once is None:  # the understanding and the plan no longer change: digest once
            understanding = t.understanding
            summary = plan.summary() if plan else None
            t.audit_once = {
                "understanding": understanding.model_dump(mode="json") if understanding else None,
                "understanding_hash": understanding.hash() if understanding else None,
                "reduction_plan": summary,
                "plan_hash": digest(summary) if summary is not None else None,
            }
        return t.record.advanced(
            phase,
            at=self.clock(),
            **t.audit_once,
            target_resolutions=tuple(t.target_resolutions),
            policy_decisions=tuple(t.policy_decisions),
            command_outcomes=outcomes,
            interactions_created=tuple(t.interactions_created),
            event_ids=tuple(ev.event_id for e in t.executed for ev in e.events),
            outbox_ids=tuple(t.outbox_ids),
            provider_attempts=tuple(t.provider_attempts),
            claim_violations=tuple(t.claim_violations),
            **extra,
        )

    async def _deliver(self, t: _Turn, turn: AssistantTurn) -> None:
        """Persist the exact turn (moving the marker to `delivered` in the same write), then the
        final replay record: a record never says `delivered` for a turn that is not stored."""
        await self.stores.conversations.append_assistant_turn(
            t.account_id, turn, phase=TurnPhase.DELIVERED
        )
        record = self._record(
            t, TurnPhase.DELIVERED, response_block_ids=tuple(b.block_id or "" for b in turn.blocks)
        )
        await self.stores.replay.put(record)
        t.record = record


def _decided(t: _Turn, envelope: CommandEnvelope, policy: Any, allowed: bool) -> None:
    """Record the policy decision for one command (what authorized it, or why not)."""
    t.policy_decisions.append(
        PolicyDecisionRecord(
            command_id=envelope.command_id,
            command_type=envelope.command_type,
            policy=policy,
            origin=envelope.origin,
            allowed=allowed,
            reason_code=codes.POLICY_ALLOWED if allowed else codes.POLICY_TRUSTED_ORIGIN_REQUIRED,
        )
    )


def _card_command_id(turn_id: str, interaction_id: str, position: int) -> str:
    return derive_command_id(turn_id, f"card:{interaction_id}", position)


def _as_draft(draft: Mapping[str, Any] | str) -> dict[str, Any] | str:
    return draft if isinstance(draft, str) else dict(draft)


def _facts_within(used: Sequence[Any], allowed: Sequence[Any]) -> bool:
    allowed_digests = {digest(fact) for fact in allowed}
    return all(digest(fact) in allowed_digests for fact in used)
