"""turnframe_store.sql: the SQL store (PostgreSQL through psycopg 3, SQLite embedded).

`SqlStores` is imported on first use, so `SqlConfig` alone loads no SQLAlchemy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from turnframe_store.sql.config import SqlConfig

if TYPE_CHECKING:
    from turnframe_store.sql.stores import SqlStores

__all__ = ["SqlConfig", "SqlStores"]


def __getattr__(name: str) -> Any:
    if name == "SqlStores":
        from turnframe_store.sql.stores import SqlStores

        return SqlStores
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
