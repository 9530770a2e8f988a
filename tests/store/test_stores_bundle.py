"""The `Stores` bundle refuses a missing role; its read-only view reaches no write method."""

from __future__ import annotations

from typing import Any

import pytest

from turnframe_core import codes
from turnframe_core.turn import TurnInput
from turnframe_store import (
    ROLES,
    CommandJournalWriter,
    ConversationWriter,
    EventLedgerWriter,
    InteractionWriter,
    MemoryStores,
    MissingRole,
    OutboxWriter,
    ReplayWriter,
    Stores,
    TimerWriter,
    UserTurnRecord,
)
from turnframe_store.bundle import protocol_methods

WRITERS = {
    "conversations": ConversationWriter,
    "interactions": InteractionWriter,
    "journal": CommandJournalWriter,
    "events": EventLedgerWriter,
    "outbox": OutboxWriter,
    "replay": ReplayWriter,
    "timers": TimerWriter,
}


def all_roles() -> dict[str, Any]:
    memory = MemoryStores()
    return {role: getattr(memory, role) for role, _ in ROLES}


@pytest.mark.parametrize("missing", [role for role, _ in ROLES])
def test_stores_refuse_to_build_without_a_role(missing: str) -> None:
    roles = all_roles()
    del roles[missing]

    with pytest.raises(MissingRole) as caught:
        Stores(**roles)

    assert caught.value.role == missing
    assert caught.value.code == codes.STORE_MISSING_ROLE
    assert repr(missing) in caught.value.message


def test_stores_refuse_a_role_object_that_lacks_a_method() -> None:
    roles = all_roles()
    roles["journal"] = MemoryStores().read_only().journal

    with pytest.raises(MissingRole) as caught:
        Stores(**roles)

    assert caught.value.role == "journal"
    assert "begin" in caught.value.message


@pytest.mark.parametrize("role", sorted(WRITERS))
def test_the_read_only_view_reaches_no_write_method(role: str) -> None:
    view = getattr(MemoryStores().read_only(), role)

    reachable = {name for name in dir(view) if not name.startswith("_")}

    assert reachable.isdisjoint(protocol_methods(WRITERS[role]))
    assert reachable  # the readers are there


def test_the_read_only_view_has_no_commit_role_and_cannot_be_changed() -> None:
    view = MemoryStores().read_only()

    assert not hasattr(view, "commits")
    with pytest.raises(AttributeError):
        view.journal = MemoryStores().journal  # type: ignore[misc]
    with pytest.raises(AttributeError):
        view.journal.begin = print  # type: ignore[attr-defined]


async def test_the_read_only_view_reads_what_the_stores_hold() -> None:
    stores = MemoryStores()
    await stores.conversations.ensure_conversation("acct_a", "conv_1")
    record = UserTurnRecord(
        account_id="acct_a",
        conversation_id="conv_1",
        turn_id="turn_1",
        received_at=1,
        input=TurnInput(account_id="acct_a", conversation_id="conv_1", text="hi"),
    )
    await stores.conversations.append_user_turn(record)

    view = stores.read_only()

    assert await view.conversations.get_user_turn("acct_a", "turn_1") == record


def test_replacing_a_role_keeps_every_other_role() -> None:
    memory = MemoryStores()
    other = MemoryStores()

    replaced = memory.replace(outbox=other.outbox)

    assert replaced.outbox is other.outbox
    assert all(getattr(replaced, r) is getattr(memory, r) for r, _ in ROLES if r != "outbox")
    with pytest.raises(TypeError):
        memory.replace(cache=other.outbox)


async def test_a_memory_role_swapped_in_serves_as_given_and_keeps_transactions() -> None:
    from turnframe_store.memory import MemoryJournal

    memory = MemoryStores()
    journal = MemoryJournal(memory.engine)
    replaced = memory.replace(journal=journal)
    assert replaced.journal is journal
    assert replaced.transactional
    async with replaced.transaction() as tx:
        assert type(tx.journal) is MemoryJournal


def test_a_foreign_role_makes_a_plain_bundle_without_transactions() -> None:
    memory, other = MemoryStores(), MemoryStores()
    assert not memory.replace(outbox=other.outbox).transactional


async def test_transactional_stores_without_a_snapshot_refuse_one() -> None:
    """An audit through them would read live data and could report a break that is only its
    reading: they say so instead."""
    import pytest

    from turnframe_store import MemoryStores, NoSnapshot, Stores

    class Transactional(Stores):
        @property
        def transactional(self) -> bool:
            return True

    memory = MemoryStores()
    roles = {
        role: getattr(memory, role)
        for role in (
            "conversations",
            "interactions",
            "journal",
            "events",
            "outbox",
            "replay",
            "timers",
            "commits",
        )
    }
    with pytest.raises(NoSnapshot):
        async with Transactional(**roles).snapshot():
            pass
    async with Stores(**roles).snapshot() as plain:  # a plain bundle reads as it goes
        assert plain is not None
