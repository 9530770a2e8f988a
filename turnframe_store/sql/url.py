"""Database URLs `SqlStores` accepts (internal)."""

from __future__ import annotations

from typing import Final

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from turnframe_store.errors import InvalidDatabaseUrl

__all__ = ["parse_url", "sync_url"]

_POSTGRES: Final = ("postgresql", "postgresql+psycopg", "postgres")
_SQLITE: Final = ("sqlite", "sqlite+aiosqlite", "sqlite+pysqlite")


def _url(url: str) -> URL:
    try:
        return make_url(url)
    except ArgumentError:
        raise InvalidDatabaseUrl("not a database URL") from None


def parse_url(url: str) -> tuple[str, str]:
    """(dialect, what the driver connects to): a libpq URI for PostgreSQL, a file path for SQLite
    (empty: in memory)."""
    parsed = _url(url)
    if parsed.drivername in _POSTGRES:
        return "postgresql", parsed.set(drivername="postgresql").render_as_string(
            hide_password=False
        )
    if parsed.drivername in _SQLITE:
        return "sqlite", parsed.database or ""
    raise InvalidDatabaseUrl(
        f"unsupported database URL scheme {parsed.drivername!r}: use postgresql+psycopg:// "
        "or sqlite+aiosqlite://"
    )


def sync_url(url: str) -> URL:
    """The same database for SQLAlchemy's synchronous drivers (what alembic runs on)."""
    dialect, _ = parse_url(url)
    parsed = _url(url)
    return parsed.set(drivername="postgresql+psycopg" if dialect == "postgresql" else "sqlite")
