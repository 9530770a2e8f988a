"""Every statement the SQL store runs, as SQLAlchemy Core on the `tables.py` metadata, compiled
once per (dialect, schema) (internal).

Binds are named after the values they take. Writes are compare-and-swap: an UPDATE names the
lifecycle state it expects in its WHERE clause and returns the row it moved, so zero rows means
the precondition failed and nothing was written. Where the dialects differ (identity vs. an
assigned sequence, `= ANY(array)` vs. `json_each`, `FOR UPDATE SKIP LOCKED`), the difference is
chosen here and nowhere else.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.selectable import Select

from turnframe_store.sql._backend import Statement
from turnframe_store.sql.config import SCHEMA_NAME
from turnframe_store.sql.tables import OPEN_CARD_STATUSES, TERMINAL_PHASES, metadata

__all__ = ["EVENT_LOCK_CLASS", "Statements", "statements_for"]

#: The transaction-level advisory lock that makes event sequences follow commit order on
#: PostgreSQL (a reader paging by sequence then never skips a late-committing event) is the pair
#: (EVENT_LOCK_CLASS, hashtext(schema)): one per schema, since each schema has its own ledger and
#: sequence, so tenants (and test schemas) in one database do not serialise each other.
EVENT_LOCK_CLASS = 0x7466_6576  # "tfev"

_UNSETTLED = ("pending", "executing", "outcome_unknown")
_OPEN_OUTBOX = ("pending", "dispatching", "outcome_unknown")


def _p(name: str, type_: Any = None) -> sa.BindParameter[Any]:
    return sa.bindparam(name, type_=type_)


def _among(column: sa.ColumnElement[Any], values: Iterable[str]) -> sa.ColumnElement[bool]:
    """`column IN ('a', 'b')` with the (constant, internal) values inlined."""
    return column.in_([sa.literal_column(f"'{value}'") for value in values])


@functools.cache
def statements_for(dialect_name: str, schema: str | None) -> Statements:
    return Statements(dialect_name, schema)


class Statements:
    """The compiled statements of one dialect and schema."""

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
        t = {
            name: table.to_metadata(scoped, schema=schema)
            if schema is not None
            else table.to_metadata(scoped)
            for name, table in metadata.tables.items()
        }
        self._build(
            t["tf_conversation"],
            t["tf_turn"],
            t["tf_turn_phase"],
            t["tf_interaction"],
            t["tf_command_journal"],
            t["tf_domain_event"],
            t["tf_outbox"],
            t["tf_replay"],
        )

    # --- compiling ------------------------------------------------------------------------------

    def _compile(self, name: str, statement: sa.ClauseElement) -> Statement:
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

    def _insert(self, table: sa.Table) -> Any:
        return pg_insert(table) if self.postgres else sqlite_insert(table)

    def _any(self, column: sa.ColumnElement[Any], name: str) -> sa.ColumnElement[bool]:
        """`column` is one of the list bound to `name` (a list on PostgreSQL, JSON text on
        SQLite)."""
        if self.postgres:
            return column == sa.any_(_p(name, postgresql.ARRAY(sa.Text)))
        listed: Select[Any] = sa.select(sa.literal_column("value")).select_from(
            sa.func.json_each(_p(name))
        )
        return column.in_(listed.scalar_subquery())

    @staticmethod
    def _values(table: sa.Table, *skip: str) -> dict[str, Any]:
        return {c.name: _p(c.name, c.type) for c in table.columns if c.name not in skip}

    # --- building -------------------------------------------------------------------------------

    def _build(
        self,
        conversation: sa.Table,
        turn: sa.Table,
        phase: sa.Table,
        card: sa.Table,
        journal: sa.Table,
        event: sa.Table,
        outbox: sa.Table,
        replay: sa.Table,
    ) -> None:
        c = self._compile
        account = _p("account_id")

        # conversations, turns, phase markers
        self.conversation_insert = c(
            "conversation_insert",
            self._insert(conversation).values(self._values(conversation)).on_conflict_do_nothing(),
        )
        self.conversation_get = c(
            "conversation_get",
            sa.select(conversation).where(
                conversation.c.account_id == account,
                conversation.c.conversation_id == _p("conversation_id"),
            ),
        )
        self.turn_insert = c(
            "turn_insert", sa.insert(turn).values(self._values(turn, "assistant_turn"))
        )
        user_turn = (
            turn.c.account_id,
            turn.c.conversation_id,
            turn.c.turn_id,
            turn.c.received_at,
            turn.c.user_input,
        )
        self.turn_get = c(
            "turn_get",
            sa.select(*user_turn, turn.c.assistant_turn).where(
                turn.c.account_id == account, turn.c.turn_id == _p("turn_id")
            ),
        )
        self.turns_of_conversation = c(
            "turns_of_conversation",
            sa.select(*user_turn)
            .where(turn.c.account_id == account, turn.c.conversation_id == _p("conversation_id"))
            .order_by(turn.c.received_at, turn.c.turn_id),
        )
        self.turn_answer = c(
            "turn_answer",
            sa.update(turn)
            .where(
                turn.c.account_id == account,
                turn.c.turn_id == _p("turn_id"),
                turn.c.conversation_id == _p("conversation_id"),
                turn.c.assistant_turn.is_(None),
            )
            .values(assistant_turn=_p("assistant_turn"))
            .returning(turn.c.turn_id),
        )
        self.phase_insert = c("phase_insert", sa.insert(phase).values(self._values(phase)))
        self.phase_get = c(
            "phase_get",
            sa.select(phase).where(phase.c.account_id == account, phase.c.turn_id == _p("turn_id")),
        )
        self.phase_move = c(
            "phase_move",
            sa.update(phase)
            .where(
                phase.c.account_id == account,
                phase.c.turn_id == _p("turn_id"),
                ~_among(phase.c.phase, TERMINAL_PHASES),
                phase.c.phase != _p("phase"),
            )
            .values(phase=_p("phase"), updated_at=_p("updated_at", phase.c.updated_at.type))
            .returning(*phase.c),
        )
        self.phases_unfinished = c(
            "phases_unfinished",
            sa.select(phase)
            .where(~_among(phase.c.phase, TERMINAL_PHASES))
            .order_by(phase.c.updated_at, phase.c.account_id, phase.c.turn_id)
            .limit(_p("limit")),
        )

        # interactions
        card_key = (card.c.account_id == account, card.c.interaction_id == _p("interaction_id"))
        of_case = (
            card.c.account_id == account,
            card.c.workflow == _p("workflow"),
            card.c.case_id == _p("case_id"),
        )
        by_creation = (card.c.created_at, card.c.interaction_id)
        now = _p("now", card.c.resolved_at.type)
        self.card_insert = c(
            "card_insert",
            self._insert(card)
            .values(self._values(card))
            .on_conflict_do_nothing(index_elements=[card.c.account_id, card.c.interaction_id])
            .returning(card.c.interaction_id),
        )
        self.card_get = c("card_get", sa.select(card).where(*card_key))
        self.cards_open_in_conversation = c(
            "cards_open_in_conversation",
            sa.select(card)
            .where(
                card.c.account_id == account,
                card.c.conversation_id == _p("conversation_id"),
                _among(card.c.status, OPEN_CARD_STATUSES),
            )
            .order_by(*by_creation),
        )
        self.cards_of_case = c(
            "cards_of_case", sa.select(card).where(*of_case).order_by(*by_creation)
        )
        self.card_blocking_holder = c(
            "card_blocking_holder",
            sa.select(card).where(
                *of_case, card.c.blocking.is_(True), _among(card.c.status, OPEN_CARD_STATUSES)
            ),
        )
        self.card_claim = c(
            "card_claim",
            sa.update(card)
            .where(*card_key, card.c.status == "active")
            .values(status="resolving", resolved_option_id=_p("option_id"))
            .returning(*card.c),
        )
        resolving = (
            *card_key,
            card.c.status == "resolving",
            sa.or_(
                _p("option_id", sa.Text).is_(None),
                card.c.resolved_option_id == _p("option_id", sa.Text),
            ),
        )
        self.card_resolve = c(
            "card_resolve",
            sa.update(card)
            .where(*resolving)
            .values(status="resolved", resolved_at=now, resolution_event_ids=_p("event_ids"))
            .returning(*card.c),
        )
        self.card_fail = c(
            "card_fail",
            sa.update(card)
            .where(*resolving)
            .values(status="failed", resolved_at=now)
            .returning(*card.c),
        )
        self.card_release = c(
            "card_release",
            sa.update(card)
            .where(*resolving)
            .values(status="active", resolved_option_id=sa.null())
            .returning(*card.c),
        )
        self.card_close = c(
            "card_close",
            sa.update(card)
            .where(*card_key, card.c.status == "active")
            .values(
                status=_p("status"),
                resolved_at=now,
                resolved_option_id=_p("option_id"),
                resolution_event_ids="[]",
            )
            .returning(*card.c),
        )
        invalidated = (card.c.interaction_id, card.c.created_at)
        self.cards_invalidate_stale = c(
            "cards_invalidate_stale",
            sa.update(card)
            .where(
                *of_case,
                card.c.status == "active",
                card.c.revision_independent.is_(False),
                card.c.case_revision != _p("revision"),
            )
            .values(status="invalidated", resolved_at=now)
            .returning(*invalidated),
        )
        self.cards_invalidate_all = c(
            "cards_invalidate_all",
            sa.update(card)
            .where(*of_case, card.c.status == "active")
            .values(status="invalidated", resolved_at=now)
            .returning(*invalidated),
        )
        self.card_invalidate = c(
            "card_invalidate",
            sa.update(card)
            .where(*card_key, card.c.status == "active")
            .values(status="invalidated", resolved_at=now)
            .returning(*invalidated),
        )
        due_cards = (
            sa.select(card.c.account_id, card.c.interaction_id)
            .where(card.c.status == "active", card.c.expires_at <= now)
            .order_by(card.c.expires_at, card.c.account_id, card.c.interaction_id)
            .limit(_p("limit"))
            .with_for_update(skip_locked=True)
            .cte("due")
        )
        self.cards_expire = c(
            "cards_expire",
            sa.update(card)
            .where(
                card.c.account_id == due_cards.c.account_id,
                card.c.interaction_id == due_cards.c.interaction_id,
            )
            .values(status="expired", resolved_at=now)
            .returning(*card.c),
        )

        # command journal
        entry_key = (journal.c.account_id == account, journal.c.command_id == _p("command_id"))
        by_admission = (journal.c.created_at, journal.c.command_id)
        self.journal_insert = c(
            "journal_insert",
            self._insert(journal)
            .values(self._values(journal, "outcome", "completed_at"))
            .on_conflict_do_nothing()
            .returning(journal.c.command_id),
        )
        self.journal_get = c("journal_get", sa.select(journal).where(*entry_key))
        self.journal_get_by_key = c(
            "journal_get_by_key",
            sa.select(journal).where(
                journal.c.account_id == account,
                journal.c.idempotency_key == _p("idempotency_key"),
            ),
        )
        of_turn = (journal.c.account_id == account, journal.c.turn_id == _p("turn_id"))
        self.journal_of_turn = c(
            "journal_of_turn", sa.select(journal).where(*of_turn).order_by(*by_admission)
        )
        self.journal_unsettled_of_turn = c(
            "journal_unsettled_of_turn",
            sa.select(journal)
            .where(*of_turn, _among(journal.c.status, _UNSETTLED))
            .order_by(*by_admission),
        )
        self.journal_start = c(
            "journal_start",
            sa.update(journal)
            .where(*entry_key, _among(journal.c.status, ("pending", "awaiting_confirmation")))
            .values(status="executing")
            .returning(*journal.c),
        )
        settle_values = {
            "status": _p("status"),
            "outcome": _p("outcome"),
            "completed_at": _p("completed_at", journal.c.completed_at.type),
        }
        self.journal_settle = c(
            "journal_settle",
            sa.update(journal)
            .where(
                *entry_key,
                _among(
                    journal.c.status,
                    ("pending", "awaiting_confirmation", "executing", "outcome_unknown"),
                ),
            )
            .values(settle_values)
            .returning(*journal.c),
        )
        self.journal_settle_unknown = c(
            "journal_settle_unknown",
            sa.update(journal)
            .where(
                *entry_key,
                _among(journal.c.status, ("pending", "awaiting_confirmation", "executing")),
            )
            .values(settle_values)
            .returning(*journal.c),
        )

        # event ledger
        # The schema name is a validated identifier (SqlConfig); without one, the search path's.
        holder = (
            sa.literal_column(f"'{self.schema}'")
            if self.schema is not None
            else sa.func.current_schema()
        )
        lock = sa.func.pg_advisory_xact_lock(
            sa.literal_column(str(EVENT_LOCK_CLASS)), sa.func.hashtext(holder)
        )
        self.event_lock = (
            c("event_lock", sa.select(lock.label("locked"))) if self.postgres else None
        )
        event_values = self._values(event, "sequence")
        if not self.postgres:
            # One writer at a time: the next sequence is read inside the writing statement.
            event_values["sequence"] = sa.select(
                sa.func.coalesce(sa.func.max(event.c.sequence), sa.literal_column("0"))
                + sa.literal_column("1")
            ).scalar_subquery()
        self.event_insert = c(
            "event_insert", sa.insert(event).values(event_values).returning(event.c.sequence)
        )
        self.events_by_id = c(
            "events_by_id",
            sa.select(event)
            .where(event.c.account_id == account, self._any(event.c.event_id, "event_ids"))
            .order_by(event.c.sequence),
        )
        self.events_of_case = c(
            "events_of_case",
            sa.select(event)
            .where(
                event.c.account_id == account,
                event.c.workflow == _p("workflow"),
                event.c.case_id == _p("case_id"),
                event.c.case_revision > _p("since_revision"),
            )
            .order_by(event.c.sequence)
            .limit(_p("limit")),
        )
        self.events_after = c(
            "events_after",
            sa.select(event)
            .where(event.c.account_id == account, event.c.sequence > _p("after"))
            .order_by(event.c.sequence)
            .limit(_p("limit")),
        )

        # outbox
        row_key = outbox.c.outbox_id == _p("outbox_id")
        no_claim = {"claim_worker_id": sa.null(), "claim_taken_at": sa.null()}
        when = outbox.c.completed_at.type
        self.outbox_insert = c("outbox_insert", sa.insert(outbox).values(self._values(outbox)))
        self.outbox_get = c("outbox_get", sa.select(outbox).where(row_key))
        self.outbox_of_command = c(
            "outbox_of_command",
            sa.select(outbox)
            .where(outbox.c.command_id == _p("command_id"))
            .order_by(outbox.c.created_at, outbox.c.outbox_id),
        )
        claim_now = _p("now", when)
        due_rows = (
            sa.select(outbox.c.outbox_id)
            .where(
                outbox.c.status == "pending",
                sa.or_(outbox.c.next_attempt_at.is_(None), outbox.c.next_attempt_at <= claim_now),
            )
            .order_by(outbox.c.created_at, outbox.c.outbox_id)
            .limit(_p("limit"))
            .with_for_update(skip_locked=True)
            .cte("due")
        )
        self.outbox_claim = c(
            "outbox_claim",
            sa.update(outbox)
            .where(outbox.c.outbox_id == due_rows.c.outbox_id)
            .values(
                status="dispatching",
                attempt_count=outbox.c.attempt_count + 1,
                claim_worker_id=_p("worker_id"),
                claim_taken_at=claim_now,
            )
            .returning(*outbox.c),
        )
        self.outbox_complete = c(
            "outbox_complete",
            sa.update(outbox)
            .where(row_key, _among(outbox.c.status, ("dispatching", "outcome_unknown")))
            .values(status="completed", completed_at=_p("now", when), **no_claim)
            .returning(*outbox.c),
        )
        self.outbox_retry = c(
            "outbox_retry",
            sa.update(outbox)
            .where(row_key, _among(outbox.c.status, _OPEN_OUTBOX))
            .values(
                status="pending",
                next_attempt_at=_p("retry_at", when),
                last_failure=_p("reason"),
                **no_claim,
            )
            .returning(*outbox.c),
        )
        self.outbox_fail = c(
            "outbox_fail",
            sa.update(outbox)
            .where(row_key, _among(outbox.c.status, _OPEN_OUTBOX))
            .values(
                status="failed",
                completed_at=_p("now", when),
                last_failure=_p("reason"),
                **no_claim,
            )
            .returning(*outbox.c),
        )
        # dispatching -> outcome_unknown; or an unknown outcome without a remote reference
        # gets the one given (once). An unknown row holds no claim, so clearing it is a no-op.
        remote_ref = _p("remote_ref", sa.Text)
        self.outbox_unknown = c(
            "outbox_unknown",
            sa.update(outbox)
            .where(
                row_key,
                sa.or_(
                    outbox.c.status == "dispatching",
                    sa.and_(
                        outbox.c.status == "outcome_unknown",
                        outbox.c.remote_ref.is_(None),
                        remote_ref.is_not(None),
                    ),
                ),
            )
            .values(
                status="outcome_unknown",
                remote_ref=sa.func.coalesce(remote_ref, outbox.c.remote_ref),
                **no_claim,
            )
            .returning(*outbox.c),
        )
        self.outbox_reschedule = c(
            "outbox_reschedule",
            sa.update(outbox)
            .where(row_key, _among(outbox.c.status, ("pending", "outcome_unknown")))
            .values(status="pending", next_attempt_at=_p("at", when))
            .returning(*outbox.c),
        )
        self.outbox_release = c(
            "outbox_release",
            sa.update(outbox)
            .where(outbox.c.status == "dispatching", outbox.c.claim_taken_at < _p("before", when))
            .values(status="pending", next_attempt_at=sa.null(), **no_claim),
        )

        # replay records
        upsert = self._insert(replay).values(self._values(replay))
        self.replay_put = c(
            "replay_put",
            upsert.on_conflict_do_update(
                index_elements=[replay.c.account_id, replay.c.turn_id],
                set_={
                    "phase": upsert.excluded.phase,
                    "recorded_at": upsert.excluded.recorded_at,
                    "record": upsert.excluded.record,
                },
                where=sa.and_(
                    ~_among(replay.c.phase, TERMINAL_PHASES),
                    replay.c.conversation_id == upsert.excluded.conversation_id,
                ),
            ).returning(replay.c.turn_id),
        )
        self.replay_get = c(
            "replay_get",
            sa.select(replay.c.record).where(
                replay.c.account_id == account, replay.c.turn_id == _p("turn_id")
            ),
        )
        self.replay_get_by_token = c(
            "replay_get_by_token",
            sa.select(replay.c.record).where(
                replay.c.account_id == account, replay.c.replay_token == _p("replay_token")
            ),
        )
        self.replay_of_conversation = c(
            "replay_of_conversation",
            sa.select(replay.c.record)
            .where(
                replay.c.account_id == account,
                replay.c.conversation_id == _p("conversation_id"),
            )
            .order_by(replay.c.first_recorded_at, replay.c.turn_id),
        )
        self.replay_last_of_conversation = c(
            "replay_last_of_conversation",
            sa.select(replay.c.record)
            .where(
                replay.c.account_id == account,
                replay.c.conversation_id == _p("conversation_id"),
            )
            .order_by(replay.c.first_recorded_at.desc(), replay.c.turn_id.desc())
            .limit(1),
        )
