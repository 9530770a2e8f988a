"""The steps the checks repeat against a store: a turn started, ids listed, a card's status."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from turnframe_core.interactions import InteractionStatus
from turnframe_store import builders as build
from turnframe_store.builders import ACCOUNT_A
from turnframe_store.bundle import Stores


async def start_turn(
    stores: Stores, turn: str, *, account: str = ACCOUNT_A, conversation: str = "conv_1"
) -> None:
    await stores.conversations.ensure_conversation(account, conversation)
    await stores.conversations.append_user_turn(
        build.user_turn(turn, account=account, conversation=conversation)
    )


def ids(records: Iterable[Any], field: str) -> list[str]:
    return [getattr(record, field) for record in records]


async def card_status(stores: Stores, account: str, interaction_id: str) -> InteractionStatus:
    return (await stores.interactions.get(account, interaction_id)).status
