"""tf_audit_link: each conversation's audit chain, one immutable link per final replay record.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

A replay record changes while its turn runs, so the chain links only final records: the write
that makes a record final appends its link (position, the record's digest, the previous link's
digest). Records that were already final when this revision runs are linked here, per
conversation in the order the store lists them, so an upgraded database verifies intact. Two
indexes let an auditor find the accounts of a replay token or of a conversation id. Forward only.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tf_audit_link",
        sa.Column("account_id", sa.Text(), nullable=False),
        sa.Column("conversation_id", sa.Text(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("record_digest", sa.Text(), nullable=False),
        sa.Column("previous_digest", sa.Text(), nullable=True),
        sa.Column("linked_at", sa.BigInteger(), nullable=False),
        sa.Column("link_digest", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint(
            "account_id", "conversation_id", "position", name="tf_audit_link_pkey"
        ),
        sa.UniqueConstraint("account_id", "turn_id", name="tf_audit_link_turn"),
        sa.CheckConstraint("position >= 0", name="tf_audit_link_position_check"),
    )
    op.create_index("tf_replay_by_token", "tf_replay", ["replay_token"])
    op.create_index(
        "tf_replay_conversation_accounts", "tf_replay", ["conversation_id", "account_id"]
    )
    _link_final_records()


def _link_final_records() -> None:
    from turnframe_core.audit_chain import ChainLink
    from turnframe_core.blocks import STORED_CONTEXT
    from turnframe_core.replay import ReplayRecord
    from turnframe_store.sql._rows import Codec

    if op.get_context().as_sql:  # an offline script cannot read the records it would link
        return
    connection = op.get_bind()
    rows = connection.execute(
        sa.text(
            "SELECT account_id, conversation_id, record FROM tf_replay "
            "WHERE phase IN ('delivered', 'failed') "
            "ORDER BY account_id, conversation_id, first_recorded_at, turn_id"
        )
    )
    last: dict[tuple[str, str], ChainLink] = {}
    links = []
    for account_id, conversation_id, text in rows:
        record = ReplayRecord.model_validate_json(text, context=STORED_CONTEXT)
        link = ChainLink.after(last.get((account_id, conversation_id)), record)
        last[(account_id, conversation_id)] = link
        links.append(Codec.link_params(link))
    if links:
        connection.execute(
            sa.text(
                "INSERT INTO tf_audit_link (account_id, conversation_id, position, turn_id, "
                "record_digest, previous_digest, linked_at, link_digest) VALUES (:account_id, "
                ":conversation_id, :position, :turn_id, :record_digest, :previous_digest, "
                ":linked_at, :link_digest)"
            ),
            links,
        )


def downgrade() -> None:
    raise NotImplementedError("forward only")
