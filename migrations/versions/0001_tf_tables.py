"""The tf_* tables: conversations, turns, phase markers, cards, command journal, event ledger,
outbox, replay records, stream events and the audit chain.

Revision ID: 0001
Revises:
Create Date: 2026-12-02

The one initial revision: nothing is released, so the five revisions written before were squashed
into this one (decision 0020). Times are timestamptz on PostgreSQL and integer milliseconds on
SQLite; documents are canonical JSON text. On PostgreSQL a row added to tf_outbox notifies
`turnframe_outbox` (payload: the table's schema) with its transaction's COMMIT; SQLite relays
poll. The audit chain links only final replay records, one immutable link each. Forward only.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TIME = sa.DateTime(timezone=True).with_variant(sa.BigInteger(), "sqlite")
OPEN = "status IN ('active', 'resolving')"


def _text(name: str, *, nullable: bool = False) -> sa.Column[str]:
    return sa.Column(name, sa.Text(), nullable=nullable)


def _time(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, TIME, nullable=nullable)


def _partial(where: str) -> dict[str, sa.TextClause]:
    return {"postgresql_where": sa.text(where), "sqlite_where": sa.text(where)}


def upgrade() -> None:
    op.create_table(
        "tf_conversation",
        _text("account_id"),
        _text("conversation_id"),
        _time("created_at"),
        sa.PrimaryKeyConstraint("account_id", "conversation_id", name="tf_conversation_pkey"),
    )
    op.create_table(
        "tf_turn",
        _text("account_id"),
        _text("turn_id"),
        _text("conversation_id"),
        _time("received_at"),
        _text("user_input"),
        _text("assistant_turn", nullable=True),
        sa.PrimaryKeyConstraint("account_id", "turn_id", name="tf_turn_pkey"),
        sa.ForeignKeyConstraint(
            ["account_id", "conversation_id"],
            ["tf_conversation.account_id", "tf_conversation.conversation_id"],
            name="tf_turn_conversation_fk",
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "tf_turn_by_conversation",
        "tf_turn",
        ["account_id", "conversation_id", "received_at", "turn_id"],
    )
    op.create_table(
        "tf_turn_phase",
        _text("account_id"),
        _text("turn_id"),
        _text("conversation_id"),
        _text("phase"),
        _time("updated_at"),
        sa.PrimaryKeyConstraint("account_id", "turn_id", name="tf_turn_phase_pkey"),
        sa.ForeignKeyConstraint(
            ["account_id", "turn_id"],
            ["tf_turn.account_id", "tf_turn.turn_id"],
            name="tf_turn_phase_turn_fk",
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "tf_turn_phase_unfinished",
        "tf_turn_phase",
        ["updated_at", "account_id", "turn_id"],
        **_partial("phase NOT IN ('delivered', 'failed')"),
    )

    op.create_table(
        "tf_interaction",
        _text("account_id"),
        _text("interaction_id"),
        _text("conversation_id"),
        _text("workflow"),
        _text("case_id"),
        sa.Column("case_revision", sa.BigInteger(), nullable=False),
        sa.Column("blocking", sa.Boolean(), nullable=False),
        sa.Column("revision_independent", sa.Boolean(), nullable=False),
        _text("interaction"),
        _text("status"),
        _time("created_at"),
        _time("expires_at", nullable=True),
        _time("resolved_at", nullable=True),
        _text("resolved_option_id", nullable=True),
        _text("resolution_event_ids"),
        sa.PrimaryKeyConstraint("account_id", "interaction_id", name="tf_interaction_pkey"),
        sa.CheckConstraint("case_revision >= 0", name="tf_interaction_case_revision_check"),
    )
    op.create_index(
        "tf_one_open_blocking_interaction_per_case",
        "tf_interaction",
        ["account_id", "workflow", "case_id"],
        unique=True,
        **_partial(f"blocking AND {OPEN}"),
    )
    op.create_index(
        "tf_interaction_open_by_conversation",
        "tf_interaction",
        ["account_id", "conversation_id", "created_at", "interaction_id"],
        **_partial(OPEN),
    )
    op.create_index(
        "tf_interaction_by_case",
        "tf_interaction",
        ["account_id", "workflow", "case_id", "created_at", "interaction_id"],
    )
    op.create_index(
        "tf_interaction_due",
        "tf_interaction",
        ["expires_at", "account_id", "interaction_id"],
        **_partial("status = 'active' AND expires_at IS NOT NULL"),
    )

    op.create_table(
        "tf_command_journal",
        _text("account_id"),
        _text("command_id"),
        _text("idempotency_key"),
        _text("turn_id"),
        _text("workflow"),
        _text("case_id"),
        sa.Column("expected_revision", sa.BigInteger(), nullable=False),
        _text("command_type"),
        _text("entry"),
        _text("status"),
        _text("outcome", nullable=True),
        _time("created_at"),
        _time("completed_at", nullable=True),
        sa.PrimaryKeyConstraint("account_id", "command_id", name="tf_command_journal_pkey"),
        sa.UniqueConstraint(
            "account_id", "idempotency_key", name="tf_command_journal_idempotency_key"
        ),
        sa.CheckConstraint(
            "expected_revision >= 0", name="tf_command_journal_expected_revision_check"
        ),
    )
    op.create_index(
        "tf_command_journal_by_turn",
        "tf_command_journal",
        ["account_id", "turn_id", "created_at", "command_id"],
    )

    op.create_table(
        "tf_domain_event",
        sa.Column("sequence", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        _text("account_id"),
        _text("event_id"),
        _text("workflow"),
        _text("case_id"),
        sa.Column("case_revision", sa.BigInteger(), nullable=False),
        _text("command_id"),
        _text("event_type"),
        _text("payload"),
        _time("occurred_at"),
        sa.PrimaryKeyConstraint("account_id", "event_id", name="tf_domain_event_pkey"),
        sa.UniqueConstraint("sequence", name="tf_domain_event_sequence"),
        sa.CheckConstraint("case_revision >= 0", name="tf_domain_event_case_revision_check"),
    )
    op.create_index("tf_domain_event_by_account", "tf_domain_event", ["account_id", "sequence"])
    op.create_index(
        "tf_domain_event_by_case",
        "tf_domain_event",
        ["account_id", "workflow", "case_id", "sequence"],
    )

    op.create_table(
        "tf_outbox",
        _text("outbox_id"),
        _text("command_id"),
        _text("destination"),
        _text("payload"),
        _text("idempotency_key"),
        _text("status"),
        sa.Column("attempt_count", sa.Integer(), nullable=False),
        _time("next_attempt_at", nullable=True),
        _time("created_at"),
        _time("completed_at", nullable=True),
        _text("claim_worker_id", nullable=True),
        _time("claim_taken_at", nullable=True),
        _text("last_failure", nullable=True),
        _text("remote_ref", nullable=True),
        _time("dispatch_started_at", nullable=True),
        sa.PrimaryKeyConstraint("outbox_id", name="tf_outbox_pkey"),
        sa.UniqueConstraint(
            "destination", "idempotency_key", name="tf_outbox_destination_idempotency_key"
        ),
        sa.CheckConstraint("attempt_count >= 0", name="tf_outbox_attempt_count_check"),
    )
    op.create_index(
        "tf_outbox_due", "tf_outbox", ["created_at", "outbox_id"], **_partial("status = 'pending'")
    )
    op.create_index("tf_outbox_by_command", "tf_outbox", ["command_id", "created_at", "outbox_id"])
    op.create_index(
        "tf_outbox_claims", "tf_outbox", ["claim_taken_at"], **_partial("status = 'dispatching'")
    )

    op.create_table(
        "tf_replay",
        _text("account_id"),
        _text("turn_id"),
        _text("conversation_id"),
        _text("replay_token"),
        _text("phase"),
        _time("first_recorded_at"),
        _time("recorded_at"),
        _text("record"),
        sa.PrimaryKeyConstraint("account_id", "turn_id", name="tf_replay_pkey"),
        sa.UniqueConstraint("account_id", "replay_token", name="tf_replay_token"),
    )
    op.create_index(
        "tf_replay_by_conversation",
        "tf_replay",
        ["account_id", "conversation_id", "first_recorded_at", "turn_id"],
    )
    op.create_index("tf_replay_by_token", "tf_replay", ["replay_token"])
    op.create_index(
        "tf_replay_conversation_accounts", "tf_replay", ["conversation_id", "account_id"]
    )

    op.create_table(
        "tf_stream_event",
        _text("account_id"),
        _text("turn_id"),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        _text("event_type"),
        sa.Column("terminal", sa.Boolean(), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        _text("event"),
        sa.PrimaryKeyConstraint("account_id", "turn_id", "sequence", name="tf_stream_event_pkey"),
        sa.ForeignKeyConstraint(
            ["account_id", "turn_id"],
            ["tf_turn.account_id", "tf_turn.turn_id"],
            name="tf_stream_event_turn_fk",
            ondelete="CASCADE",
        ),
        sa.CheckConstraint("sequence >= 1", name="tf_stream_event_sequence_check"),
    )
    op.create_index(
        "tf_stream_event_finished",
        "tf_stream_event",
        ["at", "account_id", "turn_id"],
        **_partial("terminal"),
    )

    op.create_table(
        "tf_audit_link",
        _text("account_id"),
        _text("conversation_id"),
        sa.Column("position", sa.BigInteger(), nullable=False),
        _text("turn_id"),
        _text("record_digest"),
        _text("previous_digest", nullable=True),
        sa.Column("linked_at", sa.BigInteger(), nullable=False),
        _text("link_digest"),
        sa.PrimaryKeyConstraint(
            "account_id", "conversation_id", "position", name="tf_audit_link_pkey"
        ),
        sa.UniqueConstraint("account_id", "turn_id", name="tf_audit_link_turn"),
        sa.CheckConstraint("position >= 0", name="tf_audit_link_position_check"),
    )

    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            """
            CREATE OR REPLACE FUNCTION tf_outbox_notify() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM pg_notify('turnframe_outbox', TG_TABLE_SCHEMA);
                RETURN NULL;
            END
            $$
            """
        )
        op.execute(
            """
            CREATE TRIGGER tf_outbox_notify AFTER INSERT ON tf_outbox
            FOR EACH STATEMENT EXECUTE FUNCTION tf_outbox_notify()
            """
        )


def downgrade() -> None:
    raise NotImplementedError("turnframe migrations go forward only")
