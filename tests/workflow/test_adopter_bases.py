"""The adopter's base classes: `Workflow` and `Executor` declare nothing optional unless
overridden, and an old-style structural object adapted at the boundary answers exactly as a
subclass with the same methods does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from turnframe_core import CaseRef, CommandBatch, Workflow, WorkflowView, as_workflow
from turnframe_core.workflow import DeclaresCopy, DeclaresReceiptTemplates
from turnframe_runtime import (
    ExecutionResult,
    Executor,
    OutcomeUntold,
    WorkflowExecutor,
    as_executor,
)
from turnframe_test.domains.travel import TripDesk, TripExecutor, TripWorkflow

#: The trip workflow's own methods on a class with no base: what an older adopter wrote.
PlainTrip: type = type(
    "PlainTrip", (), {k: v for k, v in vars(TripWorkflow).items() if not k.startswith("_")}
)


def _declared(workflow: Workflow) -> tuple[Any, ...]:
    return (
        tuple(workflow.receipt_templates()),
        dict(workflow.copy_samples()),
        tuple(workflow.copy_templates()),
        {code: tuple(classes) for code, classes in workflow.receipt_claims().items()},
        tuple(workflow.follow_up_receipts()),
    )


class _Bare:
    """A structural workflow with only the required methods (they are never called here)."""

    key = "bare"
    version = "1"


def test_a_subclass_is_its_own_workflow() -> None:
    trip = TripWorkflow()
    assert as_workflow(trip) is trip


def test_a_plain_workflow_and_a_subclass_declare_the_same() -> None:
    plain = PlainTrip()
    assert not isinstance(plain, Workflow)
    assert isinstance(plain, DeclaresCopy) and isinstance(plain, DeclaresReceiptTemplates)
    adapted = as_workflow(plain)
    assert isinstance(adapted, Workflow)
    assert (adapted.key, adapted.version) == (TripWorkflow.key, TripWorkflow.version)
    assert _declared(adapted) == _declared(TripWorkflow())
    assert _declared(adapted)[0]  # the trip does declare receipt templates


def test_an_adapted_workflow_delegates_the_required_methods() -> None:
    plain, trip = PlainTrip(), TripWorkflow()
    case_ref = CaseRef(workflow=TripWorkflow.key, case_id="trip_1", expected_revision=0)
    view = as_workflow(plain).project(case_ref, None)
    assert view == trip.project(case_ref, None)
    assert as_workflow(plain).operations(view) == trip.operations(view)


def test_an_adapted_workflow_keeps_the_outbox_answer_it_offers() -> None:
    answered: list[tuple[object, object]] = []

    class Answering(PlainTrip):
        def external_answer(self, request: object, result: object) -> str:
            answered.append((request, result))
            return "recorded"

    request, result = object(), object()
    assert as_workflow(Answering()).external_answer(request, result) == "recorded"
    assert answered == [(request, result)]
    # one that offers none records nothing, as a `Workflow` that does not override it
    assert as_workflow(_Bare()).external_answer(request, result) is None  # type: ignore[arg-type]
    assert _Minimal().external_answer(request, result) is None


class _Minimal(Workflow):
    key = "minimal"
    version = "1"

    def project(self, case_ref: CaseRef, state: Mapping[str, Any] | None) -> WorkflowView:
        raise NotImplementedError

    operations = compile = policy = receipts = project  # type: ignore[assignment]
    obligation_sentence = narratable_state = next_steps = build_interaction = project  # type: ignore[assignment]


def test_a_workflow_that_overrides_nothing_optional_declares_nothing() -> None:
    empty: tuple[Any, ...] = ((), {}, (), {}, ())
    assert _declared(_Minimal()) == empty
    assert _declared(as_workflow(_Bare())) == empty  # type: ignore[arg-type]


def test_a_workflow_missing_a_required_method_cannot_be_built() -> None:
    class Partial(Workflow):
        key = "partial"
        version = "1"

    with pytest.raises(TypeError):
        Partial()  # type: ignore[abstract]


async def test_an_executor_that_does_not_override_outcome_cannot_tell() -> None:
    class Applies(Executor):
        async def execute(self, batch: CommandBatch) -> ExecutionResult:
            raise NotImplementedError

    with pytest.raises(OutcomeUntold) as raised:
        await Applies().outcome("key_1")
    assert raised.value.code == "turnframe.execution.outcome_untold"


async def test_a_plain_executor_without_outcome_answers_as_the_base_does() -> None:
    class PlainExecutor:
        async def execute(self, batch: CommandBatch) -> ExecutionResult:
            raise NotImplementedError

    plain: WorkflowExecutor = PlainExecutor()
    adapted = as_executor(plain)
    assert isinstance(adapted, Executor)
    with pytest.raises(OutcomeUntold):
        await adapted.outcome("key_1")


async def test_a_plain_executor_with_outcome_and_a_subclass_tell_the_same() -> None:
    subclass = TripExecutor(TripDesk())
    assert as_executor(subclass) is subclass

    class PlainExecutor:
        def __init__(self) -> None:
            self.inner = TripExecutor(TripDesk())

        async def execute(self, batch: CommandBatch) -> ExecutionResult:
            return await self.inner.execute(batch)

        async def outcome(self, idempotency_key: str) -> ExecutionResult | None:
            return await self.inner.outcome(idempotency_key)

    adapted = as_executor(PlainExecutor())
    assert await adapted.outcome("never_sent") == await subclass.outcome("never_sent")


def test_the_subclass_bases_are_exported_where_an_adopter_looks() -> None:
    assert issubclass(TripWorkflow, Workflow) and issubclass(TripExecutor, Executor)
