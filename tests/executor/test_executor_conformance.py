"""The executor conformance suite: the sample domain's executors (in memory and on PostgreSQL)
pass every check, and each check has a broken executor that fails exactly that check."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from turnframe_core import CaseKey, CommandBatch
from turnframe_runtime import ExecutionRejected, ExecutionResult, Executor
from turnframe_store.sql.url import parse_url
from turnframe_test.domains.travel import TripDesk, TripExecutor
from turnframe_test.domains.travel_pg import PostgresTripDesk
from turnframe_test.executor_conformance import (
    EXECUTOR_CHECKS,
    ExecutorFactory,
    ExecutorSubject,
    run_executor_checks,
)
from turnframe_test.postgres import PrivateDatabase

pytestmark = pytest.mark.gate(5, 6)

ACCEPTED = (("trip.set_name", {"name": "Grace Hopper"}), ("trip.set_email", {"email": "g@x.org"}))
#: nothing waits to be confirmed on a fresh trip: the domain refuses it
REFUSED = ("trip.confirm_rebooking", {"leg": "outbound"})


def memory_factory(executor_type: type[TripExecutor] = TripExecutor) -> ExecutorFactory:
    async def factory() -> ExecutorSubject:
        desk = TripDesk()
        desk.open_trip("acct_x", "T-1", "Trip", name="Ada Lovelace", email="ada@example.com")
        executor = executor_type(desk)

        async def revision_of() -> int:
            trip = desk.trip("acct_x", "T-1")
            assert trip is not None
            return trip.revision

        return ExecutorSubject(
            executor=executor,
            account_id="acct_x",
            case=CaseKey(workflow="trip", case_id="T-1"),
            revision=await revision_of(),
            accepted=ACCEPTED,
            refused=REFUSED,
            revision_of=revision_of,
        )

    return factory


async def test_the_memory_executor_passes_every_check() -> None:
    report = await run_executor_checks(memory_factory())
    assert report.passed, report.describe()
    assert len(report.results) == len(EXECUTOR_CHECKS) and report.skipped_names == ()


@pytest.fixture
async def postgres_desk(postgres_url: str) -> AsyncIterator[PostgresTripDesk]:
    async with PrivateDatabase(postgres_url) as db:
        desk = await PostgresTripDesk(parse_url(db.url)[1]).open()
        try:
            yield desk
        finally:
            await desk.aclose()


async def test_the_postgres_executor_passes_every_check(postgres_desk: PostgresTripDesk) -> None:
    desk = postgres_desk

    async def factory() -> ExecutorSubject:
        trip_id = f"T-{uuid.uuid4().hex[:8]}"  # a fresh case per check
        await desk.open_trip("acct_x", trip_id, "Trip", "conv_x", name="Ada Lovelace")

        async def revision_of() -> int:
            async with desk.pool.connection() as connection:
                cursor = await connection.execute(
                    "SELECT revision FROM travel_trip WHERE account_id = %s AND trip_id = %s",
                    ("acct_x", trip_id),
                )
                row = await cursor.fetchone()
            assert row is not None
            return int(row[0])

        return ExecutorSubject(
            executor=desk,
            account_id="acct_x",
            case=CaseKey(workflow="trip", case_id=trip_id),
            revision=await revision_of(),
            accepted=ACCEPTED,
            refused=REFUSED,
            revision_of=revision_of,
        )

    report = await run_executor_checks(factory)
    assert report.passed, report.describe()
    assert len(report.results) == len(EXECUTOR_CHECKS) and report.skipped_names == ()


# --- broken executors: each breaks one promise --------------------------------------------------


class MisreportsItsRevision(TripExecutor):
    async def execute(self, batch: CommandBatch) -> ExecutionResult:
        result = await super().execute(batch)
        return result.model_copy(update={"new_revision": result.new_revision + 1})


class AppliesARepeatAgain(TripExecutor):
    async def execute(self, batch: CommandBatch) -> ExecutionResult:
        repeats = [
            e.idempotency_key
            for e in batch.envelopes
            if self.results.get(e.idempotency_key, (None,))[0]
            == (e.case_ref, e.command_type, e.payload)
        ]
        if repeats and len(repeats) == len(batch.envelopes):  # forgets it ever ran them
            for key in repeats:
                del self.results[key]
        return await super().execute(batch)


class IgnoresTheExpectedRevision(TripExecutor):
    async def execute(self, batch: CommandBatch) -> ExecutionResult:
        first = batch.envelopes[0]
        trip = self.desk.trip(first.account_id, first.case_ref.case_id)
        assert trip is not None
        if first.idempotency_key in self.results:  # a repeat is still answered as one
            return await super().execute(batch)
        now = first.case_ref.model_copy(update={"expected_revision": trip.revision})
        envelopes = tuple(e.model_copy(update={"case_ref": now}) for e in batch.envelopes)
        return await super().execute(batch.model_copy(update={"envelopes": envelopes}))


class ARefusalStillTouchesTheCase(TripExecutor):
    async def execute(self, batch: CommandBatch) -> ExecutionResult:
        try:
            return await super().execute(batch)
        except ExecutionRejected:
            if len(batch.envelopes) == 1:
                first = batch.envelopes[0]
                self.desk.touch(first.account_id, first.case_ref.case_id, note="attempted")
            raise


class AppliesCommandByCommand(TripExecutor):
    async def execute(self, batch: CommandBatch) -> ExecutionResult:
        result: ExecutionResult | None = None
        for envelope in batch.envelopes:
            one = batch.model_copy(update={"envelopes": (envelope,)})
            result = await super().execute(one)
        assert result is not None
        return result


class ReplaysAKeyWhateverItCarries(TripExecutor):
    async def execute(self, batch: CommandBatch) -> ExecutionResult:
        known = [self.results.get(e.idempotency_key) for e in batch.envelopes]
        if all(known):
            events = tuple(ev for entry in known if entry for ev in entry[1].events)
            first = known[0]
            assert first is not None
            return ExecutionResult(new_revision=first[1].new_revision, events=events, replayed=True)
        return await super().execute(batch)


class ForgetsOutcomes(TripExecutor):
    async def outcome(self, idempotency_key: str) -> ExecutionResult | None:
        return None


CONTROLS: dict[str, type[TripExecutor]] = {
    "check_a_batch_reports_the_revision_it_reached_and_only_its_own_events": MisreportsItsRevision,
    "check_a_repeated_key_returns_the_original_result_and_applies_nothing": AppliesARepeatAgain,
    "check_a_stale_expected_revision_is_a_conflict_and_applies_nothing": (
        IgnoresTheExpectedRevision
    ),
    "check_a_refused_command_applies_nothing": ARefusalStillTouchesTheCase,
    "check_a_batch_applies_all_of_its_commands_or_none": AppliesCommandByCommand,
    "check_a_key_reused_for_another_command_is_refused": ReplaysAKeyWhateverItCarries,
    "check_outcome_tells_what_became_of_a_command": ForgetsOutcomes,
}


def test_every_check_has_a_control_that_fails_it() -> None:
    assert set(CONTROLS) == set(EXECUTOR_CHECKS)


@pytest.mark.parametrize("check", sorted(CONTROLS))
async def test_an_executor_that_breaks_one_promise_fails_exactly_the_check_for_it(
    check: str,
) -> None:
    report = await run_executor_checks(memory_factory(CONTROLS[check]))
    assert report.failed_names == (check,), report.describe()


async def test_a_factory_that_fails_is_a_failed_check_not_an_error() -> None:
    async def broken() -> Any:
        raise RuntimeError("no database")

    report = await run_executor_checks(broken, names=["check_a_refused_command_applies_nothing"])
    assert not report.passed
    assert "the executor factory failed: RuntimeError" in report.results[0].detail


class _NoOutcome(TripExecutor):
    """An executor that offers no outcome(): recovery can then never settle an unknown one."""

    def __getattribute__(self, name: str) -> Any:
        if name == "outcome":
            raise AttributeError(name)
        return super().__getattribute__(name)


async def test_an_executor_without_outcome_has_that_check_skipped_not_passed() -> None:
    report = await run_executor_checks(
        memory_factory(_NoOutcome), names=["check_outcome_tells_what_became_of_a_command"]
    )
    (result,) = report.results
    assert result.skipped and "offers no outcome()" in result.detail
    assert "SKIP check_outcome_tells_what_became_of_a_command" in report.describe()
    assert report.skipped_names == ("check_outcome_tells_what_became_of_a_command",)
    assert "0/1 executor conformance checks passed, 1 skipped" in report.describe()


class _DefaultOutcome(Executor):
    """A subclass of the base that keeps its default `outcome()`: it tells nothing."""

    def __init__(self, desk: TripDesk) -> None:
        self.inner = TripExecutor(desk)

    async def execute(self, batch: CommandBatch) -> ExecutionResult:
        return await self.inner.execute(batch)


async def test_an_executor_keeping_the_default_outcome_has_that_check_skipped_not_passed() -> None:
    report = await run_executor_checks(
        memory_factory(_DefaultOutcome),  # type: ignore[arg-type]
        names=[
            "check_outcome_tells_what_became_of_a_command",
            "check_a_refused_command_applies_nothing",
        ],
    )
    assert report.skipped_names == ("check_outcome_tells_what_became_of_a_command",)
    assert [r.passed for r in report.results if not r.skipped] == [True], report.describe()
