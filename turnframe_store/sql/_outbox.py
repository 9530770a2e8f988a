"""The outbox on SQL (internal). Each move is one compare-and-swap whose WHERE clause names the
statuses `roles` lets that move leave."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnframe_store.records import OUTBOX_CLAIM_EXPIRED, OutboxEntry, OutboxStatus
from turnframe_store.roles import outbox as outbox_rules
from turnframe_store.roles.outbox import OutboxStore
from turnframe_store.roles.rules import Verdict
from turnframe_store.sql._backend import Result, Row, Statement
from turnframe_store.sql._core import SqlCore, Step
from turnframe_store.sql._statements import Compiler, among, bind, values_of

__all__ = ["OutboxStatements", "SqlOutbox"]


@dataclass(frozen=True)
class OutboxStatements:
    outbox_insert: Statement
    outbox_get: Statement
    outbox_of_command: Statement
    outbox_claim: Statement
    outbox_complete: Statement
    outbox_retry: Statement
    outbox_fail: Statement
    outbox_unknown: Statement
    outbox_reschedule: Statement
    outbox_release: Statement
    outbox_unclaim: Statement
    outbox_reconcile: Statement
    outbox_open: Statement
    outbox_claimed: Statement
    outbox_begin: Statement

    @classmethod
    def build(cls, sql: Compiler) -> OutboxStatements:
        c = sql.compile
        outbox = sql.tables["tf_outbox"]
        row_key = outbox.c.outbox_id == bind("outbox_id")
        no_claim = {
            "claim_worker_id": sa.null(),
            "claim_taken_at": sa.null(),
            "dispatch_started_at": sa.null(),
        }
        # with an attempt given, the row must still be at it (`roles.outbox.same_attempt`)
        attempt = bind("attempt", sa.Integer)
        at_attempt = sa.or_(
            attempt.is_(None),
            sa.and_(
                outbox.c.attempt_count == attempt,
                among(outbox.c.status, {OutboxStatus.DISPATCHING, OutboxStatus.OUTCOME_UNKNOWN}),
            ),
        )
        when = outbox.c.completed_at.type
        now = bind("now", when)

        def move(step: outbox_rules.OutboxMove, *where: Any) -> Any:
            """An UPDATE of the rows in the move's source statuses (and `where`) to its target."""
            return (
                sa.update(outbox)
                .where(among(outbox.c.status, step.sources), *where)
                .values(status=step.target.value)
            )

        due_rows = (
            sa.select(outbox.c.outbox_id)
            .where(
                among(outbox.c.status, outbox_rules.OUTBOX_CLAIM.sources),
                sa.or_(outbox.c.next_attempt_at.is_(None), outbox.c.next_attempt_at <= now),
            )
            .order_by(outbox.c.created_at, outbox.c.outbox_id)
            .limit(bind("limit"))
            .with_for_update(skip_locked=True)
            .cte("due")
        )
        # An unknown outcome without a remote reference gets the one given (once): that repeat
        # moves too (`roles.outbox.report_unknown`). An unknown row holds no claim to clear.
        remote_ref = bind("remote_ref", sa.Text)
        unknown = outbox_rules.OUTBOX_REPORT_UNKNOWN
        reports = sa.or_(
            among(outbox.c.status, unknown.sources),
            sa.and_(
                outbox.c.status == unknown.target.value,
                outbox.c.remote_ref.is_(None),
                remote_ref.is_not(None),
            ),
        )
        reconcile = outbox_rules.OUTBOX_RECONCILE
        reconcilable = (
            sa.select(outbox.c.outbox_id)
            .where(
                among(outbox.c.status, reconcile.sources),
                sa.or_(outbox.c.next_attempt_at.is_(None), outbox.c.next_attempt_at <= now),
            )
            .order_by(outbox.c.created_at, outbox.c.outbox_id)
            .limit(bind("limit"))
            .with_for_update(skip_locked=True)
            .cte("reconcilable")
        )
        return cls(
            outbox_unclaim=c(
                "outbox_unclaim",
                move(
                    outbox_rules.OUTBOX_UNCLAIM,
                    row_key,
                    outbox.c.claim_worker_id == bind("worker_id"),
                )
                .values(
                    attempt_count=sa.case(
                        (outbox.c.attempt_count > 0, outbox.c.attempt_count - 1), else_=0
                    ),
                    next_attempt_at=sa.null(),
                    **no_claim,
                )
                .returning(*outbox.c),
            ),
            outbox_reconcile=c(
                "outbox_reconcile",
                sa.update(outbox)
                .where(outbox.c.outbox_id == reconcilable.c.outbox_id)
                .values(next_attempt_at=bind("until", when))
                .returning(*outbox.c),
            ),
            outbox_open=c(
                "outbox_open",
                sa.select(sa.func.count().label("open_rows")).where(
                    among(outbox.c.status, outbox_rules.OPEN_OUTBOX)
                ),
            ),
            outbox_claimed=c(
                "outbox_claimed",
                sa.select(sa.func.count().label("claimed_rows")).where(
                    outbox.c.status == OutboxStatus.DISPATCHING.value,
                    outbox.c.claim_worker_id == bind("worker_id"),
                ),
            ),
            outbox_insert=c("outbox_insert", sa.insert(outbox).values(values_of(outbox))),
            outbox_get=c("outbox_get", sa.select(outbox).where(row_key)),
            outbox_of_command=c(
                "outbox_of_command",
                sa.select(outbox)
                .where(outbox.c.command_id == bind("command_id"))
                .order_by(outbox.c.created_at, outbox.c.outbox_id),
            ),
            outbox_claim=c(
                "outbox_claim",
                sa.update(outbox)
                .where(outbox.c.outbox_id == due_rows.c.outbox_id)
                .values(
                    status=outbox_rules.OUTBOX_CLAIM.target.value,
                    attempt_count=outbox.c.attempt_count + 1,
                    claim_worker_id=bind("worker_id"),
                    claim_taken_at=now,
                )
                .returning(*outbox.c),
            ),
            outbox_complete=c(
                "outbox_complete",
                move(outbox_rules.OUTBOX_COMPLETE, row_key, at_attempt)
                .values(completed_at=now, **no_claim)
                .returning(*outbox.c),
            ),
            outbox_retry=c(
                "outbox_retry",
                move(outbox_rules.OUTBOX_RETRY, row_key, at_attempt)
                .values(
                    next_attempt_at=bind("retry_at", when), last_failure=bind("reason"), **no_claim
                )
                .returning(*outbox.c),
            ),
            outbox_fail=c(
                "outbox_fail",
                move(outbox_rules.OUTBOX_FAIL, row_key, at_attempt)
                .values(completed_at=now, last_failure=bind("reason"), **no_claim)
                .returning(*outbox.c),
            ),
            outbox_unknown=c(
                "outbox_unknown",
                sa.update(outbox)
                .where(row_key, reports, at_attempt)
                .values(
                    status=unknown.target.value,
                    remote_ref=sa.func.coalesce(remote_ref, outbox.c.remote_ref),
                    # the first report schedules reconciliation; a repeat keeps the schedule
                    next_attempt_at=sa.case(
                        (
                            outbox.c.status == unknown.target.value,
                            outbox.c.next_attempt_at,
                        ),
                        else_=bind("check_at", when),
                    ),
                    **no_claim,
                )
                .returning(*outbox.c),
            ),
            outbox_reschedule=c(
                "outbox_reschedule",
                move(outbox_rules.OUTBOX_RESCHEDULE, row_key)
                .values(next_attempt_at=bind("at", when))
                .returning(*outbox.c),
            ),
            outbox_release=c(
                "outbox_release",
                move(
                    outbox_rules.OUTBOX_RELEASE, outbox.c.claim_taken_at < bind("before", when)
                ).values(
                    next_attempt_at=sa.null(),
                    last_failure=sa.case(
                        (
                            outbox.c.dispatch_started_at.is_not(None),
                            sa.literal(OUTBOX_CLAIM_EXPIRED),
                        ),
                        else_=outbox.c.last_failure,
                    ),
                    **no_claim,
                ),
            ),
            outbox_begin=c(
                "outbox_begin",
                sa.update(outbox)
                .where(
                    row_key,
                    outbox.c.status == OutboxStatus.DISPATCHING.value,
                    outbox.c.attempt_count == bind("attempt", sa.Integer),
                    outbox.c.dispatch_started_at.is_(None),
                )
                .values(dispatch_started_at=now, claim_taken_at=now)
                .returning(*outbox.c),
            ),
        )


class SqlOutbox(OutboxStore):
    def __init__(self, core: SqlCore) -> None:
        super().__init__(core.faults)
        self._core = core
        self._st = core.sql.statements(OutboxStatements)

    async def _get(self, outbox_id: str) -> OutboxEntry:
        row = await self._core.fetch_one(self._st.outbox_get, {"outbox_id": outbox_id})
        return self._core.codec.outbox(row)

    async def _list_for_command(self, command_id: str) -> tuple[OutboxEntry, ...]:
        rows = await self._core.fetch(self._st.outbox_of_command, {"command_id": command_id})
        return self._core.codec.outbox_rows(rows)

    def enqueue_steps(self, entry: OutboxEntry) -> list[Step]:
        """The insert; a stored id or (destination, key) meets the table's unique keys."""

        async def judge(result: Result | None, prior: Row | None) -> OutboxEntry:
            return entry

        return [Step(self._st.outbox_insert, self._core.codec.outbox_params(entry), judge)]

    async def _enqueue(self, entry: OutboxEntry) -> OutboxEntry:
        (stored,) = await self._core.write(self.enqueue_steps(entry))
        return stored  # type: ignore[no-any-return]

    async def _claim_due(self, now: int, limit: int, worker_id: str) -> tuple[OutboxEntry, ...]:
        params = {"now": self._core.backend.time_in(now), "limit": limit, "worker_id": worker_id}
        (result,) = await self._core.write([Step(self._st.outbox_claim, params)])
        rows = self._core.codec.outbox_rows(result.rows)
        return tuple(sorted(rows, key=outbox_rules.by_enqueueing))

    async def _move(
        self,
        statement: Statement,
        params: dict[str, Any],
        rule: Callable[[OutboxEntry], Verdict],
    ) -> OutboxEntry:
        key = {"outbox_id": params["outbox_id"]}
        codec = self._core.codec
        step = self._core.cas(statement, params, self._st.outbox_get, key, codec.outbox, rule)
        (row,) = await self._core.write([step])
        return row  # type: ignore[no-any-return]

    async def _begin_dispatch(self, outbox_id: str, attempt: int, now: int) -> OutboxEntry:
        return await self._move(
            self._st.outbox_begin,
            {"outbox_id": outbox_id, "attempt": attempt, "now": self._core.backend.time_in(now)},
            lambda row: outbox_rules.begin_dispatch_row(row, attempt),
        )

    async def _mark_completed(self, outbox_id: str, attempt: int | None) -> OutboxEntry:
        return await self._move(
            self._st.outbox_complete,
            {"outbox_id": outbox_id, "now": self._core.now(), "attempt": attempt},
            lambda row: outbox_rules.complete_row(row, attempt),
        )

    async def _mark_failed(
        self, outbox_id: str, reason: str, retry_at: int | None, attempt: int | None
    ) -> OutboxEntry:
        params: dict[str, Any] = {"outbox_id": outbox_id, "reason": reason, "attempt": attempt}
        if retry_at is None:
            statement = self._st.outbox_fail
            params["now"] = self._core.now()
        else:
            statement = self._st.outbox_retry
            params["retry_at"] = self._core.backend.time_in(retry_at)
        return await self._move(
            statement, params, lambda row: outbox_rules.fail_row(row, reason, retry_at, attempt)
        )

    async def _mark_outcome_unknown(
        self, outbox_id: str, remote_ref: str | None, check_at: int | None, attempt: int | None
    ) -> OutboxEntry:
        check = None if check_at is None else self._core.backend.time_in(check_at)
        params = {
            "outbox_id": outbox_id,
            "remote_ref": remote_ref,
            "check_at": check,
            "attempt": attempt,
        }
        return await self._move(
            self._st.outbox_unknown,
            params,
            lambda row: outbox_rules.report_unknown(row, remote_ref, attempt),
        )

    async def _unclaim(self, outbox_id: str, worker_id: str) -> OutboxEntry:
        return await self._move(
            self._st.outbox_unclaim,
            {"outbox_id": outbox_id, "worker_id": worker_id},
            lambda row: outbox_rules.unclaim_row(row, worker_id),
        )

    async def _claim_reconciliations(
        self, now: int, limit: int, until: int
    ) -> tuple[OutboxEntry, ...]:
        time_in = self._core.backend.time_in
        params = {"now": time_in(now), "limit": limit, "until": time_in(until)}
        (result,) = await self._core.write([Step(self._st.outbox_reconcile, params)])
        rows = self._core.codec.outbox_rows(result.rows)
        return tuple(sorted(rows, key=outbox_rules.by_enqueueing))

    async def _pending_count(self) -> int:
        rows = await self._core.fetch(self._st.outbox_open, {})
        return int(rows[0]["open_rows"])

    async def _claimed_count(self, worker_id: str) -> int:
        rows = await self._core.fetch(self._st.outbox_claimed, {"worker_id": worker_id})
        return int(rows[0]["claimed_rows"])

    async def _reschedule(self, outbox_id: str, at: int) -> OutboxEntry:
        return await self._move(
            self._st.outbox_reschedule,
            {"outbox_id": outbox_id, "at": self._core.backend.time_in(at)},
            outbox_rules.reschedule_row,
        )

    async def _release_expired_claims(self, claimed_before: int) -> int:
        params = {"before": self._core.backend.time_in(claimed_before)}
        (result,) = await self._core.write([Step(self._st.outbox_release, params)])
        return int(result.rowcount)
