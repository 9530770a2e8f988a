"""The closed error surface of every store method.

A store method raises only these (each with its stable code):

- `NotFound`: no such record for this account. A record of another account raises exactly the
  same error (same class, code and message), and the message never names the id.
- `Conflict`: a uniqueness or compare-and-swap precondition failed; nothing was written.
- `InvalidRecord` (a `Conflict`): the input itself is not acceptable; nothing was written.
- `Timeout`: the write may have landed. Re-read and resume by key; never blindly retry.
- `Unavailable`: the store could not be reached; nothing was written. Its `Busy` says a
  conversation's lock was not free in time (only `conversation_lock` raises it).
- `Corrupt`: stored data no longer reads back as what was written.

Reading an assistant turn written by another schema major raises the core's
`UnsupportedSchemaVersion` instead: the data is intact, this version cannot read it.
"""

from __future__ import annotations

from turnframe_core import codes
from turnframe_core.errors import TurnframeError

__all__ = [
    "Busy",
    "Conflict",
    "Corrupt",
    "ForeignEventLoop",
    "InvalidDatabaseUrl",
    "InvalidRecord",
    "MissingExtra",
    "MissingRole",
    "NotFound",
    "StoreError",
    "Timeout",
    "Unavailable",
]

_NOT_FOUND_MESSAGE = "record not found"


class StoreError(TurnframeError):
    """Base of the closed error surface; catch this to handle any store refusal."""

    code = codes.STORE_ERROR


class NotFound(StoreError):
    """Missing, or another account's: the two are indistinguishable by design."""

    code = codes.STORE_NOT_FOUND

    def __init__(self) -> None:
        super().__init__(_NOT_FOUND_MESSAGE)


class Conflict(StoreError):
    """A uniqueness or compare-and-swap precondition failed; nothing was written."""

    code = codes.STORE_CONFLICT


class InvalidRecord(Conflict):
    """The input breaks a record rule (a wrong status, account or limit); nothing written."""

    code = codes.STORE_INVALID_RECORD


class Timeout(StoreError):
    """The outcome is unknown: the write may have landed. Re-read; never blindly retry."""

    code = codes.STORE_TIMEOUT


class Unavailable(StoreError):
    """The store could not be reached; nothing was written."""

    code = codes.STORE_UNAVAILABLE


class Busy(Unavailable):
    """A conversation's lock was not free within the wait (`Stores.conversation_lock`); nothing
    was written."""

    code = codes.STORE_BUSY


class Corrupt(StoreError):
    """Stored data does not read back as what was written."""

    code = codes.STORE_CORRUPT


class MissingRole(TurnframeError):
    """A `Stores` bundle was built without one of its roles (a wiring error, not a store error)."""

    code = codes.STORE_MISSING_ROLE

    def __init__(self, role: str, detail: str = "is missing") -> None:
        super().__init__(f"store role {role!r} {detail}")
        self.role = role


class NoSnapshot(TurnframeError, NotImplementedError):
    """Transactional stores that offer no `snapshot()`: reads as of one moment cannot be had, so
    an audit refuses rather than report a break that is only its reading."""

    code = codes.STORE_NO_SNAPSHOT


# --- wiring errors of the SQL store: how it was set up, never what a call found -----------------


class MissingExtra(TurnframeError, ImportError):
    """A backend needs an optional extra that is not installed (`pip install 'turnframe[…]'`)."""

    code = codes.STORE_MISSING_EXTRA

    def __init__(self, backend: str, extra: str) -> None:
        super().__init__(f"{backend} needs the {extra} extra: pip install 'turnframe[{extra}]'")
        self.extra = extra


class InvalidDatabaseUrl(TurnframeError, ValueError):
    """A database URL names no database this store can open (its scheme, or its SQLite path)."""

    code = codes.STORE_INVALID_DATABASE_URL


class ForeignEventLoop(TurnframeError, RuntimeError):
    """`SqlStores` were called from an event loop other than the one that connected them: their
    pool, connections and locks belong to that loop. Connect one `SqlStores` per event loop."""

    code = codes.STORE_FOREIGN_EVENT_LOOP

    def __init__(self) -> None:
        super().__init__(
            "these SqlStores were connected on another event loop, which owns their connections "
            "and locks; connect one SqlStores per event loop (per thread)"
        )
