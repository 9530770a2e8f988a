"""The outbox role in memory: rows by id, by (destination, idempotency key) and by command, and
the indexes of pending and dispatching rows."""

from __future__ import annotations

from typing import Any, Final

from turnframe_store.errors import Conflict
from turnframe_store.memory.engine import MemoryRole
from turnframe_store.memory.state import UndoLog
from turnframe_store.records import OUTBOX_CLAIM_EXPIRED, OutboxEntry, OutboxStatus
from turnframe_store.roles import outbox as outbox_rules
from turnframe_store.roles import rules
from turnframe_store.roles.outbox import OutboxStore
from turnframe_store.roles.rules import Verdict

__all__ = ["MemoryOutbox"]

_NO_CLAIM: Final[dict[str, Any]] = {
    "claim_worker_id": None,
    "claim_taken_at": None,
    "dispatch_started_at": None,
}


class MemoryOutbox(MemoryRole, OutboxStore):
    """The hooks of `OutboxStore` on the engine's tables; `enqueue_in` is the write a commit
    bundle applies on its own undo log."""

    def row(self, outbox_id: str) -> OutboxEntry:
        return rules.found(self.engine.t.outbox.get(outbox_id))

    def move_row(self, undo: UndoLog, row: OutboxEntry, **changes: Any) -> OutboxEntry:
        """Store the row with `changes`, keeping the pending and dispatching indexes."""
        t = self.engine.t
        moved = row.model_copy(update=changes)
        undo.put(t.outbox, row.outbox_id, moved)
        for status, index in (
            (OutboxStatus.PENDING, t.outbox_pending),
            (OutboxStatus.DISPATCHING, t.outbox_dispatching),
        ):
            if moved.status is status:
                undo.put(index, row.outbox_id, None)
            else:
                undo.remove(index, row.outbox_id)
        return moved

    async def _get(self, outbox_id: str) -> OutboxEntry:
        return await self.engine.read(lambda: self.row(outbox_id))

    async def _list_for_command(self, command_id: str) -> tuple[OutboxEntry, ...]:
        def read() -> tuple[OutboxEntry, ...]:
            t = self.engine.t
            rows = [t.outbox[i] for i in t.outbox_by_command.get(command_id, ())]
            return tuple(sorted(rows, key=outbox_rules.by_enqueueing))

        return await self.engine.read(read)

    async def _pending_count(self) -> int:
        t = self.engine.t
        return await self.engine.read(
            lambda: sum(1 for row in t.outbox.values() if not row.status.is_terminal)
        )

    async def _claimed_count(self, worker_id: str) -> int:
        t = self.engine.t
        return await self.engine.read(
            lambda: sum(1 for i in t.outbox_dispatching if t.outbox[i].claim_worker_id == worker_id)
        )

    async def _enqueue(self, entry: OutboxEntry) -> OutboxEntry:
        return await self.engine.write(lambda undo: self.enqueue_in(undo, entry))

    def enqueue_in(self, undo: UndoLog, entry: OutboxEntry) -> OutboxEntry:
        t = self.engine.t
        by_key = (entry.destination, entry.idempotency_key)
        if entry.outbox_id in t.outbox or by_key in t.outbox_by_key:
            raise Conflict("the outbox row is already enqueued")
        undo.put(t.outbox, entry.outbox_id, entry)
        undo.put(t.outbox_by_key, by_key, entry.outbox_id)
        undo.index(t.outbox_by_command, entry.command_id, entry.outbox_id)
        undo.put(t.outbox_pending, entry.outbox_id, None)
        return entry

    async def _claim_due(self, now: int, limit: int, worker_id: str) -> tuple[OutboxEntry, ...]:
        def write(undo: UndoLog) -> tuple[OutboxEntry, ...]:
            t = self.engine.t
            rows = (t.outbox[outbox_id] for outbox_id in t.outbox_pending)
            due = sorted(
                (r for r in rows if outbox_rules.due(r, now)), key=outbox_rules.by_enqueueing
            )
            return tuple(
                self.move_row(
                    undo,
                    row,
                    status=outbox_rules.OUTBOX_CLAIM.target,
                    attempt_count=row.attempt_count + 1,
                    claim_worker_id=worker_id,
                    claim_taken_at=now,
                )
                for row in due[:limit]
            )

        return await self.engine.write(write)

    async def _begin_dispatch(self, outbox_id: str, attempt: int, now: int) -> OutboxEntry:
        def write(undo: UndoLog) -> OutboxEntry:
            row = self.row(outbox_id)
            outbox_rules.begin_dispatch_row(row, attempt)
            return self.move_row(undo, row, dispatch_started_at=now, claim_taken_at=now)

        return await self.engine.write(write)

    async def _mark_completed(self, outbox_id: str, attempt: int | None) -> OutboxEntry:
        def write(undo: UndoLog) -> OutboxEntry:
            row = self.row(outbox_id)
            if outbox_rules.complete_row(row, attempt) is Verdict.REPEAT:
                return row
            return self.move_row(
                undo,
                row,
                status=outbox_rules.OUTBOX_COMPLETE.target,
                completed_at=self.engine.clock(),
                **_NO_CLAIM,
            )

        return await self.engine.write(write)

    async def _mark_failed(
        self, outbox_id: str, reason: str, retry_at: int | None, attempt: int | None
    ) -> OutboxEntry:
        def write(undo: UndoLog) -> OutboxEntry:
            row = self.row(outbox_id)
            if outbox_rules.fail_row(row, reason, retry_at, attempt) is Verdict.REPEAT:
                return row
            if retry_at is not None:
                return self.move_row(
                    undo,
                    row,
                    status=outbox_rules.OUTBOX_RETRY.target,
                    next_attempt_at=retry_at,
                    last_failure=reason,
                    **_NO_CLAIM,
                )
            return self.move_row(
                undo,
                row,
                status=outbox_rules.OUTBOX_FAIL.target,
                completed_at=self.engine.clock(),
                last_failure=reason,
                **_NO_CLAIM,
            )

        return await self.engine.write(write)

    async def _mark_outcome_unknown(
        self, outbox_id: str, remote_ref: str | None, check_at: int | None, attempt: int | None
    ) -> OutboxEntry:
        def write(undo: UndoLog) -> OutboxEntry:
            row = self.row(outbox_id)
            if outbox_rules.report_unknown(row, remote_ref, attempt) is Verdict.REPEAT:
                return row
            first = row.status is not outbox_rules.OUTBOX_REPORT_UNKNOWN.target
            return self.move_row(
                undo,
                row,
                status=outbox_rules.OUTBOX_REPORT_UNKNOWN.target,
                remote_ref=remote_ref if remote_ref is not None else row.remote_ref,
                next_attempt_at=check_at if first else row.next_attempt_at,
                **_NO_CLAIM,
            )

        return await self.engine.write(write)

    async def _unclaim(self, outbox_id: str, worker_id: str) -> OutboxEntry:
        def write(undo: UndoLog) -> OutboxEntry:
            row = self.row(outbox_id)
            outbox_rules.unclaim_row(row, worker_id)
            return self.move_row(
                undo,
                row,
                status=outbox_rules.OUTBOX_UNCLAIM.target,
                attempt_count=max(row.attempt_count - 1, 0),
                next_attempt_at=None,
                **_NO_CLAIM,
            )

        return await self.engine.write(write)

    async def _claim_reconciliations(
        self, now: int, limit: int, until: int
    ) -> tuple[OutboxEntry, ...]:
        def write(undo: UndoLog) -> tuple[OutboxEntry, ...]:
            rows = self.engine.t.outbox.values()
            due = [row for row in rows if outbox_rules.due_for_reconciliation(row, now)]
            due.sort(key=outbox_rules.by_enqueueing)
            return tuple(self.move_row(undo, row, next_attempt_at=until) for row in due[:limit])

        return await self.engine.write(write)

    async def _reschedule(self, outbox_id: str, at: int) -> OutboxEntry:
        def write(undo: UndoLog) -> OutboxEntry:
            row = self.row(outbox_id)
            outbox_rules.reschedule_row(row)
            target = outbox_rules.OUTBOX_RESCHEDULE.target
            return self.move_row(undo, row, status=target, next_attempt_at=at)

        return await self.engine.write(write)

    async def _release_expired_claims(self, claimed_before: int) -> int:
        def write(undo: UndoLog) -> int:
            t = self.engine.t
            rows = (t.outbox[outbox_id] for outbox_id in t.outbox_dispatching)
            stale = [row for row in rows if outbox_rules.claim_expired(row, claimed_before)]
            stale.sort(key=lambda r: (r.claim_taken_at or 0, r.outbox_id))
            for row in stale:
                began = row.dispatch_started_at is not None
                self.move_row(
                    undo,
                    row,
                    status=outbox_rules.OUTBOX_RELEASE.target,
                    next_attempt_at=None,
                    last_failure=OUTBOX_CLAIM_EXPIRED if began else row.last_failure,
                    **_NO_CLAIM,
                )
            return len(stale)

        return await self.engine.write(write)
