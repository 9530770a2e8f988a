"""Conformance checks: conversations, user and assistant turns, the phase marker."""

from __future__ import annotations

from turnframe_core.replay import TurnPhase
from turnframe_core.turn import AssistantTurn
from turnframe_store.bundle import Stores
from turnframe_store.conformance._data import _A, _B, _T0, _assistant_turn, _start_turn, _user_turn
from turnframe_store.conformance._expect import _equal, _refused
from turnframe_store.conformance._runner import _check
from turnframe_store.errors import Conflict, InvalidRecord, NotFound


@_check
async def check_a_user_turn_is_recorded_once_with_its_received_phase(stores: Stores) -> None:
    conversations = stores.conversations
    await _refused(
        NotFound,
        conversations.append_user_turn(_user_turn("turn_1")),
        "a user turn in a conversation that does not exist",
    )
    created = await conversations.ensure_conversation(_A, "conv_1")
    _equal(await conversations.ensure_conversation(_A, "conv_1"), created, "ensuring it again")
    _equal(await conversations.get_conversation(_A, "conv_1"), created, "the conversation")
    record = _user_turn("turn_1")
    await conversations.append_user_turn(record)
    _equal(await conversations.get_user_turn(_A, "turn_1"), record, "the stored user turn")
    marker = await conversations.get_phase(_A, "turn_1")
    _equal(
        (marker.phase, marker.conversation_id),
        (TurnPhase.RECEIVED, "conv_1"),
        "the marker a new turn gets",
    )
    await _refused(Conflict, conversations.append_user_turn(record), "the same turn again")
    await _refused(
        Conflict,
        conversations.append_user_turn(_user_turn("turn_1", text="something else")),
        "another user turn under a stored turn id",
    )
    _equal(await conversations.get_user_turn(_A, "turn_1"), record, "the user turn after both")
    await _refused(
        NotFound, conversations.get_assistant_turn(_A, "turn_1"), "an answer not yet stored"
    )


@_check
async def check_an_assistant_turn_is_written_once_and_reloads_identical(stores: Stores) -> None:
    conversations = stores.conversations
    await _start_turn(stores, "turn_1")
    turn = _assistant_turn("turn_1")
    await conversations.append_assistant_turn(_A, turn)
    loaded = await conversations.get_assistant_turn(_A, "turn_1")
    _equal(loaded.to_stored_json(), turn.to_stored_json(), "the reloaded turn's bytes")
    _equal(loaded, turn, "the reloaded turn")
    await conversations.append_assistant_turn(_A, turn)
    await _refused(
        Conflict,
        conversations.append_assistant_turn(_A, _assistant_turn("turn_1", text="Other words.")),
        "a different assistant turn under a stored turn id",
    )
    reloaded = await conversations.get_assistant_turn(_A, "turn_1")
    _equal(reloaded.to_stored_json(), turn.to_stored_json(), "the turn after a refused rewrite")
    await _refused(
        NotFound,
        conversations.append_assistant_turn(_A, _assistant_turn("turn_missing")),
        "an assistant turn without its user turn",
    )
    await _start_turn(stores, "turn_2")
    streaming = AssistantTurn.begin(
        turn_id="turn_2", conversation_id="conv_1", account_id=_A, locale="en", created_at=_T0
    )
    await _refused(
        InvalidRecord,
        conversations.append_assistant_turn(_A, streaming),
        "an assistant turn still streaming",
    )
    await conversations.append_assistant_turn(
        _A, _assistant_turn("turn_2"), phase=TurnPhase.DELIVERED
    )
    _equal(
        (await conversations.get_phase(_A, "turn_2")).phase,
        TurnPhase.DELIVERED,
        "the phase folded into the assistant turn's write",
    )


@_check
async def check_the_phase_marker_never_leaves_a_terminal_phase(stores: Stores) -> None:
    conversations = stores.conversations
    await _start_turn(stores, "turn_1")
    executing = await conversations.set_phase(_A, "turn_1", TurnPhase.EXECUTING)
    _equal(executing.phase, TurnPhase.EXECUTING, "the moved marker")
    _equal(await conversations.get_phase(_A, "turn_1"), executing, "the stored marker")
    delivered = await conversations.set_phase(_A, "turn_1", TurnPhase.DELIVERED)
    _equal(
        await conversations.set_phase(_A, "turn_1", TurnPhase.DELIVERED),
        delivered,
        "the same final phase again",
    )
    for phase in (TurnPhase.FAILED, TurnPhase.EXECUTING, TurnPhase.RECEIVED):
        await _refused(
            Conflict,
            conversations.set_phase(_A, "turn_1", phase),
            f"moving a delivered turn to {phase.value}",
        )
    _equal(await conversations.get_phase(_A, "turn_1"), delivered, "the final marker")
    await _refused(
        NotFound,
        conversations.set_phase(_A, "turn_missing", TurnPhase.EXECUTING),
        "the marker of a turn that does not exist",
    )


@_check
async def check_unfinished_turns_are_listed_after_an_interruption(stores: Stores) -> None:
    conversations = stores.conversations
    for turn in ("turn_1", "turn_2", "turn_3", "turn_4", "turn_5"):
        await _start_turn(stores, turn)
    await _start_turn(stores, "turn_6", account=_B)
    await conversations.set_phase(_A, "turn_2", TurnPhase.EXECUTING)
    await conversations.set_phase(_A, "turn_3", TurnPhase.DELIVERED)
    await conversations.set_phase(_A, "turn_4", TurnPhase.FAILED)
    await conversations.set_phase(_B, "turn_6", TurnPhase.COMPOSED)
    unfinished = await conversations.list_unfinished_turns(10)
    _equal(
        sorted((m.account_id, m.turn_id, m.phase) for m in unfinished),
        [
            (_A, "turn_1", TurnPhase.RECEIVED),
            (_A, "turn_2", TurnPhase.EXECUTING),
            (_A, "turn_5", TurnPhase.RECEIVED),
            (_B, "turn_6", TurnPhase.COMPOSED),
        ],
        "the unfinished turns of every account",
    )
    order = [(m.updated_at, m.account_id, m.turn_id) for m in unfinished]
    _equal(order, sorted(order), "the sort key (updated_at, account_id, turn_id)")
    _equal(
        await conversations.list_unfinished_turns(2), unfinished[:2], "the first two by that key"
    )


@_check
async def check_recent_turns_are_the_last_replies_oldest_first(stores: Stores) -> None:
    conversations = stores.conversations
    await conversations.ensure_conversation(_A, "conv_1")
    # received out of id order, and one turn without a reply
    for turn, at in (("turn_3", _T0 + 1), ("turn_1", _T0 + 2), ("turn_2", _T0 + 3)):
        await conversations.append_user_turn(_user_turn(turn, received_at=at))
    await conversations.append_user_turn(_user_turn("turn_4", received_at=_T0 + 4))
    for turn in ("turn_1", "turn_2", "turn_3"):
        await conversations.append_assistant_turn(_A, _assistant_turn(turn))
    recent = await conversations.recent_turns(_A, "conv_1", 2)
    _equal([t.turn_id for t in recent], ["turn_1", "turn_2"], "the last two replies")
    everything = await conversations.recent_turns(_A, "conv_1", 10)
    _equal([t.turn_id for t in everything], ["turn_3", "turn_1", "turn_2"], "all the replies")
    _equal(
        everything[0].to_stored_json(),
        _assistant_turn("turn_3").to_stored_json(),
        "a reply, byte for byte",
    )
    _equal(await conversations.recent_turns(_B, "conv_1", 10), (), "another account's view")
