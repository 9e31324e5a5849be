"""The projections' persisted state: a cache of folds, read and written by key.

Each projection of a journal has a head (the code version that made its state and the last
event folded into it) and rows (a JSON document per key). A process loads the head, folds the
events after it, loads only the rows those events touch, and saves the rows it changed with
the new head in one transaction; a save from a process that folded less than the stored head
is dropped (the other one's state already holds it). Rows carry the head they were saved
with, so a reader that sees a row newer than the head it started from knows another process
saved in between, and starts again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, and_, delete, func, insert, select, update
from sqlalchemy.exc import OperationalError

from journal.errors import Busy, DiskFull
from journal.store.engine import busy_timeout_ms
from journal.store.schema import projection_heads, projection_rows
from journal.store.sqlite import disk_full


def _fields(value: Any) -> dict[str, Any]:
    """A dataclass in a row as the mapping of its fields (as :func:`dataclasses.asdict` has
    it, but met as it is written: a state of tens of MB is never copied whole to save it)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_fields)


@dataclass(frozen=True)
class Head:
    """Where a projection's stored state stands."""

    version: str
    seq: int


#: Above every character: ``key < prefix + TOP`` bounds the keys that start with ``prefix``.
TOP = "\U0010ffff"


def _prefixed(prefix: str, start: str = "") -> tuple[Any, ...]:
    """The keys starting with ``prefix`` (and what follows it from ``start`` on): as a range
    too, which the primary key's index answers (SQLite's LIKE alone reads every row of the
    projection)."""
    key = projection_rows.c.key
    return (key >= prefix + start, key < prefix + TOP, key.startswith(prefix, autoescape=True))


def _keys_of(journal: str, projection: str, prefix: str, start: str = "") -> Any:
    """The query of a projection's keys starting with ``prefix`` (from ``start`` on)."""
    return select(projection_rows.c.key).where(
        projection_rows.c.journal == journal,
        projection_rows.c.projection == projection,
        *_prefixed(prefix, start),
    )


class ProjectionCache:
    """The projection tables of one database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def head(self, journal: str, projection: str) -> Head | None:
        query = select(projection_heads.c.version, projection_heads.c.seq).where(
            projection_heads.c.journal == journal, projection_heads.c.projection == projection
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return Head(row.version, row.seq) if row else None

    def rows(
        self, journal: str, projection: str, keys: Iterable[str] | None = None
    ) -> dict[str, Any]:
        """The rows named by ``keys`` (every row when None), decoded; missing keys are absent."""
        query = select(projection_rows.c.key, projection_rows.c.body).where(
            projection_rows.c.journal == journal, projection_rows.c.projection == projection
        )
        wanted = None if keys is None else sorted(set(keys))
        out: dict[str, Any] = {}
        with self.engine.connect() as conn:
            if wanted is None:
                for key, body in conn.execute(query):
                    out[key] = json.loads(body)
                return out
            for start in range(0, len(wanted), 500):
                part = wanted[start : start + 500]
                for key, body in conn.execute(query.where(projection_rows.c.key.in_(part))):
                    out[key] = json.loads(body)
        return out

    def rows_starting(
        self, journal: str, projection: str, prefixes: Iterable[str]
    ) -> dict[str, Any]:
        """Every row whose key starts with one of ``prefixes``, decoded."""
        out: dict[str, Any] = {}
        with self.engine.connect() as conn:
            for prefix in prefixes:
                query = select(projection_rows.c.key, projection_rows.c.body).where(
                    projection_rows.c.journal == journal,
                    projection_rows.c.projection == projection,
                    *_prefixed(prefix),
                )
                for key, body in conn.execute(query):
                    out[key] = json.loads(body)
        return out

    def keys(
        self,
        journal: str,
        projection: str,
        prefix: str,
        suffix: str = "",
        start: str = "",
        end: str = "",
    ) -> list[str]:
        """Every key starting with ``prefix`` (and ending with ``suffix``; from ``prefix`` +
        ``start`` on, and before ``prefix`` + ``end`` where given), in ascending order (no
        row is decoded)."""
        query = _keys_of(journal, projection, prefix, start).order_by(projection_rows.c.key)
        if end:
            query = query.where(projection_rows.c.key < prefix + end)
        if suffix:
            query = query.where(projection_rows.c.key.endswith(suffix, autoescape=True))
        with self.engine.connect() as conn:
            return list(conn.execute(query).scalars())

    def last_keys(
        self,
        journal: str,
        projection: str,
        prefix: str,
        limit: int,
        start: str = "",
        end: str = "",
    ) -> list[str]:
        """The ``limit`` greatest keys starting with ``prefix`` (from ``prefix`` + ``start``
        on, and before ``prefix`` + ``end`` where given), in ascending order."""
        query = _keys_of(journal, projection, prefix, start)
        if end:
            query = query.where(projection_rows.c.key < prefix + end)
        query = query.order_by(projection_rows.c.key.desc()).limit(limit)
        with self.engine.connect() as conn:
            return sorted(conn.execute(query).scalars())

    def first_keys(
        self, journal: str, projection: str, prefix: str, limit: int, start: str = ""
    ) -> list[str]:
        """The ``limit`` least keys starting with ``prefix`` (from ``prefix`` + ``start`` on),
        in ascending order."""
        query = (
            _keys_of(journal, projection, prefix, start)
            .order_by(projection_rows.c.key)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return list(conn.execute(query).scalars())

    def count(self, journal: str, projection: str, prefix: str, start: str = "") -> int:
        """How many keys start with ``prefix`` (from ``prefix`` + ``start`` on)."""
        query = select(func.count()).where(
            projection_rows.c.journal == journal,
            projection_rows.c.projection == projection,
            *_prefixed(prefix, start),
        )
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar() or 0)

    def holds(self, journal: str, projection: str, prefix: str, needle: str) -> bool:
        """Whether a row whose key starts with ``prefix`` holds ``needle`` in its JSON (the
        first one found answers: no row is decoded)."""
        query = (
            select(projection_rows.c.key)
            .where(
                projection_rows.c.journal == journal,
                projection_rows.c.projection == projection,
                *_prefixed(prefix),
                projection_rows.c.body.contains(needle, autoescape=True),
            )
            .limit(1)
        )
        with self.engine.connect() as conn:
            return conn.execute(query).first() is not None

    def save(
        self,
        journal: str,
        projection: str,
        head: Head,
        rows: Mapping[str, Any | None],
        since: Head | None,
        replace: bool = False,
    ) -> bool:
        """Store ``rows`` (None deletes a key) and move the head to ``head``, in one
        transaction, unless the stored head is no longer ``since`` (another process saved
        first: its state already holds what this one folded, or more); ``replace`` drops
        every other row of the projection first (a state folded anew). Whether it saved."""
        try:
            return self._save(journal, projection, head, rows, since, replace)
        except OperationalError as exc:
            path = self.engine.url.database or "the database"
            if disk_full(exc):
                raise DiskFull.database(path) from None
            if "locked" not in str(exc):
                raise
            raise Busy.locked(path, busy_timeout_ms() / 1000) from None

    def _save(
        self,
        journal: str,
        projection: str,
        head: Head,
        rows: Mapping[str, Any | None],
        since: Head | None,
        replace: bool,
    ) -> bool:
        key = and_(
            projection_heads.c.journal == journal, projection_heads.c.projection == projection
        )
        with self.engine.connect().execution_options(write=True) as conn:
            with conn.begin():
                query = select(projection_heads.c.version, projection_heads.c.seq).where(key)
                if conn.dialect.name == "postgresql":
                    query = query.with_for_update()
                found = conn.execute(query).first()
                now = Head(found.version, found.seq) if found else None
                if now != since:
                    return False
                where = and_(
                    projection_rows.c.journal == journal,
                    projection_rows.c.projection == projection,
                )
                if replace:
                    conn.execute(delete(projection_rows).where(where))
                changed = [] if replace else list(rows)
                for start in range(0, len(changed), 500):
                    part = changed[start : start + 500]
                    conn.execute(
                        delete(projection_rows).where(where, projection_rows.c.key.in_(part))
                    )
                values = [
                    {
                        "journal": journal,
                        "projection": projection,
                        "key": k,
                        "body": _JSON.encode(v),
                    }
                    for k, v in rows.items()
                    if v is not None
                ]
                if values:
                    conn.execute(insert(projection_rows), values)
                if now is None:
                    conn.execute(
                        insert(projection_heads).values(
                            journal=journal,
                            projection=projection,
                            version=head.version,
                            seq=head.seq,
                        )
                    )
                else:
                    conn.execute(
                        update(projection_heads)
                        .where(key)
                        .values(version=head.version, seq=head.seq)
                    )
        return True

    def drop(self, journal: str | None = None, projection: str | None = None) -> None:
        """Forget stored state: of one journal, one projection, or all."""
        with self.engine.connect().execution_options(write=True) as conn:
            with conn.begin():
                for table in (projection_rows, projection_heads):
                    query = delete(table)
                    if journal is not None:
                        query = query.where(table.c.journal == journal)
                    if projection is not None:
                        query = query.where(table.c.projection == projection)
                    conn.execute(query)
