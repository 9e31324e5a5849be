"""SQLite's backend: its writer and reader straight through the sqlite3 module.

SQLAlchemy's per-statement overhead was most of the cost of a one-event append (3,000/s
through it, 16,000/s without) and its per-row work most of the time of reading 100,000 events.
BEGIN IMMEDIATE takes the write lock before the newest hash is read, so two processes can never
chain onto the same row; the sequence comes from AUTOINCREMENT, under that lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from sqlalchemy import ColumnElement
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from journal.errors import BadInput, Busy, DiskFull
from journal.mapper import GENESIS, Recorded
from journal.store.chain import Item, check_continues, seal
from journal.store.core import FETCH_ROWS, Driver, DriverBackend, recorded
from journal.store.schema import COLUMNS, StoredRow

_T = TypeVar("_T")

_INSERT = f"INSERT INTO events ({', '.join(COLUMNS[1:])}) VALUES ({', '.join('?' * 8)})"
_INSERT_SEQ = f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * 9)})"
_LAST_HASH = "SELECT hash FROM events ORDER BY seq DESC LIMIT 1"
_LAST = "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1"
_TABLES = (
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite!_%' ESCAPE '!'"
)
#: The tables every journal database has, whatever its revision.
JOURNAL_TABLES = {"events", "alembic_version"}


def refuse_foreign(db: str) -> None:
    """BadInput when ``--db`` names a file that is not a journal: another program's SQLite
    database (it would be given journal's tables beside its own) or a file that is no SQLite
    database at all. Asked read-only, before anything opens it for writing (journal's own
    connections switch a database to WAL, which rewrites its header): the file is left as it
    was. An empty file, or no file, becomes a new journal."""
    from journal.store.engine import to_url

    try:
        url = make_url(to_url(db))
    except ArgumentError:
        return  # open_engine says what is wrong with it
    if url.get_backend_name() != "sqlite" or not url.database or url.query.get("uri"):
        return
    path = Path(url.database)
    try:
        if path.stat().st_size == 0:
            return
    except OSError:
        return  # not there (a new journal), or unreadable: opening it says why
    # immutable when no writer has it open (no -wal beside it): a read-only open of a WAL
    # database would leave -wal and -shm files beside another program's database
    wal = path.with_name(path.name + "-wal").exists()
    try:
        conn = sqlite3.connect(f"{path.as_uri()}?mode=ro{'' if wal else '&immutable=1'}", uri=True)
    except sqlite3.Error:
        return
    try:
        tables = sorted(row[0] for row in conn.execute(_TABLES))
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorcode", None) != sqlite3.SQLITE_NOTADB:
            return  # locked, unreadable ...: opening it says why
        raise BadInput(
            f"{db} is not an SQLite database (SQLite: {exc}), so it cannot be a journal; "
            "give a new path or a journal database"
        ) from None
    finally:
        conn.close()
    if tables and not JOURNAL_TABLES <= set(tables):
        listed = ", ".join(tables[:8]) + (f" and {len(tables) - 8} more" if len(tables) > 8 else "")
        raise BadInput(
            f"{db} is an SQLite database of something else (tables: {listed}), not a journal; "
            "give a new path or a journal database"
        )


def _immediately(conn: sqlite3.Connection, work: Callable[[], _T]) -> _T:
    """``work()`` in one write transaction, taken before anything is read; Busy when another
    writer holds the lock past the busy timeout."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc) and "busy" not in str(exc):
            raise
        waited = conn.execute("PRAGMA busy_timeout").fetchone()[0] / 1000
        raise Busy.locked(_path(conn), waited) from None
    try:
        done = work()
        conn.execute("COMMIT")
        return done
    except BaseException as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        if disk_full(exc):
            raise DiskFull.database(_path(conn)) from None
        raise


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's SQLITE_FULL (the sqlite3 error, or SQLAlchemy's around it)."""
    orig = getattr(exc, "orig", exc)
    return getattr(orig, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL


def _path(conn: sqlite3.Connection) -> str:
    return conn.execute("PRAGMA database_list").fetchone()[2] or "the database"


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


def read(conn: sqlite3.Connection, sql: str, params: list[object]) -> Iterator[Recorded]:
    """The events of an :meth:`EventFilter.sql <journal.store.core.EventFilter.sql>` query
    (``?`` marks), :data:`FETCH_ROWS` rows at a time."""
    cursor = conn.execute(sql, params)
    while rows := cursor.fetchmany(FETCH_ROWS):
        yield from recorded(rows)


class SqliteBackend(DriverBackend):
    """SQLite through pysqlite (the sqlite3 module)."""

    driver = Driver(append, import_rows, read)

    def like_any_case(self, column: ColumnElement[str], pattern: str) -> ColumnElement[bool]:
        # SQLite's LIKE already ignores ASCII case (ILIKE would lower() every payload first).
        return column.like(pattern, escape="!")
