"""Conformance checks: the outbox: enqueue, claims, retries, the reaper."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from turnframe_store import builders as build
from turnframe_store.builders import DESTINATION, T0
from turnframe_store.bundle import Stores
from turnframe_store.conformance.data import ids
from turnframe_store.conformance.expect import equal, refused
from turnframe_store.conformance.runner import check
from turnframe_store.errors import Conflict, InvalidRecord, NotFound
from turnframe_store.records import OUTBOX_CLAIM_EXPIRED, OutboxEntry, OutboxStatus


@check
async def check_outbox_enqueue_refuses_duplicates_and_non_pending_rows(stores: Stores) -> None:
    outbox = stores.outbox
    row = build.outbox_row("obx_1", key="key-1")
    equal(await outbox.enqueue(row), row, "the enqueued row")
    equal(await outbox.get("obx_1"), row, "the stored row")
    await refused(Conflict, outbox.enqueue(row), "the same row again")
    await refused(
        Conflict,
        outbox.enqueue(build.outbox_row("obx_2", key="key-1")),
        "another row with a stored destination and key",
    )
    await refused(NotFound, outbox.get("obx_2"), "the refused row")
    await outbox.enqueue(
        build.outbox_row("obx_3", key="key-1", destination="conformance.elsewhere")
    )
    claimed = OutboxEntry(
        outbox_id="obx_4",
        command_id="cmd_1",
        destination=DESTINATION,
        idempotency_key="key-4",
        status=OutboxStatus.DISPATCHING,
        created_at=T0,
        claim_worker_id="worker-1",
        claim_taken_at=T0,
    )
    await refused(InvalidRecord, outbox.enqueue(claimed), "a row that is not pending")
    await refused(NotFound, outbox.get("obx_4"), "the refused row")


@check
async def check_an_outbox_row_is_claimed_by_one_worker_only(stores: Stores) -> None:
    outbox = stores.outbox
    for n in range(1, 6):
        await outbox.enqueue(build.outbox_row(f"obx_{n}", created_at=T0 + 5 - n))
    await outbox.enqueue(build.outbox_row("obx_later", created_at=T0 - 1, next_attempt_at=T0 + 999))
    first = await outbox.claim_due(T0 + 10, 2, "worker-0")
    equal(ids(first, "outbox_id"), ["obx_5", "obx_4"], "the oldest due rows")
    equal(
        {(r.status, r.attempt_count, r.claim_worker_id, r.claim_taken_at) for r in first},
        {(OutboxStatus.DISPATCHING, 1, "worker-0", T0 + 10)},
        "the claimed rows",
    )
    claims = await asyncio.gather(
        *(outbox.claim_due(T0 + 10, 2, f"worker-{n}") for n in range(1, 5))
    )
    handed = [(r.outbox_id, r.claim_worker_id) for batch in claims for r in batch]
    equal(
        sorted(outbox_id for outbox_id, _ in handed),
        ["obx_1", "obx_2", "obx_3"],
        "rows handed to 4 concurrent claimers (each once)",
    )
    for outbox_id, worker in handed:
        equal((await outbox.get(outbox_id)).claim_worker_id, worker, "the stored claim of a row")
    equal(await outbox.claim_due(T0 + 10, 5, "worker-9"), (), "a claim with nothing due")


@check
async def check_a_rescheduled_outbox_row_waits_until_it_is_due(stores: Stores) -> None:
    outbox = stores.outbox
    await outbox.enqueue(build.outbox_row("obx_1"))
    await outbox.claim_due(T0, 1, "worker-1")
    retry = await outbox.mark_failed("obx_1", "conformance.busy", retry_at=T0 + 100)
    equal(
        (retry.status, retry.next_attempt_at, retry.last_failure, retry.claim_worker_id),
        (OutboxStatus.PENDING, T0 + 100, "conformance.busy", None),
        "a failure with a retry time",
    )
    equal(await outbox.claim_due(T0 + 99, 5, "worker-1"), (), "a claim before the retry time")
    (second,) = await outbox.claim_due(T0 + 100, 5, "worker-2")
    equal(second.attempt_count, 2, "the second attempt")
    unknown = await outbox.mark_outcome_unknown("obx_1", "remote-1")
    equal(
        (unknown.status, unknown.remote_ref, unknown.claim_worker_id),
        (OutboxStatus.OUTCOME_UNKNOWN, "remote-1", None),
        "an unknown outcome",
    )
    equal(await outbox.mark_outcome_unknown("obx_1"), unknown, "the unknown outcome again")
    await refused(
        Conflict, outbox.mark_outcome_unknown("obx_1", "remote-2"), "another remote reference"
    )
    equal(await outbox.claim_due(T0 + 999, 5, "worker-1"), (), "claiming an unknown outcome")
    rescheduled = await outbox.reschedule("obx_1", T0 + 300)
    equal(
        (rescheduled.status, rescheduled.next_attempt_at),
        (OutboxStatus.PENDING, T0 + 300),
        "the rescheduled row",
    )
    equal(await outbox.claim_due(T0 + 299, 5, "worker-1"), (), "a claim before it is due")
    (third,) = await outbox.claim_due(T0 + 300, 5, "worker-3")
    equal(third.attempt_count, 3, "the third attempt")
    done = await outbox.mark_completed("obx_1")
    equal(
        (done.status, done.completed_at is not None, done.claim_worker_id),
        (OutboxStatus.COMPLETED, True, None),
        "the completed row",
    )
    equal(await outbox.mark_completed("obx_1"), done, "completing it again")
    late_moves: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("failing a completed row", lambda: outbox.mark_failed("obx_1", "conformance.late")),
        ("rescheduling a completed row", lambda: outbox.reschedule("obx_1", T0 + 400)),
        ("an unknown outcome after completion", lambda: outbox.mark_outcome_unknown("obx_1")),
    ]
    for what, action in late_moves:
        await refused(Conflict, action(), what)

    await outbox.enqueue(build.outbox_row("obx_2"))
    await outbox.claim_due(T0 + 500, 1, "worker-1")
    failed = await outbox.mark_failed("obx_2", "conformance.refused")
    equal(
        (failed.status, failed.completed_at is not None),
        (OutboxStatus.FAILED, True),
        "a final failure",
    )
    equal(await outbox.mark_failed("obx_2", "conformance.refused"), failed, "the same again")
    await refused(
        Conflict, outbox.mark_failed("obx_2", "conformance.other"), "another failure reason"
    )
    await refused(NotFound, outbox.get("obx_missing"), "a row that does not exist")


@check
async def check_the_reaper_releases_expired_claims(stores: Stores) -> None:
    outbox = stores.outbox
    for n in range(1, 4):
        await outbox.enqueue(build.outbox_row(f"obx_{n}", created_at=T0 + n))
    await outbox.claim_due(T0 + 10, 1, "worker-1")
    await outbox.claim_due(T0 + 50, 1, "worker-2")
    equal(await outbox.release_expired_claims(T0 + 50), 1, "claims taken before the limit")
    released = await outbox.get("obx_1")
    equal(
        (released.status, released.claim_worker_id, released.next_attempt_at),
        (OutboxStatus.PENDING, None, None),
        "the released row (due now)",
    )
    held = await outbox.get("obx_2")
    equal(
        (held.status, held.claim_worker_id),
        (OutboxStatus.DISPATCHING, "worker-2"),
        "a claim taken at the limit",
    )
    equal(await outbox.release_expired_claims(T0 + 50), 0, "reaping again")
    again = await outbox.claim_due(T0 + 60, 5, "worker-3")
    equal(
        [(r.outbox_id, r.attempt_count) for r in again],
        [("obx_1", 2), ("obx_3", 1)],
        "the next claim",
    )


@check
async def check_an_unused_claim_is_handed_back_without_counting_an_attempt(stores: Stores) -> None:
    outbox = stores.outbox
    await outbox.enqueue(build.outbox_row("obx_1"))
    await outbox.claim_due(T0, 1, "worker-1")
    await refused(Conflict, outbox.unclaim("obx_1", "worker-2"), "another worker's claim")
    back = await outbox.unclaim("obx_1", "worker-1")
    equal(
        (back.status, back.attempt_count, back.claim_worker_id, back.next_attempt_at),
        (OutboxStatus.PENDING, 0, None, None),
        "the handed-back row (due now, no attempt counted)",
    )
    await refused(Conflict, outbox.unclaim("obx_1", "worker-1"), "a row no longer claimed")
    (again,) = await outbox.claim_due(T0 + 1, 5, "worker-2")
    equal(again.attempt_count, 1, "the next claim is the first attempt")


@check
async def check_unknown_outcomes_are_leased_to_one_reconciler_at_a_time(stores: Stores) -> None:
    outbox = stores.outbox
    for n in (1, 2, 3):
        await outbox.enqueue(build.outbox_row(f"obx_{n}", created_at=T0 + n))
    await outbox.claim_due(T0 + 10, 5, "worker-1")
    await outbox.mark_outcome_unknown("obx_1", check_at=T0 + 100)
    await outbox.mark_outcome_unknown("obx_2")
    equal(
        (await outbox.mark_outcome_unknown("obx_1", check_at=T0 + 5)).next_attempt_at,
        T0 + 100,
        "a repeated report keeps the first schedule",
    )
    first = await outbox.claim_reconciliations(T0 + 20, 5, T0 + 200)
    equal(ids(first, "outbox_id"), ["obx_2"], "the unknown outcomes due (a dispatching row is not)")
    equal(
        (first[0].status, first[0].next_attempt_at),
        (OutboxStatus.OUTCOME_UNKNOWN, T0 + 200),
        "a leased reconciliation",
    )
    equal(await outbox.claim_reconciliations(T0 + 99, 5, T0 + 300), (), "nothing due before")
    due = await outbox.claim_reconciliations(T0 + 200, 1, T0 + 400)
    equal(ids(due, "outbox_id"), ["obx_1"], "the oldest due first, at most the limit")
    claims = await asyncio.gather(
        *(outbox.claim_reconciliations(T0 + 400, 5, T0 + 500) for _ in range(4))
    )
    equal(
        sorted(r.outbox_id for batch in claims for r in batch),
        ["obx_1", "obx_2"],
        "unknown outcomes leased to 4 concurrent reconcilers (each once)",
    )
    equal(await outbox.pending_count(), 3, "the open rows")
    await outbox.mark_completed("obx_1")
    await outbox.mark_failed("obx_2", "conformance.refused")
    equal(await outbox.pending_count(), 1, "the open rows once two ended")


@check
async def check_an_attempt_begins_once(stores: Stores) -> None:
    outbox = stores.outbox
    await outbox.enqueue(build.outbox_row("obx_1"))
    await outbox.claim_due(T0, 1, "worker-1")
    await refused(Conflict, outbox.begin_dispatch("obx_1", 2, T0), "another attempt begins")
    began = await outbox.begin_dispatch("obx_1", 1, T0 + 1)
    equal(began.dispatch_started_at, T0 + 1, "the attempt's start")
    await refused(
        Conflict, outbox.begin_dispatch("obx_1", 1, T0 + 2), "the same attempt beginning again"
    )
    await refused(NotFound, outbox.begin_dispatch("obx_missing", 1, T0), "a missing row")


@check
async def check_a_workers_claims_in_flight_are_counted(stores: Stores) -> None:
    outbox = stores.outbox
    for n in range(1, 7):
        await outbox.enqueue(build.outbox_row(f"obx_{n}", created_at=T0 + n))
    equal(await outbox.claimed_count("worker-1"), 0, "claims before any claim")
    await outbox.claim_due(T0, 4, "worker-1")
    await outbox.claim_due(T0, 1, "worker-2")
    equal(await outbox.claimed_count("worker-1"), 4, "worker-1's claims")
    equal(await outbox.claimed_count("worker-2"), 1, "worker-2's claim")
    await outbox.mark_completed("obx_1", 1)
    await outbox.mark_outcome_unknown("obx_2", attempt=1)
    await outbox.unclaim("obx_3", "worker-1")
    equal(await outbox.claimed_count("worker-1"), 1, "claims once settled, unknown, handed back")
    await outbox.release_expired_claims(T0 + 1)
    equal(await outbox.claimed_count("worker-1"), 0, "claims once reaped")
    equal(await outbox.claimed_count("worker-2"), 0, "another worker's reaped claim")
    await refused(InvalidRecord, outbox.claimed_count(""), "an empty worker id")


@check
async def check_a_begun_attempt_holds_its_claim_a_lease_from_its_start(stores: Stores) -> None:
    outbox = stores.outbox
    for n in (1, 2):
        await outbox.enqueue(build.outbox_row(f"obx_{n}", created_at=T0 + n))
    await outbox.claim_due(T0, 2, "worker-1")
    began = await outbox.begin_dispatch("obx_1", 1, T0 + 30)
    equal(began.claim_taken_at, T0 + 30, "the claim's lease, from the attempt's start")
    equal(await outbox.release_expired_claims(T0 + 20), 1, "the claim that never began, reaped")
    held = await outbox.get("obx_1")
    equal(
        (held.status, held.claim_worker_id, held.attempt_count),
        (OutboxStatus.DISPATCHING, "worker-1", 1),
        "the attempt that began after waiting in the broker",
    )
    equal(await outbox.release_expired_claims(T0 + 31), 1, "the same attempt, past its lease")


@check
async def check_the_reaper_records_that_a_begun_attempt_never_answered(stores: Stores) -> None:
    outbox = stores.outbox
    for n in (1, 2):
        await outbox.enqueue(build.outbox_row(f"obx_{n}", created_at=T0 + n))
    await outbox.claim_due(T0, 2, "worker-1")
    await outbox.begin_dispatch("obx_1", 1, T0 + 1)
    equal(await outbox.release_expired_claims(T0 + 10), 2, "both claims, reaped")
    reaped = await outbox.get("obx_1")
    equal(
        (reaped.status, reaped.last_failure, reaped.dispatch_started_at),
        (OutboxStatus.PENDING, OUTBOX_CLAIM_EXPIRED, None),
        "a reaped row whose attempt had begun",
    )
    equal((await outbox.get("obx_2")).last_failure, None, "a claim that never began")
    again = await outbox.claim_due(T0 + 20, 2, "worker-2")
    equal([r.dispatch_started_at for r in again], [None, None], "new claims have not begun")


@check
async def check_only_the_claims_own_attempt_settles_it(stores: Stores) -> None:
    outbox = stores.outbox
    await outbox.enqueue(build.outbox_row("obx_1"))
    await outbox.claim_due(T0, 1, "worker-1")
    await outbox.release_expired_claims(T0 + 10)
    await refused(
        Conflict, outbox.mark_failed("obx_1", "late", T0 + 50, attempt=1), "a reaped attempt"
    )
    await refused(Conflict, outbox.mark_completed("obx_1", attempt=1), "a reaped attempt")
    await outbox.claim_due(T0 + 20, 1, "worker-2")
    await refused(Conflict, outbox.mark_completed("obx_1", attempt=1), "the earlier attempt")
    await refused(
        Conflict, outbox.mark_failed("obx_1", "late", attempt=1), "the earlier attempt failing"
    )
    await refused(
        Conflict,
        outbox.mark_outcome_unknown("obx_1", attempt=1),
        "the earlier attempt's unknown outcome",
    )
    equal((await outbox.get("obx_1")).status, OutboxStatus.DISPATCHING, "the row, unmoved")
    done = await outbox.mark_completed("obx_1", attempt=2)
    equal(done.status, OutboxStatus.COMPLETED, "its own attempt's answer")
    equal(await outbox.mark_completed("obx_1", attempt=1), done, "completing it again")
