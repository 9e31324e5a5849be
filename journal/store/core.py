"""The store's backends: the interface they share, the generic one through SQLAlchemy Core, and
the one that goes straight through a driver (:mod:`journal.store.sqlite`,
:mod:`journal.store.postgres` give it theirs).

Any SQLAlchemy database works through :class:`CoreBackend`: it reads the newest hash and
inserts the sealed rows in one transaction. :class:`DriverBackend` appends through one kept
connection of the driver and reads through the driver too, with the driver's own functions.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Engine, select
from sqlalchemy.pool import PoolProxiedConnection

from journal.mapper import GENESIS, Recorded, from_row
from journal.store.chain import Item, check_continues, seal
from journal.store.schema import COLUMNS, StoredRow, events

#: Rows fetched per round trip when events are read: an output chunk is up to 256 KiB, so a
#: fetch holds at most 8 MiB of them, whatever the journal (small events fetch as fast).
FETCH_ROWS = 32


def recorded(rows: Iterable[tuple[Any, ...]]) -> Iterator[Recorded]:
    """Rows of (seq, journal, ts, type, version, payload, hash) as events, upcast to their
    current version."""
    for seq, name, ts, type_, version, payload, digest in rows:
        yield Recorded(seq, name, ts, from_row(type_, version, json.loads(payload)), digest)


@dataclass(frozen=True)
class EventFilter:
    """Which events a read wants: those after ``after``, optionally of one journal or run, of
    some types or of all types but some."""

    journal: str | None = None
    after: int = 0
    types: tuple[str, ...] | None = None
    exclude: tuple[str, ...] | None = None
    run_id: str | None = None

    def sql(self, mark: str) -> tuple[str, list[object]]:
        """The SELECT for these events in global order, and its parameters (``mark`` is the
        driver's placeholder: ``?`` or ``%s``)."""
        sql = (
            f"SELECT seq, journal, ts, type, version, payload, hash FROM events WHERE seq > {mark}"
        )
        params: list[object] = [self.after]
        # One run's events are found by the run_id index. Where the journal and the type are
        # asked too, SQLite (which keeps no statistics here) takes the (journal, type, seq)
        # index instead and reads every event of that type for each run: a postmortem reading
        # 8,000 runs' output of a 100,000-event journal spent minutes so. Written as
        # expressions (`journal || ''`), those columns serve no index, on any backend.
        unindexed = " || ''" if self.run_id is not None else ""
        if self.journal is not None:
            sql += f" AND journal{unindexed} = {mark}"
            params.append(self.journal)
        for values, op in ((self.types, "IN"), (self.exclude, "NOT IN")):
            if values is not None:
                if not values and op == "NOT IN":
                    continue  # excluding nothing ("NOT IN (NULL)" would exclude everything)
                marks = ", ".join([mark] * len(values)) or "NULL"
                sql += f" AND type{unindexed} {op} ({marks})"
                params.extend(values)
        if self.run_id is not None:
            sql += f" AND run_id = {mark}"
            params.append(self.run_id)
        return sql + " ORDER BY seq", params


class CoreBackend:
    """A database's writer and reader through SQLAlchemy Core (any SQLAlchemy URL), and the
    interface every backend has; the store calls ``append`` and ``import_rows`` under its lock."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def close(self) -> None:
        """Let go of the connection kept for appending (none here)."""

    def append(self, journal: str, items: Sequence[Item]) -> None:
        """Seal ``items`` onto the newest event and insert them, in one transaction."""
        with self.engine.connect().execution_options(write=True) as conn:
            with conn.begin():
                prev = conn.execute(
                    select(events.c.hash).order_by(events.c.seq.desc()).limit(1)
                ).scalar()
                rows = seal(prev or GENESIS, journal, items)
                conn.execute(
                    events.insert(), [dict(zip(COLUMNS[1:], row, strict=True)) for row in rows]
                )

    def import_rows(self, rows: Sequence[StoredRow]) -> None:
        """Insert rows sealed elsewhere, sequence and hash as they are, in one transaction;
        ChainBreak unless they continue this database's chain."""
        with self.engine.begin() as conn:
            last = conn.execute(
                select(events.c.seq, events.c.hash).order_by(events.c.seq.desc()).limit(1)
            ).first()
            check_continues(last.seq if last else 0, last.hash if last else GENESIS, rows)
            conn.execute(events.insert(), [r._asdict() for r in rows])

    def read(self, where: EventFilter) -> Iterator[Recorded]:
        """The events ``where`` asks for, in global order."""
        query = select(events).where(events.c.seq > where.after).order_by(events.c.seq)
        if where.journal is not None:
            query = query.where(events.c.journal == where.journal)
        if where.types is not None:
            query = query.where(events.c.type.in_(where.types))
        if where.exclude is not None:
            query = query.where(events.c.type.not_in(where.exclude))
        if where.run_id is not None:
            query = query.where(events.c.run_id == where.run_id)
        with self.engine.connect() as conn:
            result = conn.execution_options(yield_per=FETCH_ROWS).execute(query)
            yield from recorded(
                (r.seq, r.journal, r.ts, r.type, r.version, r.payload, r.hash) for r in result
            )

    def like_any_case(self, column: ColumnElement[str], pattern: str) -> ColumnElement[bool]:
        """``column LIKE pattern`` (``!`` escapes), ignoring case as far as the database can."""
        return column.ilike(pattern, escape="!")


class KeptConnection:
    """The driver's connection a process appends through: opened once through the engine (so
    it has the engine's settings) and kept, opened again after a fork or once ``lost`` says
    the one kept died."""

    def __init__(self, engine: Engine, lost: Callable[[Any], bool] | None = None) -> None:
        self.engine = engine
        self.lost = lost
        self._raw: PoolProxiedConnection | None = None
        self._pid = 0

    def get(self) -> Any:
        """The driver's connection, opened now if there is none usable."""
        raw = self._raw
        mine = raw is not None and self._pid == os.getpid()
        if raw is None or not mine or (self.lost is not None and self.lost(raw.driver_connection)):
            if raw is not None and mine:
                raw.invalidate()
            self._raw, self._pid = self.engine.raw_connection(), os.getpid()
        return self._raw.driver_connection  # type: ignore[union-attr]

    def close(self) -> None:
        """Close the connection kept, if this process opened it."""
        if self._raw is not None and self._pid == os.getpid():
            self._raw.close()
        self._raw = None


@dataclass(frozen=True)
class Driver:
    """A driver's own functions for the store: ``append(conn, journal, items)``,
    ``import_rows(conn, rows)``, ``read(conn, sql, params)``; its placeholder; and whether a
    kept connection died (``lost(conn)``)."""

    append: Callable[[Any, str, Sequence[Item]], None]
    import_rows: Callable[[Any, Sequence[StoredRow]], None]
    read: Callable[[Any, str, list[object]], Iterator[Recorded]]
    mark: str = "?"
    lost: Callable[[Any], bool] | None = None


class DriverBackend(CoreBackend):
    """A backend straight through its :attr:`driver`, a third to five times faster than through
    SQLAlchemy: appends through one kept connection, reads through a pooled one."""

    driver: Driver

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine)
        self.writer = KeptConnection(engine, self.driver.lost)

    def close(self) -> None:
        self.writer.close()

    def append(self, journal: str, items: Sequence[Item]) -> None:
        self.driver.append(self.writer.get(), journal, items)

    def import_rows(self, rows: Sequence[StoredRow]) -> None:
        self.driver.import_rows(self.writer.get(), rows)

    def read(self, where: EventFilter) -> Iterator[Recorded]:
        sql, params = where.sql(self.driver.mark)
        raw = self.engine.raw_connection()
        try:
            yield from self.driver.read(raw.driver_connection, sql, params)
        finally:
            raw.close()
