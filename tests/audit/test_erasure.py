"""`runtime.erase` removes a conversation's words from every document the library stored for it
and keeps what the audit needs: after erasure, and after a crash at any point of it, the
conversation's audit verifies on memory, SQLite and PostgreSQL (the `desk` fixture audits each
conversation again when the test ends). `runtime.export_subject` gives the words as JSON.
Erasing again is a no-op; unknown, foreign and malformed subjects are refused alike."""

from __future__ import annotations

import asyncio
import json
from contextlib import suppress
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from turnframe_core import codes
from turnframe_core.erasure import ERASED
from turnframe_runtime import RuntimeConfig
from turnframe_runtime.audit import audit_conversation
from turnframe_runtime.errors import InvalidSubject, UnknownSubject
from turnframe_store import MemoryStores, SqlStores
from turnframe_store.errors import NotFound
from turnframe_store.memory.commits import MemoryCommits
from turnframe_store.sql.url import sync_url
from turnframe_test.understandings import act, question

PERSON = "Grace Hopper"
NAME = act("a1", "trip.set_name", "h1", PERSON, name=PERSON)
REBOOK = act("a1", "trip.request_rebooking", "h1", "Rebook my outbound", leg="outbound")
#: every turn logged, so erasure has stream logs to remove
LOGGED = RuntimeConfig(stream_every_turn=True)
#: the tables whose documents hold a person's words, and which erasure rewrites
ERASED_TABLES = (
    "tf_turn",
    "tf_replay",
    "tf_stream_event",
    "tf_interaction",
    "tf_domain_event",
    "tf_command_journal",
    "tf_outbox",
)


async def _conversation(desk: Any) -> list[Any]:
    """Three turns whose words name a person: a name set, a rebooking asked and clicked (its
    command leaves an outbox row, settled here as a sender would), and a question."""
    desk.ready_trip()
    named = await desk.say(f"My name is {PERSON}", NAME, question("q1", f"Is {PERSON} set?", "h1"))
    asked = await desk.say(f"Rebook my outbound, for {PERSON}", REBOOK)
    clicked = await desk.click(desk.card(asked), "opt_rebook")
    await _settle_outbox(desk)
    return [named, asked, clicked]


async def _settle_outbox(desk: Any) -> None:
    outbox = desk.stores.outbox
    for row in await outbox.claim_due(desk.clock(), 100, "test-worker"):
        await outbox.begin_dispatch(row.outbox_id, row.attempt_count, desk.clock())
        await outbox.mark_completed(row.outbox_id, row.attempt_count)


async def _documents(desk: Any) -> str:
    """Every document erasure rewrites, read through the stores' own readers, as one text."""
    return "\n".join((await _documents_by_turn(desk)).values())


async def _documents_by_turn(desk: Any) -> dict[str, str]:
    """`_documents`, each turn's apart."""
    stores, account = desk.stores, desk.account_id
    by_turn: dict[str, str] = {}
    for turn in await stores.conversations.list_turns(account, desk.conversation_id):
        parts: list[str] = []
        parts.append(turn.input.model_dump_json())
        with suppress(NotFound):
            reply = await stores.conversations.get_assistant_turn(account, turn.turn_id)
            parts.append(reply.model_dump_json())
        record = await stores.replay.get(account, turn.turn_id)
        parts.append(record.model_dump_json())
        logged = await stores.conversations.stream_events(account, turn.turn_id, -1, 1000)
        parts += [event.model_dump_json() for event in logged]
        parts += [e.model_dump_json() for e in await stores.journal.for_turn(account, turn.turn_id)]
        events = await stores.events.get_by_ids(account, list(record.event_ids))
        parts += [event.model_dump_json() for event in events]
        for interaction_id in record.interactions_created:
            parts.append((await stores.interactions.get(account, interaction_id)).model_dump_json())
        for outbox_id in record.outbox_ids:
            parts.append((await stores.outbox.get(outbox_id)).model_dump_json())
        by_turn[turn.turn_id] = "\n".join(parts)
    return by_turn


async def _raw_tables(stores: SqlStores) -> dict[str, str]:
    """What each table erasure rewrites holds, read behind the stores' back."""

    def run() -> dict[str, str]:
        engine = sa.create_engine(sync_url(stores.url), poolclass=NullPool)
        try:
            with engine.begin() as connection:
                if stores.config.schema is not None:
                    connection.exec_driver_sql(f'SET search_path TO "{stores.config.schema}"')
                return {
                    table: json.dumps(
                        [
                            [str(v) for v in row]
                            for row in connection.execute(sa.text(f"SELECT * FROM {table}"))
                        ]
                    )
                    for table in ERASED_TABLES
                }
        finally:
            engine.dispose()

    return await asyncio.to_thread(run)


async def _verified(desk: Any) -> None:
    chain, audits = await audit_conversation(desk.stores, desk.account_id, desk.conversation_id)
    assert chain.findings == (), chain.findings
    assert audits and all(a.verified for a in audits), [a.failed() for a in audits]


# --- erasure keeps the audit ----------------------------------------------------------------------


async def test_erasure_removes_the_words_and_the_audit_still_verifies(make_desk) -> None:
    desk = await make_desk(config=LOGGED)
    turns = await _conversation(desk)
    links_before = await desk.stores.replay.chain(desk.account_id, desk.conversation_id)
    assert PERSON in await _documents(desk)

    report = await desk.runtime.erase(desk.account_id, desk.conversation_id)

    assert report.complete, report
    assert [t.turn_id for t in report.turns] == [t.turn_id for t in turns]
    stored = await _documents(desk)
    assert PERSON not in stored and ERASED in stored
    assert await desk.stores.replay.chain(desk.account_id, desk.conversation_id) == links_before
    await _verified(desk)
    for turn in turns:
        audit = await desk.runtime.audit(desk.account_id, turn.replay_token)
        assert audit.verified, audit.failed()
        assert PERSON not in audit.model_dump_json()
        reply = await desk.runtime.load_turn(desk.account_id, turn.turn_id)
        # identity, order and kinds stay: the same blocks, ids and kinds, their words erased
        assert [(b.block_id, b.kind) for b in reply.blocks] == [
            (b.block_id, b.kind) for b in turn.blocks
        ]
        record = await desk.runtime.replay(desk.account_id, turn.replay_token)
        assert record.erased_at is not None and set(record.erased) == {
            "input",
            "understanding",
            "reduction_plan",
            "copy_renders",
        }
        assert (
            record.event_ids
            == (await desk.stores.replay.get(desk.account_id, turn.turn_id)).event_ids
        )
    if isinstance(desk.stores, SqlStores):
        raw = await _raw_tables(desk.stores)
        assert {table: PERSON in text for table, text in raw.items()} == dict.fromkeys(
            ERASED_TABLES, False
        )
        assert '"text":"[erased]"' in raw["tf_turn"].replace("\\", "")


async def test_erasing_again_writes_nothing(make_desk) -> None:
    desk = await make_desk(config=LOGGED)
    await _conversation(desk)
    await desk.runtime.erase(desk.account_id, desk.conversation_id)
    before = await _documents(desk)

    again = await desk.runtime.erase(desk.account_id, desk.conversation_id)

    assert all(t.erased and t.already for t in again.turns) and again.complete
    assert await _documents(desk) == before


# --- what is kept until it settles ----------------------------------------------------------------


async def test_a_card_still_open_keeps_its_words_until_erased_again(make_desk) -> None:
    desk = await make_desk(config=LOGGED)
    desk.ready_trip()
    asked = await desk.say(f"Rebook my outbound, for {PERSON}", REBOOK)
    card = desk.card(asked)
    unsettled = [e for e in await desk.journal(asked) if not e.status.is_terminal]

    first = await desk.runtime.erase(desk.account_id, desk.conversation_id)

    assert not first.complete
    assert [kept for t in first.turns for kept in t.kept] == [
        *(f"command {e.command_id}: {e.status.value}" for e in unsettled),
        f"card {card.interaction_id}: active",
    ]
    await _verified(desk)
    # the card still runs what it stored
    clicked = await desk.click(desk.card(asked), "opt_rebook")
    assert desk.receipt_codes(clicked)
    await _settle_outbox(desk)
    second = await desk.runtime.erase(desk.account_id, desk.conversation_id)
    assert second.complete, second
    assert PERSON not in await _documents(desk)
    await _verified(desk)


# --- refusals -----------------------------------------------------------------------------------


async def test_unknown_and_foreign_subjects_are_refused_alike_and_nothing_is_written(
    make_desk,
) -> None:
    desk = await make_desk()
    await _conversation(desk)
    other = await make_desk(stores=desk.stores, account_id="acct_2", clock=desk.clock)
    before = await _documents(desk)

    refusals = []
    for account, subject in (
        ("acct_2", desk.conversation_id),  # another account's conversation
        (desk.account_id, "conv_9"),  # none at all
    ):
        for call in (other.runtime.erase, other.runtime.export_subject):
            with pytest.raises(UnknownSubject) as refused:
                await call(account, subject)
            refusals.append((refused.value.code, str(refused.value)))

    assert len(set(refusals)) == 1 and refusals[0][0] == codes.ERASURE_UNKNOWN_SUBJECT
    assert await _documents(desk) == before
    for account, subject in ((desk.account_id, "conv 1"), ("", desk.conversation_id)):
        with pytest.raises(InvalidSubject) as malformed:
            await desk.runtime.erase(account, subject)
        assert malformed.value.code == codes.ERASURE_INVALID_SUBJECT
    assert await _documents(desk) == before


# --- export ---------------------------------------------------------------------------------------


async def test_export_gives_the_subjects_words_as_json_and_none_once_erased(make_desk) -> None:
    desk = await make_desk()
    turns = await _conversation(desk)

    exported = await desk.runtime.export_subject(desk.account_id, desk.conversation_id)

    text = json.dumps(exported)  # JSON-ready as it is
    assert exported["subject"] == desk.conversation_id
    assert [t["turn_id"] for t in exported["turns"]] == [t.turn_id for t in turns]
    assert exported["turns"][0]["input"]["text"] == f"My name is {PERSON}"
    assert any(c["payload"] for t in exported["turns"] for c in t["commands"])
    assert any(e["payload"] for t in exported["turns"] for e in t["events"])
    assert any(r["payload"] for t in exported["turns"] for r in t["outbox"])
    assert PERSON in text
    await desk.runtime.erase(desk.account_id, desk.conversation_id)
    after = json.dumps(await desk.runtime.export_subject(desk.account_id, desk.conversation_id))
    assert PERSON not in after and ERASED in after


# --- a crash at every point erasure writes --------------------------------------------------------


class _Crash(Exception):
    pass


async def test_a_crash_between_turns_leaves_whole_turns_and_erasing_again_finishes(
    make_desk, monkeypatch
) -> None:
    desk = await make_desk(config=LOGGED)
    turns = await _conversation(desk)
    commits = desk.stores.commits
    real = commits.erase_turn
    for crash_after in range(len(turns)):
        calls = 0

        async def crashing(account_id: str, turn_id: str, crash_after: int = crash_after) -> Any:
            nonlocal calls
            if calls == crash_after:
                raise _Crash(turn_id)
            calls += 1
            return await real(account_id, turn_id)

        monkeypatch.setattr(commits, "erase_turn", crashing)
        with pytest.raises(_Crash):
            await desk.runtime.erase(desk.account_id, desk.conversation_id)
        await _verified(desk)  # part erased, part not: every point verifies
    monkeypatch.setattr(commits, "erase_turn", real)
    report = await desk.runtime.erase(desk.account_id, desk.conversation_id)
    assert report.complete
    assert [t.already for t in report.turns] == [True, True, False]
    assert PERSON not in await _documents(desk)
    await _verified(desk)


#: Every table an erasure writes, in the order it writes them (memory: the n-th write).
WRITES = (
    "tf_turn",
    "tf_command_journal",
    "tf_outbox",
    "tf_interaction",
    "tf_domain_event",
    "tf_stream_event",
    "tf_replay",
)


@pytest.mark.parametrize("point", WRITES)
async def test_a_crash_at_any_write_of_an_erasure_leaves_whole_turns_and_erasing_again_finishes(
    make_desk, monkeypatch, point
) -> None:
    desk = await make_desk(config=LOGGED)
    await _conversation(desk)
    before = await _documents_by_turn(desk)
    stores = desk.stores
    cleanup = None
    if isinstance(stores, MemoryStores):  # the n-th write of a turn's erasure fails
        real = MemoryCommits.erase_turn_in
        crash_at = WRITES.index(point)

        def crashing(self: Any, undo: Any, account_id: str, turn_id: str) -> Any:
            writes = 0
            put, remove, step = undo.put, undo.remove, undo.step

            def counted(write: Any) -> Any:
                def call(*args: Any) -> Any:
                    nonlocal writes
                    if writes == crash_at:
                        raise _Crash(turn_id)
                    writes += 1
                    return write(*args)

                return call

            undo.put, undo.remove, undo.step = counted(put), counted(remove), counted(step)
            return real(self, undo, account_id, turn_id)

        monkeypatch.setattr(MemoryCommits, "erase_turn_in", crashing)
    else:  # the database refuses the erasure's write to one table
        cleanup = await _refuse_writes(stores, point)
    try:
        with pytest.raises(Exception) as failed:
            await desk.runtime.erase(desk.account_id, desk.conversation_id)
        assert not isinstance(failed.value, UnknownSubject)
        after = await _documents_by_turn(desk)
        for turn_id, text in after.items():  # each turn erased whole, or not at all
            erased = (await desk.stores.replay.get(desk.account_id, turn_id)).erased_at
            assert text == before[turn_id] if erased is None else PERSON not in text, turn_id
        await _verified(desk)
    finally:
        monkeypatch.undo()
        if cleanup is not None:
            await cleanup()
    report = await desk.runtime.erase(desk.account_id, desk.conversation_id)
    assert report.complete and PERSON not in await _documents(desk)
    await _verified(desk)


async def _refuse_writes(stores: SqlStores, table: str) -> Any:
    """A trigger that fails every UPDATE or DELETE of `table`: the erasing transaction's writes
    before it must all roll back. Returns what drops it."""
    postgres = stores.dialect == "postgresql"
    schema = f'"{stores.config.schema}".' if postgres and stores.config.schema else ""
    if postgres:
        create = [
            f"CREATE OR REPLACE FUNCTION {schema}tf_test_refuse() RETURNS trigger AS $$ "
            "BEGIN RAISE EXCEPTION 'refused by the test'; END $$ LANGUAGE plpgsql",
            f"CREATE TRIGGER tf_test_refuse BEFORE UPDATE OR DELETE ON {schema}{table} "
            f"FOR EACH ROW EXECUTE FUNCTION {schema}tf_test_refuse()",
        ]
        drop = [
            f"DROP TRIGGER tf_test_refuse ON {schema}{table}",
            f"DROP FUNCTION {schema}tf_test_refuse()",
        ]
    else:
        create = [
            f"CREATE TRIGGER tf_test_refuse_u BEFORE UPDATE ON {table} "
            "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
            f"CREATE TRIGGER tf_test_refuse_d BEFORE DELETE ON {table} "
            "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END",
        ]
        drop = ["DROP TRIGGER tf_test_refuse_u", "DROP TRIGGER tf_test_refuse_d"]

    def run(statements: list[str]) -> None:
        engine = sa.create_engine(sync_url(stores.url), poolclass=NullPool)
        try:
            with engine.begin() as connection:
                for statement in statements:
                    connection.exec_driver_sql(statement)
        finally:
            engine.dispose()

    await asyncio.to_thread(run, create)

    async def cleanup() -> None:
        await asyncio.to_thread(run, drop)

    return cleanup


# --- retention ------------------------------------------------------------------------------------


async def test_the_retention_sweep_erases_turns_past_their_age_and_the_audit_verifies(
    make_desk,
) -> None:
    desk = await make_desk(config=RuntimeConfig(stream_every_turn=True, turn_retention_ms=60_000))
    old = await _conversation(desk)
    desk.clock.advance(60_001)
    recent = await desk.say(f"My name is {PERSON}", NAME)

    swept = await desk.runtime.erase_expired()

    assert [t.turn_id for t in swept] == [t.turn_id for t in old]
    assert all(t.erased and not t.kept for t in swept)
    assert await desk.runtime.erase_expired() == ()  # passed by from now on
    for turn in old:
        record = await desk.runtime.replay(desk.account_id, turn.replay_token)
        assert record.erased_at is not None and PERSON not in record.model_dump_json()
    kept = await desk.runtime.replay(desk.account_id, recent.replay_token)
    assert kept.erased_at is None and kept.input.text == f"My name is {PERSON}"
    await _verified(desk)


async def test_without_a_retention_the_sweep_erases_nothing(make_desk) -> None:
    desk = await make_desk()
    await _conversation(desk)
    before = await _documents(desk)
    desk.clock.advance(10 * 365 * 24 * 3_600_000)

    assert await desk.runtime.erase_expired() == ()
    assert await _documents(desk) == before


async def test_a_turn_the_sweep_could_not_finish_is_taken_again_once_it_settles(make_desk) -> None:
    desk = await make_desk(config=RuntimeConfig(turn_retention_ms=1_000))
    desk.ready_trip()
    asked = await desk.say(f"Rebook my outbound, for {PERSON}", REBOOK)
    desk.clock.advance(1_001)

    [first] = await desk.runtime.erase_expired()
    assert first.kept  # the card is still open

    # a turn never erased comes before one erased that still keeps words: the open card
    # cannot hold the sweep up
    asked_again = f"Is {PERSON} on the trip?"
    named = await desk.say(asked_again, question("q1", asked_again, "h1"))
    desk.clock.advance(1_001)
    [fresh] = await desk.runtime.erase_expired(limit=1)
    assert fresh.turn_id == named.turn_id and fresh.erased and not fresh.kept

    await desk.click(desk.card(asked), "opt_rebook")
    await _settle_outbox(desk)
    desk.clock.advance(1_001)
    swept = await desk.runtime.erase_expired()

    assert asked.turn_id in [t.turn_id for t in swept]
    assert all(not t.kept for t in swept)
    assert PERSON not in await _documents(desk)
    await _verified(desk)


# --- while turns run ------------------------------------------------------------------------------


async def test_erasure_while_a_turn_runs_keeps_it_and_erasing_again_finishes(make_desk) -> None:
    desk = await make_desk(config=LOGGED)
    earlier = await _conversation(desk)
    gate, started = asyncio.Event(), asyncio.Event()
    scripted = desk.interpreter.understand

    async def understand(brief: Any) -> Any:
        started.set()
        await gate.wait()  # the turn holds its conversation, its record not final
        return await scripted(brief)

    desk.interpreter.understand = understand
    running = asyncio.create_task(
        desk.say(
            f"My name is {PERSON} again", act("a1", "trip.set_name", "h1", PERSON, name=PERSON)
        )
    )
    await asyncio.wait_for(started.wait(), 10)

    during = await desk.runtime.erase(desk.account_id, desk.conversation_id)

    assert [t.erased for t in during.turns[: len(earlier)]] == [True] * len(earlier)
    assert during.turns[-1].kept == ("turn: still running",)
    gate.set()
    last = await running
    assert last.status.value == "completed"  # it ran on as if nothing had happened
    after = await desk.runtime.erase(desk.account_id, desk.conversation_id)
    assert after.complete and [t.already for t in after.turns] == [True] * len(earlier) + [False]
    assert PERSON not in await _documents(desk)
    await _verified(desk)


# --- what an erased turn keeps is still vouched for -----------------------------------------------


KEPT = '"severity":"success"'
KEPT_FORGED = '"severity":"warning"'


async def _tamper_erased(desk: Any, turn_id: str, event_id: str) -> None:
    """After erasure, change what the turn's reply and event keep (a block's severity, an
    event's type), behind the stores' back."""
    stores = desk.stores
    if isinstance(stores, MemoryStores):
        t = stores.engine.t
        key = (desk.account_id, turn_id)
        t.assistant_turns[key] = t.assistant_turns[key].replace(KEPT, KEPT_FORGED)
        event = t.events[(desk.account_id, event_id)]
        forged = event.model_copy(update={"event_type": "trip.forged"})
        t.events[(desk.account_id, event_id)] = forged
        return

    def run() -> None:
        engine = sa.create_engine(sync_url(stores.url), poolclass=NullPool)
        try:
            with engine.begin() as connection:
                if stores.config.schema is not None:
                    connection.exec_driver_sql(f'SET search_path TO "{stores.config.schema}"')
                connection.execute(
                    sa.text(
                        "UPDATE tf_turn SET assistant_turn = replace(assistant_turn, :old, :new) "
                        "WHERE turn_id = :turn_id"
                    ),
                    {"turn_id": turn_id, "old": KEPT, "new": KEPT_FORGED},
                )
                connection.execute(
                    sa.text("UPDATE tf_domain_event SET event_type = 'trip.forged' "
                            "WHERE event_id = :event_id"),
                    {"event_id": event_id},
                )  # fmt: skip
        finally:
            engine.dispose()

    await asyncio.to_thread(run)


@pytest.mark.unaudited
async def test_what_an_erased_turn_keeps_is_still_checked_against_the_chain(make_desk) -> None:
    desk = await make_desk()
    named, *_ = await _conversation(desk)
    await desk.runtime.erase(desk.account_id, desk.conversation_id)
    record = await desk.runtime.replay(desk.account_id, named.replay_token)
    assert record.erased_block_hashes and record.erased_event_digests
    assert (await desk.runtime.audit(desk.account_id, named.replay_token)).verified

    await _tamper_erased(desk, named.turn_id, record.event_ids[0])

    audit = await desk.runtime.audit(desk.account_id, named.replay_token)
    failed = {check.name for check in audit.failed()}
    assert not audit.verified
    assert failed == {
        "each erased block keeps what the record vouches for (erased-form digest)",
        "each erased event keeps what the record vouches for (erased-form digest)",
    }, failed
