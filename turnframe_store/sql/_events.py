"""The event ledger on SQL (internal).

Event sequences follow commit order on PostgreSQL, so paging by sequence never skips a
late-committing event. The order is assigned at commit (decision 0027): an event is inserted
with a provisional, negative sequence (drawn from the ledger's identity, so unique, and never
visible outside its transaction), and the transaction's last pipeline takes the per-schema event
lock, gives each of its events its sequence (`SET sequence = DEFAULT`, in append order) and
commits. The lock is held only while the server runs that pipeline: a transaction that stays
open (a turn composing its reply) holds no lock another one waits on, and one whose COMMIT comes
later takes its sequences later. Inside the open transaction its own events read back without
a sequence (`None`); the stored event, sequence and all, is what a read after the commit
returns (and what an autonomous write returns).

A caller's own transaction (`commit_in`) commits without us: there the lock is taken before the
inserts, which take their sequence at once, and it is held until the caller commits. SQLite has
one writer: the insert takes the next sequence itself.
"""

from __future__ import annotations

import dataclasses
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
from turnframe_store.sql._statements import Compiler, bind, values_of

__all__ = ["EventStatements", "SqlEvents"]


#: Added to an identity value to make a provisional sequence: negative, unique, and increasing
#: in append order (so a transaction's own events read back in order inside it).
PROVISIONAL_OFFSET = 1 << 62


@dataclass(frozen=True)
class EventStatements:
    #: PostgreSQL only: the per-schema event lock, taken at commit (or, enlisted, before the
    #: first event a transaction writes).
    event_lock: Statement | None
    #: takes its sequence at once (SQLite; PostgreSQL enlisted, behind the lock)
    event_insert: Statement
    #: PostgreSQL: a provisional sequence, its order given at commit by `event_order`
    event_insert_unordered: Statement | None
    event_order: Statement | None
    events_by_id: Statement
    events_of_case: Statement
    events_after: Statement

    @classmethod
    def build(cls, sql: Compiler) -> EventStatements:
        c = sql.compile
        event = sql.tables["tf_domain_event"]
        account = bind("account_id")
        unordered = order = None
        if sql.postgres:
            table = f"{sql.schema}.tf_domain_event" if sql.schema else "tf_domain_event"
            drawn = sa.func.nextval(
                sa.func.pg_get_serial_sequence(
                    sa.literal_column(f"'{table}'"), sa.literal_column("'sequence'")
                )
            )
            provisional = {
                **values_of(event, "sequence"),
                "sequence": drawn - sa.literal_column(str(PROVISIONAL_OFFSET)),
            }
            compiled = c(
                "event_insert_unordered",
                sa.insert(event).values(provisional).returning(*event.c),
            )
            # an identity GENERATED ALWAYS takes a value of ours only when told so
            overriding = compiled.sql.replace(") VALUES (", ") OVERRIDING SYSTEM VALUE VALUES (", 1)
            assert overriding != compiled.sql
            unordered = dataclasses.replace(compiled, sql=overriding)
            order = c(
                "event_order",
                sa.update(event)
                .where(
                    event.c.account_id == account,
                    event.c.event_id == bind("event_id"),
                    event.c.sequence < sa.literal_column("0"),
                )
                .values(sequence=sa.literal_column("DEFAULT"))
                .returning(*event.c),
            )
        return cls(
            event_lock=sql.event_lock(),
            event_insert=c(
                "event_insert",
                sa.insert(event).values(sql.event_values(event)).returning(*event.c),
            ),
            event_insert_unordered=unordered,
            event_order=order,
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

    def append_steps(
        self, events: Sequence[DomainEvent], ordered: dict[str, DomainEvent] | None
    ) -> list[Step]:
        """The inserts of a judged batch; each step's value is the event as the ledger stored
        it (returned by the insert itself). With `ordered` (PostgreSQL, a transaction of ours)
        its sequence is given at commit, and `ordered` then holds each event as committed, by
        id; until then the step's value has no sequence. Without it (SQLite, or a caller's
        transaction) the insert assigns the sequence, behind the lock on PostgreSQL."""
        decode = self._core.codec.event
        codec = self._core.codec

        async def inserted(result: Result | None, prior: Row | None) -> DomainEvent:
            assert result is not None
            return decode(result.rows[0])

        st = self._st
        if ordered is None or st.event_insert_unordered is None or st.event_order is None:
            steps: list[Step] = []
            if st.event_lock is not None:
                steps.append(Step(st.event_lock))
            steps.extend(
                Step(st.event_insert, codec.event_params(event), inserted) for event in events
            )
            return steps
        assert st.event_lock is not None
        sink = ordered

        def receive(result: Result) -> None:
            if result.rows:
                event = decode(result.rows[0])
                sink[event.event_id] = event

        order = st.event_order
        return [
            Step(
                st.event_insert_unordered,
                codec.event_params(event),
                inserted,
                at_commit=(
                    st.event_lock,
                    [
                        (
                            order,
                            {"account_id": event.account_id, "event_id": event.event_id},
                            receive,
                        )
                    ],
                ),
            )
            for event in events
        ]

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
        ordered: dict[str, DomainEvent] = {}
        values = await self._core.write(self.append_steps(events, ordered))
        return self.committed(self.stored(values), ordered)

    @staticmethod
    def committed(
        stored: tuple[DomainEvent, ...], ordered: dict[str, DomainEvent]
    ) -> tuple[DomainEvent, ...]:
        """The events as committed, where their commit gave them a sequence already (a write of
        its own); inside an open transaction, as inserted (no sequence yet)."""
        if not ordered:
            return stored
        return tuple(ordered.get(event.event_id, event) for event in stored)

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
