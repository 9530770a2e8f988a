"""The stream's event builders: deltas that concatenate to the text, server blocks whole, and
events that survive their JSON."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from turnframe_core import (
    BlockCompleted,
    BlockDelta,
    BlockStarted,
    CopyRef,
    NoticeBlock,
    StreamMode,
    TransitionBlock,
    block_content_hash,
    block_events,
    is_terminal,
    parse_stream_event,
    split_tokens,
)
from turnframe_core.replay import TurnPhase
from turnframe_core.stream import TurnFailed, TurnPhaseEvent

MODEL = TransitionBlock(block_id="blk_t1", text="Here is where  things stand\nnow. ")
NOTICE = NoticeBlock(
    block_id="blk_n1",
    code="turnframe.notice.example",
    text="Nothing was changed.",
    copy_ref=CopyRef(
        template_id="notice.example",
        template_version="1",
        locale="en",
        catalog_digest="sha256:" + "0" * 64,
    ),
)


@given(st.text(max_size=200))
def test_tokens_concatenate_to_the_text(text: str) -> None:
    assert "".join(split_tokens(text)) == text


def test_model_prose_streams_as_deltas_only_in_tokens_mode() -> None:
    events = block_events(
        MODEL, 2, turn_id="turn_1", first_sequence=5, at=9, mode=StreamMode.TOKENS
    )
    started, *deltas, completed = events
    assert isinstance(started, BlockStarted) and "text" not in started.fields
    assert (started.index, started.author, started.block_kind) == (2, "model", "transition")
    assert all(isinstance(d, BlockDelta) for d in deltas) and len(deltas) == 6
    assert "".join(d.text for d in deltas if isinstance(d, BlockDelta)) == MODEL.text
    assert [e.sequence for e in events] == list(range(5, 5 + len(events)))
    assert isinstance(completed, BlockCompleted) and completed.block == MODEL
    assert completed.content_hash == block_content_hash(MODEL)
    whole = block_events(MODEL, 0, turn_id="turn_1", first_sequence=1, at=9, mode=StreamMode.WHOLE)
    assert [type(e) for e in whole] == [BlockStarted, BlockCompleted]
    assert isinstance(whole[0], BlockStarted) and whole[0].fields["text"] == MODEL.text


def test_server_blocks_are_atomic_in_every_mode() -> None:
    for mode in StreamMode:
        events = block_events(NOTICE, 0, turn_id="turn_1", first_sequence=1, at=1, mode=mode)
        assert [type(e) for e in events] == [BlockStarted, BlockCompleted]
        assert isinstance(events[0], BlockStarted)
        assert events[0].fields == NOTICE.model_dump(mode="json")


def test_events_survive_their_json_and_only_the_end_is_terminal() -> None:
    events = [
        TurnPhaseEvent(turn_id="turn_1", sequence=1, at=1, phase=TurnPhase.RECEIVED),
        *block_events(MODEL, 0, turn_id="turn_1", first_sequence=2, at=2, mode=StreamMode.TOKENS),
        TurnFailed(turn_id="turn_1", sequence=9, at=3, code="turnframe.example"),
    ]
    for event in events:
        assert parse_stream_event(event.model_dump_json()) == event
    assert [is_terminal(e) for e in events] == [False] * (len(events) - 1) + [True]
