"""`commit_in`: an adopter whose state lives in the same database commits its own writes and the
turn's bundle in one transaction, or neither (DESIGN §6)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiosqlite
import psycopg
import pytest
from services import Database, Databases

from turnframe_core.cases import CaseRef
from turnframe_core.commands import CommandEnvelope, InternalPolicy
from turnframe_core.events import DomainEvent
from turnframe_core.replay import CommittedOutcome, TurnPhase
from turnframe_core.turn import TurnInput
from turnframe_store import (
    CommitBundle,
    Conflict,
    JournalCompletion,
    JournalEntry,
    JournalStatus,
    OutboxEntry,
    SqlStores,
    UserTurnRecord,
)
from turnframe_store.sql.url import parse_url

A = "acct_a"
T0 = 1_700_000_000_000
CASE = CaseRef(workflow="adopter.case", case_id="case-1", expected_revision=1)


@asynccontextmanager
async def adopter_transaction(database: Database) -> AsyncIterator[Any]:
    """The adopter's own connection to the store's database, inside a transaction it began."""
    target = parse_url(database.url)[1]
    if database.backend == "sqlite":
        connection = await aiosqlite.connect(target, isolation_level=None)
        try:
            await connection.execute("BEGIN IMMEDIATE")
            yield connection
        finally:
            await connection.close()
    else:
        options = f"-c search_path={database.config.schema}"
        async with await psycopg.AsyncConnection.connect(target, options=options) as connection:
            await connection.execute("SELECT 1")  # begins the transaction
            yield connection


async def adopter_state(database: Database) -> list[tuple[str, int]]:
    async with adopter_transaction(database) as connection:
        cursor = await connection.execute("SELECT case_id, revision FROM adopter_case")
        rows = await cursor.fetchall()
        await connection.rollback()
    return [tuple(row) for row in rows]


async def ready(database: Database) -> tuple[SqlStores, CommitBundle]:
    """The adopter's table, a turn whose command is executing, and the bundle that settles it."""
    stores = await database.migrated()
    async with adopter_transaction(database) as connection:
        await connection.execute("CREATE TABLE adopter_case (case_id TEXT, revision INTEGER)")
        await connection.commit()
    turn_input = TurnInput(account_id=A, conversation_id="conv_1", turn_id="turn_1", text="go")
    await stores.conversations.ensure_conversation(A, "conv_1")
    await stores.conversations.append_user_turn(
        UserTurnRecord(
            account_id=A,
            conversation_id="conv_1",
            turn_id="turn_1",
            received_at=T0,
            input=turn_input,
        )
    )
    envelope = CommandEnvelope.build(
        command_id="cmd_1",
        turn_id="turn_1",
        account_id=A,
        case_ref=CASE,
        origin=InternalPolicy(policy_key="adopter"),
        command_type="adopter.bump",
        payload={},
    )
    await stores.journal.begin(JournalEntry.from_envelope(envelope, now=T0))
    await stores.journal.mark_executing(A, "cmd_1")
    event = DomainEvent(
        event_id="evt_1",
        account_id=A,
        workflow=CASE.workflow,
        case_id=CASE.case_id,
        case_revision=2,
        command_id="cmd_1",
        event_type="adopter.bumped",
        payload={"revision": 2},
        occurred_at=T0,
    )
    bundle = CommitBundle(
        account_id=A,
        conversation_id="conv_1",
        turn_id="turn_1",
        journal_completions=(
            JournalCompletion(
                command_id="cmd_1", outcome=CommittedOutcome(new_revision=2, event_ids=("evt_1",))
            ),
        ),
        events=(event,),
        outbox=(
            OutboxEntry(
                outbox_id="obx_1",
                command_id="cmd_1",
                destination="adopter.remote",
                idempotency_key="key-1",
                created_at=T0,
            ),
        ),
        phase=TurnPhase.COMMITTED,
    )
    return stores, bundle


@pytest.fixture
def database(databases: Databases) -> Database:
    return databases.new()


async def test_the_adopters_writes_and_the_bundle_commit_together(database: Database) -> None:
    stores, bundle = await ready(database)

    async with adopter_transaction(database) as connection:
        await connection.execute("INSERT INTO adopter_case VALUES ('case-1', 2)")
        result = await stores.commit_in(connection, bundle)
        await connection.commit()

    assert [e.event_id for e in result.events] == ["evt_1"]
    assert await adopter_state(database) == [("case-1", 2)]
    assert (await stores.journal.get(A, "cmd_1")).status is JournalStatus.COMMITTED
    assert (await stores.conversations.get_phase(A, "turn_1")).phase is TurnPhase.COMMITTED


async def test_rolling_back_the_adopters_transaction_drops_the_bundle_too(
    database: Database,
) -> None:
    stores, bundle = await ready(database)

    async with adopter_transaction(database) as connection:
        await connection.execute("INSERT INTO adopter_case VALUES ('case-1', 2)")
        await stores.commit_in(connection, bundle)
        await connection.rollback()

    assert await adopter_state(database) == []
    assert await stores.events.get_by_ids(A, ["evt_1"]) == ()
    assert (await stores.journal.get(A, "cmd_1")).status is JournalStatus.EXECUTING


async def test_a_failing_bundle_leaves_nothing_and_keeps_the_adopters_transaction_usable(
    database: Database,
) -> None:
    stores, bundle = await ready(database)
    await stores.outbox.enqueue(
        bundle.outbox[0].model_copy(update={"outbox_id": "obx_taken"})  # takes its key
    )

    async with adopter_transaction(database) as connection:
        await connection.execute("INSERT INTO adopter_case VALUES ('case-1', 2)")
        with pytest.raises(Conflict):
            await stores.commit_in(connection, bundle)
        await connection.execute("INSERT INTO adopter_case VALUES ('case-2', 1)")
        await connection.commit()

    assert sorted(await adopter_state(database)) == [("case-1", 2), ("case-2", 1)]
    assert await stores.events.get_by_ids(A, ["evt_1"]) == ()
    assert (await stores.journal.get(A, "cmd_1")).status is JournalStatus.EXECUTING


async def test_commit_in_refuses_a_connection_outside_a_transaction(database: Database) -> None:
    stores, bundle = await ready(database)
    async with adopter_transaction(database) as connection:
        await connection.rollback()

        with pytest.raises(ValueError, match="transaction"):
            await stores.commit_in(connection, bundle)


async def test_commit_in_is_refused_inside_a_stores_transaction(database: Database) -> None:
    stores = await database.migrated()
    async with adopter_transaction(database) as connection:
        async with stores.transaction() as tx:
            with pytest.raises(RuntimeError):
                await tx.commits.commit_in(connection, CommitBundle(  # type: ignore[attr-defined]
                    account_id=A, conversation_id="conv_1", turn_id="turn_1",
                    phase=TurnPhase.RECEIVED,
                ))  # fmt: skip
        await connection.rollback()
