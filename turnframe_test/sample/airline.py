"""A fake airline: the travel desk's outside world, reached only through the outbox.

It honours idempotency keys as a real destination must: a key it has seen takes no second
effect and answers with the first reference. Its ledger records every key it acted on (once)
and how many requests carried it, in memory or, so that worker processes share it, in a
PostgreSQL table (`fake_airline_request`).

Behaviours for tests: `silent` (the request arrives and is acted on, but no answer comes back:
an unknown outcome that reconciliation settles), `refuse` (legs it refuses), `busy_first` (the
first N requests of each key fail retryably, before arriving).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from turnframe_core import derive_id
from turnframe_runtime import (
    NotReceived,
    OutboxRequest,
    SendCompleted,
    SendFailed,
    SendResult,
)

__all__ = ["AirlineLedger", "FakeAirline", "MemoryAirlineLedger", "PostgresAirlineLedger"]


def _reference(key: str) -> str:
    return derive_id("evt", "turnframe_test.airline.reference", {"key": key})[4:14].upper()


class AirlineLedger(Protocol):
    async def act(self, key: str, outbox_id: str) -> str:
        """Record a request with `key`: the first takes effect; returns the reference."""
        ...

    async def find(self, key: str) -> str | None:
        """The reference of the request with `key`, or None if none arrived."""
        ...


@dataclass
class MemoryAirlineLedger:
    #: key -> (reference, requests that carried it)
    requests: dict[str, tuple[str, int]] = field(default_factory=dict)

    async def act(self, key: str, outbox_id: str) -> str:
        reference, seen = self.requests.get(key, (_reference(key), 0))
        self.requests[key] = (reference, seen + 1)
        return reference

    async def find(self, key: str) -> str | None:
        found = self.requests.get(key)
        return found[0] if found else None


class PostgresAirlineLedger:
    """The ledger in a table of its own, shared by every process on the database."""

    def __init__(self, conninfo: str, *, pool_size: int = 8) -> None:
        self._conninfo = conninfo
        self._pool_size = pool_size
        self._pool: Any = None

    async def open(self) -> PostgresAirlineLedger:
        from psycopg_pool import AsyncConnectionPool

        self._pool = AsyncConnectionPool(
            self._conninfo,
            min_size=1,
            max_size=self._pool_size,
            open=False,
            kwargs={"autocommit": True},
        )
        await self._pool.open()
        from turnframe_test.postgres import create_tables

        async with self._pool.connection() as connection:
            await create_tables(
                connection,
                [
                    "CREATE TABLE IF NOT EXISTS fake_airline_request ("
                    " idempotency_key text PRIMARY KEY, outbox_id text NOT NULL,"
                    " reference text NOT NULL, requests integer NOT NULL)"
                ],
            )
        return self

    async def act(self, key: str, outbox_id: str) -> str:
        async with self._pool.connection() as connection:
            cursor = await connection.execute(
                "INSERT INTO fake_airline_request VALUES (%s, %s, %s, 1)"
                " ON CONFLICT (idempotency_key) DO UPDATE"
                " SET requests = fake_airline_request.requests + 1 RETURNING reference",
                (key, outbox_id, _reference(key)),
            )
            row = await cursor.fetchone()
            return str(row[0])

    async def find(self, key: str) -> str | None:
        async with self._pool.connection() as connection:
            cursor = await connection.execute(
                "SELECT reference FROM fake_airline_request WHERE idempotency_key = %s", (key,)
            )
            row = await cursor.fetchone()
            return None if row is None else str(row[0])

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.close()


class FakeAirline:
    """The sender for the `airline` destination."""

    def __init__(
        self,
        ledger: AirlineLedger | None = None,
        *,
        silent: bool = False,
        refuse: Iterable[str] = (),
        busy_first: int = 0,
    ) -> None:
        self.ledger: AirlineLedger = ledger or MemoryAirlineLedger()
        self.silent = silent
        self.refuse = set(refuse)
        self.busy_first = busy_first
        self._busy: dict[str, int] = {}
        self.sent = 0
        self.reconciled = 0

    async def send(self, request: OutboxRequest) -> SendResult:
        self.sent += 1
        key = request.idempotency_key
        if self._busy.get(key, 0) < self.busy_first:
            self._busy[key] = self._busy.get(key, 0) + 1
            return SendFailed("airline.busy", retryable=True)
        leg = str(request.payload.get("leg", ""))
        if leg in self.refuse:
            return SendFailed("airline.no_seats")
        reference = await self.ledger.act(key, request.outbox_id)
        if self.silent:  # it acted; the answer never comes back
            await asyncio.sleep(3_600)
        return SendCompleted(reference=reference, answer={"leg": leg})

    async def reconcile(self, request: OutboxRequest) -> SendResult | NotReceived:
        self.reconciled += 1
        reference = await self.ledger.find(request.idempotency_key)
        if reference is None:
            return NotReceived()
        return SendCompleted(reference=reference, answer={"leg": request.payload.get("leg")})
