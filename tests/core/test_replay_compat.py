"""Replay records written before this version still digest exactly as they did, so the chain
of a conversation that spans an upgrade stays intact. The golden records were written by the
demo on the code before the hardening release (tests/data/replay_records_1_0.jsonl)."""

from __future__ import annotations

from pathlib import Path

from turnframe_core.canonical import canonical_json, digest
from turnframe_core.replay import OutcomeUnknown, ReplayRecord, verify_chain

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "replay_records_1_0.jsonl"


def _golden() -> list[str]:
    return GOLDEN.read_text(encoding="utf-8").splitlines()


def test_an_earlier_record_reads_back_to_the_same_canonical_text() -> None:
    for text in _golden():
        record = ReplayRecord.model_validate_json(text)
        assert canonical_json(record) == text
        assert record.digest() == digest(ReplayRecord.model_validate_json(text))


def test_a_chain_written_before_the_upgrade_is_intact_after_it() -> None:
    records = [ReplayRecord.model_validate_json(text) for text in _golden()]
    assert len(records) == 9
    assert verify_chain(records) == []


def test_an_unknown_outcome_without_an_error_serializes_as_it_always_did() -> None:
    before = '{"attempt_id":"cmd_1","kind":"outcome_unknown","reason":"timeout"}'
    assert canonical_json(OutcomeUnknown.model_validate_json(before)) == before
    described = OutcomeUnknown(attempt_id="cmd_1", reason="executor_error", error="E: x")
    assert OutcomeUnknown.model_validate_json(canonical_json(described)) == described
    assert '"error":"E: x"' in canonical_json(described)
