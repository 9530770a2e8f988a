"""Every store reads back a user's turn and a replay record stored under the input rules of the
release before (decision 0008), value for value, with the chain intact (golden texts in
tests/data/inputs_before_strict_rules.json)."""

from __future__ import annotations

import json
from pathlib import Path

from turnframe_core.blocks import STORED_CONTEXT
from turnframe_core.canonical import canonical_json
from turnframe_core.replay import ReplayRecord, verify_chain
from turnframe_core.turn import TurnInput
from turnframe_store import UserTurnRecord
from turnframe_test.backends import StoreBackend

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "inputs_before_strict_rules.json"


async def test_a_user_turn_and_its_record_stored_before_strict_input_read_back(
    store_backend: StoreBackend,
) -> None:
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    records = [
        ReplayRecord.model_validate_json(text, context=STORED_CONTEXT)
        for text in golden["replay_records"]
    ]
    stores = await store_backend.stores()
    for record in records:
        await stores.conversations.ensure_conversation(record.account_id, record.conversation_id)
        stored_input = TurnInput.model_validate_json(
            canonical_json(record.input), context=STORED_CONTEXT
        )
        await stores.conversations.append_user_turn(
            UserTurnRecord(
                account_id=record.account_id,
                conversation_id=record.conversation_id,
                turn_id=record.turn_id,
                received_at=record.recorded_at,
                input=stored_input,
            )
        )
        await stores.replay.put(record)
    first = records[0]
    user_turn = await stores.conversations.get_user_turn(first.account_id, first.turn_id)
    assert user_turn.input.locale == "en_US" and len(user_turn.input.attachments) == 25
    assert canonical_json(user_turn.input) == canonical_json(first.input)
    read = await stores.replay.for_conversation(first.account_id, first.conversation_id)
    assert [canonical_json(r) for r in read] == golden["replay_records"]
    assert verify_chain(read) == []
