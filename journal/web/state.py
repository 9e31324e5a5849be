"""What the pages show of a journal: its timeline and findings, replayed once per new event.

Replaying a journal (and judging it) reads every event, output included; a page view should
not. :class:`JournalStates` keeps the last replay of each journal and reuses it until the
journal's newest sequence number moves (one indexed query), or until a step shown as running
lost its recorder.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass, field

from flask import Flask, abort, current_app
from sqlalchemy import func, select

from journal.events import PitfallAcknowledged
from journal.pitfalls import counts, judge
from journal.pitfalls.base import Finding
from journal.pitfalls.subjects import from_journal
from journal.projections.timeline import StepRunView, Timeline, recorder_alive
from journal.store import EventStore
from journal.store.schema import events


@dataclass
class JournalState:
    """One journal as replayed at ``last_seq``: its timeline, findings, and per run the
    sequence number of its newest event (what changed since a given point)."""

    journal: str
    last_seq: int
    timeline: Timeline
    findings: list[Finding]
    touched: dict[str, int] = field(default_factory=dict)

    def findings_of(self, run_id: str) -> list[Finding]:
        """The findings about one step run."""
        return [f for f in self.findings if f.run == run_id]

    def open_by_run(self) -> dict[str, list[Finding]]:
        """Open (unacknowledged) findings per step run."""
        out: dict[str, list[Finding]] = {}
        for found in self.findings:
            if found.run and found.acknowledged is None:
                out.setdefault(found.run, []).append(found)
        return out

    def open_counts(self) -> dict[str, int]:
        """Open findings by severity."""
        return counts(self.findings)

    def run(self, run_id: str) -> StepRunView | None:
        return self.timeline.runs.get(run_id)


class JournalStates:
    """The store of one app and the latest replay of each of its journals."""

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self._cache: dict[str, JournalState] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def journals(self) -> list[str]:
        return self.store.journals()

    def last_seq(self, journal: str) -> int:
        """The newest sequence number of a journal (0 when it has no event)."""
        query = select(func.max(events.c.seq)).where(events.c.journal == journal)
        with self.store.engine.connect() as conn:
            return int(conn.execute(query).scalar() or 0)

    def _touched(self, journal: str, upto: int) -> dict[str, int]:
        query = (
            select(events.c.run_id, func.max(events.c.seq))
            .where(
                events.c.journal == journal,
                events.c.run_id.is_not(None),
                events.c.seq <= upto,
            )
            .group_by(events.c.run_id)
        )
        with self.store.engine.connect() as conn:
            return {run: int(seq) for run, seq in conn.execute(query)}

    def get(self, journal: str) -> JournalState | None:
        """The journal as it stands now (None when the database has no such journal)."""
        last = self.last_seq(journal)
        if not last:
            return None
        cached = self._cache.get(journal)
        if cached is not None and cached.last_seq == last and not _recorder_lost(cached):
            return cached
        with self._guard:
            lock = self._locks.setdefault(journal, threading.Lock())
        with lock:  # one replay of a journal at a time; others wait for it, not redo it
            cached = self._cache.get(journal)
            if cached is not None and cached.last_seq == last and not _recorder_lost(cached):
                return cached
            found, timeline = replay(self.store, journal, last)
            state = JournalState(journal, last, timeline, found, self._touched(journal, last))
            self._cache[journal] = state
            return state


def replay(store: EventStore, journal: str, upto: int) -> tuple[list[Finding], Timeline]:
    """The findings and timeline of a journal's events up to ``upto`` (included), as
    :func:`journal.service.findings.journal_findings` makes them from all of them: a page says
    exactly which event it shows last, so live updates continue after it without repeating."""
    acks: dict[str, str] = {}
    records = []
    with closing(store.read(journal)) as recorded:
        for rec in recorded:
            if rec.seq > upto:
                break
            if isinstance(rec.event, PitfallAcknowledged):
                acks[rec.event.finding] = rec.event.note
            records.append(rec)
    subject, timeline = from_journal(journal, records)
    return judge(subject, acks), timeline


def _recorder_lost(state: JournalState) -> bool:
    """Whether a run the replay showed as running has lost its recorder since."""
    return any(
        not recorder_alive(run.machine, run.pid)
        for run in state.timeline.runs.values()
        if run.status == "running"
    )


def init_app(app: Flask) -> None:
    """Open the app's database (the schema brought to head, as every command does)."""
    app.extensions["journal"] = JournalStates(EventStore(str(app.config["DB"])))


def warm(app: Flask) -> threading.Thread:
    """Replay every journal in the background, so that the first page view finds it ready
    (a journal of 100,000 events takes seconds to replay and judge, a page milliseconds)."""

    def run() -> None:
        states_ = app.extensions["journal"]
        try:
            for name in states_.journals():
                states_.get(name)
        except Exception:  # a page view will show the same error, on a plain page
            app.logger.exception("replaying the journals in the background failed")

    thread = threading.Thread(target=run, name="journal-warm", daemon=True)
    thread.start()
    return thread


def states() -> JournalStates:
    return current_app.extensions["journal"]


def store() -> EventStore:
    return states().store


def journal_or_404(journal: str) -> JournalState:
    """The journal named in the URL, or a 404 page."""
    state = states().get(journal)
    if state is None:
        abort(404, f"there is no journal {journal!r} in this database")
    return state


def all_states() -> Iterable[JournalState]:
    for name in states().journals():
        state = states().get(name)
        if state is not None:
            yield state
