"""tf_outbox.dispatch_started_at: when an actor began the claimed attempt.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

A redelivered message of an attempt that began (it may have reached the destination) asks the
destination before sending; the reaper records `turnframe.outbox.claim_expired` on a row whose
attempt began, so the next attempt asks too. Forward only.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TIME = sa.DateTime(timezone=True).with_variant(sa.BigInteger(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("tf_outbox") as table:
        table.add_column(sa.Column("dispatch_started_at", TIME, nullable=True))


def downgrade() -> None:
    raise NotImplementedError("forward only")
