"""Wake outbox relays: on PostgreSQL, a row added to tf_outbox notifies `turnframe_outbox`.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

The notification travels with the inserting transaction's COMMIT (a row committed late wakes the
relay when it becomes visible, never before). Its payload is the table's schema, so relays of
other schemas in the same database may ignore it. SQLite has no notifications: relays poll.
Forward only.
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
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
    raise NotImplementedError("forward only")
