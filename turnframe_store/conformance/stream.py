"""Conformance checks: each turn's stream log.

A turn's events are logged with sequences 1, 2, 3 … and read back equal to what was appended,
sorted by sequence. An event repeated at a logged sequence must equal the logged one; the first
new event comes right after the last logged one, and none follows a terminal event. A log is
pruned whole, once its terminal event is older than the cutoff.
"""

from __future__ import annotations

from turnframe_core.replay import TurnPhase
from turnframe_core.stream import (
    BlockStarted,
    StreamEvent,
    StreamMode,
    TurnCompleted,
    TurnFailed,
    TurnPhaseEvent,
    TurnStep,
    block_events,
)
from turnframe_store import MAX_INTEGER, MAX_MILLIS
from turnframe_store import builders as build
from turnframe_store.builders import ACCOUNT_A, ACCOUNT_B, T0
from turnframe_store.bundle import Stores
from turnframe_store.conformance.data import start_turn
from turnframe_store.conformance.expect import equal, refused
from turnframe_store.conformance.runner import check
from turnframe_store.errors import Conflict, InvalidRecord, NotFound
from turnframe_store.records import CommitBundle


def _steps(
    turn: str, first: int, count: int, *, at: int = T0, step: str = "understand"
) -> list[StreamEvent]:
    """`count` progress events of `turn`, numbered from `first`."""
    return [
        TurnStep(turn_id=turn, sequence=sequence, at=at, step=step)
        for sequence in range(first, first + count)
    ]


def _failed(turn: str, sequence: int, *, at: int = T0) -> TurnFailed:
    return TurnFailed(turn_id=turn, sequence=sequence, at=at, code="conformance.failed")


def _completed(
    turn: str, sequence: int, *, at: int = T0, account: str = ACCOUNT_A
) -> TurnCompleted:
    return TurnCompleted(
        turn_id=turn, sequence=sequence, at=at, turn=build.assistant_turn(turn, account=account)
    )


def _reply_events(turn: str, first: int, *, at: int = T0) -> list[StreamEvent]:
    """A reply as streamed: its block token by token, then the completed turn."""
    answer = build.assistant_turn(turn)
    events = block_events(
        answer.blocks[0], 0, turn_id=turn, first_sequence=first, at=at, mode=StreamMode.TOKENS
    )
    events.append(TurnCompleted(turn_id=turn, sequence=first + len(events), at=at, turn=answer))
    return events


async def _log(stores: Stores, turn: str, *, account: str = ACCOUNT_A) -> tuple[StreamEvent, ...]:
    return await stores.conversations.stream_events(account, turn, 0, 1000)


@check
async def check_stream_events_are_logged_in_order_and_read_back_equal(stores: Stores) -> None:
    conversations = stores.conversations
    await start_turn(stores, "turn_1")
    # The times do not follow the sequences (a clock stepped back): the log is sorted by sequence.
    events: list[StreamEvent] = [
        TurnPhaseEvent(turn_id="turn_1", sequence=1, at=T0 + 9, phase=TurnPhase.EXECUTING),
        TurnStep(turn_id="turn_1", sequence=2, at=T0 + 3, step="compose"),
        *_reply_events("turn_1", 3, at=T0 + 1),
    ]
    await conversations.append_stream_events(ACCOUNT_A, events[:2])
    await conversations.append_stream_events(ACCOUNT_A, events[2:])
    equal(await _log(stores, "turn_1"), tuple(events), "the log, read from the start")
    equal(
        await conversations.stream_events(ACCOUNT_A, "turn_1", -1, 1000),
        tuple(events),
        "the log, read from before the start",
    )


@check
async def check_a_stream_is_read_after_a_sequence_at_most_limit_events_at_a_time(
    stores: Stores,
) -> None:
    conversations = stores.conversations
    await start_turn(stores, "turn_1")
    events = _steps("turn_1", 1, 5)
    await conversations.append_stream_events(ACCOUNT_A, events)
    equal(
        await conversations.stream_events(ACCOUNT_A, "turn_1", 2, 2),
        tuple(events[2:4]),
        "two events after sequence 2",
    )
    equal(
        await conversations.stream_events(ACCOUNT_A, "turn_1", 4, 10),
        tuple(events[4:]),
        "the events after sequence 4",
    )
    for after in (5, 6, MAX_INTEGER):
        equal(
            await conversations.stream_events(ACCOUNT_A, "turn_1", after, 10), (), f"after {after}"
        )
    paged: list[StreamEvent] = []
    after = 0
    while page := await conversations.stream_events(ACCOUNT_A, "turn_1", after, 2):
        paged.extend(page)
        after = page[-1].sequence
    equal(paged, events, "the log paged two at a time")


@check
async def check_the_stream_tail_is_the_last_logged_event(stores: Stores) -> None:
    conversations = stores.conversations
    await start_turn(stores, "turn_1")
    equal(await conversations.stream_tail(ACCOUNT_A, "turn_1"), None, "the tail of an empty log")
    equal(await conversations.stream_tail(ACCOUNT_A, "turn_missing"), None, "the tail of no turn")
    events = [*_steps("turn_1", 1, 3), _completed("turn_1", 4)]
    await conversations.append_stream_events(ACCOUNT_A, events[:3])
    equal(await conversations.stream_tail(ACCOUNT_A, "turn_1"), events[2], "the tail")
    await conversations.append_stream_events(ACCOUNT_A, events[3:])
    equal(await conversations.stream_tail(ACCOUNT_A, "turn_1"), events[3], "the tail once it ended")


@check
async def check_a_logged_stream_event_repeated_unchanged_is_accepted_and_not_logged_again(
    stores: Stores,
) -> None:
    conversations = stores.conversations
    await start_turn(stores, "turn_1")
    events = [*_steps("turn_1", 1, 3), _failed("turn_1", 4)]
    await conversations.append_stream_events(ACCOUNT_A, events[:3])
    await conversations.append_stream_events(ACCOUNT_A, events[1:3])
    await conversations.append_stream_events(ACCOUNT_A, events[2:4])
    await conversations.append_stream_events(ACCOUNT_A, events)
    await conversations.append_stream_events(ACCOUNT_A, events[3:])
    equal(await _log(stores, "turn_1"), tuple(events), "the log after the repeats")


@check
async def check_a_different_event_at_a_logged_sequence_is_a_conflict(stores: Stores) -> None:
    conversations = stores.conversations
    await start_turn(stores, "turn_1")
    events = _steps("turn_1", 1, 2)
    await conversations.append_stream_events(ACCOUNT_A, events)
    others: dict[str, list[StreamEvent]] = {
        "another event at sequence 2": _steps("turn_1", 2, 1, step="execute"),
        "another event at sequence 2, then a new one": _steps("turn_1", 2, 2, step="execute"),
        "the first event at another time": _steps("turn_1", 1, 1, at=T0 + 1),
        "a terminal event at sequence 2": [_failed("turn_1", 2)],
    }
    for what, batch in others.items():
        await refused(Conflict, conversations.append_stream_events(ACCOUNT_A, batch), what)
    equal(await _log(stores, "turn_1"), tuple(events), "the log after the refused batches")


@check
async def check_a_stream_event_that_leaves_a_gap_is_a_conflict(stores: Stores) -> None:
    conversations = stores.conversations
    await start_turn(stores, "turn_1")
    await refused(
        Conflict,
        conversations.append_stream_events(ACCOUNT_A, _steps("turn_1", 2, 1)),
        "a first event at sequence 2",
    )
    equal(await _log(stores, "turn_1"), (), "the log after a refused first event")
    events = _steps("turn_1", 1, 2)
    await conversations.append_stream_events(ACCOUNT_A, events)
    await refused(
        Conflict,
        conversations.append_stream_events(ACCOUNT_A, _steps("turn_1", 4, 2)),
        "events from sequence 4 after sequence 2",
    )
    equal(await _log(stores, "turn_1"), tuple(events), "the log after a refused gap")


@check
async def check_nothing_is_logged_after_a_terminal_event(stores: Stores) -> None:
    conversations = stores.conversations
    ends: tuple[tuple[str, StreamEvent], ...] = (
        ("turn_1", _completed("turn_1", 3)),
        ("turn_2", _failed("turn_2", 3)),
    )
    for turn, end in ends:
        await start_turn(stores, turn)
        events = [*_steps(turn, 1, 2), end]
        await conversations.append_stream_events(ACCOUNT_A, events)
        after: dict[str, list[StreamEvent]] = {
            "a progress event": _steps(turn, 4, 1),
            "another terminal event": [_failed(turn, 4)],
        }
        for what, batch in after.items():
            await refused(
                Conflict,
                conversations.append_stream_events(ACCOUNT_A, batch),
                f"{what} after {end.type}",
            )
        equal(await _log(stores, turn), tuple(events), f"the log that ended with {end.type}")


@check
async def check_an_invalid_stream_batch_is_refused_and_writes_nothing(stores: Stores) -> None:
    conversations = stores.conversations
    await start_turn(stores, "turn_1")
    await start_turn(stores, "turn_2")
    events = _steps("turn_1", 1, 2)
    await conversations.append_stream_events(ACCOUNT_A, events)
    unrepresentable = BlockStarted(
        turn_id="turn_1",
        sequence=3,
        at=T0,
        block_id="blk_1",
        block_kind="answer",
        index=0,
        author="server",
        fields={"score": float("nan")},
    )
    batches: dict[str, list[StreamEvent]] = {
        "no events": [],
        "events of two turns": [*_steps("turn_1", 3, 1), *_steps("turn_2", 4, 1)],
        "sequences that skip one": [*_steps("turn_1", 3, 1), *_steps("turn_1", 5, 1)],
        "a sequence twice": [*_steps("turn_1", 3, 1), *_steps("turn_1", 3, 1)],
        "a terminal event before the last": [_failed("turn_1", 3), *_steps("turn_1", 4, 1)],
        "an event at sequence 0": _steps("turn_2", 0, 2),
        "a sequence past the largest integer": [
            _steps("turn_1", 3, 1)[0].model_copy(update={"sequence": MAX_INTEGER + 1})
        ],
        "a time past the largest time": _steps("turn_1", 3, 1, at=MAX_MILLIS + 1),
        "an event with no canonical form": [unrepresentable],
    }
    for what, batch in batches.items():
        await refused(InvalidRecord, conversations.append_stream_events(ACCOUNT_A, batch), what)
    equal(await _log(stores, "turn_1"), tuple(events), "the log after the refused batches")
    equal(await _log(stores, "turn_2"), (), "the other turn's log")


@check
async def check_a_stream_is_logged_only_beside_its_user_turn(stores: Stores) -> None:
    conversations = stores.conversations
    await start_turn(stores, "turn_1")
    await start_turn(stores, "turn_2", account=ACCOUNT_B)
    events = _steps("turn_1", 1, 2)
    await conversations.append_stream_events(ACCOUNT_A, events)
    await refused(
        NotFound,
        conversations.append_stream_events(ACCOUNT_A, _steps("turn_missing", 1, 1)),
        "a stream of a turn that does not exist",
    )
    await refused(
        NotFound,
        conversations.append_stream_events(ACCOUNT_A, _steps("turn_2", 1, 1)),
        "a stream of another account's turn",
    )
    await refused(
        NotFound,
        conversations.append_stream_events(ACCOUNT_B, _steps("turn_1", 3, 1)),
        "more events of another account's turn",
    )
    equal(await _log(stores, "turn_1"), tuple(events), "the log after the refused streams")
    equal(await _log(stores, "turn_missing"), (), "the log of the missing turn")
    equal(
        await _log(stores, "turn_2", account=ACCOUNT_B), (), "the log of the other account's turn"
    )


@check
async def check_another_accounts_stream_is_invisible(stores: Stores) -> None:
    conversations = stores.conversations
    await start_turn(stores, "turn_1")
    await start_turn(stores, "turn_2")
    await start_turn(stores, "turn_1", account=ACCOUNT_B)
    mine = _steps("turn_1", 1, 2, step="mine")
    theirs = _steps("turn_1", 1, 1, step="theirs")
    await conversations.append_stream_events(ACCOUNT_A, mine)
    await conversations.append_stream_events(ACCOUNT_A, _steps("turn_2", 1, 1))
    await conversations.append_stream_events(ACCOUNT_B, theirs)
    equal(await _log(stores, "turn_1"), tuple(mine), "account A's log of turn_1")
    equal(
        await _log(stores, "turn_1", account=ACCOUNT_B), tuple(theirs), "account B's log of turn_1"
    )
    equal(await _log(stores, "turn_2", account=ACCOUNT_B), (), "account A's turn_2, read by B")
    equal(await conversations.stream_tail(ACCOUNT_B, "turn_2"), None, "its tail, read by B")


@check
async def check_the_prune_sweep_deletes_only_logs_that_ended_before_the_cutoff(
    stores: Stores,
) -> None:
    conversations = stores.conversations
    cutoff = T0 + 20
    ended = {  # turn -> (account, the time its terminal event was logged)
        "turn_1": (ACCOUNT_A, T0 + 10),
        "turn_3": (ACCOUNT_B, T0 + 5),
        "turn_5": (ACCOUNT_A, T0 + 15),
        "turn_2": (ACCOUNT_A, cutoff),
    }
    for turn, (account, at) in ended.items():
        await start_turn(stores, turn, account=account)
        end = _completed(turn, 2, at=at, account=account)
        await conversations.append_stream_events(account, [*_steps(turn, 1, 1), end])
        await conversations.set_phase(account, turn, TurnPhase.DELIVERED)
    await start_turn(stores, "turn_4")
    await conversations.append_stream_events(ACCOUNT_A, _steps("turn_4", 1, 2))
    old = ("turn_1", "turn_3", "turn_5")

    async def left(turns: tuple[str, ...]) -> list[str]:
        return [turn for turn in turns if await _log(stores, turn, account=ended[turn][0])]

    equal(await conversations.prune_stream_events(cutoff, 2), 2, "logs pruned, at most 2")
    equal(len(await left(old)), 1, "the old logs left after pruning 2 of them")
    equal(await conversations.prune_stream_events(cutoff, 10), 1, "logs pruned next")
    equal(await left(old), [], "the old logs left")
    equal(await conversations.prune_stream_events(cutoff, 10), 0, "logs pruned once more")
    equal(await conversations.stream_tail(ACCOUNT_A, "turn_1"), None, "a pruned log's tail")
    equal(len(await _log(stores, "turn_2")), 2, "the log that ended at the cutoff")
    equal(len(await _log(stores, "turn_4")), 2, "the log that has not ended")
    equal(await conversations.prune_stream_events(cutoff + 1, 10), 1, "logs pruned later")
    equal(await _log(stores, "turn_2"), (), "the log that ended at the earlier cutoff")
    equal(len(await _log(stores, "turn_4")), 2, "the log that never ended")


@check
async def check_the_prune_sweep_keeps_the_log_of_a_turn_that_has_not_ended(
    stores: Stores,
) -> None:
    """A reply whose outcome is unknown is stored and its log ended, but its turn is unfinished
    (marker `committed`) until recovery settles it: its log stays until the turn ends."""
    conversations = stores.conversations
    await start_turn(stores, "turn_1")
    await conversations.append_stream_events(
        ACCOUNT_A, [*_steps("turn_1", 1, 1), _completed("turn_1", 2)]
    )
    await conversations.set_phase(ACCOUNT_A, "turn_1", TurnPhase.COMMITTED)
    equal(await conversations.prune_stream_events(T0 + 100, 10), 0, "logs pruned")
    equal(len(await _log(stores, "turn_1")), 2, "the log of the unfinished turn")
    await conversations.set_phase(ACCOUNT_A, "turn_1", TurnPhase.DELIVERED)
    equal(await conversations.prune_stream_events(T0 + 100, 10), 1, "logs pruned once it ended")
    equal(await _log(stores, "turn_1"), (), "the log of the ended turn")


@check
async def check_a_commit_bundle_logs_its_stream_events_after_its_assistant_turn(
    stores: Stores,
) -> None:
    conversations = stores.conversations
    await start_turn(stores, "turn_1")
    progress: list[StreamEvent] = [
        TurnPhaseEvent(turn_id="turn_1", sequence=1, at=T0, phase=TurnPhase.EXECUTING),
        TurnStep(turn_id="turn_1", sequence=2, at=T0, step="compose"),
    ]
    await conversations.append_stream_events(ACCOUNT_A, progress)
    reply = _reply_events("turn_1", 3, at=T0 + 1)
    answer = build.assistant_turn("turn_1")
    bundle = CommitBundle(
        account_id=ACCOUNT_A,
        conversation_id="conv_1",
        turn_id="turn_1",
        assistant_turn=answer,
        phase=TurnPhase.DELIVERED,
        stream_events=tuple(reply),
    )
    await stores.commits.commit(bundle)
    equal(await _log(stores, "turn_1"), (*progress, *reply), "the log after the commit")
    stored = await conversations.get_assistant_turn(ACCOUNT_A, "turn_1")
    equal(stored.to_stored_json(), answer.to_stored_json(), "the assistant turn")
    await stores.commits.commit(bundle)
    equal(await _log(stores, "turn_1"), (*progress, *reply), "the log after the same bundle")
