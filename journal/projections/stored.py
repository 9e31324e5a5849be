"""Projections kept in the projection tables and folded on from where they stood; and the
timeline as one of them.

Replaying a journal reads every event and every byte of output; a page or a `journal status`
should read what changed since the last reader folded it. A stored projection
(:class:`StoredProjection`: the timeline here, the findings in :mod:`journal.pitfalls.ledger`)
keeps, in the projection tables (a cache, :mod:`journal.store.cache`), JSON rows (its
dataclasses through :func:`journal.mapper.to_plain`) and a head: the version of the code that
made them (a digest of the modules it depends on: a change folds every journal again) and the
last event folded. A reader that finds another process saved in between reads again.

The timeline keeps one row per timeline item (a step run with its probes, expectations and
figures; a note; a standalone probe or figure; an accepted host key), each package snapshot
once under its digest, and a head row (the plan and hosts, counts, the latest probe and
snapshot per host). :func:`current_timeline` loads it, folds the events after its head
(:class:`journal.projections.folder.Folder`) and saves the items those events touched. Runs
not yet finished are stored unfinished and settled on read, with the liveness of their
recorders handed in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from journal.mapper import of_plain, to_plain
from journal.projections.folder import Folder
from journal.projections.index import TRANSCRIPT, rows_of
from journal.projections.timeline import (
    HostKeyView,
    MetricView,
    NoteView,
    ProbeView,
    StepRunView,
    Timeline,
    TimelineItem,
    item_time,
    order_key,
)
from journal.runs import UNFINISHED, Alive
from journal.store.cache import Head, ProjectionCache

#: How many times a reader reads (or folds and saves) a projection again while other
#: processes save it in between.
TRIES = 8

_T = TypeVar("_T")


@functools.cache
def code_version(sources: tuple[str, ...]) -> str:
    """A digest of the code a projection's stored state depends on: ``sources`` name modules
    and folders of journal (``projections/timeline.py``; ``pitfalls``: its modules)."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for source in sources:
        path = root / source
        for file in sorted(path.glob("*.py")) if path.is_dir() else [path]:
            if file.exists():
                name = file.relative_to(root).as_posix()
                digest.update(name.encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:16]


class Moved(Exception):
    """Another process saved the projection while this one read or folded it."""


class StoredProjection:
    """The stored state of one projection (``name``) of one journal: its head, its rows, and
    saving them; ``sources`` are the code whose digest is its version."""

    name: ClassVar[str]
    sources: ClassVar[tuple[str, ...]]

    def __init__(self, cache: ProjectionCache, journal: str) -> None:
        self.cache = cache
        self.journal = journal

    @classmethod
    def version(cls) -> str:
        """The version of the code that folds it: a state of another is folded anew."""
        return code_version(cls.sources)

    def head(self) -> Head | None:
        return self.cache.head(self.journal, self.name)

    def usable(self, head: Head | None) -> bool:
        """Whether ``head`` is of a state this version of the code made."""
        return head is not None and head.version == self.version()

    def rows(self, keys: Iterable[str] | None = None) -> dict[str, Any]:
        return self.cache.rows(self.journal, self.name, keys)

    def keys(self, prefix: str, suffix: str = "", start: str = "", end: str = "") -> list[str]:
        return self.cache.keys(self.journal, self.name, prefix, suffix, start, end)

    def last_keys(self, prefix: str, limit: int, start: str = "", end: str = "") -> list[str]:
        return self.cache.last_keys(self.journal, self.name, prefix, limit, start, end)

    def first_keys(self, prefix: str, limit: int, start: str = "") -> list[str]:
        return self.cache.first_keys(self.journal, self.name, prefix, limit, start)

    def count(self, prefix: str, start: str = "") -> int:
        return self.cache.count(self.journal, self.name, prefix, start)

    def holds(self, prefix: str, needle: str) -> bool:
        return self.cache.holds(self.journal, self.name, prefix, needle)

    def save(
        self, seq: int, rows: Mapping[str, Any | None], since: Head | None, anew: bool = False
    ) -> bool:
        """Store ``rows`` (None deletes one; ``anew``: they replace every row) with the head
        at ``seq``; False when another process saved since ``since``."""
        head = Head(self.version(), seq)
        return self.cache.save(self.journal, self.name, head, rows, since=since, replace=anew)

    def unmoved(self, head: Head | None) -> None:
        """Raise :class:`Moved` when the stored head is no longer ``head``."""
        if self.head() != head:
            raise Moved

    def retried(self, attempt: Callable[[Head | None], _T]) -> _T | None:
        """``attempt`` given the stored head, again while it raises :class:`Moved`; None
        after :data:`TRIES` times."""
        for _ in range(TRIES):
            try:
                return attempt(self.head())
            except Moved:
                continue
        return None

    def read(self, reader: Callable[[Head], _T]) -> _T | None:
        """What ``reader`` reads of the state this version of the code stored (None when
        there is none), read again when another process saved in between."""

        def once(head: Head | None) -> _T | None:
            if head is None or head.version != self.version():
                return None
            value = reader(head)
            self.unmoved(head)
            return value

        return self.retried(once)


# -- the timeline -----------------------------------------------------------------------------

PROJECTION = "timeline"


class _Stored(StoredProjection):
    name = PROJECTION
    sources = (
        "projections/timeline.py",
        "projections/folder.py",
        "projections/stored.py",
        "projections/packages.py",
        "projections/index.py",
        "projections/unread.py",
        "mapper.py",
    )


def version() -> str:
    """A digest of the code that folds the timeline: a change folds every journal again."""
    return _Stored.version()


_KINDS: dict[str, type] = {
    "run": StepRunView,
    "note": NoteView,
    "probe": ProbeView,
    "metric": MetricView,
    "hostkey": HostKeyView,
}
_KIND_OF = {cls: kind for kind, cls in _KINDS.items()}
_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def item_key(item: TimelineItem) -> str:
    """The item's row key, in :func:`~journal.projections.timeline.order_key` order as text
    (digits only, so that any collation orders them alike): ``i:`` and the seq, or for a run
    placed by its own time, the seq it is placed after, its time's digits and its seq."""
    where, when, _ = order_key(item)
    if not when:
        return f"i:{item.seq:012d}"
    return f"i:{where:012d}{''.join(c for c in when if c.isdigit())}{item.seq:012d}"


class _Snapshots:
    """Package snapshots stored once each, under their digest."""

    def __init__(self) -> None:
        self.rows: dict[str, Any] = {}
        self._known: dict[int, tuple[Any, str]] = {}

    def key(self, packages: dict[str, Any]) -> str:
        known = self._known.get(id(packages))
        if known is not None and known[0] is packages:
            return known[1]
        body = _JSON.encode(packages)
        key = "s:" + hashlib.sha256(body.encode()).hexdigest()[:24]
        self.rows[key] = packages
        self._known[id(packages)] = (packages, key)
        return key


def item_json(item: TimelineItem, snapshots: _Snapshots, unfinished: bool = False) -> dict:
    """An item's row (a run's snapshots by their digests; one not ended stored as recorded:
    each reader settles it with its own liveness)."""
    if isinstance(item, StepRunView):
        out = to_plain(item, ("snapshots",))
        out["snapshots"] = {p: snapshots.key(s) for p, s in item.snapshots.items()}
        if unfinished:
            out["status"], out["reason"] = UNFINISHED, None
    else:
        out = to_plain(item)
    out["kind"] = _KIND_OF[type(item)]
    return out


def item_of(d: dict[str, Any], snapshots: dict[str, Any]) -> TimelineItem:
    d = dict(d)
    kind = d.pop("kind")
    d.pop("ix", None)
    if kind != "run":
        return of_plain(_KINDS[kind], d)
    refs = d.pop("snapshots")
    view = of_plain(StepRunView, d)
    view.snapshots = {p: snapshots[k] for p, k in refs.items() if k in snapshots}
    return view


# -- the runner ------------------------------------------------------------------------------


@dataclasses.dataclass
class Restored:
    """A timeline as stored: its items folded up to ``seq``, the runs not finished then."""

    timeline: Timeline
    seq: int
    head: Head
    unfinished: set[str]


def load(cache: ProjectionCache, journal: str) -> Restored | None:
    """The stored timeline of ``journal`` (unsettled), or None when there is none of this
    version; a save by another process while reading makes it read again."""
    state = _Stored(cache, journal)
    # the items, the package sets and the head: not the index rows beside them
    rows = functools.partial(cache.rows_starting, journal, PROJECTION, ("i:", "s:", "head"))
    return state.read(lambda head: _restore(journal, head, rows()))


def load_newest(cache: ProjectionCache, journal: str, newest: int) -> tuple[Restored, int] | None:
    """Only the ``newest`` items of the stored timeline (what a first page shows of a long
    journal), and how many items it holds in all; None when there is none of this version."""
    state = _Stored(cache, journal)

    def read(head: Head) -> tuple[Restored, int]:
        top = state.rows(["head"]).get("head") or {}
        restored = _restore_some(state, journal, head, top, state.last_keys("i:", newest))
        restored.unfinished &= set(restored.timeline.runs)
        return restored, int(top.get("items", len(restored.timeline.items)))

    return state.read(read)


def load_some(
    cache: ProjectionCache, journal: str, runs: Iterable[str], dated: Iterable[str] = ()
) -> tuple[Restored, dict[str, Any]] | None:
    """The stored timeline holding only the runs named by ``runs`` (those stored) and what its
    head says (plan, hosts, counts, the latest probes and snapshots), with the head row
    (:func:`save`'s ``base``: how many items it was restored with under ``_loaded``); None
    when there is none of this version, or when imports ``dated`` (by their times) need the
    whole timeline to be placed (:func:`_landmarks`)."""
    state = _Stored(cache, journal)
    wanted = [f"r:{run}" for run in runs]
    dated = list(dated)

    def read(head: Head) -> tuple[Restored, dict[str, Any]] | None:
        top = state.rows(["head"]).get("head") or {}
        keys = list(state.rows(wanted).values())
        if dated:
            tail = _landmarks(state, top, dated)
            if tail is None:
                return None
            keys += tail
        restored = _restore_some(state, journal, head, top, keys)
        return restored, {**top, "_loaded": len(restored.timeline.items)}

    return state.read(read)


#: The most items read back to place a batch's dated imports; one dated further back than
#: that folds the whole timeline.
PLACING_ITEMS = 20_000


def _landmarks(
    state: StoredProjection, top: dict[str, Any], dated: Iterable[str]
) -> list[str] | None:
    """The keys of the newest stored items down to the last one recorded (not placed by its
    own time) at or before the earliest time of the imports ``dated`` (their times): the items
    :func:`~journal.projections.timeline.place` looks through, newest first, to place each of
    them as a fold of the whole timeline does (none when every stored item is later: then
    the batch's own items or the start of the timeline place them). None when that takes
    more than :data:`PLACING_ITEMS` items."""
    earliest = top.get("earliest")
    # one dated before every stored item is placed first, or after one of the batch's own
    when = min((at for at in dated if earliest is not None and at >= earliest), default=None)
    if when is None:
        return []
    keys: list[str] = []
    end, page = "", 64
    while len(keys) < PLACING_ITEMS:
        found = state.last_keys("i:", page, end=end)
        if not found:
            return None  # placed before every item: the whole timeline is looked through
        rows = state.rows(found)
        keys[:0] = found
        for key in reversed(found):
            row = rows.get(key) or {}
            stamp = row.get("started") if row.get("kind") == "run" else row.get("ts")
            if row.get("place") is None and stamp is not None and stamp <= when:
                return keys
        end, page = found[0][2:], page * 4
    return None


def _restore_some(
    state: StoredProjection, journal: str, head: Head, top: dict[str, Any], keys: Iterable[str]
) -> Restored:
    """The timeline of the items stored under ``keys`` only, with the package sets they and
    the head (``top``) name."""
    rows = state.rows(keys)
    refs = {k for d in rows.values() if d.get("kind") == "run" for k in d["snapshots"].values()}
    refs |= set(top.get("latest_packages", {}).values())
    rows.update(state.rows(refs))
    rows["head"] = top
    return _restore(journal, head, rows)


def _restore(journal: str, head: Head, rows: dict[str, Any]) -> Restored:
    top = rows.get("head") or {}
    snapshots = {k: v for k, v in rows.items() if k.startswith("s:")}
    timeline = Timeline(journal, plan=top.get("plan", []), hosts=top.get("hosts", {}))
    probes: dict[int, ProbeView] = {}
    for key in sorted(k for k in rows if k.startswith("i:")):
        item = item_of(rows[key], snapshots)
        timeline.items.append(item)
        if isinstance(item, StepRunView):
            timeline.runs[item.run_id] = item
            for probe in item.probes:
                probes[probe.seq] = probe
            timeline.metrics.extend(item.metrics)
        elif isinstance(item, ProbeView):
            probes[item.seq] = item
        elif isinstance(item, MetricView):
            timeline.metrics.append(item)
    timeline.metrics.sort(key=lambda m: m.seq)
    timeline.latest_probes = latest_probes(top, probes)
    for host, key in top.get("latest_packages", {}).items():
        if key in snapshots:
            timeline.latest_packages[host] = snapshots[key]
    timeline.latest_packages_seq = dict(top.get("latest_packages_seq", {}))
    timeline.events, timeline.last_ts = top.get("events", 0), top.get("last_ts")
    return Restored(timeline, head.seq, head, set(top.get("unfinished", [])))


def latest_probes(
    top: dict[str, Any], known: dict[int, ProbeView]
) -> dict[str, dict[str, ProbeView]]:
    """The head's latest probe of each kind on each host (the item's own view where ``known``
    holds it)."""
    out: dict[str, dict[str, ProbeView]] = {}
    for host, latest in top.get("latest_probes", {}).items():
        out[host] = {p: known.get(d["seq"]) or of_plain(ProbeView, d) for p, d in latest.items()}
    return out


def _orders(timeline: Timeline, base: dict[str, Any] | None) -> dict[str, Any]:
    """The head's lists in the order their items first name them on the timeline: the hosts
    of probes and runs (the story's), the hosts of runs and the steps run (progress's), each
    name with the key of the first item naming it (a dated import placed before it moves it
    up); and the earliest time of an item recorded in place (what a dated import is placed
    by); and per host, what its transcripts printed of the stack (the keys of their readings).
    ``base``: the head a timeline holding only some items was restored from (what those items
    add is added on)."""
    first: dict[str, dict[str, str]] = {
        kind: dict((base or {}).get("first", {}).get(kind, {}))
        for kind in ("seen", "run_hosts", "steps")
    }
    earliest = (base or {}).get("earliest")
    printed = {h: set(keys) for h, keys in (base or {}).get("printed", {}).items()}

    def named(kind: str, name: str, item: TimelineItem, key: str | None) -> str | None:
        known = first[kind].get(name)
        placed = getattr(item, "place", None) is not None
        if known is None or placed:
            key = key or item_key(item)
            if known is None or key < known:
                first[kind][name] = key
        return key

    for item in timeline.items:
        key = None
        if isinstance(item, StepRunView):
            key = named("seen", item.host, item, key)
            key = named("run_hosts", item.host, item, key)
            key = named("steps", item.step, item, key)
            for probe in item.probes:
                if probe.probe == TRANSCRIPT and isinstance(probe.result, dict):
                    shown = probe.result.get("evidence") or {}
                    printed.setdefault(probe.host, set()).update(shown)
        elif isinstance(item, ProbeView):
            key = named("seen", item.host, item, key)
        if getattr(item, "place", None) is None:
            when = item_time(item)
            earliest = when if earliest is None else min(earliest, when)
    lists = {kind: sorted(names, key=names.__getitem__) for kind, names in first.items()}
    return {
        **lists,
        "first": first,
        "earliest": earliest,
        "printed": {host: sorted(keys) for host, keys in printed.items()},
    }


def save(
    cache: ProjectionCache,
    journal: str,
    timeline: Timeline,
    changed: Iterable[TimelineItem],
    unfinished: set[str],
    seq: int,
    since: Head | None,
    anew: bool = False,
    base: dict[str, Any] | None = None,
) -> bool:
    """Store the ``changed`` items (unsettled: runs in ``unfinished`` as not ended) with their
    index rows (:mod:`journal.projections.index`; those an item no longer has deleted) and the
    head at ``seq``; False when another process saved since ``since``. ``base``: the head row
    ``timeline`` was restored from when it holds only some items (:func:`load_some`)."""
    state = _Stored(cache, journal)
    snapshots = _Snapshots()
    rows: dict[str, Any] = {}
    made: dict[str, list[str]] = {}
    changed = list(changed)
    for item in changed:
        run = isinstance(item, StepRunView) and item.run_id in unfinished
        key = item_key(item)
        row = item_json(item, snapshots, unfinished=run)
        # indexed as stored: a run not ended as such (each reader settles it)
        index = rows_of(item, key, snapshots.key, row.get("status"))
        row["ix"] = sorted(index)
        rows[key] = row
        rows.update(index)
        made[key] = row["ix"]
    if not anew and made:
        for key, old in state.rows(made).items():
            for gone in set(old.get("ix", ())) - set(made[key]):
                rows[gone] = None
    figures = any(
        isinstance(item, MetricView) or (isinstance(item, StepRunView) and item.metrics)
        for item in changed
    )
    before = base if base is not None else {} if anew else state.rows(["head"]).get("head") or {}
    latest_packages = {h: snapshots.key(p) for h, p in timeline.latest_packages.items()}
    rows.update(snapshots.rows)
    added = 0 if base is None else len(timeline.items) - base["_loaded"]
    rows["head"] = {
        "plan": timeline.plan,
        "hosts": timeline.hosts,
        "events": timeline.events,
        "last_ts": timeline.last_ts,
        "latest_probes": {
            h: {p: to_plain(v) for p, v in latest.items()}
            for h, latest in timeline.latest_probes.items()
        },
        "latest_packages": latest_packages,
        "latest_packages_seq": timeline.latest_packages_seq,
        "unfinished": sorted(unfinished),
        "items": len(timeline.items) if base is None else base.get("items", 0) + added,
        # the last save that changed a figure: what the story's headline was worked out at
        "figures_at": seq if figures else before.get("figures_at", 0),
        **_orders(timeline, base),
    }
    return state.save(seq, rows, since, anew)


@dataclasses.dataclass
class Touched:
    """What a batch of events changes of the stored timeline (:func:`_touched`)."""

    runs: set[str]
    last: int
    #: the times the batch's dated imports are placed by
    dated: list[str] = dataclasses.field(default_factory=list)
    #: folding it needs the whole timeline (an expectation of no run known)
    whole: bool = False


def _touched(records: Iterable[Any]) -> Touched:
    """The stored runs the events ``records`` change, the last event's seq, what dated
    imports among them are placed by, and whether folding them needs the whole timeline."""
    from journal.events import ExpectationChecked, StepStarted

    started: set[str] = set()
    found = Touched(set(), 0)
    for rec in records:
        event, found.last = rec.event, rec.seq
        if isinstance(event, StepStarted):
            if event.imported and event.at:
                found.dated.append(event.at)
            started.add(event.run)
        elif isinstance(event, ExpectationChecked) and event.run_id is None:
            found.whole = True
        elif event.run_id is not None and event.run_id not in started:
            found.runs.add(event.run_id)
    return found


def _upto(records: Iterable[Any], last: int) -> Iterable[Any]:
    """``records`` up to the event ``last`` (those appended since are the next reader's)."""
    return itertools.takewhile(lambda rec: rec.seq <= last, records)


#: How many events are folded at a time onto a timeline restored in part: a journal far
#: ahead of its stored timeline (or folded anew by `journal rebuild`) is folded in batches
#: (the peak of `journal rebuild` on the 100k-event bench journal: 97 MB at 10,000, 72 MB at
#: 5,000, in the same time).
BATCH_EVENTS = 5_000


def brought_up(store: Any, journal: str, anew: bool = False) -> Head | None:
    """Bring the stored timeline of ``journal`` up to date (``anew``: fold it again from the
    first event, as `journal rebuild` does) a batch of :data:`BATCH_EVENTS` at a time, reading
    only the runs each batch changes and the items its dated imports are placed among (the
    whole timeline for a batch that needs it); anew too where none of this version is stored;
    its head after."""
    cache = ProjectionCache(store.engine)
    state = _Stored(cache, journal)
    head = state.head()
    if anew or not state.usable(head):
        # an empty timeline of this version, folded on from the first event (none stored
        # yet, or one an earlier version of journal made)
        save(cache, journal, Timeline(journal), [], set(), 0, head, anew=True)
    moved = 0
    while moved < TRIES:
        head = state.head()
        if not state.usable(head) or head is None:
            break
        if head.seq >= store.last_seq(journal):
            return head
        with contextlib.closing(store.read(journal, after=head.seq)) as recorded:
            scanned = _touched(itertools.islice(recorded, BATCH_EVENTS))
        upto = scanned.last
        found = None if scanned.whole else load_some(cache, journal, scanned.runs, scanned.dated)
        if found is None:  # this batch folded onto the whole timeline, the next ones in part
            restored, base = load(cache, journal), None
            if restored is None:
                break
        else:
            restored, base = found
        if restored.head != head:
            moved += 1
            continue
        folder = Folder(restored.timeline, restored.seq, restored.unfinished)
        with contextlib.closing(store.read(journal, after=head.seq)) as recorded:
            timeline = folder.fold(_upto(recorded, upto))
        unfinished, last = folder.unfinished, folder.last_seq
        if not save(cache, journal, timeline, folder.changed, unfinished, last, head, base=base):
            moved += 1
    current_timeline(store, journal)
    return state.head()


def current_timeline(store: Any, journal: str, alive: Alive | None = None) -> Timeline:
    """The timeline of ``journal`` as it stands: the stored one folded on with the events
    after it (saved again for the next reader), runs not ended settled with ``alive`` (by
    default, the recorders' heartbeats in the store)."""
    cache = ProjectionCache(store.engine)
    restored = load(cache, journal)
    if restored is None:  # none stored, or of older code: folded anew, replacing it
        folder = Folder(Timeline(journal))
        since, anew = cache.head(journal, PROJECTION), True
    else:
        folder = Folder(restored.timeline, restored.seq, restored.unfinished)
        since, anew = restored.head, False
    start = folder.last_seq
    timeline = folder.fold(store.read(journal, after=start), alive or store.liveness())
    if folder.last_seq > start:
        unfinished = folder.unfinished
        save(cache, journal, timeline, folder.changed, unfinished, folder.last_seq, since, anew)
    return timeline


def one_run(
    store: Any, journal: str, run_id: str, seq: int, alive: Alive | None = None
) -> StepRunView:
    """The step run ``run_id`` of ``journal`` (started at event ``seq``: see
    :func:`journal.service.runs.find_stored_run`) as it stands, settled as
    :func:`current_timeline` settles it. When the stored timeline is up to date only the run's
    row and the snapshots it names are read; else the timeline is brought up to date (for the
    next reader too) and the run taken from it."""
    state = _Stored(ProjectionCache(store.engine), journal)

    def read(head: Head) -> StepRunView | None:
        if head.seq != store.last_seq(journal):
            return None
        key = f"i:{seq:012d}"
        rows = state.rows([key])
        if key not in rows:  # an imported run placed by its own time: its key ends in its seq
            placed = state.keys("i:", suffix=f"{seq:012d}")
            rows = state.rows(placed[:1])
            key = placed[0] if placed else key
        found = rows.get(key)
        if found is None or found.get("kind") != "run" or found.get("run_id") != run_id:
            return None
        view = item_of(found, state.rows(found["snapshots"].values()))
        assert isinstance(view, StepRunView)
        return view

    view = state.read(read)
    if view is None:
        return current_timeline(store, journal, alive).runs[run_id]
    unfinished = {run_id} if view.status == UNFINISHED else set()
    timeline = Timeline(journal, items=[view], runs={run_id: view})
    Folder(timeline, unfinished=unfinished).fold((), alive or store.liveness())
    return view
