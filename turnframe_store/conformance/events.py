"""Conformance checks: the event ledger: append, read by id, paging, case history."""

from __future__ import annotations

from turnframe_store.bundle import Stores
from turnframe_store.conformance._data import _A, _B, _case, _event, _ids
from turnframe_store.conformance._expect import _equal, _increasing, _refused, _true
from turnframe_store.conformance._runner import _check
from turnframe_store.errors import Conflict, InvalidRecord
from turnframe_store.records import EventCursor


@_check
async def check_events_append_in_order_and_read_back_by_id(stores: Stores) -> None:
    ledger = stores.events
    batch = [_event("evt_3"), _event("evt_1"), _event("evt_2")]
    appended = await ledger.append(_A, batch)
    _equal(_ids(appended, "event_id"), ["evt_3", "evt_1", "evt_2"], "the append order")
    sequences = [e.sequence or 0 for e in appended]
    _true(
        _increasing([0, *sequences]),
        f"sequences increase in append order: {sequences}",
    )
    _equal(
        [e.model_copy(update={"sequence": None}) for e in appended],
        batch,
        "appended events apart from their sequence",
    )
    (other,) = await ledger.append(_B, [_event("evt_9", account=_B)])
    (later,) = await ledger.append(_A, [_event("evt_4")])
    _true(
        sequences[-1] < (other.sequence or 0) < (later.sequence or 0),
        "sequences increase store-wide",
    )
    found = await ledger.get_by_ids(
        _A, ["evt_4", "evt_2", "evt_missing", "evt_9", "evt_3", "evt_2"]
    )
    _equal(_ids(found, "event_id"), ["evt_3", "evt_2", "evt_4"], "events read by id")
    _equal(found[0], appended[0], "an event read back")
    _equal(await ledger.append(_A, []), (), "appending nothing")


@_check
async def check_a_duplicate_event_id_appends_nothing(stores: Stores) -> None:
    ledger = stores.events
    await ledger.append(_A, [_event("evt_1")])
    before = await ledger.read_from(_A, EventCursor.START, 100)
    await _refused(
        Conflict, ledger.append(_A, [_event("evt_2"), _event("evt_1")]), "a stored event id"
    )
    await _refused(
        Conflict, ledger.append(_A, [_event("evt_3"), _event("evt_3")]), "an id twice in a batch"
    )
    await _refused(
        InvalidRecord,
        ledger.append(_A, [_event("evt_4"), _event("evt_5").model_copy(update={"sequence": 7})]),
        "an event that already has a sequence",
    )
    await _refused(
        InvalidRecord,
        ledger.append(_A, [_event("evt_6"), _event("evt_7", account=_B)]),
        "an event of another account",
    )
    _equal(
        await ledger.get_by_ids(_A, [f"evt_{n}" for n in range(2, 8)]),
        (),
        "events of the refused batches",
    )
    _equal(await ledger.read_from(_A, EventCursor.START, 100), before, "the stream")
    await ledger.append(_B, [_event("evt_1", account=_B)])


@_check
async def check_paging_by_sequence_skips_and_repeats_nothing_while_the_ledger_grows(
    stores: Stores,
) -> None:
    ledger = stores.events
    cursor = EventCursor.START
    appended: list[str] = []
    seen: list[str] = []

    async def read_page() -> int:
        nonlocal cursor
        page = await ledger.read_from(_A, cursor, 2)
        if not page.events:
            _equal(page.next_cursor, cursor, "the cursor after an empty page")
            return 0
        sequences = [e.sequence or 0 for e in page.events]
        _true(
            cursor.sequence < sequences[0] and _increasing(sequences),
            f"a page after sequence {cursor.sequence} is in sequence order: {sequences}",
        )
        _equal(page.next_cursor.sequence, sequences[-1], "the cursor after a page")
        seen.extend(e.event_id for e in page.events)
        cursor = page.next_cursor
        return len(page.events)

    number = 0
    for round_ in range(6):
        batch = []
        for _ in range(round_ % 3 + 1):
            number += 1
            batch.append(_event(f"evt_{number:03d}", case_id=f"case-{number % 2}"))
        await ledger.append(_A, batch)
        appended.extend(e.event_id for e in batch)
        await ledger.append(_B, [_event(f"evt_b{round_}", account=_B)])
        await read_page()
    for _ in range(100):
        if not await read_page():
            break
    _equal(seen, appended, "every event of the account, once, in commit order")


@_check
async def check_case_history_is_read_since_a_revision(stores: Stores) -> None:
    ledger = stores.events
    await ledger.append(
        _A,
        [
            _event("evt_1", revision=1),
            _event("evt_2", revision=2),
            _event("evt_3", case_id="case-2", revision=1),
        ],
    )
    await ledger.append(_A, [_event("evt_4", revision=2), _event("evt_5", revision=3)])
    await ledger.append(_B, [_event("evt_6", account=_B, revision=2)])
    key = _case("case-1").key
    _equal(
        _ids(await ledger.list_for_case(_A, key, 1, 10), "event_id"),
        ["evt_2", "evt_4", "evt_5"],
        "the case's events since revision 1, by sequence",
    )
    _equal(
        _ids(await ledger.list_for_case(_A, key, 1, 2), "event_id"),
        ["evt_2", "evt_4"],
        "the same capped at 2",
    )
    _equal(
        _ids(await ledger.list_for_case(_A, key, 0, 10), "event_id"),
        ["evt_1", "evt_2", "evt_4", "evt_5"],
        "the whole history",
    )
    _equal(await ledger.list_for_case(_A, key, 3, 10), (), "nothing after the last revision")
