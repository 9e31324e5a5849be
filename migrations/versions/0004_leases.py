"""Recorder leases: a heartbeat row per recording process, so that any reader (on any machine)
can tell a step still being recorded from one whose recorder is gone.

A recording process keeps its row's ``beat`` fresh (every few seconds) while it records steps
and removes the row when it ends; a row whose beat went stale belongs to a recorder that was
killed or whose machine went down: its unfinished runs are `lost`, not `running`. Like the
projection tables, nothing here is hash-chained or read by `journal verify`.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
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
        "recorder_leases",
        sa.Column("machine", sa.String(200), primary_key=True),
        sa.Column("pid", sa.Integer, primary_key=True),
        sa.Column("journal", sa.String(200), nullable=False),
        sa.Column("beat", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("recorder_leases")
