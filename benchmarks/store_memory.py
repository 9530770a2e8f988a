"""MemoryStores commit cost: bundles of 1, 8 and 64 events, and 4,000 single-event commits in a
row, against an in-run baseline that copies the whole state before each commit.

Each bundle holds one journal completion, N events and the turn's phase marker. The undo-log
commit costs O(items in the bundle), so its per-commit time stays flat as the store grows; the
copy-the-state baseline grows with the state (quadratic over a run).

    .venv/bin/python benchmarks/store_memory.py
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import time

from turnframe_core import (
    CaseRef,
    CommandEnvelope,
    CommittedOutcome,
    DomainEvent,
    InternalPolicy,
    TurnInput,
    TurnPhase,
)
from turnframe_store import (
    CommitBundle,
    CommitResult,
    JournalCompletion,
    JournalEntry,
    ManualClock,
    MemoryStores,
    UserTurnRecord,
)
from turnframe_store.memory import MemoryCommits, Tables, UndoLog

ACCOUNT = "acct_bench"
T0 = 1_700_000_000_000
CASE = CaseRef(workflow="bench.case", case_id="case-1", expected_revision=1)
RUNS = 5
COMMITS_PER_RUN = 200
IN_A_ROW = 4_000


class CopyStateCommits(MemoryCommits):
    """The naive alternative: copy every table before a commit and put the copy back on failure."""

    async def commit(self, bundle: CommitBundle) -> CommitResult:
        bundle.require_valid()
        engine = self.engine
        with engine.lock:
            saved = _copy_tables(engine.t)
            try:
                return self.commit_in(UndoLog(), bundle)
            except BaseException:
                engine.t = saved
                raise


#: The tables whose values are lists (indexes); a copy of the state copies those lists too.
_INDEXES = frozenset(
    {
        "turns_by_conversation",
        "cards_by_case",
        "cards_by_conversation",
        "journal_by_turn",
        "events_by_account",
        "events_by_case",
        "outbox_by_command",
        "replay_by_conversation",
    }
)


def _copy_tables(tables: Tables) -> Tables:
    copied = Tables.__new__(Tables)
    for name, value in vars(tables).items():
        if name in _INDEXES:
            value = {key: items.copy() for key, items in value.items()}
        elif isinstance(value, dict):
            value = value.copy()
        setattr(copied, name, value)
    return copied


async def next_turn(stores: MemoryStores, n: int, events_per_commit: int) -> CommitBundle:
    """Receive turn `n`, admit and start its command, and return the bundle that commits it."""
    turn_id, command_id = f"turn_{n:06d}", f"cmd_{n:06d}"
    await stores.conversations.ensure_conversation(ACCOUNT, "conv_1")
    await stores.conversations.append_user_turn(
        UserTurnRecord(
            account_id=ACCOUNT,
            conversation_id="conv_1",
            turn_id=turn_id,
            received_at=T0 + n,
            input=TurnInput(account_id=ACCOUNT, conversation_id="conv_1", text="go"),
        )
    )
    envelope = CommandEnvelope.build(
        command_id=command_id,
        turn_id=turn_id,
        account_id=ACCOUNT,
        case_ref=CASE,
        origin=InternalPolicy(policy_key="bench"),
        command_type="bench.step",
        payload={"n": n},
    )
    await stores.journal.begin(JournalEntry.from_envelope(envelope, now=T0 + n))
    await stores.journal.mark_executing(ACCOUNT, command_id)
    events = tuple(
        DomainEvent(
            event_id=f"evt_{n:06d}_{k:03d}",
            account_id=ACCOUNT,
            workflow=CASE.workflow,
            case_id=CASE.case_id,
            case_revision=n + 2,
            command_id=command_id,
            event_type="bench.stepped",
            payload={"n": n, "k": k},
            occurred_at=T0 + n,
        )
        for k in range(events_per_commit)
    )
    outcome = CommittedOutcome(new_revision=n + 2, event_ids=tuple(e.event_id for e in events))
    return CommitBundle(
        account_id=ACCOUNT,
        conversation_id="conv_1",
        turn_id=turn_id,
        journal_completions=(JournalCompletion(command_id=command_id, outcome=outcome),),
        events=events,
        phase=TurnPhase.COMMITTED,
    )


async def run(commits: int, events_per_commit: int, *, copy_state: bool = False) -> list[int]:
    """`commits` turns one after another on a fresh store; each commit's duration in ns (the
    turn's own preparation is not timed)."""
    stores = MemoryStores(clock=ManualClock(T0))
    target = stores.replace(commits=CopyStateCommits(stores.engine)) if copy_state else stores
    durations = []
    for n in range(commits):
        bundle = await next_turn(stores, n, events_per_commit)
        started = time.perf_counter_ns()
        await target.commits.commit(bundle)
        durations.append(time.perf_counter_ns() - started)
    return durations


async def per_commit_us(events_per_commit: int) -> float:
    """Median over runs of the mean commit time (µs) in a run of COMMITS_PER_RUN turns."""
    means = []
    for _ in range(RUNS):
        durations = await run(COMMITS_PER_RUN, events_per_commit)
        means.append(sum(durations) / len(durations) / 1_000)
    return statistics.median(means)


async def main() -> None:
    rows: list[tuple[str, str]] = []
    for size in (1, 8, 64):
        label = f"bundle of {size} event{'s' if size > 1 else ''}"
        rows.append((label, f"{await per_commit_us(size):8.1f} µs/commit"))

    totals, firsts, lasts = [], [], []
    for _ in range(3):
        durations = await run(IN_A_ROW, 1)
        totals.append(sum(durations) / 1e6)
        firsts.append(statistics.median(durations[:500]) / 1e3)
        lasts.append(statistics.median(durations[-500:]) / 1e3)
    undo_total = statistics.median(totals)
    rows.append((f"{IN_A_ROW:,} single-event commits in a row", f"{undo_total:8.1f} ms total"))
    rows.append(
        (
            "  median of the first / last 500",
            f"{statistics.median(firsts):.1f} / {statistics.median(lasts):.1f} µs/commit",
        )
    )
    copied = await run(IN_A_ROW, 1, copy_state=True)
    copy_total = sum(copied) / 1e6
    rows.append(
        (
            f"baseline: copy-the-state, {IN_A_ROW:,} in a row",
            f"{copy_total:8.1f} ms total ({copy_total / undo_total:.0f}x the undo log)",
        )
    )
    rows.append(
        (
            "  median of the first / last 500",
            f"{statistics.median(copied[:500]) / 1e3:.1f} / "
            f"{statistics.median(copied[-500:]) / 1e3:.1f} µs/commit",
        )
    )

    print(
        f"MemoryStores commit benchmark — Python {platform.python_version()}, "
        f"each bundle = 1 journal completion + N events + phase marker"
    )
    width = max(len(label) for label, _ in rows)
    print(f"{'case':<{width}}  result")
    print(f"{'-' * width}  {'-' * 44}")
    for label, value in rows:
        print(f"{label:<{width}}  {value.strip()}")


if __name__ == "__main__":
    asyncio.run(main())
