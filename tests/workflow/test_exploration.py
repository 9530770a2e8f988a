"""State exploration (release gates 11 to 16): every state the trip workflow can reach keeps
every rule, and for each rule a broken workflow or model whose exploration reports exactly it,
with the shortest path to it."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from turnframe_core import (
    CaseRef,
    CompiledCommand,
    InteractionPayload,
    InteractionRequirement,
    OperationSpec,
    WorkflowView,
)
from turnframe_runtime import ExecutionRejected
from turnframe_test.domains.travel import TripWorkflow
from turnframe_test.domains.travel_model import TripModel
from turnframe_test.explore import ExplorationLimits, explore

pytestmark = pytest.mark.gate(11, 13, 14, 16)


def test_every_reachable_trip_state_keeps_every_rule() -> None:
    report = explore(TripModel())
    assert report.passed, report.describe()
    # It went everywhere: each phase, through the card, the airline's answers and refusals.
    assert report.phases == {"collecting", "awaiting_rebooking_confirmation", "withdrawn"}
    assert report.states > 1_000 and report.transitions > 5_000 and report.refusals > 0


class _UserPhaseWithoutCard(TripWorkflow):
    def project(self, case_ref: CaseRef, state: Mapping[str, Any] | None) -> WorkflowView:
        view = super().project(case_ref, state)
        if view.phase == "awaiting_rebooking_confirmation":
            return view.model_copy(update={"blocking_interaction": None})
        return view


class _Flickers(TripWorkflow):
    """Projects a different label every time: not a function of the state."""

    _count = itertools.count()

    def project(self, case_ref: CaseRef, state: Mapping[str, Any] | None) -> WorkflowView:
        view = super().project(case_ref, state)
        return view.model_copy(update={"label": f"trip {next(self._count)}"})


class _OffersWhenWithdrawn(TripWorkflow):
    def operations(self, view: WorkflowView) -> Sequence[OperationSpec]:
        if view.phase == "withdrawn":
            return super().operations(view.model_copy(update={"phase": "collecting"}))
        return super().operations(view)


class _CardWithoutOptions(TripWorkflow):
    def build_interaction(
        self,
        requirement: InteractionRequirement,
        view: WorkflowView,
        state: Mapping[str, Any] | None,
    ) -> InteractionPayload:
        card = super().build_interaction(requirement, view, state)
        return card.model_copy(update={"options": ()})


class _NoWithdrawing(TripModel):
    """Nobody can withdraw, and the airline never answers: a sent rebooking waits forever."""

    def acts(self, view: WorkflowView, state: Mapping[str, Any]) -> Sequence[tuple[str, Any]]:
        return [a for a in super().acts(view, state) if a[0] != "trip.withdraw"]

    def triggers(self, view: WorkflowView, state: Mapping[str, Any]) -> Sequence[tuple[str, Any]]:
        return ()

    def outcomes(self) -> Sequence[Mapping[str, Any]]:
        return []  # nothing can end a trip here: only the dead ends are reported


class _ExpectsCompletion(TripModel):
    def outcomes(self) -> Sequence[Mapping[str, Any]]:
        return [*super().outcomes(), {"completed": True}]


class _WithdrawingDeletes(TripModel):
    def outcomes(self) -> Sequence[Mapping[str, Any]]:
        return []  # a withdrawn trip is never seen: only the disappearance is reported

    def apply(self, state: Mapping[str, Any], command: CompiledCommand) -> Mapping[str, Any] | None:
        return None if command.command_type == "trip.withdraw" else super().apply(state, command)


class _RefusalScribbles(TripModel):
    """Refuses the airline's answer on a withdrawn trip, and scribbles on the state as it does."""

    def apply(self, state: Mapping[str, Any], command: CompiledCommand) -> Mapping[str, Any] | None:
        if state.get("status") == "withdrawn":
            state["attempts"] = state.get("attempts", 0) + 1  # type: ignore[index]
            raise ExecutionRejected("trip.closed", "This trip is closed.")
        return super().apply(state, command)


CONTROLS: dict[str, Any] = {
    "view_invariant": lambda: TripModel(_UserPhaseWithoutCard()),
    "nondeterministic_projection": lambda: TripModel(_Flickers()),
    "offers_on_terminal": lambda: TripModel(_OffersWhenWithdrawn()),
    "unanswerable_card": lambda: TripModel(_CardWithoutOptions()),
    "dead_end": _NoWithdrawing,
    "unreachable_outcome": _ExpectsCompletion,
    "case_disappeared": _WithdrawingDeletes,
    "refusal_changed_state": _RefusalScribbles,
}


@pytest.mark.parametrize("kind", sorted(CONTROLS))
def test_a_workflow_that_breaks_one_rule_is_reported_for_exactly_it(kind: str) -> None:
    report = explore(CONTROLS[kind](), ExplorationLimits(max_states=3_000))
    assert report.kinds == {kind}, report.describe()


def test_a_dead_end_is_reported_with_the_shortest_path_to_it() -> None:
    report = explore(_NoWithdrawing())
    ends = [f for f in report.findings if f.kind == "dead_end"]
    assert ends, report.describe()
    shortest = min(len(f.path) for f in ends)
    # With no withdrawing: fill in all three details, keep both flights, and nothing is left.
    (first,) = [f for f in ends if len(f.path) == shortest]
    assert first.path == (
        "trip.set_name(name=Grace Hopper)",
        "trip.set_email(email=grace@example.com)",
        "trip.set_travel_date(travel_date=2027-04-01)",
        "trip.keep_leg(leg=outbound)",
        "trip.keep_leg(leg=return)",
    )


def test_exploration_that_hits_its_limits_does_not_pass() -> None:
    report = explore(TripModel(), ExplorationLimits(max_states=10))
    assert report.truncated and not report.passed
