"""The event store: the only writer, append-only, one global sequence sealed by a hash chain.

One contract, several backends: SQLite (the default; :mod:`journal.store.sqlite`) and
PostgreSQL (:mod:`journal.store.postgres`) each have a writer of their own, straight through
the driver; any other SQLAlchemy database goes through SQLAlchemy Core.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from itertools import groupby
from operator import attrgetter

from sqlalchemy import Engine, func, select
from sqlalchemy.pool import PoolProxiedConnection

from journal.events import Event
from journal.mapper import GENESIS, Recorded, dump_payload, to_payload
from journal.store import postgres, sqlite
from journal.store.chain import ChainBreak, Item, check_continues, seal, utc_now
from journal.store.engine import open_engine
from journal.store.schema import COLUMNS, StoredRow, events
from journal.store.verify import VerifyReport, verify

__all__ = ["ChainBreak", "EventStore", "Recorded", "StoredRow", "VerifyReport", "utc_now"]


class EventStore:
    """Appends events to and reads them from one database; safe across threads and processes."""

    def __init__(self, db: str) -> None:
        self.db = db
        self.engine: Engine = open_engine(db)
        self.backend = self.engine.dialect.name
        if self.backend == "sqlite" and self.engine.dialect.driver != "pysqlite":
            self.backend = "sqlite+" + self.engine.dialect.driver  # through SQLAlchemy
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
        items = [
            (ev.type, ev.version, ev.host, ev.run_id, dump_payload(to_payload(ev)), ts)
            for ev in batch
        ]
        self._append(journal, items)

    def append_rows(self, rows: Sequence[StoredRow]) -> None:
        """Append rows read from another database as new events of this one: their journal,
        type, version, timestamp and payload kept, their sequence and hash this chain's."""
        # Each run of rows of one journal is one append, so the rows keep their order.
        for journal, run in groupby(rows, key=attrgetter("journal")):
            self._append(
                journal, [(r.type, r.version, r.host, r.run_id, r.payload, r.ts) for r in run]
            )

    def import_rows(self, rows: Sequence[StoredRow]) -> None:
        """Add rows sealed in another database as they are, sequence and hash included, in
        one transaction; ChainBreak (nothing added) unless they continue this chain."""
        if not rows:
            return
        with self._lock:
            if self.backend == "sqlite":
                sqlite.import_rows(self._writer(), rows)
            elif self.backend == "postgresql":
                postgres.import_rows(self._writer(), rows)
            else:
                with self.engine.begin() as conn:
                    last = conn.execute(
                        select(events.c.seq, events.c.hash).order_by(events.c.seq.desc()).limit(1)
                    ).first()
                    check_continues(last.seq if last else 0, last.hash if last else GENESIS, rows)
                    conn.execute(events.insert(), [r._asdict() for r in rows])

    def _append(self, journal: str, items: list[Item]) -> None:
        with self._lock:
            if self.backend == "sqlite":
                sqlite.append(self._writer(), journal, items)
            elif self.backend == "postgresql":
                postgres.append(self._writer(), journal, items)
            else:
                self._append_any(journal, items)

    def _writer(self):  # type: ignore[no-untyped-def]
        """The driver's connection this process appends through, opened once and kept."""
        raw = self._raw
        if raw is None or self._raw_pid != os.getpid() or self._lost(raw):
            # Opened through the engine, so it has the engine's settings (SQLite: WAL, the
            # busy timeout, and pysqlite's implicit transactions turned off).
            if raw is not None and self._raw_pid == os.getpid():
                raw.invalidate()
            self._raw, self._raw_pid = self.engine.raw_connection(), os.getpid()
        return self._raw.driver_connection

    def _lost(self, raw: PoolProxiedConnection) -> bool:
        """Whether a kept PostgreSQL connection died (its server restarted, say)."""
        if self.backend != "postgresql":
            return False
        return bool(raw.driver_connection.broken or raw.driver_connection.closed)  # type: ignore[union-attr]

    def _append_any(self, journal: str, items: list[Item]) -> None:
        with self.engine.connect().execution_options(write=True) as conn:
            with conn.begin():
                prev = conn.execute(
                    select(events.c.hash).order_by(events.c.seq.desc()).limit(1)
                ).scalar()
                rows = seal(prev or GENESIS, journal, items)
                conn.execute(
                    events.insert(), [dict(zip(COLUMNS[1:], row, strict=True)) for row in rows]
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
        if self.backend == "sqlite":
            raw = self.engine.raw_connection()
            try:
                yield from sqlite.read(
                    raw.driver_connection, journal, after, types, exclude, run_id
                )
            finally:
                raw.close()
            return
        if self.backend == "postgresql":
            # Straight through psycopg too: a third faster than through SQLAlchemy's rows.
            sql, params = sqlite.query(journal, after, types, exclude, run_id, mark="%s")
            raw = self.engine.raw_connection()
            try:
                yield from postgres.read(raw.driver_connection, sql, params)
            finally:
                raw.close()
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
            yield from sqlite.recorded(
                (r.seq, r.journal, r.ts, r.type, r.version, r.payload, r.hash) for r in result
            )

    def rows(
        self, journal: str | None = None, *, after: int = 0, batch: int = 2000
    ) -> Iterator[list[StoredRow]]:
        """The stored rows after ``after`` in global order, as they are (nothing decoded or
        upcast), ``batch`` at a time: what `journal db copy` moves."""
        query = select(*(events.c[name] for name in COLUMNS)).where(events.c.seq > after)
        if journal is not None:
            query = query.where(events.c.journal == journal)
        with self.engine.connect() as conn:
            result = conn.execution_options(yield_per=batch).execute(query.order_by(events.c.seq))
            for part in result.partitions():
                yield [StoredRow(*row) for row in part]

    def last(self) -> StoredRow | None:
        """The newest row of the database, None when it holds no event."""
        query = select(*(events.c[name] for name in COLUMNS))
        with self.engine.connect() as conn:
            row = conn.execute(query.order_by(events.c.seq.desc()).limit(1)).first()
        return StoredRow(*row) if row else None

    def row(self, seq: int) -> StoredRow | None:
        """The row numbered ``seq``, None when there is none."""
        query = select(*(events.c[name] for name in COLUMNS)).where(events.c.seq == seq)
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return StoredRow(*row) if row else None

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
        return verify(self.engine)
