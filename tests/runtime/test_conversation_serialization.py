"""One turn at a time per conversation: two turns of one conversation never interleave, a turn
that waits past the configured bound is refused with `ConversationBusy` having written nothing,
and other conversations are not held up."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from turnframe_core import Brief, TurnInput, Understanding, verify_chain
from turnframe_runtime import ConversationBusy, RuntimeConfig
from turnframe_store import NotFound
from turnframe_test import DeskHarness, act, understanding

NAME = "trip.set_name"


def _turn(n: int, conversation_id: str = "conv_1") -> TurnInput:
    return TurnInput(
        account_id="acct_1",
        conversation_id=conversation_id,
        text=f"Name Grace Hopper {n}",
        turn_id=f"turn_s{n}",
    )


def _slow_interpreter(
    desk: DeskHarness,
    log: list[str],
    gate: asyncio.Event | None = None,
    started: asyncio.Event | None = None,
) -> None:
    """Each call logs its start and end and (with `gate`) waits for it in between; `started` is
    set once a call began (its turn holds the conversation)."""

    async def understand(brief: Brief) -> Understanding:
        label = brief.text or ""
        log.append(f"start {label}")
        if started is not None:
            started.set()
        if gate is not None:
            await gate.wait()
        await asyncio.sleep(0.01)
        log.append(f"end {label}")
        return understanding(act("a1", NAME, "h1", "Grace", name="Grace Hopper"))

    desk.interpreter.understand = understand  # type: ignore[method-assign]


async def test_two_turns_of_one_conversation_never_interleave(desk: DeskHarness) -> None:
    desk.ready_trip()
    log: list[str] = []
    _slow_interpreter(desk, log)
    await asyncio.gather(*(desk.runtime.handle_turn(_turn(n)) for n in range(4)))
    starts = [i for i, line in enumerate(log) if line.startswith("start")]
    assert all(log[i + 1] == log[i].replace("start", "end") for i in starts)
    records = await desk.stores.replay.for_conversation("acct_1", "conv_1")
    assert len(records) == 4 and verify_chain(records) == []  # no false alarm


async def test_a_turn_that_waits_too_long_is_refused_and_writes_nothing(make_desk) -> None:
    desk: DeskHarness = await make_desk(
        config=RuntimeConfig(locales=("en", "it"), conversation_wait_ms=100)
    )
    desk.ready_trip()
    gate, started = asyncio.Event(), asyncio.Event()
    _slow_interpreter(desk, [], gate, started)
    first = asyncio.create_task(desk.runtime.handle_turn(_turn(1)))
    await asyncio.wait_for(started.wait(), 10)  # the first turn holds the conversation
    with pytest.raises(ConversationBusy):
        await desk.runtime.handle_turn(_turn(2))
    with pytest.raises(NotFound):
        await desk.stores.conversations.get_user_turn("acct_1", "turn_s2")
    gate.set()
    assert (await first).turn_id == "turn_s1"
    again = await desk.runtime.handle_turn(_turn(2))  # once free, the same request runs
    assert desk.receipt_codes(again) == []  # the name was already Grace Hopper 1's


async def test_other_conversations_are_not_held_up(desk: DeskHarness) -> None:
    desk.ready_trip()
    desk.conversation_id = "conv_2"
    desk.ready_trip("T-200")
    gate, started = asyncio.Event(), asyncio.Event()
    log: list[str] = []
    _slow_interpreter(desk, log, gate, started)
    blocked = asyncio.create_task(desk.runtime.handle_turn(_turn(1, "conv_1")))
    await asyncio.wait_for(started.wait(), 10)  # conv_1's turn holds its conversation

    async def other(brief: Any) -> Understanding:
        return understanding(act("a1", NAME, "h1", "Grace", name="Grace Hopper"))

    desk.interpreter.understand = other  # type: ignore[method-assign]
    done = await asyncio.wait_for(desk.runtime.handle_turn(_turn(2, "conv_2")), 10)
    assert done.conversation_id == "conv_2" and not blocked.done()
    gate.set()
    await blocked
