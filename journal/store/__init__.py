"""The event store: the only writer, append-only, one global sequence sealed by a hash chain."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine, func, select, text
from sqlalchemy.pool import PoolProxiedConnection

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

_COLUMNS = ("journal", "type", "version", "ts", "host", "run_id", "payload", "hash")
_INSERT = f"INSERT INTO events ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"
_LAST_HASH = "SELECT hash FROM events ORDER BY seq DESC LIMIT 1"


def utc_now() -> str:
    """The current UTC time as stored: ISO 8601 with microseconds and a ``Z``."""
    # isoformat is a third cheaper than strftime and gives the same text ("+00:00" -> "Z").
    return datetime.now(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


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
        self._raw: PoolProxiedConnection | None = None
        self._raw_pid = 0

    def close(self) -> None:
        if self._raw is not None and self._raw_pid == os.getpid():
            self._raw.close()
        self._raw = None
        self.engine.dispose()

    def append(self, journal: str, batch: Sequence[Event], ts: str | None = None) -> None:
        """Append ``batch`` in one transaction, chained onto the newest event in the store."""
        if not batch:
            return
        # Payloads are serialised before the write lock is taken, so it is held for less.
        prepared = [(ev, dump_payload(to_payload(ev))) for ev in batch]
        with self._lock:
            if self.engine.dialect.driver == "pysqlite":
                self._append_sqlite(journal, prepared, ts)
            else:
                self._append_any(journal, prepared, ts)

    @staticmethod
    def _chained(
        prev: str, journal: str, prepared: list[tuple[Event, str]], ts: str | None
    ) -> list[tuple[str, str, int, str, str | None, str | None, str, str]]:
        """The rows (in ``_INSERT``'s column order), each sealing the one before; stamped here,
        under the write lock, so timestamps follow the global sequence."""
        rows = []
        for ev, payload in prepared:
            stamp = ts or utc_now()
            host, run_id = ev.host, ev.run_id
            prev = chain_hash(
                prev, canonical(journal, ev.type, ev.version, stamp, host, run_id, payload)
            )
            rows.append((journal, ev.type, ev.version, stamp, host, run_id, payload, prev))
        return rows

    def _writer(self):  # type: ignore[no-untyped-def]
        """The sqlite3 connection this process appends through, opened once and kept."""
        if self._raw is None or self._raw_pid != os.getpid():
            # Opened through the engine, so it has the engine's pragmas (WAL, busy timeout)
            # and pysqlite's implicit transactions turned off.
            self._raw, self._raw_pid = self.engine.raw_connection(), os.getpid()
        return self._raw.driver_connection

    def _append_sqlite(
        self, journal: str, prepared: list[tuple[Event, str]], ts: str | None
    ) -> None:
        # Straight through the sqlite3 module: SQLAlchemy's per-statement overhead was most
        # of the cost of a one-event append (3,000/s through it, 16,000/s without).
        # BEGIN IMMEDIATE takes the write lock before the last hash is read, so two
        # processes can never chain onto the same row.
        conn = self._writer()
        conn.execute("BEGIN IMMEDIATE")
        try:
            last = conn.execute(_LAST_HASH).fetchone()
            rows = self._chained(last[0] if last else GENESIS, journal, prepared, ts)
            conn.executemany(_INSERT, rows)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _append_any(self, journal: str, prepared: list[tuple[Event, str]], ts: str | None) -> None:
        with self.engine.connect().execution_options(write=True) as conn:
            with conn.begin():
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_xact_lock(7411)"))
                prev = conn.execute(
                    select(events.c.hash).order_by(events.c.seq.desc()).limit(1)
                ).scalar()
                rows = self._chained(prev or GENESIS, journal, prepared, ts)
                conn.execute(
                    events.insert(), [dict(zip(_COLUMNS, row, strict=True)) for row in rows]
                )

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
        if self.engine.dialect.name == "sqlite":
            yield from self._read_sqlite(journal, after, types, exclude, run_id)
            return
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

    def _read_sqlite(
        self,
        journal: str | None,
        after: int,
        types: Iterable[str] | None,
        exclude: Iterable[str] | None,
        run_id: str | None,
    ) -> Iterator[Recorded]:
        # Straight through the driver: SQLAlchemy's per-row work was most of the time of
        # reading 100,000 events (the same reason append() goes this way).
        sql = "SELECT seq, journal, ts, type, version, payload, hash FROM events WHERE seq > ?"
        params: list[object] = [after]
        if journal is not None:
            sql += " AND journal = ?"
            params.append(journal)
        for column, values, op in (("type", types, "IN"), ("type", exclude, "NOT IN")):
            if values is not None:
                values = list(values)
                sql += f" AND {column} {op} ({', '.join('?' * len(values)) or 'NULL'})"
                params.extend(values)
        if run_id is not None:
            sql += " AND run_id = ?"
            params.append(run_id)
        raw = self.engine.raw_connection()
        try:
            cursor = raw.driver_connection.execute(sql + " ORDER BY seq", params)
            while rows := cursor.fetchmany(2000):
                for seq, name, ts, type_, version, payload, digest in rows:
                    yield Recorded(
                        seq, name, ts, from_row(type_, version, json.loads(payload)), digest
                    )
        finally:
            raw.close()

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
        prev, checked, last_seq, broken = GENESIS, 0, 0, False
        with self.engine.connect() as conn:
            rows = conn.execution_options(yield_per=5000).execute(
                select(events).order_by(events.c.seq)
            )
            for row in rows:
                checked += 1
                expected = chain_hash(
                    prev,
                    canonical(
                        row.journal,
                        row.type,
                        row.version,
                        row.ts,
                        row.host,
                        row.run_id,
                        row.payload,
                    ),
                )
                if expected != row.hash:
                    if row.seq > last_seq + 1:
                        # Sequences can skip on some databases, so a gap is only named when
                        # the chain breaks across it.
                        missing = (
                            f"event {last_seq + 1}"
                            if row.seq == last_seq + 2
                            else f"events {last_seq + 1} to {row.seq - 1}"
                        )
                        onto = f"event {last_seq}" if last_seq else "the start of the chain"
                        problems.append(
                            f"{missing} removed: event {row.seq} ({row.type} in journal "
                            f"{row.journal!r}, {row.ts}) does not chain onto {onto}"
                        )
                    else:
                        problems.append(
                            f"event {row.seq} ({row.type} in journal {row.journal!r}, {row.ts}) "
                            "does not match its hash: it, or an event before it, was changed "
                            "or removed after it was written"
                        )
                    broken = True
                    break
                prev, last_seq = row.hash, row.seq
            if not broken and self.engine.dialect.name == "sqlite":
                # AUTOINCREMENT remembers the highest sequence ever given out, so removing the
                # newest events (which the chain alone cannot show) leaves a trace here.
                issued = conn.execute(
                    text("SELECT seq FROM sqlite_sequence WHERE name = 'events'")
                ).scalar()
                if issued is not None and issued > last_seq:
                    gone = (
                        f"event {issued} was"
                        if issued == last_seq + 1
                        else f"events {last_seq + 1} to {issued} were"
                    )
                    problems.append(
                        f"{gone} written and removed since: the newest events are missing "
                        f"(the last one left is event {last_seq})"
                    )
        return VerifyReport(checked=checked, problems=problems)
