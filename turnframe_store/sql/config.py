"""`SqlConfig`: how `SqlStores` connects, pools and bounds its statements."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SCHEMA_NAME", "SqlConfig"]

#: A schema name the store accepts: a lowercase SQL identifier (quoted or not, it means the same).
SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


@dataclass(frozen=True)
class SqlConfig:
    """Connection settings; the defaults suit a service.

    - `pool_size` / `pool_min_size`: PostgreSQL connections at most / kept warm.
    - `acquire_timeout_s`: the wait for a pooled connection before the call fails `Unavailable`.
    - `statement_timeout_ms`: PostgreSQL cancels a statement running longer (the call fails
      `Timeout`: re-read, never retry blindly). It cancels statements, not transactions, so size
      it for the largest commit bundle. `None` keeps the server's setting.
    - `max_idle_s` / `max_lifetime_s`: a pooled connection is recycled after this long idle / alive.
    - `schema`: the PostgreSQL schema holding the `tf_*` tables (`None`: the search path, usually
      `public`). `migrate()` creates it. SQLite has no schemas.
    - `sqlite_busy_timeout_ms`: how long a SQLite writer waits for another process's write lock.
    - `read_only`: nothing can be written through these stores (see the field).
    - `lock_pool_size`: PostgreSQL connections that hold conversation locks at most (each
      running turn holds one for its whole length, model calls included: size it for the turns
      that run at once; they are opened as needed and closed when idle). Of a process's turns
      waiting for one conversation only the first holds one (it waits on the server for the
      advisory lock); the others queue within the process.
    """

    pool_size: int = 10
    pool_min_size: int = 1
    acquire_timeout_s: float = 5.0
    statement_timeout_ms: int | None = 5_000
    max_idle_s: float = 600.0
    max_lifetime_s: float = 1_800.0
    schema: str | None = None
    sqlite_busy_timeout_ms: int = 5_000
    lock_pool_size: int = 100
    #: open the database for reading only (an audit): SQLite opens the file read-only and sets
    #: no pragma that writes; PostgreSQL sessions default to read-only transactions. Any write
    #: then fails; the database is never changed, not even by a migration.
    read_only: bool = False

    def __post_init__(self) -> None:
        if self.pool_size < 1 or not 0 <= self.pool_min_size <= self.pool_size:
            raise ValueError("pool sizes need 0 <= pool_min_size <= pool_size and pool_size >= 1")
        if self.acquire_timeout_s <= 0:
            raise ValueError("acquire_timeout_s must be positive")
        if self.statement_timeout_ms is not None and self.statement_timeout_ms < 1:
            raise ValueError("statement_timeout_ms must be positive (or None)")
        if self.schema is not None and not SCHEMA_NAME.fullmatch(self.schema):
            raise ValueError("schema must be a lowercase SQL identifier")
        if self.lock_pool_size < 1:
            raise ValueError("lock_pool_size must be at least 1")
        if self.sqlite_busy_timeout_ms < 0:
            raise ValueError("sqlite_busy_timeout_ms cannot be negative")
