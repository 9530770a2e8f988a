"""The outbox role (a system queue addressed by `outbox_id`): its contract, the status machine
its rows move along, and the judges its stores apply.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Final

from turnframe_store.errors import Conflict, InvalidRecord
from turnframe_store.faults import FaultPoint
from turnframe_store.records import (
    OutboxEntry,
    OutboxStatus,
)
from turnframe_store.roles import rules
from turnframe_store.roles.rules import Role, Verdict

OPEN_OUTBOX: Final = frozenset(status for status in OutboxStatus if not status.is_terminal)


@dataclass(frozen=True)
class OutboxMove:
    """One move of the outbox's status machine: the statuses it leaves, the one it reaches."""

    sources: frozenset[OutboxStatus]
    target: OutboxStatus


OUTBOX_CLAIM: Final = OutboxMove(frozenset({OutboxStatus.PENDING}), OutboxStatus.DISPATCHING)


OUTBOX_COMPLETE: Final = OutboxMove(
    frozenset({OutboxStatus.DISPATCHING, OutboxStatus.OUTCOME_UNKNOWN}), OutboxStatus.COMPLETED
)


OUTBOX_RETRY: Final = OutboxMove(OPEN_OUTBOX, OutboxStatus.PENDING)


OUTBOX_FAIL: Final = OutboxMove(OPEN_OUTBOX, OutboxStatus.FAILED)


#: Also fills in the remote reference of an unknown outcome that has none (`report_unknown`).
OUTBOX_REPORT_UNKNOWN: Final = OutboxMove(
    frozenset({OutboxStatus.DISPATCHING}), OutboxStatus.OUTCOME_UNKNOWN
)


OUTBOX_RESCHEDULE: Final = OutboxMove(
    frozenset({OutboxStatus.PENDING, OutboxStatus.OUTCOME_UNKNOWN}), OutboxStatus.PENDING
)


OUTBOX_RELEASE: Final = OutboxMove(frozenset({OutboxStatus.DISPATCHING}), OutboxStatus.PENDING)


#: A claim handed back unused (its message never reached the broker): not an attempt.
OUTBOX_UNCLAIM: Final = OutboxMove(frozenset({OutboxStatus.DISPATCHING}), OutboxStatus.PENDING)


#: Unknown outcomes due for reconciliation are leased (still unknown) until `until`.
OUTBOX_RECONCILE: Final = OutboxMove(
    frozenset({OutboxStatus.OUTCOME_UNKNOWN}), OutboxStatus.OUTCOME_UNKNOWN
)


def outbox_move(row: OutboxEntry, move: OutboxMove, refusal: str) -> Verdict:
    if row.status not in move.sources:
        raise Conflict(f"a {row.status.value} row {refusal}")
    return Verdict.MOVE


def enqueueable(entry: OutboxEntry) -> None:
    if entry.status is not OutboxStatus.PENDING:
        raise InvalidRecord("an outbox row is enqueued pending")


def by_enqueueing(row: OutboxEntry) -> tuple[int, str]:
    """The order of a command's rows and of a claim."""
    return (row.created_at, row.outbox_id)


def due(row: OutboxEntry, now: int) -> bool:
    return row.status in OUTBOX_CLAIM.sources and (
        row.next_attempt_at is None or row.next_attempt_at <= now
    )


def begin_dispatch_row(row: OutboxEntry, attempt: int) -> Verdict:
    """Only the claim's own attempt begins, and only once."""
    if row.status is not OutboxStatus.DISPATCHING or row.attempt_count != attempt:
        raise Conflict("the row is not dispatching that attempt")
    if row.dispatch_started_at is not None:
        raise Conflict("that attempt began already")
    return Verdict.MOVE


def same_attempt(row: OutboxEntry, attempt: int | None) -> None:
    """An answer settles only the attempt that got it (a reaped claim's worker is too late)."""
    if attempt is None:
        return
    if row.attempt_count != attempt or row.status not in (
        OutboxStatus.DISPATCHING,
        OutboxStatus.OUTCOME_UNKNOWN,
    ):
        raise Conflict("the row moved on from that attempt")


def due_for_reconciliation(row: OutboxEntry, now: int) -> bool:
    return row.status in OUTBOX_RECONCILE.sources and (
        row.next_attempt_at is None or row.next_attempt_at <= now
    )


def unclaim_row(row: OutboxEntry, worker_id: str) -> Verdict:
    """Only the claimer hands a claim back, and only while it holds it."""
    outbox_move(row, OUTBOX_UNCLAIM, "holds no claim")
    if row.claim_worker_id != worker_id:
        raise Conflict("the row is claimed by another worker")
    return Verdict.MOVE


def claim_expired(row: OutboxEntry, claimed_before: int) -> bool:
    """The reaper releases claims taken strictly before its limit."""
    return row.status in OUTBOX_RELEASE.sources and (row.claim_taken_at or 0) < claimed_before


def complete_row(row: OutboxEntry, attempt: int | None = None) -> Verdict:
    if row.status is OUTBOX_COMPLETE.target:
        return Verdict.REPEAT
    same_attempt(row, attempt)
    return outbox_move(row, OUTBOX_COMPLETE, "does not complete")


def fail_row(
    row: OutboxEntry, reason: str, retry_at: int | None, attempt: int | None = None
) -> Verdict:
    """Back to pending due at `retry_at`, or (without it) failed; the same failure again is a
    repeat."""
    if retry_at is None and row.status is OUTBOX_FAIL.target and row.last_failure == reason:
        return Verdict.REPEAT
    same_attempt(row, attempt)
    if retry_at is not None:
        return outbox_move(row, OUTBOX_RETRY, "does not fail")
    return outbox_move(row, OUTBOX_FAIL, "does not fail")


def report_unknown(row: OutboxEntry, remote_ref: str | None, attempt: int | None = None) -> Verdict:
    """dispatching -> outcome_unknown, for the attempt given (`same_attempt`). A repeat is
    accepted and fills in a missing remote reference (a MOVE); a different remote reference is
    `Conflict`."""
    same_attempt(row, attempt)
    if row.status is OUTBOX_REPORT_UNKNOWN.target:
        if remote_ref is None or remote_ref == row.remote_ref:
            return Verdict.REPEAT
        if row.remote_ref is not None:
            raise Conflict("the row names another remote reference")
        return Verdict.MOVE
    return outbox_move(row, OUTBOX_REPORT_UNKNOWN, "was not being dispatched")


def reschedule_row(row: OutboxEntry) -> Verdict:
    return outbox_move(row, OUTBOX_RESCHEDULE, "is not rescheduled")


class OutboxReader(Role, ABC):
    """The reading half of the outbox role."""

    async def get(self, outbox_id: str) -> OutboxEntry:
        """The row, or `NotFound`."""
        rules.text(outbox_id)
        return await self._get(outbox_id)

    async def list_for_command(self, command_id: str) -> tuple[OutboxEntry, ...]:
        """The command's rows, sorted by (created_at, outbox_id)."""
        rules.text(command_id)
        return await self._list_for_command(command_id)

    async def pending_count(self) -> int:
        """How many rows are not completed or failed (pending, dispatching or unknown): the
        outbox's backlog, for lag alerts and for tests that wait for it to drain."""
        return await self._pending_count()

    async def claimed_count(self, worker_id: str) -> int:
        """How many rows are dispatching under `worker_id`'s claim: the claims a relay holds in
        flight (published, not yet settled, handed back or reaped), which bounds how many more
        it claims."""
        rules.worker(worker_id)
        return await self._claimed_count(worker_id)

    @abstractmethod
    async def _get(self, outbox_id: str) -> OutboxEntry: ...

    @abstractmethod
    async def _list_for_command(self, command_id: str) -> tuple[OutboxEntry, ...]: ...

    @abstractmethod
    async def _pending_count(self) -> int: ...

    @abstractmethod
    async def _claimed_count(self, worker_id: str) -> int: ...


class OutboxWriter(Role, ABC):
    """The writing half of the outbox role."""

    async def enqueue(self, entry: OutboxEntry) -> OutboxEntry:
        """Add a pending row (any other status is `InvalidRecord`). A stored outbox id or a stored
        (destination, idempotency_key) is `Conflict`."""
        rules.record_keys(entry)
        enqueueable(entry)
        return await self._enqueue(entry)

    async def claim_due(self, now: int, limit: int, worker_id: str) -> tuple[OutboxEntry, ...]:
        """Claim pending rows due at `now` (next_attempt_at absent or <= now), sorted by
        (created_at, outbox_id), at most `limit`: each moves to dispatching with attempt_count + 1
        and the claim (worker_id, now). No row is ever handed to two claimers."""
        moment, most = rules.instant(now), rules.limit(limit)
        rules.worker(worker_id)
        self._faults.reach(FaultPoint.BEFORE_OUTBOX_DISPATCH)
        return await self._claim_due(moment, most, worker_id)

    async def begin_dispatch(self, outbox_id: str, attempt: int, now: int) -> OutboxEntry:
        """An actor begins the claim's attempt `attempt` (dispatch_started_at = now; the claim's
        lease runs again from now, so a claim that waited in the broker is not reaped while its
        attempt runs). A row not
        dispatching that attempt, or whose attempt began already (a redelivered message: the
        attempt may have reached the destination), is `Conflict`."""
        rules.text(outbox_id)
        return await self._begin_dispatch(outbox_id, rules.whole(attempt), rules.instant(now))

    async def mark_completed(self, outbox_id: str, attempt: int | None = None) -> OutboxEntry:
        """dispatching | outcome_unknown -> completed, claim cleared; a repeat is accepted. With
        `attempt`, only while the row is still at that attempt (else `Conflict`)."""
        rules.text(outbox_id)
        at = None if attempt is None else rules.whole(attempt)
        self._faults.reach(FaultPoint.AFTER_OUTBOX_DISPATCH)
        return await self._mark_completed(outbox_id, at)

    async def mark_failed(
        self,
        outbox_id: str,
        reason: str,
        retry_at: int | None = None,
        attempt: int | None = None,
    ) -> OutboxEntry:
        """From pending, dispatching or outcome_unknown: back to pending due at `retry_at`, or
        (without it) failed. The same failure again is accepted. With `attempt`, only while the
        row is dispatching or unknown at that attempt (else `Conflict`)."""
        rules.text(outbox_id)
        rules.reason(reason)
        retry = None if retry_at is None else rules.instant(retry_at)
        at = None if attempt is None else rules.whole(attempt)
        self._faults.reach(FaultPoint.AFTER_OUTBOX_DISPATCH)
        return await self._mark_failed(outbox_id, reason, retry, at)

    async def mark_outcome_unknown(
        self,
        outbox_id: str,
        remote_ref: str | None = None,
        check_at: int | None = None,
        attempt: int | None = None,
    ) -> OutboxEntry:
        """dispatching -> outcome_unknown, claim released, due for reconciliation at `check_at`
        (absent: at once). A repeat is accepted and fills in a missing remote_ref; a different
        remote_ref is `Conflict`. With `attempt`, only while the row is at that attempt (as
        `mark_completed`)."""
        rules.text(outbox_id, remote_ref)
        check = None if check_at is None else rules.instant(check_at)
        at = None if attempt is None else rules.whole(attempt)
        self._faults.reach(FaultPoint.AFTER_OUTBOX_DISPATCH)
        return await self._mark_outcome_unknown(outbox_id, remote_ref, check, at)

    async def unclaim(self, outbox_id: str, worker_id: str) -> OutboxEntry:
        """dispatching -> pending, due now, the attempt not counted: the claimer hands back a
        claim whose message never left (the broker refused it). Another worker's claim, or a
        row not dispatching, is `Conflict`."""
        rules.text(outbox_id)
        rules.worker(worker_id)
        return await self._unclaim(outbox_id, worker_id)

    async def claim_reconciliations(
        self, now: int, limit: int, until: int
    ) -> tuple[OutboxEntry, ...]:
        """Unknown outcomes due for reconciliation at `now` (next_attempt_at absent or <= now),
        sorted by (created_at, outbox_id), at most `limit`: each stays outcome_unknown and is
        not due again before `until` (a lease: a reconciler that dies is retried then)."""
        moment, most, lease = rules.instant(now), rules.limit(limit), rules.instant(until)
        return await self._claim_reconciliations(moment, most, lease)

    async def reschedule(self, outbox_id: str, at: int) -> OutboxEntry:
        """pending | outcome_unknown -> pending, due at `at`."""
        rules.text(outbox_id)
        return await self._reschedule(outbox_id, rules.instant(at))

    async def release_expired_claims(self, claimed_before: int) -> int:
        """Reaper: move dispatching rows whose claim's lease started before `claimed_before` (at
        the claim, or again when its attempt began) back to pending, due now;
        a row whose attempt had begun records `CLAIM_EXPIRED` as its last failure (its outcome
        was never recorded). Return how many moved."""
        return await self._release_expired_claims(rules.instant(claimed_before))

    @abstractmethod
    async def _enqueue(self, entry: OutboxEntry) -> OutboxEntry: ...

    @abstractmethod
    async def _claim_due(self, now: int, limit: int, worker_id: str) -> tuple[OutboxEntry, ...]: ...

    @abstractmethod
    async def _begin_dispatch(self, outbox_id: str, attempt: int, now: int) -> OutboxEntry: ...

    @abstractmethod
    async def _mark_completed(self, outbox_id: str, attempt: int | None) -> OutboxEntry: ...

    @abstractmethod
    async def _mark_failed(
        self, outbox_id: str, reason: str, retry_at: int | None, attempt: int | None
    ) -> OutboxEntry: ...

    @abstractmethod
    async def _mark_outcome_unknown(
        self, outbox_id: str, remote_ref: str | None, check_at: int | None, attempt: int | None
    ) -> OutboxEntry: ...

    @abstractmethod
    async def _unclaim(self, outbox_id: str, worker_id: str) -> OutboxEntry: ...

    @abstractmethod
    async def _claim_reconciliations(
        self, now: int, limit: int, until: int
    ) -> tuple[OutboxEntry, ...]: ...

    @abstractmethod
    async def _reschedule(self, outbox_id: str, at: int) -> OutboxEntry: ...

    @abstractmethod
    async def _release_expired_claims(self, claimed_before: int) -> int: ...


class OutboxStore(OutboxReader, OutboxWriter):
    """The whole outbox role: what a store implements (the hooks above)."""
