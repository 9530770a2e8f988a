"""The travel desk's records in PostgreSQL, for processes that share one database (a runtime
and its outbox workers): the same workflow, directory and executor rules as the in-memory
desk, with the trip and every applied idempotency key in tables of their own.

The executor applies a batch in one transaction: the trip row locked, its revision checked,
the commands applied, the keys recorded; a batch whose keys were applied before returns the
recorded result (replayed). So a command runs once in effect however often it is sent.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

from psycopg.types.json import Jsonb
from psycopg_pool import AsyncConnectionPool

from turnframe_core import CaseKey, CommandBatch, DomainEvent
from turnframe_runtime import (
    CaseCandidate,
    ExecutionFailed,
    ExecutionRejected,
    ExecutionResult,
    LoadedCase,
    RevisionConflict,
)
from turnframe_test.postgres import create_tables
from turnframe_test.sample.travel import TRIP, apply_trip_command, new_trip_state, trip_event

__all__ = ["PostgresTripDesk"]

_TABLES = (
    "CREATE TABLE IF NOT EXISTS travel_trip ("
    " account_id text NOT NULL, trip_id text NOT NULL, conversation_id text NOT NULL,"
    " label text NOT NULL, state jsonb NOT NULL, revision integer NOT NULL,"
    " PRIMARY KEY (account_id, trip_id))",
    "CREATE TABLE IF NOT EXISTS travel_applied ("
    " idempotency_key text PRIMARY KEY, command jsonb NOT NULL, revision integer NOT NULL,"
    " events jsonb NOT NULL)",
)


class PostgresTripDesk:
    """Directory and executor of the travel desk on PostgreSQL."""

    def __init__(self, conninfo: str, *, clock_ms: Any = None, pool_size: int = 10) -> None:
        self._conninfo = conninfo
        self._pool_size = pool_size
        self.clock_ms = clock_ms or (lambda: 1_800_000_000_000)
        self._pool: AsyncConnectionPool[Any] | None = None

    async def open(self) -> PostgresTripDesk:
        self._pool = AsyncConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=self._pool_size,
            open=False,
            kwargs={"autocommit": True},
        )
        await self._pool.open()
        async with self._pool.connection() as connection:
            await create_tables(connection, _TABLES)
        return self

    @property
    def pool(self) -> AsyncConnectionPool[Any]:
        if self._pool is None:
            raise RuntimeError("open() the desk first")
        return self._pool

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.close()

    async def open_trip(
        self, account_id: str, trip_id: str, label: str, conversation_id: str, **fields: Any
    ) -> None:
        state = new_trip_state(label, **fields)
        async with self.pool.connection() as connection:
            await connection.execute(
                "INSERT INTO travel_trip VALUES (%s, %s, %s, %s, %s, 1)",
                (account_id, trip_id, conversation_id, label, Jsonb(state)),
            )

    async def state(self, account_id: str, trip_id: str) -> dict[str, Any] | None:
        async with self.pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT state FROM travel_trip WHERE account_id = %s AND trip_id = %s",
                (account_id, trip_id),
            )
            row = await cursor.fetchone()
        return None if row is None else dict(row[0])

    # --- CaseDirectory ---------------------------------------------------------------------------

    async def candidates(self, account_id: str, conversation_id: str) -> Sequence[CaseCandidate]:
        async with self.pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT trip_id, label FROM travel_trip"
                " WHERE account_id = %s AND conversation_id = %s ORDER BY trip_id",
                (account_id, conversation_id),
            )
            rows = await cursor.fetchall()
        return [CaseCandidate(case=CaseKey(workflow=TRIP, case_id=r[0]), label=r[1]) for r in rows]

    async def authorize(self, account_id: str, case: CaseKey) -> bool:
        return case.workflow == TRIP and await self.state(account_id, case.case_id) is not None

    async def load(self, account_id: str, case: CaseKey) -> LoadedCase:
        async with self.pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT state, revision FROM travel_trip WHERE account_id = %s AND trip_id = %s",
                (account_id, case.case_id),
            )
            row = await cursor.fetchone()
        if row is None:
            return LoadedCase(case=case, revision=0, state=None)
        return LoadedCase(case=case, revision=int(row[1]), state=dict(row[0]))

    async def find(self, account_id: str, workflow: str, name: str) -> Sequence[CaseCandidate]:
        async with self.pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT trip_id, label FROM travel_trip WHERE account_id = %s AND label = %s",
                (account_id, name),
            )
            rows = await cursor.fetchall()
        return [CaseCandidate(case=CaseKey(workflow=TRIP, case_id=r[0]), label=r[1]) for r in rows]

    # --- WorkflowExecutor ------------------------------------------------------------------------

    async def execute(self, batch: CommandBatch) -> ExecutionResult:
        envelopes = batch.envelopes
        keys = [e.idempotency_key for e in envelopes]
        async with self.pool.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                "SELECT idempotency_key, command, revision, events FROM travel_applied"
                " WHERE idempotency_key = ANY(%s)",
                (keys,),
            )
            known = {row[0]: row for row in await cursor.fetchall()}
            if known and len(known) == len(keys):
                events: list[DomainEvent] = []
                for envelope in envelopes:
                    _, command, revision, stored = known[envelope.idempotency_key]
                    if command != _command(envelope):
                        raise ExecutionFailed("idempotency_mismatch")
                    events.extend(DomainEvent.model_validate(e) for e in stored)
                first = known[keys[0]][2]
                return ExecutionResult(new_revision=first, events=tuple(events), replayed=True)
            if known:
                raise ExecutionFailed("partially_replayed_batch")
            account, trip_id = envelopes[0].account_id, envelopes[0].case_ref.case_id
            cursor = await connection.execute(
                "SELECT state, revision FROM travel_trip"
                " WHERE account_id = %s AND trip_id = %s FOR UPDATE",
                (account, trip_id),
            )
            row = await cursor.fetchone()
            if row is None:
                raise ExecutionRejected("trip.not_found", "There is no such trip.")
            state, revision = copy.deepcopy(dict(row[0])), int(row[1])
            for envelope in envelopes:
                if envelope.case_ref.expected_revision != revision:
                    raise RevisionConflict(revision)
            if state.get("locked"):
                raise ExecutionRejected("trip.locked", "This trip is locked by the travel desk.")
            new_revision = revision + 1
            done: list[DomainEvent] = []
            for envelope in envelopes:
                apply_trip_command(state, envelope.command_type, envelope.payload)
                event = trip_event(envelope, new_revision, self.clock_ms())
                done.append(event)
                await connection.execute(
                    "INSERT INTO travel_applied VALUES (%s, %s, %s, %s)",
                    (
                        envelope.idempotency_key,
                        Jsonb(_command(envelope)),
                        new_revision,
                        Jsonb([json.loads(event.model_dump_json())]),
                    ),
                )
            await connection.execute(
                "UPDATE travel_trip SET state = %s, revision = %s"
                " WHERE account_id = %s AND trip_id = %s",
                (Jsonb(state), new_revision, account, trip_id),
            )
        return ExecutionResult(new_revision=new_revision, events=tuple(done))

    async def outcome(self, idempotency_key: str) -> ExecutionResult | None:
        async with self.pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT revision, events FROM travel_applied WHERE idempotency_key = %s",
                (idempotency_key,),
            )
            row = await cursor.fetchone()
        if row is None:
            return None
        events = tuple(DomainEvent.model_validate(e) for e in row[1])
        return ExecutionResult(new_revision=int(row[0]), events=events, replayed=True)


def _command(envelope: Any) -> dict[str, Any]:
    return {
        "case_ref": envelope.case_ref.model_dump(mode="json"),
        "command_type": envelope.command_type,
        "payload": envelope.payload,
    }
