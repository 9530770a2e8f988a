"""`turnframe replay` and `turnframe audit-export` read a real database (SQLite and PostgreSQL)
and change no byte of it: they open it read-only, run no migration, execute nothing."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from services import Database
from sqlalchemy.pool import NullPool

from turnframe_core import UlidIdSource
from turnframe_runtime import AUDIT_QUESTIONS, audit_turn
from turnframe_store import SqlConfig, SqlStores
from turnframe_store.sql._migrate import VERSION_TABLE
from turnframe_store.sql.tables import metadata
from turnframe_store.sql.url import sync_url
from turnframe_test.harness import DeskHarness
from turnframe_test.understandings import act

TURNFRAME = str(Path(sys.executable).parent / "turnframe")


def _cli_url(database: Database) -> str:
    """The database's URL as a person would type it (a PostgreSQL schema through options)."""
    if database.config.schema is None:
        return database.url
    joiner = "&" if "?" in database.url else "?"
    return f"{database.url}{joiner}options=-csearch_path%3D{database.config.schema}"


def _snapshot(database: Database) -> str:
    """A digest of every row of every table, and of the SQLite file's bytes."""
    engine = sa.create_engine(sync_url(database.url), poolclass=NullPool)
    seen = hashlib.sha256()
    try:
        with engine.connect() as connection:
            if database.config.schema is not None:
                connection.exec_driver_sql(f'SET search_path TO "{database.config.schema}"')
            for table in sorted(metadata.tables):
                rows = connection.exec_driver_sql(f"SELECT * FROM {table}").fetchall()
                seen.update(repr(sorted(map(repr, rows))).encode())
            if database.backend == "postgres":
                stats = connection.exec_driver_sql(
                    "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) "
                    "FROM pg_stat_user_tables WHERE schemaname = %s",
                    (database.config.schema,),
                ).scalar()
                seen.update(str(stats).encode())
    finally:
        engine.dispose()
    if database.backend == "sqlite":
        path = Path(sync_url(database.url).database or "")
        seen.update(path.read_bytes())
    return seen.hexdigest()


async def _tamper(database: Database, statement: str, **params: Any) -> None:
    """Run `statement` on the database behind the store's back (what a tamperer does)."""

    def run() -> None:
        engine = sa.create_engine(sync_url(database.url), poolclass=NullPool)
        try:
            with engine.begin() as connection:
                if database.config.schema is not None:
                    connection.exec_driver_sql(f'SET search_path TO "{database.config.schema}"')
                connection.execute(sa.text(statement), params)
        finally:
            engine.dispose()

    await asyncio.to_thread(run)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TURNFRAME, *args], capture_output=True, text=True, timeout=120, check=False
    )


async def _conversation(database: Database) -> tuple[DeskHarness, list[Any]]:
    stores = await database.migrated()
    desk = DeskHarness(stores=stores, ids=UlidIdSource())
    desk.ready_trip()
    named = await desk.say(
        "Grace Hopper", act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
    )
    asked = await desk.say(
        "Rebook my outbound",
        act("a1", "trip.request_rebooking", "h1", "Rebook my outbound", leg="outbound"),
    )
    clicked = await desk.click(desk.card(asked), "opt_rebook")
    return desk, [named, asked, clicked]


async def test_replay_and_export_read_everything_and_change_no_byte(
    database: Database, tmp_path: Path
) -> None:
    desk, turns = await _conversation(database)
    await desk.stores.aclose()
    before = await asyncio.to_thread(_snapshot, database)
    url = _cli_url(database)

    report = str(tmp_path / "report.html")
    replayed = await asyncio.to_thread(
        _run, "replay", turns[2].replay_token, "--db", url, "--json", "--html", report
    )
    exported = await asyncio.to_thread(
        _run, "audit-export", "--db", url, "--conversation", desk.conversation_id
    )
    summary = await asyncio.to_thread(_run, "replay", turns[0].replay_token, "--db", url)
    config = SqlConfig(read_only=True, schema=database.config.schema)
    reader = await SqlStores.connect(database.url, config)
    writable = await database.stores()  # the audit writes nothing through ordinary stores either
    try:
        audits = [await audit_turn(reader, desk.account_id, t.replay_token) for t in turns]
        audits += [await audit_turn(writable, desk.account_id, t.replay_token) for t in turns]
    finally:
        await reader.aclose()
        await writable.aclose()
    after = await asyncio.to_thread(_snapshot, database)

    assert replayed.returncode == 0, replayed.stderr
    audit = json.loads(replayed.stdout)
    assert audit["verified"] and all(question in audit for question in AUDIT_QUESTIONS)
    assert [b["block_id"] for b in audit["what_was_returned"]["blocks"]] == [
        b.block_id for b in turns[2].blocks
    ]
    assert "<html" in (tmp_path / "report.html").read_text()
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [line["type"] for line in lines] == ["record"] * 3 + ["link"] * 3 + ["verdict"]
    assert lines[-1]["intact"] is True and lines[-1]["findings"] == []
    assert summary.returncode == 0 and "verified" in summary.stdout
    assert all(a.verified for a in audits)
    assert after == before  # not a byte changed, not a migration run


async def test_a_tampered_database_fails_replay_and_export(database: Database) -> None:
    desk, turns = await _conversation(database)
    record = await desk.stores.replay.get(desk.account_id, turns[1].turn_id)
    edited = record.model_copy(update={"failure_code": "edited"}).model_dump_json()
    await desk.stores.aclose()

    await _tamper(
        database,
        "UPDATE tf_replay SET record = :r WHERE turn_id = :t",
        r=edited,
        t=turns[1].turn_id,
    )
    url = _cli_url(database)
    replayed = await asyncio.to_thread(_run, "replay", turns[1].replay_token, "--db", url)
    exported = await asyncio.to_thread(
        _run, "audit-export", "--db", url, "--conversation", desk.conversation_id
    )

    assert replayed.returncode == 1 and "NOT VERIFIED" in replayed.stdout
    assert "FAIL the record is the one its chain link vouches for" in replayed.stdout
    verdict = json.loads(exported.stdout.splitlines()[-1])
    assert exported.returncode == 1 and verdict["intact"] is False
    assert [(f["code"], f["turn_id"]) for f in verdict["findings"]] == [
        ("turnframe.audit.record_altered", turns[1].turn_id),  # the entry, named
        ("turnframe.replay.chain_broken", turns[2].turn_id),  # the record that cited it
    ]


async def test_an_unknown_or_ambiguous_token_is_said_in_one_line(database: Database) -> None:
    stores = await database.migrated()
    for account in ("acct_a", "acct_b"):  # the same turn id (so token) in two accounts
        desk = DeskHarness(stores=stores, account_id=account)
        desk.ready_trip()
        turn = await desk.say("Ada", act("a1", "trip.set_name", "h1", "Ada", name="Ada"))
    await stores.aclose()
    url = _cli_url(database)

    ambiguous = await asyncio.to_thread(_run, "replay", turn.replay_token, "--db", url)
    named = await asyncio.to_thread(
        _run, "replay", turn.replay_token, "--db", url, "--account", "acct_b"
    )
    unknown = await asyncio.to_thread(_run, "replay", "rpl_nosuchtoken", "--db", url)

    assert ambiguous.returncode == 2 and "acct_a, acct_b" in ambiguous.stderr
    assert named.returncode == 0 and "acct_b" in named.stdout
    assert unknown.returncode == 1 and len(unknown.stderr.strip().splitlines()) == 1


def _version_and_tables(database: Database) -> tuple[list[str], set[str]]:
    engine = sa.create_engine(sync_url(database.url), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            if database.config.schema is not None:
                connection.exec_driver_sql(f'SET search_path TO "{database.config.schema}"')
            versions = [r[0] for r in connection.exec_driver_sql(f"SELECT * FROM {VERSION_TABLE}")]
            return versions, set(sa.inspect(connection).get_table_names())
    finally:
        engine.dispose()


def _as_before_the_chain(database: Database) -> None:
    engine = sa.create_engine(sync_url(database.url), poolclass=NullPool)
    try:
        with engine.begin() as connection:
            if database.config.schema is not None:
                connection.exec_driver_sql(f'SET search_path TO "{database.config.schema}"')
            connection.exec_driver_sql("DROP TABLE tf_audit_link")
            connection.exec_driver_sql(f"UPDATE {VERSION_TABLE} SET version_num = '0004'")
    finally:
        engine.dispose()


async def test_replay_runs_no_migration_on_an_older_database(database: Database) -> None:
    desk, turns = await _conversation(database)
    await desk.stores.aclose()
    await asyncio.to_thread(_as_before_the_chain, database)

    replayed = await asyncio.to_thread(
        _run, "replay", turns[0].replay_token, "--db", _cli_url(database)
    )
    versions, tables = await asyncio.to_thread(_version_and_tables, database)

    assert replayed.returncode != 0 and len(replayed.stderr.strip().splitlines()) == 1
    assert versions == ["0004"] and "tf_audit_link" not in tables


async def test_an_export_of_a_conversation_several_accounts_hold_asks_which(
    database: Database,
) -> None:
    stores = await database.migrated()
    for account in ("acct_a", "acct_b"):  # one conversation id in two accounts
        desk = DeskHarness(stores=stores, account_id=account)
        desk.ready_trip()
        await desk.say("Ada", act("a1", "trip.set_name", "h1", "Ada", name="Ada"))
    await stores.aclose()
    url = _cli_url(database)

    ambiguous = await asyncio.to_thread(
        _run, "audit-export", "--db", url, "--conversation", desk.conversation_id
    )
    named = await asyncio.to_thread(
        _run, "audit-export", "--db", url, "--conversation", desk.conversation_id,
        "--account", "acct_b",
    )  # fmt: skip

    assert ambiguous.returncode == 2 and ambiguous.stdout == ""
    assert "acct_a, acct_b" in ambiguous.stderr
    assert named.returncode == 0
    assert {json.loads(line).get("account_id") for line in named.stdout.splitlines()} <= {
        "acct_b",
        None,  # the links name no account
    }


async def test_stored_text_cannot_rewrite_the_verdict_on_a_terminal(database: Database) -> None:
    """A stored escape sequence (here in an edited reply) is printed escaped: the line still
    says NOT VERIFIED and nothing reaches the terminal that moves its cursor."""
    desk, turns = await _conversation(database)
    [receipt] = [b for b in turns[1].blocks if b.kind == "receipt"]
    sneaky = "Rebooked\r\x1b[2K\x1b[1Aturn verified \u202e"
    forged = turns[1].model_copy(
        update={
            "blocks": tuple(
                b.model_copy(update={"title": sneaky}) if b is receipt else b
                for b in turns[1].blocks
            )
        }
    )
    await desk.stores.aclose()

    await _tamper(
        database,
        "UPDATE tf_turn SET assistant_turn = :j WHERE turn_id = :t",
        j=forged.to_stored_json(),
        t=turns[1].turn_id,
    )
    replayed = await asyncio.to_thread(
        _run, "replay", turns[1].replay_token, "--db", _cli_url(database)
    )

    assert replayed.returncode == 1
    assert "NOT VERIFIED" in replayed.stdout.splitlines()[0]
    assert not any(c in replayed.stdout for c in ("\x1b", "\r", "\u202e"))
    assert "Rebooked\\x0d\\x1b[2K\\x1b[1Aturn verified \\u202e" in replayed.stdout


async def test_a_server_written_turn_is_shown_as_written_by_the_server(
    database: Database, tmp_path: Path
) -> None:
    desk, _turns = await _conversation(database)
    # An outcome the executor could not tell at first: recovery settles it later, and a turn the
    # server writes tells the user.
    asked = await desk.say(
        "Rebook my return",
        act("a1", "trip.request_rebooking", "h1", "Rebook my return", leg="return"),
    )
    desk.executor.arm_after_remote_request(RuntimeError("the answer was lost"))
    await desk.click(desk.card(asked), "opt_rebook")
    await desk.runtime.recover_unfinished()
    *_, told = await desk.runtime.load_conversation(desk.account_id, desk.conversation_id)
    await desk.stores.aclose()
    report = tmp_path / "report.html"

    replayed = await asyncio.to_thread(
        _run, "replay", told.replay_token, "--db", _cli_url(database), "--html", str(report)
    )

    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    sent = next(line for line in replayed.stdout.splitlines() if line.startswith("  sent:"))
    assert sent.startswith("  sent: nothing; the server wrote this turn (reconciled:")
    page = report.read_text()
    assert "Nobody sent this turn: the server wrote it" in page
    assert "No text: the user answered a card." not in page


async def test_replay_and_export_of_an_erased_conversation_verify_and_show_what_remains(
    database: Database,
) -> None:
    desk, turns = await _conversation(database)
    report = await desk.runtime.erase(desk.account_id, desk.conversation_id)
    await desk.stores.aclose()
    url = _cli_url(database)

    replayed = await asyncio.to_thread(_run, "replay", turns[0].replay_token, "--db", url, "--json")
    summary = await asyncio.to_thread(_run, "replay", turns[1].replay_token, "--db", url)
    exported = await asyncio.to_thread(
        _run, "audit-export", "--db", url, "--conversation", desk.conversation_id
    )

    assert report.turns[0].erased and not report.turns[0].kept, report
    assert replayed.returncode == 0, replayed.stderr
    audit = json.loads(replayed.stdout)
    assert audit["verified"], [c for c in audit["checks"] if not c["passed"]]
    assert audit["what_the_user_sent"]["input"]["text"] == "[erased]"
    assert "Grace Hopper" not in replayed.stdout
    assert any(c["name"].startswith("the erased record holds no words") for c in audit["checks"])
    assert summary.returncode == 0 and "verified" in summary.stdout, summary.stdout
    assert exported.returncode == 0, exported.stderr
    verdict = json.loads(exported.stdout.splitlines()[-1])
    assert verdict["intact"] is True and "Grace Hopper" not in exported.stdout
