"""The travel desk's harness: `Harness` with the sample domain (a trip desk, its workflow,
directory and executor, the fake airline the outbox reaches) and helpers that speak of trips."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from turnframe_core import IdSource, WorkflowDefinition
from turnframe_runtime import (
    ClaimReviewer,
    EventOrigin,
    Interpreter,
    Narrator,
    OutboxConfig,
    RuntimeConfig,
    ServerCopy,
)
from turnframe_store import ManualClock, Stores
from turnframe_test.harness import Harness
from turnframe_test.sample.airline import FakeAirline
from turnframe_test.sample.travel import (
    Trip,
    TripDesk,
    TripDirectory,
    TripExecutor,
    TripWorkflow,
    trip_copy,
)

__all__ = ["DeskHarness"]


class DeskHarness(Harness):
    """One account, one conversation, a travel desk and a runtime wired to it.

    Without `stores` the runtime runs on `MemoryStores`; tests build their harness with
    `DeskHarness.on(backend)` (the `make_desk` / `desk` fixtures) so it runs on every backend."""

    def __init__(
        self,
        *,
        stores: Stores | None = None,
        interpreter: Interpreter | None = None,
        narrator: Narrator | None = None,
        reviewer: ClaimReviewer | None = None,
        account_id: str = "acct_1",
        conversation_id: str = "conv_1",
        config: RuntimeConfig | None = None,
        clock: ManualClock | None = None,
        ids: IdSource | None = None,
        copy: ServerCopy | None = None,
        workflow: WorkflowDefinition | None = None,
        airline: FakeAirline | None = None,
        outbox: OutboxConfig | None = None,
        narration: Literal["structured", "free"] | None = None,
        origins: Sequence[EventOrigin] = (),
    ) -> None:
        clock = clock if clock is not None else ManualClock()
        self.desk = TripDesk()
        self.workflow = workflow if workflow is not None else TripWorkflow()
        #: the airline the outbox reaches (`runtime.outbox` dispatches to it)
        self.airline = airline if airline is not None else FakeAirline()
        super().__init__(
            workflows=[self.workflow],
            directory=TripDirectory(self.desk),
            executor=TripExecutor(self.desk, clock_ms=clock),
            senders={"airline": self.airline},
            stores=stores,
            interpreter=interpreter,
            narrator=narrator,
            reviewer=reviewer,
            account_id=account_id,
            conversation_id=conversation_id,
            config=config or RuntimeConfig(locales=("en", "it", "de")),
            clock=clock,
            ids=ids,
            copy=copy if copy is not None else trip_copy(),
            outbox=outbox,
            narration=narration,
            origins=origins,
        )

    def another_process(self) -> DeskHarness:
        """A harness standing for another process on the same stores and travel desk: its own
        runtime (its own stream hub, feed readers and in-process locks) over the same stores,
        clock, ids, config, origins, airline and domain (the desk, directory and executor)."""
        other = DeskHarness(
            stores=self.stores,
            account_id=self.account_id,
            conversation_id=self.conversation_id,
            config=self.config,
            clock=self.clock,
            ids=self.ids,
            airline=self.airline,
            origins=self.origins,
        )
        other.desk, other.directory, other.executor = self.desk, self.directory, self.executor
        other.restart()
        return other

    def trip(self, trip_id: str = "T-100", label: str = "Rome trip", **fields: Any) -> Trip:
        return self.desk.open_trip(
            self.account_id, trip_id, label, conversation_id=self.conversation_id, **fields
        )

    def ready_trip(self, trip_id: str = "T-100", label: str = "Rome trip", **fields: Any) -> Trip:
        """A trip with every detail filled in (nothing owed)."""
        details = {"name": "Ada Lovelace", "email": "ada@example.com", "travel_date": "2027-03-14"}
        return self.trip(trip_id, label, **{**details, **fields})

    def revision(self, trip_id: str = "T-100") -> int:
        trip = self.desk.trip(self.account_id, trip_id)
        assert trip is not None
        return trip.revision
