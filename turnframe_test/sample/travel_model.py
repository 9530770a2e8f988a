"""The trip workflow as a model for the state explorer (`turnframe_test.explore`): what a user
may propose with sample values, the airline's answers as external triggers, and the desk's own
rule (`apply_trip_command`) as the pure executor."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from turnframe_core import CompiledCommand, WorkflowDefinition, WorkflowView
from turnframe_test.sample.travel import (
    KEEP_LEG,
    LEGS,
    RECORD_AIRLINE_ANSWER,
    REQUEST_REBOOKING,
    SET_EMAIL,
    SET_NAME,
    SET_TRAVEL_DATE,
    WITHDRAW,
    TripWorkflow,
    apply_trip_command,
    new_trip_state,
)

__all__ = ["TripModel"]


class TripModel:
    """Trips as opened (nothing filled in, or everything), and all that may happen to them."""

    def __init__(self, workflow: WorkflowDefinition | None = None) -> None:
        self._workflow = workflow or TripWorkflow()

    @property
    def workflow(self) -> WorkflowDefinition:
        return self._workflow

    def initial_states(self) -> Sequence[Mapping[str, Any]]:
        filled = {"name": "Ada Lovelace", "email": "ada@example.com", "travel_date": "2027-03-14"}
        return [new_trip_state("Trip"), new_trip_state("Trip", **filled)]

    def acts(
        self, view: WorkflowView, state: Mapping[str, Any]
    ) -> Sequence[tuple[str, dict[str, Any]]]:
        acts: list[tuple[str, dict[str, Any]]] = [
            (SET_NAME, {"name": "Grace Hopper"}),
            (SET_EMAIL, {"email": "grace@example.com"}),
            (SET_TRAVEL_DATE, {"travel_date": "2027-04-01"}),
            (WITHDRAW, {}),
        ]
        for leg in LEGS:
            acts += [(REQUEST_REBOOKING, {"leg": leg}), (KEEP_LEG, {"leg": leg})]
        return acts

    def triggers(
        self, view: WorkflowView, state: Mapping[str, Any]
    ) -> Sequence[tuple[str, dict[str, Any]]]:
        answers: list[tuple[str, dict[str, Any]]] = []
        for leg in LEGS:
            if state.get("legs", {}).get(leg, {}).get("status") == "rebooking_sent":
                answers.append(
                    (RECORD_AIRLINE_ANSWER, {"leg": leg, "outcome": "rebooked", "reference": "R1"})
                )
                answers.append(
                    (RECORD_AIRLINE_ANSWER, {"leg": leg, "outcome": "refused", "code": "full"})
                )
        return answers

    def apply(self, state: Mapping[str, Any], command: CompiledCommand) -> Mapping[str, Any] | None:
        after = copy.deepcopy(dict(state))
        apply_trip_command(after, command.command_type, command.payload)
        return after

    def outcomes(self) -> Sequence[Mapping[str, Any]]:
        return [{"withdrawn": True}]
