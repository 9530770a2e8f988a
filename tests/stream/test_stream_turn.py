"""Streaming a turn (DESIGN §8) on every backend: what may be published when, the log every reader
reads (live or resumed), the failed turn, the turn a crash interrupted and recovery finished, and
retention."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from turnframe_core import (
    AssistantTurn,
    BlockCompleted,
    BlockDelta,
    BlockStarted,
    StreamEvent,
    StreamMode,
    TurnCompleted,
    TurnFailed,
    TurnInput,
    TurnPhase,
    TurnPhaseEvent,
    TurnStep,
    block_content_hash,
)
from turnframe_runtime import (
    IdempotencyKeyReused,
    RecoveryOutcome,
    RuntimeConfig,
    StreamExpired,
    StreamInterrupted,
)
from turnframe_store import FaultPoint, NotFound, Unavailable
from turnframe_test import DeskHarness, ScriptedNarrator, act, understanding
from turnframe_test.domains.travel import ProcessCrash
from turnframe_test.waits import until

NAME = "trip.set_name"
REBOOK = "trip.request_rebooking"
BLOCK_EVENTS = (BlockStarted, BlockDelta, BlockCompleted)


def _name(turn_id: str = "turn_s1", text: str = "Name Grace Hopper") -> TurnInput:
    return TurnInput(account_id="acct_1", conversation_id="conv_1", text=text, turn_id=turn_id)


def _script_name(desk: DeskHarness) -> None:
    desk.interpreter.then(understanding(act("a1", NAME, "h1", "Grace", name="Grace Hopper")))
    desk.clock.advance(1_000)


async def _collect(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


async def _stream(
    desk: DeskHarness, turn_input: TurnInput, mode: str = "whole"
) -> list[StreamEvent]:
    return await _collect(desk.runtime.stream_turn(turn_input, mode=mode))


async def _crashed(
    desk: DeskHarness, turn_input: TurnInput | None = None, mode: str = "whole"
) -> list[StreamEvent]:
    """Stream a turn whose process dies after the command's effect, before the commit: the
    events published before the crash."""
    desk.executor.arm_after_remote_request(ProcessCrash())
    seen: list[StreamEvent] = []
    with pytest.raises(ProcessCrash):
        async for event in desk.runtime.stream_turn(turn_input or _name(), mode=mode):
            seen.append(event)
    return seen


def _phases(events: list[StreamEvent]) -> list[TurnPhase]:
    return [e.phase for e in events if isinstance(e, TurnPhaseEvent)]


def _index(events: list[StreamEvent], phase: TurnPhase) -> int:
    return next(
        i for i, e in enumerate(events) if isinstance(e, TurnPhaseEvent) and e.phase is phase
    )


def _assert_well_formed(events: list[StreamEvent], turn: AssistantTurn) -> None:
    """One turn, sequences 1..n with no gap, progress before blocks, blocks after `committed`
    and in the turn's order, each started before completed with its true hash, and the stored
    turn last."""
    assert {e.turn_id for e in events} == {turn.turn_id}
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert isinstance(events[-1], TurnCompleted) and events[-1].turn == turn
    committed = _index(events, TurnPhase.COMMITTED)
    first_block = next(i for i, e in enumerate(events) if isinstance(e, BLOCK_EVENTS))
    assert committed < first_block
    completed = [e for e in events if isinstance(e, BlockCompleted)]
    assert [c.block for c in completed] == list(turn.blocks)
    for c in completed:
        assert c.content_hash == block_content_hash(c.block)
    started = [e for e in events if isinstance(e, BlockStarted)]
    assert [s.block_id for s in started] == [c.block_id for c in completed]
    assert [s.index for s in started] == list(range(len(turn.blocks)))
    for s, c in zip(started, completed, strict=True):
        assert s.sequence < c.sequence
        assert s.block_kind == c.block.kind and s.author == c.block.author


# --- the live stream ----------------------------------------------------------------------------


async def test_a_text_turn_streams_progress_then_its_blocks_then_the_stored_turn(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    _script_name(desk)
    events = await _stream(desk, _name())
    turn = await desk.runtime.load_turn("acct_1", "turn_s1")
    _assert_well_formed(events, turn)
    first = events[0]
    assert isinstance(first, TurnPhaseEvent) and first.phase is TurnPhase.RECEIVED
    assert first.mode is StreamMode.WHOLE
    assert _phases(events) == [
        TurnPhase.RECEIVED,
        TurnPhase.EXECUTING,
        TurnPhase.COMMITTED,
        TurnPhase.COMPOSED,
        TurnPhase.DELIVERED,
    ]
    assert [e.step for e in events if isinstance(e, TurnStep)] == [
        "understand",
        "execute",
        "compose",
    ]
    assert not any(isinstance(e, BlockDelta) for e in events)  # whole mode: blocks arrive whole
    assert desk.receipt_codes(turn) == ["trip.name_set"]


async def test_handle_turn_returns_what_the_stream_ended_with(desk: DeskHarness) -> None:
    desk.ready_trip()
    _script_name(desk)
    events = await _stream(desk, _name())
    assert isinstance(events[-1], TurnCompleted)
    # The same request again (a client's retry) gets the stored turn from handle_turn, and
    # the same stream, event for event, from stream_turn; nothing runs twice.
    assert await desk.runtime.handle_turn(_name()) == events[-1].turn
    assert await _stream(desk, _name()) == events
    assert desk.interpreter.calls == 1 and await desk.event_types() == ["trip.name_set"]


async def test_a_click_streams_its_receipt_after_the_commit(desk: DeskHarness) -> None:
    desk.ready_trip()
    asked = await desk.say(
        "Rebook the outbound", act("a1", REBOOK, "h1", "Rebook the outbound", leg="outbound")
    )
    card = desk.card(asked)
    click = TurnInput.model_validate(
        {
            "account_id": "acct_1",
            "conversation_id": "conv_1",
            "turn_id": "turn_click",
            "interaction_response": {
                "interaction_id": card.interaction_id,
                "option_id": "opt_rebook",
                "expected_case_revision": card.case_revision,
            },
        }
    )
    desk.clock.advance(1_000)
    events = await _stream(desk, click)
    turn = await desk.runtime.load_turn("acct_1", "turn_click")
    _assert_well_formed(events, turn)
    assert not any(isinstance(e, TurnStep) and e.step == "understand" for e in events)
    assert desk.interpreter.calls == 1  # the click made no model call
    assert desk.receipt_codes(turn) == ["trip.rebooking_sent"]


async def test_tokens_mode_streams_reviewed_model_prose_only_after_the_commit(make_desk) -> None:
    narrator = ScriptedNarrator().transition_text("Here is where things stand now.")
    narrator.review_passes()
    desk: DeskHarness = await make_desk(
        narrator=narrator, reviewer=narrator.reviewer, narration="free"
    )
    desk.ready_trip()
    _script_name(desk)
    events = await _stream(desk, _name(), mode="tokens")
    turn = await desk.runtime.load_turn("acct_1", "turn_s1")
    _assert_well_formed(events, turn)
    assert isinstance(events[0], TurnPhaseEvent) and events[0].mode is StreamMode.TOKENS
    deltas = [e for e in events if isinstance(e, BlockDelta)]
    assert len(deltas) > 1
    committed = _index(events, TurnPhase.COMMITTED)
    assert all(events.index(d) > committed for d in deltas)  # no model delta before the commit
    [transition] = [b for b in turn.blocks if b.kind == "transition"]
    assert transition.author == "model"
    assert {d.block_id for d in deltas} == {transition.block_id}
    assert [d.delta_index for d in deltas] == list(range(len(deltas)))
    assert "".join(d.text for d in deltas) == transition.text
    started = next(
        e for e in events if isinstance(e, BlockStarted) and e.block_id == transition.block_id
    )
    assert "text" not in started.fields  # the streamed field arrives as deltas
    # Server blocks stay atomic: their started event already carries every field.
    for e in events:
        if isinstance(e, BlockStarted) and e.author == "server":
            assert "text" in e.fields or "title" in e.fields


async def test_tokens_mode_streams_nothing_of_prose_the_review_refused(make_desk) -> None:
    narrator = ScriptedNarrator()
    for _ in range(2):  # a draft and the one retry, both refused
        narrator.transition_text("Your flight is rebooked and refunded.")
        narrator.review_fails("claims a refund no event backs")
    desk: DeskHarness = await make_desk(
        narrator=narrator, reviewer=narrator.reviewer, narration="free"
    )
    desk.ready_trip()
    _script_name(desk)
    events = await _stream(desk, _name(), mode="tokens")
    turn = await desk.runtime.load_turn("acct_1", "turn_s1")
    _assert_well_formed(events, turn)
    assert not any(isinstance(e, BlockDelta) for e in events)  # server copy stood in, whole
    assert "refunded" not in "".join(e.model_dump_json() for e in events)


async def test_a_failed_turn_emits_turn_failed_and_no_block(desk: DeskHarness) -> None:
    desk.ready_trip()
    _script_name(desk)
    desk.stores.faults.arm(FaultPoint.BEFORE_JOURNAL_INSERT, error=Unavailable("down"))
    events = await _stream(desk, _name())  # the failure is the stream's last event
    assert not any(isinstance(e, BLOCK_EVENTS) for e in events)
    assert isinstance(events[-1], TurnFailed) and events[-1].code == Unavailable.code
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    marker = await desk.stores.conversations.get_phase("acct_1", "turn_s1")
    assert marker.phase is TurnPhase.FAILED
    assert await _collect(desk.runtime.resume_stream("acct_1", "turn_s1")) == events


async def test_a_refused_turn_raises_before_any_event_and_logs_nothing(desk: DeskHarness) -> None:
    desk.ready_trip()
    _script_name(desk)
    events = await _stream(desk, _name())
    reused = _name(text="Something else entirely")  # the same client turn id, another request
    stream = desk.runtime.stream_turn(reused)
    with pytest.raises(IdempotencyKeyReused):
        await anext(stream)  # the first step refuses: no event of the other request shows
    assert await _collect(desk.runtime.resume_stream("acct_1", "turn_s1")) == events


# --- the log: resume, other readers, recovery ---------------------------------------------------


async def test_resuming_after_any_sequence_gives_exactly_the_rest(desk: DeskHarness) -> None:
    desk.ready_trip()
    _script_name(desk)
    events = await _stream(desk, _name())
    for seen in range(len(events) + 1):
        rest = await _collect(desk.runtime.resume_stream("acct_1", "turn_s1", after_sequence=seen))
        assert rest == events[seen:]
    with pytest.raises(NotFound):
        await _collect(desk.runtime.resume_stream("acct_other", "turn_s1"))
    with pytest.raises(NotFound):
        await _collect(desk.runtime.resume_stream("acct_1", "turn_missing"))


async def test_a_reader_that_stops_leaves_the_turn_running_to_its_end(desk: DeskHarness) -> None:
    desk.ready_trip()
    _script_name(desk)
    stream = desk.runtime.stream_turn(_name())
    first = await anext(stream)
    await stream.aclose()  # the client went away after the first event
    resumed = await _collect(desk.runtime.resume_stream("acct_1", "turn_s1", first.sequence))
    assert isinstance(resumed[-1], TurnCompleted)
    assert resumed[-1].turn == await desk.runtime.load_turn("acct_1", "turn_s1")
    assert [e.sequence for e in resumed] == list(range(2, len(resumed) + 2))


async def test_a_turn_interrupted_mid_stream_is_finished_by_recovery_and_its_stream_with_it(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    _script_name(desk)
    seen = await _crashed(desk, mode="tokens")
    assert _phases(seen) == [TurnPhase.RECEIVED, TurnPhase.EXECUTING]
    assert not any(isinstance(e, BLOCK_EVENTS) for e in seen)
    [recovered] = (await desk.runtime.recover_unfinished()).turns
    assert recovered.outcome is RecoveryOutcome.RESUMED
    rest = await _collect(desk.runtime.resume_stream("acct_1", "turn_s1", seen[-1].sequence))
    turn = await desk.runtime.load_turn("acct_1", "turn_s1")
    _assert_well_formed(seen + rest, turn)
    assert desk.receipt_codes(turn) == ["trip.name_set"]
    assert list(desk.executor.applied.values()) == [1]  # the effect happened once
    # Recovery went on in the mode the stream began in, and logged nothing after the end.
    assert isinstance(seen[0], TurnPhaseEvent) and seen[0].mode is StreamMode.TOKENS
    assert (await desk.runtime.recover_turn("acct_1", "turn_s1")).outcome is (
        RecoveryOutcome.FINISHED
    )
    assert await _collect(desk.runtime.resume_stream("acct_1", "turn_s1")) == seen + rest


async def test_a_follower_elsewhere_sees_a_turn_another_runtime_finishes(make_desk) -> None:
    """A reader on another runtime (no shared wake-ups: as in another process) follows the log
    by polling, and ends with the turn."""
    config = RuntimeConfig(locales=("en", "it"), stream_poll_ms=10)
    desk: DeskHarness = await make_desk(config=config)
    desk.ready_trip()
    _script_name(desk)
    await _crashed(desk)
    other: DeskHarness = await make_desk(stores=desk.stores, config=config)
    follower = asyncio.ensure_future(_collect(other.runtime.resume_stream("acct_1", "turn_s1")))
    await until(lambda: other.runtime.stream_followers("acct_1", "turn_s1") == 1, "a follower")
    assert not follower.done()  # the turn has not ended: the follower waits
    await desk.runtime.recover_unfinished()
    events = await asyncio.wait_for(follower, 10)
    _assert_well_formed(events, await desk.runtime.load_turn("acct_1", "turn_s1"))


async def test_a_finished_turns_log_is_kept_for_the_retention_then_pruned(make_desk) -> None:
    config = RuntimeConfig(locales=("en", "it"), stream_retention_ms=60_000)
    desk: DeskHarness = await make_desk(config=config)
    desk.ready_trip()
    _script_name(desk)
    events = await _stream(desk, _name())
    desk.clock.advance(30_000)
    assert await desk.runtime.prune_streams() == 0
    assert await _collect(desk.runtime.resume_stream("acct_1", "turn_s1")) == events
    desk.clock.advance(31_000)
    assert await desk.runtime.prune_streams() == 1
    with pytest.raises(StreamExpired):
        await _collect(desk.runtime.resume_stream("acct_1", "turn_s1"))
    assert await desk.runtime.load_turn("acct_1", "turn_s1") == events[-1].turn  # type: ignore[union-attr]


async def test_an_unfinished_turns_log_is_never_pruned(make_desk) -> None:
    config = RuntimeConfig(locales=("en", "it"), stream_retention_ms=1_000)
    desk: DeskHarness = await make_desk(config=config)
    desk.ready_trip()
    _script_name(desk)
    await _crashed(desk)
    desk.clock.advance(10_000)
    assert await desk.runtime.prune_streams() == 0
    logged = await _collect(desk.runtime.resume_stream("acct_1", "turn_s1", follow=False))
    assert _phases(logged) == [TurnPhase.RECEIVED, TurnPhase.EXECUTING]


async def test_a_reply_that_failed_to_store_is_streamed_once_recovery_stored_it(
    desk: DeskHarness,
) -> None:
    """The commit stands; the reply's events went back with the reply; recovery's reply is the
    one the stream shows."""
    desk.ready_trip()
    _script_name(desk)
    desk.stores.faults.arm(FaultPoint.BEFORE_RESPONSE_PERSISTENCE)
    seen: list[StreamEvent] = []
    with pytest.raises(Unavailable):
        async for event in desk.runtime.stream_turn(_name()):
            seen.append(event)
    assert not any(isinstance(e, BLOCK_EVENTS) for e in seen)
    assert _phases(seen)[-1] is TurnPhase.COMMITTED
    [recovered] = (await desk.runtime.recover_unfinished()).turns
    assert recovered.outcome is RecoveryOutcome.REGENERATED
    rest = await _collect(desk.runtime.resume_stream("acct_1", "turn_s1", seen[-1].sequence))
    _assert_well_formed(seen + rest, await desk.runtime.load_turn("acct_1", "turn_s1"))
    assert _phases(seen + rest).count(TurnPhase.COMMITTED) == 1


async def test_handle_turn_on_another_desk_equals_the_streamed_turn(make_desk) -> None:
    """The same script through handle_turn on a desk of its own gives the turn the stream ended
    with (not a stored reply returned twice)."""
    streamed: DeskHarness = await make_desk()
    handled: DeskHarness = await make_desk()
    for desk in (streamed, handled):
        desk.ready_trip()
        _script_name(desk)
    events = await _stream(streamed, _name())
    assert isinstance(events[-1], TurnCompleted)
    assert await handled.runtime.handle_turn(_name()) == events[-1].turn


async def test_a_reply_with_an_unknown_outcome_keeps_its_log_until_the_turn_ends(
    make_desk,
) -> None:
    config = RuntimeConfig(locales=("en", "it"), stream_retention_ms=1_000)
    desk: DeskHarness = await make_desk(config=config)
    desk.ready_trip()
    _script_name(desk)
    desk.executor.arm_after_remote_request(ConnectionResetError("the answer was lost"))
    events = await _stream(desk, _name())
    assert isinstance(events[-1], TurnCompleted)  # the reply is stored and shown ...
    assert TurnPhase.DELIVERED not in _phases(events)  # ... but the turn is not finished
    desk.clock.advance(10_000)
    assert await desk.runtime.prune_streams() == 0
    assert await _collect(desk.runtime.resume_stream("acct_1", "turn_s1")) == events
    await desk.runtime.recover_unfinished()  # the outcome is asked of the executor: settled
    marker = await desk.stores.conversations.get_phase("acct_1", "turn_s1")
    assert marker.phase is TurnPhase.DELIVERED
    assert await _collect(desk.runtime.resume_stream("acct_1", "turn_s1")) == events
    assert await desk.runtime.prune_streams() == 1


async def test_a_retry_of_a_failed_turn_gets_the_stream_it_logged(desk: DeskHarness) -> None:
    desk.ready_trip()
    _script_name(desk)
    desk.stores.faults.arm(FaultPoint.BEFORE_JOURNAL_INSERT, error=Unavailable("down"))
    events = await _stream(desk, _name())
    assert isinstance(events[-1], TurnFailed)
    assert await _stream(desk, _name()) == events


async def test_two_streams_of_one_request_run_it_once_and_show_it_equal(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    _script_name(desk)
    first, second = await asyncio.gather(_stream(desk, _name()), _stream(desk, _name()))
    assert first == second and isinstance(first[-1], TurnCompleted)
    assert desk.interpreter.calls == 1 and await desk.event_types() == ["trip.name_set"]


async def test_a_turn_cancelled_before_any_effect_ends_its_stream_failed(
    desk: DeskHarness,
) -> None:
    desk.ready_trip()
    desk.runtime._interpreter = _Held()  # type: ignore[attr-defined]  # the model never answers
    desk.clock.advance(1_000)
    stream = desk.runtime.stream_turn(_name())
    await anext(stream)
    [task] = desk.runtime._running  # type: ignore[attr-defined]
    task.cancel()
    rest = await _collect(stream)
    assert isinstance(rest[-1], TurnFailed)
    assert not any(isinstance(e, BLOCK_EVENTS) for e in rest)


async def test_a_stream_whose_turn_was_cancelled_mid_effect_says_so(desk: DeskHarness) -> None:
    """A turn whose task is cancelled while a command may take effect (a process shutting
    down) ends its reader with `StreamInterrupted`, never a silent end; recovery finishes the
    turn, and its stream with it."""
    desk.ready_trip()
    _script_name(desk)
    desk.runtime._executor = _Held()  # type: ignore[attr-defined]  # the domain never answers
    stream = desk.runtime.stream_turn(_name())
    seen = [await anext(stream)]
    while not (isinstance(seen[-1], TurnStep) and seen[-1].step == "execute"):
        seen.append(await anext(stream))
    [task] = desk.runtime._running  # type: ignore[attr-defined]
    task.cancel()
    with pytest.raises(StreamInterrupted):
        async for event in stream:
            seen.append(event)
    desk.runtime._executor = desk.executor  # type: ignore[attr-defined]  # a restarted process
    [recovered] = (await desk.runtime.recover_unfinished()).turns
    assert recovered.outcome is RecoveryOutcome.RESUMED
    rest = await _collect(desk.runtime.resume_stream("acct_1", "turn_s1", seen[-1].sequence))
    _assert_well_formed(seen + rest, await desk.runtime.load_turn("acct_1", "turn_s1"))


class _Held:
    """A port whose call never returns (until its task is cancelled)."""

    async def understand(self, brief: object) -> object:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def execute(self, batch: object) -> object:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_by_default_only_streamed_turns_keep_a_log(make_desk) -> None:
    """`stream_every_turn` is off by default (decision 0028): a turn nobody streams writes no
    log (and its recovery writes none); a streamed turn keeps its log, and recovery carries it
    on."""
    config = RuntimeConfig(locales=("en", "it"))
    assert config.stream_every_turn is False
    desk: DeskHarness = await make_desk(config=config)
    desk.ready_trip()
    _script_name(desk)
    handled = await desk.runtime.handle_turn(_name("turn_h1"))
    assert await desk.stores.conversations.stream_tail("acct_1", "turn_h1") is None
    with pytest.raises(StreamExpired):
        await _collect(desk.runtime.resume_stream("acct_1", "turn_h1"))
    assert desk.receipt_codes(handled) == ["trip.name_set"]

    desk.interpreter.then(understanding(act("a1", NAME, "h1", "Ada", name="Ada Lovelace")))
    desk.executor.arm_after_remote_request(ProcessCrash())
    with pytest.raises(ProcessCrash):
        await desk.runtime.handle_turn(_name("turn_h2", "Name Ada Lovelace"))
    desk.interpreter.then(understanding(act("a1", NAME, "h1", "Alan", name="Alan Turing")))
    seen = await _crashed(desk, _name("turn_s2", "Name Alan Turing"))
    # turn_h2 was finished before turn_s2 began (its conversation's previous turn), logging
    # nothing; recovery finishes turn_s2 and carries its log on.
    assert (await desk.runtime.recover_unfinished()).count(RecoveryOutcome.RESUMED) == 1
    for turn_id in ("turn_h2", "turn_s2"):
        marker = await desk.stores.conversations.get_phase("acct_1", turn_id)
        assert marker.phase is TurnPhase.DELIVERED
    assert await desk.stores.conversations.stream_tail("acct_1", "turn_h2") is None
    rest = await _collect(desk.runtime.resume_stream("acct_1", "turn_s2", seen[-1].sequence))
    _assert_well_formed(seen + rest, await desk.runtime.load_turn("acct_1", "turn_s2"))
