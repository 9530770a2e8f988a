"""The executor conformance suite: what every `WorkflowExecutor` must do, checked on yours.

    report = await run_executor_checks(factory)   # factory() -> Awaitable[ExecutorSubject]
    assert report.passed, report.describe()        # a ConformanceReport, as the store suite's

The runtime trusts an executor for four promises (`turnframe_runtime.ports.WorkflowExecutor`):
a repeated idempotency key returns the original result and applies nothing; a stale expected
revision is a `RevisionConflict` and applies nothing; a refusal is an `ExecutionRejected` and
applies nothing; a batch applies all of its commands or none. Recovery trusts `outcome(key)`
when the executor offers it. Each check below breaks one of those promises if the executor does,
on a fresh subject from the factory: a case the executor keeps, two commands it accepts one
after the other, and one it refuses.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from turnframe_core import (
    CaseKey,
    CaseRef,
    CommandBatch,
    CommandEnvelope,
    InternalPolicy,
    PerCase,
    TurnframeError,
)
from turnframe_runtime import ExecutionRejected, ExecutionResult, RevisionConflict
from turnframe_runtime.ports import Executor, WorkflowExecutor
from turnframe_store.conformance import CheckResult, ConformanceReport, NotOffered, run_one

__all__ = [
    "EXECUTOR_CHECKS",
    "ExecutorFactory",
    "ExecutorSubject",
    "run_executor_check",
    "run_executor_checks",
]


@dataclass
class ExecutorSubject:
    """One fresh executor and what the checks may do with it.

    - `case`: a case the executor keeps, now at `revision`.
    - `accepted`: two commands (type, payload) the case accepts in this order, each applied at
      the revision the one before it reached.
    - `refused`: a command the domain refuses at `revision` (`ExecutionRejected`).
    - `revision_of()`: the case's revision as the domain itself keeps it (read from its records,
      not from the executor's answers).
    - `close()`: called after the check, if given.
    """

    executor: WorkflowExecutor
    account_id: str
    case: CaseKey
    revision: int
    accepted: tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]
    refused: tuple[str, dict[str, Any]]
    revision_of: Callable[[], Awaitable[int]]
    close: Callable[[], Awaitable[None]] | None = None
    _turns: int = field(default=0, repr=False)

    def batch(self, *commands: tuple[str, dict[str, Any]], revision: int) -> CommandBatch:
        """The commands as one per-case batch planned at `revision`, on a turn of its own."""
        self._turns += 1
        turn_id = f"turn_conformance_{self._turns}"
        envelopes = tuple(
            CommandEnvelope.build(
                command_id=f"cmd_conformance_{self._turns}_{n}",
                turn_id=turn_id,
                account_id=self.account_id,
                case_ref=CaseRef(
                    workflow=self.case.workflow,
                    case_id=self.case.case_id,
                    expected_revision=revision,
                ),
                origin=InternalPolicy(policy_key="turnframe.executor_conformance"),
                command_type=command_type,
                payload=payload,
            )
            for n, (command_type, payload) in enumerate(commands)
        )
        return CommandBatch(
            batch_id=f"bat_conformance_{self._turns}", scope=PerCase(), envelopes=envelopes
        )


ExecutorFactory = Callable[[], Awaitable[ExecutorSubject]]
ExecutorCheck = Callable[[ExecutorSubject], Awaitable[None]]


async def check_a_batch_reports_the_revision_it_reached_and_only_its_own_events(
    subject: ExecutorSubject,
) -> None:
    batch = subject.batch(subject.accepted[0], revision=subject.revision)
    result = await subject.executor.execute(batch)
    kept = await subject.revision_of()
    assert not result.replayed, "a first execution says it was replayed"
    assert result.new_revision == kept, (
        f"the result says revision {result.new_revision}, the domain keeps {kept}"
    )
    assert kept > subject.revision, "the revision did not move"
    commands = {e.command_id for e in batch.envelopes}
    for event in result.events:
        assert (event.account_id, event.workflow, event.case_id) == (
            subject.account_id,
            subject.case.workflow,
            subject.case.case_id,
        ), f"event {event.event_id} belongs to another case"
        assert event.command_id in commands, f"event {event.event_id} names another command"
        assert subject.revision < event.case_revision <= result.new_revision, (
            f"event {event.event_id} is at revision {event.case_revision}"
        )


async def check_a_repeated_key_returns_the_original_result_and_applies_nothing(
    subject: ExecutorSubject,
) -> None:
    batch = subject.batch(subject.accepted[0], revision=subject.revision)
    first = await subject.executor.execute(batch)
    reached = await subject.revision_of()
    again = await subject.executor.execute(batch)
    assert again.replayed, "a repeated key was not reported as replayed"
    assert [e.event_id for e in again.events] == [e.event_id for e in first.events], (
        "a repeated key returned other events"
    )
    assert again.new_revision == first.new_revision, "a repeated key reached another revision"
    assert await subject.revision_of() == reached, "a repeated key applied the command again"


async def check_a_stale_expected_revision_is_a_conflict_and_applies_nothing(
    subject: ExecutorSubject,
) -> None:
    await subject.executor.execute(subject.batch(subject.accepted[0], revision=subject.revision))
    reached = await subject.revision_of()
    stale = subject.batch(subject.accepted[1], revision=subject.revision)
    try:
        await subject.executor.execute(stale)
    except RevisionConflict as conflict:
        assert conflict.current_revision == reached, (
            f"the conflict names revision {conflict.current_revision}, the case is at {reached}"
        )
    else:
        raise AssertionError("a command planned at an earlier revision was applied")
    assert await subject.revision_of() == reached, "a conflicting command changed the case"


async def check_a_refused_command_applies_nothing(subject: ExecutorSubject) -> None:
    batch = subject.batch(subject.refused, revision=subject.revision)
    try:
        await subject.executor.execute(batch)
    except ExecutionRejected:
        pass
    else:
        raise AssertionError("the command the domain refuses was applied")
    assert await subject.revision_of() == subject.revision, "a refused command changed the case"
    outcome = _outcome_of(subject.executor)
    if outcome is not None:
        key = batch.envelopes[0].idempotency_key
        assert await outcome(key) is None, "outcome() reports a refused command as applied"


async def check_a_batch_applies_all_of_its_commands_or_none(subject: ExecutorSubject) -> None:
    batch = subject.batch(subject.accepted[0], subject.refused, revision=subject.revision)
    try:
        await subject.executor.execute(batch)
    except TurnframeError:
        pass
    else:
        raise AssertionError("a batch holding a refused command was applied")
    assert await subject.revision_of() == subject.revision, "a refused batch changed the case"
    # The accepted command's key was not used up: alone, it applies for the first time.
    alone = CommandBatch(
        batch_id=f"{batch.batch_id}_alone", scope=PerCase(), envelopes=batch.envelopes[:1]
    )
    result = await subject.executor.execute(alone)
    assert not result.replayed, "part of a refused batch had been applied"


async def check_a_key_reused_for_another_command_is_refused(subject: ExecutorSubject) -> None:
    batch = subject.batch(subject.accepted[0], revision=subject.revision)
    await subject.executor.execute(batch)
    reached = await subject.revision_of()
    envelope = batch.envelopes[0]
    # The same key on another command, planned at the revision the case is at now (so only
    # the key can stop it).
    other = envelope.model_copy(
        update={
            "payload": {**envelope.payload, "conformance": "other"},
            "case_ref": envelope.case_ref.model_copy(update={"expected_revision": reached}),
        }
    )
    forged = batch.model_copy(update={"envelopes": (other,)})
    try:
        result = await subject.executor.execute(forged)
    except RevisionConflict:
        raise AssertionError("a reused key was judged by its revision, not refused") from None
    except TurnframeError:
        pass
    else:
        how = "replayed" if result.replayed else "applied"
        raise AssertionError(f"a key reused for another command was {how}")
    assert await subject.revision_of() == reached, "a reused key changed the case"


async def check_outcome_tells_what_became_of_a_command(subject: ExecutorSubject) -> None:
    outcome = _outcome_of(subject.executor)
    if outcome is None:
        raise NotOffered("the executor offers no outcome(): unknown outcomes stay unknown")
    batch = subject.batch(subject.accepted[0], revision=subject.revision)
    key = batch.envelopes[0].idempotency_key
    assert await outcome(key) is None, "outcome() reports a command never sent as applied"
    result = await subject.executor.execute(batch)
    told = await outcome(key)
    assert told is not None, "outcome() does not know a command that took effect"
    assert {e.event_id for e in told.events} <= {e.event_id for e in result.events}, (
        "outcome() reports events the command did not produce"
    )
    assert told.events, "outcome() reports no events for a command that took effect"


def _outcome_of(executor: Any) -> Callable[[str], Awaitable[ExecutionResult | None]] | None:
    if isinstance(executor, Executor) and type(executor).outcome is Executor.outcome:
        return None  # the base's default tells nothing: the check is not offered
    outcome = getattr(executor, "outcome", None)
    return outcome if callable(outcome) else None


#: Every check, in the order the suite runs them.
EXECUTOR_CHECKS: Final[dict[str, ExecutorCheck]] = {
    check.__name__: check
    for check in (
        check_a_batch_reports_the_revision_it_reached_and_only_its_own_events,
        check_a_repeated_key_returns_the_original_result_and_applies_nothing,
        check_a_stale_expected_revision_is_a_conflict_and_applies_nothing,
        check_a_refused_command_applies_nothing,
        check_a_batch_applies_all_of_its_commands_or_none,
        check_a_key_reused_for_another_command_is_refused,
        check_outcome_tells_what_became_of_a_command,
    )
}


async def _close(subject: ExecutorSubject) -> None:
    if subject.close is not None:
        await subject.close()


async def run_executor_check(
    name: str, factory: ExecutorFactory, *, timeout_s: float = 60.0
) -> CheckResult:
    """One check on a fresh subject; every failure is captured, never raised; a check about
    `outcome()` on an executor without it is skipped."""
    return await run_one(
        name, EXECUTOR_CHECKS.get(name), factory, _close, subject="executor", timeout_s=timeout_s
    )


async def run_executor_checks(
    factory: ExecutorFactory, *, names: Sequence[str] | None = None, timeout_s: float = 60.0
) -> ConformanceReport:
    """Every check (or the named ones), each on a fresh subject; never raises."""
    selected = tuple(names) if names is not None else tuple(EXECUTOR_CHECKS)
    results = [await run_executor_check(n, factory, timeout_s=timeout_s) for n in selected]
    return ConformanceReport(tuple(results), subject="executor")
