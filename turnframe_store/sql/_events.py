"""The event ledger on SQL (internal).

Event sequences follow commit order on PostgreSQL (an advisory transaction lock is taken before
events are inserted), so paging by sequence never skips a late-committing event.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnframe_core.cases import CaseKey
from turnframe_core.events import DomainEvent
from turnframe_store.errors import InvalidRecord
from turnframe_store.records import EventCursor, EventPage
from turnframe_store.roles import events as event_rules
from turnframe_store.roles.events import EventLedger
from turnframe_store.sql._backend import Result, Row, Statement
from turnframe_store.sql._core import SqlCore, Step
from turnframe_store.sql._rows import event_id_list
from turnframe_store.sql._statements import Compiler, bind

__all__ = ["EventStatements", "SqlEvents"]


@dataclass(frozen=True)
class EventStatements:
    #: PostgreSQL only: taken before the first event a transaction writes.
    event_lock: Statement | None
    event_insert: Statement
    events_by_id: Statement
    events_of_case: Statement
    events_after: Statement

    @classmethod
    def build(cls, sql: Compiler) -> EventStatements:
        c = sql.compile
        event = sql.tables["tf_domain_event"]
        account = bind("account_id")
        return cls(
            event_lock=sql.event_lock(),
            event_insert=c(
                "event_insert",
                sa.insert(event).values(sql.event_values(event)).returning(*event.c),
            ),
            events_by_id=c(
                "events_by_id",
                sa.select(event)
                .where(event.c.account_id == account, sql.any_of(event.c.event_id, "event_ids"))
                .order_by(event.c.sequence),
            ),
            events_of_case=c(
                "events_of_case",
                sa.select(event)
                .where(
                    event.c.account_id == account,
                    event.c.workflow == bind("workflow"),
                    event.c.case_id == bind("case_id"),
                    event.c.case_revision > bind("since_revision"),
                )
                .order_by(event.c.sequence)
                .limit(bind("limit")),
            ),
            events_after=c(
                "events_after",
                sa.select(event)
                .where(event.c.account_id == account, event.c.sequence > bind("after"))
                .order_by(event.c.sequence)
                .limit(bind("limit")),
            ),
        )


class SqlEvents(EventLedger):
    def __init__(self, core: SqlCore) -> None:
        super().__init__(core.faults)
        self._core = core
        self._st = core.sql.statements(EventStatements)

    def append_steps(self, events: Sequence[DomainEvent]) -> list[Step]:
        """The inserts of a judged batch; each step's value is the event as the ledger stored
        it (returned by the insert itself, its sequence assigned)."""
        steps: list[Step] = []
        if self._st.event_lock is not None:
            steps.append(Step(self._st.event_lock))
        decode = self._core.codec.event

        async def sequence(result: Result | None, prior: Row | None) -> DomainEvent:
            assert result is not None
            return decode(result.rows[0])

        codec = self._core.codec
        steps.extend(
            Step(self._st.event_insert, codec.event_params(event), sequence) for event in events
        )
        return steps

    @staticmethod
    def stored(values: Iterable[Any]) -> tuple[DomainEvent, ...]:
        """The events among a write's step values, as the ledger stored them."""
        return tuple(value for value in values if isinstance(value, DomainEvent))

    async def _append(
        self, account_id: str, events: tuple[DomainEvent, ...]
    ) -> tuple[DomainEvent, ...]:
        """`roles.events.batch_problem`, reported after any stored id before it (memory's order); a
        stored id otherwise meets the primary key."""
        problem = event_rules.batch_problem(account_id, events)
        if problem is not None:
            index, error = problem
            judged = tuple(event.event_id for event in events[:index])
            if isinstance(error, InvalidRecord) and await self._get_by_ids(account_id, judged):
                raise event_rules.event_stored()
            raise error
        if not events:
            return ()
        values = await self._core.write(self.append_steps(events))
        return self.stored(values)

    async def _get_by_ids(
        self, account_id: str, event_ids: tuple[str, ...]
    ) -> tuple[DomainEvent, ...]:
        if not event_ids:
            return ()
        listed = list(event_ids) if self._core.sql.postgres else event_id_list(event_ids)
        rows = await self._core.fetch(
            self._st.events_by_id, {"account_id": account_id, "event_ids": listed}
        )
        return self._core.codec.events(rows)

    async def _list_for_case(
        self, account_id: str, case_key: CaseKey, since_revision: int, limit: int
    ) -> tuple[DomainEvent, ...]:
        params = {
            "account_id": account_id,
            "workflow": case_key.workflow,
            "case_id": case_key.case_id,
            "since_revision": since_revision,
            "limit": limit,
        }
        return self._core.codec.events(await self._core.fetch(self._st.events_of_case, params))

    async def _read_from(self, account_id: str, cursor: EventCursor, limit: int) -> EventPage:
        params = {"account_id": account_id, "after": cursor.sequence, "limit": limit}
        page = self._core.codec.events(await self._core.fetch(self._st.events_after, params))
        next_cursor = EventCursor(sequence=page[-1].sequence or 0) if page else cursor
        return EventPage(events=page, next_cursor=next_cursor)
