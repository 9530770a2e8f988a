"""The turns' stream logs on SQL (internal).

An append is two statements in one batch (one round trip, in a bundle's pipeline too): a read
of the turn (`NotFound` without it) and of its logged rows around the batch, then one INSERT of
every row of the batch (a JSON array of them, unpacked by the database), skipping a sequence
logged already and returning the sequences it wrote. The judge then holds the batch to
`turn_rules.stream_append` on what the read saw, and the INSERT must have written exactly the new
ones; either failing is `Conflict`, and the transaction, the rows it wrote with it, is undone.
A concurrent appender that logged a sequence first leaves it unwritten here: `Conflict` too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from turnframe_store.errors import Conflict, NotFound
from turnframe_store.roles import conversations as turn_rules
from turnframe_store.roles.conversations import StreamEntry
from turnframe_store.sql._backend import Result, Row, Statement
from turnframe_store.sql._core import SqlCore, Step, Then
from turnframe_store.sql._statements import Compiler, among, bind

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
            stream_insert=c("stream_insert", _insert_rows(sql, log)),
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
                    among(marker.c.phase, turn_rules.TERMINAL_PHASES),
                )
                .order_by(log.c.at, log.c.account_id, log.c.turn_id)
                .limit(bind("limit"))
                .with_for_update(of=log, skip_locked=True),
            ),
            stream_delete=c("stream_delete", sa.delete(log).where(*of_turn)),
        )


def _insert_rows(sql: Compiler, log: sa.Table) -> Any:
    """INSERT the rows of the JSON array `rows` (sequence, event_type, terminal, at, event) for
    `account_id` and `turn_id`, skipping sequences logged already; RETURNING those written."""
    names = ("sequence", "event_type", "terminal", "at", "event")
    types: dict[str, Any] = {
        "sequence": sa.BigInteger,
        "event_type": sa.Text,
        "terminal": sa.Boolean,
        "at": sa.BigInteger,
        "event": sa.Text,
    }
    columns: list[Any]
    if sql.postgres:
        unpacked = (
            sa.func.jsonb_to_recordset(sa.cast(bind("rows", sa.Text), JSONB))
            .table_valued(*(sa.column(n, types[n]) for n in names))
            .render_derived(name="r", with_types=True)
        )
        columns = [unpacked.c[n] for n in names]
        source = sa.select(bind("account_id"), bind("turn_id"), *columns).select_from(unpacked)
    else:
        each = sa.func.json_each(bind("rows", sa.Text)).table_valued("value")
        columns = [sa.cast(sa.func.json_extract(each.c.value, f"$.{n}"), types[n]) for n in names]
        # The WHERE keeps SQLite from reading ON CONFLICT as a join's ON.
        source = (
            sa.select(bind("account_id"), bind("turn_id"), *columns)
            .select_from(each)
            .where(sa.true())
        )
    insert = pg_insert(log) if sql.postgres else sqlite_insert(log)
    return (
        insert.from_select(["account_id", "turn_id", *names], source)
        .on_conflict_do_nothing()
        .returning(log.c.sequence)
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


class StreamLog:
    """The stream log's steps and reads, for the conversations role and the commit bundle."""

    def __init__(self, core: SqlCore) -> None:
        self._core = core
        self._st = core.sql.statements(StreamStatements)

    def append_steps(self, account_id: str, entries: tuple[StreamEntry, ...]) -> list[Step]:
        turn_id = entries[0].turn_id
        low, high = turn_rules.stream_window(entries)
        params = {"account_id": account_id, "turn_id": turn_id, "low": low, "high": high}
        rows = json.dumps(
            [
                {
                    "sequence": e.sequence,
                    "event_type": e.event_type,
                    "terminal": e.terminal,
                    "at": e.at,
                    "event": e.text,
                }
                for e in entries
            ],
            ensure_ascii=False,
        )
        logged: list[StreamEntry] = []

        async def judge_read(result: Result | None, prior: Row | None) -> None:
            assert result is not None
            if not result.rows:
                raise NotFound()
            logged.extend(_entry(row) for row in result.rows if row["sequence"] is not None)

        async def judge_insert(result: Result | None, prior: Row | None) -> None:
            assert result is not None
            known = turn_rules.stream_append(entries, logged)
            written = sorted(int(row["sequence"]) for row in result.rows)
            if written != [entry.sequence for entry in entries[known:]]:
                raise Conflict("a concurrent writer logged part of this stream")

        insert = {"account_id": account_id, "turn_id": turn_id, "rows": rows}
        return [
            Step(self._st.stream_window, params, judge_read),
            Step(self._st.stream_insert, insert, judge_insert),
        ]

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
