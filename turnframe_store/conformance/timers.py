"""Conformance checks: timers: scheduling once, account scoping, claims and their leases,
firing and cancelling. That a timer is part of a transaction like every role is checked with the
transactions (`transactions`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from turnframe_store import MAX_LIMIT, MAX_MILLIS
from turnframe_store import builders as build
from turnframe_store.builders import ACCOUNT_A, ACCOUNT_B, T0
from turnframe_store.bundle import Stores
from turnframe_store.conformance.data import ids
from turnframe_store.conformance.expect import equal, refused
from turnframe_store.conformance.runner import check
from turnframe_store.errors import Conflict, InvalidRecord, NotFound
from turnframe_store.records import TimerRecord, TimerStatus

#: How long a claim holds in these checks.
LEASE = 1_000


async def _conversation(
    stores: Stores, account: str = ACCOUNT_A, conversation: str = "conv_1"
) -> None:
    await stores.conversations.ensure_conversation(account, conversation)


def _lifecycle(row: TimerRecord) -> tuple[object, ...]:
    return (row.status, row.worker_id, row.claimed_at, row.fired_at is not None)


@check
async def check_a_timer_is_scheduled_once_and_another_under_its_id_is_a_conflict(
    stores: Stores,
) -> None:
    timers = stores.timers
    first = build.timer("tmr_1", due_at=T0 + 100)
    await refused(NotFound, timers.schedule(first), "a timer of a conversation that is missing")
    await refused(NotFound, timers.get(ACCOUNT_A, "tmr_1"), "the refused timer")
    await _conversation(stores)
    equal(await timers.schedule(first), first, "the scheduled timer")
    equal(await timers.get(ACCOUNT_A, "tmr_1"), first, "the stored timer")
    later = first.model_copy(update={"created_at": T0 + 50})
    equal(await timers.schedule(later), first, "the same timer scheduled again, later")
    for what, changes in (
        ("another due time", {"due_at": T0 + 200}),
        ("another event", {"event": '{"timer":"other"}'}),
    ):
        await refused(Conflict, timers.schedule(first.model_copy(update=changes)), what)
    await _conversation(stores, conversation="conv_2")
    await refused(
        Conflict,
        timers.schedule(build.timer("tmr_1", conversation="conv_2", due_at=T0 + 100)),
        "the same id in another conversation",
    )
    equal(await timers.get(ACCOUNT_A, "tmr_1"), first, "the stored timer after the refusals")
    (claimed,) = await timers.claim_due(T0 + 100, LEASE, 10, "worker-1")
    equal(
        await timers.schedule(first),
        claimed,
        "the same timer scheduled again once claimed (returned as stored)",
    )
    claimed_row = TimerRecord.model_validate(
        {
            **build.timer("tmr_2").model_dump(),
            "status": TimerStatus.CLAIMED,
            "worker_id": "worker-1",
            "claimed_at": T0,
        }
    )
    await refused(InvalidRecord, timers.schedule(claimed_row), "a timer that is not pending")
    await refused(NotFound, timers.get(ACCOUNT_A, "tmr_2"), "the refused timer")


@check
async def check_a_conversations_timers_are_listed_by_due_time(stores: Stores) -> None:
    await _conversation(stores)
    await _conversation(stores, conversation="conv_2")
    for name, due in (("c", T0 + 5), ("a", T0 + 9), ("b", T0 + 5), ("d", T0 + 1)):
        await stores.timers.schedule(build.timer(f"tmr_{name}", due_at=due))
    await stores.timers.schedule(build.timer("tmr_elsewhere", conversation="conv_2"))
    await stores.timers.cancel(ACCOUNT_A, "tmr_c")
    equal(
        ids(await stores.timers.for_conversation(ACCOUNT_A, "conv_1"), "timer_id"),
        ["tmr_d", "tmr_b", "tmr_c", "tmr_a"],
        "a conversation's timers by (due_at, timer_id), in every status",
    )
    equal(
        await stores.timers.for_conversation(ACCOUNT_A, "conv_missing"),
        (),
        "the timers of a conversation that is missing",
    )


@check
async def check_another_accounts_timers_are_not_found_exactly_like_missing_ones(
    stores: Stores,
) -> None:
    timers = stores.timers
    await _conversation(stores)
    mine = await timers.schedule(build.timer("tmr_1"))
    calls: dict[str, Callable[[str, str], Awaitable[object]]] = {
        "get": lambda account, timer_id: timers.get(account, timer_id),
        "cancel": lambda account, timer_id: timers.cancel(account, timer_id),
        "mark_fired": lambda account, timer_id: timers.mark_fired(account, timer_id, "worker-1"),
    }
    for what, call in calls.items():
        foreign = await refused(
            NotFound, call(ACCOUNT_B, "tmr_1"), f"{what} of another account's timer"
        )
        missing = await refused(NotFound, call(ACCOUNT_A, "tmr_missing"), f"{what} of none")
        equal(
            (foreign.code, foreign.message),
            (missing.code, missing.message),
            f"{what}: another account's timer and a missing one",
        )
    equal(await timers.for_conversation(ACCOUNT_B, "conv_1"), (), "another account's list")
    equal(await timers.get(ACCOUNT_A, "tmr_1"), mine, "the timer, untouched")
    await _conversation(stores, ACCOUNT_B)
    theirs = await timers.schedule(build.timer("tmr_1", account=ACCOUNT_B, due_at=T0 + 5))
    equal(await timers.get(ACCOUNT_B, "tmr_1"), theirs, "the same id in another account")
    equal(await timers.get(ACCOUNT_A, "tmr_1"), mine, "this account's timer beside it")
    swept = await timers.claim_due(T0 + 5, LEASE, 10, "worker-1")
    equal(
        [(r.account_id, r.timer_id) for r in swept],
        [(ACCOUNT_A, "tmr_1"), (ACCOUNT_B, "tmr_1")],
        "the sweep across accounts, by (due_at, account_id, timer_id)",
    )


@check
async def check_a_due_timer_is_claimed_by_one_worker_only(stores: Stores) -> None:
    timers = stores.timers
    await _conversation(stores)
    for n in range(1, 6):
        await timers.schedule(build.timer(f"tmr_{n}", due_at=T0 + 5 - n))
    await timers.schedule(build.timer("tmr_later", due_at=T0 + 999))
    first = await timers.claim_due(T0 + 10, LEASE, 2, "worker-0")
    equal(ids(first, "timer_id"), ["tmr_5", "tmr_4"], "the earliest due timers, at most the limit")
    equal(
        {_lifecycle(r) for r in first},
        {(TimerStatus.CLAIMED, "worker-0", T0 + 10, False)},
        "the claimed timers",
    )
    claims = await asyncio.gather(
        *(timers.claim_due(T0 + 10, LEASE, 2, f"worker-{n}") for n in range(1, 5))
    )
    handed = [(r.timer_id, r.worker_id) for batch in claims for r in batch]
    equal(
        sorted(timer_id for timer_id, _ in handed),
        ["tmr_1", "tmr_2", "tmr_3"],
        "timers handed to 4 concurrent claimers (each once)",
    )
    for timer_id, worker in handed:
        equal((await timers.get(ACCOUNT_A, timer_id)).worker_id, worker, "a timer's stored claim")
    equal(await timers.claim_due(T0 + 10, LEASE, 5, "worker-9"), (), "a claim with nothing due")


@check
async def check_a_claim_whose_lease_ran_out_is_claimed_again(stores: Stores) -> None:
    timers = stores.timers
    await _conversation(stores)
    await timers.schedule(build.timer("tmr_1"))
    await timers.claim_due(T0 + 10, LEASE, 5, "worker-1")
    equal(
        await timers.claim_due(T0 + 10 + LEASE - 1, LEASE, 5, "worker-2"),
        (),
        "a claim within its lease",
    )
    (again,) = await timers.claim_due(T0 + 10 + LEASE, LEASE, 5, "worker-2")
    equal(
        _lifecycle(again),
        (TimerStatus.CLAIMED, "worker-2", T0 + 10 + LEASE, False),
        "the timer claimed again once the lease ran out",
    )
    await refused(
        Conflict, timers.mark_fired(ACCOUNT_A, "tmr_1", "worker-1"), "the first worker, too late"
    )
    fired = await timers.mark_fired(ACCOUNT_A, "tmr_1", "worker-2")
    equal(fired.status, TimerStatus.FIRED, "the timer fired by its current claimer")
    equal(
        await timers.claim_due(T0 + 10 + 5 * LEASE, LEASE, 5, "worker-3"),
        (),
        "a fired timer, never claimed again",
    )


@check
async def check_only_the_claiming_worker_marks_a_timer_fired(stores: Stores) -> None:
    timers = stores.timers
    await _conversation(stores)
    await timers.schedule(build.timer("tmr_1"))
    await refused(
        Conflict, timers.mark_fired(ACCOUNT_A, "tmr_1", "worker-1"), "firing a pending timer"
    )
    await timers.claim_due(T0, LEASE, 5, "worker-1")
    await refused(
        Conflict, timers.mark_fired(ACCOUNT_A, "tmr_1", "worker-2"), "another worker firing it"
    )
    fired = await timers.mark_fired(ACCOUNT_A, "tmr_1", "worker-1")
    equal(
        (fired.status, fired.worker_id, fired.claimed_at, fired.fired_at is not None),
        (TimerStatus.FIRED, "worker-1", T0, True),
        "the fired timer",
    )
    equal(await timers.mark_fired(ACCOUNT_A, "tmr_1", "worker-1"), fired, "firing it again")
    await refused(
        Conflict, timers.mark_fired(ACCOUNT_A, "tmr_1", "worker-2"), "another worker, once fired"
    )
    equal(await timers.get(ACCOUNT_A, "tmr_1"), fired, "the stored timer")
    await timers.schedule(build.timer("tmr_2"))
    await timers.claim_due(T0, LEASE, 5, "worker-1")
    await timers.cancel(ACCOUNT_A, "tmr_2")
    await refused(
        Conflict, timers.mark_fired(ACCOUNT_A, "tmr_2", "worker-1"), "firing a cancelled claim"
    )
    await refused(NotFound, timers.mark_fired(ACCOUNT_A, "tmr_3", "worker-1"), "a missing timer")


@check
async def check_a_timer_is_cancelled_until_it_fires(stores: Stores) -> None:
    timers = stores.timers
    await _conversation(stores)
    for n in (1, 2, 3):
        await timers.schedule(build.timer(f"tmr_{n}", due_at=T0 + n))
    cancelled = await timers.cancel(ACCOUNT_A, "tmr_1")
    equal(_lifecycle(cancelled), (TimerStatus.CANCELLED, None, None, False), "a pending timer")
    equal(await timers.cancel(ACCOUNT_A, "tmr_1"), cancelled, "cancelling it again")
    claimed = await timers.claim_due(T0 + 10, LEASE, 5, "worker-1")
    equal(ids(claimed, "timer_id"), ["tmr_2", "tmr_3"], "a cancelled timer is never claimed")
    equal(
        (await timers.cancel(ACCOUNT_A, "tmr_2")).status,
        TimerStatus.CANCELLED,
        "a claimed timer, cancelled",
    )
    fired = await timers.mark_fired(ACCOUNT_A, "tmr_3", "worker-1")
    equal(await timers.cancel(ACCOUNT_A, "tmr_3"), fired, "cancelling a fired timer")
    equal(await timers.get(ACCOUNT_A, "tmr_3"), fired, "the fired timer stays fired")
    equal(
        await timers.claim_due(T0 + 10 + 5 * LEASE, LEASE, 5, "worker-2"),
        (),
        "nothing cancelled or fired is claimed, whatever its lease",
    )
    await refused(NotFound, timers.cancel(ACCOUNT_A, "tmr_missing"), "a missing timer")


@check
async def check_timer_arguments_are_refused_before_anything_is_written(stores: Stores) -> None:
    timers = stores.timers
    await _conversation(stores)
    await timers.schedule(build.timer("tmr_1"))
    await timers.schedule(build.timer("tmr_2", due_at=T0 + 1))
    await timers.claim_due(T0, LEASE, 1, "worker-1")

    async def state() -> tuple[TimerRecord, ...]:
        return await timers.for_conversation(ACCOUNT_A, "conv_1")

    before = await state()
    sweeps: dict[str, Callable[[Any], Awaitable[object]]] = {
        "now": lambda x: timers.claim_due(x, LEASE, 10, "worker-2"),
        "lease_ms": lambda x: timers.claim_due(T0 + 10 * LEASE, x, 10, "worker-2"),
        "limit": lambda x: timers.claim_due(T0 + 10 * LEASE, LEASE, x, "worker-2"),
    }
    bad: dict[str, tuple[object, ...]] = {
        "now": (True, -1, MAX_MILLIS + 1, 1.5),
        "lease_ms": (True, 0, -1, MAX_MILLIS + 1, 1.5),
        "limit": (True, 0, MAX_LIMIT + 1, 1.5),
    }
    for name, sweep in sweeps.items():
        for value in bad[name]:
            await refused(InvalidRecord, sweep(value), f"claim_due's {name} {value!r}")
    writes: list[tuple[str, Callable[[str], Awaitable[object]], str]] = [
        ("schedule's timer id", lambda x: timers.schedule(_with(build.timer("tmr_3"), x)), "t"),
        ("claim_due's worker", lambda x: timers.claim_due(T0 + 10, LEASE, 10, x), "worker-2"),
        ("cancel", lambda x: timers.cancel(ACCOUNT_A, x), "tmr_2"),
        ("mark_fired", lambda x: timers.mark_fired(ACCOUNT_A, x, "worker-1"), "tmr_1"),
        ("mark_fired's worker", lambda x: timers.mark_fired(ACCOUNT_A, "tmr_1", x), "worker-1"),
        ("get", lambda x: timers.get(ACCOUNT_A, x), "tmr_1"),
        ("for_conversation", lambda x: timers.for_conversation(ACCOUNT_A, x), "conv_1"),
    ]
    for name, write, good in writes:
        for spoiled in (good + "\x00", good[:-1] + "\ud800"):
            await refused(InvalidRecord, write(spoiled), f"{name} given {spoiled!r}")
    await refused(InvalidRecord, timers.claim_due(T0 + 10, LEASE, 10, ""), "a nameless worker")
    equal(await state(), before, "the timers after the refused calls")


def _with(record: TimerRecord, timer_id: str) -> TimerRecord:
    return record.model_copy(update={"timer_id": timer_id})
