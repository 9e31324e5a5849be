"""The event store: the only writer, append-only, one global sequence sealed by a hash chain."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine, func, select, text

from journal.events import Event
from journal.mapper import (
    GENESIS,
    Recorded,
    canonical,
    chain_hash,
    dump_payload,
    from_row,
    to_payload,
)
from journal.store.engine import current_revision, head_revision, open_engine
from journal.store.schema import events

__all__ = ["EventStore", "Recorded", "VerifyReport", "utc_now"]


def utc_now() -> str:
    """The current UTC time as stored: ISO 8601 with microseconds and a ``Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class VerifyReport:
    """What `journal verify` found: events checked and the problems, first bad one first."""

    checked: int
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


class EventStore:
    """Appends events to and reads them from one database; safe across threads and processes."""

    def __init__(self, db: str) -> None:
        self.db = db
        self.engine: Engine = open_engine(db)
        self._lock = threading.Lock()

    def close(self) -> None:
        self.engine.dispose()

    def append(self, journal: str, batch: Sequence[Event], ts: str | None = None) -> None:
        """Append ``batch`` in one transaction, chained onto the newest event in the store."""
        if not batch:
            return
        with self._lock, self.engine.connect().execution_options(write=True) as conn:
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(7411)"))
                prev = conn.execute(
                    select(events.c.hash).order_by(events.c.seq.desc()).limit(1)
                ).scalar()
                prev = prev or GENESIS
                rows = []
                for ev in batch:
                    stamp = ts or utc_now()
                    payload = dump_payload(to_payload(ev))
                    digest = chain_hash(
                        prev,
                        canonical(journal, ev.type, ev.version, stamp, ev.host, ev.run_id, payload),
                    )
                    rows.append(
                        {
                            "journal": journal,
                            "type": ev.type,
                            "version": ev.version,
                            "ts": stamp,
                            "host": ev.host,
                            "run_id": ev.run_id,
                            "payload": payload,
                            "hash": digest,
                        }
                    )
                    prev = digest
                conn.execute(events.insert(), rows)

    def read(
        self,
        journal: str | None = None,
        *,
        after: int = 0,
        types: Iterable[str] | None = None,
        exclude: Iterable[str] | None = None,
        run_id: str | None = None,
    ) -> Iterator[Recorded]:
        """Events in global order, optionally of one journal, run or set of types."""
        query = select(events).where(events.c.seq > after).order_by(events.c.seq)
        if journal is not None:
            query = query.where(events.c.journal == journal)
        if types is not None:
            query = query.where(events.c.type.in_(list(types)))
        if exclude is not None:
            query = query.where(events.c.type.not_in(list(exclude)))
        if run_id is not None:
            query = query.where(events.c.run_id == run_id)
        with self.engine.connect() as conn:
            result = conn.execution_options(yield_per=2000).execute(query)
            for row in result:
                yield Recorded(
                    seq=row.seq,
                    journal=row.journal,
                    ts=row.ts,
                    event=from_row(row.type, row.version, json.loads(row.payload)),
                    hash=row.hash,
                )

    def journals(self) -> list[str]:
        """Names of the journals in this database, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(events.c.journal, func.min(events.c.seq).label("first"))
                .group_by(events.c.journal)
                .order_by("first")
            )
            return [row.journal for row in rows]

    def count(self, journal: str | None = None) -> int:
        """How many events the database (or one journal) holds."""
        query = select(func.count()).select_from(events)
        if journal is not None:
            query = query.where(events.c.journal == journal)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar() or 0)

    def verify(self) -> VerifyReport:
        """Recompute the hash chain over every row and check the schema and its triggers."""
        problems: list[str] = []
        head, current = head_revision(), current_revision(self.engine)
        if current != head:
            problems.append(f"the schema is at revision {current}, expected {head}")
        if self.engine.dialect.name == "sqlite":
            with self.engine.connect() as conn:
                found = set(
                    conn.execute(
                        text("SELECT name FROM sqlite_master WHERE type = 'trigger'")
                    ).scalars()
                )
            for trigger in ("events_no_update", "events_no_delete"):
                if trigger not in found:
                    problems.append(f"the trigger {trigger} that refuses changes is missing")
        prev, checked = GENESIS, 0
        with self.engine.connect() as conn:
            rows = conn.execution_options(yield_per=5000).execute(
                select(events).order_by(events.c.seq)
            )
            for row in rows:
                checked += 1
                expected = chain_hash(
                    prev,
                    canonical(
                        row.journal, row.type, row.version, row.ts, row.host, row.run_id,
                        row.payload,
                    ),
                )
                if expected != row.hash:
                    problems.append(
                        f"event {row.seq} ({row.type} in journal {row.journal!r}, {row.ts}) "
                        "does not match its hash: it, or an event before it, was changed or "
                        "removed after it was written"
                    )
                    break
                prev = row.hash
        return VerifyReport(checked=checked, problems=problems)
