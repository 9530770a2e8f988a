"""The SSE encoder (turnframe_runtime.sse): one frame per stream event, line breaks that cannot
forge a field, `Last-Event-ID` read back into the sequence a stream resumes after, keepalives
while a stream is quiet, and a closed reader that stops reading."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sse_reader import read_frames

from turnframe_core import (
    BlockDelta,
    StreamEvent,
    TurnFailed,
    TurnPhase,
    TurnPhaseEvent,
    parse_stream_event,
)
from turnframe_runtime.sse import (
    KEEPALIVE_FRAME,
    InvalidLastEventId,
    encode_event,
    encode_frame,
    parse_last_event_id,
    sse_frames,
    with_keepalives,
)

TURN = "turn_s1"


def _phase(sequence: int, phase: TurnPhase = TurnPhase.RECEIVED) -> TurnPhaseEvent:
    return TurnPhaseEvent(turn_id=TURN, sequence=sequence, at=1_000, phase=phase)


def _delta(sequence: int, text: str) -> BlockDelta:
    return BlockDelta(
        turn_id=TURN, sequence=sequence, at=1_000, block_id="blk_1", delta_index=0, text=text
    )


async def _events(*events: StreamEvent, pause_s: float = 0.0) -> AsyncIterator[StreamEvent]:
    for event in events:
        if pause_s:
            await asyncio.sleep(pause_s)
        yield event


async def _all(frames: AsyncIterator[bytes]) -> list[bytes]:
    return [frame async for frame in frames]


def test_an_event_is_one_frame_with_its_sequence_type_and_json():
    event = _phase(7)

    frame = encode_event(event)

    assert frame == (
        b"id: 7\nevent: turn.phase\ndata: " + event.model_dump_json().encode() + b"\n\n"
    )


def test_a_frame_reads_back_as_the_same_event():
    event = _delta(3, 'line one\nline two\r\n\u2028and "quoted" text\n')

    (frame,) = read_frames([encode_event(event)])

    assert (frame.id, frame.event) == ("3", "content.block.delta")
    assert parse_stream_event(frame.data) == event


def test_data_with_line_breaks_becomes_one_data_line_per_line():
    frame = encode_frame("a\nb\r\nc\rd", event="note")

    assert frame == b"event: note\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
    assert read_frames([frame])[0].data == "a\nb\nc\nd"


@given(st.text())
def test_any_data_reads_back_with_its_line_breaks_as_newlines(data):
    (frame,) = read_frames([encode_frame(data, event="x", id="1")])

    assert frame.data == data.replace("\r\n", "\n").replace("\r", "\n")
    assert (frame.id, frame.event) == ("1", "x")


@pytest.mark.parametrize("field", ["id", "event"])
@pytest.mark.parametrize("value", ["1\n2", "a\rb", "a\r\nb"])
def test_an_id_or_event_name_holding_a_line_break_is_refused(field, value):
    with pytest.raises(ValueError):
        encode_frame("{}", **{field: value})


def test_the_retry_hint_rides_on_the_first_frame_only():
    frames = asyncio.run(_all(sse_frames(_events(_phase(1), _phase(2)), retry_ms=1_500)))

    first, second = read_frames(frames)
    assert first.retry == 1_500
    assert second.retry is None


@pytest.mark.parametrize("value", [None, "", "  "])
def test_no_last_event_id_means_from_the_start(value):
    assert parse_last_event_id(value) == 0


@pytest.mark.parametrize(("value", "after"), [("0", 0), ("7", 7), (" 12 ", 12), ("0042", 42)])
def test_a_last_event_id_names_the_sequence_seen(value, after):
    assert parse_last_event_id(value) == after


@pytest.mark.parametrize(
    "value", ["-1", "+3", "1.5", "1e3", "abc", "7 8", "\u0663", "9" * 19, "0x10"]
)
def test_a_last_event_id_this_encoder_never_sent_is_refused_with_its_code(value):
    with pytest.raises(InvalidLastEventId) as refused:
        parse_last_event_id(value)

    assert refused.value.code == "turnframe.stream.invalid_last_event_id"


async def test_every_event_becomes_a_frame_in_order():
    events = [
        _phase(1),
        _phase(2, TurnPhase.REDUCED),
        TurnFailed(turn_id=TURN, sequence=3, at=1, code="turnframe.x.y"),
    ]

    frames = read_frames(await _all(sse_frames(_events(*events))))

    assert [parse_stream_event(f.data) for f in frames] == events
    assert [f.id for f in frames] == ["1", "2", "3"]


async def test_a_quiet_stream_sends_keepalive_comments_between_events():
    frames = await _all(sse_frames(_events(_phase(1), _phase(2), pause_s=0.12), keepalive_s=0.03))

    assert KEEPALIVE_FRAME in frames
    assert [f.id for f in read_frames(frames)] == ["1", "2"]  # comments dispatch nothing


async def test_an_error_of_the_events_propagates_after_the_frames_before_it():
    async def failing() -> AsyncIterator[StreamEvent]:
        yield _phase(1)
        raise RuntimeError("the turn broke")

    got: list[bytes] = []
    with pytest.raises(RuntimeError, match="the turn broke"):
        async for frame in sse_frames(failing()):
            got.append(frame)

    assert [f.id for f in read_frames(got)] == ["1"]


async def test_closing_the_frames_stops_reading_the_events_and_closes_them():
    closed, parked = asyncio.Event(), asyncio.Event()
    reads = 0

    async def endless() -> AsyncIterator[StreamEvent]:
        nonlocal reads
        try:
            while True:
                reads += 1
                yield _phase(reads)
                parked.set()
                await asyncio.sleep(3600)  # a stream waiting for its turn's next event
        finally:
            closed.set()

    frames = sse_frames(endless(), keepalive_s=None)
    first = await anext(frames)
    waiting = asyncio.ensure_future(anext(frames))
    await asyncio.wait_for(parked.wait(), 10)  # the stream waits for its next event
    waiting.cancel()  # the client went away while the stream waited
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await frames.aclose()

    assert read_frames([first])[0].id == "1"
    assert closed.is_set()
    assert reads == 1


async def test_keepalives_are_added_to_any_frames_and_closing_them_closes_the_source():
    closed = asyncio.Event()

    async def frames() -> AsyncIterator[bytes]:
        try:
            yield b"event: one\ndata: 1\n\n"
            await asyncio.sleep(0.12)
            yield b"event: two\ndata: 2\n\n"
            await asyncio.sleep(3600)  # a feed waiting for its next turn
        finally:
            closed.set()

    kept = with_keepalives(frames(), 0.03)
    got = [await anext(kept) for _ in range(2)]
    while got[-1] == KEEPALIVE_FRAME:
        got.append(await anext(kept))
    await kept.aclose()

    assert got[0] == b"event: one\ndata: 1\n\n" and got[-1] == b"event: two\ndata: 2\n\n"
    assert KEEPALIVE_FRAME in got
    assert closed.is_set()


async def test_an_error_of_the_frames_propagates_through_the_keepalives():
    async def failing() -> AsyncIterator[bytes]:
        yield b"data: 1\n\n"
        raise RuntimeError("the feed broke")

    got: list[bytes] = []
    with pytest.raises(RuntimeError, match="the feed broke"):
        async for frame in with_keepalives(failing(), None):
            got.append(frame)

    assert got == [b"data: 1\n\n"]
