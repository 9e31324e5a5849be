"""A journal folded incrementally: its timeline extended by the events appended since, never
replayed from the start.

Replaying a journal reads and folds every event (seconds for 100,000 events and 50 MB of
output); a server showing a running step would redo that for every chunk the step prints.
:class:`JournalFold` keeps the timeline folded (through
:func:`journal.projections.timeline.apply`, as :func:`~journal.projections.timeline.project`
folds) and folds only the new events into it. Findings come from the journal's findings
projection (:mod:`journal.pitfalls.ledger`), which judges only what is new.

Pages read a timeline while the next batch is folded, so a batch never changes what an
earlier :meth:`JournalFold.extend` returned: the timeline and every view a batch touches are
copied first (copy on write); views it does not touch are shared.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterable

from journal.events import (
    ExpectationChecked,
    PitfallAcknowledged,
    PitfallUnacknowledged,
    StepFinished,
)
from journal.mapper import Recorded
from journal.pitfalls.lifecycle import AckBook
from journal.projections.packages import PackageDiff
from journal.projections.stored import Restored
from journal.projections.timeline import (
    ProbeView,
    StepRunView,
    Timeline,
    TimelineItem,
    apply,
    index_of,
    recorder_alive,
    settle,
    settled_status,
)
from journal.service.findings import fold_ack

Alive = Callable[[str, int], bool]


class DiffCache:
    """Each run's package diff, made once per pair of snapshots (a diff parses every version
    of both: milliseconds a run, too slow to redo for every run on every page)."""

    def __init__(self) -> None:
        self._diffs: dict[str, tuple[object, object, PackageDiff | None]] = {}

    def diff(self, view: StepRunView) -> PackageDiff | None:
        before, after = view.snapshots.get("before"), view.snapshots.get("after")
        known = self._diffs.get(view.run_id)
        if known is not None and known[0] is before and known[1] is after:
            return known[2]
        made = view.diff
        self._diffs[view.run_id] = (before, after, made)
        return made


class JournalFold:
    """One journal's events folded up to :attr:`last_seq`; :meth:`extend` folds more.

    ``generation`` counts the changes findings could show (any event, or a step found running
    or interrupted), so findings read at one generation are current while it holds.
    ``changed`` holds the items the last :meth:`extend` made or changed (what is stored again
    in the timeline projection).
    """

    def __init__(self, journal: str, alive: Alive = recorder_alive) -> None:
        self.journal = journal
        self.alive = alive
        self.serial = next(_SERIALS)  # which fold of the journal (findings belong to one)
        self.last_seq = 0
        self.generation = 0
        self.timeline = Timeline(journal)
        self.changed: list[TimelineItem] = []
        #: the acknowledgements in force, folded as they come: a page shows one at once, even
        #: while the findings are judged again in the background
        self.acks = AckBook()
        #: run -> the sequence number of its newest event
        self.touched: dict[str, int] = {}
        self._unfinished: set[str] = set()  # started, not finished
        self.diffs = DiffCache()

    # -- folding ----------------------------------------------------------------------------

    def extend(self, records: Iterable[Recorded]) -> Timeline:
        """Fold ``records`` (the journal's events after :attr:`last_seq`, in order) and
        settle unfinished runs; the new timeline (the one before is left as it was)."""
        batch = _Batch(self.timeline)
        tl = batch.timeline
        before = self.last_seq
        for rec in records:
            event = rec.event
            tl.events += 1
            tl.last_ts = rec.ts
            self.generation += 1
            if isinstance(event, PitfallAcknowledged | PitfallUnacknowledged):
                fold_ack(self.acks, rec)
            run = event.run_id
            if run is not None:
                self.touched[run] = rec.seq
                batch.own_run(run)
                if isinstance(event, StepFinished):
                    self._unfinished.discard(run)
            if isinstance(event, ExpectationChecked) and tl.runs.get(event.run or "") is None:
                batch.own_probe_of(event.host_name)
            known = run in tl.runs if run is not None else True
            apply(event, rec, tl)
            if run is not None and not known and run in tl.runs:  # StepStarted
                batch.owned.add(id(tl.runs[run]))
                self._unfinished.add(run)
            self.last_seq = rec.seq
        self._settle(batch)
        self.changed = [item for item in tl.items if id(item) in batch.owned or item.seq > before]
        self.timeline = tl
        return tl

    @classmethod
    def restored(cls, stored: Restored, alive: Alive = recorder_alive) -> JournalFold:
        """A fold that goes on from a stored timeline (its unfinished runs settled now)."""
        fold = cls(stored.timeline.journal, alive)
        fold.timeline, fold.last_seq = stored.timeline, stored.seq
        for item in stored.timeline.items:
            if isinstance(item, StepRunView):
                fold.touched[item.run_id] = item.seq
        fold._unfinished = set(stored.unfinished)
        fold.extend(())
        return fold

    @property
    def unfinished(self) -> frozenset[str]:
        """The runs started and not finished (stored so; settled by each reader)."""
        return frozenset(self._unfinished)

    def stale(self) -> bool:
        """Whether a run's recorder has started or stopped since the last settle."""
        timeline = self.timeline
        for run in tuple(self._unfinished):  # a copy: a request may ask while a batch folds
            view = timeline.runs.get(run)
            if view is not None and view.status != _settled_status(view, self.alive):
                return True
        return False

    def resettle(self) -> Timeline:
        """A new timeline with the unfinished runs settled anew (a recorder has stopped)."""
        return self.extend(())

    def _settle(self, batch: _Batch) -> None:
        for run in self._unfinished:
            view = batch.timeline.runs.get(run)
            if view is None or view.status == _settled_status(view, self.alive):
                continue
            own = batch.own_run(run)
            own.status, own.reason = "unfinished", None
            settle(Timeline(self.journal, runs={run: own}), self.alive)
            self.generation += 1


_SERIALS = itertools.count(1)


def _settled_status(view: StepRunView, alive: Alive) -> str:
    """What settling makes of an unfinished run now: running while its recorder lives."""
    return settled_status(view, alive)


class _Batch:
    """The timeline one :meth:`JournalFold.extend` makes: a shallow copy of the last one,
    whose views are copied before the batch changes them."""

    def __init__(self, old: Timeline) -> None:
        tl = copy.copy(old)
        tl.items = list(old.items)
        tl.runs = dict(old.runs)
        tl.latest_probes = {host: dict(probes) for host, probes in old.latest_probes.items()}
        tl.latest_packages = dict(old.latest_packages)
        tl.latest_packages_seq = dict(old.latest_packages_seq)
        tl.metrics = list(old.metrics)
        self.timeline = tl
        self.owned: set[int] = set()  # ids of the views this batch made or copied

    def own_run(self, run: str) -> StepRunView:
        """The run's view, copied first unless this batch made or copied it already."""
        view = self.timeline.runs.get(run)
        if view is None or id(view) in self.owned:
            return view  # type: ignore[return-value]
        mine = copy.copy(view)
        mine.bytes, mine.lines = dict(view.bytes), dict(view.lines)
        mine.snapshots = dict(view.snapshots)
        mine.probes, mine.expectations = list(view.probes), list(view.expectations)
        mine.metrics = list(view.metrics)
        self.timeline.runs[run] = mine
        self.timeline.items[index_of(self.timeline.items, view)] = mine
        self.owned.add(id(mine))
        return mine

    def own_probe_of(self, host: str) -> None:
        """Copy the standalone probe an expectation without a run attaches to (the latest on
        ``host``, as :func:`journal.projections.timeline.apply` finds it)."""
        items = self.timeline.items
        for index in range(len(items) - 1, -1, -1):
            item = items[index]
            if isinstance(item, ProbeView) and item.host == host:
                if id(item) not in self.owned:
                    mine = copy.copy(item)
                    mine.expectations = list(item.expectations)
                    items[index] = mine
                    self.owned.add(id(mine))
                    latest = self.timeline.latest_probes.get(host, {})
                    if latest.get(item.probe) is item:
                        latest[item.probe] = mine
                return
