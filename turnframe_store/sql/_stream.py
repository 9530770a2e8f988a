"""The turns' stream logs on SQL (internal).

An append reads the turn (`NotFound` without it) and its logged rows around the batch in one
statement, judges them with `_rules.stream_append`, then inserts the new rows in one statement
run once per row, in the same transaction. Two appenders racing for one sequence meet the
primary key: the later one gets `Conflict`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnframe_store import _rules as rules
from turnframe_store._rules import StreamEntry
from turnframe_store.errors import NotFound
from turnframe_store.sql._backend import Result, Row, Statement
from turnframe_store.sql._core import SqlCore, Step, Then
from turnframe_store.sql._statements import Compiler, among, bind, values_of

__all__ = ["StreamLog", "StreamStatements"]


@dataclass(frozen=True)
class StreamStatements:
    stream_window: Statement
    stream_insert: Statement
    stream_after: Statement
    stream_tail: Statement
    stream_finished: Statement
    stream_delete: Statement

    @classmethod
    def build(cls, sql: Compiler) -> StreamStatements:
        c = sql.compile
        turn = sql.tables["tf_turn"]
        log = sql.tables["tf_stream_event"]
        marker = sql.tables["tf_turn_phase"]
        account = bind("account_id")
        of_turn = (log.c.account_id == account, log.c.turn_id == bind("turn_id"))
        window = sa.and_(
            log.c.account_id == turn.c.account_id,
            log.c.turn_id == turn.c.turn_id,
            log.c.sequence >= bind("low", sa.BigInteger),
            log.c.sequence <= bind("high", sa.BigInteger),
        )
        return cls(
            stream_window=c(
                "stream_window",
                sa.select(
                    turn.c.turn_id,
                    log.c.sequence,
                    log.c.event_type,
                    log.c.terminal,
                    log.c.at,
                    log.c.event,
                )
                .select_from(turn.outerjoin(log, window))
                .where(turn.c.account_id == account, turn.c.turn_id == bind("turn_id"))
                .order_by(log.c.sequence),
            ),
            stream_insert=c("stream_insert", sa.insert(log).values(values_of(log))),
            stream_after=c(
                "stream_after",
                sa.select(log.c.event)
                .where(*of_turn, log.c.sequence > bind("after", sa.BigInteger))
                .order_by(log.c.sequence)
                .limit(bind("limit")),
            ),
            stream_tail=c(
                "stream_tail",
                sa.select(log.c.event).where(*of_turn).order_by(log.c.sequence.desc()).limit(1),
            ),
            # The terminal rows serve the sweep (a partial index); a concurrent sweep skips the
            # logs this one holds.
            stream_finished=c(
                "stream_finished",
                sa.select(log.c.account_id, log.c.turn_id)
                .join(
                    marker,
                    sa.and_(
                        marker.c.account_id == log.c.account_id,
                        marker.c.turn_id == log.c.turn_id,
                    ),
                )
                .where(
                    log.c.terminal,
                    log.c.at < bind("finished_before", sa.BigInteger),
                    among(marker.c.phase, rules.TERMINAL_PHASES),
                )
                .order_by(log.c.at, log.c.account_id, log.c.turn_id)
                .limit(bind("limit"))
                .with_for_update(of=log, skip_locked=True),
            ),
            stream_delete=c("stream_delete", sa.delete(log).where(*of_turn)),
        )


def _entry(row: Row) -> StreamEntry:
    return StreamEntry(
        turn_id=str(row["turn_id"]),
        sequence=int(row["sequence"]),
        event_type=str(row["event_type"]),
        terminal=bool(row["terminal"]),
        at=int(row["at"]),
        text=str(row["event"]),
    )


def _row(account_id: str, entry: StreamEntry) -> dict[str, Any]:
    return {
        "account_id": account_id,
        "turn_id": entry.turn_id,
        "sequence": entry.sequence,
        "event_type": entry.event_type,
        "terminal": entry.terminal,
        "at": entry.at,
        "event": entry.text,
    }


class StreamLog:
    """The stream log's steps and reads, for the conversations role and the commit bundle."""

    def __init__(self, core: SqlCore) -> None:
        self._core = core
        self._st = core.sql.statements(StreamStatements)

    def append_steps(self, account_id: str, entries: tuple[StreamEntry, ...]) -> list[Step]:
        low, high = rules.stream_window(entries)
        params = {"account_id": account_id, "turn_id": entries[0].turn_id, "low": low, "high": high}

        async def judge(result: Result | None, prior: Row | None) -> Then:
            assert result is not None
            if not result.rows:
                raise NotFound()
            logged = [_entry(row) for row in result.rows if row["sequence"] is not None]
            known = rules.stream_append(entries, logged)
            rows = [_row(account_id, entry) for entry in entries[known:]]
            return Then(self._st.stream_insert, rows)

        return [Step(self._st.stream_window, params, judge)]

    async def append(self, account_id: str, entries: tuple[StreamEntry, ...]) -> None:
        await self._core.write(self.append_steps(account_id, entries))

    async def events(
        self, account_id: str, turn_id: str, after_sequence: int, limit: int
    ) -> tuple[str, ...]:
        params = {
            "account_id": account_id,
            "turn_id": turn_id,
            "after": after_sequence,
            "limit": limit,
        }
        rows = await self._core.fetch(self._st.stream_after, params)
        return tuple(str(row["event"]) for row in rows)

    async def tail(self, account_id: str, turn_id: str) -> str | None:
        rows = await self._core.fetch(
            self._st.stream_tail, {"account_id": account_id, "turn_id": turn_id}
        )
        return str(rows[0]["event"]) if rows else None

    async def prune(self, finished_before: int, limit: int) -> int:
        async def judge(result: Result | None, prior: Row | None) -> Then:
            assert result is not None
            return Then(self._st.stream_delete, list(result.rows), len(result.rows))

        params = {"finished_before": finished_before, "limit": limit}
        (pruned,) = await self._core.write([Step(self._st.stream_finished, params, judge)])
        return pruned  # type: ignore[no-any-return]
