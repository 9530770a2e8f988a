"""What a real-process run must leave behind, read from the database alone (docs/gates.md).

`await check_database(url, report)` records one invariant check per rule per thing checked, and
a violation for each breach:

- every turn has a phase marker and ended (`delivered` or `failed`); a delivered turn has its
  reply, which reads back, completed or interrupted;
- each receipt cites events in the ledger; each card a reply shows is stored;
- no card is left `resolving`; a card is resolved exactly when a command from it committed;
  commands from one card committed in one turn at most (a double click ran once), each
  planned at the card's revision (a stale click ran nothing);
- the domain applied exactly the events the ledger holds, each once, and each trip stands at
  its last event's revision; no two commands wrote one revision of a case;
- each outbox row completed, took effect at the airline once, was sent there once and had its
  answer applied once; the airline holds no effect no row asked for;
- every event a turn committed is cited by a receipt of that turn's reply (or of the follow-up
  turn that told of it), and no turn that committed anything ended `interrupted`;
- every conversation's audit chain and every turn's audit verify.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Protocol

import psycopg

from turnframe_core import InteractionBlock, InteractionStatus, ReceiptBlock, TurnPhase, TurnStatus
from turnframe_store import JournalStatus, NotFound, SqlStores
from turnframe_store.sql.url import parse_url
from turnframe_test.audit_kit import audit_problems
from turnframe_test.invariants import resolution_runs_commands, unreceipted_events

__all__ = ["Checks", "check_database", "rows"]

ACCOUNT = "acct_chaos"


class Checks(Protocol):
    """Where the checks go: one call per invariant checked."""

    def check(self, holds: bool, what: str) -> None: ...

    @property
    def counts(self) -> Counter[str]: ...


Connection = psycopg.AsyncConnection[Any]


async def rows(c: Connection, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    return list(await (await c.execute(sql, args or None)).fetchall())


async def check_database(database_url: str, report: Checks) -> None:
    """Every invariant, read from the database alone, into `report`."""
    conninfo = parse_url(database_url)[1]
    stores = await SqlStores.connect(database_url)
    try:
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as c:
            await _check_turns(stores, c, report)
            await _check_cards(stores, c, report)
            await _check_effects(c, report)
            await _check_outbox(c, report)
            conversations = [
                r[0] for r in await rows(c, "SELECT conversation_id FROM travel_trip ORDER BY 1")
            ]
        for conversation in conversations:
            try:
                await _check_audit(stores, conversation, report)
            except Exception as error:  # a record that does not even read back is a finding
                report.check(False, f"{conversation} cannot be audited: {type(error).__name__}")
    finally:
        await stores.aclose()


async def _check_turns(stores: SqlStores, c: Connection, report: Checks) -> None:
    counts = report.counts
    ledger = {r[0] for r in await rows(c, "SELECT event_id FROM tf_domain_event")}
    for turn_id, phase in await rows(
        c,
        "SELECT t.turn_id, p.phase FROM tf_turn t"
        " LEFT JOIN tf_turn_phase p USING (account_id, turn_id) WHERE t.account_id = %s",
        ACCOUNT,
    ):
        counts["turns stored"] += 1
        report.check(phase is not None, f"{turn_id} has no phase marker")
        report.check(
            phase in (TurnPhase.DELIVERED.value, TurnPhase.FAILED.value), f"{turn_id} left {phase}"
        )
        try:
            turn = await stores.conversations.get_assistant_turn(ACCOUNT, turn_id)
        except NotFound:
            report.check(phase == TurnPhase.FAILED.value, f"{turn_id} delivered with no reply")
            continue
        except Exception as error:
            report.check(False, f"{turn_id}'s reply does not read back: {type(error).__name__}")
            continue
        report.check(
            turn.status in (TurnStatus.COMPLETED, TurnStatus.INTERRUPTED),
            f"{turn_id} is {turn.status.value}",
        )
        for block in turn.blocks:
            if isinstance(block, ReceiptBlock):
                counts["receipts"] += 1
                report.check(set(block.event_ids) <= ledger, f"{turn_id} cites an absent event")
            elif isinstance(block, InteractionBlock):
                counts["cards"] += 1
                try:
                    await stores.interactions.get(ACCOUNT, block.interaction_id)
                    stored = True
                except NotFound:
                    stored = False
                report.check(stored, f"{turn_id} shows a card never stored")


async def _check_cards(stores: SqlStores, c: Connection, report: Checks) -> None:
    """A card is resolved with an option that runs commands exactly when a command from it
    committed, in one turn, at its revision."""
    by_card: dict[str, list[tuple[str, int]]] = {}
    for entry, turn_id, expected in await rows(
        c,
        "SELECT entry, turn_id, expected_revision FROM tf_command_journal WHERE status = %s",
        JournalStatus.COMMITTED.value,
    ):
        card = (json.loads(entry).get("origin") or {}).get("interaction_id")
        if card:
            by_card.setdefault(card, []).append((turn_id, int(expected)))
    for card, status, revision in await rows(
        c,
        "SELECT interaction_id, status, case_revision FROM tf_interaction WHERE account_id = %s",
        ACCOUNT,
    ):
        committed = by_card.get(card, [])
        try:
            stored = await stores.interactions.get(ACCOUNT, card)
        except Exception as error:  # a card that does not read back is a finding, not a stop
            report.check(False, f"{card} does not read back: {type(error).__name__}")
            continue
        report.check(status != InteractionStatus.RESOLVING.value, f"{card} left resolving")
        if status == InteractionStatus.RESOLVED.value and not committed:
            report.check(
                not resolution_runs_commands(stored), f"{card} resolved with nothing committed"
            )
        elif status != InteractionStatus.RESOLVED.value:
            report.check(not committed, f"{card} is {status} after a command from it ran")
        turns = {turn for turn, _ in committed}
        report.check(len(turns) <= 1, f"{card} ran commands in {len(turns)} turns")
        if not stored.revision_independent:  # such a card runs at the revision of its answer
            stale = [expected for _, expected in committed if expected != revision]
            report.check(
                not stale, f"{card} (revision {revision}) ran a command planned at {stale}"
            )


async def _check_effects(c: Connection, report: Checks) -> None:
    """The domain applied exactly what the ledger holds: the same events, each once, and each
    trip stands at its last event's revision; no revision was written twice."""
    applied: Counter[str] = Counter()
    for (events,) in await rows(c, "SELECT events FROM travel_applied"):
        applied.update(event["event_id"] for event in events)
    ledger = Counter(r[0] for r in await rows(c, "SELECT event_id FROM tf_domain_event"))
    report.counts["events"] = sum(ledger.values())
    report.check(applied == ledger, "the domain and the ledger disagree on effects")
    for trip, revision, last in await rows(
        c,
        "SELECT t.trip_id, t.revision, max(e.case_revision) FROM travel_trip t"
        " LEFT JOIN tf_domain_event e ON e.account_id = t.account_id AND e.case_id = t.trip_id"
        " GROUP BY t.trip_id, t.revision",
    ):
        report.check(revision == (last or 1), f"{trip} is at {revision}, its ledger at {last}")
    for case, revision, commands in await rows(
        c,
        "SELECT case_id, case_revision, count(DISTINCT command_id) FROM tf_domain_event"
        " GROUP BY case_id, case_revision HAVING count(DISTINCT command_id) > 1",
    ):
        report.check(False, f"{case} revision {revision} was written by {commands} commands")


async def _check_outbox(c: Connection, report: Checks) -> None:
    """Row by row: completed, one effect at the airline, sent once, its answer applied once."""
    counts = report.counts
    sent = {  # the airline's own record, by the key each effect was asked under
        key: (outbox_id, requests)
        for key, outbox_id, requests in await rows(
            c, "SELECT idempotency_key, outbox_id, requests FROM fake_airline_request"
        )
    }
    answers = Counter(
        json.loads(entry).get("origin", {}).get("callback_id")
        for (entry,) in await rows(
            c,
            "SELECT entry FROM tf_command_journal WHERE status = %s AND command_type = %s",
            JournalStatus.COMMITTED.value,
            "trip.record_airline_answer",
        )
    )
    outbox = await rows(c, "SELECT outbox_id, idempotency_key, status FROM tf_outbox")
    counts["outbox rows"] = len(outbox)
    counts["airline requests"] = sum(requests for _, requests in sent.values())
    for outbox_id, key, status in outbox:
        report.check(status == "completed", f"outbox row {outbox_id} ended {status}")
        airline = sent.get(key)
        report.check(airline is not None, f"outbox row {outbox_id} never took effect")
        if airline is not None:
            report.check(airline[0] == outbox_id, f"{outbox_id}'s key took effect for another row")
            report.check(airline[1] == 1, f"outbox row {outbox_id} was sent {airline[1]} times")
        report.check(answers[outbox_id] == 1, f"{outbox_id}'s answer applied {answers[outbox_id]}x")
    stray = set(sent) - {key for _, key, _ in outbox}
    report.check(not stray, f"{len(stray)} airline effects no outbox row asked for")


async def _check_audit(stores: SqlStores, conversation: str, report: Checks) -> None:
    unreceipted = await unreceipted_events(stores, ACCOUNT, conversation)
    report.check(not unreceipted, f"{conversation} has events without receipts: {unreceipted[:2]}")
    audited, problems = await audit_problems(stores, ACCOUNT, conversation)
    report.counts["turns audited"] += audited
    report.check(not problems, f"{conversation} does not audit: {problems[:2]}")
