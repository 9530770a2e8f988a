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
from types import MappingProxyType

from turnframe_core import codes
from turnframe_core.cases import CaseKey
from turnframe_core.ids import IdSource, UlidIdSource
from turnframe_core.interactions import Interaction
from turnframe_core.replay import ReplayRecord, TurnPhase
from turnframe_core.turn import AssistantTurn, TurnInput
from turnframe_core.understanding import Understanding
from turnframe_core.workflow import WorkflowDefinition
from turnframe_runtime.accept import accept_turn, prior_reply
from turnframe_runtime.card_answer import (
    Admitted,
    AnsweredBefore,
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
from turnframe_runtime.reduce import Plan, reduce_turn, target_resolutions
from turnframe_runtime.understand import understand
from turnframe_store.bundle import Stores
from turnframe_store.errors import StoreError

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

    async def replay(self, account_id: str, replay_token: str) -> ReplayRecord:
        """The turn's audit record (read-only: executes nothing, calls no model)."""
        return await self._stores.replay.get_by_token(account_id, replay_token)

    async def handle_turn(self, turn_input: TurnInput) -> AssistantTurn:
        """Run one turn end to end and return the AssistantTurn it persisted."""
        stores = self._stores
        if turn_input.turn_id is not None:
            prior = await prior_reply(stores, turn_input.account_id, turn_input.turn_id)
            if prior is not None:
                return prior
        turn = TurnContext(
            turn_input, turn_input.turn_id or self._ids.new_id("turn"), self._clock()
        )
        cases = CaseBook(self._directory, self._workflows, turn.account_id)
        # Read and judge before writing anything: a refused card answer writes nothing.
        if not turn_input.is_click_only:  # a click needs only the cases its card names
            await cases.load_candidates(turn.conversation_id)  # D/E/F
        answer = await admit_card_answer(stores, cases, turn)  # C
        record = await accept_turn(stores, turn, cases.cases.values())  # A/B

        notes, audit = Notes(self._copy, turn.locale), AuditTrail()
        recorder = Recorder(record, audit, self._clock)
        factory = CardFactory(turn, self._copy, self._config.max_selection_candidates)
        execution = Execution(stores, self._executor, self._config, turn, notes, audit, recorder)
        admitted = answer if isinstance(answer, Admitted) else None
        claim: ClaimedCard | AnsweredBefore | None = None
        claiming = False
        try:
            card_on_screen = admitted.card if admitted else None
            understanding = await understand(
                self._interpreter, turn, cases.handles, card_on_screen, self._clock, notes, audit
            )  # G
            await self._advance(turn, TurnPhase.INTERPRETED)
            card_plan = None
            if admitted is not None:  # K: the card's act goes before the message's acts
                card_plan = plan_card_answer(admitted, cases, understanding, turn, factory, notes)
            plan, raised = self._reduce(turn, cases, understanding, admitted, factory, notes, audit)
            await self._advance(turn, TurnPhase.REDUCED)  # J/K
            if card_plan is not None:  # L: exactly one answer wins the card
                claiming = card_plan.claims_resolution
                claim = await claim_card(stores, card_plan, self._workflows, notes, audit)
                claiming = isinstance(claim, ClaimedCard) and claim.resolves
            claimed = claim if isinstance(claim, ClaimedCard) else None
            shown, deferred = await self._raise_cards(
                turn, claimed, plan, raised, notes, audit
            )  # L
            readback = await execution.run(claimed, plan.ready)  # M/N
        except BaseException as failure:
            if not (claiming or execution.started):
                await self._fail_before_effects(turn, recorder, failure)
            raise

        ran = (*(claimed.commands if claimed else ()), *plan.ready)
        touched = {c.case_ref.key for c in shown} | {c.envelope.case_ref.key for c in ran}
        if admitted is not None:
            touched.add(admitted.card.case_ref.key)
        answered_before = claim.card if isinstance(claim, AnsweredBefore) else None
        if isinstance(answer, AnsweredBefore):
            answered_before = answer.card
        closed = answer if isinstance(answer, Closed) else None
        late = [c for c in (closed.card if closed else None, answered_before) if c is not None]
        await FollowUp(stores, turn, cases, factory, notes, audit, shown, touched).run(
            understanding, deferred, late
        )  # O/P
        narration = None
        if self._narrator is not None:
            narration = Narration(self._narrator, turn, self._clock, audit)
        composer = Composer(
            turn, stores, self._workflows, self._copy, self._clock, narration, notes, audit
        )
        result = TurnResult(
            understanding=understanding,
            plan=plan,
            cases=cases,
            readback=readback,
            shown=shown,
            touched=frozenset(touched),
            answered_before=answered_before,
            closed=closed,
        )
        assistant = await composer.compose(result)  # Q-T
        await self._advance(turn, TurnPhase.COMPOSED)
        await recorder.deliver(stores, assistant)  # U/V
        return assistant

    # --- steps that need more than one stage ------------------------------------------------------

    async def _advance(self, turn: TurnContext, phase: TurnPhase) -> None:
        await self._stores.conversations.set_phase(turn.account_id, turn.turn_id, phase)

    def _reduce(
        self,
        turn: TurnContext,
        cases: CaseBook,
        understanding: Understanding,
        admitted: Admitted | None,
        factory: CardFactory,
        notes: Notes,
        audit: AuditTrail,
    ) -> tuple[Plan, list[RaisedCard]]:
        """J/K: the whole message reduced to one plan, and the cards its acts wait for."""
        card_case_ref = admitted.card.case_ref if admitted else None
        plan = reduce_turn(
            account_id=turn.account_id,
            turn_id=turn.turn_id,
            understanding=understanding,
            handles=cases.handles,
            card_case=cases.get(card_case_ref.key) if card_case_ref else None,
            cards=factory,
        )
        audit.plan = plan
        audit.target_resolutions.extend(
            target_resolutions(understanding, cases.handles, card_case_ref)
        )
        notes.report(plan)
        raised = [
            RaisedCard(act_id, waiting.card, waiting.commands, deferrable=True)
            for act_id, waiting in plan.awaiting.items()
        ]
        acts = {act.act_id: act for act in understanding.acts}
        raised.extend(
            RaisedCard(act_id, factory.selection(acts[act_id], options, understanding.constraints))
            for act_id, options in plan.selections.items()
        )
        return plan, raised

    async def _raise_cards(
        self,
        turn: TurnContext,
        claimed: ClaimedCard | None,
        plan: Plan,
        raised: Sequence[RaisedCard],
        notes: Notes,
        audit: AuditTrail,
    ) -> tuple[list[Interaction], list[RaisedCard]]:
        """L: persist the cards the turn raises before anything runs; return the cards shown and
        the confirmations deferred past the commit (a case this turn also changes must not see
        its card invalidated by the turn's own commit)."""
        changing: set[CaseKey] = {
            c.envelope.case_ref.key for c in (*(claimed.commands if claimed else ()), *plan.ready)
        }
        shown: list[Interaction] = []
        deferred: list[RaisedCard] = []
        for card in (*(claimed.cards if claimed else ()), *raised):
            if card.deferrable and card.card.case_ref.key in changing:
                deferred.append(card)
            elif await persist_card(self._stores, turn, card.card, card.commands, notes, audit):
                shown.append(card.card)
        return shown, deferred

    async def _fail_before_effects(
        self, turn: TurnContext, recorder: Recorder, failure: BaseException
    ) -> None:
        """A turn that failed before any command could run ends `failed`; one that may have
        effects is left at its phase for recovery to finish by idempotency key."""
        stores = self._stores
        if await stores.journal.unsettled_for_turn(turn.account_id, turn.turn_id):
            return
        code = getattr(failure, "code", codes.RUNTIME_TURN_FAILED)
        try:
            await stores.replay.put(recorder.at(TurnPhase.FAILED, failure_code=str(code)))
            await stores.conversations.set_phase(turn.account_id, turn.turn_id, TurnPhase.FAILED)
        except StoreError:
            pass  # the marker stays unfinished: recovery restarts interpretation
