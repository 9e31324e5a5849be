"""Closing two ways round the append-only triggers.

SQLite: refuse an INSERT that names a sequence at or below the newest event.

``INSERT OR REPLACE`` (and ``REPLACE INTO``) with an existing sequence number deletes the row it
collides with and inserts another in its place; SQLite fires no DELETE trigger for that (unless
``recursive_triggers`` is on), so events_no_delete never saw it. Appends leave the sequence to
AUTOINCREMENT (the trigger sees -1 then) and `journal db copy` names sequences past the newest,
so nothing journal does is refused. (PostgreSQL has no REPLACE; its ``ON CONFLICT DO UPDATE``
fires events_no_update.)

PostgreSQL: the triggers fire ALWAYS. Enabled the ordinary way they fire only in the origin
role, so ``SET session_replication_role = replica`` (meant for replication, open to any
superuser) let a session rewrite events and the head row unrefused.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


#: PostgreSQL's append-only triggers, by table.
_PG_TRIGGERS = (
    ("events", "events_no_update"),
    ("events", "events_no_delete"),
    ("events", "events_no_truncate"),
    ("events_head", "events_head_forward_only"),
    ("events_head", "events_head_no_truncate"),
)


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        for table, trigger in _PG_TRIGGERS:
            op.execute(f"ALTER TABLE {table} ENABLE ALWAYS TRIGGER {trigger}")
    if dialect != "sqlite":
        return
    op.execute(
        "CREATE TRIGGER events_no_rewrite BEFORE INSERT ON events "
        "WHEN NEW.seq <> -1 AND NEW.seq <= (SELECT coalesce(max(seq), 0) FROM events) "
        "BEGIN SELECT RAISE(ABORT, 'events are append-only: an INSERT at or below the newest "
        "event refused'); END"
    )


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        for table, trigger in _PG_TRIGGERS:
            op.execute(f"ALTER TABLE {table} ENABLE TRIGGER {trigger}")
    if dialect != "sqlite":
        return
    op.execute("DROP TRIGGER events_no_rewrite")
