"""State exploration: every state a workflow can reach, checked (release gates 11 to 16).

    report = explore(MyModel())
    assert report.passed, report.describe()

Starting from the model's initial states, the explorer tries everything that can happen to a
case (breadth first, so each finding carries the shortest path to it): each act a user may
propose now (`model.acts`), each option of the card a user-owned phase raises (built by the
workflow itself, as the runtime would), and each system or external trigger
(`model.triggers`, e.g. an outside system's answer). Acts and options are compiled by the
workflow (`compile`), and the commands applied by the model's pure stand-in for the executor
(`model.apply`, raising `ExecutionRejected` to refuse).

Every reached state must give a sound view (`check_view`: one phase, no repeated obligation, a
blocking card exactly where the user owns the phase, an outcome exactly where it is terminal),
the same view when projected twice, an answerable card where the user owns the phase, nothing
on offer once terminal, and a way on unless terminal (no dead end). A refusal must leave the
state as it was, no command may make the case disappear, and every declared outcome must be
reached.
"""

from __future__ import annotations

import copy
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from turnframe_core import (
    ApplyOperation,
    CaseRef,
    CompiledCommand,
    DeclineAndRecord,
    DomainRefusal,
    PhaseOwnership,
    ResolvedAct,
    WorkflowDefinition,
    WorkflowView,
    canonical_json,
    check_view,
    digest,
)
from turnframe_runtime import ExecutionRejected

__all__ = ["ExplorationLimits", "ExplorationReport", "Finding", "WorkflowModel", "explore"]


class WorkflowModel(Protocol):
    """What the explorer needs to know about a workflow beyond its definition."""

    @property
    def workflow(self) -> WorkflowDefinition: ...

    def initial_states(self) -> Sequence[Mapping[str, Any]]:
        """States a case starts in (e.g. as opened by the domain)."""
        ...

    def acts(
        self, view: WorkflowView, state: Mapping[str, Any]
    ) -> Sequence[tuple[str, dict[str, Any]]]:
        """Operations with sample arguments a user may propose in this view."""
        ...

    def triggers(
        self, view: WorkflowView, state: Mapping[str, Any]
    ) -> Sequence[tuple[str, dict[str, Any]]]:
        """Commands the system or an outside party may send now (not proposable by words)."""
        ...

    def apply(self, state: Mapping[str, Any], command: CompiledCommand) -> Mapping[str, Any] | None:
        """The state after the command (None: the case no longer exists); raise
        `ExecutionRejected` when the domain refuses it. Pure: never changes `state`."""
        ...

    def outcomes(self) -> Sequence[Mapping[str, Any]]:
        """Every outcome a case can end with; each must be reached."""
        ...


@dataclass(frozen=True)
class ExplorationLimits:
    max_states: int = 5_000
    max_depth: int = 16


@dataclass(frozen=True)
class Finding:
    """One broken rule, with the shortest path of steps that reaches it."""

    kind: str
    detail: str
    path: tuple[str, ...] = ()

    def __str__(self) -> str:
        route = " -> ".join(self.path) or "(initial state)"
        return f"{self.kind}: {self.detail} [after {route}]"


@dataclass
class ExplorationReport:
    states: int = 0
    transitions: int = 0
    refusals: int = 0
    truncated: bool = False
    findings: list[Finding] = field(default_factory=list)
    phases: set[str] = field(default_factory=set)
    #: card options by action kind that the explorer did not follow (they run no operation
    #: of the workflow's own: confirming or declining pending commands, choosing a case…)
    unfollowed: Counter[str] = field(default_factory=Counter)

    @property
    def passed(self) -> bool:
        return not self.findings and not self.truncated

    @property
    def kinds(self) -> set[str]:
        return {f.kind for f in self.findings}

    def describe(self) -> str:
        head = (
            f"{self.states} states, {self.transitions} transitions, {self.refusals} refusals, "
            f"phases {sorted(self.phases)}"
        )
        if self.truncated:
            head += " (stopped at the limits: not every state was reached)"
        if self.unfollowed:
            head += f"; card options not followed: {dict(self.unfollowed)}"
        return "\n".join([head, *(f"  {f}" for f in self.findings[:50])])


_CASE = CaseRef(workflow="explored", case_id="case_1", expected_revision=1)


def explore(model: WorkflowModel, limits: ExplorationLimits | None = None) -> ExplorationReport:
    """Every state reachable within `limits`, and every rule one of them breaks."""
    limits = limits or ExplorationLimits()
    workflow = model.workflow
    case = _CASE.model_copy(update={"workflow": workflow.key})
    report = ExplorationReport()
    seen: set[str] = set()
    reached_outcomes: set[str] = set()
    queue: deque[tuple[dict[str, Any], tuple[str, ...]]] = deque()
    for state in model.initial_states():
        queue.append((copy.deepcopy(dict(state)), ()))
    while queue:
        state, path = queue.popleft()
        key = canonical_json(state)
        if key in seen:
            continue
        if len(seen) >= limits.max_states:
            report.truncated = True
            break
        seen.add(key)
        report.states += 1

        def find(kind: str, detail: str, where: tuple[str, ...] = path) -> None:
            report.findings.append(Finding(kind, detail, where))

        view = workflow.project(case, state)
        report.phases.add(view.phase)
        for violation in check_view(view):
            find("view_invariant", f"{violation.code}: {violation.detail}")
        if workflow.project(case, copy.deepcopy(state)) != view:
            find("nondeterministic_projection", f"phase {view.phase} projects differently twice")
        if view.is_terminal:
            if view.outcome is not None:
                reached_outcomes.add(canonical_json(view.outcome))
            if workflow.operations(view):
                find("offers_on_terminal", f"terminal phase {view.phase} still offers operations")
        steps = _steps(model, workflow, case, view, state, find, report.unfollowed)
        moved = False
        for label, commands in steps:
            if isinstance(commands, DomainRefusal):
                report.refusals += 1
                continue
            before = copy.deepcopy(state)
            try:
                after: Mapping[str, Any] | None = state
                for command in commands:
                    assert after is not None
                    after = model.apply(after, command)
                    if after is None:
                        break
            except ExecutionRejected:
                report.refusals += 1
                if state != before:
                    find("refusal_changed_state", f"{label} was refused and changed the case")
                continue
            if state != before:
                find("apply_not_pure", f"{label} changed the state it was given")
                state = before
            report.transitions += 1
            if after is None:  # it moved, but to nowhere: reported, and not followed
                find("case_disappeared", f"{label} left no case", (*path, label))
                moved = True
                continue
            if canonical_json(after) != key:
                moved = True
            if len(path) < limits.max_depth:
                queue.append((copy.deepcopy(dict(after)), (*path, label)))
            else:
                report.truncated = True
        if not view.is_terminal and not moved:
            find("dead_end", f"phase {view.phase}: nothing a user, the system or anyone outside "
                 "can do moves the case on")  # fmt: skip
    for outcome in model.outcomes():
        if canonical_json(outcome) not in reached_outcomes:
            report.findings.append(
                Finding("unreachable_outcome", f"no path reaches the outcome {dict(outcome)}")
            )
    return report


def _steps(
    model: WorkflowModel,
    workflow: WorkflowDefinition,
    case: CaseRef,
    view: WorkflowView,
    state: dict[str, Any],
    find: Any,
    unfollowed: Counter[str],
) -> list[tuple[str, Sequence[CompiledCommand] | DomainRefusal]]:
    """Everything that may happen next, compiled: acts, card options, triggers."""
    steps: list[tuple[str, Sequence[CompiledCommand] | DomainRefusal]] = []
    offered = {spec.operation for spec in workflow.operations(view)}

    def compiled(operation: str, arguments: dict[str, Any], n: int) -> Any:
        act = ResolvedAct(
            act_id=f"act_{n}",
            operation=operation,
            case_ref=case,
            arguments=dict(arguments),
            evidence_digest=digest({"explore": operation, "arguments": arguments}),
        )
        return workflow.compile(act, view, state)

    for n, (operation, arguments) in enumerate(model.acts(view, state)):
        if operation not in offered:
            continue  # the runtime never lets a user propose what the view does not offer
        steps.append((f"{operation}{_args(arguments)}", compiled(operation, arguments, n)))
    requirement = view.blocking_interaction
    if view.phase_ownership is PhaseOwnership.USER and requirement is not None:
        card = workflow.build_interaction(requirement, view, state)
        if not card.options:
            find("unanswerable_card", f"the {requirement.key} card offers no option")
        for option in card.options:
            action = option.action
            label = f"card {requirement.key}: {option.option_id}"
            if isinstance(action, ApplyOperation | DeclineAndRecord):
                steps.append((label, compiled(action.operation, dict(action.arguments), 99)))
            else:
                unfollowed[action.kind] += 1
    for command_type, body in model.triggers(view, state):
        command = CompiledCommand(command_type=command_type, payload=body)
        steps.append((f"{command_type}{_args(body)}", [command]))
    return steps


def _args(arguments: Mapping[str, Any]) -> str:
    return (
        "(" + ", ".join(f"{k}={v}" for k, v in sorted(arguments.items())) + ")" if arguments else ""
    )
