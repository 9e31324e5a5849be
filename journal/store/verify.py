"""`journal verify`: the hash chain recomputed over every row, the schema, and its triggers.

The chain alone shows an event changed or removed from the middle. Removing the newest events
leaves a chain that still holds, so each backend keeps a record of how far the sequence went,
written in the same transaction as the events: SQLite's ``sqlite_sequence`` (AUTOINCREMENT),
PostgreSQL's ``events_head`` row (revision 0002). On both, numbers are handed out under the
write lock and given back by a failed append, so a gap in the sequence is itself a removal,
even where the chain was continued across it afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, Engine, select, text

from journal.mapper import GENESIS, canonical, chain_hash
from journal.store import postgres
from journal.store.engine import current_revision, head_revision
from journal.store.schema import events

_SQLITE_TRIGGERS = (("events_no_update", "BEFORE UPDATE"), ("events_no_delete", "BEFORE DELETE"))


@dataclass(frozen=True)
class VerifyReport:
    """What `journal verify` found: events checked and the problems, first bad one first."""

    checked: int
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def _missing(first: int, last: int) -> str:
    return f"event {first}" if first == last else f"events {first} to {last}"


def _sqlite_trigger_problems(conn: Connection) -> list[str]:
    found = dict(
        conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'")).all()
    )
    problems = []
    for trigger, refuses in _SQLITE_TRIGGERS:
        sql = found.get(trigger)
        if sql is None:
            problems.append(f"the trigger {trigger} that refuses changes is missing")
        elif refuses not in sql.upper() or "RAISE(ABORT" not in sql.upper().replace(" ", ""):
            problems.append(f"the trigger {trigger} was changed and may no longer refuse: {sql}")
    return problems


def _sqlite_sequence_problems(conn: Connection, last_seq: int) -> list[str]:
    # AUTOINCREMENT remembers the highest sequence ever given out, so removing the newest
    # events (which the chain alone cannot show) leaves a trace here.
    issued = conn.execute(text("SELECT seq FROM sqlite_sequence WHERE name = 'events'")).scalar()
    if issued is None or issued <= last_seq:
        return []
    gone = (
        f"event {issued} was"
        if issued == last_seq + 1
        else f"events {last_seq + 1} to {issued} were"
    )
    return [
        f"{gone} written and removed since: the newest events are missing "
        f"(the last one left is event {last_seq})"
    ]


def verify(engine: Engine) -> VerifyReport:
    """Recompute the hash chain over every row and check the schema and its triggers."""
    problems: list[str] = []
    head, current = head_revision(), current_revision(engine)
    if current != head:
        problems.append(f"the schema is at revision {current}, expected {head}")
    dialect = engine.dialect.name
    # Where numbers are never skipped legitimately, a gap is a removal even if the chain holds.
    gapless = dialect in ("sqlite", "postgresql")
    with engine.connect() as conn:
        if dialect == "sqlite":
            problems += _sqlite_trigger_problems(conn)
        elif dialect == "postgresql":
            problems += postgres.trigger_problems(conn)
    prev, checked, last_seq, broken = GENESIS, 0, 0, False
    with engine.connect() as conn:
        rows = conn.execution_options(yield_per=5000).execute(select(events).order_by(events.c.seq))
        for row in rows:
            checked += 1
            expected = chain_hash(
                prev,
                canonical(
                    row.journal, row.type, row.version, row.ts, row.host, row.run_id, row.payload
                ),
            )
            where = f"event {row.seq} ({row.type} in journal {row.journal!r}, {row.ts})"
            gap = row.seq > last_seq + 1
            if expected != row.hash:
                if gap:
                    # Sequences can skip on some databases, so there a gap is only named when
                    # the chain breaks across it.
                    onto = f"event {last_seq}" if last_seq else "the start of the chain"
                    problems.append(
                        f"{_missing(last_seq + 1, row.seq - 1)} removed: {where} does not "
                        f"chain onto {onto}"
                    )
                else:
                    problems.append(
                        f"{where} does not match its hash: it, or an event before it, was "
                        "changed or removed after it was written"
                    )
                broken = True
                break
            if gap and gapless:
                problems.append(
                    f"{_missing(last_seq + 1, row.seq - 1)} removed: the sequence skips from "
                    f"event {last_seq} to {row.seq}, and the chain was sealed again across "
                    "the gap since"
                )
                broken = True
                break
            prev, last_seq = row.hash, row.seq
        rows.close()
        if not broken and dialect == "sqlite":
            problems += _sqlite_sequence_problems(conn, last_seq)
        elif not broken and dialect == "postgresql":
            problems += postgres.head_problems(conn, last_seq, prev if last_seq else None)
    return VerifyReport(checked=checked, problems=problems)
