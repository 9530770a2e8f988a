"""The event ledger role in memory: events by id, by account (in sequence) and by case."""

from __future__ import annotations

import bisect
from functools import partial

from turnframe_core.cases import CaseKey
from turnframe_core.events import DomainEvent
from turnframe_store.memory.engine import MemoryRole
from turnframe_store.memory.state import UndoLog
from turnframe_store.records import EventCursor, EventPage
from turnframe_store.roles import events as event_rules
from turnframe_store.roles.events import EventLedger

__all__ = ["MemoryEvents"]


def _sequence(event: DomainEvent) -> int:
    return event.sequence or 0


class MemoryEvents(MemoryRole, EventLedger):
    """The hooks of `EventLedger` on the engine's tables; `append_in` is the write a commit
    bundle applies on its own undo log."""

    async def _get_by_ids(
        self, account_id: str, event_ids: tuple[str, ...]
    ) -> tuple[DomainEvent, ...]:
        def read() -> tuple[DomainEvent, ...]:
            events = self.engine.t.events
            found = (events.get((account_id, event_id)) for event_id in event_ids)
            return tuple(sorted((e for e in found if e is not None), key=_sequence))

        return await self.engine.read(read)

    async def _list_for_case(
        self, account_id: str, case_key: CaseKey, since_revision: int, limit: int
    ) -> tuple[DomainEvent, ...]:
        def read() -> tuple[DomainEvent, ...]:
            case = (account_id, case_key.workflow, case_key.case_id)
            found: list[DomainEvent] = []
            for event in self.engine.t.events_by_case.get(case, ()):
                if event.case_revision > since_revision:
                    found.append(event)
                    if len(found) == limit:
                        break
            return tuple(found)

        return await self.engine.read(read)

    async def _read_from(self, account_id: str, cursor: EventCursor, limit: int) -> EventPage:
        def read() -> EventPage:
            stream = self.engine.t.events_by_account.get(account_id, [])
            start = bisect.bisect_right(stream, cursor.sequence, key=_sequence)
            page = tuple(stream[start : start + limit])
            next_cursor = EventCursor(sequence=_sequence(page[-1])) if page else cursor
            return EventPage(events=page, next_cursor=next_cursor)

        return await self.engine.read(read)

    async def _append(
        self, account_id: str, events: tuple[DomainEvent, ...]
    ) -> tuple[DomainEvent, ...]:
        return await self.engine.write(lambda undo: self.append_in(undo, account_id, events))

    def append_in(
        self, undo: UndoLog, account_id: str, events: tuple[DomainEvent, ...]
    ) -> tuple[DomainEvent, ...]:
        t = self.engine.t
        problem = event_rules.batch_problem(account_id, events)
        judged = events if problem is None else events[: problem[0]]
        if any((account_id, event.event_id) in t.events for event in judged):
            raise event_rules.event_stored()
        if problem is not None:
            raise problem[1]
        appended: list[DomainEvent] = []
        previous = sequence = t.last_sequence
        for event in events:
            sequence += 1
            stored = event.model_copy(update={"sequence": sequence})
            undo.put(t.events, (account_id, event.event_id), stored)
            undo.index(t.events_by_account, account_id, stored)
            undo.index(t.events_by_case, (account_id, event.workflow, event.case_id), stored)
            appended.append(stored)
        t.last_sequence = sequence
        undo.step(partial(setattr, t, "last_sequence", previous))
        return tuple(appended)
