"""PostgreSQL: the chain's head in a row of its own, and TRUNCATE refused like DELETE.

Revision 0001 left two holes that only PostgreSQL has. TRUNCATE fires no row trigger, so it
emptied the append-only table without a word. And a sequence is not transactional: a value
handed to an append that then failed is gone for good, so "the sequence went further than the
newest row" cannot tell removed events from a failed append, which is what SQLite's
``sqlite_sequence`` tells `journal verify`. ``events_head`` is the PostgreSQL answer: one row
holding the newest event's sequence number and hash, locked (``SELECT ... FOR UPDATE``) by each
append so writers chain one after another, moved in the same transaction as the rows it
describes, and refusing to move backwards or go away. SQLite needs none of it: nothing to do.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-08
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

GENESIS = "0" * 64


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        "CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events "
        "FOR EACH STATEMENT EXECUTE FUNCTION events_append_only()"
    )
    op.execute(
        "CREATE TABLE events_head ("
        " one boolean PRIMARY KEY DEFAULT true CHECK (one),"
        " seq integer NOT NULL,"
        " hash varchar(64) NOT NULL)"
    )
    # An events table that already holds rows: the head is its newest one.
    op.execute(
        "INSERT INTO events_head (seq, hash) "
        f"SELECT coalesce(max(seq), 0), coalesce((SELECT hash FROM events ORDER BY seq DESC "
        f"LIMIT 1), '{GENESIS}') FROM events"
    )
    op.execute(
        "CREATE FUNCTION events_head_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN "
        "IF TG_OP = 'UPDATE' THEN "
        "IF NEW.one AND NEW.seq > OLD.seq THEN RETURN NEW; END IF; "
        "END IF; "
        "RAISE EXCEPTION 'the head of the events only moves forward: % refused', TG_OP; "
        "END $$"
    )
    op.execute(
        "CREATE TRIGGER events_head_forward_only BEFORE UPDATE OR DELETE ON events_head "
        "FOR EACH ROW EXECUTE FUNCTION events_head_forward_only()"
    )
    op.execute(
        "CREATE TRIGGER events_head_no_truncate BEFORE TRUNCATE ON events_head "
        "FOR EACH STATEMENT EXECUTE FUNCTION events_head_forward_only()"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TABLE events_head")
    op.execute("DROP FUNCTION events_head_forward_only()")
    op.execute("DROP TRIGGER events_no_truncate ON events")
