"""Conformance checks: conversations, user and assistant turns, the phase marker."""

from __future__ import annotations

from turnframe_core.replay import TurnPhase
from turnframe_core.turn import AssistantTurn
from turnframe_store import builders as build
from turnframe_store.builders import ACCOUNT_A, ACCOUNT_B, T0
from turnframe_store.bundle import Stores
from turnframe_store.conformance.data import start_turn
from turnframe_store.conformance.expect import equal, refused
from turnframe_store.conformance.runner import check
from turnframe_store.errors import Conflict, InvalidRecord, NotFound


@check
async def check_a_user_turn_is_recorded_once_with_its_received_phase(stores: Stores) -> None:
    conversations = stores.conversations
    await refused(
        NotFound,
        conversations.append_user_turn(build.user_turn("turn_1")),
        "a user turn in a conversation that does not exist",
    )
    created = await conversations.ensure_conversation(ACCOUNT_A, "conv_1")
    equal(
        await conversations.ensure_conversation(ACCOUNT_A, "conv_1"), created, "ensuring it again"
    )
    equal(await conversations.get_conversation(ACCOUNT_A, "conv_1"), created, "the conversation")
    record = build.user_turn("turn_1")
    await conversations.append_user_turn(record)
    equal(await conversations.get_user_turn(ACCOUNT_A, "turn_1"), record, "the stored user turn")
    marker = await conversations.get_phase(ACCOUNT_A, "turn_1")
    equal(
        (marker.phase, marker.conversation_id),
        (TurnPhase.RECEIVED, "conv_1"),
        "the marker a new turn gets",
    )
    await refused(Conflict, conversations.append_user_turn(record), "the same turn again")
    await refused(
        Conflict,
        conversations.append_user_turn(build.user_turn("turn_1", text="something else")),
        "another user turn under a stored turn id",
    )
    equal(
        await conversations.get_user_turn(ACCOUNT_A, "turn_1"), record, "the user turn after both"
    )
    await refused(
        NotFound, conversations.get_assistant_turn(ACCOUNT_A, "turn_1"), "an answer not yet stored"
    )


@check
async def check_an_assistant_turn_is_written_once_and_reloads_identical(stores: Stores) -> None:
    conversations = stores.conversations
    await start_turn(stores, "turn_1")
    turn = build.assistant_turn("turn_1")
    await conversations.append_assistant_turn(ACCOUNT_A, turn)
    loaded = await conversations.get_assistant_turn(ACCOUNT_A, "turn_1")
    equal(loaded.to_stored_json(), turn.to_stored_json(), "the reloaded turn's bytes")
    equal(loaded, turn, "the reloaded turn")
    await conversations.append_assistant_turn(ACCOUNT_A, turn)
    await refused(
        Conflict,
        conversations.append_assistant_turn(
            ACCOUNT_A, build.assistant_turn("turn_1", text="Other words.")
        ),
        "a different assistant turn under a stored turn id",
    )
    reloaded = await conversations.get_assistant_turn(ACCOUNT_A, "turn_1")
    equal(reloaded.to_stored_json(), turn.to_stored_json(), "the turn after a refused rewrite")
    await refused(
        NotFound,
        conversations.append_assistant_turn(ACCOUNT_A, build.assistant_turn("turn_missing")),
        "an assistant turn without its user turn",
    )
    await start_turn(stores, "turn_2")
    streaming = AssistantTurn.begin(
        turn_id="turn_2", conversation_id="conv_1", account_id=ACCOUNT_A, locale="en", created_at=T0
    )
    await refused(
        InvalidRecord,
        conversations.append_assistant_turn(ACCOUNT_A, streaming),
        "an assistant turn still streaming",
    )
    await conversations.append_assistant_turn(
        ACCOUNT_A, build.assistant_turn("turn_2"), phase=TurnPhase.DELIVERED
    )
    equal(
        (await conversations.get_phase(ACCOUNT_A, "turn_2")).phase,
        TurnPhase.DELIVERED,
        "the phase folded into the assistant turn's write",
    )


@check
async def check_the_phase_marker_never_leaves_a_terminal_phase(stores: Stores) -> None:
    conversations = stores.conversations
    await start_turn(stores, "turn_1")
    executing = await conversations.set_phase(ACCOUNT_A, "turn_1", TurnPhase.EXECUTING)
    equal(executing.phase, TurnPhase.EXECUTING, "the moved marker")
    equal(await conversations.get_phase(ACCOUNT_A, "turn_1"), executing, "the stored marker")
    delivered = await conversations.set_phase(ACCOUNT_A, "turn_1", TurnPhase.DELIVERED)
    equal(
        await conversations.set_phase(ACCOUNT_A, "turn_1", TurnPhase.DELIVERED),
        delivered,
        "the same final phase again",
    )
    for phase in (TurnPhase.FAILED, TurnPhase.EXECUTING, TurnPhase.RECEIVED):
        await refused(
            Conflict,
            conversations.set_phase(ACCOUNT_A, "turn_1", phase),
            f"moving a delivered turn to {phase.value}",
        )
    equal(await conversations.get_phase(ACCOUNT_A, "turn_1"), delivered, "the final marker")
    await refused(
        NotFound,
        conversations.set_phase(ACCOUNT_A, "turn_missing", TurnPhase.EXECUTING),
        "the marker of a turn that does not exist",
    )


@check
async def check_unfinished_turns_are_listed_after_an_interruption(stores: Stores) -> None:
    conversations = stores.conversations
    for turn in ("turn_1", "turn_2", "turn_3", "turn_4", "turn_5"):
        await start_turn(stores, turn)
    await start_turn(stores, "turn_6", account=ACCOUNT_B)
    await conversations.set_phase(ACCOUNT_A, "turn_2", TurnPhase.EXECUTING)
    await conversations.set_phase(ACCOUNT_A, "turn_3", TurnPhase.DELIVERED)
    await conversations.set_phase(ACCOUNT_A, "turn_4", TurnPhase.FAILED)
    await conversations.set_phase(ACCOUNT_B, "turn_6", TurnPhase.COMPOSED)
    unfinished = await conversations.list_unfinished_turns(10)
    equal(
        sorted((m.account_id, m.turn_id, m.phase) for m in unfinished),
        [
            (ACCOUNT_A, "turn_1", TurnPhase.RECEIVED),
            (ACCOUNT_A, "turn_2", TurnPhase.EXECUTING),
            (ACCOUNT_A, "turn_5", TurnPhase.RECEIVED),
            (ACCOUNT_B, "turn_6", TurnPhase.COMPOSED),
        ],
        "the unfinished turns of every account",
    )
    order = [(m.updated_at, m.account_id, m.turn_id) for m in unfinished]
    equal(order, sorted(order), "the sort key (updated_at, account_id, turn_id)")
    equal(await conversations.list_unfinished_turns(2), unfinished[:2], "the first two by that key")


@check
async def check_recent_turns_are_the_last_replies_oldest_first(stores: Stores) -> None:
    conversations = stores.conversations
    await conversations.ensure_conversation(ACCOUNT_A, "conv_1")
    # received out of id order, and one turn without a reply
    for turn, at in (("turn_3", T0 + 1), ("turn_1", T0 + 2), ("turn_2", T0 + 3)):
        await conversations.append_user_turn(build.user_turn(turn, received_at=at))
    await conversations.append_user_turn(build.user_turn("turn_4", received_at=T0 + 4))
    for turn in ("turn_1", "turn_2", "turn_3"):
        await conversations.append_assistant_turn(ACCOUNT_A, build.assistant_turn(turn))
    recent = await conversations.recent_turns(ACCOUNT_A, "conv_1", 2)
    equal([t.turn_id for t in recent], ["turn_1", "turn_2"], "the last two replies")
    everything = await conversations.recent_turns(ACCOUNT_A, "conv_1", 10)
    equal([t.turn_id for t in everything], ["turn_3", "turn_1", "turn_2"], "all the replies")
    equal(
        everything[0].to_stored_json(),
        build.assistant_turn("turn_3").to_stored_json(),
        "a reply, byte for byte",
    )
    equal(await conversations.recent_turns(ACCOUNT_B, "conv_1", 10), (), "another account's view")


@check
async def check_the_feed_reads_a_conversations_replies_in_commit_order_after_a_position(
    stores: Stores,
) -> None:
    conversations, replay = stores.conversations, stores.replay
    for turn in ("turn_1", "turn_2", "turn_3", "turn_4"):
        await start_turn(stores, turn)
    await start_turn(stores, "turn_5", conversation="conv_2")
    await start_turn(stores, "turn_6", account=ACCOUNT_B)
    # made final out of id order; turn_3 fails with no reply, turn_4 is still running
    for turn, at in (("turn_2", T0 + 1), ("turn_1", T0 + 2)):
        await conversations.append_assistant_turn(ACCOUNT_A, build.assistant_turn(turn))
        await replay.put(build.replay_record(turn, phase=TurnPhase.DELIVERED, recorded_at=at))
    await replay.put(build.replay_record("turn_3", phase=TurnPhase.FAILED, recorded_at=T0 + 3))
    await replay.put(build.replay_record("turn_4", recorded_at=T0 + 4))
    await conversations.append_assistant_turn(
        ACCOUNT_A, build.assistant_turn("turn_5", conversation="conv_2")
    )
    await replay.put(
        build.replay_record("turn_5", conversation="conv_2", phase=TurnPhase.DELIVERED)
    )
    await conversations.append_assistant_turn(
        ACCOUNT_B, build.assistant_turn("turn_6", account=ACCOUNT_B)
    )
    await replay.put(build.replay_record("turn_6", account=ACCOUNT_B, phase=TurnPhase.DELIVERED))
    feed = await conversations.feed(ACCOUNT_A, "conv_1", -1, 10)
    equal(
        [(entry.position, entry.turn_id, entry.turn is None) for entry in feed],
        [(0, "turn_2", False), (1, "turn_1", False), (2, "turn_3", True)],
        "the feed: every final record in commit order, a reply only where one is stored",
    )
    equal(
        [entry.turn.to_stored_json() for entry in feed if entry.turn is not None],
        [build.assistant_turn(t).to_stored_json() for t in ("turn_2", "turn_1")],
        "the replies, byte for byte",
    )
    equal(await conversations.feed(ACCOUNT_A, "conv_1", 0, 10), feed[1:], "after position 0")
    equal(await conversations.feed(ACCOUNT_A, "conv_1", -1, 2), feed[:2], "at most two")
    equal(await conversations.feed(ACCOUNT_A, "conv_1", 2, 10), (), "after the last position")
    equal(
        [e.turn_id for e in await conversations.feed(ACCOUNT_A, "conv_2", -1, 10)],
        ["turn_5"],
        "another conversation's feed",
    )
    equal(
        [(e.position, e.turn_id) for e in await conversations.feed(ACCOUNT_B, "conv_1", -1, 10)],
        [(0, "turn_6")],
        "another account's conversation of the same id: its own turns only",
    )
    equal(await conversations.feed(ACCOUNT_A, "conv_9", -1, 10), (), "a missing conversation")
    equal(await conversations.feed("acct_other", "conv_1", -1, 10), (), "a foreign account")
