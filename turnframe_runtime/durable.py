"""The durable points of a turn (decision 0006) and the steps between them (DESIGN §5).

A turn commits at most at four points, and what recovery reads is only what they wrote:
1. accept (A/B, C): the card answer judged before any write, then the user turn; a click-only
   turn (no model call) also starts in this transaction;
2. start (G, J/K, then L and M's journal): understand, reduce the WHOLE turn, claim the answered
   card, persist pre-execution cards and journal every command, before anything runs;
3. commit (M, N, O/P): execute, then ONE bundle with the events read back and the follow-up
   cards; without a narrator the reply is delivered in the same transaction;
4. deliver (Q-T, U/V): with a narrator, the reply composed after the commit and stored.

A turn that fails before any command could run ends `failed`; one that may have effects is left
at its phase for recovery to finish by idempotency key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from turnframe_core import codes
from turnframe_core.cases import CaseKey
from turnframe_core.claims import ClaimGuardViolation
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction
from turnframe_core.replay import OutcomeUnknown, TurnPhase
from turnframe_core.stream import StreamMode
from turnframe_core.turn import AssistantTurn, TurnInput
from turnframe_core.understanding import OfferedRecord, Understanding
from turnframe_runtime import observe
from turnframe_runtime.accept import accept_turn, prior_reply, raced_reply
from turnframe_runtime.card_answer import (
    Admitted,
    AnsweredBefore,
    CardAnswer,
    CardPlan,
    ClaimedCard,
    Closed,
    admit_card_answer,
    answer_notices,
    claim_card,
    plan_card_answer,
)
from turnframe_runtime.cards import RaisedCard, persist_card
from turnframe_runtime.compose import Composer, TurnResult
from turnframe_runtime.context import NOTHING, Noticed, Purpose, merge_notices, noticed
from turnframe_runtime.execute import Committed
from turnframe_runtime.follow_up import FollowUp
from turnframe_runtime.memory import NOTHING_RECALLED, Recalled, recall
from turnframe_runtime.reduce import (
    CaseInView,
    Plan,
    PlannedCommand,
    reduce_turn,
    target_resolutions,
)
from turnframe_runtime.state import TurnState
from turnframe_runtime.understand import Understood, understand
from turnframe_store.bundle import Stores
from turnframe_store.errors import Conflict, StoreError, Timeout
from turnframe_store.records import UserTurnRecord

if TYPE_CHECKING:
    from turnframe_runtime.kernel import Kernel

__all__ = [
    "Accepted",
    "Planned",
    "Started",
    "accept",
    "accept_and_start",
    "card_answered_before",
    "cards_answered_late",
    "commit_and_deliver",
    "composer_for",
    "fail_before_effects",
    "follow_up_for",
    "loaded",
    "plan_turn",
    "raise_turn_cards",
    "start_turn",
    "understand_and_start",
]


async def loaded(
    kernel: Kernel,
    turn_input: TurnInput,
    turn_id: str | None = None,
    mode: StreamMode = StreamMode.WHOLE,
    streamed: bool = False,
) -> TurnState:
    """The turn begun, with the cases it reads (D/E/F): a click needs only its card's."""
    t = kernel.begin(turn_input, turn_id, mode, streamed=streamed)
    if not turn_input.is_click_only:
        await t.cases.load_candidates(t.ctx.conversation_id)
    return t


async def accept(kernel: Kernel, t: TurnState, turn_input: TurnInput) -> AssistantTurn | Accepted:
    """Durable point 1: the card answer judged before any write, then the user turn. A
    click-only turn starts in the same transaction."""
    try:
        async with t.events.transaction(kernel.stores) as tx:
            if turn_input.turn_id is not None:
                prior = await prior_reply(tx, t.ctx.account_id, turn_input.turn_id, turn_input)
                if prior is not None:
                    return prior
            answer = await admit_card_answer(tx, t.cases, t.ctx)  # C
            recalled = NOTHING_RECALLED
            if kernel.interpreter is not None and (turn_input.text or "").strip():
                recalled = await recall(tx, t.ctx.account_id, t.ctx.conversation_id)  # for G
            user_turn, t.recorder.record = await accept_turn(tx, t.ctx, t.cases.cases.values())
            accepted = Accepted(answer, recalled=recalled)
            if turn_input.is_click_only:  # J-L and M's journal, with the user turn
                planned = plan_turn(t, accepted.admitted, Understanding())
                return Accepted(answer, await start_turn(kernel, tx, t, planned, user_turn))
            await tx.commits.commit(t.recorder.accepted(user_turn, "understand"))  # A/B
            return accepted
    except Conflict:
        prior = await raced_reply(kernel.stores, t.ctx.account_id, turn_input)
        if prior is not None:
            return prior
        raise


async def understand_and_start(kernel: Kernel, t: TurnState, accepted: Accepted) -> Started:
    """G, J/K, then durable point 2 (L and M's journal). A turn that fails before any effect
    ends `failed`; a start whose COMMIT may have landed is left for recovery."""
    starting = False
    try:
        admitted = accepted.admitted
        card = admitted.card if admitted else None
        with observe.stage("G", "understand"):

            async def read(records: Sequence[OfferedRecord]) -> Understood:
                return await understand(kernel.interpreter, t.ctx, t.cases.handles, card,
                                        kernel.clock, records, accepted.recalled)  # fmt: skip

            understood = await read(kernel.lookups.offered)  # G
            heard = _heard(t, understood)
            named = understood.understanding.lookups if understood.trusted else ()
            if named:  # the records the user named (decision 0033)
                looked = await kernel.lookups.look_up(
                    t.cases, t.ctx.account_id, t.ctx.conversation_id, named, kernel.clock()
                )
                if looked.found:  # read again over a brief with their handles, no more lookups
                    understood = await read(())
                    heard = _heard(t, understood)
                heard = looked.noticed + heard
        understanding = understood.understanding
        with observe.stage("J-K", "reduce"):
            planned = plan_turn(t, admitted, understanding, heard)  # J/K
        if not planned.writes_anything:
            return Started(planned, noticed=planned.heard + planned.noticed)
        starting = True
        with observe.stage("L", "start"):
            async with t.events.transaction(kernel.stores) as tx:
                return await start_turn(kernel, tx, t, planned)
    except BaseException as failure:
        if not (starting and isinstance(failure, Timeout)):
            await fail_before_effects(kernel, t, failure)
        raise


def _heard(t: TurnState, understood: Understood) -> Noticed:
    """Record what understanding said (its call, its problems, the understanding when it is
    trusted) and return its notice."""
    if understood.attempt is not None:
        t.audit.attempted(understood.attempt)
    t.audit.understanding_problems.extend(understood.problems)
    t.audit.understanding = understood.understanding if understood.trusted else None
    return noticed(understood.notice) if understood.notice is not None else NOTHING


async def accept_and_start(
    kernel: Kernel, t: TurnState, planned: Planned, loaded: Sequence[CaseInView]
) -> Started:
    """Durable points 1 and 2 in one transaction, for a turn planned without a model call (a
    server event): the turn accepted (its record naming the cases it read, `loaded`), then L
    and M's journal. A previous turn left unfinished raises `PreviousTurnUnfinished`; a turn id
    stored before raises `Conflict`; either way nothing is written."""
    async with t.events.transaction(kernel.stores) as tx:
        user_turn, t.recorder.record = await accept_turn(tx, t.ctx, loaded)
        return await start_turn(kernel, tx, t, planned, user_turn)


async def commit_and_deliver(
    kernel: Kernel,
    t: TurnState,
    answer: CardAnswer | None,
    started: Started,
    *,
    narrate: bool = True,
) -> AssistantTurn:
    """M, then durable point 3 (N, P) and, without a narrator (or with `narrate` False: the
    reply from server copy only), the delivery (Q-V) in the same transaction; with one,
    composing calls a model, so the reply is stored after the commit. The commit stands
    whatever fails after it."""
    fold = kernel.narrator is None or not narrate
    follow_up = follow_up_for(t, started, answer)
    after_commit: BaseException | None = None
    assistant: AssistantTurn | None = None
    try:
        with observe.stage("M", "execute"):
            ran = await t.execution.run(started.commands)  # M
        answered = card_answered_before(started, answer)
        with observe.stage("O", "re-project"):
            refreshed, unrefreshed = await follow_up.refresh(
                cards_answered_late(started, answer)
            )  # O
        with observe.stage("N-P", "commit"):
            async with t.events.transaction(kernel.stores) as tx:
                committed = await t.execution.commit(
                    tx, started.claimed, ran.executed, record=not fold
                )  # N
                settled = not any(isinstance(e.outcome, OutcomeUnknown) for e in committed.executed)
                mark = t.events.mark()  # the reply's events go back with its savepoint
                try:
                    result = await raise_turn_cards(
                        tx,
                        t,
                        started,
                        answer,
                        answered,
                        follow_up,
                        refreshed,
                        committed,
                        said=(started.noticed, ran.noticed, unrefreshed, committed.noticed),
                    )
                    if fold:
                        async with tx.savepoint():
                            assistant = await composer_for(kernel, t, narrate=narrate).compose(
                                result
                            )
                            await t.recorder.deliver(tx, assistant, settled=settled)
                except BaseException as failure:
                    after_commit = failure
                    if fold:  # the record still says what committed
                        t.events.undo_to(mark)
                        await t.recorder.committed(tx)
    except BaseException as failure:
        if not started.effects_possible:
            await fail_before_effects(kernel, t, failure)
        raise
    if after_commit is not None:
        raise after_commit
    if assistant is None:
        try:
            with observe.stage("Q-T", "compose"):
                assistant = await composer_for(kernel, t).compose(result)  # Q-T
        except (StoreError, ClaimGuardViolation):
            raise
        except Exception as failure:  # a model port misbehaved past what narration contains
            now = kernel.clock()
            t.audit.attempt(Purpose.NARRATE, kernel.narrator, now, now, failure)
            fallback = composer_for(kernel, t, narrate=False)  # the reply from server copy
            assistant = await fallback.compose(result)
        with observe.stage("U-V", "deliver"):
            async with t.events.transaction(kernel.stores) as tx:  # durable point 4: U/V
                await t.recorder.deliver(tx, assistant, settled=settled)
    return assistant


# --- the steps between the durable points ----------------------------------------------------
# Public for the one other way of running them: `local` runs the same steps in one transaction.


def plan_turn(
    t: TurnState,
    admitted: Admitted | None,
    understanding: Understanding,
    heard: Noticed = NOTHING,
) -> Planned:
    """K for the card answer (its act goes before the message's acts), then J/K: the whole
    message reduced to one plan, and the cards its acts wait for. `heard`: what understanding
    the message said."""
    card_plan = None
    if admitted is not None:
        card_plan = plan_card_answer(admitted, t.cases, understanding, t.ctx, t.factory, t.tell)
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
    reported = t.tell.report(plan)  # renders its refusals' copy before the cards'
    raised = [
        RaisedCard(act_id, waiting.card, waiting.commands, deferrable=True)
        for act_id, waiting in plan.awaiting.items()
    ]
    acts = {act.act_id: act for act in understanding.acts}
    raised.extend(
        RaisedCard(act_id, t.factory.selection(acts[act_id], options, understanding.constraints))
        for act_id, options in plan.selections.items()
    )
    return Planned(understanding, card_plan, plan, raised, heard, reported)


async def start_turn(
    kernel: Kernel,
    stores: Stores,
    t: TurnState,
    planned: Planned,
    user_turn: UserTurnRecord | None = None,
) -> Started:
    """L, then M's journal: claim the answered card (exactly one answer wins it), persist the
    cards the turn raises before anything runs, and journal every command."""
    claim = None
    if planned.card_plan is not None:
        claimed_card = await claim_card(stores, planned.card_plan, kernel.workflows)
        t.audit.policy_decisions.extend(claimed_card.decisions)
        claim = claimed_card.won
        said = answer_notices(planned.card_plan, claimed_card) + planned.noticed
        said += claimed_card.noticed
    else:
        said = planned.noticed
    said = planned.heard + said
    claimed = claim if isinstance(claim, ClaimedCard) else None
    if claimed is not None and claimed.resolves:  # recovery knows which turn won the card
        t.audit.claimed_interaction = claimed.card.interaction_id
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
        elif await persist_card(stores, t.ctx, card.card, card.commands, t.audit):
            shown.append(card.card)
        else:
            said += noticed(codes.NOTICE_INTERACTION_UNAVAILABLE)
    commands = await t.execution.admit(stores, claimed, plan.ready, user_turn)
    return Started(planned, claim, shown, deferred, commands, said)


def card_answered_before(started: Started, answer: CardAnswer | None) -> Interaction | None:
    """The card this turn answered after another answer had won it."""
    if isinstance(answer, AnsweredBefore):
        return answer.card
    if isinstance(started.claim, AnsweredBefore):
        return started.claim.card
    return None


def cards_answered_late(started: Started, answer: CardAnswer | None) -> list[Interaction]:
    """Cards the user answered after they closed: their cases are shown as they are now."""
    late = [answer.card] if isinstance(answer, AnsweredBefore | Closed) else []
    if isinstance(started.claim, AnsweredBefore):
        late.append(started.claim.card)
    return late


def follow_up_for(t: TurnState, started: Started, answer: CardAnswer | None) -> FollowUp:
    touched = {c.case_ref.key for c in started.shown}
    touched |= {c.envelope.case_ref.key for c in started.commands}
    if isinstance(answer, Admitted):
        touched.add(answer.card.case_ref.key)
    return FollowUp(t.ctx, t.cases, t.factory, t.tell, t.audit, list(started.shown), touched)


async def raise_turn_cards(
    stores: Stores,
    t: TurnState,
    started: Started,
    answer: CardAnswer | None,
    answered_before: Interaction | None,
    follow_up: FollowUp,
    refreshed: Sequence[CaseInView],
    committed: Committed,
    said: Sequence[Noticed],
) -> TurnResult:
    """P inside the commit's transaction, behind a savepoint: a failure here undoes only its
    own writes, never the commit. `said`: what the steps before P said, in their order."""
    planned = started.planned
    answered_events: Sequence[DomainEvent] = ()
    async with stores.savepoint():
        raised = await follow_up.raise_cards(
            stores, planned.understanding, started.deferred, refreshed
        )
        if answered_before is not None and answered_before.resolution_event_ids:
            answered_events = await stores.events.get_by_ids(
                t.ctx.account_id, list(answered_before.resolution_event_ids)
            )
    return TurnResult(
        understanding=planned.understanding,
        plan=planned.plan,
        cases=t.cases,
        readback=committed.readback,
        shown=follow_up.shown,
        touched=frozenset(follow_up.touched),
        answered_before=answered_before,
        answered_events=answered_events,
        closed=answer if isinstance(answer, Closed) else None,
        executed=committed.executed,
        noticed=merge_notices(*said, raised),
    )


def composer_for(kernel: Kernel, t: TurnState, *, narrate: bool = True) -> Composer:
    return kernel.composer(t.ctx, t.copy, t.audit, narrate=narrate)


async def fail_before_effects(kernel: Kernel, t: TurnState, failure: BaseException) -> None:
    """A turn that failed before any command could run ends `failed`; one that may have
    effects is left at its phase for recovery to finish by idempotency key."""
    turn = t.ctx
    code = codes.code_of(failure, codes.RUNTIME_TURN_FAILED)
    try:
        async with t.events.transaction(kernel.stores) as tx:
            if await tx.journal.unsettled_for_turn(turn.account_id, turn.turn_id):
                return
            record = t.recorder.at(TurnPhase.FAILED, failure_code=code)
            await tx.replay.put(record)
            await tx.conversations.set_phase(turn.account_id, turn.turn_id, TurnPhase.FAILED)
            t.events.failed(code)
            await t.events.append(tx)
        observe.turn_failed(turn.turn_id, record.replay_token, code)
    except StoreError:
        pass  # the marker stays unfinished: recovery restarts interpretation


@dataclass(frozen=True)
class Accepted:
    """Durable point 1's result: the card answer as judged and, for a click-only turn, the
    start made in the same transaction."""

    answer: CardAnswer | None
    started: Started | None = None
    #: what the conversation's last replies asked, offered and showed (read for G)
    recalled: Recalled = NOTHING_RECALLED

    @property
    def admitted(self) -> Admitted | None:
        return self.answer if isinstance(self.answer, Admitted) else None


@dataclass(frozen=True)
class Planned:
    """J/K's result: the understanding, what the card answer does, the plan, the cards raised,
    what understanding said (`heard`) and why the plan's other acts will not run."""

    understanding: Understanding
    card_plan: CardPlan | None
    plan: Plan
    raised: list[RaisedCard]
    heard: Noticed = NOTHING
    noticed: Noticed = NOTHING

    @property
    def writes_anything(self) -> bool:
        """Whether starting the turn has anything to write (a card to claim or raise, a command
        to journal)."""
        return self.card_plan is not None or bool(self.plan.ready) or bool(self.raised)


@dataclass(frozen=True)
class Started:
    """L's result: the claim, the cards shown, the confirmations deferred past the commit, the
    commands journaled to run (the card's first), and what the turn said up to here."""

    planned: Planned
    claim: ClaimedCard | AnsweredBefore | None = None
    shown: list[Interaction] = field(default_factory=list)
    deferred: list[RaisedCard] = field(default_factory=list)
    commands: list[PlannedCommand] = field(default_factory=list)
    noticed: Noticed = NOTHING

    @property
    def claimed(self) -> ClaimedCard | None:
        return self.claim if isinstance(self.claim, ClaimedCard) else None

    @property
    def effects_possible(self) -> bool:
        """A card moved to `resolving`, or a command journaled: recovery finishes this turn."""
        claimed = self.claimed
        return bool(self.commands) or (claimed is not None and claimed.resolves)
