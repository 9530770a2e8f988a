"""The real-process chaos harness itself: a short run with runtime and worker processes killed
keeps every invariant, and the database checks it ends with can fail: each kind of damage
done to a finished run's database afterwards is named. (The full runs are release-gate
evidence: `turnframe gates` runs them; see docs/gates.md.)"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import psycopg
import pytest

from turnframe_runtime import connect_broker
from turnframe_store.sql.url import parse_url
from turnframe_test.postgres import PrivateDatabase
from turnframe_test.process_chaos import (
    PLANS,
    ChaosReport,
    ProcessChaos,
    check_database,
)

#: it empties (and restarts) the shared Redis broker: never beside another test that uses it
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("redis")]

SHORT = dataclasses.replace(
    PLANS["chaos-runtime-kill"],
    name="short-chaos",
    conversations=8,
    turns=60,
    runtime_life_s=(0.05, 0.3),
    worker_life_s=(0.3, 1.0),
)


async def test_a_short_run_with_processes_killed_keeps_every_invariant_and_damage_is_named(
    postgres_url: str, redis_url: str, tmp_path: Path
) -> None:
    connect_broker(redis_url).flush_all()
    async with PrivateDatabase(postgres_url) as db:
        report = await ProcessChaos(SHORT, db.url, redis_url, tmp_path).run()
        print(report.summary())
        assert report.violations == []
        counts = report.counts
        assert counts["runtime kills"] >= 1 and counts["requests in flight at a kill"] >= 1
        assert counts["user turns answered"] + counts["user turns failed"] == counts["user turns"]
        assert counts["outbox rows"] >= 1  # the airline was reached, so its checks ran
        assert counts["invariant checks"] > 100

        # Damage the finished run's database, one kind at a time, and read it again.
        async with await psycopg.AsyncConnection.connect(
            parse_url(db.url)[1], autocommit=True
        ) as c:
            await c.execute(
                "DELETE FROM tf_domain_event WHERE event_id ="
                " (SELECT event_id FROM tf_domain_event ORDER BY sequence DESC LIMIT 1)"
            )
            await c.execute(
                "UPDATE tf_turn_phase SET phase = 'committed' WHERE turn_id ="
                " (SELECT turn_id FROM tf_turn_phase ORDER BY turn_id LIMIT 1)"
            )
            # A card no other open card of its case stands beside (one open card per case).
            await c.execute(
                "UPDATE tf_interaction SET status = 'resolving' WHERE interaction_id ="
                " (SELECT interaction_id FROM tf_interaction i WHERE status = 'active' OR NOT"
                "  EXISTS (SELECT 1 FROM tf_interaction o WHERE o.case_id = i.case_id"
                "  AND o.status IN ('active', 'resolving'))"
                "  ORDER BY status = 'active' DESC, interaction_id LIMIT 1)"
            )
            await c.execute("UPDATE travel_trip SET revision = revision + 5 WHERE trip_id = 'T-0'")
            await c.execute(
                "INSERT INTO fake_airline_request VALUES ('forged', 'forged', 'R-X', 1)"
            )
            await c.execute(
                "UPDATE fake_airline_request SET requests = 2 WHERE outbox_id ="
                " (SELECT outbox_id FROM tf_outbox ORDER BY outbox_id LIMIT 1)"
            )
            # A card's command committed again in another turn (a double click that ran twice).
            await c.execute(
                "INSERT INTO tf_command_journal (account_id, command_id, idempotency_key,"
                " turn_id, workflow, case_id, expected_revision, command_type, entry, status,"
                " outcome, created_at, completed_at) SELECT account_id, command_id || 'x',"
                " idempotency_key || 'x', turn_id || 'x', workflow, case_id, expected_revision,"
                " command_type, entry, status, outcome, created_at, completed_at"
                " FROM tf_command_journal WHERE command_id = (SELECT command_id"
                "  FROM tf_command_journal WHERE status = 'committed'"
                "  AND entry LIKE '%%interaction_id%%' ORDER BY command_id DESC LIMIT 1)"
            )
            # A link of a conversation's audit chain gone.
            await c.execute(
                "DELETE FROM tf_audit_link WHERE (conversation_id, position) ="
                " (SELECT conversation_id, position FROM tf_audit_link"
                "  ORDER BY conversation_id, position DESC LIMIT 1)"
            )
            # A command from a card, as if planned at another revision than the card's.
            await c.execute(
                "UPDATE tf_command_journal SET expected_revision = expected_revision + 7"
                " WHERE command_id = (SELECT command_id FROM tf_command_journal"
                "  WHERE status = 'committed' AND entry LIKE '%%interaction_id%%'"
                "  ORDER BY command_id LIMIT 1)"
            )
        damaged = ChaosReport(SHORT)
        await check_database(db.url, damaged)
    named = "\n".join(damaged.violations)
    for expected in (
        "the domain and the ledger disagree on effects",
        "left committed",
        "left resolving",
        "T-0 is at",
        "airline effects no outbox row asked for",
        "was sent 2 times",
        "ran a command planned at",
        "ran commands in 2 turns",
        "does not audit",
    ):
        assert expected in named, f"{expected!r} not among:\n{named}"


def test_the_gate_runs_are_what_the_issue_asks_for() -> None:
    kill, workers, scale = (
        PLANS[n] for n in ("chaos-runtime-kill", "chaos-worker-kill", "scale-out")
    )
    assert kill.turns == 200 and kill.runtime_life_s is not None and kill.workers >= 1
    assert workers.min_dispatches >= 1_000 and workers.min_worker_kills >= 20
    assert (scale.runtimes, scale.workers, scale.turns, scale.conversations) == (4, 2, 1_000, 50)
