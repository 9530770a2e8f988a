"""The workflow contract: obligation identity, the view invariants and the definition protocol."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from pydantic import ValidationError

from turnframe_core import codes
from turnframe_core.canonical import CanonicalJsonError
from turnframe_core.cases import CaseRef
from turnframe_core.commands import CommandPolicy
from turnframe_core.events import DomainEvent, ReceiptSpec
from turnframe_core.interactions import (
    ConfirmCommands,
    DeclineCommands,
    InteractionKind,
    InteractionOption,
    InteractionPayload,
)
from turnframe_core.workflow import (
    ArgumentSpec,
    CompiledCommand,
    DomainRefusal,
    InteractionRequirement,
    NextStep,
    Obligation,
    OperationSpec,
    PhaseOwnership,
    ResolvedAct,
    ViewInvariantViolation,
    WorkflowDefinition,
    WorkflowView,
    check_view,
    ensure_view,
)

CASE = CaseRef(workflow="sample", case_id="case-1", expected_revision=3)
CARD = InteractionRequirement(key="confirm_submit", kind=InteractionKind.CONFIRM_COMMAND)


def _view(**overrides: Any) -> WorkflowView:
    """A sound user-owned view waiting on one blocking card; overrides break it on purpose."""
    fields: dict[str, Any] = {
        "case_ref": CASE,
        "workflow_version": "1",
        "phase": "reviewing",
        "phase_ownership": PhaseOwnership.USER,
        "obligations": (Obligation(key="provide_name"),),
        "blocking_interaction": CARD,
    }
    fields.update(overrides)
    return WorkflowView(**fields)


def _codes(view: WorkflowView) -> list[str]:
    return [violation.code for violation in check_view(view)]


# --- obligations --------------------------------------------------------------------------------


def test_identical_obligations_share_one_id() -> None:
    first = Obligation(key="assign_owner", params={"entry_id": "e1"})
    second = Obligation(key="assign_owner", params={"entry_id": "e1"})

    assert first.obligation_id == second.obligation_id


def test_the_same_obligation_for_different_entities_has_distinct_ids() -> None:
    first = Obligation(key="assign_owner", params={"entry_id": "e1"})
    second = Obligation(key="assign_owner", params={"entry_id": "e2"})

    assert first.obligation_id != second.obligation_id


def test_an_obligation_id_does_not_depend_on_param_order() -> None:
    first = Obligation(key="assign_owner", params={"a": 1, "b": 2})
    second = Obligation(key="assign_owner", params={"b": 2, "a": 1})

    assert first.obligation_id == second.obligation_id


def test_an_obligation_id_is_the_canonical_json_of_the_obligation() -> None:
    obligation = Obligation(key="assign_owner", params={"entry_id": "e1"})

    assert obligation.obligation_id == '{"key":"assign_owner","params":{"entry_id":"e1"}}'


def test_an_obligation_whose_params_have_no_canonical_form_is_refused() -> None:
    with pytest.raises(CanonicalJsonError):
        Obligation(key="measure", params={"value": float("nan")})


# --- view invariants ----------------------------------------------------------------------------


def test_a_sound_user_owned_view_reports_nothing() -> None:
    assert check_view(_view()) == []


def test_a_sound_terminal_view_reports_nothing() -> None:
    view = _view(
        phase="done",
        phase_ownership=PhaseOwnership.TERMINAL,
        obligations=(),
        blocking_interaction=None,
        outcome={"result": "accepted"},
    )

    assert check_view(view) == []


def test_a_sound_system_owned_view_reports_nothing() -> None:
    view = _view(
        phase="processing", phase_ownership=PhaseOwnership.SYSTEM, blocking_interaction=None
    )

    assert check_view(view) == []


def test_a_repeated_obligation_is_reported_as_a_duplicate() -> None:
    repeated = Obligation(key="assign_owner", params={"entry_id": "e1"})
    view = _view(obligations=(repeated, Obligation(key="provide_name"), repeated))

    assert _codes(view) == [codes.WORKFLOW_DUPLICATE_OBLIGATION]


def test_a_duplicate_is_reported_by_position() -> None:
    repeated = Obligation(key="assign_owner", params={"entry_id": "e1"})
    view = _view(obligations=(repeated, Obligation(key="provide_name"), repeated))

    assert check_view(view)[0].detail == "obligations[2] repeats obligations[0]"


def test_a_parameterized_obligation_repeated_per_entity_is_not_a_duplicate() -> None:
    view = _view(
        obligations=(
            Obligation(key="assign_owner", params={"entry_id": "e1"}),
            Obligation(key="assign_owner", params={"entry_id": "e2"}),
        )
    )

    assert check_view(view) == []


def test_a_user_owned_phase_without_a_card_is_reported() -> None:
    view = _view(blocking_interaction=None)

    assert _codes(view) == [codes.WORKFLOW_MISSING_BLOCKING_INTERACTION]


def test_a_blocking_requirement_on_a_system_owned_phase_is_reported() -> None:
    view = _view(phase_ownership=PhaseOwnership.SYSTEM)

    assert _codes(view) == [codes.WORKFLOW_BLOCKING_ON_NON_USER_PHASE]


def test_a_blocking_requirement_on_an_externally_owned_phase_is_reported() -> None:
    view = _view(phase_ownership=PhaseOwnership.EXTERNAL)

    assert _codes(view) == [codes.WORKFLOW_BLOCKING_ON_NON_USER_PHASE]


def test_a_blocking_requirement_on_a_terminal_phase_is_reported() -> None:
    view = _view(
        phase_ownership=PhaseOwnership.TERMINAL, obligations=(), outcome={"result": "accepted"}
    )

    assert _codes(view) == [codes.WORKFLOW_BLOCKING_ON_NON_USER_PHASE]


def test_a_non_blocking_requirement_in_the_blocking_slot_is_reported() -> None:
    view = _view(blocking_interaction=CARD.model_copy(update={"blocking": False}))

    assert _codes(view) == [codes.WORKFLOW_NON_BLOCKING_IN_BLOCKING_SLOT]


def test_an_outcome_on_a_non_terminal_phase_is_reported() -> None:
    view = _view(obligations=(), outcome={"result": "accepted"})

    assert _codes(view) == [codes.WORKFLOW_OUTCOME_ON_NON_TERMINAL_PHASE]


def test_a_terminal_phase_without_an_outcome_is_reported() -> None:
    view = _view(phase_ownership=PhaseOwnership.TERMINAL, blocking_interaction=None)

    assert _codes(view) == [codes.WORKFLOW_TERMINAL_WITHOUT_OUTCOME]


def test_an_empty_outcome_still_counts_as_an_outcome() -> None:
    view = _view(
        phase_ownership=PhaseOwnership.TERMINAL,
        obligations=(),
        blocking_interaction=None,
        outcome={},
    )

    assert check_view(view) == []


def test_an_outcome_with_an_open_obligation_is_reported() -> None:
    view = _view(
        phase_ownership=PhaseOwnership.TERMINAL,
        blocking_interaction=None,
        outcome={"result": "accepted"},
    )

    assert _codes(view) == [codes.WORKFLOW_OUTCOME_WITH_OBLIGATIONS]


def test_an_outcome_is_reported_once_per_open_obligation() -> None:
    view = _view(
        phase_ownership=PhaseOwnership.TERMINAL,
        obligations=(
            Obligation(key="assign_owner", params={"entry_id": "e1"}),
            Obligation(key="assign_owner", params={"entry_id": "e2"}),
            Obligation(key="provide_name"),
        ),
        blocking_interaction=None,
        outcome={"result": "accepted"},
    )

    assert [(v.code, v.detail) for v in check_view(view)] == [
        (codes.WORKFLOW_OUTCOME_WITH_OBLIGATIONS, f"obligations[{index}] is open beside an outcome")
        for index in range(3)
    ]


def test_an_empty_outcome_with_an_open_obligation_is_still_reported() -> None:
    view = _view(phase_ownership=PhaseOwnership.TERMINAL, blocking_interaction=None, outcome={})

    assert _codes(view) == [codes.WORKFLOW_OUTCOME_WITH_OBLIGATIONS]


def test_a_terminal_view_without_an_outcome_reports_no_open_obligation() -> None:
    view = _view(phase_ownership=PhaseOwnership.TERMINAL, blocking_interaction=None)

    assert codes.WORKFLOW_OUTCOME_WITH_OBLIGATIONS not in _codes(view)


def test_every_breach_is_reported_not_just_the_first() -> None:
    repeated = Obligation(key="provide_name")
    view = _view(
        phase_ownership=PhaseOwnership.SYSTEM,
        obligations=(repeated, repeated),
        blocking_interaction=CARD.model_copy(update={"blocking": False}),
        outcome={"result": "accepted"},
    )

    assert _codes(view) == [
        codes.WORKFLOW_DUPLICATE_OBLIGATION,
        codes.WORKFLOW_BLOCKING_ON_NON_USER_PHASE,
        codes.WORKFLOW_NON_BLOCKING_IN_BLOCKING_SLOT,
        codes.WORKFLOW_OUTCOME_ON_NON_TERMINAL_PHASE,
        codes.WORKFLOW_OUTCOME_WITH_OBLIGATIONS,
        codes.WORKFLOW_OUTCOME_WITH_OBLIGATIONS,
    ]


def test_a_violation_detail_never_carries_state_values() -> None:
    repeated = Obligation(key="assign_owner", params={"entry_id": "private-entry-77"})
    view = _view(obligations=(repeated, repeated), outcome={"result": "private-outcome-88"})

    details = " ".join(violation.detail for violation in check_view(view))

    assert "private-entry-77" not in details
    assert "private-outcome-88" not in details


def test_ensure_view_returns_a_sound_view_unchanged() -> None:
    view = _view()

    assert ensure_view(view) is view


def test_ensure_view_raises_with_every_violation() -> None:
    view = _view(phase_ownership=PhaseOwnership.TERMINAL)

    with pytest.raises(ViewInvariantViolation) as raised:
        ensure_view(view)

    assert [v.code for v in raised.value.violations] == [
        codes.WORKFLOW_BLOCKING_ON_NON_USER_PHASE,
        codes.WORKFLOW_TERMINAL_WITHOUT_OUTCOME,
    ]


def test_the_invariant_error_carries_the_invariant_violation_code() -> None:
    with pytest.raises(ViewInvariantViolation) as raised:
        ensure_view(_view(blocking_interaction=None))

    assert raised.value.code == codes.WORKFLOW_INVARIANT_VIOLATION


# --- view shape ---------------------------------------------------------------------------------


def test_a_view_refuses_a_second_phase_field() -> None:
    with pytest.raises(ValidationError):
        WorkflowView.model_validate({**_view().model_dump(), "phases": ["reviewing", "processing"]})


def test_a_view_cannot_be_changed_after_projection() -> None:
    view = _view()

    with pytest.raises(ValidationError):
        view.phase = "processing"  # type: ignore[misc]


def test_a_view_round_trips_through_json() -> None:
    view = _view(notices=(), label="Record one")

    assert WorkflowView.model_validate_json(view.model_dump_json()) == view


def test_a_requirement_confirms_irreversible_risk_unless_told_otherwise() -> None:
    assert CARD.confirms_risk == "irreversible"


def test_an_operation_refuses_repeated_argument_names() -> None:
    with pytest.raises(ValidationError):
        OperationSpec(
            operation="rename",
            summary="Rename the record",
            arguments=(
                ArgumentSpec(name="name", description="the new name"),
                ArgumentSpec(name="name", description="the new name again"),
            ),
        )


def test_argument_names_are_snake_case() -> None:
    with pytest.raises(ValidationError):
        ArgumentSpec(name="newName", description="the new name")


# --- the definition protocol --------------------------------------------------------------------


class _SampleWorkflow:
    """The smallest workflow that keeps the contract: draft (user) -> done (terminal)."""

    @property
    def key(self) -> str:
        return "sample"

    @property
    def version(self) -> str:
        return "1"

    def project(self, case_ref: CaseRef, state: Mapping[str, Any] | None) -> WorkflowView:
        if state is not None and state.get("submitted"):
            return WorkflowView(
                case_ref=case_ref,
                workflow_version=self.version,
                phase="done",
                phase_ownership=PhaseOwnership.TERMINAL,
                outcome={"submitted": True},
            )
        missing = () if state and state.get("name") else (Obligation(key="provide_name"),)
        return WorkflowView(
            case_ref=case_ref,
            workflow_version=self.version,
            phase="draft",
            phase_ownership=PhaseOwnership.USER,
            obligations=missing,
            blocking_interaction=CARD,
        )

    def operations(self, view: WorkflowView) -> Sequence[OperationSpec]:
        if view.is_terminal:
            return ()
        return (
            OperationSpec(
                operation="rename",
                summary="Give the record a name",
                arguments=(ArgumentSpec(name="name", description="the new name"),),
            ),
        )

    def compile(
        self, act: ResolvedAct, view: WorkflowView, state: Mapping[str, Any] | None
    ) -> Sequence[CompiledCommand] | DomainRefusal:
        if view.is_terminal:
            return DomainRefusal(code="sample.closed", explanation="This record is closed.")
        return (CompiledCommand(command_type="sample.rename", payload=dict(act.arguments)),)

    def policy(self, command_type: str) -> CommandPolicy:
        if command_type == "sample.rename":
            return CommandPolicy.low_risk()
        return CommandPolicy.conservative()

    def receipts(self, events: Sequence[DomainEvent]) -> Sequence[ReceiptSpec]:
        return tuple(
            ReceiptSpec(
                status_code="sample.renamed", template_id="renamed", event_ids=(e.event_id,)
            )
            for e in events
        )

    def obligation_sentence(self, obligation: Obligation, locale: str) -> str | None:
        return "What should the record be called?" if obligation.key == "provide_name" else None

    def next_steps(self, view: WorkflowView) -> Sequence[NextStep]:
        return (NextStep(operation="rename", words="Rename it"),)

    def build_interaction(
        self,
        requirement: InteractionRequirement,
        view: WorkflowView,
        state: Mapping[str, Any] | None,
    ) -> InteractionPayload:
        return InteractionPayload(
            title="Submit the record?",
            options=(
                InteractionOption(
                    option_id="opt_yes",
                    label="Submit",
                    action=ConfirmCommands(command_ids=("cmd_1",)),
                ),
                InteractionOption(option_id="opt_no", label="Not yet", action=DeclineCommands()),
            ),
        )


def test_a_plain_class_with_the_contract_methods_is_a_workflow_definition() -> None:
    workflow: WorkflowDefinition = _SampleWorkflow()

    view = workflow.project(CASE.at(0), None)

    assert ensure_view(view).phase == "draft"


def test_a_projection_of_the_same_state_is_equal() -> None:
    workflow: WorkflowDefinition = _SampleWorkflow()

    assert workflow.project(CASE, {"name": "x"}) == workflow.project(CASE, {"name": "x"})


def test_an_unknown_command_gets_the_conservative_policy() -> None:
    workflow: WorkflowDefinition = _SampleWorkflow()

    assert workflow.policy("sample.unheard_of") == CommandPolicy.conservative()


def test_a_workflow_refuses_an_act_in_its_own_words() -> None:
    workflow: WorkflowDefinition = _SampleWorkflow()
    view = workflow.project(CASE, {"submitted": True})
    act = ResolvedAct(
        act_id="a1",
        operation="rename",
        case_ref=CASE,
        arguments={"name": "x"},
        evidence_digest="sha256:" + "0" * 64,
    )

    assert workflow.compile(act, view, {"submitted": True}) == DomainRefusal(
        code="sample.closed", explanation="This record is closed."
    )
