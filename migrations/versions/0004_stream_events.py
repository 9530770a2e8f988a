"""tf_stream_event: each turn's stream log, so a client resumes a stream after its last sequence.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

One row per event, keyed by (account_id, turn_id, sequence); `event` is the event's canonical
JSON, `at` its time in milliseconds on both dialects. The partial index on terminal rows serves
the prune sweep, which deletes a log whole once its terminal event is old enough. Forward only.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tf_stream_event",
        sa.Column("account_id", sa.Text(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.Column("event_type", sa.Text(), nullable=False),
        sa.Column("terminal", sa.Boolean(), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
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
        postgresql_where=sa.text("terminal"),
        sqlite_where=sa.text("terminal"),
    )


def downgrade() -> None:
    raise NotImplementedError("forward only")
