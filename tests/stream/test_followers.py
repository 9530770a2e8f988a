"""Followers of a turn's stream (docs/streaming.md) on every backend: a follower ends only after
the terminal event, whatever commits between its reads; a pruned log is `StreamExpired`
followed or not; followers per turn are bounded, with a typed refusal; a follower of a turn
nobody runs reads less and less often."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from turnframe_core import StreamEvent, TurnInput, codes, is_terminal
from turnframe_runtime import RuntimeConfig, StreamExpired, TooManyFollowers
from turnframe_test import DeskHarness, act, understanding
from turnframe_test.domains.travel import ProcessCrash

NAME = "trip.set_name"


def _name(turn_id: str = "turn_f1") -> TurnInput:
    return TurnInput(
        account_id="acct_1", conversation_id="conv_1", text="Name Grace Hopper", turn_id=turn_id
    )


def _script_name(desk: DeskHarness) -> None:
    desk.interpreter.then(understanding(act("a1", NAME, "h1", "Grace", name="Grace Hopper")))
    desk.clock.advance(1_000)


async def _collect(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


async def _crash(desk: DeskHarness) -> None:
    """A turn whose process died mid-effect: its log (with `stream_every_turn`, since
    `handle_turn` streams nothing) holds progress and no end."""
    _script_name(desk)
    desk.executor.arm_after_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):
        await desk.runtime.handle_turn(_name())


async def test_a_follower_whose_first_read_came_before_the_commit_reads_every_event(
    desk: DeskHarness,
) -> None:
    """The race a reader meets under load: its page read finds nothing, the turn then commits
    and ends, and the next read of the log's tail sees the terminal event. The follower reads
    on from where it was and yields every event, the terminal one last."""
    desk.ready_trip()
    _script_name(desk)
    streamed = await _collect(desk.runtime.stream_turn(_name()))
    turn = streamed[-1].turn  # type: ignore[union-attr]
    logged = await _collect(desk.runtime.resume_stream("acct_1", turn.turn_id))
    assert logged == streamed
    conversations = desk.stores.conversations
    real = conversations.stream_events
    reads = 0

    async def first_read_before_the_commit(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return () if reads == 1 else await real(*args, **kwargs)

    conversations.stream_events = first_read_before_the_commit  # type: ignore[method-assign]
    try:
        followed = await _collect(desk.runtime.resume_stream("acct_1", turn.turn_id))
    finally:
        conversations.stream_events = real  # type: ignore[method-assign]
    assert followed == logged
    assert is_terminal(followed[-1])


async def test_many_followers_of_a_turn_finished_elsewhere_each_end_with_its_terminal_event(
    make_desk,
) -> None:
    """Readers on a runtime that shares no wake-ups with the one that finishes the turn (as in
    another process) poll the log while the turn commits: each reads the whole stream."""
    config = RuntimeConfig(stream_poll_ms=1, stream_poll_max_ms=4, stream_every_turn=True)
    desk: DeskHarness = await make_desk(config=config)
    desk.ready_trip()
    await _crash(desk)
    other: DeskHarness = await make_desk(stores=desk.stores, config=config)
    followers = [
        asyncio.ensure_future(_collect(other.runtime.resume_stream("acct_1", "turn_f1")))
        for _ in range(40)
    ]
    await desk.runtime.recover_unfinished()
    seen = await asyncio.wait_for(asyncio.gather(*followers), 60)
    whole = await _collect(desk.runtime.resume_stream("acct_1", "turn_f1"))
    assert is_terminal(whole[-1])
    assert all(events == whole for events in seen)


async def test_a_pruned_log_is_expired_whether_followed_or_not(make_desk) -> None:
    config = RuntimeConfig(stream_retention_ms=1_000, stream_every_turn=True)
    desk: DeskHarness = await make_desk(config=config)
    desk.ready_trip()
    _script_name(desk)
    turn = await desk.runtime.handle_turn(_name())
    desk.clock.advance(5_000)
    assert await desk.runtime.prune_streams() == 1
    for follow in (True, False):
        with pytest.raises(StreamExpired) as refused:
            await _collect(desk.runtime.resume_stream("acct_1", turn.turn_id, follow=follow))
        assert refused.value.code == codes.STREAM_EXPIRED


async def test_one_follower_past_the_bound_is_refused_before_it_reads(make_desk) -> None:
    desk: DeskHarness = await make_desk(
        config=RuntimeConfig(stream_followers_per_turn=2, stream_poll_ms=5, stream_every_turn=True)
    )
    desk.ready_trip()
    await _crash(desk)  # unfinished: its followers wait
    waiting = [
        asyncio.ensure_future(_collect(desk.runtime.resume_stream("acct_1", "turn_f1")))
        for _ in range(2)
    ]
    while desk.runtime.stream_followers("acct_1", "turn_f1") < 2:
        await asyncio.sleep(0)
    with pytest.raises(TooManyFollowers) as refused:
        await _collect(desk.runtime.resume_stream("acct_1", "turn_f1"))
    assert refused.value.code == codes.STREAM_TOO_MANY_FOLLOWERS
    # A reader of what is logged now counts too, and is refused the same way.
    with pytest.raises(TooManyFollowers):
        await _collect(desk.runtime.resume_stream("acct_1", "turn_f1", follow=False))
    await desk.runtime.recover_unfinished()
    done = await asyncio.wait_for(asyncio.gather(*waiting), 30)
    assert all(is_terminal(events[-1]) for events in done)
    assert desk.runtime.stream_followers("acct_1", "turn_f1") == 0
    assert is_terminal((await _collect(desk.runtime.resume_stream("acct_1", "turn_f1")))[-1])


async def test_a_follower_of_a_turn_nobody_runs_reads_less_and_less_often(make_desk) -> None:
    """With reads every millisecond at first, a follower of a still log backs off to its
    longest wait: over half a second it reads a few dozen times, not hundreds."""
    desk: DeskHarness = await make_desk(config=RuntimeConfig(stream_every_turn=True))
    desk.ready_trip()
    await _crash(desk)
    other: DeskHarness = await make_desk(
        stores=desk.stores, config=RuntimeConfig(stream_poll_ms=1, stream_poll_max_ms=50)
    )
    conversations = desk.stores.conversations
    real = conversations.stream_events
    reads = 0

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal reads
        reads += 1
        return await real(*args, **kwargs)

    conversations.stream_events = counted  # type: ignore[method-assign]
    try:
        follower = asyncio.ensure_future(_collect(other.runtime.resume_stream("acct_1", "turn_f1")))
        await asyncio.sleep(0.5)
        assert not follower.done()
        follower.cancel()
        with pytest.raises(asyncio.CancelledError):
            await follower
    finally:
        conversations.stream_events = real  # type: ignore[method-assign]
    # 1+2+4+...+32 ms, then one read each 50 ms: about 16 reads; at a fixed 1 ms, hundreds.
    assert 2 <= reads <= 40, reads  # it keeps reading, but a few dozen times at most


async def test_the_caller_that_started_a_turn_is_never_refused_its_stream(make_desk) -> None:
    desk: DeskHarness = await make_desk(
        config=RuntimeConfig(stream_followers_per_turn=1, stream_poll_ms=5)
    )
    desk.ready_trip()
    gate = asyncio.Event()
    real = desk.interpreter.understand

    async def held(brief: Any) -> Any:
        await gate.wait()
        return await real(brief)

    desk.interpreter.understand = held  # type: ignore[method-assign]
    _script_name(desk)
    stream = desk.runtime.stream_turn(_name())
    first = await anext(stream)  # accepted: the turn waits for its model call
    follower = asyncio.ensure_future(_collect(desk.runtime.resume_stream("acct_1", "turn_f1")))
    while desk.runtime.stream_followers("acct_1", "turn_f1") < 1:
        await asyncio.sleep(0)
    gate.set()
    rest = await _collect(stream)  # the bound is full, and the turn's own caller reads on
    followed = await asyncio.wait_for(follower, 30)
    assert is_terminal(rest[-1]) and followed == [first, *rest]
