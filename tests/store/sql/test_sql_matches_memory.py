"""Decisions the SQL store makes after its statement ran, compared with MemoryStores (the
specification) on the same calls, per backend."""

from __future__ import annotations

import pytest

from turnframe_core.turn import TurnInput
from turnframe_store import (
    Conflict,
    MemoryStores,
    NotFound,
    OutboxEntry,
    SqlStores,
    Stores,
    UserTurnRecord,
)
from turnframe_store.records import OutboxStatus

T0 = 1_700_000_000_000


def _turn(conversation: str) -> UserTurnRecord:
    return UserTurnRecord(
        account_id="acct_a",
        conversation_id=conversation,
        turn_id="turn_1",
        received_at=T0,
        input=TurnInput(account_id="acct_a", conversation_id=conversation, text="hi"),
    )


async def _refusal(stores: Stores, record: UserTurnRecord) -> type[Exception]:
    with pytest.raises((NotFound, Conflict)) as refused:
        await stores.conversations.append_user_turn(record)
    return type(refused.value)


async def test_a_stored_turn_id_under_a_missing_conversation_is_not_found(
    sql_stores: SqlStores,
) -> None:
    for stores in (MemoryStores(), sql_stores):
        await stores.conversations.ensure_conversation("acct_a", "conv_1")
        await stores.conversations.append_user_turn(_turn("conv_1"))

        assert await _refusal(stores, _turn("conv_missing")) is NotFound
        assert await _refusal(stores, _turn("conv_1")) is Conflict


async def test_an_unknown_outcome_keeps_the_first_remote_reference(sql_stores: SqlStores) -> None:
    row = OutboxEntry(
        outbox_id="obx_1",
        command_id="cmd_1",
        destination="x.remote",
        idempotency_key="key-1",
        created_at=T0,
    )
    for stores in (MemoryStores(), sql_stores):
        outbox = stores.outbox
        await outbox.enqueue(row)
        await outbox.enqueue(row.model_copy(update={"outbox_id": "obx_2", "idempotency_key": "k2"}))
        (first, second) = await outbox.claim_due(T0, 10, "worker-1")

        unknown = await outbox.mark_outcome_unknown("obx_1")
        assert (unknown.status, unknown.remote_ref) == (OutboxStatus.OUTCOME_UNKNOWN, None)
        filled = await outbox.mark_outcome_unknown("obx_1", "ref-1")
        assert filled.remote_ref == "ref-1"
        assert (await outbox.mark_outcome_unknown("obx_1")).remote_ref == "ref-1"
        assert (await outbox.mark_outcome_unknown("obx_1", "ref-1")).remote_ref == "ref-1"
        with pytest.raises(Conflict):
            await outbox.mark_outcome_unknown("obx_1", "ref-2")

        assert (await outbox.mark_outcome_unknown("obx_2", "ref-9")).remote_ref == "ref-9"
        await outbox.mark_completed("obx_2")
        with pytest.raises(Conflict):
            await outbox.mark_outcome_unknown("obx_2", "ref-9")
        with pytest.raises(NotFound):
            await outbox.mark_outcome_unknown("obx_missing")
        assert (first.outbox_id, second.outbox_id) == ("obx_1", "obx_2")
