"""One transaction for a click on a local executor (decision 0029): a `TransactionalExecutor`
whose case rows live in the store's own database. A click-only turn without a narrator commits
once; whatever raises before that COMMIT leaves nothing at all (neither a domain row nor a tf_*
row), and the same click sent again then succeeds, once."""

from __future__ import annotations

from typing import Any

import pytest
from services import Database, Databases

from turnframe_core import AssistantTurn, InteractionBlock
from turnframe_runtime import (
    ExecutionRejected,
    ExecutionResult,
    Executor,
    TransactionalExecutor,
)
from turnframe_store import FaultPoint, ManualClock, MemoryStores, SqlStores
from turnframe_test import DeskHarness, act
from turnframe_test.sample.local_trip import LocalTripDesk

REBOOK = "trip.request_rebooking"


class _TwoTransactions(Executor):
    """The same trips through `execute` only: today's durable points."""

    def __init__(self, local: LocalTripDesk) -> None:
        self.local = local

    async def execute(self, batch: Any) -> ExecutionResult:
        return await self.local.execute(batch)


class _Failing(LocalTripDesk):
    """Raises after its writes, inside the turn's transaction, while armed."""

    armed = False

    async def execute_in(self, connection: Any, batch: Any) -> ExecutionResult:
        result = await super().execute_in(connection, batch)
        if self.armed:
            self.armed = False
            raise RuntimeError("the executor broke after writing")
        return result


class _RefusingAfterWriting(LocalTripDesk):
    """Writes the batch (trip row and applied rows), then refuses it, while armed: the refusal
    must undo these writes and only these."""

    armed = False

    async def execute_in(self, connection: Any, batch: Any) -> ExecutionResult:
        result = await super().execute_in(connection, batch)
        if self.armed:
            self.armed = False
            raise ExecutionRejected("trip.locked", "This trip is locked by the travel desk.")
        return result


async def _desk(
    database: Database, *, local: bool = True, kind: type[LocalTripDesk] = LocalTripDesk
) -> tuple[DeskHarness, LocalTripDesk, list[int]]:
    """A desk whose trips live in `database` beside the tf_* tables, and a list that counts the
    store's COMMITs (its write transactions)."""
    clock = ManualClock()
    stores = await database.migrated(clock=clock)
    desk = DeskHarness(stores=stores, clock=clock)
    desk.ready_trip()
    trips = kind(desk.desk, stores, clock_ms=clock)
    await trips.create()
    await trips.open_trips()
    desk.directory = trips
    desk.executor = trips if local else _TwoTransactions(trips)
    desk.restart()
    commits: list[int] = []

    async def count(pid: int) -> None:
        commits.append(pid)

    stores.hooks.before_commit = count
    return desk, trips, commits


async def _card(desk: DeskHarness) -> InteractionBlock:
    asked = await desk.say("Rebook", act("a1", REBOOK, "h1", "Rebook", leg="outbound"))
    return desk.card(asked)


async def _rows(stores: SqlStores) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table of the store's database (tf_* and the trips), by table."""
    async with stores.snapshot() as snapshot:
        connection = await snapshot.driver_connection()
        if stores.dialect == "sqlite":
            cursor = await connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
            names = [row[0] for row in await cursor.fetchall()]
        else:
            cursor = await connection.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s"
                " ORDER BY table_name",
                (stores.config.schema or "public",),
            )
            names = [f'"{stores.config.schema}".{row[0]}' for row in await cursor.fetchall()]
        tables = {}
        for name in names:
            cursor = await connection.execute(f"SELECT * FROM {name}")
            tables[name] = sorted((tuple(row) for row in await cursor.fetchall()), key=repr)
    assert any("tf_" in name for name in tables) and any("case_trip" in n for n in tables)
    return tables


async def _revision(trips: LocalTripDesk, desk: DeskHarness) -> int:
    from turnframe_core import CaseKey

    loaded = await trips.load(desk.account_id, CaseKey(workflow="trip", case_id="T-100"))
    return loaded.revision


async def test_a_click_on_a_local_executor_commits_once_with_the_same_reply(
    databases: Databases,
) -> None:
    one, one_trips, one_commits = await _desk(databases.new())
    two, _, two_commits = await _desk(databases.new(), local=False)
    replies: list[AssistantTurn] = []
    counted: list[int] = []
    for desk, commits in ((one, one_commits), (two, two_commits)):
        card = await _card(desk)
        if desk is one:
            revision = await _revision(one_trips, one)
        before = len(commits)
        replies.append(await desk.click(card, "opt_rebook"))
        counted.append(len(commits) - before)

    assert counted == [1, 3]  # two durable points and the executor's own transaction
    assert one.receipt_codes(replies[0]) == ["trip.rebooking_sent"]
    assert [b.model_dump() for b in replies[0].blocks] == [
        b.model_dump() for b in replies[1].blocks
    ]
    assert replies[0].model_dump() == replies[1].model_dump()
    assert await _revision(one_trips, one) == revision + 1  # the domain row moved with it


ONE_TRANSACTION_FAULTS = [
    pytest.param(FaultPoint.BEFORE_JOURNAL_INSERT, 0, id="before_journal_insert"),
    pytest.param(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT, 0, id="journaled"),
    pytest.param(FaultPoint.AFTER_JOURNAL_INSERT_BEFORE_COMMIT, 1, id="completed"),
    pytest.param(FaultPoint.BEFORE_RESPONSE_PERSISTENCE, 0, id="before_response"),
    pytest.param(None, 0, id="executor_raises"),
    pytest.param("before_commit", 0, id="at_commit"),
]


@pytest.mark.parametrize(("point", "skip"), ONE_TRANSACTION_FAULTS)
async def test_a_fault_inside_the_one_transaction_leaves_no_trace(
    databases: Databases, point: Any, skip: int
) -> None:
    desk, trips, _ = await _desk(databases.new(), kind=_Failing)
    assert isinstance(trips, _Failing)
    stores = desk.stores
    assert isinstance(stores, SqlStores)
    card = await _card(desk)
    revision = await _revision(trips, desk)
    before = await _rows(stores)

    if isinstance(point, FaultPoint):
        stores.faults.arm(point, skip=skip)
    elif point is None:
        trips.armed = True
    else:

        async def crash(pid: int) -> None:
            stores.hooks.before_commit = None
            raise ConnectionError("the process died at COMMIT")

        stores.hooks.before_commit = crash
    with pytest.raises(Exception):  # noqa: B017 - a store fault, the executor's, or COMMIT's
        await desk.click(card, "opt_rebook")

    assert stores.faults.armed() == ()  # the fault fired
    assert not trips.armed
    assert await _rows(stores) == before  # nothing happened: no domain row, no tf_* row
    again = await desk.click(card, "opt_rebook")
    assert desk.receipt_codes(again) == ["trip.rebooking_sent"]
    assert await _revision(trips, desk) == revision + 1  # applied once


async def test_a_refusal_after_the_executors_writes_undoes_them_and_the_turn_commits(
    databases: Databases,
) -> None:
    desk, trips, commits = await _desk(databases.new(), kind=_RefusingAfterWriting)
    assert isinstance(trips, _RefusingAfterWriting)
    card = await _card(desk)
    stores = desk.stores
    assert isinstance(stores, SqlStores)
    domain_before = {k: v for k, v in (await _rows(stores)).items() if "case_" in k}
    before, revision = len(commits), await _revision(trips, desk)
    trips.armed = True

    clicked = await desk.click(card, "opt_rebook")

    assert not trips.armed  # it wrote, then refused
    assert len(commits) - before == 1  # the turn itself committed: its refusal is told
    assert desk.receipt_codes(clicked) == []
    assert "trip.locked" in str(clicked.model_dump())  # the refusal is told
    assert await _revision(trips, desk) == revision  # the executor's writes were undone
    assert {k: v for k, v in (await _rows(stores)).items() if "case_" in k} == domain_before


async def test_the_sample_local_executor_refuses_a_batch_whose_trip_moved_since_it_read_it(
    databases: Databases,
) -> None:
    """The compare-and-swap counts its row: a trip moved after the executor read it (another
    conversation's turn) is a revision conflict, never a change that did not happen."""
    desk, trips, _ = await _desk(databases.new())
    card = await _card(desk)
    revision = await _revision(trips, desk)
    run = trips._run

    async def moved_meanwhile(connection: Any, sql: str, *params: Any) -> list[Any]:
        if sql.startswith(f"UPDATE {trips.trip_table}"):  # another writer got there first
            await run(connection, f"UPDATE {trips.trip_table} SET revision = revision + 1")
        return await run(connection, sql, *params)

    trips._run = moved_meanwhile  # type: ignore[method-assign]

    clicked = await desk.click(card, "opt_rebook")

    assert desk.receipt_codes(clicked) == []  # no rebooking claimed: it did not happen
    assert "trip.rebooking_sent" not in str(clicked.model_dump())
    assert await _revision(trips, desk) == revision  # the refusal undid the other write too


def card_key() -> Any:
    from turnframe_core import CaseKey

    return CaseKey(workflow="trip", case_id="T-100")


async def test_a_transactional_executor_runs_in_the_turns_transaction_only_on_sql_stores(
    desk: DeskHarness,
) -> None:
    """On `MemoryStores` (which cannot share a transaction with a driver connection) the click
    goes through `execute` at today's durable points; on SQL stores through `execute_in`."""
    inner = desk.executor
    directory = desk.directory
    assert isinstance(inner, Executor)
    calls: list[str] = []

    class _Local(TransactionalExecutor):
        async def execute(self, batch: Any) -> ExecutionResult:
            calls.append("execute")
            return await inner.execute(batch)

        async def execute_in(self, connection: Any, batch: Any) -> ExecutionResult:
            calls.append("execute_in")
            return await inner.execute(batch)

        async def load_in(self, connection: Any, account_id: str, case: Any) -> Any:
            return await directory.load(account_id, case)

    desk.ready_trip()
    desk.executor = _Local()
    desk.restart()
    card = await _card(desk)
    del calls[:]

    clicked = await desk.click(card, "opt_rebook")

    assert desk.receipt_codes(clicked) == ["trip.rebooking_sent"]
    assert calls == ["execute" if isinstance(desk.stores, MemoryStores) else "execute_in"]


async def test_a_fault_after_the_commit_leaves_a_delivered_turn(databases: Databases) -> None:
    """The read-back fault point fires once the bundle committed: the caller hears an error,
    the turn is stored whole, and the same click with the same turn id gets its reply."""
    desk, trips, commits = await _desk(databases.new())
    stores = desk.stores
    assert isinstance(stores, SqlStores)
    card = await _card(desk)
    revision, before = await _revision(trips, desk), len(commits)
    stores.faults.arm(FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK)

    with pytest.raises(Exception):  # noqa: B017 - the injected fault, after COMMIT
        await desk.click(card, "opt_rebook", turn_id="turn_click")

    assert stores.faults.armed() == ()
    assert len(commits) - before == 1
    again = await desk.click(card, "opt_rebook", turn_id="turn_click")
    assert desk.receipt_codes(again) == ["trip.rebooking_sent"]
    assert await _revision(trips, desk) == revision + 1  # applied once
