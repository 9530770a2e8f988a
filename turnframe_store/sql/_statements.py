"""How the SQL store compiles its statements (internal).

Each role keeps its statements in a frozen dataclass of its own (`ConversationStatements` in
`_conversations.py`, …), written as SQLAlchemy Core on the `tables.py` metadata. A `Compiler`
(one per dialect and schema) builds each of them once and compiles every statement in it.

Binds are named after the values they take. Writes are compare-and-swap: an UPDATE names the
lifecycle state it expects in its WHERE clause (the status sets come from `roles`) and returns
the row it moved, so zero rows means the precondition failed and nothing was written. Where the
dialects differ (identity vs. an assigned sequence, the event lock, `= ANY(array)` vs.
`json_each`), the difference is chosen here and nowhere else.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from enum import StrEnum
from typing import Any, Protocol, TypeVar, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.selectable import Select

from turnframe_store.sql._backend import Statement
from turnframe_store.sql.config import SCHEMA_NAME
from turnframe_store.sql.tables import metadata

__all__ = ["EVENT_LOCK_CLASS", "Compiler", "among", "bind", "compiler_for", "values_of"]

#: The transaction-level advisory lock that makes event sequences follow commit order on
#: PostgreSQL (a reader paging by sequence then never skips a late-committing event) is the pair
#: (EVENT_LOCK_CLASS, hashtext(schema)): one per schema, since each schema has its own ledger and
#: sequence, so tenants (and test schemas) in one database do not serialise each other.
EVENT_LOCK_CLASS = 0x7466_6576  # "tfev"

S = TypeVar("S", bound="_Built")


class _Built(Protocol):
    @classmethod
    def build(cls: type[S], sql: Compiler) -> S: ...


def bind(name: str, type_: Any = None) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=type_)


def among(column: sa.ColumnElement[Any], values: Iterable[StrEnum]) -> sa.ColumnElement[bool]:
    """`column IN ('a', 'b')`, or `column = 'a'` for one value (the form a partial index
    names), with the (constant, internal) status values inlined in sorted order."""
    inlined: list[sa.ColumnElement[Any]] = [
        sa.literal_column(f"'{value.value}'") for value in sorted(values)
    ]
    return column == inlined[0] if len(inlined) == 1 else column.in_(inlined)


@functools.cache
def compiler_for(dialect_name: str, schema: str | None) -> Compiler:
    return Compiler(dialect_name, schema)


class Compiler:
    """The tables of one dialect and schema, and every statement compiled for them."""

    def __init__(self, dialect_name: str, schema: str | None) -> None:
        if schema is not None and not SCHEMA_NAME.fullmatch(schema):
            raise ValueError("schema must be a lowercase SQL identifier")
        if dialect_name == "postgresql":
            self.dialect: Dialect = postgresql.psycopg.dialect()  # type: ignore[no-untyped-call]
        elif dialect_name == "sqlite":
            self.dialect = sqlite.pysqlite.dialect(paramstyle="named")
        else:
            raise ValueError(f"no statements for the {dialect_name} dialect")
        self.postgres = dialect_name == "postgresql"
        self.schema = schema
        scoped = sa.MetaData()
        self.tables = {
            name: table.to_metadata(scoped, schema=schema)
            if schema is not None
            else table.to_metadata(scoped)
            for name, table in metadata.tables.items()
        }
        self._built: dict[type[Any], Any] = {}

    def statements(self, kind: type[S]) -> S:
        """One role's statements, built and compiled once for this dialect and schema."""
        built = self._built.get(kind)
        if built is None:
            built = self._built[kind] = kind.build(self)
        return cast(S, built)

    def compile(self, name: str, statement: sa.ClauseElement) -> Statement:
        compiled = cast(SQLCompiler, statement.compile(dialect=self.dialect))
        if isinstance(statement, Select):
            columns = tuple(str(column.key) for column in statement.selected_columns)
        elif isinstance(statement, sa.Insert | sa.Update):
            columns = tuple(str(column.key) for column in statement.exported_columns)
        else:
            columns = ()
        # Values the statement itself carries (literals the compiler turned into binds).
        defaults = {
            key: compiled.params[key]
            for key, bind in compiled.binds.items()
            if not bind.required and key in compiled.params
        }
        return Statement(name, compiled.string, columns, defaults)

    # --- where the dialects differ --------------------------------------------------------------

    def insert(self, table: sa.Table) -> Any:
        """An INSERT that can take ON CONFLICT clauses."""
        return pg_insert(table) if self.postgres else sqlite_insert(table)

    def any_of(self, column: sa.ColumnElement[Any], name: str) -> sa.ColumnElement[bool]:
        """`column` is one of the list bound to `name` (a list on PostgreSQL, JSON text on
        SQLite)."""
        if self.postgres:
            return column == sa.any_(bind(name, postgresql.ARRAY(sa.Text)))
        listed: Select[Any] = sa.select(sa.literal_column("value")).select_from(
            sa.func.json_each(bind(name))
        )
        return column.in_(listed.scalar_subquery())

    def event_lock(self) -> Statement | None:
        """PostgreSQL: the advisory lock an event-writing transaction takes before its first
        event; SQLite has a single writer and needs none."""
        if not self.postgres:
            return None
        # The schema name is a validated identifier (SqlConfig); without one, the search path's.
        holder = (
            sa.literal_column(f"'{self.schema}'")
            if self.schema is not None
            else sa.func.current_schema()
        )
        lock = sa.func.pg_advisory_xact_lock(
            sa.literal_column(str(EVENT_LOCK_CLASS)), sa.func.hashtext(holder)
        )
        return self.compile("event_lock", sa.select(lock.label("locked")))

    def event_values(self, event: sa.Table) -> dict[str, Any]:
        """An event row's values: PostgreSQL's identity assigns the sequence; on SQLite the one
        writer reads the next sequence inside the writing statement."""
        values = values_of(event, "sequence")
        if not self.postgres:
            values["sequence"] = sa.select(
                sa.func.coalesce(sa.func.max(event.c.sequence), sa.literal_column("0"))
                + sa.literal_column("1")
            ).scalar_subquery()
        return values


def values_of(table: sa.Table, *skip: str) -> dict[str, Any]:
    """A bind named after each column (its type attached), except `skip`."""
    return {c.name: bind(c.name, c.type) for c in table.columns if c.name not in skip}
