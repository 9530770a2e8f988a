"""Step C, and the card answer's share of steps K and L: admit a client's answer to a card, decide
what the answer does, and claim the card before anything of it runs.

- C (`admit_card_answer`): ownership, option, revision and free text are checked against the
  revision just read; a refused answer raises and nothing is written. An answer to a card that is
  already answered, stale or closed is not an error: the turn says so.
- K (`plan_card_answer`): the answer's meaning is the option's stored action, never the client's
  words. It becomes one `AnswerEffect`.
- L (`claim_card`): the card leaves `active` by compare-and-swap, so exactly one answer wins; the
  loser is treated as a second click and nothing of it runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from turnframe_core import codes
from turnframe_core.commands import (
    CommandEnvelope,
    ConfirmedInteraction,
    origin_for_answer,
    origin_satisfies,
)
from turnframe_core.interactions import (
    AcceptedAnswer,
    AlreadyAnswered,
    ApplyOperation,
    ConfirmCommands,
    DeclineAndRecord,
    DeclineCommands,
    DefersAct,
    Dismiss,
    Interaction,
    InteractionExpired,
    InteractionNotActive,
    InteractionStatus,
    SelectTarget,
    StaleInteraction,
    validate_answer,
)
from turnframe_core.replay import PolicyDecisionRecord
from turnframe_core.understanding import ConstraintKind, Understanding
from turnframe_core.workflow import DomainRefusal, ResolvedAct, Workflow
from turnframe_runtime.cards import CardFactory, RaisedCard, purpose_of
from turnframe_runtime.cases import CaseBook, workflow_for
from turnframe_runtime.context import (
    NOTHING,
    Noticed,
    Teller,
    TurnContext,
    noticed,
    policy_decision,
)
from turnframe_runtime.reduce import (
    BLOCKING_NOTICE,
    CaseInView,
    PlannedCommand,
    blocking_constraint,
    envelope_for,
    reduce_on_case,
)
from turnframe_store.bundle import Stores
from turnframe_store.errors import Conflict, NotFound
from turnframe_store.records import JournalEntry, JournalStatus

__all__ = [
    "Admitted",
    "AnswerEffect",
    "AnsweredBefore",
    "Apply",
    "CardAnswer",
    "CardPlan",
    "Claim",
    "ClaimedCard",
    "Closed",
    "Decline",
    "DismissCard",
    "Hold",
    "ResolveOnly",
    "RunDeferred",
    "RunJournaled",
    "admit_card_answer",
    "answer_notices",
    "claim_card",
    "plan_card_answer",
]

CONFIRM_ACT = "card.confirm"
APPLY_ACT = "card.apply"
RECORD_ACT = "card.record"


# --- C: admission -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Admitted:
    """The answer passed every check; `accepted.action` is what the server stored for it."""

    card: Interaction
    accepted: AcceptedAnswer


@dataclass(frozen=True)
class AnsweredBefore:
    """The card was answered already (a second click, or the loser of a race)."""

    card: Interaction


@dataclass(frozen=True)
class Closed:
    """The card is no longer open (stale, invalidated, expired, declined…); `code` says which."""

    card: Interaction
    code: str


CardAnswer = Admitted | AnsweredBefore | Closed


async def admit_card_answer(
    stores: Stores, cases: CaseBook, turn: TurnContext
) -> CardAnswer | None:
    """Judge the turn's card answer against the card's case as it is now (loading that case).
    Raises an `InteractionRejected` for an answer that must write nothing."""
    response = turn.input.interaction_response
    if response is None:
        return None
    card: Interaction | None
    try:
        card = await stores.interactions.get(turn.account_id, response.interaction_id)
    except NotFound:
        card = None
    current = 0
    if card is not None and card.conversation_id == turn.conversation_id:
        case = await cases.load(card.case_ref.key)
        if case is None:
            card = None  # a case the account may not reach answers like a missing card
        else:
            current = case.case_ref.expected_revision
    try:
        accepted = validate_answer(
            card,
            response,
            account_id=turn.account_id,
            conversation_id=turn.conversation_id,
            current_revision=current,
            now=turn.now,
        )
    except AlreadyAnswered as answered:
        return AnsweredBefore(answered.interaction)
    except StaleInteraction as outdated:
        # The case may have moved because another answer to this card is running it: read the
        # card again (it was read before the case was loaded).
        again = await stores.interactions.get(turn.account_id, response.interaction_id)
        if again.status in (InteractionStatus.RESOLVING, InteractionStatus.RESOLVED):
            return AnsweredBefore(again)
        return Closed(outdated.interaction, codes.NOTICE_STALE_INTERACTION)
    except (InteractionNotActive, InteractionExpired) as closed:
        invalidated = closed.interaction.status is InteractionStatus.INVALIDATED
        code = codes.NOTICE_STALE_INTERACTION if invalidated else codes.NOTICE_INTERACTION_CLOSED
        return Closed(closed.interaction, code)
    assert card is not None  # validate_answer refuses a missing card
    if isinstance(accepted.action, SelectTarget):  # the chosen case must be reachable too
        await cases.load(accepted.action.case_ref.key)
    return Admitted(card, accepted)


# --- K: what the answer does --------------------------------------------------------------------


@dataclass(frozen=True)
class RunJournaled:
    """Run exactly the commands journaled with the card (a confirmation)."""

    command_ids: tuple[str, ...]


@dataclass(frozen=True)
class Decline:
    """Settle the card's journaled commands as declined, and run `record` (a bookkeeping
    operation the option stored), if any."""

    record: tuple[PlannedCommand, ...] = ()


@dataclass(frozen=True)
class Apply:
    """Run the operation the option stored, compiled now against the case."""

    commands: tuple[PlannedCommand, ...]


@dataclass(frozen=True)
class RunDeferred:
    """A selection: the act the card deferred, planned on the chosen case only."""

    ready: tuple[PlannedCommand, ...]
    cards: tuple[RaisedCard, ...]


@dataclass(frozen=True)
class DismissCard:
    """Close the card; nothing runs."""


@dataclass(frozen=True)
class ResolveOnly:
    """The card resolves and nothing runs (a clarification, a custom action, or a selection card
    whose stored act is unusable)."""


@dataclass(frozen=True)
class Hold:
    """Nothing is claimed: the card stays open for a later answer (its commands were blocked by a
    constraint, refused, or changed nothing)."""


AnswerEffect = RunJournaled | Decline | Apply | RunDeferred | DismissCard | ResolveOnly | Hold


@dataclass(frozen=True)
class CardPlan:
    card: Interaction
    accepted: AcceptedAnswer
    effect: AnswerEffect
    #: the constraints of the answering turn (they block the card's commands too)
    constraints: frozenset[ConstraintKind]
    #: the policy decisions made while planning; recorded only if this answer wins the card
    decisions: tuple[PolicyDecisionRecord, ...] = ()
    #: what the answer says it does (a declined instruction); shown unless another answer wins
    #: the card
    declared: Noticed = NOTHING
    #: why what the answer does will not run (shown whoever wins the card)
    noticed: Noticed = NOTHING


def plan_card_answer(
    admitted: Admitted,
    cases: CaseBook,
    understanding: Understanding,
    turn: TurnContext,
    factory: CardFactory,
    tell: Teller,
) -> CardPlan:
    """What the admitted answer does. The card's act comes before the message's acts."""
    card, accepted = admitted.card, admitted.accepted
    decisions: list[PolicyDecisionRecord] = []  # they count only if this answer wins the card
    said: list[Noticed] = []
    declared = NOTHING
    case = cases.get(card.case_ref.key)
    assert case is not None  # admission loaded it
    action = accepted.action
    constraints = frozenset(c.kind for c in understanding.constraints)

    def admit(commands: Sequence[PlannedCommand]) -> tuple[PlannedCommand, ...]:
        for command in commands:
            blocked = blocking_constraint(constraints, command.policy)
            if blocked is not None:
                said.append(noticed(BLOCKING_NOTICE[blocked]))
                return ()
        return tuple(commands)

    def compiled(act_id: str, operation: str, arguments: Mapping[str, Any]) -> list[PlannedCommand]:
        return _compile_for_card(
            turn, case, act_id, operation, arguments, accepted, tell, said, decisions
        )

    effect: AnswerEffect
    if isinstance(action, ConfirmCommands):
        effect = RunJournaled(tuple(action.command_ids))
    elif isinstance(action, DeclineCommands | DeclineAndRecord):
        declared = noticed(codes.NOTICE_INSTRUCTION_DECLINED)
        record: tuple[PlannedCommand, ...] = ()
        if isinstance(action, DeclineAndRecord):
            record = admit(compiled(RECORD_ACT, action.operation, action.arguments))
        effect = Decline(record)
    elif isinstance(action, ApplyOperation):
        arguments = dict(action.arguments)
        if action.freeform_argument and accepted.freeform_input is not None:
            arguments[action.freeform_argument] = accepted.freeform_input
        commands = admit(compiled(APPLY_ACT, action.operation, arguments))
        effect = Apply(commands) if commands else Hold()
    elif isinstance(action, SelectTarget):
        effect = _run_deferred(
            card, action, cases, understanding, turn, factory, tell, said, decisions
        )
    elif isinstance(action, Dismiss):
        effect = DismissCard()
    else:
        effect = ResolveOnly()
    return CardPlan(
        card, accepted, effect, constraints, tuple(decisions), declared, sum(said, NOTHING)
    )


def _run_deferred(
    card: Interaction,
    action: SelectTarget,
    cases: CaseBook,
    understanding: Understanding,
    turn: TurnContext,
    factory: CardFactory,
    tell: Teller,
    said: list[Noticed],
    decisions: list[PolicyDecisionRecord],
) -> AnswerEffect:
    """Plan the act a selection card deferred, on the chosen case only, under the constraints of
    the turn that deferred it and of this one."""
    chosen = cases.get(action.case_ref.key)
    deferred = purpose_of(card)
    if chosen is None or not isinstance(deferred, DefersAct):
        # fail closed: the stored card is unusable
        said.append(noticed(codes.NOTICE_COMMAND_FAILED))
        return ResolveOnly()
    scope = f"select:{card.interaction_id}:"
    plan = reduce_on_case(
        account_id=turn.account_id,
        turn_id=turn.turn_id,
        act=deferred.act,
        case=chosen,
        constraints=(*deferred.constraints, *understanding.constraints),
        cards=factory,
        act_scope=scope,
    )
    said.append(tell.report(plan))
    decisions.extend(policy_decision(c.envelope, c.policy, True) for c in plan.ready)
    return RunDeferred(
        ready=tuple(plan.ready),
        cards=tuple(
            RaisedCard(scope + act_id, waiting.card, waiting.commands)
            for act_id, waiting in plan.awaiting.items()
        ),
    )


def _compile_for_card(
    turn: TurnContext,
    case: CaseInView,
    act_id: str,
    operation: str,
    arguments: Mapping[str, Any],
    accepted: AcceptedAnswer,
    tell: Teller,
    said: list[Noticed],
    decisions: list[PolicyDecisionRecord],
) -> list[PlannedCommand]:
    """Compile an operation a card option stored; its commands carry the answer's origin."""
    resolved = ResolvedAct(
        act_id=act_id,
        operation=operation,
        case_ref=case.case_ref,
        arguments=dict(arguments),
        evidence_digest=accepted.payload_hash,
    )
    compiled = case.workflow.compile(resolved, case.view, case.state)
    if isinstance(compiled, DomainRefusal):
        said.append(tell.refuse(case.case_ref, compiled))
        return []
    origin = origin_for_answer(accepted)
    planned: list[PlannedCommand] = []
    for position, command in enumerate(compiled):
        policy = case.workflow.policy(command.command_type)
        card_act = f"card:{accepted.interaction_id}"
        envelope = envelope_for(
            turn.account_id, turn.turn_id, card_act, position, case.case_ref, origin, command
        )
        allowed = origin_satisfies(origin, policy)
        decisions.append(policy_decision(envelope, policy, allowed))
        if not allowed:
            code = codes.POLICY_TRUSTED_ORIGIN_REQUIRED
            said.append(tell.refuse(None, DomainRefusal(code=code, explanation=code)))
            return []
        planned.append(PlannedCommand(act_id, envelope, policy))
    return planned


# --- L: claim -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClaimedCard:
    """The card this turn's answer won. `resolves`: it is `resolving` now and the commit bundle
    finishes it; otherwise it was declined or dismissed outright."""

    card: Interaction
    option_id: str
    resolves: bool
    commands: tuple[PlannedCommand, ...] = ()
    declines: tuple[JournalEntry, ...] = ()
    cards: tuple[RaisedCard, ...] = ()


@dataclass(frozen=True)
class Claim:
    """L's result for a card answer: what it won (None: nothing was claimed and the card stays
    open; AnsweredBefore: another answer won it), the policy decisions it made (none when
    another answer won: nothing of this one runs) and why the card's commands will not run."""

    won: ClaimedCard | AnsweredBefore | None
    decisions: tuple[PolicyDecisionRecord, ...] = ()
    noticed: Noticed = NOTHING

    @property
    def lost(self) -> bool:
        """Another answer won the card."""
        return isinstance(self.won, AnsweredBefore)


def answer_notices(plan: CardPlan, claim: Claim) -> Noticed:
    """What the card answer's plan says: what it declared it does (unless another answer won
    the card, when none of it happens), then why its parts will not run."""
    return (NOTHING if claim.lost else plan.declared) + plan.noticed


async def claim_card(
    stores: Stores,
    plan: CardPlan,
    workflows: Mapping[str, Workflow],
) -> Claim:
    """Gather what the answer runs and move the card out of `active` by compare-and-swap."""
    card, account_id = plan.card, plan.card.account_id
    try:
        async with stores.savepoint():
            claimed, gathered, said = await _claim(stores, plan, workflows)
    except Conflict:
        return Claim(AnsweredBefore(await stores.interactions.get(account_id, card.interaction_id)))
    return Claim(claimed, (*plan.decisions, *gathered), said)


async def _claim(
    stores: Stores,
    plan: CardPlan,
    workflows: Mapping[str, Workflow],
) -> tuple[ClaimedCard | None, tuple[PolicyDecisionRecord, ...], Noticed]:
    """The claim, the decisions that let the card's journaled commands run, and why they will
    not."""
    card, option_id, effect = plan.card, plan.accepted.option_id, plan.effect
    account_id = card.account_id
    interactions = stores.interactions
    if isinstance(effect, RunJournaled):
        commands, gathered, said = await _gather_confirmed(stores, plan, effect, workflows)
        decisions = tuple(policy_decision(c.envelope, c.policy, True) for c in gathered)
        if commands is None:
            return None, decisions, said
        await interactions.begin_resolution(account_id, card.interaction_id, option_id)
        claimed = ClaimedCard(card, option_id, resolves=True, commands=commands)
        return claimed, decisions, said
    if isinstance(effect, Decline):
        declines = await _journaled_awaiting(
            stores, account_id, card.payload.confirmed_command_ids()
        )
        await interactions.decline(account_id, card.interaction_id, option_id)
        return (
            ClaimedCard(card, option_id, resolves=False, commands=effect.record, declines=declines),
            (),
            NOTHING,
        )
    if isinstance(effect, DismissCard):
        await interactions.dismiss(account_id, card.interaction_id)
        return ClaimedCard(card, option_id, resolves=False), (), NOTHING
    if isinstance(effect, Hold):
        return None, (), NOTHING
    await interactions.begin_resolution(account_id, card.interaction_id, option_id)
    return (
        ClaimedCard(
            card,
            option_id,
            resolves=True,
            commands=_effect_commands(effect),
            cards=effect.cards if isinstance(effect, RunDeferred) else (),
        ),
        (),
        NOTHING,
    )


def _effect_commands(effect: AnswerEffect) -> tuple[PlannedCommand, ...]:
    if isinstance(effect, Apply):
        return effect.commands
    if isinstance(effect, RunDeferred):
        return effect.ready
    return ()


async def _journaled_awaiting(
    stores: Stores, account_id: str, command_ids: Sequence[str]
) -> tuple[JournalEntry, ...]:
    """The card's journaled commands still awaiting confirmation. One that has moved on means
    another answer to the card got there first: `Conflict`, as when its claim is lost."""
    entries: list[JournalEntry] = []
    for command_id in command_ids:
        try:
            entry = await stores.journal.get(account_id, command_id)
        except NotFound:
            continue
        if entry.status is JournalStatus.AWAITING_CONFIRMATION:
            entries.append(entry)
        else:
            raise Conflict("the card's commands were confirmed by another answer")
    return tuple(entries)


async def _gather_confirmed(
    stores: Stores,
    plan: CardPlan,
    effect: RunJournaled,
    workflows: Mapping[str, Workflow],
) -> tuple[tuple[PlannedCommand, ...] | None, tuple[PlannedCommand, ...], Noticed]:
    """The commands journaled with the card, exactly as journaled (and each one found); None
    (and a notice) when a constraint blocks one or one is missing: the answer fails closed and
    the card stays open."""
    entries = await _journaled_awaiting(stores, plan.card.account_id, effect.command_ids)
    gathered = tuple(
        planned
        for planned in (_journaled_command(entry, plan.card, workflows) for entry in entries)
        if planned is not None
    )
    blocked = [b for b in (blocking_constraint(plan.constraints, c.policy) for c in gathered) if b]
    if blocked:
        return None, gathered, sum((noticed(BLOCKING_NOTICE[k]) for k in blocked), NOTHING)
    if len(gathered) != len(effect.command_ids):
        return None, gathered, noticed(codes.NOTICE_COMMAND_FAILED)
    return gathered, gathered, NOTHING


def _journaled_command(
    entry: JournalEntry,
    card: Interaction,
    workflows: Mapping[str, Workflow],
) -> PlannedCommand | None:
    """A journaled command, if it is the one this card confirms and still what its key says."""
    origin = entry.origin
    if not (
        isinstance(origin, ConfirmedInteraction)
        and origin.interaction_id == card.interaction_id
        and origin.payload_hash == card.payload_hash
    ):
        return None
    policy = workflow_for(workflows, entry.case_ref.workflow).policy(entry.command_type)
    envelope = CommandEnvelope.build(
        command_id=entry.command_id,
        turn_id=entry.turn_id,
        account_id=entry.account_id,
        case_ref=entry.case_ref,
        origin=origin,
        command_type=entry.command_type,
        payload=entry.payload,
    )
    if envelope.idempotency_key != entry.idempotency_key or not origin_satisfies(origin, policy):
        return None
    return PlannedCommand(CONFIRM_ACT, envelope, policy)
