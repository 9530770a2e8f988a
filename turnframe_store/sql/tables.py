"""The `tf_*` tables as SQLModel table models; `metadata` is what alembic migrates against.

Conventions (DESIGN §6, docs/decisions/0004-sql-store.md):

- Ids are TEXT (our ids are prefixed strings, not uuids).
- Times are `timestamptz` on PostgreSQL and integer milliseconds (BIGINT) on SQLite, which has no
  time type; records carry integer milliseconds either way.
- Documents (user input, assistant turn, card, journal entry, outcome, event payload, replay
  record) are canonical JSON TEXT: written once and read back byte for byte. The columns beside a
  document are the lifecycle fields that move and the keys the indexes need; a read overlays the
  lifecycle columns on the document.
- Partial indexes name their status sets as `roles` derives them (the text must stay what the
  migrations created).
- `account_id` leads every primary and unique key except the outbox's (a system queue). The
  operator sweeps (unfinished turns, due cards, ended stream logs) have their own cross-account
  indexes.
- The statements live in `_statements.py` as SQLAlchemy Core on these tables, never through the
  ORM unit of work.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

from turnframe_core.interactions import InteractionStatus
from turnframe_store.records import TimerStatus
from turnframe_store.roles import conversations as turn_rules
from turnframe_store.roles import interactions as card_rules
from turnframe_store.roles import outbox as outbox_rules
from turnframe_store.roles import timers as timer_rules

__all__ = [
    "TfCommandJournal",
    "TfConversation",
    "TfDomainEvent",
    "TfInteraction",
    "TfOutbox",
    "TfReplay",
    "TfStreamEvent",
    "TfTimer",
    "TfTurn",
    "TfTurnPhase",
    "Timestamp",
    "metadata",
]

#: `timestamptz` on PostgreSQL; integer milliseconds since the epoch on SQLite.
Timestamp: Final = sa.DateTime(timezone=True).with_variant(sa.BigInteger(), "sqlite")


def _where(clause: str) -> dict[str, Any]:
    """A partial index's predicate, the same on both dialects."""
    return {"postgresql_where": sa.text(clause), "sqlite_where": sa.text(clause)}


def _among(column: str, values: Iterable[StrEnum], *, negated: bool = False) -> str:
    """The predicate text for `column` in the status set `values` (from `roles`)."""
    listed = sorted(value.value for value in values)
    if len(listed) == 1:
        return f"{column} {'!=' if negated else '='} '{listed[0]}'"
    quoted = ", ".join(f"'{value}'" for value in listed)
    return f"{column} {'NOT IN' if negated else 'IN'} ({quoted})"


_EXPIRABLE: Final = _among("status", card_rules.card_sources(InteractionStatus.EXPIRED))

_tf_registry = registry(metadata=sa.MetaData())


class _TfModel(SQLModel, registry=_tf_registry):
    """Base of the tf_* models: their own metadata, apart from an adopter's SQLModel tables."""


def _text(*, primary_key: bool = False, nullable: bool = False) -> Any:
    return Field(sa_type=sa.Text, primary_key=primary_key, nullable=nullable)


def _time(*, nullable: bool = False) -> Any:
    return Field(sa_type=Timestamp, nullable=nullable)


class TfConversation(_TfModel, table=True):
    __tablename__ = "tf_conversation"
    __table_args__ = (
        sa.PrimaryKeyConstraint("account_id", "conversation_id", name="tf_conversation_pkey"),
    )

    account_id: str = _text(primary_key=True)
    conversation_id: str = _text(primary_key=True)
    created_at: datetime = _time()


class TfTurn(_TfModel, table=True):
    """The user turn as received and, once the turn is final, the assistant turn as returned."""

    __tablename__ = "tf_turn"
    __table_args__ = (
        sa.PrimaryKeyConstraint("account_id", "turn_id", name="tf_turn_pkey"),
        sa.ForeignKeyConstraint(
            ["account_id", "conversation_id"],
            ["tf_conversation.account_id", "tf_conversation.conversation_id"],
            name="tf_turn_conversation_fk",
            ondelete="CASCADE",
        ),
        sa.Index(
            "tf_turn_by_conversation", "account_id", "conversation_id", "received_at", "turn_id"
        ),
    )

    account_id: str = _text(primary_key=True)
    turn_id: str = _text(primary_key=True)
    conversation_id: str = _text()
    received_at: datetime = _time()
    user_input: str = _text()
    assistant_turn: str | None = _text(nullable=True)


class TfTurnPhase(_TfModel, table=True):
    """One marker per turn, moved as the turn advances; recovery reads only this table."""

    __tablename__ = "tf_turn_phase"
    __table_args__ = (
        sa.PrimaryKeyConstraint("account_id", "turn_id", name="tf_turn_phase_pkey"),
        sa.ForeignKeyConstraint(
            ["account_id", "turn_id"],
            ["tf_turn.account_id", "tf_turn.turn_id"],
            name="tf_turn_phase_turn_fk",
            ondelete="CASCADE",
        ),
        sa.Index(
            "tf_turn_phase_unfinished",
            "updated_at",
            "account_id",
            "turn_id",
            **_where(_among("phase", turn_rules.TERMINAL_PHASES, negated=True)),
        ),
    )

    account_id: str = _text(primary_key=True)
    turn_id: str = _text(primary_key=True)
    conversation_id: str = _text()
    phase: str = _text()
    updated_at: datetime = _time()


class TfInteraction(_TfModel, table=True):
    """A card: `interaction` is the card as created (never rewritten); lifecycle columns move."""

    __tablename__ = "tf_interaction"
    __table_args__ = (
        sa.PrimaryKeyConstraint("account_id", "interaction_id", name="tf_interaction_pkey"),
        sa.CheckConstraint("case_revision >= 0", name="tf_interaction_case_revision_check"),
        sa.Index(
            "tf_one_open_blocking_interaction_per_case",
            "account_id",
            "workflow",
            "case_id",
            unique=True,
            **_where(f"blocking AND {_among('status', card_rules.OPEN_CARD_STATUSES)}"),
        ),
        sa.Index(
            "tf_interaction_open_by_conversation",
            "account_id",
            "conversation_id",
            "created_at",
            "interaction_id",
            **_where(_among("status", card_rules.OPEN_CARD_STATUSES)),
        ),
        sa.Index(
            "tf_interaction_by_case",
            "account_id",
            "workflow",
            "case_id",
            "created_at",
            "interaction_id",
        ),
        sa.Index(
            "tf_interaction_due",
            "expires_at",
            "account_id",
            "interaction_id",
            **_where(f"{_EXPIRABLE} AND expires_at IS NOT NULL"),
        ),
    )

    account_id: str = _text(primary_key=True)
    interaction_id: str = _text(primary_key=True)
    conversation_id: str = _text()
    workflow: str = _text()
    case_id: str = _text()
    case_revision: int = Field(sa_type=sa.BigInteger, nullable=False)
    blocking: bool = Field(sa_type=sa.Boolean, nullable=False)
    revision_independent: bool = Field(sa_type=sa.Boolean, nullable=False)
    interaction: str = _text()
    status: str = _text()
    created_at: datetime = _time()
    expires_at: datetime | None = _time(nullable=True)
    resolved_at: datetime | None = _time(nullable=True)
    resolved_option_id: str | None = _text(nullable=True)
    #: JSON array of event ids.
    resolution_event_ids: str = _text()


class TfCommandJournal(_TfModel, table=True):
    """An admitted command: `entry` is the command as admitted; status, outcome and completed_at
    move along the journal's status machine."""

    __tablename__ = "tf_command_journal"
    __table_args__ = (
        sa.PrimaryKeyConstraint("account_id", "command_id", name="tf_command_journal_pkey"),
        sa.UniqueConstraint(
            "account_id", "idempotency_key", name="tf_command_journal_idempotency_key"
        ),
        sa.CheckConstraint(
            "expected_revision >= 0", name="tf_command_journal_expected_revision_check"
        ),
        sa.Index("tf_command_journal_by_turn", "account_id", "turn_id", "created_at", "command_id"),
    )

    account_id: str = _text(primary_key=True)
    command_id: str = _text(primary_key=True)
    idempotency_key: str = _text()
    turn_id: str = _text()
    workflow: str = _text()
    case_id: str = _text()
    expected_revision: int = Field(sa_type=sa.BigInteger, nullable=False)
    command_type: str = _text()
    entry: str = _text()
    status: str = _text()
    outcome: str | None = _text(nullable=True)
    created_at: datetime = _time()
    completed_at: datetime | None = _time(nullable=True)


class TfDomainEvent(_TfModel, table=True):
    """The append-only claim ledger. `sequence` is global: an identity on PostgreSQL, assigned by
    the (single) writer on SQLite."""

    __tablename__ = "tf_domain_event"
    __table_args__ = (
        sa.PrimaryKeyConstraint("account_id", "event_id", name="tf_domain_event_pkey"),
        sa.UniqueConstraint("sequence", name="tf_domain_event_sequence"),
        sa.CheckConstraint("case_revision >= 0", name="tf_domain_event_case_revision_check"),
        sa.Index("tf_domain_event_by_account", "account_id", "sequence"),
        sa.Index("tf_domain_event_by_case", "account_id", "workflow", "case_id", "sequence"),
    )

    sequence: int = Field(
        sa_type=sa.BigInteger, sa_column_args=[sa.Identity(always=True)], nullable=False
    )
    account_id: str = _text(primary_key=True)
    event_id: str = _text(primary_key=True)
    workflow: str = _text()
    case_id: str = _text()
    case_revision: int = Field(sa_type=sa.BigInteger, nullable=False)
    command_id: str = _text()
    event_type: str = _text()
    payload: str = _text()
    occurred_at: datetime = _time()


class TfOutbox(_TfModel, table=True):
    """External side effects awaiting dispatch: a system queue addressed by `outbox_id`."""

    __tablename__ = "tf_outbox"
    __table_args__ = (
        sa.PrimaryKeyConstraint("outbox_id", name="tf_outbox_pkey"),
        sa.UniqueConstraint(
            "destination", "idempotency_key", name="tf_outbox_destination_idempotency_key"
        ),
        sa.CheckConstraint("attempt_count >= 0", name="tf_outbox_attempt_count_check"),
        sa.Index(
            "tf_outbox_due",
            "created_at",
            "outbox_id",
            **_where(_among("status", outbox_rules.OUTBOX_CLAIM.sources)),
        ),
        sa.Index("tf_outbox_by_command", "command_id", "created_at", "outbox_id"),
        sa.Index(
            "tf_outbox_claims",
            "claim_taken_at",
            **_where(_among("status", outbox_rules.OUTBOX_RELEASE.sources)),
        ),
    )

    outbox_id: str = _text(primary_key=True)
    command_id: str = _text()
    destination: str = _text()
    payload: str = _text()
    idempotency_key: str = _text()
    status: str = _text()
    attempt_count: int = Field(sa_type=sa.Integer, nullable=False)
    next_attempt_at: datetime | None = _time(nullable=True)
    created_at: datetime = _time()
    completed_at: datetime | None = _time(nullable=True)
    claim_worker_id: str | None = _text(nullable=True)
    claim_taken_at: datetime | None = _time(nullable=True)
    last_failure: str | None = _text(nullable=True)
    remote_ref: str | None = _text(nullable=True)
    dispatch_started_at: datetime | None = _time(nullable=True)


class TfReplay(_TfModel, table=True):
    """One replay record per turn, upserted as the turn advances; `first_recorded_at` (set by the
    first put) orders a conversation's records."""

    __tablename__ = "tf_replay"
    __table_args__ = (
        sa.PrimaryKeyConstraint("account_id", "turn_id", name="tf_replay_pkey"),
        sa.UniqueConstraint("account_id", "replay_token", name="tf_replay_token"),
        sa.Index(
            "tf_replay_by_conversation",
            "account_id",
            "conversation_id",
            "first_recorded_at",
            "turn_id",
        ),
        # an auditor who knows only a token, or a conversation id, finds its accounts
        sa.Index("tf_replay_by_token", "replay_token"),
        sa.Index("tf_replay_conversation_accounts", "conversation_id", "account_id"),
        # the retention sweep: final records whose words are not all erased, oldest first
        sa.Index(
            "tf_replay_retention",
            "recorded_at",
            "account_id",
            "turn_id",
            **_where(f"erased_at IS NULL AND {_among('phase', turn_rules.TERMINAL_PHASES)}"),
        ),
    )

    account_id: str = _text(primary_key=True)
    turn_id: str = _text(primary_key=True)
    conversation_id: str = _text()
    replay_token: str = _text()
    phase: str = _text()
    first_recorded_at: datetime = _time()
    recorded_at: datetime = _time()
    record: str = _text()
    #: when the turn's words were all erased (decision 0032; nothing left holding them)
    erased_at: datetime | None = _time(nullable=True)


class TfAuditLink(_TfModel, table=True):
    """A conversation's audit chain: one row per final replay record, appended in the write that
    made the record final and never changed (`turnframe_core.audit_chain`). `linked_at` is the
    record's own time in milliseconds on both dialects (it is part of the link's digest)."""

    __tablename__ = "tf_audit_link"
    __table_args__ = (
        sa.PrimaryKeyConstraint(
            "account_id", "conversation_id", "position", name="tf_audit_link_pkey"
        ),
        sa.UniqueConstraint("account_id", "turn_id", name="tf_audit_link_turn"),
        sa.CheckConstraint("position >= 0", name="tf_audit_link_position_check"),
    )

    account_id: str = _text(primary_key=True)
    conversation_id: str = _text(primary_key=True)
    position: int = Field(sa_type=sa.BigInteger, primary_key=True, nullable=False)
    turn_id: str = _text()
    record_digest: str = _text()
    previous_digest: str | None = _text(nullable=True)
    linked_at: int = Field(sa_type=sa.BigInteger, nullable=False)
    link_digest: str = _text()


class TfStreamEvent(_TfModel, table=True):
    """A turn's stream log: `event` is the event as appended (never rewritten); `sequence` runs
    1, 2, 3 … per turn. `at` is the event's own time in milliseconds on both dialects (it is
    part of the event, not a lifecycle time). A log is deleted whole once its terminal event is
    old enough."""

    __tablename__ = "tf_stream_event"
    __table_args__ = (
        sa.PrimaryKeyConstraint("account_id", "turn_id", "sequence", name="tf_stream_event_pkey"),
        sa.ForeignKeyConstraint(
            ["account_id", "turn_id"],
            ["tf_turn.account_id", "tf_turn.turn_id"],
            name="tf_stream_event_turn_fk",
            ondelete="CASCADE",
        ),
        sa.CheckConstraint("sequence >= 1", name="tf_stream_event_sequence_check"),
        sa.Index("tf_stream_event_finished", "at", "account_id", "turn_id", **_where("terminal")),
    )

    account_id: str = _text(primary_key=True)
    turn_id: str = _text(primary_key=True)
    sequence: int = Field(sa_type=sa.BigInteger, primary_key=True, nullable=False)
    event_type: str = _text()
    terminal: bool = Field(sa_type=sa.Boolean, nullable=False)
    at: int = Field(sa_type=sa.BigInteger, nullable=False)
    event: str = _text()


class TfTimer(_TfModel, table=True):
    """An event to fire at `due_at`, stored with its conversation (deleted with it). `event` is
    canonical JSON, opaque to the store; status, the claim and fired_at move."""

    __tablename__ = "tf_timer"
    __table_args__ = (
        sa.PrimaryKeyConstraint("account_id", "timer_id", name="tf_timer_pkey"),
        sa.ForeignKeyConstraint(
            ["account_id", "conversation_id"],
            ["tf_conversation.account_id", "tf_conversation.conversation_id"],
            name="tf_timer_conversation_fk",
            ondelete="CASCADE",
        ),
        sa.Index("tf_timer_by_conversation", "account_id", "conversation_id", "due_at", "timer_id"),
        # the sweep: due pending timers, and claims whose lease ran out
        sa.Index(
            "tf_timer_due",
            "due_at",
            "account_id",
            "timer_id",
            **_where(_among("status", {TimerStatus.PENDING})),
        ),
        sa.Index(
            "tf_timer_claims",
            "claimed_at",
            **_where(_among("status", timer_rules.TIMER_FIRE.sources)),
        ),
    )

    account_id: str = _text(primary_key=True)
    timer_id: str = _text(primary_key=True)
    conversation_id: str = _text()
    due_at: datetime = _time()
    event: str = _text()
    status: str = _text()
    worker_id: str | None = _text(nullable=True)
    claimed_at: datetime | None = _time(nullable=True)
    fired_at: datetime | None = _time(nullable=True)
    created_at: datetime = _time()


metadata: Final[sa.MetaData] = _tf_registry.metadata
