"""SQLite's writer and reader, straight through the sqlite3 module.

SQLAlchemy's per-statement overhead was most of the cost of a one-event append (3,000/s
through it, 16,000/s without) and its per-row work most of the time of reading 100,000 events.
BEGIN IMMEDIATE takes the write lock before the newest hash is read, so two processes can never
chain onto the same row; the sequence comes from AUTOINCREMENT, under that lock.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

from journal.mapper import GENESIS, Recorded, from_row
from journal.store.chain import Item, check_continues, seal
from journal.store.schema import COLUMNS, StoredRow

_T = TypeVar("_T")

_INSERT = f"INSERT INTO events ({', '.join(COLUMNS[1:])}) VALUES ({', '.join('?' * 8)})"
_INSERT_SEQ = f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * 9)})"
_LAST_HASH = "SELECT hash FROM events ORDER BY seq DESC LIMIT 1"
_LAST = "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1"


def _immediately(conn: sqlite3.Connection, work: Callable[[], _T]) -> _T:
    """``work()`` in one write transaction, taken before anything is read."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        done = work()
        conn.execute("COMMIT")
        return done
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def append(conn: sqlite3.Connection, journal: str, items: Sequence[Item]) -> None:
    """Seal ``items`` onto the newest event and insert them, in one transaction."""

    def work() -> None:
        last = conn.execute(_LAST_HASH).fetchone()
        conn.executemany(_INSERT, seal(last[0] if last else GENESIS, journal, items))

    _immediately(conn, work)


def import_rows(conn: sqlite3.Connection, rows: Sequence[StoredRow]) -> None:
    """Insert rows sealed elsewhere, sequence and hash as they are; ChainBreak unless they
    continue this database's chain."""

    def work() -> None:
        last = conn.execute(_LAST).fetchone()
        check_continues(last[0] if last else 0, last[1] if last else GENESIS, rows)
        conn.executemany(_INSERT_SEQ, rows)

    _immediately(conn, work)


def query(
    journal: str | None,
    after: int,
    types: Iterable[str] | None,
    exclude: Iterable[str] | None,
    run_id: str | None,
    mark: str = "?",
) -> tuple[str, list[object]]:
    """The SQL of `read` and its parameters (``mark`` is the driver's placeholder)."""
    sql = f"SELECT seq, journal, ts, type, version, payload, hash FROM events WHERE seq > {mark}"
    params: list[object] = [after]
    if journal is not None:
        sql += f" AND journal = {mark}"
        params.append(journal)
    for column, values, op in (("type", types, "IN"), ("type", exclude, "NOT IN")):
        if values is not None:
            values = list(values)
            if not values and op == "NOT IN":
                continue  # excluding nothing ("NOT IN (NULL)" would exclude everything)
            sql += f" AND {column} {op} ({', '.join([mark] * len(values)) or 'NULL'})"
            params.extend(values)
    if run_id is not None:
        sql += f" AND run_id = {mark}"
        params.append(run_id)
    return sql + " ORDER BY seq", params


def recorded(rows: Iterable[tuple]) -> Iterator[Recorded]:
    """Rows of `query` as events, upcast to their current version."""
    for seq, name, ts, type_, version, payload, digest in rows:
        yield Recorded(seq, name, ts, from_row(type_, version, json.loads(payload)), digest)


def read(
    conn: sqlite3.Connection,
    journal: str | None,
    after: int,
    types: Iterable[str] | None,
    exclude: Iterable[str] | None,
    run_id: str | None,
) -> Iterator[Recorded]:
    """Events in global order after ``after``, optionally of one journal, run or set of types."""
    cursor = conn.execute(*query(journal, after, types, exclude, run_id))
    while rows := cursor.fetchmany(2000):
        yield from recorded(rows)
