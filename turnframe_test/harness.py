"""A harness over your own domain: the real runtime over real stores, your workflows, directory,
executor and senders, a scripted interpreter and a manual clock, with helpers that read like the
scenario they drive. The travel desk's preset, `DeskHarness`, lives with the sample domain
(`turnframe_test.sample.desk`) and is importable from here too."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Self

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
    CaseDirectory,
    ClaimReviewer,
    EventOrigin,
    Interpreter,
    Narrator,
    OutboxConfig,
    OutboxSender,
    RuntimeConfig,
    ServerCopy,
    TurnRuntime,
)
from turnframe_runtime.ports import WorkflowExecutor
from turnframe_store import EventCursor, JournalEntry, ManualClock, MemoryStores, Stores
from turnframe_test.backends import StoreBackend
from turnframe_test.scripted import ScriptedInterpreter
from turnframe_test.understandings import understanding

if TYPE_CHECKING:
    from turnframe_test.sample.desk import DeskHarness

__all__ = ["DeskHarness", "Harness"]


class Harness:
    """One account, one conversation and a runtime wired to your workflows, directory, executor
    and senders. The interpreter is scripted: `say` hands it the understanding the words stand
    for. Without `stores` the runtime runs on `MemoryStores`; `Harness.on(store_backend, ...)`
    (the plugin's fixture) runs it on every backend:

        async def test_an_order_ships(store_backend):
            shop = Shop()
            harness = await Harness.on(
                store_backend,
                workflows=[OrderWorkflow()],
                directory=ShopDirectory(shop),
                executor=ShopExecutor(shop),
                senders={"warehouse": FakeWarehouse()},
                copy=TemplateCopy(SHOP_COPY),
            )
            turn = await harness.say("ship it", act("a1", "order.ship", "O-7", "ship it"))
            assert harness.receipt_codes(turn) == ["order.shipped"]
            assert await harness.event_types() == ["order.shipped"]
    """

    @classmethod
    async def on(
        cls,
        backend: StoreBackend,
        *,
        stores: Stores | None = None,
        clock: ManualClock | None = None,
        **options: Any,
    ) -> Self:
        """A harness on fresh stores of `backend` that share its clock (or on `stores`, when
        given: another harness's, to put two accounts on one database); `options` are the
        constructor's."""
        clock = clock if clock is not None else ManualClock()
        stores = stores if stores is not None else await backend.stores(clock=clock)
        return cls(stores=stores, clock=clock, **options)

    def __init__(
        self,
        *,
        workflows: Sequence[WorkflowDefinition],
        directory: CaseDirectory,
        executor: WorkflowExecutor,
        senders: Mapping[str, OutboxSender] | None = None,
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
        outbox: OutboxConfig | None = None,
        narration: Literal["structured", "free"] | None = None,
        origins: Sequence[EventOrigin] = (),
    ) -> None:
        """`narration`, when given, overrides `config`'s (free narration needs `reviewer`:
        a scripted narrator's is `narrator.reviewer`); `origins`: the senders of server
        events."""
        self.clock = clock if clock is not None else ManualClock()
        self.stores = stores if stores is not None else MemoryStores(clock=self.clock)
        self.workflows = tuple(workflows)
        self.directory = directory
        self.executor = executor
        self.senders = dict(senders or {})
        #: the port that reads the user's words: scripted unless a test passes a real one
        #: (then `say` and `click` ignore their `parts`)
        self.interpreter: Interpreter = (
            interpreter if interpreter is not None else ScriptedInterpreter()
        )
        self.narrator = narrator
        self.reviewer = reviewer
        self.account_id = account_id
        self.conversation_id = conversation_id
        self.config = config or RuntimeConfig()
        if narration is not None:
            self.config = dataclasses.replace(self.config, narration=narration)
        self.ids = ids if ids is not None else SequentialIdSource()
        self.copy = copy
        self.outbox = outbox
        self.origins = tuple(origins)
        self.runtime = self.restart()

    def restart(self) -> TurnRuntime:
        """A new runtime over the harness's current stores, domain, ports, clock and ids, as a
        restarted process gets; it becomes `runtime`. After swapping a part in (another
        harness's domain, to stand for a second process on one database), this wires it."""
        self.runtime = TurnRuntime(
            stores=self.stores,
            workflows=self.workflows,
            directory=self.directory,
            executor=self.executor,
            interpreter=self.interpreter,
            narrator=self.narrator,
            reviewer=self.reviewer,
            copy=self.copy,
            config=self.config,
            clock=self.clock,
            ids=self.ids,
            senders=self.senders,
            outbox=self.outbox,
            origins=self.origins,
        )
        return self.runtime

    def use_stores(self, stores: Stores) -> None:
        """Carry on with the same domain, ports, clock and ids on `stores` (e.g. the same
        database reopened)."""
        self.stores = stores
        self.restart()

    async def say(self, text: str, *parts: Any, locale: str = "en", **extra: Any) -> AssistantTurn:
        """The user writes `text`; the interpreter reads it as `parts` (acts, questions…)."""
        self._script(parts)
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
            self._script(parts)
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

    def _script(self, parts: Sequence[Any]) -> None:
        if isinstance(self.interpreter, ScriptedInterpreter):
            self.interpreter.then(understanding(*parts))

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


def __getattr__(name: str) -> Any:
    # The travel desk's preset loads with the sample domain, only when asked for by this name.
    if name == "DeskHarness":
        from turnframe_test.sample.desk import DeskHarness

        return DeskHarness
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
