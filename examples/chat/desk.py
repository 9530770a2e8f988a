"""The chat example's travel desk: the sample domain, a deterministic keyword interpreter in place
of a model, and the runtime wired on the embedded default (a SQLite file, the in-process broker).

The interpreter reads a few phrasings and nothing else; whatever it does not recognise becomes
a question about the trip, which the server answers from the trip's committed state. Every act
quotes the user's own words as its evidence, as a model's proposal must.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from turnframe_core import (
    Brief,
    ProposedAct,
    Question,
    StateValue,
    UlidIdSource,
    Understanding,
)
from turnframe_runtime import (
    AnswerRequest,
    OutboxConfig,
    OutboxWorker,
    ReviewRequest,
    ReviewVerdict,
    RuntimeConfig,
    TemplateCopy,
    TransitionRequest,
    TurnRuntime,
    connect_broker,
)
from turnframe_store import SqlStores, Stores, system_clock
from turnframe_test.sample.airline import FakeAirline
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
    "CHAT_ACCOUNT",
    "ChatDesk",
    "Database",
    "KeywordInterpreter",
    "PlainNarrator",
    "PlainReviewer",
    "open_desk",
]

#: the one account the example serves (a real app takes it from its session)
CHAT_ACCOUNT: Final = "acct_chat"

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


#: the trip's values an answer may read back: plain data, no flight status ("booked" would claim
#: a booking this turn made, which the wording guard refuses)
_PLAIN_FIELDS: Final = frozenset({"name", "email", "travel_date"})


class PlainNarrator:
    """Stands in for a model that writes prose: a fixed connecting sentence, and answers that
    read back the trip's details the request allows, citing them. Its prose is reviewed
    like any model's (then by the wording guard), and streams as deltas in `tokens` mode."""

    async def transition(self, request: TransitionRequest) -> Mapping[str, Any] | str:
        text = "Here is where your trip stands."
        if request.card_title:
            text = "Here is where your trip stands; the choice below is yours."
        return {"kind": "transition", "text": text, "facts_used": []}

    async def answer(self, request: AnswerRequest) -> Mapping[str, Any] | str:
        values = [
            f
            for f in request.allowed_facts
            if isinstance(f, StateValue) and f.field in _PLAIN_FIELDS and f.value
        ]
        if not values:
            text = "I have nothing on file that answers this."
            return {
                "kind": "answer",
                "question_id": request.question_id,
                "text": text,
                "status": "source_unavailable",
            }
        said = "; ".join(f"{f.field.replace('_', ' ')}: {f.value}" for f in values)
        return {
            "kind": "answer",
            "question_id": request.question_id,
            "text": f"On file for your trip: {said}.",
            "basis": request.basis,
            "facts_used": [f.model_dump(mode="json") for f in values],
        }


class PlainReviewer:
    """Stands in for the second model that reviews prose: it passes what cites only allowed
    facts (the narrator above writes nothing else); the wording guard still runs after it."""

    async def review(self, request: ReviewRequest) -> ReviewVerdict:
        return ReviewVerdict(passed=True)


@dataclass
class ChatDesk:
    """The runtime and what it runs on; `close()` stops the worker and the stores."""

    runtime: TurnRuntime
    stores: Stores
    desk: TripDesk
    worker: OutboxWorker

    def open_trip(self, conversation_id: str) -> None:
        """A conversation's trip (one per conversation, every detail but the date filled in),
        opened the first time the conversation is used by this process."""
        trip_id = "T-" + conversation_id.removeprefix("conv_")
        if self.desk.trip(CHAT_ACCOUNT, trip_id) is None:
            self.desk.open_trip(
                CHAT_ACCOUNT,
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
        reviewer=PlainReviewer() if narrate else None,
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
