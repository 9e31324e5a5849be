"""The append-only events table, its indexes and the triggers that refuse UPDATE and DELETE.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("journal", sa.String(200), nullable=False),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("ts", sa.String(40), nullable=False),
        sa.Column("host", sa.String(200)),
        sa.Column("run_id", sa.String(64)),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_events_journal_seq", "events", ["journal", "seq"])
    op.create_index("ix_events_run_id", "events", ["run_id"])
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER events_no_{action.lower()} BEFORE {action} ON events "
                f"BEGIN SELECT RAISE(ABORT, 'events are append-only: {action} refused'); END"
            )
    elif dialect == "postgresql":
        op.execute(
            "CREATE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN RAISE EXCEPTION 'events are append-only: % refused', TG_OP; END $$"
        )
        for action in ("UPDATE", "DELETE"):
            op.execute(
                f"CREATE TRIGGER events_no_{action.lower()} BEFORE {action} ON events "
                "FOR EACH ROW EXECUTE FUNCTION events_append_only()"
            )


def downgrade() -> None:
    op.drop_table("events")
