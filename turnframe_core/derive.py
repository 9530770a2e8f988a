"""Derived ids: the ids replay must reproduce (blocks, receipts, commands, batches, cards, outbox
rows, replay tokens), each a domain string and the canonical JSON of its inputs, hashed
(DESIGN §3). Public: the runtime, the stores, the test kit and an auditor re-deriving an id use
the same functions.

Every id that keys or names a record includes the account (decision 0010): two accounts may use
the same client turn id and the same case ids without ever sharing a command, a card or an
outbox row. A receipt's id derives from the events it cites, which are the account's own; the
replay token from its turn, looked up only within its account."""

from __future__ import annotations

import functools
from collections.abc import Iterable

from turnframe_core.ids import derive_id

__all__ = [
    "derive_batch_id",
    "derive_block_id",
    "derive_command_id",
    "derive_interaction_id",
    "derive_outbox_id",
    "derive_receipt_id",
    "derive_replay_token",
]


def derive_block_id(account_id: str, turn_id: str, slot: str) -> str:
    """A block's id from its turn and its slot (`receipt:rcp_…`, `answer:q1`, `transition`, …)."""
    return derive_id(
        "blk",
        "turnframe.block_id.v2",
        {"account_id": account_id, "turn_id": turn_id, "slot": slot},
    )


def derive_receipt_id(status_code: str, event_ids: Iterable[str]) -> str:
    """A receipt's id from what it states and the events it cites (order-free)."""
    return _receipt_id(status_code, tuple(sorted(set(event_ids))))


@functools.lru_cache(maxsize=4096)
def _receipt_id(status_code: str, event_ids: tuple[str, ...]) -> str:
    return derive_id(
        "rcp", "turnframe.receipt_id.v1", {"status_code": status_code, "event_ids": event_ids}
    )


def derive_command_id(account_id: str, turn_id: str, act_id: str, position: int) -> str:
    return derive_id(
        "cmd",
        "turnframe.command_id.v2",
        {"account_id": account_id, "turn_id": turn_id, "act_id": act_id, "position": position},
    )


def derive_batch_id(account_id: str, turn_id: str, workflow: str, case_id: str, scope: str) -> str:
    return derive_id(
        "bat",
        "turnframe.batch_id.v2",
        {
            "account_id": account_id,
            "turn_id": turn_id,
            "workflow": workflow,
            "case_id": case_id,
            "scope": scope,
        },
    )


def derive_interaction_id(account_id: str, turn_id: str, spec_key: str) -> str:
    return derive_id(
        "int",
        "turnframe.interaction_id.v2",
        {"account_id": account_id, "turn_id": turn_id, "spec_key": spec_key},
    )


def derive_outbox_id(account_id: str, command_id: str) -> str:
    return derive_id(
        "obx", "turnframe.outbox_id.v2", {"account_id": account_id, "command_id": command_id}
    )


@functools.lru_cache(maxsize=4096)
def derive_replay_token(turn_id: str) -> str:
    """The replay token joins an assistant turn to its audit record; one per turn, stable."""
    return derive_id("rpl", "turnframe.replay_token.v1", {"turn_id": turn_id})
