"""`TurnRuntime`: one user turn in, one persisted `AssistantTurn` out (DESIGN §5, steps A-V).

The order is the safety property:
- read and judge first (conversation, cases, the card answer): a refused answer writes nothing;
- accept the turn, then understand (a click-only turn makes no model call), then reduce the WHOLE
  turn before any effect;
- claim the answered card, persist pre-execution cards, journal every command before it runs,
  execute batches, and write ONE all-or-nothing commit bundle;
- re-project, persist follow-up cards, compose from events read back from the committed ledger,
  guard the claims, persist the exact turn, then report it.

Each stage lives in its own module, named for what it owns; this one only wires them in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from turnframe_core import codes
from turnframe_core.cases import CaseKey
from turnframe_core.events import DomainEvent
from turnframe_core.ids import IdSource, UlidIdSource
from turnframe_core.interactions import Interaction
from turnframe_core.replay import ReplayRecord, TurnPhase
from turnframe_core.turn import AssistantTurn, TurnInput
from turnframe_core.understanding import Understanding
from turnframe_core.workflow import WorkflowDefinition
from turnframe_runtime.accept import accept_turn, commit_accepted, prior_reply
from turnframe_runtime.card_answer import (
    Admitted,
    AnsweredBefore,
    CardAnswer,
    CardPlan,
    ClaimedCard,
    Closed,
    admit_card_answer,
    claim_card,
    plan_card_answer,
)
from turnframe_runtime.cards import CardFactory, RaisedCard, persist_card
from turnframe_runtime.cases import CaseBook
from turnframe_runtime.compose import Composer, TurnResult
from turnframe_runtime.config import RuntimeConfig
from turnframe_runtime.context import AuditTrail, Notes, TurnContext
from turnframe_runtime.copy import CatalogCopy, MissingCopy, ServerCopy
from turnframe_runtime.errors import TurnInProgress, UnknownWorkflow
from turnframe_runtime.execute import Execution
from turnframe_runtime.follow_up import FollowUp
from turnframe_runtime.narration import Narration
from turnframe_runtime.ports import CaseDirectory, Interpreter, Narrator, WorkflowExecutor
from turnframe_runtime.record import Recorder
from turnframe_runtime.reduce import Plan, PlannedCommand, reduce_turn, target_resolutions
from turnframe_runtime.understand import understand
from turnframe_store.bundle import Stores
from turnframe_store.errors import StoreError
from turnframe_store.records import UserTurnRecord

__all__ = ["TurnInProgress", "TurnRuntime", "UnknownWorkflow"]


class TurnRuntime:
    """Runs conversational turns safely. Build one per process and share it; its collaborators
    are fixed at construction."""

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
        by_key = {w.key: w for w in workflows}
        if len(by_key) != len(workflows):
            raise ValueError("workflow keys must be unique")
        self._stores = stores
        self._workflows: Mapping[str, WorkflowDefinition] = MappingProxyType(by_key)
        self._directory = directory
        self._executor = executor
        self._interpreter = interpreter
        self._narrator = narrator
        self._copy: ServerCopy = copy or CatalogCopy()
        self._config = config or RuntimeConfig()
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._ids = ids or UlidIdSource(self._clock)
        missing = self._copy.missing(self._config.locales)
        if missing:
            raise MissingCopy(missing)

    @property
    def stores(self) -> Stores:
        return self._stores

    @property
    def workflows(self) -> Mapping[str, WorkflowDefinition]:
        return self._workflows

    @property
    def directory(self) -> CaseDirectory:
        return self._directory

    @property
    def executor(self) -> WorkflowExecutor:
        return self._executor

    @property
    def config(self) -> RuntimeConfig:
        return self._config

    # --- public API -----------------------------------------------------------------------------

    async def load_turn(self, account_id: str, turn_id: str) -> AssistantTurn:
        """The stored assistant turn, exactly as it was returned."""
        return await self._stores.conversations.get_assistant_turn(account_id, turn_id)

    async def load_conversation(
        self, account_id: str, conversation_id: str, limit: int = 20
    ) -> tuple[AssistantTurn, ...]:
        """The conversation's last `limit` assistant turns, oldest first, exactly as returned."""
        return await self._stores.conversations.recent_turns(account_id, conversation_id, limit)

    async def replay(self, account_id: str, replay_token: str) -> ReplayRecord:
        """The turn's audit record (read-only: executes nothing, calls no model)."""
        return await self._stores.replay.get_by_token(account_id, replay_token)

    async def handle_turn(self, turn_input: TurnInput) -> AssistantTurn:
        """Run one turn end to end and return the AssistantTurn it persisted.

        A turn commits at four durable points (decision 0006): accept; start (the card claimed,
        pre-execution cards, every command journaled); commit (the bundle, the events read back,
        follow-up cards); deliver. A click-only turn makes no model call, so it accepts and
        starts in one transaction: three commits in all.
        """
        click_only = turn_input.is_click_only
        t = self._begin(turn_input)
        if not click_only:  # a click needs only the cases its card names
            await t.cases.load_candidates(t.ctx.conversation_id)  # D/E/F
        started: _Started | None = None
        async with self._stores.transaction() as tx:  # durable point 1
            if turn_input.turn_id is not None:
                prior = await prior_reply(tx, t.ctx.account_id, turn_input.turn_id)
                if prior is not None:
                    return prior
            answer = await admit_card_answer(tx, t.cases, t.ctx)  # C: judged before any write
            user_turn, t.recorder.record = await accept_turn(tx, t.ctx, t.cases.cases.values())
            admitted = answer if isinstance(answer, Admitted) else None
            if click_only:  # A/B with J-L and M's journal, in the same transaction
                planned = self._plan(t, admitted, Understanding())
                started = await self._start(tx, t, planned, user_turn)
            else:  # A/B
                await commit_accepted(tx, t.ctx, t.recorder.accepted(user_turn))
        if started is None:
            try:
                understanding = await understand(
                    self._interpreter,
                    t.ctx,
                    t.cases.handles,
                    admitted.card if admitted else None,
                    self._clock,
                    t.notes,
                    t.audit,
                )  # G
                planned = self._plan(t, admitted, understanding)  # J/K
                if planned.writes_anything:
                    async with self._stores.transaction() as tx:  # durable point 2
                        started = await self._start(tx, t, planned)  # L, M's journal
                else:
                    started = _Started(planned)
            except BaseException as failure:
                await self._fail_before_effects(t, failure)
                raise
        # Without a narrator, composing calls no model: the reply is stored with the commit (one
        # transaction fewer). With one, the commit may be acknowledged before it is on disk:
        # recovery makes it again from the journal, and the reply is stored durably after it
        # (decision 0006).
        fold = self._narrator is None
        failure_after_commit: Exception | None = None
        assistant: AssistantTurn | None = None
        try:
            await t.execution.run(started.commands)  # M
            async with self._stores.transaction(durable=fold) as tx:  # durable point 3
                readback = await t.execution.commit(tx, started.claimed, record=not fold)  # N
                try:  # the commit stands whatever happens after it
                    result = await self._follow_up(tx, t, started, answer, readback)  # O/P
                    if fold:
                        async with tx.savepoint():
                            assistant = await self._composer(t).compose(result)  # Q-T
                            await t.recorder.deliver(tx, assistant)  # U/V
                except Exception as failure:
                    failure_after_commit = failure
        except BaseException as failure:
            if not (started.effects_possible or t.execution.started):
                await self._fail_before_effects(t, failure)
            raise
        if failure_after_commit is not None:
            raise failure_after_commit
        if assistant is None:
            assistant = await self._composer(t).compose(result)  # Q-T
            async with self._stores.transaction() as tx:  # durable point 4: U/V
                await t.recorder.deliver(tx, assistant)
        return assistant

    # --- the steps between the durable points ----------------------------------------------------

    def _begin(self, turn_input: TurnInput) -> _Turn:
        turn_id = turn_input.turn_id or self._ids.new_id("turn")
        ctx = TurnContext(turn_input, turn_id, self._clock())
        notes, audit = Notes(self._copy, ctx.locale), AuditTrail()
        recorder = Recorder(audit, self._clock)
        return _Turn(
            ctx=ctx,
            cases=CaseBook(self._directory, self._workflows, ctx.account_id),
            notes=notes,
            audit=audit,
            factory=CardFactory(ctx, self._copy, self._config.max_selection_candidates),
            recorder=recorder,
            execution=Execution(self._executor, self._config, ctx, notes, audit, recorder),
        )

    def _plan(self, t: _Turn, admitted: Admitted | None, understanding: Understanding) -> _Planned:
        """K for the card answer (its act goes before the message's acts), then J/K: the whole
        message reduced to one plan, and the cards its acts wait for."""
        card_plan = None
        if admitted is not None:
            card_plan = plan_card_answer(
                admitted, t.cases, understanding, t.ctx, t.factory, t.notes
            )
        card_case_ref = admitted.card.case_ref if admitted else None
        plan = reduce_turn(
            account_id=t.ctx.account_id,
            turn_id=t.ctx.turn_id,
            understanding=understanding,
            handles=t.cases.handles,
            card_case=t.cases.get(card_case_ref.key) if card_case_ref else None,
            cards=t.factory,
        )
        t.audit.plan = plan
        t.audit.target_resolutions.extend(
            target_resolutions(understanding, t.cases.handles, card_case_ref)
        )
        t.notes.report(plan)
        raised = [
            RaisedCard(act_id, waiting.card, waiting.commands, deferrable=True)
            for act_id, waiting in plan.awaiting.items()
        ]
        acts = {act.act_id: act for act in understanding.acts}
        raised.extend(
            RaisedCard(
                act_id, t.factory.selection(acts[act_id], options, understanding.constraints)
            )
            for act_id, options in plan.selections.items()
        )
        return _Planned(understanding, card_plan, plan, raised)

    async def _start(
        self,
        stores: Stores,
        t: _Turn,
        planned: _Planned,
        user_turn: UserTurnRecord | None = None,
    ) -> _Started:
        """L, then M's journal: claim the answered card (exactly one answer wins it), persist the
        cards the turn raises before anything runs, and journal every command."""
        claim = None
        if planned.card_plan is not None:
            claim = await claim_card(stores, planned.card_plan, self._workflows, t.notes, t.audit)
        claimed = claim if isinstance(claim, ClaimedCard) else None
        plan = planned.plan
        # A confirmation on a case this turn also changes is raised after the commit, against
        # the revision it leaves (else the commit would invalidate it at once).
        changing: set[CaseKey] = {
            c.envelope.case_ref.key for c in (*(claimed.commands if claimed else ()), *plan.ready)
        }
        shown: list[Interaction] = []
        deferred: list[RaisedCard] = []
        for card in (*(claimed.cards if claimed else ()), *planned.raised):
            if card.deferrable and card.card.case_ref.key in changing:
                deferred.append(card)
            elif await persist_card(stores, t.ctx, card.card, card.commands, t.notes, t.audit):
                shown.append(card.card)
        commands = await t.execution.admit(stores, claimed, plan.ready, user_turn)
        return _Started(planned, claim, shown, deferred, commands)

    async def _follow_up(
        self,
        stores: Stores,
        t: _Turn,
        started: _Started,
        answer: CardAnswer | None,
        readback: Mapping[str, DomainEvent],
    ) -> TurnResult:
        """O/P inside the commit's transaction, behind a savepoint: a failure here undoes only
        its own writes, never the commit."""
        claim, planned = started.claim, started.planned
        answered_before = claim.card if isinstance(claim, AnsweredBefore) else None
        if isinstance(answer, AnsweredBefore):
            answered_before = answer.card
        closed = answer if isinstance(answer, Closed) else None
        touched = {c.case_ref.key for c in started.shown}
        touched |= {c.envelope.case_ref.key for c in started.commands}
        if isinstance(answer, Admitted):
            touched.add(answer.card.case_ref.key)
        shown = list(started.shown)
        late = [c for c in (closed.card if closed else None, answered_before) if c is not None]
        answered_events: Sequence[DomainEvent] = ()
        async with stores.savepoint():
            follow_up = FollowUp(
                stores, t.ctx, t.cases, t.factory, t.notes, t.audit, shown, touched
            )
            await follow_up.run(planned.understanding, started.deferred, late)
            if answered_before is not None and answered_before.resolution_event_ids:
                answered_events = await stores.events.get_by_ids(
                    t.ctx.account_id, list(answered_before.resolution_event_ids)
                )
        return TurnResult(
            understanding=planned.understanding,
            plan=planned.plan,
            cases=t.cases,
            readback=readback,
            shown=shown,
            touched=frozenset(touched),
            answered_before=answered_before,
            answered_events=answered_events,
            closed=closed,
        )

    def _composer(self, t: _Turn) -> Composer:
        narration = None
        if self._narrator is not None:
            narration = Narration(self._narrator, t.ctx, self._clock, t.audit)
        return Composer(
            t.ctx, self._workflows, self._copy, self._clock, narration, t.notes, t.audit
        )

    async def _fail_before_effects(self, t: _Turn, failure: BaseException) -> None:
        """A turn that failed before any command could run ends `failed`; one that may have
        effects is left at its phase for recovery to finish by idempotency key."""
        turn = t.ctx
        try:
            async with self._stores.transaction() as tx:
                if await tx.journal.unsettled_for_turn(turn.account_id, turn.turn_id):
                    return
                code = getattr(failure, "code", codes.RUNTIME_TURN_FAILED)
                record = t.recorder.at(TurnPhase.FAILED, failure_code=str(code))
                await tx.replay.put(record)
                await tx.conversations.set_phase(turn.account_id, turn.turn_id, TurnPhase.FAILED)
        except StoreError:
            pass  # the marker stays unfinished: recovery restarts interpretation


@dataclass(frozen=True)
class _Turn:
    """One turn's context and the collaborators its steps share; what each step decides is
    returned by that step."""

    ctx: TurnContext
    cases: CaseBook
    notes: Notes
    audit: AuditTrail
    factory: CardFactory
    recorder: Recorder
    execution: Execution


@dataclass(frozen=True)
class _Planned:
    """J/K's result: the understanding, what the card answer does, the plan, the cards raised."""

    understanding: Understanding
    card_plan: CardPlan | None
    plan: Plan
    raised: list[RaisedCard]

    @property
    def writes_anything(self) -> bool:
        """Whether starting the turn has anything to write (a card to claim or raise, a command
        to journal)."""
        return self.card_plan is not None or bool(self.plan.ready) or bool(self.raised)


@dataclass(frozen=True)
class _Started:
    """L's result: the claim, the cards shown, the confirmations deferred past the commit, and
    the commands journaled to run (the card's first)."""

    planned: _Planned
    claim: ClaimedCard | AnsweredBefore | None = None
    shown: list[Interaction] = field(default_factory=list)
    deferred: list[RaisedCard] = field(default_factory=list)
    commands: list[PlannedCommand] = field(default_factory=list)

    @property
    def claimed(self) -> ClaimedCard | None:
        return self.claim if isinstance(self.claim, ClaimedCard) else None

    @property
    def effects_possible(self) -> bool:
        """A card moved to `resolving`, or a command journaled: recovery finishes this turn."""
        claimed = self.claimed
        return bool(self.commands) or (claimed is not None and claimed.resolves)
