"""Test suites an adopter runs against their own stores, executor and workflows (docs/gates.md).

Subclass one in a test module and give the fixture it names; pytest then collects one test per
check, each marked as evidence for the release gate it proves (`turnframe gates --tests …`):

    from turnframe_test.suites import ExecutorConformance

    class TestMyExecutor(ExecutorConformance):
        @pytest.fixture
        def turnframe_executor_factory(self):
            return my_factory            # async () -> ExecutorSubject

- `StoreConformance` (`turnframe_stores_factory`: async () -> fresh Stores): the store
  conformance suite, a test per check (gate 27).
- `ExecutorConformance` (`turnframe_executor_factory`): the executor conformance suite
  (gates 5 and 6).
- `WorkflowExploration` (`turnframe_workflow_model`): every reachable state of the workflow
  keeps every rule (gates 11, 13, 14 and 16).
- `CrashRecovery` (`turnframe_runtime_factory`: async (FaultPlan) -> TurnRuntime on stores
  that take the plan, and `turnframe_script`: the steps of one conversation): at each store
  fault point a turn crosses, at every crossing the script makes of it (a click on a card an
  earlier turn raised included), the conversation is played with the fault armed; after a turn
  raises, `recover_unfinished()` runs (what a restarted process runs at start), then the client
  sends the request again, or (a second pass) never does; afterwards every invariant must hold
  (`turnframe_test.invariants`: every committed event cited by its turn's receipt among them)
  (gate 29). A point the script never crosses fails.

The tests are plain functions that run their own event loop: they need no asyncio plugin, and
a factory must open what it uses inside the loop it is called in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from turnframe_core import AssistantTurn, InteractionBlock, InteractionResponse, TurnInput
from turnframe_runtime import TurnFailed, TurnInProgress, TurnRuntime
from turnframe_store import FaultPlan, FaultPoint, StoreError
from turnframe_store.conformance import CHECKS, run_check
from turnframe_test.executor_conformance import EXECUTOR_CHECKS, run_executor_check
from turnframe_test.explore import explore
from turnframe_test.invariants import conversation_violations

__all__ = [
    "TURN_FAULT_POINTS",
    "Click",
    "count_crossings",
    "CrashRecovery",
    "ExecutorConformance",
    "StoreConformance",
    "WorkflowExploration",
    "play_with_fault",
]

#: The store fault points a turn crosses (the outbox's two are crossed by its relay).
TURN_FAULT_POINTS = (
    FaultPoint.BEFORE_JOURNAL_INSERT,
    FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT,
    FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK,
    FaultPoint.AFTER_INTERACTION_PERSISTENCE,
    FaultPoint.BEFORE_RESPONSE_PERSISTENCE,
)


def _missing(name: str) -> Any:
    pytest.fail(f"give the `{name}` fixture in your subclass (docs/gates.md)", pytrace=False)


class StoreConformance:
    @pytest.fixture
    def turnframe_stores_factory(self) -> Any:
        return _missing("turnframe_stores_factory")

    @pytest.mark.gate(27)
    @pytest.mark.parametrize("check", list(CHECKS))
    def test_store_conformance(self, check: str, turnframe_stores_factory: Any) -> None:
        result = asyncio.run(run_check(check, turnframe_stores_factory))
        assert result.passed, result.detail


class ExecutorConformance:
    @pytest.fixture
    def turnframe_executor_factory(self) -> Any:
        return _missing("turnframe_executor_factory")

    @pytest.mark.gate(5, 6)
    @pytest.mark.parametrize("check", list(EXECUTOR_CHECKS))
    def test_executor_conformance(self, check: str, turnframe_executor_factory: Any) -> None:
        result = asyncio.run(run_executor_check(check, turnframe_executor_factory))
        if result.skipped:
            pytest.skip(result.detail)  # proves nothing: its gate stays unproven
        assert result.passed, result.detail


class WorkflowExploration:
    @pytest.fixture
    def turnframe_workflow_model(self) -> Any:
        return _missing("turnframe_workflow_model")

    @pytest.mark.gate(11, 13, 14, 16)
    def test_every_reachable_state_keeps_every_rule(self, turnframe_workflow_model: Any) -> None:
        report = explore(turnframe_workflow_model)
        assert report.passed, report.describe()


@dataclass(frozen=True)
class Click:
    """A step that answers the card the conversation showed last (its first option, or the
    one named)."""

    option_id: str | None = None


Step = TurnInput | Click
RuntimeFactory = Callable[[FaultPlan], Awaitable[TurnRuntime]]


class CrashRecovery:
    @pytest.fixture
    def turnframe_runtime_factory(self) -> Any:
        return _missing("turnframe_runtime_factory")

    @pytest.fixture
    def turnframe_script(self) -> Any:
        return _missing("turnframe_script")

    @pytest.mark.gate(29)
    @pytest.mark.parametrize("point", [p.value for p in TURN_FAULT_POINTS])
    def test_a_crash_at_each_crossing_is_recovered_and_keeps_every_invariant(
        self, point: str, turnframe_runtime_factory: Any, turnframe_script: Any
    ) -> None:
        fired = 0
        crossings = asyncio.run(
            count_crossings(turnframe_runtime_factory, turnframe_script, FaultPoint(point))
        )
        assert crossings > 0, f"the script never crosses {point}, so it proves nothing there"
        for skip in range(crossings):
            for retry in (True, False):
                violations, fired_now = asyncio.run(
                    play_with_fault(
                        turnframe_runtime_factory,
                        turnframe_script,
                        FaultPoint(point),
                        skip,
                        retry=retry,
                    )
                )
                client = "sent again" if retry else "never sent again"
                assert violations == [], f"{point} at crossing {skip + 1}, {client}: {violations}"
                fired += fired_now
        assert fired > 0, f"the script never crosses {point}, so it proves nothing there"


async def count_crossings(
    factory: RuntimeFactory, script: Sequence[Step], point: FaultPoint
) -> int:
    """How many times `script`, played with no fault, crosses `point`."""
    plan = FaultPlan()
    runtime = await factory(plan)
    seen: list[AssistantTurn] = []
    try:
        for n, step in enumerate(script):
            request = _request(step, seen, n)
            if request is not None:
                seen.append(await runtime.handle_turn(request))
    finally:
        await runtime.stores.aclose()
    return plan.crossings(point)


async def play_with_fault(
    factory: RuntimeFactory,
    script: Sequence[Step],
    point: FaultPoint,
    skip: int,
    *,
    retry: bool = True,
) -> tuple[list[str], int]:
    """Play `script` on a fresh runtime with a fault at the (skip+1)-th crossing of `point`.
    A turn that raises is followed by recovery, as a restarted process runs it, and (with
    `retry`) by the same request again, as a client sends it; without, recovery alone must
    finish the turn. Returns the invariants broken afterwards and how many faults fired."""
    plan = FaultPlan()
    runtime = await factory(plan)
    plan.arm(point, skip=skip)
    seen: list[AssistantTurn] = []
    problems: list[str] = []
    account = conversation = ""
    try:
        for n, step in enumerate(script):
            request = _request(step, seen, n)
            if request is None:
                continue
            account, conversation = request.account_id, request.conversation_id
            try:
                seen.append(await runtime.handle_turn(request))
                continue
            except StoreError:
                await runtime.recover_unfinished()
            if not retry:
                continue
            try:
                seen.append(await runtime.handle_turn(request))
            except TurnFailed:
                pass  # it ended before any effect; a client would write again
            except TurnInProgress:
                problems.append(f"{request.turn_id} still in progress after recovery")
        plan.clear()
        await runtime.recover_unfinished()
        if account:
            problems += await conversation_violations(runtime.stores, account, conversation)
    finally:
        await runtime.stores.aclose()
    return problems, len(plan.fired)


def _request(step: Step, seen: Sequence[AssistantTurn], n: int) -> TurnInput | None:
    if isinstance(step, TurnInput):
        return step if step.turn_id else step.model_copy(update={"turn_id": f"turn_script_{n}"})
    for turn in reversed(seen):
        cards = [b for b in turn.blocks if isinstance(b, InteractionBlock)]
        if cards:
            card = cards[0]
            option = step.option_id or card.options[0].option_id
            return TurnInput(
                account_id=turn.account_id,
                conversation_id=turn.conversation_id,
                turn_id=f"turn_script_{n}",
                interaction_response=InteractionResponse(
                    interaction_id=card.interaction_id,
                    option_id=option,
                    expected_case_revision=card.case_revision,
                ),
            )
    return None  # no card to answer (the turn that would have raised it did not)
