"""Conformance checks: the command journal: admission by idempotency key and completion."""

from __future__ import annotations

import asyncio

from turnframe_core.replay import (
    AwaitingConfirmationOutcome,
    CommittedOutcome,
    FailedOutcome,
    OutcomeUnknown,
    RejectedOutcome,
)
from turnframe_store import builders as build
from turnframe_store.builders import ACCOUNT_A
from turnframe_store.bundle import Stores
from turnframe_store.conformance.expect import equal, refused, true
from turnframe_store.conformance.runner import check
from turnframe_store.errors import Conflict, InvalidRecord, NotFound
from turnframe_store.records import Fresh, JournalStatus, Replay


@check
async def check_journal_admission_is_fresh_exactly_once_per_key_under_interleaving(
    stores: Stores,
) -> None:
    journal = stores.journal
    entry = build.journal_entry("cmd_1")
    admissions = await asyncio.gather(*(journal.begin(entry) for _ in range(8)))
    fresh = [a for a in admissions if isinstance(a, Fresh)]
    equal(len(fresh), 1, "fresh admissions of one key among 8 concurrent callers")
    equal(
        {(a.kind, a.entry.command_id) for a in admissions if not isinstance(a, Fresh)},
        {("replay", "cmd_1")},
        "what the other callers got",
    )
    others = [build.journal_entry(f"cmd_{n}", payload={"n": n}) for n in range(2, 7)]
    admitted = await asyncio.gather(*(journal.begin(e) for e in others))
    equal([isinstance(a, Fresh) for a in admitted], [True] * len(others), "distinct keys at once")
    equal(
        (await journal.get_by_key(ACCOUNT_A, entry.idempotency_key)).command_id,
        "cmd_1",
        "the entry admitted under the key",
    )


@check
async def check_a_settled_journal_entry_is_replayed_not_readmitted(stores: Stores) -> None:
    journal = stores.journal
    entry = build.journal_entry("cmd_1")
    true(isinstance(await journal.begin(entry), Fresh), "the first admission is fresh")
    await journal.mark_executing(ACCOUNT_A, "cmd_1")
    outcome = CommittedOutcome(new_revision=2, event_ids=("evt_1",))
    settled = await journal.complete(ACCOUNT_A, "cmd_1", outcome)
    again = await journal.begin(entry)
    true(isinstance(again, Replay), "admitting a settled command again replays it")
    equal(again.entry, settled, "the replayed entry")
    equal(await journal.unsettled_for_turn(ACCOUNT_A, "turn_1"), (), "unsettled entries")
    waiting = build.journal_entry(
        "cmd_2", payload={"n": 2}, status=JournalStatus.AWAITING_CONFIRMATION
    )
    true(isinstance(await journal.begin(waiting), Fresh), "an entry awaiting confirmation")
    replayed = await journal.begin(waiting)
    equal(
        (replayed.kind, replayed.entry.status),
        ("replay", JournalStatus.AWAITING_CONFIRMATION),
        "admitting it again",
    )


@check
async def check_a_reused_idempotency_key_with_a_different_command_is_refused(
    stores: Stores,
) -> None:
    journal = stores.journal
    entry = build.journal_entry("cmd_1")
    await journal.begin(entry)
    variants = {
        "cmd_2": entry.model_copy(update={"command_id": "cmd_2", "payload": {"note": "other"}}),
        "cmd_3": entry.model_copy(
            update={"command_id": "cmd_3", "case_ref": build.case("case-1", 7)}
        ),
        "cmd_4": entry.model_copy(update={"command_id": "cmd_4", "command_type": "conformance.x"}),
    }
    for command_id, variant in variants.items():
        await refused(Conflict, journal.begin(variant), "a stored key with another command")
        await refused(NotFound, journal.get(ACCOUNT_A, command_id), "the refused command")
    await refused(
        Conflict,
        journal.begin(build.journal_entry("cmd_1", payload={"note": "another key"})),
        "a stored command id under another key",
    )
    equal(await journal.get(ACCOUNT_A, "cmd_1"), entry, "the stored entry")


@check
async def check_journal_completion_is_compare_and_swap(stores: Stores) -> None:
    journal = stores.journal
    await journal.begin(build.journal_entry("cmd_1"))
    committed = CommittedOutcome(new_revision=2, event_ids=("evt_1",))
    done = await journal.complete(ACCOUNT_A, "cmd_1", committed)
    equal(
        (done.status, done.outcome, done.completed_at is not None),
        (JournalStatus.COMMITTED, committed, True),
        "the settled entry",
    )
    equal(await journal.complete(ACCOUNT_A, "cmd_1", committed), done, "the same outcome again")
    for what, outcome in (
        ("failing a committed command", FailedOutcome(code="conformance.failed")),
        ("another commit", CommittedOutcome(new_revision=3, event_ids=("evt_2",))),
        ("an unknown outcome after a commit", OutcomeUnknown(attempt_id="attempt-1")),
    ):
        await refused(Conflict, journal.complete(ACCOUNT_A, "cmd_1", outcome), what)
    await refused(Conflict, journal.mark_executing(ACCOUNT_A, "cmd_1"), "re-executing it")
    equal(await journal.get(ACCOUNT_A, "cmd_1"), done, "the entry after refused moves")

    await journal.begin(build.journal_entry("cmd_2", payload={"n": 2}))
    executing = await journal.mark_executing(ACCOUNT_A, "cmd_2")
    equal(await journal.mark_executing(ACCOUNT_A, "cmd_2"), executing, "executing again")
    unknown = OutcomeUnknown(attempt_id="attempt-1")
    pending_check = await journal.complete(ACCOUNT_A, "cmd_2", unknown)
    equal(pending_check.status, JournalStatus.OUTCOME_UNKNOWN, "an unknown outcome")
    equal(
        await journal.complete(ACCOUNT_A, "cmd_2", unknown), pending_check, "the same unknown again"
    )
    await refused(
        Conflict,
        journal.complete(ACCOUNT_A, "cmd_2", OutcomeUnknown(attempt_id="attempt-2")),
        "another unknown outcome",
    )
    rejected = await journal.complete(
        ACCOUNT_A, "cmd_2", RejectedOutcome(code="conformance.refused")
    )
    equal(rejected.status, JournalStatus.FAILED, "reconciling the unknown outcome")
    await refused(
        Conflict, journal.complete(ACCOUNT_A, "cmd_2", committed), "changing it afterwards"
    )

    await journal.begin(build.journal_entry("cmd_3", payload={"n": 3}))
    await refused(
        InvalidRecord,
        journal.complete(ACCOUNT_A, "cmd_3", AwaitingConfirmationOutcome(interaction_id="int_1")),
        "an outcome that settles nothing",
    )
    equal(
        (await journal.get(ACCOUNT_A, "cmd_3")).status, JournalStatus.PENDING, "the untouched entry"
    )
