"""Every store reads an assistant turn by its schema version (docs/decisions/0007): a turn stored
before the version existed reloads byte for byte, a newer minor reads, an unknown major raises
`UnsupportedSchemaVersion`. The texts are put into storage directly, as an older or newer writer
left them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turnframe_core import TurnInput
from turnframe_core.canonical import canonical_json
from turnframe_core.turn import UnsupportedSchemaVersion
from turnframe_store import MemoryStores, SqlStores, Stores
from turnframe_store.records import UserTurnRecord
from turnframe_store.sql._backend import Statement
from turnframe_test.backends import StoreBackend

GOLDEN_1_0 = Path(__file__).resolve().parents[1] / "data" / "assistant_turns_1_0.jsonl"


async def _stored(stores: Stores, text: str) -> tuple[str, str, str]:
    """`text` kept as the assistant turn of its own user turn; its (account, conversation, turn)."""
    data = json.loads(text)
    account, conversation, turn = data["account_id"], data["conversation_id"], data["turn_id"]
    await stores.conversations.ensure_conversation(account, conversation)
    await stores.conversations.append_user_turn(
        UserTurnRecord(
            account_id=account,
            conversation_id=conversation,
            turn_id=turn,
            received_at=data["created_at"],
            input=TurnInput(account_id=account, conversation_id=conversation, text="hi"),
        )
    )
    if isinstance(stores, MemoryStores):
        stores.engine.t.assistant_turns[(account, turn)] = text
    else:
        assert isinstance(stores, SqlStores)
        schema = stores.config.schema
        table = f'"{schema}".tf_turn' if schema else "tf_turn"
        where = "account_id = {} AND turn_id = {}"
        binds = ("%(text)s", "%(account)s", "%(turn)s")
        if stores.dialect == "sqlite":
            binds = (":text", ":account", ":turn")
        sql = f"UPDATE {table} SET assistant_turn = {binds[0]} WHERE " + where.format(*binds[1:])
        params = {"text": text, "account": account, "turn": turn}
        async with stores.engine.backend.writing() as connection:
            outcome = await connection.run([(Statement("keep_raw_turn", sql), params)])
            assert outcome.error is None and outcome.results[0].rowcount == 1
    return account, conversation, turn


@pytest.mark.parametrize("index", [0, 1, 2])
async def test_a_turn_stored_before_the_version_existed_reloads_byte_for_byte(
    store_backend: StoreBackend, index: int
) -> None:
    text = GOLDEN_1_0.read_text(encoding="utf-8").splitlines()[index]
    stores = await store_backend.stores()
    account, conversation, turn_id = await _stored(stores, text)

    turn = await stores.conversations.get_assistant_turn(account, turn_id)
    (recent,) = await stores.conversations.recent_turns(account, conversation, 5)

    assert turn.schema_version == "1.0"
    assert turn.to_stored_json() == text
    assert recent == turn


async def test_a_turn_of_a_newer_minor_version_reloads_byte_for_byte(
    store_backend: StoreBackend,
) -> None:
    data = json.loads(GOLDEN_1_0.read_text(encoding="utf-8").splitlines()[2])
    data["schema_version"] = "1.9"
    for block in data["blocks"]:  # from 1.1 on, prose from server copy says so
        if block["kind"] in ("answer", "transition") and block.get("copy_ref"):
            block["author"] = "server"
    data["mood"] = {"tone": "calm"}
    data["blocks"].append({"kind": "poll", "block_id": "blk_future", "choices": ["a", "b"]})
    text = canonical_json(data)
    stores = await store_backend.stores()
    account, _, turn_id = await _stored(stores, text)

    turn = await stores.conversations.get_assistant_turn(account, turn_id)

    assert turn.schema_version == "1.9"
    assert turn.to_stored_json() == text


async def test_a_turn_of_an_unknown_major_version_raises_unsupported_schema_version(
    store_backend: StoreBackend,
) -> None:
    data = json.loads(GOLDEN_1_0.read_text(encoding="utf-8").splitlines()[0])
    data["schema_version"] = "2.0"
    stores = await store_backend.stores()
    account, conversation, turn_id = await _stored(stores, canonical_json(data))

    with pytest.raises(UnsupportedSchemaVersion, match=r"2\.0"):
        await stores.conversations.get_assistant_turn(account, turn_id)
    with pytest.raises(UnsupportedSchemaVersion):
        await stores.conversations.recent_turns(account, conversation, 5)
