"""The timers role: events stored with their conversation to fire at a time, claimed by workers
with a lease. Its contract, the status machine its timers move along, and the judges its stores
apply.

A timer is scheduled pending; a worker's sweep (`claim_due`, across accounts) leases due timers
to it (claimed, at `now`); the worker marks the timer fired once its event ran. A worker that dies
holding a claim loses it when the lease runs out: the next sweep claims the timer again, so the
event must be safe to run twice (the runtime derives its turn and command ids from the timer).
Cancelling stops a timer that has not fired; a fired timer stays fired.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Final

from turnframe_store.errors import Conflict, InvalidRecord
from turnframe_store.records import TimerRecord, TimerStatus
from turnframe_store.roles import rules
from turnframe_store.roles.rules import MAX_MILLIS, Role, Verdict


@dataclass(frozen=True)
class TimerMove:
    """One move of the timers' status machine: the statuses it leaves, the one it reaches."""

    sources: frozenset[TimerStatus]
    target: TimerStatus


#: A pending timer that is due, or a claimed one whose lease ran out (`claimable`).
TIMER_CLAIM: Final = TimerMove(
    frozenset({TimerStatus.PENDING, TimerStatus.CLAIMED}), TimerStatus.CLAIMED
)

#: Only the claim's own worker fires it (`fire_timer`).
TIMER_FIRE: Final = TimerMove(frozenset({TimerStatus.CLAIMED}), TimerStatus.FIRED)

#: A timer that has not fired can be cancelled (`cancel_timer`).
TIMER_CANCEL: Final = TimerMove(
    frozenset({TimerStatus.PENDING, TimerStatus.CLAIMED}), TimerStatus.CANCELLED
)

#: The timers a sweep may claim, and the ones it may find due: pending or claimed.
OPEN_TIMERS: Final = TIMER_CLAIM.sources


def schedulable(record: TimerRecord) -> None:
    """A timer is scheduled pending, with no claim; its ids and event follow `rules.text`."""
    rules.text(record.account_id, record.conversation_id, record.timer_id, record.event)
    if record.status is not TimerStatus.PENDING:
        raise InvalidRecord("a timer is scheduled pending")


def schedule_timer(stored: TimerRecord | None, record: TimerRecord) -> Verdict:
    """A new id is stored; the same timer again (`same_schedule`) is an accepted repeat that
    returns the stored timer as it is now; another timer under a stored id is `Conflict`."""
    if stored is None:
        return Verdict.MOVE
    if stored.same_schedule(record):
        return Verdict.REPEAT
    raise Conflict("the timer id is scheduled with another event")


def lease(value: object) -> int:
    """A lease: whole milliseconds from 1 to `MAX_MILLIS` (a claim of no length would be handed
    to the next claimer at once)."""
    return rules.bounded(value, 1, MAX_MILLIS, "a lease")


def claimable(row: TimerRecord, now: int, lease_ms: int) -> bool:
    """Pending and due at `now`, or claimed with its lease run out (claimed at or before
    `now - lease_ms`)."""
    if row.status is TimerStatus.PENDING:
        return row.due_at <= now
    return (
        row.status is TimerStatus.CLAIMED
        and row.claimed_at is not None
        and row.claimed_at <= now - lease_ms
    )


def by_due_time(row: TimerRecord) -> tuple[int, str, str]:
    """The order of a sweep's claim: (due_at, account_id, timer_id)."""
    return (row.due_at, row.account_id, row.timer_id)


def by_conversation_order(row: TimerRecord) -> tuple[int, str]:
    """The order of a conversation's timers: (due_at, timer_id)."""
    return (row.due_at, row.timer_id)


def cancel_timer(row: TimerRecord) -> Verdict:
    """pending | claimed -> cancelled; a cancelled or fired timer is returned as it is."""
    if row.status in TIMER_CANCEL.sources:
        return Verdict.MOVE
    return Verdict.REPEAT


def fire_timer(row: TimerRecord, worker_id: str) -> Verdict:
    """claimed by `worker_id` -> fired; fired by `worker_id` again is a repeat; anything else
    (pending, cancelled, another worker's claim or firing) is `Conflict`."""
    if row.worker_id != worker_id:
        raise Conflict("the timer is not claimed by that worker")
    if row.status is TIMER_FIRE.target:
        return Verdict.REPEAT
    if row.status not in TIMER_FIRE.sources:
        raise Conflict(f"a {row.status.value} timer does not fire")
    return Verdict.MOVE


class TimerReader(Role, ABC):
    """The reading half of the timers role."""

    async def get(self, account_id: str, timer_id: str) -> TimerRecord:
        """The timer, or `NotFound` (another account's timer alike)."""
        rules.text(account_id, timer_id)
        return await self._get(account_id, timer_id)

    async def for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[TimerRecord, ...]:
        """The conversation's timers in every status, sorted by (due_at, timer_id)."""
        rules.text(account_id, conversation_id)
        return await self._for_conversation(account_id, conversation_id)

    @abstractmethod
    async def _get(self, account_id: str, timer_id: str) -> TimerRecord: ...

    @abstractmethod
    async def _for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[TimerRecord, ...]: ...


class TimerWriter(Role, ABC):
    """The writing half of the timers role."""

    async def schedule(self, record: TimerRecord) -> TimerRecord:
        """Store a pending timer (any other status is `InvalidRecord`) and return it. Its
        conversation must exist (`NotFound`). A stored timer id with the same conversation,
        due_at and event is accepted and returned as stored (its created_at and lifecycle
        unchanged); with anything else it is `Conflict`."""
        schedulable(record)
        return await self._schedule(record)

    async def cancel(self, account_id: str, timer_id: str) -> TimerRecord:
        """pending | claimed -> cancelled, returned; a cancelled or fired timer is returned as it
        is (a fired timer stays fired). `NotFound` for a missing or another account's timer."""
        rules.text(account_id, timer_id)
        return await self._cancel(account_id, timer_id)

    async def claim_due(
        self, now: int, lease_ms: int, limit: int, worker_id: str
    ) -> tuple[TimerRecord, ...]:
        """Operator sweep across accounts: claim timers pending with due_at <= now, or claimed
        with claimed_at <= now - lease_ms (their worker's lease ran out), sorted by (due_at,
        account_id, timer_id), at most `limit`: each moves to claimed by `worker_id` at `now`.
        No timer is handed to two concurrent claimers."""
        moment, lease_length, most = rules.instant(now), lease(lease_ms), rules.limit(limit)
        rules.worker(worker_id)
        return await self._claim_due(moment, lease_length, most, worker_id)

    async def mark_fired(self, account_id: str, timer_id: str, worker_id: str) -> TimerRecord:
        """claimed by `worker_id` -> fired (fired_at from the store clock); the same worker
        marking it again is accepted. Pending, cancelled, or another worker's claim (its lease
        ran out and the timer was claimed again) is `Conflict`."""
        rules.text(account_id, timer_id)
        rules.worker(worker_id)
        return await self._mark_fired(account_id, timer_id, worker_id)

    @abstractmethod
    async def _schedule(self, record: TimerRecord) -> TimerRecord:
        """`NotFound` without the conversation; then judge with `schedule_timer`."""

    @abstractmethod
    async def _cancel(self, account_id: str, timer_id: str) -> TimerRecord: ...

    @abstractmethod
    async def _claim_due(
        self, now: int, lease_ms: int, limit: int, worker_id: str
    ) -> tuple[TimerRecord, ...]: ...

    @abstractmethod
    async def _mark_fired(self, account_id: str, timer_id: str, worker_id: str) -> TimerRecord: ...


class TimerStore(TimerReader, TimerWriter):
    """The whole timers role: what a store implements (the hooks above)."""
