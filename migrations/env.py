"""Alembic environment for the tf_* tables (PostgreSQL and SQLite).

`SqlStores.migrate()` passes an open connection (and the PostgreSQL schema) through
`config.attributes`. From the command line, name the database with
`alembic -x url=postgresql+psycopg://… upgrade head` (or `TURNFRAME_DATABASE_URL`); an async
driver in the URL is swapped for its synchronous twin.
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import context
from sqlalchemy.pool import NullPool

from turnframe_store.sql._migrate import VERSION_TABLE
from turnframe_store.sql.tables import metadata
from turnframe_store.sql.url import sync_url

config = context.config


def _configure(connection: sa.Connection | None, url: sa.URL | None, schema: str | None) -> None:
    dialect = (
        connection.dialect.name
        if connection is not None
        else (url.get_backend_name() if url else "")
    )
    context.configure(
        connection=connection,
        url=url,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        version_table_schema=schema,
        render_as_batch=dialect == "sqlite",
        compare_type=True,
        literal_binds=connection is None,
    )


def _url() -> sa.URL:
    given = context.get_x_argument(as_dictionary=True).get("url") or os.environ.get(
        "TURNFRAME_DATABASE_URL"
    )
    if not given:
        raise SystemExit("name the database: alembic -x url=… (or TURNFRAME_DATABASE_URL)")
    return sync_url(given)


def run() -> None:
    connection = config.attributes.get("connection")
    schema = config.attributes.get("schema")
    if connection is not None:
        _configure(connection, None, schema)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = _url()
    if context.is_offline_mode():
        _configure(None, url, schema)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = sa.create_engine(url, poolclass=NullPool)
    with engine.connect() as opened:
        _configure(opened, None, schema)
        with context.begin_transaction():
            context.run_migrations()
        opened.commit()
    engine.dispose()


run()
