"""turnframe_store.sql: the SQL store (PostgreSQL through psycopg 3, SQLite embedded)."""

from turnframe_store.sql.config import SqlConfig
from turnframe_store.sql.stores import SqlStores

__all__ = ["SqlConfig", "SqlStores"]
