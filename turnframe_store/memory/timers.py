"""The timers role in memory: timers by (account, timer id), by conversation, and the index of
the open (pending or claimed) ones a sweep reads."""

from __future__ import annotations

from typing import Any

from turnframe_store.errors import NotFound
from turnframe_store.memory.engine import MemoryRole
from turnframe_store.memory.state import UndoLog
from turnframe_store.records import TimerRecord
from turnframe_store.roles import rules
from turnframe_store.roles import timers as timer_rules
from turnframe_store.roles.rules import Verdict
from turnframe_store.roles.timers import TimerStore

__all__ = ["MemoryTimers"]


class MemoryTimers(MemoryRole, TimerStore):
    """The hooks of `TimerStore` on the engine's tables."""

    def timer(self, account_id: str, timer_id: str) -> TimerRecord:
        return rules.found(self.engine.t.timers.get((account_id, timer_id)))

    def move_timer(self, undo: UndoLog, row: TimerRecord, **changes: Any) -> TimerRecord:
        """Store the timer with `changes`, keeping the index of open timers."""
        t = self.engine.t
        key = (row.account_id, row.timer_id)
        moved = row.model_copy(update=changes)
        undo.put(t.timers, key, moved)
        if moved.status in timer_rules.OPEN_TIMERS:
            undo.put(t.timers_open, key, None)
        else:
            undo.remove(t.timers_open, key)
        return moved

    async def _get(self, account_id: str, timer_id: str) -> TimerRecord:
        return await self.engine.read(lambda: self.timer(account_id, timer_id))

    async def _for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[TimerRecord, ...]:
        def read() -> tuple[TimerRecord, ...]:
            t = self.engine.t
            ids = t.timers_by_conversation.get((account_id, conversation_id), ())
            rows = [t.timers[(account_id, timer_id)] for timer_id in ids]
            return tuple(sorted(rows, key=timer_rules.by_conversation_order))

        return await self.engine.read(read)

    async def _schedule(self, record: TimerRecord) -> TimerRecord:
        return await self.engine.write(lambda undo: self.schedule_in(undo, record))

    def schedule_in(self, undo: UndoLog, record: TimerRecord) -> TimerRecord:
        t = self.engine.t
        if (record.account_id, record.conversation_id) not in t.conversations:
            raise NotFound()
        key = (record.account_id, record.timer_id)
        stored = t.timers.get(key)
        if timer_rules.schedule_timer(stored, record) is Verdict.REPEAT:
            assert stored is not None
            return stored
        undo.put(t.timers, key, record)
        undo.index(t.timers_by_conversation, (record.account_id, record.conversation_id), key[1])
        undo.put(t.timers_open, key, None)
        return record

    async def _cancel(self, account_id: str, timer_id: str) -> TimerRecord:
        def write(undo: UndoLog) -> TimerRecord:
            row = self.timer(account_id, timer_id)
            if timer_rules.cancel_timer(row) is Verdict.REPEAT:
                return row
            return self.move_timer(undo, row, status=timer_rules.TIMER_CANCEL.target)

        return await self.engine.write(write)

    async def _claim_due(
        self, now: int, lease_ms: int, limit: int, worker_id: str
    ) -> tuple[TimerRecord, ...]:
        def write(undo: UndoLog) -> tuple[TimerRecord, ...]:
            t = self.engine.t
            rows = (t.timers[key] for key in t.timers_open)
            due = sorted(
                (row for row in rows if timer_rules.claimable(row, now, lease_ms)),
                key=timer_rules.by_due_time,
            )
            return tuple(
                self.move_timer(
                    undo,
                    row,
                    status=timer_rules.TIMER_CLAIM.target,
                    worker_id=worker_id,
                    claimed_at=now,
                )
                for row in due[:limit]
            )

        return await self.engine.write(write)

    async def _mark_fired(self, account_id: str, timer_id: str, worker_id: str) -> TimerRecord:
        def write(undo: UndoLog) -> TimerRecord:
            row = self.timer(account_id, timer_id)
            if timer_rules.fire_timer(row, worker_id) is Verdict.REPEAT:
                return row
            return self.move_timer(
                undo, row, status=timer_rules.TIMER_FIRE.target, fired_at=self.engine.clock()
            )

        return await self.engine.write(write)
