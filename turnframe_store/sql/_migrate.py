"""Running the alembic migrations of the tf_* tables (internal).

The migration scripts live in the repository's top-level `migrations/` folder; a wheel ships the
same folder as `turnframe_store/_migrations` (see docs/decisions/0004-sql-store.md), and
`script_location()` finds whichever is there.

Two processes migrating together do not race: on PostgreSQL a session advisory lock serialises
them; on SQLite the migration runs inside `BEGIN IMMEDIATE`, so the second waits for the first's
commit and then finds nothing to do. Within one process a lock does the same (alembic keeps its
running state in module globals). The version table is `tf_alembic_version`, so an adopter's
own alembic history in the same database is never touched.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Final

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.util.exc import CommandError as AlembicError
from sqlalchemy.pool import NullPool, StaticPool

from turnframe_store.errors import StoreError, Unavailable
from turnframe_store.sql import errors
from turnframe_store.sql.config import SCHEMA_NAME
from turnframe_store.sql.url import parse_url, sync_url

__all__ = ["MIGRATION_LOCK_KEY", "VERSION_TABLE", "script_location", "upgrade"]

VERSION_TABLE: Final = "tf_alembic_version"
MIGRATION_LOCK_KEY: Final = 0x7466_6D69_6772_6174  # "tfmigrat"
_SQLITE_LOCK_WAIT_S: Final = 60.0
#: alembic keeps its running environment in module globals: one migration per process at a time.
_IN_PROCESS: Final = threading.Lock()


def script_location() -> Path:
    """The alembic script directory: packaged beside this package, else the source checkout's."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package / "_migrations", package.parent / "migrations"):
        if (candidate / "env.py").is_file():
            return candidate
    raise FileNotFoundError("the turnframe migration scripts are not installed")


def _config(connection: sa.Connection, schema: str | None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(script_location()))
    config.attributes["connection"] = connection
    config.attributes["schema"] = schema
    return config


def upgrade(url: str, schema: str | None = None) -> None:
    """Migrate the database at `url` to the newest revision (blocking; run it in a thread).

    A driver or alembic failure is raised as a store error (`turnframe_store.errors`): a
    database that cannot be reached is `Unavailable`, and so on."""
    dialect, target = parse_url(url)
    if schema is not None and not SCHEMA_NAME.fullmatch(schema):
        raise ValueError("schema must be a lowercase SQL identifier")
    postgres = dialect == "postgresql"
    try:
        with _IN_PROCESS:
            if postgres:
                _upgrade_postgres(url, schema)
            else:
                _upgrade_sqlite(target)
    except StoreError:
        raise
    except sa.exc.DBAPIError as exc:
        driver = exc.orig if isinstance(exc.orig, BaseException) else exc
        raise (errors.from_postgres(driver) if postgres else errors.from_sqlite(driver)) from None
    except sqlite3.Error as exc:
        raise errors.from_sqlite(exc) from None
    except (sa.exc.SQLAlchemyError, AlembicError) as exc:
        raise Unavailable(f"migrating the database failed ({type(exc).__name__})") from None
    except Exception as exc:
        if postgres and _is_psycopg_error(exc):
            raise errors.from_postgres(exc) from None
        raise


def _is_psycopg_error(exc: BaseException) -> bool:
    import psycopg  # a PostgreSQL URL means the postgres extra is installed

    return isinstance(exc, psycopg.Error)


def _upgrade_postgres(url: str, schema: str | None) -> None:
    engine = sa.create_engine(sync_url(url), poolclass=NullPool)
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))
            connection.commit()
            try:
                with connection.begin():
                    if schema is not None:
                        connection.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                        connection.exec_driver_sql(f'SET search_path TO "{schema}"')
                    command.upgrade(_config(connection, schema), "head")
            finally:
                connection.rollback()
                connection.exec_driver_sql("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))
                connection.commit()
    finally:
        engine.dispose()


def _upgrade_sqlite(path: str) -> None:
    raw = sqlite3.connect(path, isolation_level=None, timeout=_SQLITE_LOCK_WAIT_S)
    try:
        raw.execute("PRAGMA journal_mode = WAL")
        raw.execute("PRAGMA foreign_keys = ON")
        engine = sa.create_engine("sqlite://", creator=lambda: raw, poolclass=StaticPool)
        with engine.connect() as connection:
            # Taken after SQLAlchemy set the connection up (that commits); alembic then sees a
            # transaction already open and leaves it to us, so nothing commits, and nothing
            # gives the write lock away, before the version is stamped.
            raw.execute("BEGIN IMMEDIATE")
            with connection.begin():
                command.upgrade(_config(connection, None), "head")
        if raw.in_transaction:
            raw.commit()
    finally:
        if raw.in_transaction:
            raw.rollback()
        raw.close()
