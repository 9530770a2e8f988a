"""One transaction for a click on a local executor (decision 0029).

When the executor's writes live in the store's own database (a `TransactionalExecutor` on
stores that can share their transaction, `SqlStores`), a click-only turn without a narrator
accepts, claims, journals, executes, commits its bundle and delivers its reply in ONE store
transaction: if it rolls back, nothing happened, so the durable points in between buy nothing.
Anything that raises rolls all of it back (the executor's writes too) and propagates; the turn
was never accepted, so there is nothing to fail or recover, and the same click may be sent
again. A typed refusal (`RevisionConflict`, `ExecutionRejected`, `ExecutionFailed`) undoes only
the executor's own writes (a savepoint) and the turn goes on, as it does today.

Every other turn, executor or store keeps the durable points of `durable`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from turnframe_core import codes
from turnframe_core.cases import CaseKey
from turnframe_core.commands import CommandBatch
from turnframe_core.errors import TurnframeError
from turnframe_core.replay import FailedOutcome
from turnframe_core.turn import AssistantTurn, TurnInput
from turnframe_core.understanding import Understanding
from turnframe_runtime import durable
from turnframe_runtime.accept import accept_turn, prior_reply, raced_reply
from turnframe_runtime.card_answer import admit_card_answer
from turnframe_runtime.durable import Accepted
from turnframe_runtime.ports import (
    CaseCandidate,
    CaseDirectory,
    ExecutionFailed,
    ExecutionRejected,
    ExecutionResult,
    Executor,
    LoadedCase,
    RevisionConflict,
    TransactionalExecutor,
)
from turnframe_runtime.state import TurnState
from turnframe_store.bundle import Stores
from turnframe_store.errors import Conflict

if TYPE_CHECKING:
    from turnframe_runtime.kernel import Kernel

__all__ = ["UntrustedResult", "accept", "in_one_transaction"]


def in_one_transaction(kernel: Kernel, turn_input: TurnInput) -> bool:
    """Whether this turn runs in one transaction: a click-only turn, no narrator, a
    `TransactionalExecutor`, and stores that share their transaction with a caller's driver
    connection (`commit_in`). On other stores (`MemoryStores`) the executor's `execute` runs
    at today's durable points."""
    stores = kernel.stores
    return (
        turn_input.is_click_only
        and kernel.narrator is None
        and isinstance(kernel.executor, TransactionalExecutor)
        and stores.transactional
        and callable(getattr(stores, "commit_in", None))
    )


async def accept(kernel: Kernel, t: TurnState, turn_input: TurnInput) -> AssistantTurn | Accepted:
    """`durable.accept`, or, for a turn `in_one_transaction`, the whole turn in one
    transaction: its delivered reply."""
    if not in_one_transaction(kernel, turn_input):
        return await durable.accept(kernel, t, turn_input)
    try:
        async with t.events.transaction(kernel.stores) as tx:
            if turn_input.turn_id is not None:
                prior = await prior_reply(tx, t.ctx.account_id, turn_input.turn_id, turn_input)
                if prior is not None:
                    return prior
            executor = kernel.executor
            assert isinstance(executor, TransactionalExecutor)
            with t.cases.through(_ReadingIn(kernel.directory, executor, tx)):
                return await _whole_turn(kernel, tx, t, executor)
    except Conflict:
        prior = await raced_reply(kernel.stores, t.ctx.account_id, turn_input)
        if prior is not None:
            return prior
        raise


async def _whole_turn(
    kernel: Kernel, tx: Stores, t: TurnState, executor: TransactionalExecutor
) -> AssistantTurn:
    """A-C, J-L and M's journal (as `durable.accept`), then M-V (as `commit_and_deliver`
    without a narrator), every write in `tx` and every case read through it."""
    answer = await admit_card_answer(tx, t.cases, t.ctx)  # C
    user_turn, t.recorder.record = await accept_turn(tx, t.ctx, t.cases.cases.values())
    planned = durable.plan_turn(t, Accepted(answer).admitted, Understanding())  # J/K
    started = await durable.start_turn(kernel, tx, t, planned, user_turn)  # L, M's journal
    follow_up = durable.follow_up_for(t, started, answer)
    enlisted = _Enlisted(executor, tx)
    ran = await replace(t.execution, executor=enlisted).run(started.commands)  # M
    enlisted.raise_failure(ran.executed)
    answered = durable.card_answered_before(started, answer)
    late = durable.cards_answered_late(started, answer)
    refreshed, unrefreshed = await follow_up.refresh(late)  # O
    committed = await t.execution.commit(tx, started.claimed, ran.executed, record=False)  # N
    result = await durable.raise_turn_cards(
        tx,
        t,
        started,
        answer,
        answered,
        follow_up,
        refreshed,
        committed,
        said=(started.noticed, ran.noticed, unrefreshed, committed.noticed),
    )  # P
    assistant = await durable.composer_for(kernel, t, narrate=False).compose(result)  # Q-T
    await t.recorder.deliver(tx, assistant, settled=True)  # U/V
    return assistant


class _Enlisted(Executor):
    """The executor's `execute_in` on the open transaction's connection, behind a savepoint:
    a typed refusal undoes its writes and is the batch's outcome; anything else is kept
    (`failure`) to roll the whole turn back."""

    def __init__(self, executor: TransactionalExecutor, tx: Stores) -> None:
        self.executor = executor
        self.tx = tx
        self.failure: BaseException | None = None

    async def execute(self, batch: CommandBatch) -> ExecutionResult:
        try:
            async with self.tx.savepoint():
                return await self.executor.execute_in(await _connection(self.tx), batch)
        except (RevisionConflict, ExecutionRejected, ExecutionFailed):
            raise
        except BaseException as failure:
            self.failure = failure
            raise

    def raise_failure(self, executed: Sequence[Any]) -> None:
        """Roll the turn back: the executor raised past its typed refusals, or returned a
        result the turn cannot trust (its writes would commit with a failed outcome)."""
        if self.failure is not None:
            raise self.failure
        for done in executed:
            outcome = done.outcome
            if isinstance(outcome, FailedOutcome) and outcome.code in _UNTRUSTED:
                raise UntrustedResult("the executor's result did not match its batch")


_UNTRUSTED = frozenset({codes.EXECUTION_UNTRUSTED_RESULT})


class UntrustedResult(TurnframeError):
    """A local executor's result did not match its batch: the whole turn rolled back."""

    code = codes.EXECUTION_UNTRUSTED_RESULT


class _ReadingIn:
    """The directory, its `load` read through the open transaction (`load_in`)."""

    def __init__(
        self, directory: CaseDirectory, executor: TransactionalExecutor, tx: Stores
    ) -> None:
        self.directory = directory
        self.executor = executor
        self.tx = tx

    async def candidates(self, account_id: str, conversation_id: str) -> Sequence[CaseCandidate]:
        return await self.directory.candidates(account_id, conversation_id)

    async def authorize(self, account_id: str, case: CaseKey) -> bool:
        return await self.directory.authorize(account_id, case)

    async def load(self, account_id: str, case: CaseKey) -> LoadedCase:
        return await self.executor.load_in(await _connection(self.tx), account_id, case)

    async def find(self, account_id: str, workflow: str, name: str) -> Sequence[CaseCandidate]:
        return await self.directory.find(account_id, workflow, name)


async def _connection(tx: Stores) -> Any:
    return await tx.driver_connection()
