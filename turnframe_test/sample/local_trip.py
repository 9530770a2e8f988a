"""The travel desk with its trips in the store's own database (decision 0029): a
`TransactionalExecutor` whose case rows live beside the tf_* tables, on PostgreSQL or SQLite.

    local = LocalTripDesk(desk.desk, stores)      # the harness's trips, copied to SQL
    await local.create()
    await local.open_trips()
    desk.directory = desk.executor = local; desk.restart()

A click-only turn then runs in one store transaction; `execute` (recovery, text turns) runs a
batch in a store transaction of its own, and reads outside a turn use a snapshot."""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from turnframe_core import CaseKey, CommandBatch, DomainEvent
from turnframe_runtime import (
    CaseCandidate,
    ExecutionFailed,
    ExecutionRejected,
    ExecutionResult,
    LoadedCase,
    RevisionConflict,
    TransactionalExecutor,
)
from turnframe_store import SqlStores
from turnframe_test.sample.travel import TripDesk, TripDirectory, apply_trip_command, trip_event

__all__ = ["LocalTripDesk"]


class LocalTripDesk(TransactionalExecutor):
    """Trips as rows of `case_trip` (state as JSON text) and applied keys in `case_applied`,
    in the schema of `stores`; which trips a conversation may address comes from `desk`."""

    def __init__(self, desk: TripDesk, stores: SqlStores, *, clock_ms: Any = None) -> None:
        self.desk = desk
        self.directory = TripDirectory(desk)
        self.stores = stores
        self.clock_ms = clock_ms or (lambda: 1_800_000_000_000)
        schema = stores.config.schema
        prefix = f'"{schema}".' if schema else ""
        self.trip_table = f"{prefix}case_trip"
        self.applied_table = f"{prefix}case_applied"
        self._pg = stores.dialect == "postgresql"
        self._copied: set[tuple[str, str]] = set()

    def _q(self, sql: str) -> str:
        return sql.replace("?", "%s") if self._pg else sql

    async def _run(self, connection: Any, sql: str, *params: Any) -> list[Any]:
        cursor = await connection.execute(self._q(sql), params)
        try:
            return list(await cursor.fetchall()) if cursor.description else []
        finally:
            await cursor.close()

    async def create(self) -> None:
        """The two tables, in the store's database."""
        async with self.stores.transaction() as tx:
            connection = await tx.driver_connection()
            await self._run(
                connection,
                f"CREATE TABLE {self.trip_table} (account_id TEXT, trip_id TEXT,"
                " revision INTEGER, state TEXT, PRIMARY KEY (account_id, trip_id))",
            )
            await self._run(
                connection,
                f"CREATE TABLE {self.applied_table} (idempotency_key TEXT PRIMARY KEY,"
                " command TEXT, revision INTEGER, events TEXT)",
            )

    async def open_trips(self) -> None:
        """Every trip of `desk` not copied before, as it is now, copied to `case_trip`."""
        async with self.stores.transaction() as tx:
            connection = await tx.driver_connection()
            for key, trip in self.desk.trips.items():
                if key in self._copied:
                    continue
                self._copied.add(key)
                await self._run(
                    connection,
                    f"INSERT INTO {self.trip_table} VALUES (?, ?, ?, ?)",
                    trip.account_id,
                    trip.trip_id,
                    trip.revision,
                    json.dumps(trip.state),
                )

    # --- CaseDirectory -------------------------------------------------------------------------

    async def candidates(self, account_id: str, conversation_id: str) -> Sequence[CaseCandidate]:
        return await self.directory.candidates(account_id, conversation_id)

    async def authorize(self, account_id: str, case: CaseKey) -> bool:
        return await self.directory.authorize(account_id, case)

    async def load(self, account_id: str, case: CaseKey) -> LoadedCase:
        async with self.stores.snapshot() as snapshot:
            connection = await snapshot.driver_connection()
            return await self.load_in(connection, account_id, case)

    async def find(self, account_id: str, workflow: str, name: str) -> Sequence[CaseCandidate]:
        return await self.directory.find(account_id, workflow, name)

    # --- TransactionalExecutor -----------------------------------------------------------------

    async def load_in(self, connection: Any, account_id: str, case: CaseKey) -> LoadedCase:
        rows = await self._run(
            connection,
            f"SELECT revision, state FROM {self.trip_table} WHERE account_id = ? AND trip_id = ?",
            account_id,
            case.case_id,
        )
        if not rows:
            return LoadedCase(case=case, revision=0, state=None)
        return LoadedCase(case=case, revision=int(rows[0][0]), state=json.loads(rows[0][1]))

    async def execute(self, batch: CommandBatch) -> ExecutionResult:
        async with self.stores.transaction() as tx:
            connection = await tx.driver_connection()
            return await self.execute_in(connection, batch)

    async def execute_in(self, connection: Any, batch: CommandBatch) -> ExecutionResult:
        envelopes = batch.envelopes
        known: dict[str, Any] = {}
        for envelope in envelopes:
            rows = await self._run(
                connection,
                f"SELECT command, revision, events FROM {self.applied_table}"
                " WHERE idempotency_key = ?",
                envelope.idempotency_key,
            )
            if rows:
                known[envelope.idempotency_key] = rows[0]
        if known and len(known) == len(envelopes):
            events: list[DomainEvent] = []
            for envelope in envelopes:
                command, revision, stored = known[envelope.idempotency_key]
                if json.loads(command) != _command(envelope):
                    raise ExecutionFailed("idempotency_mismatch")
                events.extend(DomainEvent.model_validate(e) for e in json.loads(stored))
            first = int(known[envelopes[0].idempotency_key][1])
            return ExecutionResult(new_revision=first, events=tuple(events), replayed=True)
        if known:
            raise ExecutionFailed("partially_replayed_batch")
        account, trip_id = envelopes[0].account_id, envelopes[0].case_ref.case_id
        rows = await self._run(
            connection,
            f"SELECT state, revision FROM {self.trip_table} WHERE account_id = ? AND trip_id = ?",
            account,
            trip_id,
        )
        if not rows:
            raise ExecutionRejected("trip.not_found", "There is no such trip.")
        state, revision = copy.deepcopy(json.loads(rows[0][0])), int(rows[0][1])
        for envelope in envelopes:
            if envelope.case_ref.expected_revision != revision:
                raise RevisionConflict(revision)
        if state.get("locked"):
            raise ExecutionRejected("trip.locked", "This trip is locked by the travel desk.")
        new_revision = revision + 1
        done: list[DomainEvent] = []
        for envelope in envelopes:
            apply_trip_command(state, envelope.command_type, envelope.payload)
            done.append(trip_event(envelope, new_revision, self.clock_ms()))
        # The compare-and-swap first, and its row counted: a concurrent batch that moved the trip
        # since the read above (another conversation, or a text turn's `execute`) leaves it
        # unmoved, and this batch is a revision conflict, never a change that did not happen.
        moved = await self._run(
            connection,
            f"UPDATE {self.trip_table} SET state = ?, revision = ? WHERE account_id = ?"
            " AND trip_id = ? AND revision = ? RETURNING revision",
            json.dumps(state),
            new_revision,
            account,
            trip_id,
            revision,
        )
        if not moved:
            now = await self._run(
                connection,
                f"SELECT revision FROM {self.trip_table} WHERE account_id = ? AND trip_id = ?",
                account,
                trip_id,
            )
            raise RevisionConflict(int(now[0][0]) if now else revision)
        for envelope, event in zip(envelopes, done, strict=True):
            await self._run(
                connection,
                f"INSERT INTO {self.applied_table} VALUES (?, ?, ?, ?)",
                envelope.idempotency_key,
                json.dumps(_command(envelope)),
                new_revision,
                json.dumps([json.loads(event.model_dump_json())]),
            )
        return ExecutionResult(new_revision=new_revision, events=tuple(done))


def _command(envelope: Any) -> dict[str, Any]:
    return {
        "case_ref": envelope.case_ref.model_dump(mode="json"),
        "command_type": envelope.command_type,
        "payload": envelope.payload,
    }
