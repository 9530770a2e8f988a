"""Timers on SQL (internal). Each move is one compare-and-swap whose WHERE clause names the
statuses `roles.timers` lets that move leave; the sweep locks the rows it claims (FOR UPDATE SKIP
LOCKED on PostgreSQL; SQLite has one writer), so two claimers never take one timer."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnframe_store.errors import Conflict
from turnframe_store.records import TimerRecord, TimerStatus
from turnframe_store.roles import rules
from turnframe_store.roles import timers as timer_rules
from turnframe_store.roles.rules import Verdict
from turnframe_store.roles.timers import TimerStore
from turnframe_store.sql._backend import Result, Row, Statement
from turnframe_store.sql._core import SqlCore, Step
from turnframe_store.sql._statements import Compiler, among, bind, values_of

__all__ = ["SqlTimers", "TimerStatements"]


@dataclass(frozen=True)
class TimerStatements:
    timer_conversation: Statement
    timer_insert: Statement
    timer_get: Statement
    timers_of_conversation: Statement
    timer_claim: Statement
    timer_fire: Statement
    timer_cancel: Statement

    @classmethod
    def build(cls, sql: Compiler) -> TimerStatements:
        c = sql.compile
        timer = sql.tables["tf_timer"]
        conversation = sql.tables["tf_conversation"]
        account = bind("account_id")
        row_key = (timer.c.account_id == account, timer.c.timer_id == bind("timer_id"))
        when = timer.c.due_at.type
        now = bind("now", when)
        # `roles.timers.claimable`: pending and due, or claimed with the lease run out
        claimable = sa.or_(
            sa.and_(timer.c.status == TimerStatus.PENDING.value, timer.c.due_at <= now),
            sa.and_(
                timer.c.status == TimerStatus.CLAIMED.value,
                timer.c.claimed_at <= bind("claimed_before", when),
            ),
        )
        due = (
            sa.select(timer.c.account_id, timer.c.timer_id)
            .where(claimable)
            .order_by(timer.c.due_at, timer.c.account_id, timer.c.timer_id)
            .limit(bind("limit"))
            .with_for_update(skip_locked=True)
            .cte("due")
        )
        insert = sql.insert(timer).values(values_of(timer))
        return cls(
            timer_conversation=c(
                "timer_conversation",
                sa.select(conversation.c.conversation_id).where(
                    conversation.c.account_id == account,
                    conversation.c.conversation_id == bind("conversation_id"),
                ),
            ),
            # a stored id moves nothing: the read-back judges it (`roles.timers.schedule_timer`)
            timer_insert=c(
                "timer_insert",
                insert.on_conflict_do_nothing(
                    index_elements=[timer.c.account_id, timer.c.timer_id]
                ).returning(*timer.c),
            ),
            timer_get=c("timer_get", sa.select(timer).where(*row_key)),
            timers_of_conversation=c(
                "timers_of_conversation",
                sa.select(timer)
                .where(
                    timer.c.account_id == account,
                    timer.c.conversation_id == bind("conversation_id"),
                )
                .order_by(timer.c.due_at, timer.c.timer_id),
            ),
            timer_claim=c(
                "timer_claim",
                sa.update(timer)
                .where(
                    timer.c.account_id == due.c.account_id,
                    timer.c.timer_id == due.c.timer_id,
                    claimable,
                )
                .values(
                    status=timer_rules.TIMER_CLAIM.target.value,
                    worker_id=bind("worker_id"),
                    claimed_at=now,
                )
                .returning(*timer.c),
            ),
            timer_fire=c(
                "timer_fire",
                sa.update(timer)
                .where(
                    *row_key,
                    among(timer.c.status, timer_rules.TIMER_FIRE.sources),
                    timer.c.worker_id == bind("worker_id"),
                )
                .values(status=timer_rules.TIMER_FIRE.target.value, fired_at=now)
                .returning(*timer.c),
            ),
            timer_cancel=c(
                "timer_cancel",
                sa.update(timer)
                .where(*row_key, among(timer.c.status, timer_rules.TIMER_CANCEL.sources))
                .values(status=timer_rules.TIMER_CANCEL.target.value)
                .returning(*timer.c),
            ),
        )


class SqlTimers(TimerStore):
    def __init__(self, core: SqlCore) -> None:
        super().__init__(core.faults)
        self._core = core
        self._st = core.sql.statements(TimerStatements)

    # --- rows -----------------------------------------------------------------------------------

    def _timer(self, row: Row) -> TimerRecord:
        return self._core.codec.timer(row)

    def _timers(self, rows: Sequence[Row]) -> tuple[TimerRecord, ...]:
        return tuple(self._timer(row) for row in rows)

    # --- reads ----------------------------------------------------------------------------------

    async def _get(self, account_id: str, timer_id: str) -> TimerRecord:
        key = {"account_id": account_id, "timer_id": timer_id}
        return self._timer(await self._core.fetch_one(self._st.timer_get, key))

    async def _for_conversation(
        self, account_id: str, conversation_id: str
    ) -> tuple[TimerRecord, ...]:
        rows = await self._core.fetch(
            self._st.timers_of_conversation,
            {"account_id": account_id, "conversation_id": conversation_id},
        )
        return self._timers(rows)

    # --- writes ---------------------------------------------------------------------------------

    async def _schedule(self, record: TimerRecord) -> TimerRecord:
        """The conversation is judged first (`NotFound`; the insert then meets the foreign key),
        then the insert: a stored id inserts nothing and the read-back is judged."""

        async def conversation(result: Result | None, prior: Row | None) -> None:
            assert result is not None
            rules.found(result.rows[0] if result.rows else None)

        async def stored(result: Result | None, prior: Row | None) -> TimerRecord:
            assert result is not None
            if result.rows:
                return self._timer(result.rows[0])
            found = self._timer(rules.found(prior))
            if timer_rules.schedule_timer(found, record) is Verdict.REPEAT:
                return found
            raise Conflict("the timer moved under a concurrent writer")

        key = {"account_id": record.account_id, "timer_id": record.timer_id}
        params = self._core.codec.timer_params(record)
        where = {"account_id": record.account_id, "conversation_id": record.conversation_id}
        _, timer = await self._core.write(
            [
                Step(self._st.timer_conversation, where, conversation),
                Step(self._st.timer_insert, params, stored, self._st.timer_get, key),
            ]
        )
        return timer  # type: ignore[no-any-return]

    async def _move(
        self,
        statement: Statement,
        params: dict[str, Any],
        rule: Callable[[TimerRecord], Verdict],
    ) -> TimerRecord:
        key = {"account_id": params["account_id"], "timer_id": params["timer_id"]}
        step = self._core.cas(statement, params, self._st.timer_get, key, self._timer, rule)
        (row,) = await self._core.write([step])
        return row  # type: ignore[no-any-return]

    async def _cancel(self, account_id: str, timer_id: str) -> TimerRecord:
        return await self._move(
            self._st.timer_cancel,
            {"account_id": account_id, "timer_id": timer_id},
            timer_rules.cancel_timer,
        )

    async def _claim_due(
        self, now: int, lease_ms: int, limit: int, worker_id: str
    ) -> tuple[TimerRecord, ...]:
        time_in = self._core.backend.time_in
        params = {
            "now": time_in(now),
            # no claim is older than the epoch: a lease longer than `now` expires nothing
            "claimed_before": time_in(max(now - lease_ms, -1)),
            "limit": limit,
            "worker_id": worker_id,
        }
        (result,) = await self._core.write([Step(self._st.timer_claim, params)])
        return tuple(sorted(self._timers(result.rows), key=timer_rules.by_due_time))

    async def _mark_fired(self, account_id: str, timer_id: str, worker_id: str) -> TimerRecord:
        return await self._move(
            self._st.timer_fire,
            {
                "account_id": account_id,
                "timer_id": timer_id,
                "worker_id": worker_id,
                "now": self._core.now(),
            },
            lambda row: timer_rules.fire_timer(row, worker_id),
        )
