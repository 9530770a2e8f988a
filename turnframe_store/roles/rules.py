"""What every role checks of its arguments, and how a judge answers (internal to the roles and
the stores that implement them; the bounds are public from `turnframe_store`).

A judge looks at the stored record and the request and answers `Verdict.MOVE` (write it) or
`Verdict.REPEAT` (the same settlement again: accepted, nothing written), or raises the store
error (nothing written).
"""

from __future__ import annotations

from enum import Enum
from typing import Final, TypeVar

from turnframe_core.cases import CaseKey, CaseRef
from turnframe_core.events import DomainEvent
from turnframe_core.interactions import Interaction
from turnframe_core.replay import TurnPhase
from turnframe_store.errors import InvalidRecord, NotFound
from turnframe_store.faults import FaultPlan
from turnframe_store.records import (
    CaseInvalidation,
    JournalEntry,
    OutboxEntry,
)


class Role:
    """What every role object holds: the fault plan its public methods fire (decision 0002)."""

    def __init__(self, faults: FaultPlan) -> None:
        self._faults = faults


T = TypeVar("T")


class Verdict(Enum):
    """What a judge allows: the move, or an accepted repeat that writes nothing."""

    MOVE = "move"
    REPEAT = "repeat"


def found(record: T | None) -> T:
    """The record, or `NotFound` (a missing record and another account's look alike)."""
    if record is None:
        raise NotFound()
    return record


#: The most records one call may ask for. A larger page is a caller's bug; backends would meet it
#: as an integer overflow, each in its own way.
MAX_LIMIT: Final = 100_000


#: The last millisecond a store keeps, 9999-12-31T23:59:59.999Z: Python's `datetime`, and with it
#: the PostgreSQL backend, ends there.
MAX_MILLIS: Final = 253_402_300_799_999


#: Revisions and event sequences are 64-bit signed integers in every store.
MAX_INTEGER: Final = 2**63 - 1


def bounded(value: object, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidRecord(f"{what} is a whole number from {low} to {high}")
    return value


def limit(value: object) -> int:
    """A page size: an int (never a bool) from 1 to `MAX_LIMIT`."""
    return bounded(value, 1, MAX_LIMIT, "a limit")


def instant(value: object) -> int:
    """A time argument: integer milliseconds from the epoch to `MAX_MILLIS`."""
    return bounded(value, 0, MAX_MILLIS, "a time")


def whole(value: object) -> int:
    """A revision or a sequence: an int (never a bool) from 0 to `MAX_INTEGER`."""
    return bounded(value, 0, MAX_INTEGER, "a revision or sequence")


def after_sequence(value: object) -> int:
    """Where a read of a stream resumes: an int (never a bool) from -1 to `MAX_INTEGER`."""
    return bounded(value, -1, MAX_INTEGER, "a sequence to read after")


def text(*values: str | None) -> None:
    """Each id or key is text every store can keep and compare: a str with no NUL (PostgreSQL
    refuses it) and no lone surrogate (no UTF-8 encoder takes one). None (an absent optional
    value) passes."""
    for value in values:
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidRecord("an id or key is a string")
        if "\x00" in value or not (value.isascii() or encodes(value)):
            raise InvalidRecord("an id or key holds a NUL or a lone surrogate")


def encodes(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def case(key: CaseKey | CaseRef | CaseInvalidation) -> None:
    """A case's workflow and id follow `text` (read as fields: a record built without
    validation may hold what a `CaseKey` refuses)."""
    text(key.workflow, key.case_id)


def record_keys(record: Interaction | JournalEntry | DomainEvent | OutboxEntry) -> None:
    """The free-text keys a record brings into columns of their own (case ids, types,
    destinations) follow `text`; prefixed ids cannot break it."""
    if isinstance(record, Interaction):
        case(record.case_ref)
    elif isinstance(record, JournalEntry):
        case(record.case_ref)
        text(record.command_type)
    elif isinstance(record, DomainEvent):
        text(record.workflow, record.case_id, record.event_type)
    else:
        text(
            record.destination,
            record.idempotency_key,
            record.claim_worker_id,
            record.last_failure,
            record.remote_ref,
        )


def turn_phase(value: str) -> TurnPhase:
    try:
        return TurnPhase(value)
    except ValueError:
        raise InvalidRecord("not a turn phase") from None


def worker(worker_id: str) -> None:
    text(worker_id)
    if not worker_id:
        raise InvalidRecord("a claim names its worker")


def reason(value: str) -> None:
    text(value)
    if not value:
        raise InvalidRecord("a failure names its reason")
