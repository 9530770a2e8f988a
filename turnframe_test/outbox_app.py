"""The travel desk as an app for processes that share one PostgreSQL database: the runtime and
its outbox workers (`turnframe worker --app turnframe_test.outbox_app:desk_runtime`, the default
app of `turnframe worker`). The desk's records and the fake airline's ledger live in tables of
their own in the same database.

Its interpreter reads the fixed sayings of `SAYINGS` (the real-process chaos and scale-out runs
send them; any other text is understood as nothing).

Environment knobs for tests: `TURNFRAME_TEST_AIRLINE=silent` (the airline acts and never
answers), `TURNFRAME_TEST_OUTBOX` (OutboxConfig fields as `name=value,…`),
`TURNFRAME_TEST_SQL` (SqlConfig's integer fields, the same way), `TURNFRAME_TEST_DESK_POOL` and
`TURNFRAME_TEST_AIRLINE_POOL` (connections of the desk's and the airline's pools): many
processes on one server must share its `max_connections`; `TURNFRAME_TEST_RUNTIME`
(RuntimeConfig's integer fields, e.g. `timer_lease_ms=2000`); `TURNFRAME_TEST_STALL_AFTER` (a
command type: the executor applies a batch holding it, writes the file
`TURNFRAME_TEST_STALL_MARKER` and then hangs, so a test kills the process there).

Its server events come from `TrustedOrigin("desk")` (`EVENT_ORIGIN`).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from turnframe_core import CommandBatch
from turnframe_runtime import (
    ExecutionResult,
    Executor,
    OutboxConfig,
    RuntimeConfig,
    TemplateCopy,
    TrustedOrigin,
    TurnRuntime,
    WorkflowExecutor,
)
from turnframe_store import SqlConfig, SqlStores
from turnframe_store.sql.url import parse_url
from turnframe_test.sample.airline import FakeAirline, PostgresAirlineLedger
from turnframe_test.sample.sayings import SAYINGS, SayingsInterpreter
from turnframe_test.sample.travel import TRIP_COPY, TripWorkflow
from turnframe_test.sample.travel_pg import PostgresTripDesk

__all__ = [
    "EVENT_ORIGIN",
    "SAYINGS",
    "SayingsInterpreter",
    "desk_runtime",
    "outbox_config_from_env",
]

#: the origin of the desk's server events (code inside the deployment: no signature)
EVENT_ORIGIN = "desk"


def _fields(variable: str) -> dict[str, Any]:
    given = os.environ.get(variable, "")
    return {name: int(value) for name, value in (p.split("=", 1) for p in given.split(",") if p)}


def outbox_config_from_env() -> OutboxConfig:
    return OutboxConfig(**_fields("TURNFRAME_TEST_OUTBOX"))


async def desk_runtime(url: str) -> TurnRuntime:
    """The travel desk's runtime on the PostgreSQL database at `url`, its airline reached
    through the outbox."""
    dialect, conninfo = parse_url(url)
    if dialect != "postgresql":
        raise ValueError("the shared travel desk keeps its records in PostgreSQL")
    stores = await SqlStores.connect(url, SqlConfig(**_fields("TURNFRAME_TEST_SQL")))
    await stores.migrate()
    pool = int(os.environ.get("TURNFRAME_TEST_DESK_POOL", "8"))
    desk = await PostgresTripDesk(conninfo, pool_size=pool).open()
    airline_pool = int(os.environ.get("TURNFRAME_TEST_AIRLINE_POOL", "8"))
    ledger = await PostgresAirlineLedger(conninfo, pool_size=airline_pool).open()
    airline = FakeAirline(ledger, silent=os.environ.get("TURNFRAME_TEST_AIRLINE") == "silent")
    stall = os.environ.get("TURNFRAME_TEST_STALL_AFTER")
    marker = os.environ.get("TURNFRAME_TEST_STALL_MARKER")
    executor: Executor | WorkflowExecutor = desk
    if stall and marker:
        executor = _StallAfter(desk, stall, Path(marker))
    return TurnRuntime(
        stores=stores,
        workflows=[TripWorkflow()],
        directory=desk,
        executor=executor,
        interpreter=SayingsInterpreter(),
        copy=TemplateCopy(TRIP_COPY),
        config=RuntimeConfig(locales=("en", "it", "de"), **_fields("TURNFRAME_TEST_RUNTIME")),
        senders={"airline": airline},
        outbox=outbox_config_from_env(),
        origins=[TrustedOrigin(EVENT_ORIGIN)],
    )


class _StallAfter(Executor):
    """The desk's executor, hanging after it applied a batch that holds `command_type` (the
    effect is in the desk's tables; the turn never hears of it), once `marker` is written."""

    def __init__(self, desk: PostgresTripDesk, command_type: str, marker: Path) -> None:
        self.desk = desk
        self.command_type = command_type
        self.marker = marker

    async def execute(self, batch: CommandBatch) -> ExecutionResult:
        result = await self.desk.execute(batch)
        if any(e.command_type == self.command_type for e in batch.envelopes):
            self.marker.write_text("applied")
            await asyncio.sleep(3_600)  # killed here
        return result

    async def outcome(self, idempotency_key: str) -> ExecutionResult | None:
        return await self.desk.outcome(idempotency_key)
