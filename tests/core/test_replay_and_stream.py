import pytest
from pydantic import TypeAdapter, ValidationError

from turnframe_core import ReplayRecord, TurnInput, TurnPhase, codes, verify_chain
from turnframe_core.derive import derive_replay_token
from turnframe_core.stream import BlockDelta, StreamEvent, TurnFailed, publishes_outcomes


def _record(turn_id, previous=None, phase=TurnPhase.DELIVERED):
    return ReplayRecord(
        turn_id=turn_id,
        conversation_id="conv_1",
        account_id="acct_1",
        replay_token=derive_replay_token(turn_id),
        phase=phase,
        recorded_at=1,
        input=TurnInput(account_id="acct_1", conversation_id="conv_1", text="hello"),
        previous_digest=previous,
    )


def _chain(n=3):
    records, previous = [], None
    for i in range(n):
        record = _record(f"turn_{i}", previous)
        records.append(record)
        previous = record.digest()
    return records


def test_an_intact_chain_verifies():
    assert verify_chain(_chain()) == []


def test_an_altered_record_breaks_the_chain_after_it():
    records = _chain()
    records[1] = records[1].model_copy(update={"event_ids": ("evt_forged",)})
    breaks = verify_chain(records)
    assert [(b.code, b.position) for b in breaks] == [(codes.REPLAY_CHAIN_BROKEN, 2)]


def test_a_deleted_record_breaks_the_chain():
    records = _chain()
    del records[1]
    assert [b.turn_id for b in verify_chain(records)] == ["turn_2"]


def test_phases_know_which_are_terminal_and_which_may_have_effects():
    assert {p for p in TurnPhase if p.is_terminal} == {TurnPhase.DELIVERED, TurnPhase.FAILED}
    assert TurnPhase.EXECUTING.effects_may_exist and not TurnPhase.REDUCED.effects_may_exist


def test_a_terminal_replay_record_does_not_move():
    with pytest.raises(Exception, match="already delivered"):
        _record("turn_1").advanced(TurnPhase.FAILED, at=2)
    assert (
        _record("turn_1", phase=TurnPhase.RECEIVED).advanced(TurnPhase.INTERPRETED, at=2).phase
        is TurnPhase.INTERPRETED
    )


def test_stream_events_are_discriminated_by_type():
    adapter = TypeAdapter(StreamEvent)
    event = adapter.validate_python(
        {
            "type": "turn.failed",
            "turn_id": "turn_1",
            "sequence": 3,
            "code": "turnframe.stream.turn_failed",
        }
    )
    assert isinstance(event, TurnFailed)
    with pytest.raises(ValidationError):
        adapter.validate_python({"type": "turn.exploded", "turn_id": "turn_1", "sequence": 1})


def test_a_delta_carries_its_index_for_deduplication():
    delta = BlockDelta(turn_id="turn_1", sequence=4, block_id="blk_1", delta_index=0, text="Hel")
    assert (delta.block_id, delta.delta_index) == ("blk_1", 0)
    with pytest.raises(ValidationError):
        BlockDelta(turn_id="turn_1", sequence=4, block_id="blk_1", delta_index=-1, text="x")


def test_outcomes_publish_only_from_the_commit_on():
    assert [p for p in TurnPhase if publishes_outcomes(p)] == [
        TurnPhase.COMMITTED,
        TurnPhase.COMPOSED,
        TurnPhase.DELIVERED,
    ]


def test_a_records_digest_is_remembered_and_a_changed_copy_digests_afresh():
    from turnframe_core.canonical import digest

    record = _record("turn_1")
    first = record.digest()
    assert record.digest() == first == digest(record.model_dump(mode="json"))
    # the remembered digest is no field: dumps, equality and iteration are as before
    assert record.model_dump() == _record("turn_1").model_dump()
    assert record == _record("turn_1") and dict(record) == dict(_record("turn_1"))
    assert "_turnframe" not in repr(record) and "_turnframe" not in record.model_dump_json()
    changed = record.model_copy(update={"event_ids": ("evt_forged",)})
    assert changed.digest() != first
    assert changed.digest() == digest(changed.model_dump(mode="json"))
    deep = record.model_copy(update={"failure_code": "x"}, deep=True)
    assert deep.digest() == digest(deep.model_dump(mode="json")) != first
