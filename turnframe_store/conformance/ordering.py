"""Conformance checks across roles: sort keys, account scoping, stable error codes."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from turnframe_core import codes
from turnframe_core.derive import derive_replay_token
from turnframe_core.errors import TurnframeError
from turnframe_core.interactions import InteractionStatus
from turnframe_core.replay import FailedOutcome, TurnPhase
from turnframe_store import builders as build
from turnframe_store.builders import ACCOUNT_A, ACCOUNT_B, T0
from turnframe_store.bundle import Stores
from turnframe_store.conformance.data import card_status, ids, start_turn
from turnframe_store.conformance.expect import equal, refused, true
from turnframe_store.conformance.runner import check
from turnframe_store.errors import Conflict, InvalidRecord, NotFound
from turnframe_store.records import EventCursor, JournalStatus


@check
async def check_lists_follow_their_named_sort_keys(stores: Stores) -> None:
    arrival = [("c", T0 + 5), ("a", T0 + 9), ("b", T0 + 5), ("d", T0 + 1)]
    expected = ["d", "b", "c", "a"]

    await stores.conversations.ensure_conversation(ACCOUNT_A, "conv_1")
    for name, at in arrival:
        await stores.conversations.append_user_turn(build.user_turn(f"turn_{name}", received_at=at))
    equal(
        ids(await stores.conversations.list_turns(ACCOUNT_A, "conv_1"), "turn_id"),
        [f"turn_{n}" for n in expected],
        "user turns by (received_at, turn_id)",
    )

    for name, at in arrival:
        await stores.interactions.insert(build.card(f"int_{name}", blocking=False, created_at=at))
    await stores.interactions.insert(build.card("int_closed", blocking=False, created_at=T0))
    await stores.interactions.dismiss(ACCOUNT_A, "int_closed")
    equal(
        ids(await stores.interactions.open_for_conversation(ACCOUNT_A, "conv_1"), "interaction_id"),
        [f"int_{n}" for n in expected],
        "open cards by (created_at, interaction_id)",
    )
    equal(
        ids(await stores.interactions.for_case(ACCOUNT_A, build.case().key), "interaction_id"),
        ["int_closed"] + [f"int_{n}" for n in expected],
        "a case's cards by (created_at, interaction_id)",
    )

    for name, at in arrival:
        status = JournalStatus.AWAITING_CONFIRMATION if name == "a" else JournalStatus.PENDING
        await stores.journal.begin(build.journal_entry(f"cmd_{name}", created_at=at, status=status))
    await stores.journal.complete(ACCOUNT_A, "cmd_b", FailedOutcome(code="conformance.failed"))
    await stores.journal.mark_executing(ACCOUNT_A, "cmd_c")
    equal(
        ids(await stores.journal.for_turn(ACCOUNT_A, "turn_1"), "command_id"),
        [f"cmd_{n}" for n in expected],
        "a turn's journal by (created_at, command_id)",
    )
    equal(
        ids(await stores.journal.unsettled_for_turn(ACCOUNT_A, "turn_1"), "command_id"),
        ["cmd_d", "cmd_c"],
        "a turn's unsettled commands (pending, executing, outcome unknown)",
    )

    for name, at in arrival:
        await stores.outbox.enqueue(build.outbox_row(f"obx_{name}", command="cmd_x", created_at=at))
    equal(
        ids(await stores.outbox.list_for_command("cmd_x"), "outbox_id"),
        [f"obx_{n}" for n in expected],
        "a command's outbox rows by (created_at, outbox_id)",
    )

    for name, at in arrival:
        await stores.replay.put(build.replay_record(f"turn_{name}", recorded_at=at))
    late = build.replay_record("turn_d", recorded_at=T0 + 1).advanced(
        TurnPhase.COMMITTED, at=T0 + 50
    )
    await stores.replay.put(late)
    equal(
        ids(await stores.replay.for_conversation(ACCOUNT_A, "conv_1"), "turn_id"),
        [f"turn_{n}" for n in expected],
        "replay records by (first recorded_at, turn_id)",
    )
    last = await stores.replay.last_for_conversation(ACCOUNT_A, "conv_1")
    equal(
        last.turn_id if last else None,
        f"turn_{expected[-1]}",
        "the last replay record is the last in that order",
    )


@check
async def check_another_accounts_records_are_not_found_exactly_like_missing_ones(
    stores: Stores,
) -> None:
    await start_turn(stores, "turn_1")
    await stores.conversations.append_assistant_turn(ACCOUNT_A, build.assistant_turn("turn_1"))
    await stores.interactions.insert(build.card("int_1"))
    entry = build.journal_entry("cmd_1")
    await stores.journal.begin(entry)
    await stores.events.append(ACCOUNT_A, [build.event("evt_1")])
    await stores.replay.put(build.replay_record("turn_1"))
    conversations, cards, journal = stores.conversations, stores.interactions, stores.journal
    failed = FailedOutcome(code="conformance.failed")
    probes: list[tuple[str, Callable[[str, str], Awaitable[object]], str, str]] = [
        ("get_conversation", conversations.get_conversation, "conv_1", "conv_missing"),
        ("get_user_turn", conversations.get_user_turn, "turn_1", "turn_missing"),
        ("get_assistant_turn", conversations.get_assistant_turn, "turn_1", "turn_missing"),
        ("get_phase", conversations.get_phase, "turn_1", "turn_missing"),
        (
            "set_phase",
            lambda a, t: conversations.set_phase(a, t, TurnPhase.FAILED),
            "turn_1",
            "turn_missing",
        ),
        ("interactions.get", cards.get, "int_1", "int_missing"),
        (
            "begin_resolution",
            lambda a, i: cards.begin_resolution(a, i, "opt_yes"),
            "int_1",
            "int_missing",
        ),
        (
            "finish",
            lambda a, i: cards.finish(a, i, InteractionStatus.FAILED),
            "int_1",
            "int_missing",
        ),
        ("decline", cards.decline, "int_1", "int_missing"),
        ("dismiss", cards.dismiss, "int_1", "int_missing"),
        ("journal.get", journal.get, "cmd_1", "cmd_missing"),
        ("get_by_key", journal.get_by_key, entry.idempotency_key, "sha256:" + "0" * 64),
        ("mark_executing", journal.mark_executing, "cmd_1", "cmd_missing"),
        ("complete", lambda a, c: journal.complete(a, c, failed), "cmd_1", "cmd_missing"),
        ("replay.get", stores.replay.get, "turn_1", "turn_missing"),
        (
            "get_by_token",
            stores.replay.get_by_token,
            derive_replay_token("turn_1"),
            derive_replay_token("turn_missing"),
        ),
    ]
    for name, probe, theirs, missing in probes:
        foreign = await refused(
            NotFound, probe(ACCOUNT_B, theirs), f"{name} of another account's record"
        )
        absent = await refused(NotFound, probe(ACCOUNT_B, missing), f"{name} of a missing record")
        equal(
            (type(foreign), foreign.code, str(foreign)),
            (type(absent), absent.code, str(absent)),
            f"{name}: another account's record against a missing one",
        )
        true(theirs not in str(foreign), f"{name}: the error names the id")
    await refused(
        NotFound,
        conversations.append_user_turn(build.user_turn("turn_9", account=ACCOUNT_B)),
        "a user turn in another account's conversation",
    )
    await refused(
        NotFound,
        conversations.append_assistant_turn(
            ACCOUNT_B, build.assistant_turn("turn_1", account=ACCOUNT_B)
        ),
        "an assistant turn for another account's user turn",
    )
    key = build.case().key
    empty_lists: list[tuple[str, Callable[[], Awaitable[Sequence[object]]]]] = [
        ("list_turns", lambda: conversations.list_turns(ACCOUNT_B, "conv_1")),
        ("open_for_conversation", lambda: cards.open_for_conversation(ACCOUNT_B, "conv_1")),
        ("for_case", lambda: cards.for_case(ACCOUNT_B, key)),
        ("for_turn", lambda: journal.for_turn(ACCOUNT_B, "turn_1")),
        ("unsettled_for_turn", lambda: journal.unsettled_for_turn(ACCOUNT_B, "turn_1")),
        ("get_by_ids", lambda: stores.events.get_by_ids(ACCOUNT_B, ["evt_1"])),
        ("list_for_case", lambda: stores.events.list_for_case(ACCOUNT_B, key, 0, 10)),
        ("for_conversation", lambda: stores.replay.for_conversation(ACCOUNT_B, "conv_1")),
        ("invalidate_for_revision", lambda: cards.invalidate_for_revision(ACCOUNT_B, key, 9)),
        ("invalidate_case_cards", lambda: cards.invalidate_case_cards(ACCOUNT_B, key)),
    ]
    for name, listing in empty_lists:
        equal(tuple(await listing()), (), f"{name} for another account")
    page = await stores.events.read_from(ACCOUNT_B, EventCursor.START, 10)
    equal(page.events, (), "read_from for another account")
    equal(
        await stores.replay.last_for_conversation(ACCOUNT_B, "conv_1"),
        None,
        "last_for_conversation for another account",
    )
    equal(
        await card_status(stores, ACCOUNT_A, "int_1"), InteractionStatus.ACTIVE, "the owner's card"
    )
    equal(
        (await journal.get(ACCOUNT_A, "cmd_1")).status, JournalStatus.PENDING, "the owner's command"
    )
    equal(
        (await conversations.get_phase(ACCOUNT_A, "turn_1")).phase,
        TurnPhase.RECEIVED,
        "the owner's phase marker",
    )


@check
async def check_store_errors_carry_their_stable_codes(stores: Stores) -> None:
    missing = await refused(
        NotFound,
        stores.conversations.get_conversation(ACCOUNT_A, "conv_missing"),
        "a missing record",
    )
    await start_turn(stores, "turn_1")
    conflict = await refused(
        Conflict,
        stores.conversations.append_user_turn(build.user_turn("turn_1")),
        "a repeated turn",
    )
    invalid = await refused(
        InvalidRecord,
        stores.events.append(ACCOUNT_A, [build.event("evt_1", account=ACCOUNT_B)]),
        "an event of another account",
    )
    for error, code in (
        (missing, codes.STORE_NOT_FOUND),
        (conflict, codes.STORE_CONFLICT),
        (invalid, codes.STORE_INVALID_RECORD),
    ):
        equal(error.code, code, f"the code of {type(error).__name__}")
        true(isinstance(error, TurnframeError), "a store error is a TurnframeError")
        true(error.code in codes.ALL_CODES, f"{error.code} is a registered code")
    true("conv_missing" not in str(missing), "a NotFound message never names the id")
