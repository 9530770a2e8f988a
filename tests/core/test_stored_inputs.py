"""A user's turn stored before input became strict (decision 0008) still reads from storage,
value for value, and so does the replay record that holds it, with its digest (the chain of
its conversation stays intact). The golden texts were written by the release before: a turn
with the locale `en_US` and 25 loose attachments, then one more turn (its replay record cites
the first's digest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnframe_core import InvalidTurnInput, TurnInput
from turnframe_core.blocks import STORED_CONTEXT
from turnframe_core.canonical import canonical_json
from turnframe_core.replay import ReplayRecord, verify_chain

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "inputs_before_strict_rules.json"


def _golden() -> dict[str, list[str]]:
    data: dict[str, list[str]] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return data


def test_a_stored_user_turn_under_the_earlier_rules_reads_value_for_value() -> None:
    for text in _golden()["user_inputs"]:
        turn_input = TurnInput.model_validate_json(text, context=STORED_CONTEXT)
        assert turn_input.locale == "en_US"
        assert canonical_json(turn_input) == text
        with pytest.raises(InvalidTurnInput):  # what a client sends today is judged strictly
            TurnInput.model_validate_json(text)


def test_its_replay_records_read_and_their_chain_is_intact() -> None:
    records = [
        ReplayRecord.model_validate_json(text, context=STORED_CONTEXT)
        for text in _golden()["replay_records"]
    ]
    assert [canonical_json(r) for r in records] == _golden()["replay_records"]
    assert len(records[0].input.attachments) == 25
    assert verify_chain(records) == []


@pytest.mark.parametrize(
    ("index", "before", "after"),
    [
        (1, '"locale":"en_US"', '"locale":""'),
        (1, '"account_id":"acct_1"', '"account_id":"../acct"'),
        (0, '"size_bytes":null', '"size_bytes":1.0'),
        (0, '"size_bytes":null', '"size_bytes":true'),
    ],
    ids=["empty-locale", "account-id-pattern", "float-size", "bool-size"],
)
def test_damaged_stored_input_is_still_refused(index: int, before: str, after: str) -> None:
    text = _golden()["user_inputs"][index]
    assert before in text
    with pytest.raises(InvalidTurnInput):
        TurnInput.model_validate_json(text.replace(before, after, 1), context=STORED_CONTEXT)
