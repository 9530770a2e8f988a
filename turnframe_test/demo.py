"""`turnframe demo`: a scripted travel-desk conversation, printed turn by turn.

The interpreter is scripted (no model needed); everything else is the real runtime: reduction,
policy, cards persisted before they are shown, journal, executor, the commit bundle, receipts read
back from the ledger, the claim guard and the stored turn.

The command keeps its data in a SQLite file (`./turnframe-demo.db`, or the database `--db URL`
names, PostgreSQL included). Each run is a new conversation of the same account; a run that finds
an earlier one reloads it from the store first and prints its first turn, byte for byte as stored.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final, TextIO

from turnframe_core import (
    AnswerBlock,
    AssistantTurn,
    InteractionBlock,
    NoticeBlock,
    ReceiptBlock,
    TransitionBlock,
    UlidIdSource,
    verify_chain,
)
from turnframe_core._canonical import digest_bytes
from turnframe_runtime import (
    CatalogCopy,
    OutboxConfig,
    OutboxWorker,
    RuntimeConfig,
    TurnRuntime,
    connect_broker,
)
from turnframe_store import (
    InvalidDatabaseUrl,
    ManualClock,
    MissingExtra,
    NotFound,
    SqlStores,
    Stores,
    system_clock,
)
from turnframe_test.domains.travel import (
    TRIP_TEMPLATES,
    TripDesk,
    TripDirectory,
    TripWorkflow,
)
from turnframe_test.harness import DeskHarness
from turnframe_test.understandings import act, question

__all__ = [
    "DEMO_ACCOUNT",
    "DEMO_DB_FILE",
    "default_database_url",
    "recovery_runtime",
    "register",
    "run_demo",
]

DEMO_DB_FILE: Final = "turnframe-demo.db"
#: the embedded mode's relay polls (SQLite has no notifications) every 20 ms
EMBEDDED: Final = OutboxConfig(poll_ms=20)
DEMO_ACCOUNT: Final = "acct_demo"


def register(commands: Any) -> None:
    parser = commands.add_parser("demo", help="run a scripted travel-desk conversation")
    parser.add_argument(
        "--db",
        metavar="URL",
        help=f"the store's database (default: the SQLite file ./{DEMO_DB_FILE}; "
        "postgresql+psycopg://user@host/db works too)",
    )
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        asyncio.run(run_demo(sys.stdout, db=args.db or default_database_url()))
    except (InvalidDatabaseUrl, MissingExtra) as unusable:  # the --db given cannot work: usage
        print(f"turnframe demo: {unusable}", file=sys.stderr)
        return 2
    return 0


async def recovery_runtime(url: str) -> TurnRuntime:
    """The travel desk's runtime on the database at `url`, for `turnframe recover --app
    turnframe_test.demo:recovery_runtime`. The demo keeps its domain in its own process, so
    this one has none: it finishes what needs no domain (interrupted turns, replies composed
    again from the ledger) and leaves a command it cannot ask about unknown rather than guess."""
    desk = TripDesk()
    return TurnRuntime(
        stores=await SqlStores.connect(url),
        workflows=[TripWorkflow()],
        directory=TripDirectory(desk),
        executor=_NoDomain(),
        copy=CatalogCopy(TRIP_TEMPLATES),
        config=RuntimeConfig(locales=("en", "it")),
    )


class _NoDomain:
    """An executor with no domain behind it: whatever it is asked to run has an unknown
    outcome (it raises), and it offers no `outcome` query, so nothing is settled by a guess."""

    async def execute(self, batch: Any) -> Any:
        raise RuntimeError("the demo's domain lives in the process that ran the demo")


def default_database_url(directory: Path | None = None) -> str:
    """The demo's SQLite file in `directory` (default: the current directory)."""
    path = (directory or Path.cwd()).resolve() / DEMO_DB_FILE
    return f"sqlite+aiosqlite:///{path}"


def _print_turn(out: TextIO, number: int, said: str, turn: AssistantTurn) -> None:
    out.write(f"\n── turn {number} ─ user: {said}\n")
    for block in turn.blocks:
        author = block.author if hasattr(block, "author") else "?"
        if isinstance(block, AnswerBlock | TransitionBlock) and block.copy_ref is not None:
            author = "server copy"
        if isinstance(block, ReceiptBlock):
            out.write(f"  [receipt · {author}] {block.title}\n")
            out.write(f"      status {block.status_code}; events {', '.join(block.event_ids)}\n")
        elif isinstance(block, NoticeBlock):
            out.write(f"  [notice · {author}] {block.text}  ({block.code})\n")
        elif isinstance(block, AnswerBlock):
            out.write(f"  [answer · {author}] {block.text}  ({block.status.value})\n")
        elif isinstance(block, TransitionBlock):
            out.write(f"  [transition · {author}] {block.text}\n")
        elif isinstance(block, InteractionBlock):
            options = " | ".join(f"{o.label} ({o.option_id})" for o in block.options)
            out.write(f"  [card · {author}] {block.title}  → {options}\n")
            out.write(
                f"      {block.interaction_kind.value}, bound to revision {block.case_revision}\n"
            )
        else:
            out.write(f"  [{block.kind} · {author}]\n")
    out.write(f"  replay token {turn.replay_token}\n")


async def run_demo(
    out: TextIO, *, db: str | None = None, desk: DeskHarness | None = None
) -> list[AssistantTurn]:
    """Run the scripted conversation, print every turn, return the turns.

    Without `db` the conversation runs on `desk` (a fresh harness on its own stores; default: in
    memory). With `db` (a database URL) the stores live there: the run is a new conversation, and
    an earlier run's conversation is reloaded and shown first.
    """
    if db is None:
        return await _converse(out, desk if desk is not None else DeskHarness(outbox=EMBEDDED))
    if desk is not None:
        raise ValueError("run_demo takes a database URL or a harness, not both")
    stores = await SqlStores.connect(db)
    try:
        await stores.migrate()
        where = stores.url.removeprefix("sqlite+aiosqlite:///")
        out.write(f"Store: {where}  (another database: turnframe demo --db URL)\n")
        run = await _next_run(stores)
        if run > 1:
            await _show_earlier_run(out, stores, run - 1)
        desk = DeskHarness(
            outbox=EMBEDDED,
            stores=stores,
            clock=ManualClock(system_clock()),
            ids=UlidIdSource(),
            account_id=DEMO_ACCOUNT,
            conversation_id=_conversation(run),
        )
        out.write(f"\nRun {run}: a new conversation, {desk.conversation_id}\n")
        return await _converse(out, desk, trip_id=f"T-{100 + run}")
    finally:
        await stores.aclose()


async def _last_turn(desk: DeskHarness) -> AssistantTurn:
    """The conversation's newest turn (the follow-up the server wrote)."""
    (turn,) = await desk.runtime.load_conversation(desk.account_id, desk.conversation_id, 1)
    return turn


def _conversation(run: int) -> str:
    return f"conv_demo_{run:04d}"


async def _next_run(stores: Stores) -> int:
    run = 1
    while True:
        try:
            await stores.conversations.get_conversation(DEMO_ACCOUNT, _conversation(run))
        except NotFound:
            return run
        run += 1


async def _show_earlier_run(out: TextIO, stores: Stores, run: int) -> None:
    conversation = _conversation(run)
    turns = await stores.conversations.list_turns(DEMO_ACCOUNT, conversation)
    records = await stores.replay.for_conversation(DEMO_ACCOUNT, conversation)
    chain = "intact" if not verify_chain(records) else "BROKEN"
    out.write(
        f"\nReloaded run {run} from the store: {conversation}, {len(turns)} turns, "
        f"replay chain {chain}. Its first turn:\n"
    )
    first = turns[0]
    reply = await stores.conversations.get_assistant_turn(DEMO_ACCOUNT, first.turn_id)
    _print_turn(out, 1, first.input.text or "(a card answer)", reply)
    out.write(f"  stored bytes {_stored_digest(reply)} (run {run} printed the same)\n")


def _stored_digest(turn: AssistantTurn) -> str:
    return digest_bytes(turn.to_stored_json().encode("utf-8"))


async def _converse(out: TextIO, desk: DeskHarness, trip_id: str = "T-100") -> list[AssistantTurn]:
    desk.trip(trip_id, "Rome trip")
    turns: list[AssistantTurn] = []
    number = 0

    async def step(said: str, action: Callable[[], Awaitable[AssistantTurn]]) -> AssistantTurn:
        nonlocal number
        number += 1
        turn = await action()
        _print_turn(out, number, said, turn)
        turns.append(turn)
        return turn

    text = "I'm Ada Lovelace, my email is ada@example.com. Which flights do I have?"
    await step(
        text,
        lambda: desk.say(
            text,
            act("a1", "trip.set_name", "h1", "Ada Lovelace", name="Ada Lovelace"),
            act("a2", "trip.set_email", "h1", "ada@example.com", email="ada@example.com"),
            question("q1", "Which flights do I have?", "h1"),
        ),
    )
    text = "Please rebook my outbound flight."
    asked = await step(
        text,
        lambda: desk.say(
            text, act("a1", "trip.request_rebooking", "h1", "rebook my outbound", leg="outbound")
        ),
    )
    card = desk.card(asked)
    # The airline is reached only through the outbox: an in-process dramatiq worker (the
    # embedded mode) carries the row out, and the server tells the conversation what came back.
    worker = OutboxWorker(desk.runtime, connect_broker("stub://"), threads=2)
    await worker.start()
    try:
        await step("(clicks “Rebook”)", lambda: desk.click(card, "opt_rebook"))
        await worker.drain()
    finally:
        await worker.stop()
    await step("(the airline answers; no user message)", lambda: _last_turn(desk))
    await step("(clicks “Rebook” on the same card again)", lambda: desk.click(card, "opt_rebook"))
    text = "Rebook the return flight as well."
    asked = await step(
        text,
        lambda: desk.say(
            text, act("a1", "trip.request_rebooking", "h1", "Rebook the return", leg="return")
        ),
    )
    stale = desk.card(asked)
    text = "I travel on 2027-03-14."
    await step(
        text,
        lambda: desk.say(
            text, act("a1", "trip.set_travel_date", "h1", "2027-03-14", travel_date="2027-03-14")
        ),
    )
    await step(
        "(clicks “Rebook” on the return-flight card shown before the edit)",
        lambda: desk.click(stale, "opt_rebook"),
    )
    text = "Rebook the outbound flight again."
    await step(
        text,
        lambda: desk.say(
            text, act("a1", "trip.request_rebooking", "h1", "Rebook the outbound", leg="outbound")
        ),
    )
    text = "What do you have on file for my trip?"
    await step(text, lambda: desk.say(text, question("q1", text, "h1")))
    reloaded = await desk.runtime.load_turn(desk.account_id, turns[0].turn_id)
    same = reloaded.to_stored_json() == turns[0].to_stored_json()
    out.write(
        f"\nReloaded turn 1 from the store: {'identical' if same else 'DIFFERENT'} blocks "
        f"(stored bytes {_stored_digest(reloaded)}).\n"
    )
    return turns
