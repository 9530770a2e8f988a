"""Conformance checks: the event ledger: append, read by id, paging, case history."""

from __future__ import annotations

from turnframe_store import builders as build
from turnframe_store.builders import ACCOUNT_A, ACCOUNT_B
from turnframe_store.bundle import Stores
from turnframe_store.conformance.data import ids
from turnframe_store.conformance.expect import equal, increasing, refused, true
from turnframe_store.conformance.runner import check
from turnframe_store.errors import Conflict, InvalidRecord
from turnframe_store.records import EventCursor


@check
async def check_events_append_in_order_and_read_back_by_id(stores: Stores) -> None:
    ledger = stores.events
    batch = [build.event("evt_3"), build.event("evt_1"), build.event("evt_2")]
    appended = await ledger.append(ACCOUNT_A, batch)
    equal(ids(appended, "event_id"), ["evt_3", "evt_1", "evt_2"], "the append order")
    sequences = [e.sequence or 0 for e in appended]
    true(
        increasing([0, *sequences]),
        f"sequences increase in append order: {sequences}",
    )
    equal(
        [e.model_copy(update={"sequence": None}) for e in appended],
        batch,
        "appended events apart from their sequence",
    )
    (other,) = await ledger.append(ACCOUNT_B, [build.event("evt_9", account=ACCOUNT_B)])
    (later,) = await ledger.append(ACCOUNT_A, [build.event("evt_4")])
    true(
        sequences[-1] < (other.sequence or 0) < (later.sequence or 0),
        "sequences increase store-wide",
    )
    found = await ledger.get_by_ids(
        ACCOUNT_A, ["evt_4", "evt_2", "evt_missing", "evt_9", "evt_3", "evt_2"]
    )
    equal(ids(found, "event_id"), ["evt_3", "evt_2", "evt_4"], "events read by id")
    equal(found[0], appended[0], "an event read back")
    equal(await ledger.append(ACCOUNT_A, []), (), "appending nothing")


@check
async def check_a_duplicate_event_id_appends_nothing(stores: Stores) -> None:
    ledger = stores.events
    await ledger.append(ACCOUNT_A, [build.event("evt_1")])
    before = await ledger.read_from(ACCOUNT_A, EventCursor.START, 100)
    await refused(
        Conflict,
        ledger.append(ACCOUNT_A, [build.event("evt_2"), build.event("evt_1")]),
        "a stored event id",
    )
    await refused(
        Conflict,
        ledger.append(ACCOUNT_A, [build.event("evt_3"), build.event("evt_3")]),
        "an id twice in a batch",
    )
    await refused(
        InvalidRecord,
        ledger.append(
            ACCOUNT_A,
            [build.event("evt_4"), build.event("evt_5").model_copy(update={"sequence": 7})],
        ),
        "an event that already has a sequence",
    )
    await refused(
        InvalidRecord,
        ledger.append(ACCOUNT_A, [build.event("evt_6"), build.event("evt_7", account=ACCOUNT_B)]),
        "an event of another account",
    )
    equal(
        await ledger.get_by_ids(ACCOUNT_A, [f"evt_{n}" for n in range(2, 8)]),
        (),
        "events of the refused batches",
    )
    equal(await ledger.read_from(ACCOUNT_A, EventCursor.START, 100), before, "the stream")
    await ledger.append(ACCOUNT_B, [build.event("evt_1", account=ACCOUNT_B)])


@check
async def check_paging_by_sequence_skips_and_repeats_nothing_while_the_ledger_grows(
    stores: Stores,
) -> None:
    ledger = stores.events
    cursor = EventCursor.START
    appended: list[str] = []
    seen: list[str] = []

    async def read_page() -> int:
        nonlocal cursor
        page = await ledger.read_from(ACCOUNT_A, cursor, 2)
        if not page.events:
            equal(page.next_cursor, cursor, "the cursor after an empty page")
            return 0
        sequences = [e.sequence or 0 for e in page.events]
        true(
            cursor.sequence < sequences[0] and increasing(sequences),
            f"a page after sequence {cursor.sequence} is in sequence order: {sequences}",
        )
        equal(page.next_cursor.sequence, sequences[-1], "the cursor after a page")
        seen.extend(e.event_id for e in page.events)
        cursor = page.next_cursor
        return len(page.events)

    number = 0
    for round_ in range(6):
        batch = []
        for _ in range(round_ % 3 + 1):
            number += 1
            batch.append(build.event(f"evt_{number:03d}", case_id=f"case-{number % 2}"))
        await ledger.append(ACCOUNT_A, batch)
        appended.extend(e.event_id for e in batch)
        await ledger.append(ACCOUNT_B, [build.event(f"evt_b{round_}", account=ACCOUNT_B)])
        await read_page()
    for _ in range(100):
        if not await read_page():
            break
    equal(seen, appended, "every event of the account, once, in commit order")


@check
async def check_case_history_is_read_since_a_revision(stores: Stores) -> None:
    ledger = stores.events
    await ledger.append(
        ACCOUNT_A,
        [
            build.event("evt_1", revision=1),
            build.event("evt_2", revision=2),
            build.event("evt_3", case_id="case-2", revision=1),
        ],
    )
    await ledger.append(
        ACCOUNT_A, [build.event("evt_4", revision=2), build.event("evt_5", revision=3)]
    )
    await ledger.append(ACCOUNT_B, [build.event("evt_6", account=ACCOUNT_B, revision=2)])
    key = build.case("case-1").key
    equal(
        ids(await ledger.list_for_case(ACCOUNT_A, key, 1, 10), "event_id"),
        ["evt_2", "evt_4", "evt_5"],
        "the case's events since revision 1, by sequence",
    )
    equal(
        ids(await ledger.list_for_case(ACCOUNT_A, key, 1, 2), "event_id"),
        ["evt_2", "evt_4"],
        "the same capped at 2",
    )
    equal(
        ids(await ledger.list_for_case(ACCOUNT_A, key, 0, 10), "event_id"),
        ["evt_1", "evt_2", "evt_4", "evt_5"],
        "the whole history",
    )
    equal(await ledger.list_for_case(ACCOUNT_A, key, 3, 10), (), "nothing after the last revision")
