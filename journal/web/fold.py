"""A journal folded incrementally: its timeline extended by the events appended since, never
replayed from the start.

Replaying a journal reads and folds every event (seconds for 100,000 events and 50 MB of
output); a server showing a running step would redo that for every chunk the step prints.
:class:`JournalFold` keeps the timeline folded (by :class:`journal.projections.folder.Folder`,
the fold the command line folds a stored timeline on with) and folds only the new events into
it. Findings come from the journal's findings projection (:mod:`journal.pitfalls.ledger`),
which judges only what is new.

Pages read a timeline while the next batch is folded, so a batch never changes what an
earlier :meth:`JournalFold.extend` returned: the folder folds copy on write.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

from journal.mapper import Recorded
from journal.pitfalls.acks import fold_ack
from journal.pitfalls.lifecycle import AckBook
from journal.projections.folder import Folder, recorder_alive
from journal.projections.packages import PackageDiff
from journal.projections.stored import Restored
from journal.projections.timeline import StepRunView, Timeline, TimelineItem
from journal.runs import Alive


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
        self.generation = 0
        self.folder = Folder(Timeline(journal), copy_on_write=True)
        #: the acknowledgements in force, folded as they come: a page shows one at once, even
        #: while the findings are judged again in the background
        self.acks = AckBook()
        #: run -> the sequence number of its newest event
        self.touched: dict[str, int] = {}
        self.diffs = DiffCache()

    @property
    def timeline(self) -> Timeline:
        return self.folder.timeline

    @property
    def last_seq(self) -> int:
        return self.folder.last_seq

    @property
    def changed(self) -> list[TimelineItem]:
        return self.folder.changed

    # -- folding ----------------------------------------------------------------------------

    def extend(self, records: Iterable[Recorded]) -> Timeline:
        """Fold ``records`` (the journal's events after :attr:`last_seq`, in order) and
        settle unfinished runs; the new timeline (the one before is left as it was)."""
        timeline = self.folder.fold(self._seen(records), self.alive)
        self.generation += len(self.folder.settled)
        return timeline

    def _seen(self, records: Iterable[Recorded]) -> Iterator[Recorded]:
        """``records``, each counted, its acknowledgement folded and its run marked touched
        as it goes by."""
        for rec in records:
            self.generation += 1
            fold_ack(self.acks, rec)
            run = rec.event.run_id
            if run is not None:
                self.touched[run] = rec.seq
            yield rec

    @classmethod
    def restored(cls, stored: Restored, alive: Alive = recorder_alive) -> JournalFold:
        """A fold that goes on from a stored timeline (its unfinished runs settled now)."""
        fold = cls(stored.timeline.journal, alive)
        fold.folder = Folder(stored.timeline, stored.seq, stored.unfinished, copy_on_write=True)
        for item in stored.timeline.items:
            if isinstance(item, StepRunView):
                fold.touched[item.run_id] = item.seq
        fold.extend(())
        return fold

    @property
    def unfinished(self) -> frozenset[str]:
        """The runs started and not finished (stored so; settled by each reader)."""
        return frozenset(self.folder.unfinished)

    def stale(self) -> bool:
        """Whether a run's recorder has started or stopped since the last settle."""
        return self.folder.stale(self.alive)

    def resettle(self) -> Timeline:
        """A new timeline with the unfinished runs settled anew (a recorder has stopped)."""
        return self.extend(())


_SERIALS = itertools.count(1)
