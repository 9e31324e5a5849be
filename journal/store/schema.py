"""The tables as SQLAlchemy sees them; Alembic's migrations under ``migrations/`` create them."""

from __future__ import annotations

import re
from typing import NamedTuple

from sqlalchemy import Boolean, Column, Float, Integer, MetaData, String, Table, Text

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

#: PostgreSQL only (revision 0002): the newest event's sequence number and hash, one row that
#: every append locks and moves forward in the transaction that adds the events.
events_head = Table(
    "events_head",
    metadata,
    Column("one", Boolean, primary_key=True),
    Column("seq", Integer, nullable=False),
    Column("hash", String(64), nullable=False),
)

#: Revision 0003: what each projection of a journal reached (the code version that made its
#: state, the last event folded into it) and its state, a JSON document per key. A cache that
#: `journal rebuild` empties and refills; never hash-chained, never read by `journal verify`.
projection_heads = Table(
    "projection_heads",
    metadata,
    Column("journal", String(200), primary_key=True),
    Column("projection", String(64), primary_key=True),
    Column("version", String(64), nullable=False),
    Column("seq", Integer, nullable=False),
)
projection_rows = Table(
    "projection_rows",
    metadata,
    Column("journal", String(200), primary_key=True),
    Column("projection", String(64), primary_key=True),
    Column("key", String(400), primary_key=True),
    Column("body", Text, nullable=False),
)

#: Revision 0004: one row per recording process (its machine and pid), its ``beat`` (seconds
#: since the epoch) kept fresh while it records steps; removed when it ends.
recorder_leases = Table(
    "recorder_leases",
    metadata,
    Column("machine", String(200), primary_key=True),
    Column("pid", Integer, primary_key=True),
    Column("journal", String(200), nullable=False),
    Column("beat", Float, nullable=False),
)

#: The columns of a row in the order ``StoredRow`` holds them.
COLUMNS = ("seq", "journal", "type", "version", "ts", "host", "run_id", "payload", "hash")


class StoredRow(NamedTuple):
    """One row of the events table exactly as stored: what `journal db copy` moves."""

    seq: int
    journal: str
    type: str
    version: int
    ts: str
    host: str | None
    run_id: str | None
    payload: str
    hash: str


def squeezed(sql: str) -> str:
    """SQL with its runs of blanks made one space, for comparing definitions."""
    return re.sub(r"\s+", " ", sql).strip().rstrip(";").strip()
