"""Driver errors mapped onto the store's closed error surface (`turnframe_store.errors`).

- A uniqueness violation is `Conflict`; a missing parent row (foreign key) is `NotFound`; a check or
  data error is `InvalidRecord`. The statement failed, so nothing of its transaction is written.
- A cancelled statement (PostgreSQL `statement_timeout`) is `Timeout`: the caller re-reads.
- A transport or server failure before COMMIT is `Unavailable` (nothing was written); the same
  failure while COMMIT is in flight is `Timeout` (it may have landed).
- A missing table means the schema was never migrated: `Unavailable`, naming `migrate()`.

Messages name the failure class, never a value (values may be user data or another account's).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from turnframe_store.errors import (
    Conflict,
    InvalidRecord,
    NotFound,
    StoreError,
    Timeout,
    Unavailable,
)

if TYPE_CHECKING:
    import psycopg

__all__ = ["from_postgres", "from_sqlite"]

_NOT_MIGRATED = "the store's tables are missing: run `await stores.migrate()`"


def from_postgres(error: BaseException, *, committing: bool = False) -> StoreError:
    """The store error for a psycopg (or pool) failure; `committing` while COMMIT is in flight."""
    import psycopg  # only a PostgreSQL backend calls this, and it has psycopg
    import psycopg.errors as pg
    from psycopg_pool import PoolTimeout

    if isinstance(error, StoreError):
        return error
    if isinstance(error, PoolTimeout):
        return Unavailable("no database connection became free in time")
    if isinstance(error, pg.UniqueViolation | pg.ExclusionViolation):
        return Conflict(f"a unique key is already taken ({_constraint(error)})")
    if isinstance(error, pg.ForeignKeyViolation):
        return NotFound()
    if isinstance(error, pg.IntegrityError | pg.DataError):
        return InvalidRecord(f"the database refused the record ({_constraint(error)})")
    if isinstance(error, pg.QueryCanceled):
        return Timeout("a statement ran past the statement timeout")
    if isinstance(error, pg.UndefinedTable | pg.InvalidSchemaName):
        return Unavailable(_NOT_MIGRATED)
    if isinstance(error, pg.SerializationFailure | pg.DeadlockDetected | pg.LockNotAvailable):
        return Unavailable("a concurrent transaction got in the way; nothing was written")
    if committing and isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
        return Timeout("the connection was lost while committing; the write may have landed")
    if isinstance(error, psycopg.Error):
        return Unavailable(f"the database failed ({type(error).__name__})")
    return Unavailable(f"the database call failed ({type(error).__name__})")


def from_sqlite(error: BaseException, *, committing: bool = False) -> StoreError:
    """The store error for a sqlite3 failure; `committing` while COMMIT is in flight."""
    if isinstance(error, StoreError):
        return error
    message = str(error)
    if isinstance(error, sqlite3.IntegrityError):
        if message.startswith("UNIQUE constraint failed"):
            return Conflict("a unique key is already taken")
        if message.startswith("FOREIGN KEY constraint failed"):
            return NotFound()
        return InvalidRecord("the database refused the record")
    if committing:
        return Timeout("committing failed; the write may have landed")
    if isinstance(error, sqlite3.OperationalError) and message.startswith("no such table"):
        return Unavailable(_NOT_MIGRATED)
    if isinstance(error, sqlite3.OperationalError) and "locked" in message:
        return Unavailable("another writer held the database past the busy timeout")
    return Unavailable(f"the database failed ({type(error).__name__})")


def _constraint(error: psycopg.Error) -> str:
    name = error.diag.constraint_name if error.diag is not None else None
    return name or type(error).__name__
