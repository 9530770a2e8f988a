"""PostgreSQL under concurrency and failure: races, the outbox claim, the partial unique index,
uncommitted bundles, killed backends and statement timeouts, against the real server.

Several `SqlStores` on one schema stand for several processes: each has its own pool. A hook
inside the write transaction (`stores.hooks`) holds a bundle open at a chosen moment.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import psycopg
import pytest
from services import Database, Databases

from turnframe_core.cases import CaseRef
from turnframe_core.commands import CommandEnvelope, InternalPolicy
from turnframe_core.derive import derive_replay_token
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import (
    Interaction,
    InteractionKind,
    InteractionOption,
    InteractionPayload,
    InteractionStatus,
    ResolveClarification,
)
from turnframe_core.replay import CommittedOutcome, ReplayRecord, TurnPhase
from turnframe_core.stream import TurnStep
from turnframe_core.turn import TurnInput
from turnframe_store import (
    CommitBundle,
    CommitResult,
    Conflict,
    EventCursor,
    InteractionFinish,
    JournalCompletion,
    JournalEntry,
    JournalStatus,
    OutboxEntry,
    SqlStores,
    Timeout,
    Unavailable,
    UserTurnRecord,
)
from turnframe_store.sql._statements import EVENT_LOCK_CLASS
from turnframe_store.sql.url import parse_url
from turnframe_test.postgres import blocked_behind

A = "acct_a"
T0 = 1_700_000_000_000
CASE = CaseRef(workflow="race.case", case_id="case-1", expected_revision=3)


@pytest.fixture
async def database(postgres_databases: Databases) -> Database:
    return postgres_databases.new()


async def _raw(database: Database) -> psycopg.AsyncConnection[Any]:
    """A plain psycopg connection into the test's schema, around the adapter."""
    return await psycopg.AsyncConnection.connect(
        parse_url(database.url)[1],
        autocommit=True,
        options=f"-c search_path={database.config.schema}",
    )


async def _count(database: Database, sql: str, *params: Any) -> int:
    async with await _raw(database) as connection:
        row = await (await connection.execute(sql, params)).fetchone()
    assert row is not None
    return int(row[0])


def _card(interaction_id: str, *, blocking: bool = True) -> Interaction:
    options = tuple(
        InteractionOption(
            option_id=f"opt_{key}", label=key, action=ResolveClarification(answer_key=key)
        )
        for key in ("yes", "no")
    )
    return Interaction.create(
        interaction_id=interaction_id,
        account_id=A,
        conversation_id="conv_1",
        case_ref=CASE,
        kind=InteractionKind.SINGLE_SELECT,
        payload=InteractionPayload(title="Pick one", options=options),
        created_by_turn="turn_1",
        created_at=T0,
        blocking=blocking,
    )


def _event(event_id: str) -> DomainEvent:
    return DomainEvent(
        event_id=event_id,
        account_id=A,
        workflow=CASE.workflow,
        case_id=CASE.case_id,
        case_revision=CASE.expected_revision + 1,
        command_id="cmd_1",
        event_type="race.settled",
        payload={"by": event_id},
        occurred_at=T0,
    )


def _step(sequence: int, step: str) -> TurnStep:
    return TurnStep(turn_id="turn_1", sequence=sequence, at=T0, step=step)


async def _turn_executing(stores: SqlStores) -> ReplayRecord:
    """turn_1 received; cmd_1 (against revision 3) executing; int_1 resolving; a replay record."""
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
        origin=InternalPolicy(policy_key="race"),
        command_type="race.settle",
        payload={},
    )
    await stores.journal.begin(JournalEntry.from_envelope(envelope, now=T0))
    await stores.journal.mark_executing(A, "cmd_1")
    await stores.interactions.insert(_card("int_1"))
    await stores.interactions.begin_resolution(A, "int_1", "opt_yes")
    record = ReplayRecord(
        turn_id="turn_1",
        conversation_id="conv_1",
        account_id=A,
        replay_token=derive_replay_token("turn_1"),
        phase=TurnPhase.EXECUTING,
        recorded_at=T0,
        input=turn_input,
    )
    await stores.replay.put(record)
    return record


def _bundle(tag: str, record: ReplayRecord) -> CommitBundle:
    """A bundle that settles cmd_1 and int_1 its own way (its own event) from revision 3."""
    event = _event(f"evt_{tag}")
    return CommitBundle(
        account_id=A,
        conversation_id="conv_1",
        turn_id="turn_1",
        journal_completions=(
            JournalCompletion(
                command_id="cmd_1",
                outcome=CommittedOutcome(new_revision=4, event_ids=(event.event_id,)),
            ),
        ),
        events=(event,),
        interaction_finishes=(
            InteractionFinish(
                interaction_id="int_1",
                status=InteractionStatus.RESOLVED,
                option_id="opt_yes",
                event_ids=(event.event_id,),
            ),
        ),
        outbox=(
            OutboxEntry(
                outbox_id=f"obx_{tag}",
                command_id="cmd_1",
                destination="race.remote",
                idempotency_key=f"key-{tag}",
                created_at=T0,
            ),
        ),
        replay=record.advanced(TurnPhase.COMMITTED, at=T0 + 1, event_ids=(event.event_id,)),
        phase=TurnPhase.COMMITTED,
    )


def _once(hook: Callable[[int], Awaitable[None]]) -> Callable[[int], Awaitable[None]]:
    """A hook that acts in the first write transaction after it is set, and not again."""
    fired = False

    async def run(pid: int) -> None:
        nonlocal fired
        if not fired:
            fired = True
            await hook(pid)

    return run


async def _nothing_of(database: Database, tag: str) -> list[str]:
    """What of bundle `tag` is visible to another connection (nothing, if it never committed)."""
    seen: list[str] = []
    checks = {
        "its event": ("SELECT count(*) FROM tf_domain_event WHERE event_id = %s", f"evt_{tag}"),
        "its outbox row": ("SELECT count(*) FROM tf_outbox WHERE outbox_id = %s", f"obx_{tag}"),
        "the settled command": (
            "SELECT count(*) FROM tf_command_journal WHERE command_id = %s AND status <> %s",
            "cmd_1",
            "executing",
        ),
        "the resolved card": (
            "SELECT count(*) FROM tf_interaction WHERE interaction_id = %s AND status <> %s",
            "int_1",
            "resolving",
        ),
        "the committed replay record": (
            "SELECT count(*) FROM tf_replay WHERE turn_id = %s AND phase <> %s",
            "turn_1",
            "executing",
        ),
        "the moved phase marker": (
            "SELECT count(*) FROM tf_turn_phase WHERE turn_id = %s AND phase <> %s",
            "turn_1",
            "received",
        ),
    }
    for what, (sql, *params) in checks.items():
        if await _count(database, sql, *params):
            seen.append(what)
    return seen


# --- races --------------------------------------------------------------------------------------


async def test_two_transactions_racing_one_expected_revision_let_exactly_one_win(
    database: Database,
) -> None:
    first = await database.migrated()
    second = await database.stores()
    record = await _turn_executing(first)
    held, release = asyncio.Event(), asyncio.Event()
    holder: list[int] = []

    async def hold(pid: int) -> None:
        holder.append(pid)
        held.set()
        await release.wait()

    first.hooks.before_commit = _once(hold)
    winner = asyncio.create_task(first.commits.commit(_bundle("a", record)))
    await held.wait()
    loser = asyncio.create_task(second.commits.commit(_bundle("b", record)))
    # the second writer waits on the first's row (it could not be queued and done)
    await blocked_behind(database.url, holder[0])
    release.set()
    outcomes = await asyncio.gather(winner, loser, return_exceptions=True)

    assert isinstance(outcomes[0], CommitResult)
    assert isinstance(outcomes[1], Conflict)
    assert await _count(database, "SELECT count(*) FROM tf_domain_event") == 1
    assert await _count(database, "SELECT count(*) FROM tf_outbox WHERE outbox_id = 'obx_b'") == 0
    entry = await second.journal.get(A, "cmd_1")
    assert entry.outcome == CommittedOutcome(new_revision=4, event_ids=("evt_a",))
    card = await second.interactions.get(A, "int_1")
    assert card.resolution_event_ids == ("evt_a",)


async def test_eight_bundles_racing_to_settle_one_command_leave_exactly_one_winner(
    database: Database,
) -> None:
    setup = await database.migrated()
    record = await _turn_executing(setup)
    racers = [await database.stores() for _ in range(8)]

    outcomes = await asyncio.gather(
        *(s.commits.commit(_bundle(f"r{n}", record)) for n, s in enumerate(racers)),
        return_exceptions=True,
    )

    winners = [n for n, o in enumerate(outcomes) if isinstance(o, CommitResult)]
    assert len(winners) == 1
    assert all(isinstance(o, Conflict) for o in outcomes if not isinstance(o, CommitResult))
    assert await _count(database, "SELECT count(*) FROM tf_domain_event") == 1
    assert await _count(database, "SELECT count(*) FROM tf_outbox") == 1
    (event,) = await setup.events.get_by_ids(A, [f"evt_r{winners[0]}"])
    assert event.event_type == "race.settled"


async def test_four_claimers_share_a_thousand_outbox_rows_without_overlap_or_leftovers(
    database: Database,
) -> None:
    setup = await database.migrated()
    async with await _raw(database) as connection:
        await connection.execute(
            "INSERT INTO tf_outbox (outbox_id, command_id, destination, payload, idempotency_key,"
            " status, attempt_count, created_at)"
            " SELECT 'obx_' || n, 'cmd_' || n, 'claims.remote', '{}', 'key-' || n, 'pending', 0,"
            " to_timestamp(1700000000 + n) FROM generate_series(1, 1000) AS n"
        )
    claimers = [await database.stores() for _ in range(4)]
    now = T0 + 10_000_000
    held, release = asyncio.Event(), asyncio.Event()

    async def hold(pid: int) -> None:
        held.set()
        await release.wait()

    # The claims overlap: w0's first claim is held open with its rows locked, and w1 claims
    # meanwhile, skipping those rows instead of waiting for them.
    claimers[0].hooks.before_commit = _once(hold)
    opening = asyncio.create_task(claimers[0].outbox.claim_due(now, 9, "w0"))
    await held.wait()
    try:
        beside = await asyncio.wait_for(claimers[1].outbox.claim_due(now, 9, "w1"), 5)
    finally:
        release.set()
    first = await opening
    assert [row.outbox_id for row in first] == [f"obx_{n}" for n in range(1, 10)]
    assert [row.outbox_id for row in beside] == [f"obx_{n}" for n in range(10, 19)]

    async def claim_all(stores: SqlStores, worker: str, got: list[str]) -> list[str]:
        while batch := await stores.outbox.claim_due(now, 9, worker):
            got.extend(row.outbox_id for row in batch)
        return got

    claimed = await asyncio.gather(
        claim_all(claimers[0], "w0", [row.outbox_id for row in first]),
        claim_all(claimers[1], "w1", [row.outbox_id for row in beside]),
        claim_all(claimers[2], "w2", []),
        claim_all(claimers[3], "w3", []),
    )

    handed = [outbox_id for got in claimed for outbox_id in got]
    assert len(handed) == len(set(handed)) == 1000
    assert await _count(database, "SELECT count(*) FROM tf_outbox WHERE status = 'pending'") == 0
    for worker, got in enumerate(claimed):
        for outbox_id in got[:25]:
            row = await setup.outbox.get(outbox_id)
            assert (row.claim_worker_id, row.attempt_count) == (f"w{worker}", 1)


async def test_event_sequences_follow_commit_order_when_appends_overlap(
    database: Database,
) -> None:
    """Decision 0027: the first writer inserts its event and stays open, idle; the second
    appends and commits meanwhile without waiting on it (no lock is held across the open
    transaction); a reader paging by sequence sees the second, then, once the first commits,
    the first after it: the first's sequence was given at its commit, so nothing is skipped."""
    first = await database.migrated()
    second = await database.stores()
    reader = await database.stores()
    held, release = asyncio.Event(), asyncio.Event()

    async def hold(pid: int) -> None:
        held.set()
        await release.wait()

    first.hooks.before_commit = _once(hold)
    early = asyncio.create_task(first.events.append(A, [_event("evt_early")]))
    await held.wait()  # evt_early is inserted; its transaction is open and idle
    try:
        # it must not wait on the open transaction (a deadlock guard, not a timing)
        (late_event,) = await asyncio.wait_for(second.events.append(A, [_event("evt_late")]), 30)
        page = await reader.events.read_from(A, EventCursor.START, 10)
        assert [e.event_id for e in page.events] == ["evt_late"]
    finally:
        release.set()
    (early_event,) = await early

    assert (late_event.sequence or 0) < (early_event.sequence or 0)  # commit order
    after = await reader.events.read_from(A, page.next_cursor, 10)
    assert [e.event_id for e in after.events] == ["evt_early"]  # never skipped
    whole = await reader.events.read_from(A, EventCursor.START, 10)
    assert [(e.event_id, e.sequence) for e in whole.events] == [
        ("evt_late", late_event.sequence),
        ("evt_early", early_event.sequence),
    ]


async def test_an_open_transaction_holding_events_blocks_no_other_event_writer(
    database: Database,
) -> None:
    """A turn's transaction (`stores.transaction()`) commits its bundle's events and stays open
    (composing its reply): another transaction's events commit meanwhile, and a reader paging
    by sequence later finds the turn's events after them. Inside the open transaction the
    committed events have no sequence yet; after it, the ledger gives each its place."""
    first = await database.migrated()
    second = await database.stores()
    reader = await database.stores()
    async with first.transaction() as tx:
        (inside,) = await tx.events.append(A, [_event("evt_turn")])
        assert inside.sequence is None  # ordered at commit
        (read_inside,) = await tx.events.get_by_ids(A, ["evt_turn"])
        assert read_inside == inside
        (other,) = await asyncio.wait_for(second.events.append(A, [_event("evt_other")]), 30)
        page = await reader.events.read_from(A, EventCursor.START, 10)
        assert [e.event_id for e in page.events] == ["evt_other"]
    after = await reader.events.read_from(A, page.next_cursor, 10)
    assert [e.event_id for e in after.events] == ["evt_turn"]
    (stored,) = await reader.events.get_by_ids(A, ["evt_turn"])
    assert (other.sequence or 0) < (stored.sequence or 0)
    assert stored.model_copy(update={"sequence": None}) == inside


async def test_the_event_lock_is_taken_with_commit_and_orders_the_commits(
    database: Database,
) -> None:
    """The lock still orders commits: while another session holds the schema's event lock, a
    transaction writes its events without waiting and waits only in its last pipeline (with
    COMMIT); it takes its sequence once the holder lets go."""
    stores = await database.migrated()
    key = "SELECT pg_advisory_xact_lock(%s, hashtext(%s))"
    async with await _raw(database) as holder:
        await holder.execute("BEGIN")
        await holder.execute(key, (EVENT_LOCK_CLASS, database.config.schema))
        written = asyncio.Event()

        async def turn() -> None:
            async with stores.transaction() as tx:
                await tx.events.append(A, [_event("evt_a"), _event("evt_b")])
                written.set()  # inserted while the lock is held elsewhere

        task = asyncio.create_task(turn())
        await asyncio.wait_for(written.wait(), 30)
        await blocked_behind(database.url, holder.info.backend_pid)  # waits at its commit
        assert not task.done()
        await holder.execute("ROLLBACK")
        await task
    page = await stores.events.read_from(A, EventCursor.START, 10)
    assert [e.event_id for e in page.events] == ["evt_a", "evt_b"]
    sequences = [e.sequence or 0 for e in page.events]
    assert 0 < sequences[0] < sequences[1]


async def test_a_commit_that_cannot_order_its_events_writes_nothing(database: Database) -> None:
    """The order is given in the last pipeline, with COMMIT: when it fails there (the event lock
    not free within the statement timeout), the transaction's error is typed and nothing of it
    remains, its other writes included."""
    await database.migrated()
    impatient = replace(database, config=replace(database.config, statement_timeout_ms=200))
    stores = await impatient.stores()
    await stores.conversations.ensure_conversation(A, "conv_1")
    async with await _raw(database) as holder, holder.transaction():
        await holder.execute(
            "SELECT pg_advisory_xact_lock(%s, hashtext(%s))",
            (EVENT_LOCK_CLASS, database.config.schema),
        )
        with pytest.raises(Timeout):
            async with stores.transaction() as tx:
                await tx.interactions.insert(_card("int_1"))
                await tx.events.append(A, [_event("evt_1")])

    assert await _count(database, "SELECT count(*) FROM tf_domain_event") == 0
    assert await _count(database, "SELECT count(*) FROM tf_interaction") == 0
    (event,) = await stores.events.append(A, [_event("evt_1")])  # the store is usable after
    assert (event.sequence or 0) > 0


async def test_a_stored_event_id_in_a_transaction_is_a_conflict_at_once_and_dooms_it(
    database: Database,
) -> None:
    """The insert still meets a stored event id in its own pipeline: the call fails with the
    typed error, the transaction is doomed, and nothing of it remains."""
    stores = await database.migrated()
    await stores.conversations.ensure_conversation(A, "conv_1")
    (stored,) = await stores.events.append(A, [_event("evt_1")])
    with pytest.raises(Conflict):
        async with stores.transaction() as tx:
            await tx.interactions.insert(_card("int_1"))
            with pytest.raises(Conflict):
                await tx.events.append(A, [_event("evt_1")])

    assert await _count(database, "SELECT count(*) FROM tf_interaction") == 0
    assert await stores.events.get_by_ids(A, ["evt_1"]) == (stored,)


async def test_a_bundle_undone_by_its_savepoint_leaves_the_transaction_usable(
    database: Database,
) -> None:
    """A bundle's batch stands behind an undo savepoint, released with the next batch; when an
    outer savepoint is rolled back first, that release (and the bundle's event order kept for
    COMMIT) goes with it: the transaction goes on, commits, and holds none of the bundle."""
    stores = await database.migrated()
    record = await _turn_executing(stores)

    class Undo(Exception):
        pass

    async with stores.transaction() as tx:
        with pytest.raises(Undo):
            async with tx.savepoint():
                await tx.commits.commit(_bundle("a", record))
                raise Undo()
        await tx.interactions.insert(_card("int_2", blocking=False))

    assert await _count(database, "SELECT count(*) FROM tf_domain_event") == 0
    assert await _count(database, "SELECT count(*) FROM tf_outbox") == 0
    assert await _count(database, "SELECT count(*) FROM tf_interaction") == 2


async def test_two_stream_appenders_racing_for_one_sequence_leave_one_log_and_a_conflict(
    database: Database,
) -> None:
    first = await database.migrated()
    second = await database.stores()
    await _turn_executing(first)
    await first.conversations.append_stream_events(A, [_step(1, "understand")])
    held, release = asyncio.Event(), asyncio.Event()
    holder: list[int] = []

    async def hold(pid: int) -> None:
        holder.append(pid)
        held.set()
        await release.wait()

    first.hooks.before_commit = _once(hold)
    early = asyncio.create_task(
        first.conversations.append_stream_events(A, [_step(2, "early"), _step(3, "early")])
    )
    await held.wait()
    late = asyncio.create_task(second.conversations.append_stream_events(A, [_step(2, "late")]))
    # the late writer read the log before the early append committed, then meets its row
    await blocked_behind(database.url, holder[0])
    release.set()
    outcomes = await asyncio.gather(early, late, return_exceptions=True)

    assert outcomes[0] is None
    assert isinstance(outcomes[1], Conflict)
    logged = await second.conversations.stream_events(A, "turn_1", 0, 10)
    assert [(e.sequence, getattr(e, "step", None)) for e in logged] == [
        (1, "understand"),
        (2, "early"),
        (3, "early"),
    ]


async def test_event_appends_in_another_schema_do_not_wait_for_the_event_lock(
    postgres_databases: Databases,
) -> None:
    first = await postgres_databases.migrated()
    other = await postgres_databases.migrated()  # another tenant's schema in the same database
    held, release = asyncio.Event(), asyncio.Event()

    async def hold(pid: int) -> None:
        held.set()
        await release.wait()

    first.hooks.before_commit = _once(hold)
    early = asyncio.create_task(first.events.append(A, [_event("evt_early")]))
    await held.wait()
    try:
        (elsewhere,) = await asyncio.wait_for(other.events.append(A, [_event("evt_other")]), 5)
    finally:
        release.set()
        await early

    # its own ledger's first event (the provisional draw at insert takes one value: 0027)
    assert elsewhere.sequence == 2


# --- the index the adapter relies on ------------------------------------------------------------


async def test_the_partial_index_refuses_a_second_open_blocking_card_inserted_around_the_adapter(
    database: Database,
) -> None:
    stores = await database.migrated()
    await stores.interactions.insert(_card("int_1"))
    insert = (
        "INSERT INTO tf_interaction (account_id, interaction_id, conversation_id, workflow,"
        " case_id, case_revision, blocking, revision_independent, interaction, status,"
        " created_at, resolution_event_ids)"
        " VALUES (%s, %s, 'conv_1', %s, %s, 3, %s, false, '{}', 'active', now(), '[]')"
    )

    async with await _raw(database) as connection:
        with pytest.raises(psycopg.errors.UniqueViolation) as refused:
            await connection.execute(insert, (A, "int_2", CASE.workflow, CASE.case_id, True))
        await connection.execute(insert, (A, "int_3", CASE.workflow, CASE.case_id, False))
        await connection.execute(insert, ("acct_b", "int_4", CASE.workflow, CASE.case_id, True))

    assert refused.value.diag.constraint_name == "tf_one_open_blocking_interaction_per_case"
    await stores.interactions.dismiss(A, "int_1")
    async with await _raw(database) as connection:
        await connection.execute(insert, (A, "int_5", CASE.workflow, CASE.case_id, True))


# --- uncommitted and broken transactions --------------------------------------------------------


async def test_a_commit_bundle_held_open_then_rolled_back_is_never_visible_from_another_connection(
    database: Database,
) -> None:
    stores = await database.migrated()
    record = await _turn_executing(stores)
    held, release = asyncio.Event(), asyncio.Event()

    async def hold_then_abort(pid: int) -> None:
        held.set()
        await release.wait()
        raise RuntimeError("aborted before COMMIT")

    stores.hooks.before_commit = _once(hold_then_abort)
    commit = asyncio.create_task(stores.commits.commit(_bundle("a", record)))
    await held.wait()
    while_open = await _nothing_of(database, "a")
    release.set()
    with pytest.raises(RuntimeError):
        await commit

    assert while_open == []
    assert await _nothing_of(database, "a") == []
    assert (await stores.journal.get(A, "cmd_1")).status is JournalStatus.EXECUTING


async def test_a_backend_killed_mid_bundle_leaves_nothing_of_the_bundle(
    database: Database,
) -> None:
    stores = await database.migrated()
    record = await _turn_executing(stores)

    async def kill(pid: int) -> None:
        async with await _raw(database) as connection:
            await connection.execute("SELECT pg_terminate_backend(%s)", (pid,))

    stores.hooks.before_commit = _once(kill)
    with pytest.raises(Timeout):  # lost while committing: it may have landed, so re-read
        await stores.commits.commit(_bundle("a", record))

    assert await _nothing_of(database, "a") == []
    result = await stores.commits.commit(_bundle("a", record))  # resumed by key, on a new backend
    assert [e.event_id for e in result.events] == ["evt_a"]


async def test_a_connection_lost_before_commit_is_unavailable_and_writes_nothing(
    database: Database,
) -> None:
    stores = await database.migrated()
    record = await _turn_executing(stores)

    async def kill(pid: int) -> None:
        async with await _raw(database) as connection:
            await connection.execute("SELECT pg_terminate_backend(%s)", (pid,))

    stores.hooks.after_begin = _once(kill)
    with pytest.raises(Unavailable):
        await stores.commits.commit(_bundle("a", record))

    assert await _nothing_of(database, "a") == []


async def test_a_statement_held_past_the_statement_timeout_is_a_timeout(
    database: Database,
) -> None:
    await database.migrated()
    impatient = replace(database, config=replace(database.config, statement_timeout_ms=200))
    stores = await impatient.stores()
    await _turn_executing(stores)

    async with await _raw(database) as blocker, blocker.transaction():
        await blocker.execute("SELECT 1 FROM tf_turn_phase WHERE turn_id = 'turn_1' FOR UPDATE")
        with pytest.raises(Timeout):
            await stores.conversations.set_phase(A, "turn_1", TurnPhase.EXECUTING)
    moved = await stores.conversations.set_phase(A, "turn_1", TurnPhase.EXECUTING)

    assert moved.phase is TurnPhase.EXECUTING
