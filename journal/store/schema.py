"""The events table as SQLAlchemy sees it; Alembic's migrations under ``migrations/`` create it."""

from __future__ import annotations

from sqlalchemy import Column, Integer, MetaData, String, Table, Text

metadata = MetaData()

events = Table(
    "events",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("journal", String(200), nullable=False),
    Column("type", String(64), nullable=False),
    Column("version", Integer, nullable=False),
    Column("ts", String(40), nullable=False),
    Column("host", String(200)),
    Column("run_id", String(64)),
    Column("payload", Text, nullable=False),
    Column("hash", String(64), nullable=False),
)
