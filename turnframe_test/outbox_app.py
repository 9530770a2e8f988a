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
processes on one server must share its `max_connections`.
"""

from __future__ import annotations

import os
from typing import Any

from turnframe_runtime import OutboxConfig, RuntimeConfig, TemplateCopy, TurnRuntime
from turnframe_store import SqlConfig, SqlStores
from turnframe_store.sql.url import parse_url
from turnframe_test.sample.airline import FakeAirline, PostgresAirlineLedger
from turnframe_test.sample.sayings import SAYINGS, SayingsInterpreter
from turnframe_test.sample.travel import TRIP_COPY, TripWorkflow
from turnframe_test.sample.travel_pg import PostgresTripDesk

__all__ = ["SAYINGS", "SayingsInterpreter", "desk_runtime", "outbox_config_from_env"]


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
    return TurnRuntime(
        stores=stores,
        workflows=[TripWorkflow()],
        directory=desk,
        executor=desk,
        interpreter=SayingsInterpreter(),
        copy=TemplateCopy(TRIP_COPY),
        config=RuntimeConfig(locales=("en", "it", "de")),
        senders={"airline": airline},
        outbox=outbox_config_from_env(),
    )
