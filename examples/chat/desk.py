"""The chat example's travel desk: the sample domain, a deterministic keyword interpreter in place
of a model, and the runtime wired on the embedded default (a SQLite file, the in-process broker).

The interpreter reads a few phrasings and nothing else; whatever it does not recognise becomes
a question about the trip, which the server answers from the trip's committed state. Every act
quotes the user's own words as its evidence, as a model's proposal must.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from turnframe_core import (
    Brief,
    ProposedAct,
    Question,
    UlidIdSource,
    Understanding,
)
from turnframe_runtime import (
    OutboxConfig,
    OutboxWorker,
    RuntimeConfig,
    TemplateCopy,
    TurnRuntime,
    connect_broker,
)
from turnframe_store import SqlStores, Stores, system_clock
from turnframe_test.sample.airline import FakeAirline
from turnframe_test.sample.narrator import DeskNarrator
from turnframe_test.sample.travel import (
    KEEP_LEG,
    REQUEST_REBOOKING,
    SET_EMAIL,
    SET_NAME,
    SET_TRAVEL_DATE,
    TRIP_COPY,
    WITHDRAW,
    TripDesk,
    TripDirectory,
    TripExecutor,
    TripWorkflow,
)
from turnframe_test.understandings import act, question

__all__ = [
    "ChatDesk",
    "Database",
    "KeywordInterpreter",
    "PlainNarrator",
    "open_desk",
]

_LEG: Final = re.compile(r"\b(outbound|return)\b", re.IGNORECASE)
_REBOOK: Final = re.compile(r"\brebook", re.IGNORECASE)
_KEEP: Final = re.compile(r"\bkeep\b", re.IGNORECASE)
_CANCEL: Final = re.compile(r"\b(cancel|withdraw)\b", re.IGNORECASE)
_NAME: Final = re.compile(r"\b(?:my name is|i am|i'm)\s+([^\W\d_][^\d,.@]*[^\W\d_])", re.IGNORECASE)
_EMAIL: Final = re.compile(r"[^@\s,;]+@[^@\s,;]+\.[^@\s,;.]+")
_DATE: Final = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")


class KeywordInterpreter:
    """Reads a message by keywords: "cancel my trip", "rebook the outbound", "keep the return",
    "my name is …", an email address, a date like 2027-03-14; anything else is a question."""

    async def understand(self, brief: Brief) -> Understanding:
        text = (brief.text or "").strip()
        offered = {o.operation for o in brief.operations}
        handle = brief.handles[0].handle if brief.handles else None
        if not text or handle is None:
            return Understanding()
        acts: list[ProposedAct] = []

        def propose(operation: str, **arguments: str) -> None:
            if operation in offered:
                acts.append(act(f"a{len(acts) + 1}", operation, handle, text, **arguments))

        if _CANCEL.search(text):
            propose(WITHDRAW)
        leg = _LEG.search(text)
        if leg and _REBOOK.search(text):
            propose(REQUEST_REBOOKING, leg=leg.group(1).lower())
        elif leg and _KEEP.search(text):
            propose(KEEP_LEG, leg=leg.group(1).lower())
        if name := _NAME.search(text):
            propose(SET_NAME, name=name.group(1).strip())
        if email := _EMAIL.search(text):
            propose(SET_EMAIL, email=email.group(0))
        if day := _DATE.search(text):
            propose(SET_TRAVEL_DATE, travel_date=day.group(0))
        questions: tuple[Question, ...] = ()
        if not acts:
            questions = (question("q1", text, handle),)
        return Understanding(acts=tuple(acts), questions=questions)


#: the trip's values an answer may state: plain data, not the flights' status (an answer about
#: a flight reads the record's own words from the receipts above it)
_PLAIN_FIELDS: Final = frozenset({"name", "email", "travel_date"})


class PlainNarrator(DeskNarrator):
    """Stands in for a model that narrates: it chooses moves, as any narrator in structured mode
    does, and the server renders them through its own copy in the turn's language (nothing it
    chooses is its own words). Answers state only the trip's plain details."""

    def __init__(self) -> None:
        super().__init__(_PLAIN_FIELDS)


@dataclass
class ChatDesk:
    """The runtime and what it runs on; `close()` stops the worker and the stores."""

    runtime: TurnRuntime
    stores: Stores
    desk: TripDesk
    worker: OutboxWorker

    async def open_trip(self, account_id: str, conversation_id: str) -> None:
        """The account's trip for a conversation (one per conversation, every detail but the
        date filled in), opened the first time the conversation is used by this process."""
        trip_id = "T-" + conversation_id.removeprefix("conv_")
        if self.desk.trip(account_id, trip_id) is None:
            self.desk.open_trip(
                account_id,
                trip_id,
                "Rome trip",
                conversation_id=conversation_id,
                name="Ada Lovelace",
                email="ada@example.com",
            )

    async def close(self) -> None:
        await self.worker.stop()
        await self.stores.aclose()


#: where the desk keeps its turns: a database URL, or a function opening ready stores
Database = str | Callable[[], Awaitable[Stores]]


async def open_desk(database: Database, *, narrate: bool = True) -> ChatDesk:
    """The travel desk's runtime on `database` (a URL: connected and migrated here), with an
    in-process outbox worker (the stub broker) carrying rebookings to a fake airline. Without
    `narrate`, every block is server copy (nothing streams as deltas). `close()` closes the
    stores either way."""
    if isinstance(database, str):
        sql = await SqlStores.connect(database)
        await sql.migrate()
        stores: Stores = sql
    else:
        stores = await database()
    desk = TripDesk()
    runtime = TurnRuntime(
        stores=stores,
        workflows=[TripWorkflow()],
        directory=TripDirectory(desk),
        executor=TripExecutor(desk, clock_ms=system_clock),
        interpreter=KeywordInterpreter(),
        narrator=PlainNarrator() if narrate else None,
        copy=TemplateCopy(TRIP_COPY),
        config=RuntimeConfig(locales=("en", "it", "de")),
        clock=system_clock,
        ids=UlidIdSource(system_clock),
        senders={"airline": FakeAirline()},
        outbox=OutboxConfig(poll_ms=20),
    )
    worker = OutboxWorker(runtime, connect_broker("stub://"), threads=2)
    await worker.start()
    return ChatDesk(runtime=runtime, stores=stores, desk=desk, worker=worker)
