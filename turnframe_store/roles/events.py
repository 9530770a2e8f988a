"""The event ledger role: its contract and the judges its stores apply."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from turnframe_core.cases import CaseKey
from turnframe_core.events import DomainEvent
from turnframe_store.errors import Conflict, InvalidRecord, StoreError
from turnframe_store.faults import FaultPoint
from turnframe_store.records import (
    EventCursor,
    EventPage,
)
from turnframe_store.roles import rules
from turnframe_store.roles.rules import Role


def batch_problem(account_id: str, batch: Sequence[DomainEvent]) -> tuple[int, StoreError] | None:
    """The first event of a batch that breaks a rule on its own (another account, a sequence
    already set, an id twice in the batch), with its position. A stored id before it is
    reported first (`event_stored`): the events are judged in order."""
    seen: set[str] = set()
    for index, event in enumerate(batch):
        if event.account_id != account_id:
            return index, InvalidRecord("an event belongs to another account")
        if event.sequence is not None:
            return index, InvalidRecord("an event is appended without a sequence")
        if event.event_id in seen:
            return index, event_stored()
        seen.add(event.event_id)
    return None


def event_stored() -> Conflict:
    return Conflict("an event id is already in the ledger")


class EventLedgerReader(Role, ABC):
    """The reading half of the events role."""

    async def get_by_ids(
        self, account_id: str, event_ids: Sequence[str]
    ) -> tuple[DomainEvent, ...]:
        """The listed events, sorted by sequence, each once. Missing and foreign ids are simply
        absent (never `NotFound`)."""
        ids = tuple(dict.fromkeys(event_ids))
        rules.text(account_id, *ids)
        return await self._get_by_ids(account_id, ids)

    async def list_for_case(
        self, account_id: str, case_key: CaseKey, since_revision: int, limit: int
    ) -> tuple[DomainEvent, ...]:
        """The case's events with case_revision > since_revision, sorted by sequence, at most
        `limit` (a cap, not a page boundary: it may cut a revision in half)."""
        rules.text(account_id)
        rules.case(case_key)
        since = rules.whole(since_revision)
        return await self._list_for_case(account_id, case_key, since, rules.limit(limit))

    async def read_from(self, account_id: str, cursor: EventCursor, limit: int) -> EventPage:
        """The account's events after `cursor`, sorted by sequence, at most `limit`. Paging with
        `next_cursor` yields every event exactly once, even while the ledger grows."""
        rules.text(account_id)
        rules.whole(cursor.sequence)
        return await self._read_from(account_id, cursor, rules.limit(limit))

    @abstractmethod
    async def _get_by_ids(
        self, account_id: str, event_ids: tuple[str, ...]
    ) -> tuple[DomainEvent, ...]:
        """`event_ids` holds each id once."""

    @abstractmethod
    async def _list_for_case(
        self, account_id: str, case_key: CaseKey, since_revision: int, limit: int
    ) -> tuple[DomainEvent, ...]: ...

    @abstractmethod
    async def _read_from(self, account_id: str, cursor: EventCursor, limit: int) -> EventPage: ...


class EventLedgerWriter(Role, ABC):
    """The writing half of the events role."""

    async def append(
        self, account_id: str, events: Sequence[DomainEvent]
    ) -> tuple[DomainEvent, ...]:
        """Append in the given order; return the events with their sequences (unique and
        increasing store-wide, following commit order). Inside an open `Stores.transaction()` a
        store may return them without one (`None`: PostgreSQL assigns it at commit, decision
        0027). A duplicate event id (stored or within the batch) is `Conflict` with nothing
        appended."""
        batch = tuple(events)
        rules.text(account_id)
        for event in batch:
            rules.record_keys(event)
        appended = await self._append(account_id, batch)
        self._faults.reach(FaultPoint.AFTER_COMMIT_BEFORE_EVENT_READBACK)
        return appended

    @abstractmethod
    async def _append(
        self, account_id: str, events: tuple[DomainEvent, ...]
    ) -> tuple[DomainEvent, ...]:
        """Judge the batch with `batch_problem` and `event_stored`, then append."""


class EventLedger(EventLedgerReader, EventLedgerWriter):
    """The whole events role: what a store implements (the hooks above)."""
