"""`journal verify`: the hash chain recomputed over every row, the schema, and its triggers.

The chain alone shows an event changed or removed from the middle. Removing the newest events
leaves a chain that still holds, so each backend keeps a record of how far the sequence went,
written in the same transaction as the events: SQLite's ``sqlite_sequence`` (AUTOINCREMENT),
PostgreSQL's ``events_head`` row (revision 0002). On both, numbers are handed out under the
write lock and given back by a failed append, so a gap in the sequence is itself a removal,
even where the chain was continued across it afterwards.

Whoever can write the database can also seal the whole chain again; only anchors kept
elsewhere (:mod:`journal.store.anchor`) show that. Each anchor must still be a prefix of the
chain: its event there, with its hash.

The triggers are checked by what they are (their whole definition, on the right table, and
enabled), not by their names: a trigger of the right name with ``WHEN 0``, on another table or
calling a function that no longer raises refuses nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, select, text

from journal.mapper import GENESIS, canonical, chain_hash
from journal.store import postgres
from journal.store.anchor import Anchor
from journal.store.core import FETCH_ROWS
from journal.store.engine import current_revision, head_revision
from journal.store.schema import events, squeezed

#: Each SQLite trigger on events as the migrations create it (whitespace aside).
SQLITE_TRIGGERS = {
    **{
        f"events_no_{action.lower()}": (
            f"CREATE TRIGGER events_no_{action.lower()} BEFORE {action} ON events "
            f"BEGIN SELECT RAISE(ABORT, 'events are append-only: {action} refused'); END"
        )
        for action in ("UPDATE", "DELETE")
    },
    "events_no_rewrite": (
        "CREATE TRIGGER events_no_rewrite BEFORE INSERT ON events "
        "WHEN NEW.seq <> -1 AND NEW.seq <= (SELECT coalesce(max(seq), 0) FROM events) "
        "BEGIN SELECT RAISE(ABORT, 'events are append-only: an INSERT at or below the newest "
        "event refused'); END"
    ),
}


@dataclass(frozen=True)
class VerifyReport:
    """What `journal verify` found: events checked and the problems, first bad one first."""

    checked: int
    problems: list[str]
    #: the newest event's (sequence number, hash); (0, GENESIS) for an empty chain
    head: tuple[int, str] = (0, GENESIS)
    #: how many anchors were held against the chain
    anchors: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def _missing(first: int, last: int) -> str:
    return f"event {first}" if first == last else f"events {first} to {last}"


def _sqlite_trigger_problems(conn: Connection) -> list[str]:
    found = {
        name: (table, sql)
        for name, table, sql in conn.execute(
            text("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger'")
        ).all()
    }
    problems = []
    for trigger, wanted in SQLITE_TRIGGERS.items():
        table, sql = found.get(trigger, (None, None))
        if sql is None:
            problems.append(f"the trigger {trigger} that refuses changes is missing")
        elif table != "events":
            problems.append(f"the trigger {trigger} is on the table {table}, not on events")
        elif squeezed(sql) != squeezed(wanted):
            problems.append(f"the trigger {trigger} was changed and may no longer refuse: {sql}")
    for trigger, (table, sql) in found.items():
        if table == "events" and trigger not in SQLITE_TRIGGERS:
            problems.append(f"an unknown trigger {trigger} is on events: {sql}")
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


class _Anchors:
    """The anchors, held against the rows as they are read in order."""

    def __init__(self, anchors: Sequence[Anchor], where: str) -> None:
        self.pending = sorted(anchors, key=lambda a: (a.seq, a.line))
        self.where = where
        self.held = 0  # the sequence number of the last anchor that holds
        self.first = ""  # the hash of event 1 as the table has it
        self.problem: str | None = None

    def _fail(self, anchor: Anchor, what: str) -> None:
        later = sum(1 for a in self.pending if a.seq > anchor.seq)
        span = (
            f"event {anchor.seq} was"
            if self.held + 1 == anchor.seq
            else f"an event from {self.held + 1} to {anchor.seq} was"
        )
        whole = (
            "; event 1 differs from the anchor's too: the whole chain was sealed again, or this "
            "witness belongs to another database"
            if self.first and anchor.first != self.first
            else ""
        )
        self.problem = (
            f"{what} (anchor of {anchor.at}, {self.where} line {anchor.line}): {span} changed "
            f"or removed after it was anchored, and the chain sealed again to hide it{whole}"
            + (f" ({later} later anchors fail with it)" if later else "")
        )
        self.pending = []

    def row(self, seq: int, digest: str) -> None:
        if seq == 1:
            self.first = digest
        while self.pending and self.pending[0].seq <= seq:
            anchor = self.pending.pop(0)
            if anchor.seq < seq:
                self._fail(anchor, f"event {anchor.seq} is gone")
            elif anchor.hash != digest:
                self._fail(
                    anchor,
                    f"event {seq} has hash {digest[:16]}… where it was anchored with "
                    f"{anchor.hash[:16]}…",
                )
            else:
                self.held = seq

    def end(self, last_seq: int) -> None:
        if self.pending:
            anchor = self.pending[0]
            ends = f"the chain now ends at event {last_seq}" if last_seq else "it holds no event"
            self._fail(anchor, f"event {anchor.seq} is gone: {ends}")


def verify(
    engine: Engine, anchors: Sequence[Anchor] = (), witness: str = "the witness"
) -> VerifyReport:
    """Recompute the hash chain over every row, check the schema and its triggers, and hold
    the chain against ``anchors`` (each must still be a prefix of it)."""
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
    held = _Anchors(anchors, witness)
    prev, checked, last_seq, broken = GENESIS, 0, 0, False
    with engine.connect() as conn:
        rows = conn.execution_options(yield_per=FETCH_ROWS).execute(
            select(events).order_by(events.c.seq)
        )
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
            held.row(row.seq, row.hash)
            if held.problem:
                problems.append(held.problem)
                held.problem = None
            prev, last_seq = row.hash, row.seq
        rows.close()
        if not broken:
            held.end(last_seq)
            problems += [held.problem] if held.problem else []
        if not broken and dialect == "sqlite":
            problems += _sqlite_sequence_problems(conn, last_seq)
        elif not broken and dialect == "postgresql":
            problems += postgres.head_problems(conn, last_seq, prev if last_seq else None)
    return VerifyReport(
        checked=checked, problems=problems, head=(last_seq, prev), anchors=len(anchors)
    )
