"""Conformance checks: arguments every store refuses alike, before it writes anything.

A limit is an int (never a bool) from 1 to `MAX_LIMIT`; a time is integer milliseconds from 0 to
`MAX_MILLIS`; a revision or a sequence runs from 0 to `MAX_INTEGER`; an id or key holds no NUL
and no lone surrogate. Anything else is `InvalidRecord`, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from turnframe_core.cases import CaseKey, CaseRef
from turnframe_core.interactions import InteractionStatus
from turnframe_core.replay import FailedOutcome, TurnPhase
from turnframe_core.stream import TurnStep
from turnframe_store import MAX_INTEGER, MAX_LIMIT, MAX_MILLIS
from turnframe_store import builders as build
from turnframe_store.builders import ACCOUNT_A, DESTINATION, T0, WORKFLOW
from turnframe_store.bundle import Stores
from turnframe_store.conformance.data import start_turn
from turnframe_store.conformance.expect import equal, refused
from turnframe_store.conformance.runner import check
from turnframe_store.errors import InvalidRecord, NotFound
from turnframe_store.records import CommitBundle, EventCursor

Call = Callable[[Any], Awaitable[object]]
T = TypeVar("T", bound=BaseModel)


def _spoiled(value: str) -> tuple[str, str]:
    """`value` with a NUL added, and with its last character replaced by a lone surrogate."""
    return (value + "\x00", value[:-1] + "\ud800")


# pydantic refuses a lone surrogate in a str field, so records carrying one are built
# unvalidated (`model_construct`, `model_copy`): a store must refuse them all the same.


def _key(case_id: str) -> CaseKey:
    return CaseKey.model_construct(workflow=WORKFLOW, case_id=case_id)


def _ref(case_id: str) -> CaseRef:
    return CaseRef.model_construct(workflow=WORKFLOW, case_id=case_id, expected_revision=1)


def _with(record: T, **changes: str) -> T:
    return record.model_copy(update=changes)


async def _world(stores: Stores) -> None:
    """A turn, a card due to expire, a pending command, an event, a claimed and a due outbox
    row, a replay record: something for every refused call to have touched."""
    await start_turn(stores, "turn_1")
    await stores.interactions.insert(build.card("int_1", expires_at=T0 + 10))
    await stores.journal.begin(build.journal_entry("cmd_1"))
    await stores.events.append(ACCOUNT_A, [build.event("evt_0")])
    await stores.outbox.enqueue(build.outbox_row("obx_1", created_at=T0 - 1))
    await stores.outbox.claim_due(T0, 1, "worker-0")
    await stores.outbox.enqueue(build.outbox_row("obx_2"))
    await stores.replay.put(build.replay_record("turn_1"))
    await stores.conversations.append_stream_events(ACCOUNT_A, [_progress(1)])


def _progress(sequence: int, turn: str = "turn_1") -> TurnStep:
    return TurnStep(turn_id=turn, sequence=sequence, at=T0, step="execute")


async def _state(stores: Stores) -> tuple[object, ...]:
    """Everything `_world` wrote, and anything a refused call could have added beside it."""
    return (
        await stores.conversations.list_turns(ACCOUNT_A, "conv_1"),
        await stores.conversations.list_unfinished_turns(100),
        await stores.interactions.open_for_conversation(ACCOUNT_A, "conv_1"),
        await stores.interactions.for_case(ACCOUNT_A, build.case().key),
        await stores.journal.for_turn(ACCOUNT_A, "turn_1"),
        await stores.events.read_from(ACCOUNT_A, EventCursor.START, 100),
        await stores.outbox.list_for_command("cmd_1"),
        await stores.replay.for_conversation(ACCOUNT_A, "conv_1"),
        await stores.conversations.stream_events(ACCOUNT_A, "turn_1", 0, 100),
    )


@check
async def check_a_limit_is_a_whole_number_from_one_to_the_maximum(stores: Stores) -> None:
    await _world(stores)
    before = await _state(stores)
    calls: dict[str, Call] = {
        "list_unfinished_turns": lambda n: stores.conversations.list_unfinished_turns(n),
        "recent_turns": lambda n: stores.conversations.recent_turns(ACCOUNT_A, "conv_1", n),
        "feed": lambda n: stores.conversations.feed(ACCOUNT_A, "conv_1", -1, n),
        "expire_due": lambda n: stores.interactions.expire_due(T0 + 20, n),
        "list_for_case": lambda n: stores.events.list_for_case(ACCOUNT_A, build.case().key, 0, n),
        "read_from": lambda n: stores.events.read_from(ACCOUNT_A, EventCursor.START, n),
        "claim_due": lambda n: stores.outbox.claim_due(T0, n, "worker-1"),
        "stream_events": lambda n: stores.conversations.stream_events(ACCOUNT_A, "turn_1", 0, n),
        "prune_stream_events": lambda n: stores.conversations.prune_stream_events(T0, n),
    }
    for name, call in calls.items():
        for limit in (True, False, 0, -1, MAX_LIMIT + 1, 2**63, 10**30, 1.5, "10"):
            await refused(InvalidRecord, call(limit), f"{name} with the limit {limit!r}")
    equal(await _state(stores), before, "the stores after the refused limits")
    for call in calls.values():
        await call(MAX_LIMIT)


@check
async def check_times_and_revisions_are_whole_numbers_in_their_range(stores: Stores) -> None:
    await _world(stores)
    before = await _state(stores)
    outbox, key = stores.outbox, build.case().key
    times: dict[str, Call] = {
        "expire_due": lambda t: stores.interactions.expire_due(t, 10),
        "claim_due": lambda t: outbox.claim_due(t, 10, "worker-1"),
        "mark_failed": lambda t: outbox.mark_failed("obx_1", "conformance.busy", retry_at=t),
        "reschedule": lambda t: outbox.reschedule("obx_2", t),
        "release_expired_claims": lambda t: outbox.release_expired_claims(t),
        "prune_stream_events": lambda t: stores.conversations.prune_stream_events(t, 10),
    }
    for name, call in times.items():
        for at in (True, -1, MAX_MILLIS + 1, 10**20, 1.5):
            await refused(InvalidRecord, call(at), f"{name} at {at!r}")
    revisions: dict[str, Call] = {
        "invalidate_for_revision": lambda r: stores.interactions.invalidate_for_revision(
            ACCOUNT_A, key, r
        ),
        "list_for_case": lambda r: stores.events.list_for_case(ACCOUNT_A, key, r, 10),
        "read_from": lambda r: stores.events.read_from(
            ACCOUNT_A, EventCursor.model_construct(sequence=r), 10
        ),
    }
    for name, call in revisions.items():
        for number in (True, -1, MAX_INTEGER + 1, 1.5):
            await refused(InvalidRecord, call(number), f"{name} from {number!r}")
    for after in (True, -2, MAX_INTEGER + 1, 1.5, "0"):
        await refused(
            InvalidRecord,
            stores.conversations.stream_events(ACCOUNT_A, "turn_1", after, 10),  # type: ignore[arg-type]
            f"stream_events after {after!r}",
        )
        await refused(
            InvalidRecord,
            stores.conversations.feed(ACCOUNT_A, "conv_1", after, 10),  # type: ignore[arg-type]
            f"feed after {after!r}",
        )
    equal(await _state(stores), before, "the stores after the refused times and revisions")
    await outbox.reschedule("obx_2", MAX_MILLIS)
    await stores.events.list_for_case(ACCOUNT_A, key, MAX_INTEGER, 10)
    for after in (-1, MAX_INTEGER):
        await stores.conversations.stream_events(ACCOUNT_A, "turn_1", after, 10)
        await stores.conversations.feed(ACCOUNT_A, "conv_1", after, 10)


@check
async def check_an_id_with_a_nul_or_a_lone_surrogate_is_invalid_for_every_reader(
    stores: Stores,
) -> None:
    await _world(stores)
    conversations, cards, journal = stores.conversations, stores.interactions, stores.journal
    events, outbox, replay = stores.events, stores.outbox, stores.replay
    idempotency_key = (await journal.get(ACCOUNT_A, "cmd_1")).idempotency_key
    token = (await replay.get(ACCOUNT_A, "turn_1")).replay_token
    probes: list[tuple[str, Call, str]] = [
        (
            "get_conversation's account",
            lambda x: conversations.get_conversation(x, "conv_1"),
            ACCOUNT_A,
        ),
        ("get_conversation", lambda x: conversations.get_conversation(ACCOUNT_A, x), "conv_1"),
        ("get_user_turn", lambda x: conversations.get_user_turn(ACCOUNT_A, x), "turn_1"),
        ("get_assistant_turn", lambda x: conversations.get_assistant_turn(ACCOUNT_A, x), "turn_1"),
        ("list_turns", lambda x: conversations.list_turns(ACCOUNT_A, x), "conv_1"),
        ("feed's account", lambda x: conversations.feed(x, "conv_1", -1, 10), ACCOUNT_A),
        ("feed", lambda x: conversations.feed(ACCOUNT_A, x, -1, 10), "conv_1"),
        ("get_phase", lambda x: conversations.get_phase(ACCOUNT_A, x), "turn_1"),
        ("interactions.get", lambda x: cards.get(ACCOUNT_A, x), "int_1"),
        ("open_for_conversation", lambda x: cards.open_for_conversation(ACCOUNT_A, x), "conv_1"),
        ("for_case", lambda x: cards.for_case(ACCOUNT_A, _key(x)), "case-1"),
        ("journal.get", lambda x: journal.get(ACCOUNT_A, x), "cmd_1"),
        ("get_by_key", lambda x: journal.get_by_key(ACCOUNT_A, x), idempotency_key),
        ("for_turn", lambda x: journal.for_turn(ACCOUNT_A, x), "turn_1"),
        ("unsettled_for_turn", lambda x: journal.unsettled_for_turn(ACCOUNT_A, x), "turn_1"),
        ("get_by_ids", lambda x: events.get_by_ids(ACCOUNT_A, ["evt_0", x]), "evt_0"),
        ("list_for_case", lambda x: events.list_for_case(ACCOUNT_A, _key(x), 0, 10), "case-1"),
        ("read_from's account", lambda x: events.read_from(x, EventCursor.START, 10), ACCOUNT_A),
        ("outbox.get", outbox.get, "obx_1"),
        ("list_for_command", outbox.list_for_command, "cmd_1"),
        ("replay.get", lambda x: replay.get(ACCOUNT_A, x), "turn_1"),
        ("get_by_token", lambda x: replay.get_by_token(ACCOUNT_A, x), token),
        ("for_conversation", lambda x: replay.for_conversation(ACCOUNT_A, x), "conv_1"),
        ("last_for_conversation", lambda x: replay.last_for_conversation(ACCOUNT_A, x), "conv_1"),
        (
            "stream_events's account",
            lambda x: conversations.stream_events(x, "turn_1", 0, 10),
            ACCOUNT_A,
        ),
        ("stream_events", lambda x: conversations.stream_events(ACCOUNT_A, x, 0, 10), "turn_1"),
        ("stream_tail", lambda x: conversations.stream_tail(ACCOUNT_A, x), "turn_1"),
    ]
    for name, probe, good in probes:
        for bad in _spoiled(good):
            await refused(InvalidRecord, probe(bad), f"{name} given {bad!r}")


@check
async def check_an_id_with_a_nul_or_a_lone_surrogate_is_invalid_for_every_writer(
    stores: Stores,
) -> None:
    await _world(stores)
    before = await _state(stores)
    conversations, cards, journal = stores.conversations, stores.interactions, stores.journal
    events, outbox = stores.events, stores.outbox
    resolved, failed = InteractionStatus.RESOLVED, FailedOutcome(code="conformance.failed")
    new_entry = build.journal_entry("cmd_2", payload={"n": 2})

    def bundle(case_id: str) -> CommitBundle:
        return CommitBundle(
            account_id=ACCOUNT_A,
            conversation_id="conv_1",
            turn_id="turn_1",
            events=(_with(build.event("evt_1"), case_id=case_id),),
            phase=TurnPhase.COMMITTED,
        )

    writes: list[tuple[str, Call, str]] = [
        (
            "ensure_conversation's account",
            lambda x: conversations.ensure_conversation(x, "conv_2"),
            ACCOUNT_A,
        ),
        (
            "ensure_conversation",
            lambda x: conversations.ensure_conversation(ACCOUNT_A, x),
            "conv_2",
        ),
        (
            "append_assistant_turn's account",
            lambda x: conversations.append_assistant_turn(x, build.assistant_turn("turn_1")),
            ACCOUNT_A,
        ),
        (
            "set_phase",
            lambda x: conversations.set_phase(ACCOUNT_A, x, TurnPhase.EXECUTING),
            "turn_1",
        ),
        (
            "append_stream_events's account",
            lambda x: conversations.append_stream_events(x, [_progress(2)]),
            ACCOUNT_A,
        ),
        (
            "append_stream_events's turn",
            lambda x: conversations.append_stream_events(
                ACCOUNT_A, [_with(_progress(1, "turn_2"), turn_id=x)]
            ),
            "turn_2",
        ),
        (
            "insert",
            lambda x: cards.insert(build.card("int_2").model_copy(update={"case_ref": _ref(x)})),
            "case-2",
        ),
        (
            "insert_replacing_blocking",
            lambda x: cards.insert_replacing_blocking(
                build.card("int_2").model_copy(update={"case_ref": _ref(x)})
            ),
            "case-1",
        ),
        ("begin_resolution", lambda x: cards.begin_resolution(ACCOUNT_A, "int_1", x), "opt_yes"),
        ("finish", lambda x: cards.finish(ACCOUNT_A, x, InteractionStatus.FAILED), "int_1"),
        (
            "finish's events",
            lambda x: cards.finish(ACCOUNT_A, "int_1", resolved, None, [x]),
            "evt_0",
        ),
        ("decline", lambda x: cards.decline(ACCOUNT_A, "int_1", x), "opt_no"),
        ("dismiss", lambda x: cards.dismiss(ACCOUNT_A, x), "int_1"),
        (
            "invalidate_for_revision",
            lambda x: cards.invalidate_for_revision(ACCOUNT_A, _key(x), 9),
            "case-1",
        ),
        (
            "invalidate_case_cards",
            lambda x: cards.invalidate_case_cards(ACCOUNT_A, _key(x)),
            "case-1",
        ),
        (
            "begin",
            lambda x: journal.begin(new_entry.model_copy(update={"case_ref": _ref(x)})),
            "case-1",
        ),
        (
            "begin's command type",
            lambda x: journal.begin(_with(new_entry, command_type=x)),
            "conformance.note",
        ),
        ("mark_executing", lambda x: journal.mark_executing(ACCOUNT_A, x), "cmd_1"),
        ("complete", lambda x: journal.complete(ACCOUNT_A, x, failed), "cmd_1"),
        (
            "append",
            lambda x: events.append(ACCOUNT_A, [_with(build.event("evt_1"), case_id=x)]),
            "case-1",
        ),
        (
            "append's event type",
            lambda x: events.append(ACCOUNT_A, [_with(build.event("evt_1"), event_type=x)]),
            "conformance.noted",
        ),
        (
            "enqueue's destination",
            lambda x: outbox.enqueue(_with(build.outbox_row("obx_3"), destination=x)),
            DESTINATION,
        ),
        (
            "enqueue's key",
            lambda x: outbox.enqueue(_with(build.outbox_row("obx_3"), idempotency_key=x)),
            "key-obx_3",
        ),
        ("claim_due's worker", lambda x: outbox.claim_due(T0, 10, x), "worker-1"),
        ("mark_completed", outbox.mark_completed, "obx_1"),
        ("mark_failed", lambda x: outbox.mark_failed(x, "conformance.busy"), "obx_1"),
        ("mark_failed's reason", lambda x: outbox.mark_failed("obx_1", x), "conformance.busy"),
        ("mark_outcome_unknown", lambda x: outbox.mark_outcome_unknown("obx_1", x), "remote-1"),
        ("reschedule", lambda x: outbox.reschedule(x, T0 + 5), "obx_2"),
        ("commit", lambda x: stores.commits.commit(bundle(x)), "case-1"),
    ]
    for name, write, good in writes:
        for bad in _spoiled(good):
            await refused(InvalidRecord, write(bad), f"{name} given {bad!r}")
    equal(await _state(stores), before, "the stores after the refused writes")
    await refused(
        NotFound, conversations.get_conversation(ACCOUNT_A, "conv_2"), "a refused conversation"
    )
