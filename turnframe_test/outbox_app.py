"""The travel desk as an app for processes that share one PostgreSQL database: the runtime and
its outbox workers (`turnframe worker --app turnframe_test.outbox_app:desk_runtime`, the default
app of `turnframe worker`). The desk's records and the fake airline's ledger live in tables of
their own in the same database.

Environment knobs for tests: `TURNFRAME_TEST_AIRLINE=silent` (the airline acts and never
answers), `TURNFRAME_TEST_OUTBOX` (OutboxConfig fields as `name=value,…`).
"""

from __future__ import annotations

import os

from turnframe_runtime import OutboxConfig, RuntimeConfig, TemplateCopy, TurnRuntime
from turnframe_store import SqlStores
from turnframe_store.sql._url import parse_url
from turnframe_test.airline import FakeAirline, PostgresAirlineLedger
from turnframe_test.domains.travel import TRIP_COPY, TripWorkflow
from turnframe_test.domains.travel_pg import PostgresTripDesk

__all__ = ["desk_runtime", "outbox_config_from_env"]


def outbox_config_from_env() -> OutboxConfig:
    given = os.environ.get("TURNFRAME_TEST_OUTBOX", "")
    fields = dict(part.split("=", 1) for part in given.split(",") if part)
    return OutboxConfig(**{name: int(value) for name, value in fields.items()})


async def desk_runtime(url: str) -> TurnRuntime:
    """The travel desk's runtime on the PostgreSQL database at `url`, its airline reached
    through the outbox."""
    dialect, conninfo = parse_url(url)
    if dialect != "postgresql":
        raise ValueError("the shared travel desk keeps its records in PostgreSQL")
    stores = await SqlStores.connect(url)
    await stores.migrate()
    desk = await PostgresTripDesk(conninfo).open()
    ledger = await PostgresAirlineLedger(conninfo).open()
    airline = FakeAirline(ledger, silent=os.environ.get("TURNFRAME_TEST_AIRLINE") == "silent")
    return TurnRuntime(
        stores=stores,
        workflows=[TripWorkflow()],
        directory=desk,
        executor=desk,
        copy=TemplateCopy(TRIP_COPY),
        config=RuntimeConfig(locales=("en", "it", "de")),
        senders={"airline": airline},
        outbox=outbox_config_from_env(),
    )
