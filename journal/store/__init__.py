"""The event store: the only writer and reader of the events table, append-only, one global
sequence sealed by a hash chain. What the rest asks of the table (a run's output chunks, the
runs whose output holds a text, a journal's newest event ...) is a method here.

One contract, one backend per database, chosen once (:func:`backend_for`): SQLite (the default;
:mod:`journal.store.sqlite`) and PostgreSQL (:mod:`journal.store.postgres`) each write and read
straight through their driver; any other SQLAlchemy database goes through SQLAlchemy Core
(:mod:`journal.store.core`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from itertools import groupby
from operator import attrgetter

from sqlalchemy import Engine, case, func, or_, select, text

from journal.errors import BadInput, shown
from journal.events import Event, OutputChunk, StepFinished, StepStarted
from journal.mapper import GENESIS, Recorded, dump_payload, from_row, to_payload
from journal.output import chunk_text
from journal.redact import Redactor
from journal.runs import Alive
from journal.store.anchor import Anchor
from journal.store.chain import ChainBreak, Item, utc_now
from journal.store.core import CoreBackend, EventFilter
from journal.store.engine import open_engine
from journal.store.leases import Leases
from journal.store.postgres import PostgresBackend
from journal.store.schema import COLUMNS, StoredRow, events
from journal.store.sqlite import SqliteBackend, refuse_foreign
from journal.store.verify import VerifyReport, verify

__all__ = ["ChainBreak", "EventStore", "Recorded", "StoredRow", "VerifyReport", "utc_now"]

#: Output rows fetched per round trip when a run's chunks are walked (a chunk is at most 256 KiB).
OUTPUT_FETCH = 8


def backend_for(engine: Engine) -> CoreBackend:
    """The backend of an engine's database: SQLite through pysqlite and PostgreSQL each
    straight through their driver, anything else through SQLAlchemy Core."""
    dialect = engine.dialect
    if dialect.name == "sqlite" and dialect.driver == "pysqlite":
        return SqliteBackend(engine)
    if dialect.name == "postgresql":
        return PostgresBackend(engine)
    return CoreBackend(engine)


#: The longest journal and host names every backend stores as they are: PostgreSQL's columns
#: are varchar(200) and refuse a longer value, which SQLite would keep.
NAME_LENGTH = {"journal": events.c.journal.type.length, "host": events.c.host.type.length}


def _fits(journal: str, host: str | None) -> None:
    """Bad input, before anything is written, for a journal or host name longer than its
    column holds on PostgreSQL: the same limit on every backend."""
    for what, name in (("journal", journal), ("host", host)):
        most = NAME_LENGTH[what]
        if name is not None and len(name) > most:
            raise BadInput(
                f"the {what} name {shown(name)} is longer than {most} characters, the most "
                f"a {what} name may be on every database (SQLite and PostgreSQL alike), so "
                "nothing was recorded; give a shorter name"
            )


class EventStore:
    """Appends events to and reads them from one database; safe across threads and processes."""

    def __init__(self, db: str) -> None:
        self.db = db
        refuse_foreign(db)  # another program's database is never given journal's tables
        self.engine: Engine = open_engine(db)
        try:
            self.backend = backend_for(self.engine)
        except BaseException:
            self.engine.dispose()  # a database refused (a newer schema, say): no connection left
            raise
        self._lock = threading.Lock()
        self._redactor: Redactor | None = None

    def close(self) -> None:
        self.backend.close()
        self.engine.dispose()

    def know_secrets(self, values: Iterable[str]) -> None:
        """Mask ``values`` (a runbook's ``redact`` list) in every event appended from now on,
        besides the patterns and the values of journal's secret-named variables."""
        self._redactor = Redactor.for_run(values)

    def _scrubbed(self, event: Event) -> Event:
        """``event`` with secrets masked in its text fields (strings, and the strings in its
        dicts and lists; a value under a secret-named key whole)."""
        if isinstance(event, OutputChunk):
            return event  # redacted by the recorder, which sees a secret split across chunks
        if self._redactor is None:
            self._redactor = Redactor.for_run()
        changes = {}
        for spec in dataclasses.fields(event):
            value = getattr(event, spec.name)
            if isinstance(value, str | dict | list | tuple) and spec.name != "redactions":
                masked = self._redactor.value(value, f"{event.type}.{spec.name}")
                if masked != value:
                    changes[spec.name] = masked
        return dataclasses.replace(event, **changes) if changes else event

    @property
    def leases(self) -> Leases:
        """The recorder leases: heartbeats of the processes recording steps."""
        return Leases(self.engine)

    def liveness(self) -> Alive:
        """Whether the recorder of an unfinished run (its machine and pid) is alive, on any
        machine, by its heartbeat."""
        return self.leases.alive()

    def append(self, journal: str, batch: Sequence[Event], ts: str | None = None) -> None:
        """Append ``batch`` in one transaction, chained onto the newest event in the store;
        every event's text is redacted first (a note, an acknowledgement, a label, a probe's
        JSON: whatever path it came by), output chunks being redacted as they are recorded."""
        if not batch:
            return
        # Payloads are serialised before the write lock is taken, so it is held for less.
        items = []
        for event in batch:
            if type(event) is not OutputChunk:  # a chunk is redacted as it is recorded
                event = self._scrubbed(event)
            payload = dump_payload(to_payload(event))
            items.append((event.type, event.version, event.host, event.run_id, payload, ts))
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
        for row in rows:
            _fits(row.journal, row.host)
        with self._lock:
            self.backend.import_rows(rows)

    def _append(self, journal: str, items: list[Item]) -> None:
        _fits(journal, None)
        for host in {item[2] for item in items}:
            _fits(journal, host)
        with self._lock:
            self.backend.append(journal, items)

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
        where = EventFilter(
            journal,
            after,
            None if types is None else tuple(types),
            None if exclude is None else tuple(exclude),
            run_id,
        )
        return self.backend.read(where)

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

    def has_journal(self, journal: str) -> bool:
        """Whether the database holds an event of ``journal`` (one row looked up by the
        journal's index, whatever the size of the table)."""
        query = select(events.c.seq).where(events.c.journal == journal).limit(1)
        with self.engine.connect() as conn:
            return conn.execute(query).first() is not None

    def count(self, journal: str | None = None) -> int:
        """How many events the database (or one journal) holds."""
        query = select(func.count()).select_from(events)
        if journal is not None:
            query = query.where(events.c.journal == journal)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar() or 0)

    def unfinished_runs(self, journal: str) -> list[str]:
        """The step runs of a journal that started and have no end recorded (running, lost or
        detached), oldest first: asked of the start and end events only (an index on the
        journal and type), not of the whole journal."""
        finished = select(events.c.run_id).where(
            events.c.journal == journal, events.c.type == StepFinished.type
        )
        query = (
            select(events.c.run_id)
            .where(
                events.c.journal == journal,
                events.c.type == "StepStarted",
                events.c.run_id.not_in(finished),
            )
            .order_by(events.c.seq)
        )
        with self.engine.connect() as conn:
            return [row.run_id for row in conn.execute(query)]

    def step_runs(
        self,
        journal: str,
        prefix: str | None = None,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int = 6,
    ) -> list[tuple[str, int]]:
        """Up to ``limit`` step runs of a journal, each with its StepStarted's seq: those whose
        id starts with ``prefix``, in id order (an id sorts before the longer ones it starts);
        those whose ids sort right ``after`` or ``before`` a text, nearest first; with none of
        them, the latest runs, newest first. Looked up by the run index (the latest, by the
        journal's), whatever the length of the journal."""
        query = select(events.c.run_id, events.c.seq).limit(limit)
        if prefix is None and after is None and before is None:
            query = query.where(events.c.journal == journal, events.c.type == StepStarted.type)
            query = query.order_by(events.c.seq.desc())
        else:
            # SQLite would rather walk every start of the journal by its (journal, type)
            # index: asked of expressions, they leave the run index's range to answer.
            query = query.where(
                events.c.journal.concat("") == journal,
                events.c.type.concat("") == StepStarted.type,
            )
            if before is not None:
                query = query.where(events.c.run_id < before).order_by(events.c.run_id.desc())
            elif after is not None:
                query = query.where(events.c.run_id > after).order_by(events.c.run_id)
            else:  # a range, not LIKE: SQLite's LIKE ignores case, so no index serves it
                query = query.where(
                    events.c.run_id >= prefix, events.c.run_id < f"{prefix}\uffff"
                ).order_by(events.c.run_id)
        with self.engine.connect() as conn:
            rows = [(r.run_id, r.seq) for r in conn.execute(query)]
        return [(run, seq) for run, seq in rows if prefix is None or run.startswith(prefix)]

    def id_neighbours(self, ids: Sequence[str]) -> dict[str, tuple[str | None, str | None]]:
        """For each id, the run ids right before and right after it in id order, among every
        run of the store (all its journals: a start unique there is unique in each): one seek
        of the run index each, a hundred ids to a query."""
        found: dict[str, tuple[str | None, str | None]] = {}
        ids = list(dict.fromkeys(ids))
        with self.engine.connect() as conn:
            for at in range(0, len(ids), 100):
                batch = ids[at : at + 100]
                # plain text: compiling 200 subqueries as expressions cost more than the seeks
                columns = ", ".join(
                    f"(SELECT max(run_id) FROM events WHERE run_id < :r{i}), "
                    f"(SELECT min(run_id) FROM events WHERE run_id > :r{i})"
                    for i in range(len(batch))
                )
                params = {f"r{i}": run for i, run in enumerate(batch)}
                row = conn.execute(text(f"SELECT {columns}"), params).one()
                for i, run in enumerate(batch):
                    found[run] = (row[2 * i], row[2 * i + 1])
        return found

    def seq_since(self, journal: str, ts: str) -> int:
        """The first event of ``journal`` recorded at or after ``ts`` (as the store writes
        times), found by halving the range of sequence numbers (events are stored in the
        order of their times); one past the last when none is."""
        last = self.last_seq(journal)
        lo, hi = 1, last + 1
        with self.engine.connect() as conn:
            while lo < hi:
                mid = (lo + hi) // 2
                query = (
                    select(events.c.seq, events.c.ts)
                    .where(events.c.journal == journal, events.c.seq >= mid)
                    .order_by(events.c.seq)
                    .limit(1)
                )
                row = conn.execute(query).first()
                if row is None or row.ts >= ts:
                    hi = mid
                else:
                    lo = row.seq + 1
        return lo

    def last_seq(self, journal: str) -> int:
        """The newest sequence number of a journal (0 when it has no event)."""
        query = select(func.max(events.c.seq)).where(events.c.journal == journal)
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar() or 0)

    def output_chunks(
        self, run_id: str, *, after: int = 0, upto: int | None = None
    ) -> Iterator[tuple[int, OutputChunk]]:
        """A run's output chunks with their sequence numbers, in stored order (``after`` <
        seq <= ``upto``), read a few rows at a time."""
        query = (
            select(events.c.seq, events.c.type, events.c.version, events.c.payload)
            .where(
                events.c.run_id == run_id,
                events.c.type == OutputChunk.type,
                events.c.seq > after,
            )
            .order_by(events.c.seq)
        )
        if upto is not None:
            query = query.where(events.c.seq <= upto)
        with self.engine.connect() as conn:
            for row in conn.execution_options(yield_per=OUTPUT_FETCH).execute(query):
                event = from_row(row.type, row.version, json.loads(row.payload))
                assert isinstance(event, OutputChunk)
                yield row.seq, event

    def last_output_seq(self, run_id: str) -> int:
        """The sequence number of a run's newest output chunk (0 when it has none)."""
        query = select(func.max(events.c.seq)).where(
            events.c.run_id == run_id, events.c.type == OutputChunk.type
        )
        with self.engine.connect() as conn:
            return int(conn.execute(query).scalar() or 0)

    def run_progress(self, run_id: str, after: int) -> tuple[int, int]:
        """The newest event of a run after ``after`` (0: none), and its StepFinished (0: none)."""
        finished = case((events.c.type == StepFinished.type, events.c.seq))
        query = select(func.max(events.c.seq), func.max(finished)).where(
            events.c.run_id == run_id, events.c.seq > after
        )
        with self.engine.connect() as conn:
            newest, done = conn.execute(query).one()
        return int(newest or 0), int(done or 0)

    def runs_touched(self, journal: str, after: int) -> dict[str, int]:
        """The step runs of a journal that gained events after ``after``, each with the
        sequence number of its newest (what a live page replaces)."""
        query = (
            select(events.c.run_id, func.max(events.c.seq))
            .where(events.c.journal == journal, events.c.seq > after, events.c.run_id.is_not(None))
            .group_by(events.c.run_id)
        )
        with self.engine.connect() as conn:
            return {run: int(seq) for run, seq in conn.execute(query)}

    def runs_with_text(self, journal: str, needle: str) -> set[str]:
        """The step runs of a journal whose output holds ``needle`` (case-insensitive)."""
        return set(self.lines_with_text(journal, needle))

    def lines_with_text(self, journal: str, needle: str, width: int = 240) -> dict[str, str]:
        """Per step run of a journal whose output holds ``needle`` (case-insensitive), the
        first line that holds it (colour codes dropped; at most ``width`` characters, around
        the match).

        A LIKE over the stored chunk payloads narrows the candidates; only the chunks it
        returns are decoded to confirm the match, so one that straddles two chunks is not
        found (the recorder cuts chunks at line ends, so a match within a line is)."""
        if not needle:
            return set()
        escaped = json.dumps(needle, ensure_ascii=False)[1:-1]  # as it is stored in the payload
        for special in ("!", "%", "_"):
            escaped = escaped.replace(special, "!" + special)
        payload = events.c.payload
        text_match = self.backend.like_any_case(payload, f"%{escaped}%")
        # A payload also holds the chunk's other fields (stream, host, run), and a base64 chunk
        # holds no text a LIKE can see: each candidate run is confirmed on its decoded chunks,
        # stopping at the first that holds the needle.
        candidate = or_(text_match, payload.like('%"encoding":"base64"%'))
        chunks = events.c.type == OutputChunk.type
        runs = (
            select(events.c.run_id).distinct().where(events.c.journal == journal, chunks, candidate)
        )
        wanted = needle.casefold()
        found: dict[str, str] = {}
        with self.engine.connect() as conn:
            for run_id in list(conn.execute(runs).scalars()):
                rows = conn.execution_options(yield_per=16).execute(
                    select(events.c.type, events.c.version, events.c.payload)
                    .where(events.c.run_id == run_id, chunks, candidate)
                    .order_by(events.c.seq)
                )
                for row in rows:
                    chunk = from_row(row.type, row.version, json.loads(row.payload))
                    assert isinstance(chunk, OutputChunk)
                    line = _line_with(chunk_text(chunk), wanted, width)
                    if line is not None:
                        found[run_id] = line
                        break
                rows.close()
        return found

    def verify(self, anchors: Sequence[Anchor] = (), witness: str = "") -> VerifyReport:
        """Recompute the hash chain over every row, check the schema and its triggers, and
        hold the chain against ``anchors`` read from ``witness``."""
        return verify(self.engine, anchors, witness or "the witness")

    def anchor(self, db: str) -> Anchor | None:
        """The chain's head as an anchor to keep elsewhere; None when it holds no event."""
        last, first = self.last(), self.row(1)
        if last is None:
            return None
        return Anchor(
            seq=last.seq,
            hash=last.hash,
            first=first.hash if first else GENESIS,
            at=utc_now(),
            db=db,
        )


#: Terminal escapes (colours, OSC links) left out of a matching line shown as text.
_ESCAPES = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?)")


def _line_with(text: str, wanted: str, width: int) -> str | None:
    """The first line of ``text`` that holds ``wanted`` (casefolded), colour codes dropped,
    cut to ``width`` characters around the match; None when no line holds it."""
    if wanted not in text.casefold():
        return None
    for raw in text.splitlines():
        line = _ESCAPES.sub("", raw)
        at = line.casefold().find(wanted)
        if at < 0:
            continue
        if len(line) <= width:
            return line
        start = max(0, min(at - width // 3, len(line) - width))
        cut = line[start : start + width]
        return ("…" if start else "") + cut + ("…" if start + width < len(line) else "")
    return ""  # the match spans lines or escapes: the run holds it, no one line does
