"""Audit replay answers the ten questions from stored data, verifies every digest, and names
an altered, deleted or reordered entry of a conversation's chain; concurrent turns on one
conversation leave a chain that verifies."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from turnframe_core import UlidIdSource, codes
from turnframe_core.audit_chain import verify_conversation
from turnframe_runtime import AUDIT_QUESTIONS, RuntimeConfig
from turnframe_runtime.audit import read_chain
from turnframe_store import MemoryStores, SqlStores
from turnframe_store.sql.url import sync_url
from turnframe_test.understandings import act, question

NAME = act("a1", "trip.set_name", "h1", "Grace Hopper", name="Grace Hopper")
REBOOK = act("a1", "trip.request_rebooking", "h1", "Rebook my outbound", leg="outbound")

#: The turns `desk.say` runs are nobody's stream: their logs, which these tests edit, are kept
#: only when every turn is logged (decision 0028).
LOG_EVERY_TURN = RuntimeConfig(stream_every_turn=True)


async def _three_turns(desk: Any) -> list[Any]:
    desk.ready_trip()
    named = await desk.say("Grace Hopper", NAME)
    asked = await desk.say("Rebook my outbound", REBOOK)
    clicked = await desk.click(desk.card(asked), "opt_rebook")
    return [named, asked, clicked]


async def test_an_audit_answers_the_ten_questions_from_stored_data(desk) -> None:
    named, _asked, clicked = await _three_turns(desk)
    audit = await desk.runtime.audit(desk.account_id, clicked.replay_token)
    dumped = audit.model_dump(mode="json")

    assert audit.verified, audit.failed()
    assert all(name in dumped for name in AUDIT_QUESTIONS) and len(AUDIT_QUESTIONS) == 10
    assert audit.what_the_user_sent["input"]["interaction_response"]["option_id"] == "opt_rebook"
    assert audit.which_state_was_loaded["cases"][0]["case_id"] == "T-100"
    [decision] = audit.which_policy_applied_and_what_authorized_each_command
    assert (decision["command_type"], decision["allowed"]) == ("trip.confirm_rebooking", True)
    [command] = audit.what_committed["commands"]
    assert command["outcome"]["kind"] == "committed" and command["journal_status"]
    assert command["origin"]["kind"]
    [receipt] = audit.which_event_backs_each_receipt
    assert all(e["in_ledger"] and e["of_this_turn"] for e in receipt["events"])
    assert [b["block_id"] for b in audit.what_was_returned["blocks"]] == [
        b.block_id for b in clicked.blocks
    ]
    assert audit.how_far_the_turn_got["record_phase"] == "delivered"
    assert audit.chain["position"] == 2 and audit.chain["length"] == 3
    understood = await desk.runtime.audit(desk.account_id, named.replay_token)
    assert understood.what_was_understood["understanding"]["acts"][0]["operation"] == (
        "trip.set_name"
    )
    assert understood.which_model_calls_produced_it[0]["purpose"] == "understand"
    assert understood.how_targets_resolved[0]["resolution"] == "exact"


async def test_concurrent_turns_on_one_conversation_leave_a_chain_that_verifies(
    desk, make_desk
) -> None:
    desk.ready_trip()
    said = [f"Name {n}" for n in ("Ada Lovelace", "Grace Hopper", "Alan Turing", "Edsger Wybe")]
    turns = await asyncio.gather(
        *(
            desk.say(text, act("a1", "trip.set_name", "h1", text[5:], name=text[5:]),
                     question("q1", "What do you have?", "h1"))
            for text in said
        )
    )  # fmt: skip
    if not isinstance(desk.stores, MemoryStores):  # a second runtime on the same database
        other = await make_desk(stores=desk.stores, ids=UlidIdSource())
        more = await asyncio.gather(
            desk.say("Name Barbara Liskov", act("a1", "trip.set_name", "h1", "Barbara Liskov",
                                                name="Barbara Liskov")),
            other.say("Name Frances Allen", act("a1", "trip.set_name", "h1", "Frances Allen",
                                                name="Frances Allen")),
        )  # fmt: skip
        turns = [*turns, *more]
    records = await desk.stores.replay.for_conversation(desk.account_id, desk.conversation_id)
    links = await desk.stores.replay.chain(desk.account_id, desk.conversation_id)
    assert verify_conversation(records, links) == []
    assert sorted(link.turn_id for link in links) == sorted(t.turn_id for t in turns)
    for turn in turns:
        assert (await desk.runtime.audit(desk.account_id, turn.replay_token)).verified


# --- tampering ------------------------------------------------------------------------------------


async def _sql(stores: SqlStores, statement: str, **params: Any) -> list[Any]:
    """Run `statement` on the store's database behind its back (what a tamperer does)."""

    def run() -> list[Any]:
        engine = sa.create_engine(sync_url(stores.url), poolclass=NullPool)
        try:
            with engine.begin() as connection:
                if stores.config.schema is not None:
                    connection.exec_driver_sql(f'SET search_path TO "{stores.config.schema}"')
                result = connection.execute(sa.text(statement), params)
                return [tuple(row) for row in result] if result.returns_rows else []
        finally:
            engine.dispose()

    return await asyncio.to_thread(run)


async def _edit_record(desk: Any, turn_id: str) -> None:
    stores = desk.stores
    record = await stores.replay.get(desk.account_id, turn_id)
    edited = record.model_copy(update={"failure_code": "edited.afterwards"})
    if isinstance(stores, MemoryStores):
        stores.engine.t.replay[(desk.account_id, turn_id)] = edited
    else:
        await _sql(stores, "UPDATE tf_replay SET record = :text WHERE turn_id = :turn",
                   text=edited.model_dump_json(), turn=turn_id)  # fmt: skip


async def _delete_record(desk: Any, turn_id: str) -> None:
    stores = desk.stores
    if isinstance(stores, MemoryStores):
        t = stores.engine.t
        del t.replay[(desk.account_id, turn_id)]
        t.replay_by_conversation[(desk.account_id, desk.conversation_id)].remove(turn_id)
    else:
        await _sql(stores, "DELETE FROM tf_replay WHERE turn_id = :turn", turn=turn_id)


async def _reorder_records(desk: Any, first: str, second: str) -> None:
    stores = desk.stores
    if isinstance(stores, MemoryStores):
        times = stores.engine.t.replay_first_put
        a, b = (desk.account_id, first), (desk.account_id, second)
        times[a], times[b] = times[b], times[a]
    else:
        rows = await _sql(stores, "SELECT turn_id, first_recorded_at FROM tf_replay "
                          "WHERE turn_id IN (:a, :b)", a=first, b=second)  # fmt: skip
        times = dict(rows)
        for turn, other in ((first, second), (second, first)):
            await _sql(stores, "UPDATE tf_replay SET first_recorded_at = :at WHERE turn_id = :t",
                       at=times[other], t=turn)  # fmt: skip


async def _delete_link(desk: Any, position: int) -> None:
    stores = desk.stores
    if isinstance(stores, MemoryStores):
        del stores.engine.t.audit_chain[(desk.account_id, desk.conversation_id)][position]
    else:
        await _sql(stores, "DELETE FROM tf_audit_link WHERE position = :p", p=position)


async def _findings(desk: Any) -> set[tuple[str, str | None]]:
    stores = desk.stores
    records = await stores.replay.for_conversation(desk.account_id, desk.conversation_id)
    links = await stores.replay.chain(desk.account_id, desk.conversation_id)
    turns = await stores.conversations.list_turns(desk.account_id, desk.conversation_id)
    found = verify_conversation(records, links, [t.turn_id for t in turns])
    return {(f.code, f.turn_id) for f in found}


@pytest.mark.unaudited
async def test_an_edited_record_is_named(desk) -> None:
    named, asked, _clicked = await _three_turns(desk)
    await _edit_record(desk, asked.turn_id)
    found = await _findings(desk)
    assert (codes.AUDIT_RECORD_ALTERED, asked.turn_id) in found
    audit = await desk.runtime.audit(desk.account_id, asked.replay_token)
    assert not audit.verified
    assert "the record is the one its chain link vouches for" in [c.name for c in audit.failed()]
    assert (await desk.runtime.audit(desk.account_id, named.replay_token)).failed()[0].name == (
        "the conversation's chain is intact"
    )  # every turn of the conversation sees the break


@pytest.mark.unaudited
async def test_a_deleted_record_is_named_even_the_newest(desk) -> None:
    _named, asked, clicked = await _three_turns(desk)
    await _delete_record(desk, asked.turn_id)
    await _delete_record(desk, clicked.turn_id)
    found = await _findings(desk)
    assert (codes.AUDIT_RECORD_MISSING, asked.turn_id) in found
    assert (codes.AUDIT_RECORD_MISSING, clicked.turn_id) in found


@pytest.mark.unaudited
async def test_reordered_records_are_named(desk) -> None:
    named, asked, _clicked = await _three_turns(desk)
    await _reorder_records(desk, named.turn_id, asked.turn_id)
    found = await _findings(desk)
    assert {code for code, _ in found} == {codes.REPLAY_CHAIN_BROKEN}
    assert {turn for _, turn in found} & {named.turn_id, asked.turn_id}


@pytest.mark.unaudited
async def test_a_deleted_link_is_named(desk) -> None:
    _named, asked, clicked = await _three_turns(desk)
    await _delete_link(desk, 1)
    found = await _findings(desk)
    assert (codes.AUDIT_RECORD_UNLINKED, asked.turn_id) in found
    assert (codes.AUDIT_LINK_MISSING, None) in found  # the gap, named by its position
    assert (codes.AUDIT_LINK_OUT_OF_ORDER, clicked.turn_id) in found  # and the link after it


@pytest.mark.unaudited
async def test_a_streamed_block_that_differs_from_the_stored_one_is_named(make_desk) -> None:
    desk = await make_desk(config=LOG_EVERY_TURN)
    _named, asked, _clicked = await _three_turns(desk)
    forged = "sha256:" + "0" * 64
    stores = desk.stores
    if isinstance(stores, MemoryStores):
        log = stores.engine.t.stream[(desk.account_id, asked.turn_id)]
        at = next(i for i, e in enumerate(log) if e.event_type == "content.block.completed")
        entry = log[at]
        data = json.loads(entry.text)
        data["content_hash"] = forged
        log[at] = dataclasses.replace(entry, text=json.dumps(data))
    else:
        [(sequence, text)] = (await _sql(
            stores, "SELECT sequence, event FROM tf_stream_event WHERE turn_id = :t AND "
            "event_type = 'content.block.completed' ORDER BY sequence LIMIT 1", t=asked.turn_id,
        ))  # fmt: skip
        data = json.loads(text)
        data["content_hash"] = forged
        await _sql(stores, "UPDATE tf_stream_event SET event = :e WHERE turn_id = :t AND "
                   "sequence = :s", e=json.dumps(data), t=asked.turn_id, s=sequence)  # fmt: skip
    audit = await desk.runtime.audit(desk.account_id, asked.replay_token)
    [failed] = audit.failed()
    assert failed.name == "each streamed block is the stored block (content hash)"
    assert failed.detail == data["block"]["block_id"]


async def _edit_logged(
    desk: Any, turn_id: str, edit: Any, event_type: str = "content.block.completed"
) -> dict[str, Any]:
    """Apply `edit` to the JSON of the first `event_type` event of the turn's stored log,
    behind the store's back; returns the edited event."""
    stores = desk.stores
    if isinstance(stores, MemoryStores):
        log = stores.engine.t.stream[(desk.account_id, turn_id)]
        at = next(i for i, e in enumerate(log) if e.event_type == event_type)
        data = json.loads(log[at].text)
        edit(data)
        log[at] = dataclasses.replace(log[at], text=json.dumps(data))
        return data  # type: ignore[no-any-return]
    [(sequence, text)] = (await _sql(
        stores, "SELECT sequence, event FROM tf_stream_event WHERE turn_id = :t AND "
        "event_type = :k ORDER BY sequence LIMIT 1", t=turn_id, k=event_type,
    ))  # fmt: skip
    data = json.loads(text)
    edit(data)
    await _sql(stores, "UPDATE tf_stream_event SET event = :e WHERE turn_id = :t AND "
               "sequence = :s", e=json.dumps(data), t=turn_id, s=sequence)  # fmt: skip
    return data  # type: ignore[no-any-return]


@pytest.mark.unaudited
async def test_a_logged_turn_completed_that_differs_from_the_stored_turn_is_named(
    make_desk,
) -> None:
    desk = await make_desk(config=LOG_EVERY_TURN)
    _named, asked, _clicked = await _three_turns(desk)

    def edit(data: dict[str, Any]) -> None:
        data["turn"]["blocks"][0]["title"] = "Your refund of $5,000 was sent"

    await _edit_logged(desk, asked.turn_id, edit, "turn.completed")
    audit = await desk.runtime.audit(desk.account_id, asked.replay_token)
    [failed] = audit.failed()
    assert failed.name == "each streamed block is the stored block (content hash)"
    assert failed.detail == "turn.completed"


@pytest.mark.unaudited
async def test_a_streamed_block_edited_with_its_hash_left_alone_is_named(make_desk) -> None:
    desk = await make_desk(config=LOG_EVERY_TURN)
    """The audit hashes the streamed block again: what `resume_stream` would serve is the
    block, not the hash the event carries."""
    _named, asked, _clicked = await _three_turns(desk)

    def edit(data: dict[str, Any]) -> None:
        data["block"]["title"] = "Your refund of $5,000 was sent"

    data = await _edit_logged(desk, asked.turn_id, edit)
    served = [
        e
        async for e in desk.runtime.resume_stream(desk.account_id, asked.turn_id)
        if e.type == "content.block.completed"
    ]
    assert served[0].block.title == "Your refund of $5,000 was sent"  # what a client would see
    audit = await desk.runtime.audit(desk.account_id, asked.replay_token)
    [failed] = audit.failed()
    assert failed.name == "each streamed block is the stored block (content hash)"
    assert failed.detail == data["block"]["block_id"]


@pytest.mark.unaudited
async def test_a_stored_card_edited_in_place_is_named_by_its_digest(desk) -> None:
    """The stored card decides what a click runs: the record's digest of it, which the chain
    vouches for, names an edit of its options or stored actions."""
    _named, asked, _clicked = await _three_turns(desk)
    [card_id] = (await desk.stores.replay.get(desk.account_id, asked.turn_id)).interactions_created
    stored = await desk.stores.interactions.get(desk.account_id, card_id)
    payload = stored.payload.model_copy(update={"title": "Cancel every booking?"})
    forged = stored.model_copy(update={"payload": payload, "payload_hash": payload.hash()})
    stores = desk.stores
    if isinstance(stores, MemoryStores):
        stores.engine.t.cards[(desk.account_id, card_id)] = forged
    else:
        [(text,)] = await _sql(
            stores, "SELECT interaction FROM tf_interaction WHERE interaction_id = :i", i=card_id
        )
        data = json.loads(text)
        data["payload"]["title"] = "Cancel every booking?"
        data["payload_hash"] = payload.hash()
        await _sql(stores, "UPDATE tf_interaction SET interaction = :j WHERE interaction_id = :i",
                   j=json.dumps(data), i=card_id)  # fmt: skip
    assert (await desk.stores.interactions.get(desk.account_id, card_id)).payload.title == (
        "Cancel every booking?"
    )  # the store reads the edit back as a valid card
    audit = await desk.runtime.audit(desk.account_id, asked.replay_token)
    [failed] = audit.failed()
    assert failed.name == "each card the turn created is the one the record vouches for (digest)"
    assert failed.detail == card_id


@pytest.mark.unaudited
async def test_a_reply_edited_in_place_is_named_by_its_blocks_digest(desk) -> None:
    """The store reloads the edited reply byte for byte (it was written canonically), so only
    the record's block digests, which the chain vouches for, can tell."""
    _named, asked, _clicked = await _three_turns(desk)
    [receipt] = [b for b in asked.blocks if b.kind == "receipt"]
    forged_block = receipt.model_copy(update={"title": "Your refund of $5,000 was sent"})
    forged = asked.model_copy(
        update={"blocks": tuple(forged_block if b is receipt else b for b in asked.blocks)}
    )
    stores = desk.stores
    if isinstance(stores, MemoryStores):
        stores.engine.t.assistant_turns[(desk.account_id, asked.turn_id)] = forged.to_stored_json()
    else:
        await _sql(stores, "UPDATE tf_turn SET assistant_turn = :j WHERE turn_id = :t",
                   j=forged.to_stored_json(), t=asked.turn_id)  # fmt: skip
    audit = await desk.runtime.audit(desk.account_id, asked.replay_token)
    failed = {check.name: check.detail for check in audit.failed()}
    assert failed["each returned block is the one the record vouches for (content hash)"] == (
        receipt.block_id
    )  # and, while the stream log is kept, the streamed block says so too
    assert set(failed) <= {
        "each returned block is the one the record vouches for (content hash)",
        "each streamed block is the stored block (content hash)",
    }


@pytest.mark.unaudited
async def test_an_event_edited_in_the_ledger_is_named(desk) -> None:
    _named, asked, _clicked = await _three_turns(desk)
    record = await desk.stores.replay.get(desk.account_id, asked.turn_id)
    [event_id] = record.event_ids
    stores = desk.stores
    if isinstance(stores, MemoryStores):
        key = (desk.account_id, event_id)
        event = stores.engine.t.events[key]
        stores.engine.t.events[key] = event.model_copy(update={"payload": {"leg": "return"}})
    else:
        await _sql(stores, "UPDATE tf_domain_event SET payload = :p WHERE event_id = :e",
                   p=json.dumps({"leg": "return"}), e=event_id)  # fmt: skip
    audit = await desk.runtime.audit(desk.account_id, asked.replay_token)
    [failed] = audit.failed()
    assert failed.name == "each committed event is the one the record vouches for (digest)"
    assert failed.detail == event_id


async def test_a_conversation_audited_while_its_turns_run_shows_no_break(desk) -> None:
    """Audits read a live conversation in several calls; a turn finishing between them is never
    mistaken for a break."""
    desk.ready_trip()
    running = True
    seen: list[int] = []

    async def audit_continually() -> None:
        while running:
            chain = await read_chain(desk.stores, desk.account_id, desk.conversation_id)
            assert chain.findings == (), chain.findings
            seen.append(len(chain.links))
            await asyncio.sleep(0)

    auditor = asyncio.create_task(audit_continually())
    for n in range(12):
        name = f"Ada Lovelace {'I' * (n % 3 + 1)}"
        await desk.say(name, act("a1", "trip.set_name", "h1", name, name=name))
        await asyncio.sleep(0)
    running = False
    await auditor
    assert len(seen) >= 3 and max(seen) >= 10  # it audited while the chain grew


def _slow_reads_for(stores: Any, task: asyncio.Task[Any], delay_s: float) -> None:
    """Every read `task` makes through `stores` (or through a snapshot of them) returns
    `delay_s` late: its reads take longer than a turn does."""

    def slow(role: Any) -> None:
        for name in ("chain", "for_conversation", "list_turns", "get_by_token", "get"):
            real = getattr(role, name, None)
            if real is None:
                continue

            async def late(*args: Any, _real: Any = real, **kwargs: Any) -> Any:
                found = await _real(*args, **kwargs)
                if asyncio.current_task() is task:
                    await asyncio.sleep(delay_s)
                return found

            setattr(role, name, late)

    def slow_all(view: Any) -> None:
        for role in ("replay", "conversations"):
            slow(getattr(view, role))

    slow_all(stores)
    real_snapshot = stores.snapshot

    @contextlib.asynccontextmanager
    async def snapshot() -> Any:
        async with real_snapshot() as view:
            if view is not stores:
                slow_all(view)
            yield view

    stores.snapshot = snapshot


async def test_audits_of_a_conversation_whose_turns_finish_meanwhile_never_report_a_break(
    desk,
) -> None:
    """Turns finish faster than an audit reads: each audit reads one snapshot, so none reports a
    record altered or missing (an audit that read a turn's records before it finished and its
    chain after would)."""
    desk.ready_trip()
    await desk.say("Name Ada", act("a1", "trip.set_name", "h1", "Ada", name="Ada Lovelace"))
    finished = asyncio.Event()

    async def audit_all() -> list[Any]:
        records = await desk.stores.replay.for_conversation(desk.account_id, desk.conversation_id)
        audits = []
        for record in records[:6]:
            audits.append(await desk.runtime.audit(desk.account_id, record.replay_token))
        return audits

    async def keep_finishing_turns() -> int:
        n = 0
        while not finished.is_set() and n < 60:
            n += 1
            name = f"Ada Lovelace {'I' * (n % 3 + 1)}"
            await desk.say(name, act("a1", "trip.set_name", "h1", name, name=name))
        return n

    for _ in range(5):  # a conversation of a few turns to audit
        await desk.say("Name Ada", act("a1", "trip.set_name", "h1", "Ada", name="Ada Lovelace"))
    auditor = asyncio.ensure_future(audit_all())
    _slow_reads_for(desk.stores, auditor, 0.02)
    writer = asyncio.create_task(keep_finishing_turns())
    try:
        audits = await auditor
    finally:
        finished.set()
        turns = await writer
    assert turns >= 3  # turns finished while it audited
    assert len(audits) == 6
    assert [a.failed() for a in audits if not a.verified] == []
