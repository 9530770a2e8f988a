"""tf_replay.erased_at: when a turn's words were all erased (decision 0032).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03

Set by the erasure that left nothing of the turn holding words (a turn whose card was still open
or whose command had not run yet is erased again later, and only then marked). The retention
sweep reads final records not yet marked, oldest first, by `tf_replay_retention`. Nullable, as
every column added after the initial revision is. Forward only.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TIME = sa.DateTime(timezone=True).with_variant(sa.BigInteger(), "sqlite")
RETAINED = "erased_at IS NULL AND phase IN ('delivered', 'failed')"


def upgrade() -> None:
    op.add_column("tf_replay", sa.Column("erased_at", TIME, nullable=True))
    op.create_index(
        "tf_replay_retention",
        "tf_replay",
        ["recorded_at", "account_id", "turn_id"],
        postgresql_where=sa.text(RETAINED),
        sqlite_where=sa.text(RETAINED),
    )


def downgrade() -> None:
    raise NotImplementedError("turnframe migrations go forward only")
