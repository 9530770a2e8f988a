"""The shipped suites as an adopter uses them (docs/gates.md): subclasses that give the sample
travel desk's stores, executor, workflow model and runtime, and collect a test per check."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from turnframe_core import CaseKey, TurnInput
from turnframe_runtime import RuntimeConfig, TemplateCopy, TurnRuntime
from turnframe_store import FaultPlan, FaultPoint, MemoryStores, Stores
from turnframe_test.executor_conformance import ExecutorSubject
from turnframe_test.sample.sayings import SayingsInterpreter
from turnframe_test.sample.travel import (
    TRIP_COPY,
    TripDesk,
    TripDirectory,
    TripExecutor,
    TripWorkflow,
)
from turnframe_test.sample.travel_model import TripModel
from turnframe_test.suites import (
    Click,
    CrashRecovery,
    ExecutorConformance,
    StoreConformance,
    WorkflowExploration,
    play_with_fault,
)

ROOT = Path(__file__).resolve().parents[2]
#: An adopter's pytest run: this checkout's kit, wherever installed, and none of the options the
#: run hosting this test was given (CI's `--turnframe-gates-report` is not an adopter's option).
ADOPTER_ENV = {
    **{name: value for name, value in os.environ.items() if name != "PYTEST_ADDOPTS"},
    "PYTHONPATH": str(ROOT),
}


class TestMemoryStores(StoreConformance):
    @pytest.fixture
    def turnframe_stores_factory(self) -> Any:
        async def factory() -> Stores:
            return MemoryStores()

        return factory


class TestTripExecutor(ExecutorConformance):
    @pytest.fixture
    def turnframe_executor_factory(self) -> Any:
        async def factory() -> ExecutorSubject:
            desk = TripDesk()
            desk.open_trip("acct_a", "T-1", "Trip", name="Ada Lovelace", email="ada@example.com")

            async def revision_of() -> int:
                trip = desk.trip("acct_a", "T-1")
                assert trip is not None
                return trip.revision

            return ExecutorSubject(
                executor=TripExecutor(desk),
                account_id="acct_a",
                case=CaseKey(workflow="trip", case_id="T-1"),
                revision=1,
                accepted=(
                    ("trip.set_name", {"name": "Grace Hopper"}),
                    ("trip.set_email", {"email": "grace@example.com"}),
                ),
                refused=("trip.confirm_rebooking", {"leg": "outbound"}),
                revision_of=revision_of,
            )

        return factory


class TestTripWorkflow(WorkflowExploration):
    @pytest.fixture
    def turnframe_workflow_model(self) -> Any:
        return TripModel()


def _say(text: str) -> TurnInput:
    return TurnInput(account_id="acct_a", conversation_id="conv_a", text=text)


def _trip_runtime(stores: Any = MemoryStores) -> Any:
    async def factory(faults: FaultPlan) -> TurnRuntime:
        desk = TripDesk()
        desk.open_trip(
            "acct_a",
            "T-1",
            "Trip",
            conversation_id="conv_a",
            name="Ada Lovelace",
            email="ada@example.com",
            travel_date="2027-03-14",
        )
        return TurnRuntime(
            stores=stores(faults=faults),
            workflows=[TripWorkflow()],
            directory=TripDirectory(desk),
            executor=TripExecutor(desk),
            interpreter=SayingsInterpreter(),
            copy=TemplateCopy(TRIP_COPY),
            config=RuntimeConfig(locales=("en",)),
        )

    return factory


SCRIPT = [
    _say("Name Grace Hopper"),
    _say("Rebook the outbound flight"),
    Click(),
    _say("Withdraw my trip"),
    Click(),
]


class TestTripDeskRecovers(CrashRecovery):
    @pytest.fixture
    def turnframe_runtime_factory(self) -> Any:
        return _trip_runtime()

    @pytest.fixture
    def turnframe_script(self) -> Any:
        return SCRIPT


class _ForgetfulStores(MemoryStores):
    """Stores whose recovery finds nothing unfinished: a crashed turn stays where it stopped."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)

        async def nothing(limit: int) -> tuple[()]:
            return ()

        self.conversations.list_unfinished_turns = nothing  # type: ignore[method-assign]


async def test_the_crash_suite_fails_a_runtime_whose_recovery_finds_nothing() -> None:
    # The last turn crashes (an earlier one would be finished by the next turn's start).
    problems, fired = await play_with_fault(
        _trip_runtime(_ForgetfulStores),
        SCRIPT[:1],
        FaultPoint.BEFORE_RESPONSE_PERSISTENCE,
        0,
        retry=False,
    )
    assert fired == 1
    assert any("left" in p for p in problems), problems
    # The same script on ordinary stores keeps every invariant.
    assert await play_with_fault(
        _trip_runtime(), SCRIPT[:1], FaultPoint.BEFORE_RESPONSE_PERSISTENCE, 0, retry=False
    ) == ([], 1)


ADOPTER_PROJECT = """
import pytest
from turnframe_test.sample.travel_model import TripModel
from turnframe_test.suites import WorkflowExploration


class TestMyWorkflow(WorkflowExploration):
    @pytest.fixture
    def turnframe_workflow_model(self):
        return TripModel()


class TestForgotTheFixture(WorkflowExploration):
    pass
"""


def test_an_adopter_project_gets_the_suites_from_the_installed_plugin(tmp_path: Path) -> None:
    """No conftest, no asyncio plugin: the entry point loads the plugin (the `gate` marker is
    known under --strict-markers) and a suite subclass collects and runs; a subclass without
    its fixture errs, saying which fixture to give."""
    (tmp_path / "test_mine.py").write_text(ADOPTER_PROJECT)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:asyncio", "--strict-markers", "-rf"],
        cwd=tmp_path,
        env=ADOPTER_ENV,
        capture_output=True,
        text=True,
    )
    assert "1 passed, 1 error" in done.stdout, done.stdout + done.stderr
    assert "give the `turnframe_workflow_model` fixture" in done.stdout
