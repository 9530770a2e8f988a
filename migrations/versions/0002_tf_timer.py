"""tf_timer: events stored with their conversation to fire at a time, leased to one worker at a
time.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03

A timer belongs to its conversation (deleted with it). The sweep reads due pending timers by
`tf_timer_due` and claims whose lease ran out by `tf_timer_claims`. Forward only.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TIME = sa.DateTime(timezone=True).with_variant(sa.BigInteger(), "sqlite")


def _partial(where: str) -> dict[str, sa.TextClause]:
    return {"postgresql_where": sa.text(where), "sqlite_where": sa.text(where)}


def upgrade() -> None:
    op.create_table(
        "tf_timer",
        sa.Column("account_id", sa.Text(), nullable=False),
        sa.Column("timer_id", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("due_at", TIME, nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("worker_id", sa.Text(), nullable=True),
        sa.Column("claimed_at", TIME, nullable=True),
        sa.Column("fired_at", TIME, nullable=True),
        sa.Column("created_at", TIME, nullable=False),
        sa.PrimaryKeyConstraint("account_id", "timer_id", name="tf_timer_pkey"),
        sa.ForeignKeyConstraint(
            ["account_id", "conversation_id"],
            ["tf_conversation.account_id", "tf_conversation.conversation_id"],
            name="tf_timer_conversation_fk",
            ondelete="CASCADE",
        ),
    )
    op.create_index(
        "tf_timer_by_conversation",
        "tf_timer",
        ["account_id", "conversation_id", "due_at", "timer_id"],
    )
    op.create_index(
        "tf_timer_due",
        "tf_timer",
        ["due_at", "account_id", "timer_id"],
        **_partial("status = 'pending'"),
    )
    op.create_index("tf_timer_claims", "tf_timer", ["claimed_at"], **_partial("status = 'claimed'"))


def downgrade() -> None:
    raise NotImplementedError("turnframe migrations go forward only")
