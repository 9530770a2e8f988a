"""Scheduled server events: an event stored with its conversation (`stores.timers`) and run as a
server event when it is due, by whichever worker claims it.

Rules:
1. Scheduling verifies the event as `server_event` does (origin, signature, the conversation,
   the workflow and the case the account has) and stores it under a timer id derived from
   (account, origin, idempotency key): scheduling it again is the same timer; the key with
   another event or another time is `IdempotencyKeyReused`. Nothing is written on a refusal.
2. A sweep (`fire_due`) claims due timers of every account with a lease
   (`RuntimeConfig.timer_lease_ms`), so two workers never hold one timer at once, and runs each
   as a server event whose origin was verified when it was scheduled. The event's turn id and
   its commands' idempotency keys are derived, so a timer claimed again after its worker died
   meets the turn the first claim began and finishes it as recovery does, once that turn's
   marker is a lease old (a younger one may still run where the lease ran out: the claim waits
   for the next lease): one turn, one effect.
3. A timer is marked fired once its event's turn is stored, or once the event is refused for
   good (the domain refuses it now, its case or conversation is gone, its origin is no longer
   registered): a refusal writes nothing, as it does for `server_event`, and is counted
   (`timer.refused`). A failure that may pass (a store, a busy conversation) leaves the claim,
   and the timer is claimed again after the lease.
4. Cancelling stops a timer that has not fired (a timer claimed at that moment may still run).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from pydantic import ValidationError

from turnframe_core.cases import CaseKey
from turnframe_core.ids import derive_id
from turnframe_core.server_events import ServerEvent
from turnframe_core.turn import InvalidTurnInput
from turnframe_runtime import observe
from turnframe_runtime.cases import CaseBook
from turnframe_runtime.errors import (
    IdempotencyKeyReused,
    OriginNotVerified,
    ServerEventRefused,
    TurnFailed,
)
from turnframe_runtime.server_event import run_server_event, verified_origin
from turnframe_store.errors import Conflict, NotFound
from turnframe_store.records import TimerRecord, TimerStatus

if TYPE_CHECKING:
    from turnframe_runtime.kernel import Kernel

__all__ = ["cancel", "event_timer_id", "fire_due", "schedule"]

_LOG = logging.getLogger(__name__)

#: what ends a timer for good: its event will never become a turn
_FOR_GOOD = (
    OriginNotVerified,
    ServerEventRefused,
    IdempotencyKeyReused,
    TurnFailed,
    InvalidTurnInput,
    NotFound,
)


def event_timer_id(account_id: str, origin: str, idempotency_key: str) -> str:
    """The id of the timer that holds an event: one per (account, origin, key)."""
    return derive_id(
        "tmr",
        "turnframe.server_event_timer.v1",
        {"account_id": account_id, "origin": origin, "idempotency_key": idempotency_key},
    )


async def schedule(kernel: Kernel, event: ServerEvent, at_ms: int, signature: str | None) -> str:
    """Rule 1: the event stored to fire at `at_ms`; its timer id."""
    if isinstance(at_ms, bool) or not isinstance(at_ms, int) or at_ms < 0:
        raise ValueError("at_ms is whole milliseconds since the epoch")
    verified_origin(kernel, event, signature)
    account_id = event.account_id
    await kernel.stores.conversations.get_conversation(account_id, event.conversation_id)
    if event.workflow not in kernel.workflows:
        raise NotFound()
    cases = CaseBook(kernel.directory, kernel.workflows, account_id)
    if await cases.load(CaseKey(workflow=event.workflow, case_id=event.case_id)) is None:
        raise NotFound()
    timer_id = event_timer_id(account_id, event.origin, event.idempotency_key)
    record = TimerRecord(
        account_id=account_id,
        conversation_id=event.conversation_id,
        timer_id=timer_id,
        due_at=at_ms,
        event=event.signing_bytes().decode("utf-8"),
        created_at=kernel.clock(),
    )
    try:
        await kernel.stores.timers.schedule(record)
    except Conflict:
        raise IdempotencyKeyReused(
            "this idempotency key was scheduled before with another event or time"
        ) from None
    return timer_id


async def cancel(kernel: Kernel, account_id: str, timer_id: str) -> bool:
    """Rule 4: True when the timer is cancelled (now or before), False when it had fired;
    `NotFound` for a timer the account does not have."""
    record = await kernel.stores.timers.cancel(account_id, timer_id)
    return record.status is TimerStatus.CANCELLED


async def fire_due(kernel: Kernel, worker_id: str, limit: int) -> int:
    """Rules 2 and 3: claim the due timers (at most `limit`) and run each; how many were
    marked fired."""
    claimed = await kernel.stores.timers.claim_due(
        kernel.clock(), kernel.config.timer_lease_ms, limit, worker_id
    )
    fired = 0
    for timer in claimed:
        if await _fire(kernel, timer, worker_id):
            fired += 1
    return fired


async def _fire(kernel: Kernel, timer: TimerRecord, worker_id: str) -> bool:
    """One claimed timer run; whether it was marked fired."""
    try:
        event = _event_of(timer)
        origin = kernel.origins.get(event.origin)
        if origin is None:
            raise OriginNotVerified("the event's origin is no longer registered")
        await run_server_event(kernel, event, origin.command_origin(event))
    except _FOR_GOOD as refused:
        observe.count("timer.refused", code=refused.code)
        observe.event(_LOG, "timer.refused", logging.WARNING, timer_id=timer.timer_id,
                      code=refused.code)  # fmt: skip
    except Exception as failure:  # it may pass: the claim stays, and its lease brings it back
        observe.failure(_LOG, "timer.failed", failure, logging.WARNING)
        return False
    try:
        await kernel.stores.timers.mark_fired(timer.account_id, timer.timer_id, worker_id)
    except Conflict:  # cancelled meanwhile, or claimed again by another after the lease
        return False
    observe.count("timer.fired")
    return True


def _event_of(timer: TimerRecord) -> ServerEvent:
    """The stored event, which must be the timer's own account's and conversation's."""
    try:
        event = ServerEvent.model_validate_json(timer.event)
    except (ValidationError, InvalidTurnInput):
        raise InvalidTurnInput("the timer's event cannot be read") from None
    if (event.account_id, event.conversation_id) != (timer.account_id, timer.conversation_id):
        raise InvalidTurnInput("the timer's event belongs to another conversation")
    return event
