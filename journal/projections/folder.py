"""A timeline kept folded: the events after its last one folded on, in place or copy on write,
and its runs not ended settled as running, not started or lost.

:func:`journal.projections.timeline.apply` is the one fold step, and says which item it made
or changed; :class:`Folder` drives it for every reader that folds on from where a timeline
stood. The command line folds a stored timeline on in place (:mod:`journal.projections.stored`)
and stores again the items the new events changed. The web folds copy on write
(:mod:`journal.web.fold`): its pages read the timeline an earlier batch made while the next
is folded, so each batch makes a new timeline (a shallow copy) and copies a view before an
event changes it (:func:`~journal.projections.timeline.target` says which); views no event of
the batch touches are shared with the timelines before.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable

from journal.mapper import Recorded
from journal.projections.timeline import (
    ProbeView,
    StepRunView,
    Timeline,
    TimelineItem,
    apply,
    index_of,
    target,
)
from journal.runs import (
    LOST,
    LOST_REASON,
    NOT_STARTED,
    NOT_STARTED_REASON,
    RUNNING,
    UNFINISHED,
    Alive,
    in_process_table,
)

#: Whether the process that recorded a step is still running, on this machine (the fallback
#: for a run without a lease; :meth:`journal.store.EventStore.liveness` asks the heartbeats).
recorder_alive = in_process_table

#: Why a run settled so is.
_REASONS = {LOST: LOST_REASON, NOT_STARTED: NOT_STARTED_REASON}


def settled_status(view: StepRunView, alive: Alive) -> str:
    """What an unfinished run is now: ``running`` while its recorder lives; else ``not
    started`` when its recorder marks launches and had not launched it, or ``lost``."""
    if alive(view.machine, view.pid):
        return RUNNING
    return NOT_STARTED if view.launch_marked and not view.launched else LOST


class Folder:
    """A timeline folded up to :attr:`last_seq`; :meth:`fold` folds the events after it.

    ``unfinished`` holds the runs started and not finished (stored so: each reader settles
    them with its own liveness); ``changed`` the items the last :meth:`fold` made or changed
    (what is stored again); ``settled`` the runs it showed anew as running, not started or
    lost. With ``copy_on_write`` each :meth:`fold` makes a new timeline and leaves the one
    before, and every view of it, as it was.
    """

    def __init__(
        self,
        timeline: Timeline,
        seq: int = 0,
        unfinished: Iterable[str] = (),
        copy_on_write: bool = False,
    ) -> None:
        self.timeline = timeline
        self.last_seq = seq
        self.unfinished: set[str] = set(unfinished)
        self.copy_on_write = copy_on_write
        self.changed: list[TimelineItem] = []
        self.settled: list[str] = []

    def fold(self, records: Iterable[Recorded], alive: Alive | None = None) -> Timeline:
        """Fold ``records`` (the events after :attr:`last_seq`, in order), then, given
        ``alive``, settle the runs not ended by it; the timeline folded."""
        batch = _Batch(self.timeline, self.copy_on_write)
        tl = batch.timeline
        changed: dict[int, TimelineItem] = {}
        for rec in records:
            event = rec.event
            if batch.shares:
                batch.own(target(event, tl))
            item = apply(event, rec, tl)
            if item is not None:
                changed[id(item)] = item
                batch.owned.add(id(item))
                if isinstance(item, StepRunView):
                    if item.finished is None:
                        self.unfinished.add(item.run_id)
                    else:
                        self.unfinished.discard(item.run_id)
            self.last_seq = rec.seq
        self.changed = list(changed.values())
        self.settled = []
        if alive is not None:
            for run in tuple(self.unfinished):
                view = tl.runs.get(run)
                if view is None:
                    continue
                now = settled_status(view, alive)
                if view.status != now:
                    batch.own(view)
                    view = tl.runs[run]
                    view.status, view.reason = now, _REASONS.get(now)
                    self.settled.append(run)
        self.timeline = tl
        return tl

    def stale(self, alive: Alive) -> bool:
        """Whether a run's recorder has started or stopped since the last settle."""
        timeline = self.timeline
        for run in tuple(self.unfinished):  # a copy: a reader may ask while a batch folds
            view = timeline.runs.get(run)
            if view is not None and view.status != settled_status(view, alive):
                return True
        return False


def settle(timeline: Timeline, alive: Alive = recorder_alive) -> Timeline:
    """Mark unfinished runs (a timeline folded at once) as running while their recorder lives
    (its heartbeat is fresh), else not started (never launched) or lost: never interrupted by
    guess."""
    runs = [run for run, view in timeline.runs.items() if view.status == UNFINISHED]
    return Folder(timeline, unfinished=runs).fold((), alive)


class _Batch:
    """The timeline one :meth:`Folder.fold` folds into: the folder's own, or, copy on write,
    a shallow copy of the last one whose views are copied before the batch changes them."""

    def __init__(self, old: Timeline, copy_on_write: bool) -> None:
        self.shares = copy_on_write
        self.owned: set[int] = set()  # ids of the views this batch made or copied
        if not copy_on_write:
            self.timeline = old
            return
        tl = copy.copy(old)
        tl.items = list(old.items)
        tl.runs = dict(old.runs)
        tl.latest_probes = {host: dict(probes) for host, probes in old.latest_probes.items()}
        tl.latest_packages = dict(old.latest_packages)
        tl.latest_packages_seq = dict(old.latest_packages_seq)
        tl.metrics = list(old.metrics)
        self.timeline = tl

    def own(self, item: TimelineItem | None) -> None:
        """Copy ``item`` (a run's view, or a standalone probe) in place of itself, unless
        the batch made or copied it already (or changes its timeline in place)."""
        if item is None or not self.shares or id(item) in self.owned:
            return
        tl = self.timeline
        if isinstance(item, StepRunView):
            run = copy.copy(item)
            run.bytes, run.lines = dict(item.bytes), dict(item.lines)
            run.snapshots = dict(item.snapshots)
            run.probes, run.expectations = list(item.probes), list(item.expectations)
            run.metrics = list(item.metrics)
            tl.runs[run.run_id] = run
            tl.items[index_of(tl.items, item)] = run
            self.owned.add(id(run))
        elif isinstance(item, ProbeView):
            probe = copy.copy(item)
            probe.expectations = list(item.expectations)
            for index in range(len(tl.items) - 1, -1, -1):
                if tl.items[index] is item:
                    tl.items[index] = probe
                    break
            latest = tl.latest_probes.get(item.host, {})
            if latest.get(item.probe) is item:
                latest[item.probe] = probe
            self.owned.add(id(probe))
