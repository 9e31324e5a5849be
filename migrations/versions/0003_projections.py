"""Projection state: what the folds of a journal reached, kept so a new process goes on from it.

A cache, never the truth: `journal rebuild` empties these tables and folds the events again,
`journal verify` never reads them, and nothing here is hash-chained or append-only (a fold
moves its rows forward as the journal grows). ``projection_heads`` holds, per journal and
projection, the code version that made the state and the last event folded into it;
``projection_rows`` the state itself, one JSON document per key (a host, a finding), so a
command loads only the rows its work touches. Also an index on the events' journal and type,
for the few readers that ask for one type of event (the latest ``JournalOpened``).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "projection_heads",
        sa.Column("journal", sa.String(200), primary_key=True),
        sa.Column("projection", sa.String(64), primary_key=True),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
    )
    op.create_table(
        "projection_rows",
        sa.Column("journal", sa.String(200), primary_key=True),
        sa.Column("projection", sa.String(64), primary_key=True),
        sa.Column("key", sa.String(400), primary_key=True),
        sa.Column("body", sa.Text, nullable=False),
    )
    op.create_index("ix_events_journal_type_seq", "events", ["journal", "type", "seq"])


def downgrade() -> None:
    op.drop_index("ix_events_journal_type_seq", "events")
    op.drop_table("projection_rows")
    op.drop_table("projection_heads")
