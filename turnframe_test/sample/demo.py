"""`turnframe demo`: a scripted travel-desk conversation, printed turn by turn.

The interpreter is scripted and the narrator deterministic (no model needed); everything else is
the real runtime: reduction, policy, cards persisted before they are shown, journal, executor, the
commit bundle, receipts read back from the ledger, structured narration (the narrator chooses
moves, the server renders them in the demo's language), the claim guard and the stored turn.

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
from turnframe_core.canonical import digest_bytes
from turnframe_runtime import (
    OutboxConfig,
    OutboxWorker,
    RuntimeConfig,
    TemplateCopy,
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
from turnframe_test.sample.desk import DeskHarness
from turnframe_test.sample.narrator import DeskNarrator
from turnframe_test.sample.travel import (
    TRIP_COPY,
    TripDesk,
    TripDirectory,
    TripWorkflow,
)
from turnframe_test.understandings import act, question

__all__ = [
    "DEMO_ACCOUNT",
    "DEMO_LOCALES",
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
    parser.add_argument(
        "--locale",
        default="en",
        choices=sorted(DEMO_LOCALES),
        help="the conversation's language: the user speaks it and every server sentence is "
        "rendered in it (default: en)",
    )
    parser.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        asyncio.run(run_demo(sys.stdout, db=args.db or default_database_url(), locale=args.locale))
    except (InvalidDatabaseUrl, MissingExtra) as unusable:  # the --db given cannot work: usage
        print(f"turnframe demo: {unusable}", file=sys.stderr)
        return 2
    return 0


async def recovery_runtime(url: str) -> TurnRuntime:
    """The travel desk's runtime on the database at `url`, for `turnframe recover --app
    turnframe_test.sample.demo:recovery_runtime`. The demo keeps its domain in its own process, so
    this one has none: it finishes what needs no domain (interrupted turns, replies composed
    again from the ledger) and leaves a command it cannot ask about unknown rather than guess."""
    desk = TripDesk()
    return TurnRuntime(
        stores=await SqlStores.connect(url),
        workflows=[TripWorkflow()],
        directory=TripDirectory(desk),
        executor=_NoDomain(),
        copy=TemplateCopy(TRIP_COPY),
        config=RuntimeConfig(locales=("en", "it", "de")),
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


def _print_turn(out: TextIO, number: int, said: str, turn: AssistantTurn, locale: str) -> None:
    words = DEMO_LOCALES[locale]
    out.write(f"\n── {words['turn']} {number} ─ {words['user']}: {said}\n")
    for block in turn.blocks:
        author = words.get(getattr(block, "author", ""), "?")
        if isinstance(block, AnswerBlock | TransitionBlock) and block.moves:
            chosen = ", ".join(f"{m.move.value}.{m.variant}" for m in block.moves)
            author = f"{words['moves']}: {chosen}"
        elif isinstance(block, AnswerBlock | TransitionBlock) and block.copy_ref is not None:
            author = words["server copy"]
        kind = words.get(block.kind, block.kind)
        if isinstance(block, ReceiptBlock):
            out.write(f"  [{kind} · {author}] {block.title}\n")
            out.write(
                f"      {words['status']} {block.status_code}; "
                f"{words['events']} {', '.join(block.event_ids)}\n"
            )
        elif isinstance(block, NoticeBlock):
            out.write(f"  [{kind} · {author}] {block.text}  ({block.code})\n")
        elif isinstance(block, AnswerBlock):
            out.write(f"  [{kind} · {author}] {block.text}  ({block.status.value})\n")
        elif isinstance(block, TransitionBlock):
            out.write(f"  [{kind} · {author}] {block.text}\n")
        elif isinstance(block, InteractionBlock):
            options = " | ".join(f"{o.label} ({o.option_id})" for o in block.options)
            out.write(f"  [{kind} · {author}] {block.title}  → {options}\n")
            out.write(
                f"      {block.interaction_kind.value}, {words['bound']} {block.case_revision}\n"
            )
        else:
            out.write(f"  [{kind} · {author}]\n")
    out.write(f"  {words['replay token']} {turn.replay_token}\n")


async def run_demo(
    out: TextIO,
    *,
    db: str | None = None,
    desk: DeskHarness | None = None,
    locale: str = "en",
) -> list[AssistantTurn]:
    """Run the scripted conversation in `locale`, print every turn, return the turns.

    Without `db` the conversation runs on `desk` (a fresh harness on its own stores; default: in
    memory). With `db` (a database URL) the stores live there: the run is a new conversation, and
    an earlier run's conversation is reloaded and shown first.
    """
    if locale not in DEMO_LOCALES:
        raise ValueError(f"the demo speaks {', '.join(sorted(DEMO_LOCALES))}, not {locale!r}")
    words = DEMO_LOCALES[locale]
    if db is None:
        desk = desk if desk is not None else DeskHarness(outbox=EMBEDDED, narrator=DeskNarrator())
        return await _converse(out, desk, locale=locale)
    if desk is not None:
        raise ValueError("run_demo takes a database URL or a harness, not both")
    stores = await SqlStores.connect(db)
    try:
        await stores.migrate()
        where = stores.url.removeprefix("sqlite+aiosqlite:///")
        out.write(f"{words['store']}: {where}  ({words['other db']}: turnframe demo --db URL)\n")
        run = await _next_run(stores)
        if run > 1:
            await _show_earlier_run(out, stores, run - 1, locale)
        desk = DeskHarness(
            outbox=EMBEDDED,
            stores=stores,
            clock=ManualClock(system_clock()),
            ids=UlidIdSource(),
            account_id=DEMO_ACCOUNT,
            conversation_id=_conversation(run),
            narrator=DeskNarrator(),
        )
        out.write(f"\n{words['run']} {run}: {words['new conversation']}, {desk.conversation_id}\n")
        return await _converse(out, desk, trip_id=f"T-{100 + run}", locale=locale)
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


async def _show_earlier_run(out: TextIO, stores: Stores, run: int, locale: str) -> None:
    words = DEMO_LOCALES[locale]
    conversation = _conversation(run)
    turns = await stores.conversations.list_turns(DEMO_ACCOUNT, conversation)
    records = await stores.replay.for_conversation(DEMO_ACCOUNT, conversation)
    chain = words["intact"] if not verify_chain(records) else words["BROKEN"]
    out.write(
        f"\n{words['reloaded run'].format(run=run)}: {conversation}, {len(turns)} "
        f"{words['turns']}, {words['chain']} {chain}. {words['its first turn']}:\n"
    )
    first = turns[0]
    reply = await stores.conversations.get_assistant_turn(DEMO_ACCOUNT, first.turn_id)
    _print_turn(out, 1, first.input.text or words["a card answer"], reply, locale)
    out.write(
        f"  {words['stored bytes']} {_stored_digest(reply)} ({words['same'].format(run=run)})\n"
    )


def _stored_digest(turn: AssistantTurn) -> str:
    return digest_bytes(turn.to_stored_json().encode("utf-8"))


async def _converse(
    out: TextIO, desk: DeskHarness, trip_id: str = "T-100", *, locale: str = "en"
) -> list[AssistantTurn]:
    words = DEMO_LOCALES[locale]
    said = _SCRIPT[locale]
    desk.trip(trip_id, words["trip label"])
    turns: list[AssistantTurn] = []
    number = 0

    async def step(line: str, action: Callable[[], Awaitable[AssistantTurn]]) -> AssistantTurn:
        nonlocal number
        number += 1
        turn = await action()
        _print_turn(out, number, line, turn, locale)
        turns.append(turn)
        return turn

    def say(key: str, *parts: Any) -> Callable[[], Awaitable[AssistantTurn]]:
        return lambda: desk.say(said[key], *parts, locale=locale)

    def click(card: Any, option: str) -> Callable[[], Awaitable[AssistantTurn]]:
        return lambda: desk.click(card, option, locale=locale)

    name, email = "Ada Lovelace", "ada@example.com"
    await step(
        said["hello"],
        say(
            "hello",
            act("a1", "trip.set_name", "h1", name, name=name),
            act("a2", "trip.set_email", "h1", email, email=email),
            question("q1", said["which flights"], "h1"),
        ),
    )
    asked = await step(
        said["rebook outbound"],
        say(
            "rebook outbound",
            act("a1", "trip.request_rebooking", "h1", said["outbound quote"], leg="outbound"),
        ),
    )
    card = desk.card(asked)
    # The airline is reached only through the outbox: an in-process dramatiq worker (the
    # embedded mode) carries the row out, and the server tells the conversation what came back.
    worker = OutboxWorker(desk.runtime, connect_broker("stub://"), threads=2)
    await worker.start()
    try:
        await step(said["clicks rebook"], click(card, "opt_rebook"))
        await worker.drain()
    finally:
        await worker.stop()
    await step(said["airline answers"], lambda: _last_turn(desk))
    await step(said["clicks again"], click(card, "opt_rebook"))
    asked = await step(
        said["rebook return"],
        say(
            "rebook return",
            act("a1", "trip.request_rebooking", "h1", said["return quote"], leg="return"),
        ),
    )
    stale = desk.card(asked)
    day = "2027-03-14"
    await step(
        said["travel date"],
        say("travel date", act("a1", "trip.set_travel_date", "h1", day, travel_date=day)),
    )
    await step(said["clicks stale"], click(stale, "opt_rebook"))
    await step(
        said["rebook again"],
        say(
            "rebook again",
            act("a1", "trip.request_rebooking", "h1", said["again quote"], leg="outbound"),
        ),
    )
    await step(said["on file"], say("on file", question("q1", said["on file"], "h1")))
    reloaded = await desk.runtime.load_turn(desk.account_id, turns[0].turn_id)
    same = reloaded.to_stored_json() == turns[0].to_stored_json()
    verdict = words["identical"] if same else words["DIFFERENT"]
    out.write(
        f"\n{words['reloaded turn']}: {verdict} "
        f"({words['stored bytes']} {_stored_digest(reloaded)}).\n"
    )
    return turns


#: What the demo itself prints around the blocks, in each language it speaks (the blocks are the
#: runtime's own server copy and need nothing here).
DEMO_LOCALES: Final[dict[str, dict[str, str]]] = {
    "en": {
        "turn": "turn", "user": "user", "server": "server", "model": "model",
        "server copy": "server copy", "moves": "the model's moves", "receipt": "receipt",
        "notice": "notice",
        "answer": "answer", "transition": "transition", "interaction": "card",
        "status": "status", "events": "events", "bound": "bound to revision",
        "replay token": "replay token", "store": "Store", "other db": "another database",
        "run": "Run", "new conversation": "a new conversation",
        "reloaded run": "Reloaded run {run} from the store", "turns": "turns",
        "chain": "replay chain", "intact": "intact", "BROKEN": "BROKEN",
        "its first turn": "Its first turn", "a card answer": "(a card answer)",
        "stored bytes": "stored bytes", "same": "run {run} printed the same",
        "reloaded turn": "Reloaded turn 1 from the store", "identical": "identical blocks",
        "DIFFERENT": "DIFFERENT blocks", "trip label": "Rome trip",
    },
    "it": {
        "turn": "turno", "user": "utente", "server": "server", "model": "modello",
        "server copy": "testo del server", "moves": "mosse del modello", "receipt": "ricevuta",
        "notice": "avviso",
        "answer": "risposta", "transition": "raccordo", "interaction": "scheda",
        "status": "stato", "events": "eventi", "bound": "legata alla revisione",
        "replay token": "token di replay", "store": "Archivio", "other db": "altro database",
        "run": "Esecuzione", "new conversation": "una nuova conversazione",
        "reloaded run": "Esecuzione {run} ricaricata dall'archivio", "turns": "turni",
        "chain": "catena di replay", "intact": "integra", "BROKEN": "ROTTA",
        "its first turn": "Il suo primo turno", "a card answer": "(risposta a una scheda)",
        "stored bytes": "byte salvati", "same": "l'esecuzione {run} ha stampato gli stessi",
        "reloaded turn": "Turno 1 ricaricato dall'archivio", "identical": "blocchi identici",
        "DIFFERENT": "blocchi DIVERSI", "trip label": "Viaggio a Roma",
    },
    "de": {
        "turn": "Zug", "user": "Nutzer", "server": "Server", "model": "Modell",
        "server copy": "Servertext", "moves": "Züge des Modells", "receipt": "Beleg",
        "notice": "Hinweis",
        "answer": "Antwort", "transition": "Überleitung", "interaction": "Karte",
        "status": "Status", "events": "Ereignisse", "bound": "gebunden an Revision",
        "replay token": "Replay-Token", "store": "Speicher", "other db": "andere Datenbank",
        "run": "Lauf", "new conversation": "ein neues Gespräch",
        "reloaded run": "Lauf {run} aus dem Speicher geladen", "turns": "Züge",
        "chain": "Replay-Kette", "intact": "intakt", "BROKEN": "GEBROCHEN",
        "its first turn": "Sein erster Zug", "a card answer": "(Antwort auf eine Karte)",
        "stored bytes": "gespeicherte Bytes", "same": "Lauf {run} gab dieselben aus",
        "reloaded turn": "Zug 1 aus dem Speicher geladen", "identical": "identische Blöcke",
        "DIFFERENT": "ANDERE Blöcke", "trip label": "Romreise",
    },
}  # fmt: skip

#: What the scripted user says, in each language (quotes are the words an act rests on).
_SCRIPT: Final[dict[str, dict[str, str]]] = {
    "en": {
        "hello": "I'm Ada Lovelace, my email is ada@example.com. Which flights do I have?",
        "which flights": "Which flights do I have?",
        "rebook outbound": "Please rebook my outbound flight.",
        "outbound quote": "rebook my outbound",
        "clicks rebook": "(clicks “Rebook”)",
        "airline answers": "(the airline answers; no user message)",
        "clicks again": "(clicks “Rebook” on the same card again)",
        "rebook return": "Rebook the return flight as well.",
        "return quote": "Rebook the return",
        "travel date": "I travel on 2027-03-14.",
        "clicks stale": "(clicks “Rebook” on the return-flight card shown before the edit)",
        "rebook again": "Rebook the outbound flight again.",
        "again quote": "Rebook the outbound",
        "on file": "What do you have on file for my trip?",
    },
    "it": {
        "hello": "Sono Ada Lovelace, la mia email è ada@example.com. Quali voli ho?",
        "which flights": "Quali voli ho?",
        "rebook outbound": "Per favore riprenota il mio volo di andata.",
        "outbound quote": "riprenota il mio volo di andata",
        "clicks rebook": "(clicca «Riprenota»)",
        "airline answers": "(risponde la compagnia; nessun messaggio dell'utente)",
        "clicks again": "(clicca di nuovo «Riprenota» sulla stessa scheda)",
        "rebook return": "Riprenota anche il volo di ritorno.",
        "return quote": "Riprenota anche il volo di ritorno",
        "travel date": "Viaggio il 2027-03-14.",
        "clicks stale": "(clicca «Riprenota» sulla scheda del ritorno di prima della modifica)",
        "rebook again": "Riprenota di nuovo il volo di andata.",
        "again quote": "Riprenota di nuovo il volo di andata",
        "on file": "Che cosa risulta per il mio viaggio?",
    },
    "de": {
        "hello": "Ich bin Ada Lovelace, meine E-Mail ist ada@example.com. Welche Flüge habe ich?",
        "which flights": "Welche Flüge habe ich?",
        "rebook outbound": "Bitte buchen Sie meinen Hinflug um.",
        "outbound quote": "buchen Sie meinen Hinflug um",
        "clicks rebook": "(klickt „Umbuchen“)",
        "airline answers": "(die Fluggesellschaft antwortet; keine Nachricht des Nutzers)",
        "clicks again": "(klickt noch einmal „Umbuchen“ auf derselben Karte)",
        "rebook return": "Buchen Sie auch den Rückflug um.",
        "return quote": "Buchen Sie auch den Rückflug um",
        "travel date": "Ich reise am 2027-03-14.",
        "clicks stale": "(klickt „Umbuchen“ auf der Rückflug-Karte von vor der Änderung)",
        "rebook again": "Buchen Sie den Hinflug noch einmal um.",
        "again quote": "Buchen Sie den Hinflug noch einmal um",
        "on file": "Was ist zu meiner Reise gespeichert?",
    },
}
