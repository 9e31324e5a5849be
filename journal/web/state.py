"""What the pages show of a journal: its timeline and findings, kept current as it grows.

Folding a journal (and judging it) reads every event, output included; a page view should
not. :class:`JournalStates` folds each journal once, then only the events appended since
(one indexed query says whether there are any), and reuses the last state while nothing
changed and no step shown as running lost its recorder.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import closing
from dataclasses import dataclass, field, replace
from typing import Any

from flask import Flask, abort, current_app

from journal.cli.render import Filter
from journal.mapper import Recorded
from journal.pitfalls import counts
from journal.pitfalls.acks import TYPES as ACK_TYPES
from journal.pitfalls.acks import fold_ack
from journal.pitfalls.base import Finding
from journal.pitfalls.ledger import Ledger
from journal.pitfalls.lifecycle import AckBook, with_acks
from journal.projections import stored
from journal.projections.digest import Digest
from journal.projections.packages import PackageDiff
from journal.projections.timeline import StepRunView, Timeline, TimelineItem
from journal.service.runs import latest_attempt, rollback_runs
from journal.service.story import Story, story
from journal.store import EventStore
from journal.store.cache import Head, ProjectionCache
from journal.web.fold import DiffCache, JournalFold


@dataclass
class JournalState:
    """One journal as folded at ``last_seq``: its timeline, findings, and per run the
    sequence number of its newest event (what changed since a given point)."""

    journal: str
    last_seq: int
    timeline: Timeline
    findings: list[Finding]
    touched: dict[str, int] = field(default_factory=dict)
    #: the event the findings were judged at (``last_seq``, or older while judging catches up)
    findings_seq: int = 0
    findings_generation: int = field(default=0, repr=False)
    diffs: DiffCache = field(default_factory=DiffCache, repr=False)
    #: how many items the timeline holds in all when only its newest are loaded (0: all are)
    partial: int = 0
    _story: Story | None = field(default=None, repr=False, compare=False)
    _turns: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def story(self) -> Story | None:
        """The upgrade's story (stack before and after, headline figures, findings by state),
        told once per state from the timeline and findings it holds; None while only the
        newest items are loaded (their first readings are not among them)."""
        if self.partial:
            return None
        if self._story is None:
            self._story = story(self.timeline, self.findings)
        return self._story

    def told(self) -> Story | None:
        """The story as a page shows it at once (None: the page asks for it after)."""
        return self.story()

    def findings_of(self, run_id: str) -> list[Finding]:
        """The findings about one step run."""
        return [f for f in self.findings if f.run == run_id]

    def open_by_run(self) -> dict[str, list[Finding]]:
        """Open findings (neither resolved nor acknowledged) per step run."""
        out: dict[str, list[Finding]] = {}
        for found in self.findings:
            if found.run and found.is_open:
                out.setdefault(found.run, []).append(found)
        return out

    def findings_by_run(self) -> dict[str, list[Finding]]:
        """Every finding per step run, whatever its state (the timeline's badges)."""
        out: dict[str, list[Finding]] = {}
        for found in self.findings:
            if found.run:
                out.setdefault(found.run, []).append(found)
        return out

    def turns(self) -> dict[str, Any]:
        """What the story header says went wrong and what fixed it, and what is still open:
        ``fixed``, :data:`TURNS` errors and warnings a later run (or probe, figure) resolved,
        errors first, each in the order found; ``open``, as many open ones, errors first;
        ``more_fixed``, ``more_open``: how many more of each there are. Worked out once per
        state (every page of the journal shows it)."""
        if self._turns is None:
            self._turns = _turns(self.findings, TURNS)
        return self._turns

    def open_counts(self) -> dict[str, int] | None:
        """Open findings by severity (None while only the newest items are loaded)."""
        return None if self.partial else counts(self.findings)

    def diff(self, run: StepRunView) -> PackageDiff | None:
        """What the step changed in the target env (None without both snapshots)."""
        return self.diffs.diff(run)

    def run(self, run_id: str) -> StepRunView | None:
        return self.timeline.runs.get(run_id)

    def host_runs(self, host: str) -> list[StepRunView]:
        """The host's step runs in timeline order (an import dated by its transcript stands
        where its time falls, as the page shows it)."""
        items = self.timeline.items
        return [r for r in items if isinstance(r, StepRunView) and r.host == host]

    def neighbours(self, run: StepRunView) -> tuple[StepRunView | None, ...]:
        """The step runs of ``run``'s host right before and after it, then the runs of its
        step on its host right before and after it."""
        same_host = self.host_runs(run.host)
        at = next(i for i, r in enumerate(same_host) if r.run_id == run.run_id)
        before = same_host[at - 1] if at else None
        after = same_host[at + 1] if at + 1 < len(same_host) else None
        same_step = [r for r in same_host if r.step == run.step]
        at = same_step.index(run)
        earlier = same_step[at - 1] if at else None
        later = same_step[at + 1] if at + 1 < len(same_step) else None
        return before, after, earlier, later

    def rollback_first_try(self, run: StepRunView) -> bool:
        """Whether ``run`` is the first try of its step's latest attempt on its host (what
        `rollback --to before:STEP` names)."""
        mine = rollback_runs(self.host_runs(run.host), run.host)
        at = latest_attempt(mine, run.step)
        return at is not None and mine[at].run_id == run.run_id


class _Runs(dict[str, StepRunView]):
    """The step runs of a stored timeline by id, each read from its index when first asked
    (a page shows a few of a journal's thousands)."""

    def __init__(self, digest: Digest) -> None:
        super().__init__()
        self.digest = digest
        self.missing: set[str] = set()

    def _load(self, run_id: str) -> StepRunView | None:
        if run_id in self.missing:
            return None
        if not dict.__contains__(self, run_id):
            view = self.digest.run_of(run_id)
            if view is None:
                self.missing.add(run_id)
                return None
            self[run_id] = view
        return dict.__getitem__(self, run_id)

    def __missing__(self, run_id: str) -> StepRunView:
        view = self._load(run_id)
        if view is None:
            raise KeyError(run_id)
        return view

    def __contains__(self, run_id: object) -> bool:
        return isinstance(run_id, str) and self._load(run_id) is not None

    def get(self, run_id: str, default: Any = None) -> Any:  # type: ignore[override]
        view = self._load(run_id)
        return default if view is None else view


#: How many findings the story header names of what was fixed, and of what is open.
TURNS = 3


def _turns(findings: list[Finding], limit: int) -> dict[str, Any]:
    fixed: list[Finding] = []
    still: list[Finding] = []
    for found in findings:
        if found.severity == "info":
            continue
        if found.resolved_by is not None:
            fixed.append(found)
        elif found.is_open:
            still.append(found)

    def worst_first(found: Finding) -> bool:
        return found.severity != "error"

    fixed.sort(key=worst_first)
    still.sort(key=worst_first)
    return {
        "fixed": fixed[:limit],
        "open": still[:limit],
        "more_fixed": max(0, len(fixed) - limit),
        "more_open": max(0, len(still) - limit),
    }


@dataclass
class StoredState(JournalState):
    """A journal as pages read it without holding its timeline: the stored timeline's index
    (:class:`journal.projections.digest.Digest`) at ``last_seq``, every finding, and the
    items of one page (``timeline.items``; ``partial``: how many there are in all). Its
    ``timeline.runs`` reads a run from the index when asked for it."""

    digest: Digest | None = field(default=None, repr=False)
    #: the pages of newest items shown of it, by how many
    pages: dict[int, StoredState] = field(default_factory=dict, repr=False)
    _figures: Timeline | None = field(default=None, repr=False)

    @property
    def index(self) -> Digest:
        assert self.digest is not None
        return self.digest

    def story(self) -> Story | None:
        if self._story is None:
            self._story = story(self.index, self.findings)
        return self._story

    def told(self) -> Story | None:
        """The story where it was told already or is quick to tell (a journal of fewer than
        :data:`STORY_AT_ONCE` items); else None, and the page asks for it after (it reads
        every figure and stack reading: a second at 100,000 events)."""
        if self._story is None and self.index.item_count >= STORY_AT_ONCE:
            return None
        return self.story()

    def open_counts(self) -> dict[str, int] | None:
        return counts(self.findings)

    def figures(self) -> Timeline:
        """The journal's figures and its step runs in brief (:meth:`Digest.figures`): what
        the throughput page charts and compares, read once for this state."""
        if self._figures is None:
            self._figures = self.index.figures()
        return self._figures

    def run(self, run_id: str) -> StepRunView | None:
        return self.timeline.runs.get(run_id)

    def host_runs(self, host: str) -> list[StepRunView]:
        return list(self.index.hosts_timeline([host]).runs.values())

    def neighbours(self, run: StepRunView) -> tuple[StepRunView | None, ...]:
        return self.index.neighbours(run)

    def rollback_first_try(self, run: StepRunView) -> bool:
        return self.index.rollback_first_try(run)

    def with_items(self, items: list[TimelineItem], total: int) -> StoredState:
        """This state showing ``items`` (of ``total``)."""
        timeline = Timeline(
            self.journal,
            plan=self.timeline.plan,
            hosts=self.timeline.hosts,
            items=items,
            runs=self.timeline.runs,
        )
        timeline.events, timeline.last_ts = self.timeline.events, self.timeline.last_ts
        for item in items:
            if isinstance(item, StepRunView):
                dict.__setitem__(self.timeline.runs, item.run_id, item)
        return replace(self, timeline=timeline, partial=total, pages={})


#: A journal of fewer items tells its story on its page, not after it.
STORY_AT_ONCE = 2_000

#: What the newest page keeps: every item.
_EVERY = Filter()

#: A whole timeline no page asked for this long is let go (seconds).
FOLD_IDLE_S = 120.0

#: Judging that took less than this is redone at once whenever the journal changes.
SYNC_JUDGE_S = 0.25
#: Otherwise it is redone in the background, at most this often.
REJUDGE_EVERY_S = 2.0


class JournalStates:
    """The store of one app and the latest state of each of its journals.

    A journal is folded once, then extended by the events appended since (see
    :mod:`journal.web.fold`). Findings are judged again when the fold changed: at once where
    judging took less than ``sync_judge_s``; else (a big journal: seconds) in the background,
    at most every ``rejudge_every_s`` or four times its own duration, while pages show the
    last findings judged (a running step's new output is judged a little later).
    """

    def __init__(
        self,
        store: EventStore,
        sync_judge_s: float = SYNC_JUDGE_S,
        rejudge_every_s: float = REJUDGE_EVERY_S,
        fold_idle_s: float = FOLD_IDLE_S,
    ) -> None:
        self.store = store
        self.sync_judge_s = sync_judge_s
        self.rejudge_every_s = rejudge_every_s
        self._cache: dict[str, JournalState] = {}
        self._folds: dict[str, JournalFold] = {}
        self._verdicts: dict[str, _Verdict] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._judging: dict[str, threading.Thread] = {}
        self.cache = ProjectionCache(store.engine)
        self.alive = store.liveness()  # the recorders' heartbeats
        #: per journal, the head of its timeline projection as this process last saw it
        self._heads: dict[str, Head | None] = {}
        self._dirty: set[str] = set()  # journals whose stored timeline must be written anew
        self._stored: dict[str, StoredState] = {}
        self._used: dict[str, float] = {}  # when a page last asked for a whole timeline
        self.fold_idle_s = fold_idle_s
        self._found: dict[str, _Found] = {}
        self._acks: dict[str, tuple[AckBook, int]] = {}

    def journals(self) -> list[str]:
        return self.store.journals()

    def last_seq(self, journal: str) -> int:
        """The newest sequence number of a journal (0 when it has no event)."""
        return self.store.last_seq(journal)

    def _current(self, journal: str, last: int) -> JournalState | None:
        """The cached state while it still holds: no new event, no recorder started or
        stopped, no newer findings, and none due to be judged again."""
        cached = self._cache.get(journal)
        fold = self._folds.get(journal)
        verdict = self._verdicts.get(journal)
        if cached is None or fold is None or cached.last_seq != last or fold.stale():
            return None
        if verdict is None or verdict.serial != fold.serial:
            return None
        if verdict.generation != cached.findings_generation:
            return None  # findings judged in the background since
        if verdict.generation != fold.generation and self._due(fold, verdict):
            return None
        return cached

    def get(self, journal: str) -> JournalState | None:
        """The journal as it stands now, its whole timeline held (None when the database has
        no such journal): for the pages that list or chart all of it. It is let go once no
        page asked for it for :data:`FOLD_IDLE_S` (:meth:`stored` pages hold none)."""
        self._used[journal] = time.monotonic()
        last = self.last_seq(journal)
        if not last:
            return None
        cached = self._current(journal, last)
        if cached is not None:
            return cached
        with self._guard:
            lock = self._locks.setdefault(journal, threading.Lock())
        with lock:  # one fold of a journal at a time; others wait for it, not redo it
            cached = self._current(journal, last)
            if cached is not None:
                return cached
            fold = self._folds.get(journal)
            if fold is None:
                fold = self._folds[journal] = self._restore(journal)
            try:
                if fold.last_seq < last:
                    with closing(self.store.read(journal, after=fold.last_seq)) as recorded:
                        timeline = fold.extend(_upto(recorded, last))
                    self._store_timeline(fold)
                else:
                    timeline = fold.resettle()
            except BaseException:
                # A batch that failed half-way (an event this version cannot read) left the
                # fold half-extended: the next request folds the journal afresh.
                self._folds.pop(journal, None)
                self._verdicts.pop(journal, None)
                self._cache.pop(journal, None)
                raise
            verdict = self._judge(fold)
            # acknowledgements as folded now, over findings perhaps judged a little earlier
            findings = with_acks(verdict.findings, fold.acks)
            state = JournalState(
                journal,
                fold.last_seq,
                timeline,
                findings,
                dict(fold.touched),
                verdict.seq,
                verdict.generation,
                fold.diffs,
            )
            self._cache[journal] = state
            return state

    def newest(self, journal: str, newest: int) -> StoredState | None:
        """The journal's newest ``newest`` items, read from its stored timeline's index
        (brought up to date first): a page's cost follows what it shows; None when the
        database has no such journal."""
        state = self.stored(journal)
        if state is None:
            return None
        shown = state.pages.get(newest)
        if shown is None:
            items, total = state.index.page(_EVERY, newest)
            shown = state.pages[newest] = state.with_items(items, total)
        return shown

    def stored(self, journal: str) -> StoredState | None:
        """The journal as its stored timeline's index and its findings stand now, without
        holding its timeline: the stored timeline is brought up to date first, reading only
        the runs the new events change (:func:`journal.projections.stored.brought_up`).
        Reused while no event came, no run stands unfinished and the findings judged are
        those it holds. None when the database has no such journal."""
        self._let_go()
        last = self.last_seq(journal)
        if not last:
            return None
        known = self._stored.get(journal)
        if known is not None and self._still(known, last):
            return known
        with self._guard:
            lock = self._locks.setdefault(journal, threading.Lock())
        with lock:
            known = self._stored.get(journal)
            if known is not None and self._still(known, last):
                return known
            head = self.cache.head(journal, stored.PROJECTION)
            if head is None or head.seq < last or head.version != stored.version():
                stored.brought_up(self.store, journal)
            digest = Digest(self.store, journal, self.alive)
            seq = digest.head.seq if digest.head is not None else last
            findings, judged = self._findings(journal, seq)
            timeline = Timeline(journal, plan=digest.plan, hosts=digest.hosts, runs=_Runs(digest))
            timeline.events, timeline.last_ts = digest.events, digest.last_ts
            state = StoredState(
                journal,
                seq,
                timeline,
                findings,
                findings_seq=judged,
                partial=digest.item_count,
                digest=digest,
            )
            self._stored[journal] = state
            return state

    def _let_go(self) -> None:
        """Drop the whole timelines held that no page asked for lately (their stored
        timeline and findings keep what the next such page needs)."""
        now = time.monotonic()
        for journal, used in list(self._used.items()):
            if now - used < self.fold_idle_s:
                continue
            with self._guard:
                lock = self._locks.setdefault(journal, threading.Lock())
            if not lock.acquire(blocking=False):
                continue  # being folded or read now
            try:
                self._folds.pop(journal, None)
                self._cache.pop(journal, None)
                self._verdicts.pop(journal, None)
                self._used.pop(journal, None)
            finally:
                lock.release()

    def _still(self, known: StoredState, last: int) -> bool:
        found = self._found.get(known.journal)
        return (
            known.last_seq >= last
            and not known.index.unfinished
            and found is not None
            and found.seq == known.findings_seq
        )

    def _findings(self, journal: str, seq: int) -> tuple[list[Finding], int]:
        """Every finding of the journal with the acknowledgements up to event ``seq``, and
        the event they were judged at: judged now where that is quick (or none was judged
        yet), else the last judged while the background judges anew."""
        found = self._found.get(journal)
        if found is None or (found.seq < seq and found.seconds < self.sync_judge_s):
            found = self._found[journal] = _judged_at(self.store, journal, seq)
        elif found.seq < seq:
            busy = self._judging.get(journal)
            wait = max(self.rejudge_every_s, 4 * found.seconds)
            idle = busy is None or not busy.is_alive()
            if idle and time.monotonic() >= found.finished + wait:
                thread = threading.Thread(
                    target=self._judge_stored_later,
                    args=(journal, seq),
                    name=f"journal-judge-{journal}",
                    daemon=True,
                )
                self._judging[journal] = thread
                thread.start()
        return with_acks(found.findings, self._acks_upto(journal, seq)), found.seq

    def _judge_stored_later(self, journal: str, seq: int) -> None:
        try:
            judged = _judged_at(self.store, journal, seq)
        except Exception:  # a page judging at once shows the error; here, the log says it
            logging.getLogger(__name__).exception("judging %s failed", journal)
            return
        with self._guard:
            known = self._found.get(journal)
            if known is None or known.seq < judged.seq:
                self._found[journal] = judged

    def _acks_upto(self, journal: str, seq: int) -> AckBook:
        """The acknowledgements in force at event ``seq``, folded on from the last asked."""
        book, upto = self._acks.get(journal, (AckBook(), 0))
        if seq > upto:
            for rec in self.store.read(journal, after=upto, types=ACK_TYPES):
                if rec.seq > seq:
                    break
                fold_ack(book, rec)
            self._acks[journal] = (book, seq)
        return book

    def _restore(self, journal: str) -> JournalFold:
        """The journal's fold, from its stored timeline when there is one of this version."""
        restored = stored.load(self.cache, journal)
        if restored is None:
            self._heads[journal] = None
            self._dirty.add(journal)
            return JournalFold(journal, self.alive)
        self._heads[journal] = restored.head
        fold = JournalFold.restored(restored, self.alive)
        for rec in self.store.read(journal, types=ACK_TYPES):  # those before the stored head
            if rec.seq <= fold.last_seq:
                fold_ack(fold.acks, rec)
        return fold

    def _store_timeline(self, fold: JournalFold) -> None:
        """Store what the last batch changed in the timeline projection, for the next process
        (all of it when an earlier save did not happen); a process already further on wins."""
        journal = fold.journal
        anew = journal in self._dirty
        changed = fold.timeline.items if anew else fold.changed
        since = self._heads.get(journal)
        unfinished = set(fold.unfinished)
        if not stored.save(
            self.cache, journal, fold.timeline, changed, unfinished, fold.last_seq, since, anew
        ):
            now = self.cache.head(journal, stored.PROJECTION)
            if now is not None and now.seq >= fold.last_seq:
                self._heads[journal] = now
                self._dirty.discard(journal)
                return
            ok = stored.save(
                self.cache,
                journal,
                fold.timeline,
                fold.timeline.items,
                unfinished,
                fold.last_seq,
                now,
                True,
            )
            if not ok:
                self._dirty.add(journal)
                return
        self._heads[journal] = Head(stored.version(), fold.last_seq)
        self._dirty.discard(journal)

    def _judge(self, fold: JournalFold) -> _Verdict:
        """Findings for the fold as it is now, or the last ones while new ones are judged."""
        verdict = self._verdicts.get(fold.journal)
        if verdict is not None and verdict.serial != fold.serial:
            verdict = None  # judged on a fold dropped since
        if verdict is not None and verdict.generation == fold.generation:
            return verdict
        if verdict is None or verdict.seconds < self.sync_judge_s:
            verdict = _judged(self.store, fold)
            self._verdicts[fold.journal] = verdict
            return verdict
        if self._due(fold, verdict):
            thread = threading.Thread(
                target=self._judge_later,
                args=(fold, fold.generation, fold.last_seq),
                name=f"journal-judge-{fold.journal}",
                daemon=True,
            )
            self._judging[fold.journal] = thread
            thread.start()
        return verdict

    def _due(self, fold: JournalFold, verdict: _Verdict) -> bool:
        """Whether stale findings may be judged again in the background now."""
        busy = self._judging.get(fold.journal)
        if busy is not None and busy.is_alive():
            return False
        wait = max(self.rejudge_every_s, 4 * verdict.seconds)
        return time.monotonic() >= verdict.finished + wait

    def _judge_later(self, fold: JournalFold, generation: int, seq: int) -> None:
        """Bring the findings up to the fold at ``generation`` (event ``seq``) off the request."""
        started = time.monotonic()
        try:
            found = Ledger(self.store, fold.journal).findings()
        except Exception:  # a page judging at once shows the error; here, the log says it
            logging.getLogger(__name__).exception("judging %s failed", fold.journal)
            return
        done = time.monotonic()
        with self._guard:  # only for the fold still in use, never over later findings
            known = self._verdicts.get(fold.journal)
            if self._folds.get(fold.journal) is fold and (
                known is None or known.serial != fold.serial or known.generation < generation
            ):
                self._verdicts[fold.journal] = _Verdict(
                    fold.serial, generation, seq, found, done - started, done
                )


@dataclass(frozen=True)
class _Verdict:
    """Findings (acknowledgements not applied) judged at one generation of a fold."""

    serial: int
    generation: int
    seq: int
    findings: list[Finding]
    seconds: float
    finished: float


@dataclass(frozen=True)
class _Found:
    """Every finding of a journal (acknowledgements as judged) at event ``seq``."""

    seq: int
    findings: list[Finding]
    seconds: float
    finished: float


def _judged_at(store: EventStore, journal: str, seq: int) -> _Found:
    """The findings from the journal's findings projection, brought up to date."""
    started = time.monotonic()
    found = Ledger(store, journal).findings()
    done = time.monotonic()
    return _Found(seq, found, done - started, done)


def _judged(store: EventStore, fold: JournalFold) -> _Verdict:
    """The findings from the journal's findings projection, brought up to date."""
    started = time.monotonic()
    found = Ledger(store, fold.journal).findings()
    done = time.monotonic()
    return _Verdict(fold.serial, fold.generation, fold.last_seq, found, done - started, done)


def _upto(records: Iterable[Recorded], upto: int) -> Iterator[Recorded]:
    """The records up to ``upto`` (included): a page says exactly which event it shows last,
    so live updates continue after it without repeating."""
    for rec in records:
        if rec.seq > upto:
            break
        yield rec


def init_app(app: Flask) -> None:
    """Open the app's database (the schema brought to head, as every command does).
    ``SYNC_JUDGE_S`` (config) is how long judging may take and still be done at once."""
    app.extensions["journal"] = JournalStates(
        EventStore(str(app.config["DB"])),
        sync_judge_s=float(app.config.get("SYNC_JUDGE_S", SYNC_JUDGE_S)),
    )


def warm(app: Flask) -> threading.Thread:
    """Fold every journal in the background, so that the first page view finds it ready
    (a journal of 100,000 events takes seconds to fold and judge, a page milliseconds)."""

    def run() -> None:
        states_ = app.extensions["journal"]
        try:
            for name in states_.journals():
                states_.stored(name)
        except Exception:  # a page view will show the same error, on a plain page
            app.logger.exception("folding the journals in the background failed")

    thread = threading.Thread(target=run, name="journal-warm", daemon=True)
    thread.start()
    return thread


def states() -> JournalStates:
    return current_app.extensions["journal"]


def store() -> EventStore:
    return states().store


def journal_or_404(journal: str) -> JournalState:
    """The journal named in the URL, its whole timeline held (the pages that list or chart
    all of it), or a 404 page."""
    state = states().get(journal)
    if state is None:
        abort(404, f"there is no journal {journal!r} in this database")
    return state


def stored_or_404(journal: str) -> StoredState:
    """The journal named in the URL as its stored index reads it (the pages that show a few
    of its items: a run, a page of findings, the newest items), or a 404 page."""
    state = states().stored(journal)
    if state is None:
        abort(404, f"there is no journal {journal!r} in this database")
    return state


def all_states() -> Iterable[StoredState]:
    for name in states().journals():
        state = states().stored(name)
        if state is not None:
            yield state
