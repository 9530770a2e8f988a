"""A travel-desk harness: the real runtime over real stores, the sample domain and scripted model
ports, with helpers that read like the scenario they drive."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turnframe_core import (
    AssistantTurn,
    DomainEvent,
    IdSource,
    InteractionBlock,
    InteractionResponse,
    SequentialIdSource,
    TurnInput,
    WorkflowDefinition,
)
from turnframe_runtime import (
    ClaimReviewer,
    Narrator,
    OutboxConfig,
    RuntimeConfig,
    ServerCopy,
    TurnRuntime,
)
from turnframe_store import EventCursor, JournalEntry, ManualClock, MemoryStores, Stores
from turnframe_test.airline import FakeAirline
from turnframe_test.backends import StoreBackend
from turnframe_test.domains.travel import (
    Trip,
    TripDesk,
    TripDirectory,
    TripExecutor,
    TripWorkflow,
    trip_copy,
)
from turnframe_test.scripted import ScriptedInterpreter
from turnframe_test.understandings import understanding

__all__ = ["DeskHarness"]


class DeskHarness:
    """One account, one conversation, a travel desk and a runtime wired to it.

    Without `stores` the runtime runs on `MemoryStores`; tests build their harness with
    `DeskHarness.on(backend)` (the `make_desk` / `desk` fixtures) so it runs on every backend."""

    @classmethod
    async def on(
        cls,
        backend: StoreBackend,
        *,
        stores: Stores | None = None,
        clock: ManualClock | None = None,
        narrator: Narrator | None = None,
        reviewer: ClaimReviewer | None = None,
        account_id: str = "acct_1",
        conversation_id: str = "conv_1",
        config: RuntimeConfig | None = None,
        ids: IdSource | None = None,
        copy: ServerCopy | None = None,
        workflow: WorkflowDefinition | None = None,
        airline: FakeAirline | None = None,
        outbox: OutboxConfig | None = None,
    ) -> DeskHarness:
        """A harness on fresh stores of `backend` that share its clock (or on `stores`, when
        given: another harness's, to put two accounts on one database)."""
        clock = clock if clock is not None else ManualClock()
        return cls(
            stores=stores if stores is not None else await backend.stores(clock=clock),
            clock=clock,
            narrator=narrator,
            reviewer=reviewer,
            account_id=account_id,
            conversation_id=conversation_id,
            config=config,
            ids=ids,
            copy=copy,
            workflow=workflow,
            airline=airline,
            outbox=outbox,
        )

    def __init__(
        self,
        *,
        stores: Stores | None = None,
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
    ) -> None:
        self.clock = clock if clock is not None else ManualClock()
        self.stores = stores if stores is not None else MemoryStores(clock=self.clock)
        self.desk = TripDesk()
        self.interpreter = ScriptedInterpreter()
        self.narrator = narrator
        # Without one, the runtime takes the narrator's own (a scripted narrator's script also
        # holds its reviews); any other narrator needs one.
        self.reviewer = reviewer
        self.executor = TripExecutor(self.desk, clock_ms=self.clock)
        self.account_id = account_id
        self.conversation_id = conversation_id
        self.config = config or RuntimeConfig(locales=("en", "it", "de"))
        self.ids = ids if ids is not None else SequentialIdSource()
        self.copy = copy if copy is not None else trip_copy()
        self.workflow = workflow if workflow is not None else TripWorkflow()
        #: the airline the outbox reaches (`runtime.outbox` dispatches to it)
        self.airline = airline if airline is not None else FakeAirline()
        self.outbox = outbox
        self.runtime = self._runtime()

    def _runtime(self) -> TurnRuntime:
        return TurnRuntime(
            stores=self.stores,
            workflows=[self.workflow],
            directory=TripDirectory(self.desk),
            executor=self.executor,
            interpreter=self.interpreter,
            narrator=self.narrator,
            reviewer=self.reviewer,
            copy=self.copy,
            config=self.config,
            clock=self.clock,
            ids=self.ids,
            senders={"airline": self.airline},
            outbox=self.outbox,
        )

    def use_stores(self, stores: Stores) -> None:
        """Carry on with the same desk, ports, clock and ids on `stores` (e.g. the same database
        reopened)."""
        self.stores = stores
        self.runtime = self._runtime()

    def trip(self, trip_id: str = "T-100", label: str = "Rome trip", **fields: Any) -> Trip:
        return self.desk.open_trip(
            self.account_id, trip_id, label, conversation_id=self.conversation_id, **fields
        )

    def ready_trip(self, trip_id: str = "T-100", label: str = "Rome trip", **fields: Any) -> Trip:
        """A trip with every detail filled in (nothing owed)."""
        details = {"name": "Ada Lovelace", "email": "ada@example.com", "travel_date": "2027-03-14"}
        return self.trip(trip_id, label, **{**details, **fields})

    async def say(self, text: str, *parts: Any, locale: str = "en", **extra: Any) -> AssistantTurn:
        """The user writes `text`; the interpreter reads it as `parts` (acts, questions…)."""
        self.interpreter.then(understanding(*parts))
        self.clock.advance(1_000)
        return await self.runtime.handle_turn(
            TurnInput(
                account_id=self.account_id,
                conversation_id=self.conversation_id,
                text=text,
                locale=locale,
                **extra,
            )
        )

    async def click(
        self,
        card: InteractionBlock | AssistantTurn,
        option_id: str,
        *,
        revision: int | None = None,
        freeform: str | None = None,
        text: str | None = None,
        parts: Sequence[Any] = (),
        account_id: str | None = None,
        locale: str = "en",
        turn_id: str | None = None,
    ) -> AssistantTurn:
        """The user clicks `option_id` on `card` (or on the only card of a turn)."""
        block = self.card(card) if isinstance(card, AssistantTurn) else card
        if text:
            self.interpreter.then(understanding(*parts))
        self.clock.advance(1_000)
        return await self.runtime.handle_turn(
            TurnInput(
                account_id=account_id or self.account_id,
                conversation_id=self.conversation_id,
                text=text,
                locale=locale,
                interaction_response=InteractionResponse(
                    interaction_id=block.interaction_id,
                    option_id=option_id,
                    expected_case_revision=block.case_revision if revision is None else revision,
                    freeform_input=freeform,
                ),
                turn_id=turn_id,
            )
        )

    @staticmethod
    def card(turn: AssistantTurn) -> InteractionBlock:
        cards = [b for b in turn.blocks if isinstance(b, InteractionBlock)]
        if len(cards) != 1:
            raise AssertionError(f"expected one card in the turn, found {len(cards)}")
        return cards[0]

    @staticmethod
    def kinds(turn: AssistantTurn) -> list[str]:
        return [b.kind for b in turn.blocks]

    @staticmethod
    def notice_codes(turn: AssistantTurn) -> list[str]:
        return [b.code for b in turn.blocks if b.kind == "notice"]  # type: ignore[union-attr]

    @staticmethod
    def texts(turn: AssistantTurn) -> str:
        """Every text the turn shows (prose and notices), joined: for what it must never say."""
        return " ".join(str(getattr(b, "text", "") or "") for b in turn.blocks)

    @staticmethod
    def receipt_codes(turn: AssistantTurn) -> list[str]:
        return [b.status_code for b in turn.blocks if b.kind == "receipt"]  # type: ignore[union-attr]

    async def events(self) -> list[DomainEvent]:
        """Every event on this account's ledger, in commit order."""
        page = await self.stores.events.read_from(self.account_id, EventCursor.START, 10_000)
        return list(page.events)

    async def event_types(self) -> list[str]:
        return [e.event_type for e in await self.events()]

    async def journal(self, turn: AssistantTurn | str) -> tuple[JournalEntry, ...]:
        turn_id = turn if isinstance(turn, str) else turn.turn_id
        return await self.stores.journal.for_turn(self.account_id, turn_id)

    def revision(self, trip_id: str = "T-100") -> int:
        trip = self.desk.trip(self.account_id, trip_id)
        assert trip is not None
        return trip.revision
