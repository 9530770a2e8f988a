"""Steps J and K: whole-turn reduction, from a validated understanding to a plan, before any
effect (targets resolved, then policy per command).

Rules, in the order they apply:
1. A cancellation wins: the cancelled act does nothing (and the cancelling act is only that).
2. A correction supersedes the act it names (as understanding linked them; never guessed).
3. An ambiguous target raises a selection card; the reducer never picks the newest or the first.
4. Each remaining act compiles against its case's view and state; a domain refusal, or a compile
   to nothing ("already so"), is that act's result.
5. Constraints block their class of act: `do_not_submit` and `no_external_effects` block commands
   that leave the system (external saga), `do_not_delete` blocks destructive and worse,
   `ask_before_applying` sends everything through a confirmation card.
6. Policy per command: an origin that satisfies the policy runs now; one whose policy names a
   confirmation card waits for it (journaled awaiting confirmation); anything else is refused.
Every act gets exactly one result. Questions never act.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from turnframe_core import codes
from turnframe_core.canonical import digest
from turnframe_core.cases import CaseKey, CaseRef
from turnframe_core.commands import (
    CommandEnvelope,
    CommandOrigin,
    CommandPolicy,
    ConfirmationPolicy,
    ConfirmedInteraction,
    DirectSafeUserAct,
    ExternalSaga,
    RiskClass,
    origin_satisfies,
)
from turnframe_core.derive import derive_command_id
from turnframe_core.interactions import (
    ActionClass,
    Interaction,
    InteractionKind,
    ResolutionChannel,
)
from turnframe_core.replay import TargetResolutionRecord
from turnframe_core.understanding import (
    AmbiguousTarget,
    CardTarget,
    Constraint,
    ConstraintKind,
    HandleTarget,
    ProposedAct,
    Understanding,
)
from turnframe_core.workflow import (
    CompiledCommand,
    DomainRefusal,
    ResolvedAct,
    Workflow,
    WorkflowView,
)

__all__ = [
    "BLOCKING_NOTICE",
    "ActResult",
    "Awaiting",
    "CaseInView",
    "ConfirmationCards",
    "Plan",
    "PlannedCommand",
    "blocking_constraint",
    "envelope_for",
    "group_by_case",
    "judge_commands",
    "reduce_on_case",
    "reduce_turn",
    "target_resolutions",
]


class ActResult(StrEnum):
    READY = "ready"
    AWAITING_CONFIRMATION = "awaiting_confirmation"
    NEEDS_SELECTION = "needs_selection"
    REFUSED = "refused"
    BLOCKED_BY_CONSTRAINT = "blocked_by_constraint"
    SUPERSEDED = "superseded"
    CANCELLED = "cancelled"
    CANCELLATION = "cancellation"
    NO_CHANGE = "no_change"


@dataclass(frozen=True)
class CaseInView:
    """A loaded, authorized case as the turn sees it."""

    case_ref: CaseRef  # at its current revision
    label: str
    state: Mapping[str, Any] | None
    view: WorkflowView
    workflow: Workflow


@dataclass(frozen=True)
class PlannedCommand:
    act_id: str
    envelope: CommandEnvelope
    policy: CommandPolicy

    @property
    def is_external(self) -> bool:
        return isinstance(self.policy.atomicity, ExternalSaga)


@dataclass(frozen=True)
class Awaiting:
    """An act's confirmation card (built, not yet persisted) and the commands it will confirm."""

    card: Interaction
    commands: tuple[PlannedCommand, ...]


class ConfirmationCards(Protocol):
    """Builds the confirmation card an act waits for (pure: it persists nothing). The card's id
    and payload hash become the origin its confirmed commands carry."""

    def confirmation(
        self,
        act_id: str,
        case: CaseInView,
        commands: Sequence[CompiledCommand],
        command_ids: Sequence[str],
    ) -> Interaction: ...


@dataclass
class Plan:
    act_results: dict[str, ActResult] = field(default_factory=dict)
    ready: list[PlannedCommand] = field(default_factory=list)
    #: act id -> the card that act waits for and the commands it confirms
    awaiting: dict[str, Awaiting] = field(default_factory=dict)
    #: act id -> the cases it could mean
    selections: dict[str, tuple[CaseInView, ...]] = field(default_factory=dict)
    refusals: list[tuple[str, CaseRef | None, DomainRefusal]] = field(default_factory=list)
    blocked_notices: list[str] = field(default_factory=list)
    policy_refusals: list[tuple[str, str]] = field(default_factory=list)
    #: (case, operation) of acts that would change nothing: the case is already so
    unchanged: list[tuple[CaseRef, str]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The plan as recorded for audit (no user text; commands by id and key)."""
        return {
            "act_results": dict(self.act_results),
            "ready": [
                {
                    "act_id": c.act_id,
                    "command_id": c.envelope.command_id,
                    "idempotency_key": c.envelope.idempotency_key,
                }
                for c in self.ready
            ],
            "awaiting": {
                act: [c.envelope.command_id for c in waiting.commands]
                for act, waiting in self.awaiting.items()
            },
            "selections": {
                act: [c.case_ref.case_id for c in cases] for act, cases in self.selections.items()
            },
            "refusals": [{"act_id": a, "code": r.code} for a, _, r in self.refusals],
            "blocked": list(self.blocked_notices),
            "policy_refusals": [{"act_id": a, "code": c} for a, c in self.policy_refusals],
        }


BLOCKING_NOTICE = {
    ConstraintKind.DO_NOT_SUBMIT: codes.NOTICE_NOTHING_SUBMITTED,
    ConstraintKind.NO_EXTERNAL_EFFECTS: codes.NOTICE_NO_EXTERNAL_EFFECTS,
    ConstraintKind.DO_NOT_DELETE: codes.NOTICE_NOTHING_DELETED,
}


def blocking_constraint(
    constraints: frozenset[ConstraintKind], policy: CommandPolicy
) -> ConstraintKind | None:
    """The constraint of this turn that forbids a command with `policy`, if any."""
    external = isinstance(policy.atomicity, ExternalSaga)
    if external and ConstraintKind.DO_NOT_SUBMIT in constraints:
        return ConstraintKind.DO_NOT_SUBMIT
    if external and ConstraintKind.NO_EXTERNAL_EFFECTS in constraints:
        return ConstraintKind.NO_EXTERNAL_EFFECTS
    if policy.risk >= RiskClass.DESTRUCTIVE and ConstraintKind.DO_NOT_DELETE in constraints:
        return ConstraintKind.DO_NOT_DELETE
    return None


_Target = CaseInView | tuple[CaseInView, ...] | None


def reduce_turn(
    *,
    account_id: str,
    turn_id: str,
    understanding: Understanding,
    handles: Mapping[str, CaseInView],
    card_case: CaseInView | None,
    cards: ConfirmationCards,
) -> Plan:
    """Reduce the whole understanding to a plan. Pure: reads only its arguments."""

    def target(act: ProposedAct) -> _Target:
        if isinstance(act.target, AmbiguousTarget):
            return tuple(handles[h] for h in act.target.handles)
        if isinstance(act.target, HandleTarget):
            return handles.get(act.target.handle)
        if isinstance(act.target, CardTarget):
            return card_case
        return None

    return _reduce(
        account_id=account_id,
        turn_id=turn_id,
        acts=understanding.acts,
        constraints=understanding.constraints,
        target=target,
        cards=cards,
        act_scope="",
    )


def reduce_on_case(
    *,
    account_id: str,
    turn_id: str,
    act: ProposedAct,
    case: CaseInView,
    constraints: Iterable[Constraint],
    cards: ConfirmationCards,
    act_scope: str = "",
) -> Plan:
    """Reduce one act whose case is already known (a selection card's choice, or a confirmation
    raised again after the commit). Pure.

    `act_scope` prefixes the act id wherever ids derive from it (command and card ids), so an act
    re-planned in a later turn never collides with that turn's own acts.
    """
    return _reduce(
        account_id=account_id,
        turn_id=turn_id,
        acts=(act,),
        constraints=tuple(constraints),
        target=lambda _act: case,
        cards=cards,
        act_scope=act_scope,
    )


def target_resolutions(
    understanding: Understanding,
    handles: Mapping[str, CaseInView],
    card_case_ref: CaseRef | None,
) -> tuple[TargetResolutionRecord, ...]:
    """How each act's target resolved, as the audit record states it."""
    records: list[TargetResolutionRecord] = []
    for act in understanding.acts:
        target = act.target
        if isinstance(target, HandleTarget) and target.handle in handles:
            record = TargetResolutionRecord(
                act_id=act.act_id, resolution="exact", case_ref=handles[target.handle].case_ref
            )
        elif isinstance(target, AmbiguousTarget):
            record = TargetResolutionRecord(
                act_id=act.act_id,
                resolution="ambiguous",
                candidates=tuple(handles[h].case_ref for h in target.handles),
            )
        elif isinstance(target, CardTarget) and card_case_ref is not None:
            record = TargetResolutionRecord(
                act_id=act.act_id, resolution="exact", case_ref=card_case_ref
            )
        else:
            record = TargetResolutionRecord(act_id=act.act_id, resolution="missing")
        records.append(record)
    return tuple(records)


def _reduce(
    *,
    account_id: str,
    turn_id: str,
    acts: Sequence[ProposedAct],
    constraints: Sequence[Constraint],
    target: Callable[[ProposedAct], _Target],
    cards: ConfirmationCards,
    act_scope: str,
) -> Plan:
    plan = Plan()
    kinds = frozenset(c.kind for c in constraints)
    cancelled = {a.cancels for a in acts if a.cancels}
    superseded = {a.corrects for a in acts if a.corrects}

    for act in acts:
        if act.act_id in cancelled:
            plan.act_results[act.act_id] = ActResult.CANCELLED
            continue
        if act.cancels:
            plan.act_results[act.act_id] = ActResult.CANCELLATION
            continue
        if act.act_id in superseded:
            plan.act_results[act.act_id] = ActResult.SUPERSEDED
            continue
        _reduce_act(
            plan,
            act,
            target(act),
            account_id=account_id,
            turn_id=turn_id,
            constraints=kinds,
            cards=cards,
            act_scope=act_scope,
        )
    missing = [a.act_id for a in acts if a.act_id not in plan.act_results]
    if missing:  # every act gets exactly one result
        raise AssertionError(f"reduction left acts without a result: {missing}")
    return plan


def _reduce_act(
    plan: Plan,
    act: ProposedAct,
    target: _Target,
    *,
    account_id: str,
    turn_id: str,
    constraints: frozenset[ConstraintKind],
    cards: ConfirmationCards,
    act_scope: str,
) -> None:
    if isinstance(target, tuple):
        plan.selections[act.act_id] = target
        plan.act_results[act.act_id] = ActResult.NEEDS_SELECTION
        return
    case = target
    if case is None:
        refusal = DomainRefusal(code=codes.TARGET_MISSING, explanation=codes.TARGET_MISSING)
        plan.refusals.append((act.act_id, None, refusal))
        plan.act_results[act.act_id] = ActResult.REFUSED
        return
    offered = {spec.operation for spec in case.workflow.operations(case.view) if spec.proposable}
    if act.operation not in offered:
        refusal = DomainRefusal(
            code=codes.OPERATION_NOT_PROPOSABLE,
            explanation=codes.OPERATION_NOT_PROPOSABLE,
        )
        plan.refusals.append((act.act_id, case.case_ref, refusal))
        plan.act_results[act.act_id] = ActResult.REFUSED
        return
    evidence = digest({"act": act.act_id, "quote": act.evidence.quote})
    resolved = ResolvedAct(
        act_id=act.act_id,
        operation=act.operation,
        case_ref=case.case_ref,
        arguments={arg.name: arg.value for arg in act.arguments},
        evidence_digest=evidence,
    )
    compiled = case.workflow.compile(resolved, case.view, case.state)
    if isinstance(compiled, DomainRefusal):
        plan.refusals.append((act.act_id, case.case_ref, compiled))
        plan.act_results[act.act_id] = ActResult.REFUSED
        return
    if not compiled:
        plan.act_results[act.act_id] = ActResult.NO_CHANGE
        plan.unchanged.append((case.case_ref, act.operation))
        return
    direct = DirectSafeUserAct(evidence_digest=evidence)
    judge_commands(
        plan,
        act.act_id,
        case,
        compiled,
        direct,
        account_id=account_id,
        turn_id=turn_id,
        constraints=constraints,
        cards=cards,
        act_scope=act_scope,
    )


def judge_commands(
    plan: Plan,
    act_id: str,
    case: CaseInView,
    compiled: Sequence[CompiledCommand],
    origin: CommandOrigin,
    *,
    account_id: str,
    turn_id: str,
    constraints: frozenset[ConstraintKind],
    cards: ConfirmationCards,
    act_scope: str = "",
) -> None:
    """Rules 5 and 6 for one act's compiled commands (at least one), authorized by `origin`:
    blocked by a constraint, ready to run, waiting for the confirmation card its policy names,
    or refused when no card could authorize it. Pure: it records its result in `plan`."""
    scoped = act_scope + act_id
    policies = [case.workflow.policy(c.command_type) for c in compiled]
    for policy in policies:
        blocked = blocking_constraint(constraints, policy)
        if blocked is not None:
            plan.blocked_notices.append(BLOCKING_NOTICE[blocked])
            plan.act_results[act_id] = ActResult.BLOCKED_BY_CONSTRAINT
            return
    ask_first = ConstraintKind.ASK_BEFORE_APPLYING in constraints
    runs_now = not ask_first and all(origin_satisfies(origin, p) for p in policies)
    if runs_now:
        for position, (command, policy) in enumerate(zip(compiled, policies, strict=True)):
            plan.ready.append(
                PlannedCommand(
                    act_id,
                    envelope_for(
                        account_id, turn_id, scoped, position, case.case_ref, origin, command
                    ),
                    policy,
                )
            )
        plan.act_results[act_id] = ActResult.READY
        return
    confirmable = all(
        origin_satisfies(_would_click(p), p) or p.confirmation is ConfirmationPolicy.NONE
        for p in policies
    )
    if not confirmable:  # no card the runtime can raise authorizes it (e.g. human review)
        plan.policy_refusals.append((act_id, codes.POLICY_HUMAN_REVIEW_REQUIRED))
        plan.act_results[act_id] = ActResult.REFUSED
        return
    command_ids = [derive_command_id(account_id, turn_id, scoped, i) for i in range(len(compiled))]
    card = cards.confirmation(scoped, case, compiled, command_ids)
    confirmed = ConfirmedInteraction(
        interaction_id=card.interaction_id,
        payload_hash=card.payload_hash,
        interaction_kind=card.kind,
        action_class=ActionClass.CONFIRMS_COMMANDS,
        channel=ResolutionChannel.CLICK,
    )
    waiting = tuple(
        PlannedCommand(
            act_id,
            envelope_for(account_id, turn_id, scoped, position, case.case_ref, confirmed, command),
            policy,
        )
        for position, (command, policy) in enumerate(zip(compiled, policies, strict=True))
    )
    plan.awaiting[act_id] = Awaiting(card, waiting)
    plan.act_results[act_id] = ActResult.AWAITING_CONFIRMATION


def _would_click(policy: CommandPolicy) -> CommandOrigin:
    """The origin a click on a confirmation card would give (to ask: could a card authorize it?)."""
    kind = policy.confirmation.interaction_kind or InteractionKind.CONFIRM_COMMAND
    if kind not in (InteractionKind.CONFIRM_COMMAND, InteractionKind.REVIEW_CHANGES):
        kind = InteractionKind.CONFIRM_COMMAND  # the runtime builds confirm cards only
    return ConfirmedInteraction(
        interaction_id="int_probe",
        payload_hash=digest("probe"),
        interaction_kind=kind,
        action_class=ActionClass.CONFIRMS_COMMANDS,
        channel=ResolutionChannel.CLICK,
    )


def envelope_for(
    account_id: str,
    turn_id: str,
    act_id: str,
    position: int,
    case_ref: CaseRef,
    origin: CommandOrigin,
    command: CompiledCommand,
) -> CommandEnvelope:
    """The envelope of a compiled command: its id derived from the turn, the act and its
    position, its idempotency key from what it does."""
    return CommandEnvelope.build(
        command_id=derive_command_id(account_id, turn_id, act_id, position),
        turn_id=turn_id,
        account_id=account_id,
        case_ref=case_ref,
        origin=origin,
        command_type=command.command_type,
        payload=dict(command.payload),
    )


def group_by_case(commands: Sequence[PlannedCommand]) -> dict[CaseKey, list[PlannedCommand]]:
    """Commands per case, in plan order (one batch per case)."""
    grouped: dict[CaseKey, list[PlannedCommand]] = {}
    for command in commands:
        grouped.setdefault(command.envelope.case_ref.key, []).append(command)
    return grouped
