"""The timeline as a persisted projection: stored item by item, folded on from where it stood.

Replaying a journal reads every event and every byte of output; a page or a `journal status`
should read what changed since the last reader folded it. The timeline projection keeps, in
the projection tables (a cache, :mod:`journal.store.cache`), one row per timeline item (a
step run with its probes, expectations and figures; a note; a standalone probe or figure; an
accepted host key), each package snapshot once under its digest, and a head row (the plan and
hosts, counts, the latest probe and snapshot per host). :func:`current_timeline` loads it,
folds the events after its head with :func:`journal.projections.timeline.apply` and saves the
items those events touched. Runs not yet finished are stored unfinished and settled on read,
with the liveness of their recorders handed in.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from journal.events import ExpectationChecked
from journal.mapper import Recorded
from journal.projections.timeline import (
    ExpectationView,
    HostKeyView,
    MetricView,
    NoteView,
    ProbeView,
    StepRunView,
    Timeline,
    TimelineItem,
    apply,
    order_key,
    settle,
)
from journal.store.cache import Head, ProjectionCache

PROJECTION = "timeline"
Alive = Callable[[str, int], bool]

_KINDS: dict[str, type] = {
    "run": StepRunView,
    "note": NoteView,
    "probe": ProbeView,
    "metric": MetricView,
    "hostkey": HostKeyView,
}
_KIND_OF = {cls: kind for kind, cls in _KINDS.items()}
_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@functools.cache
def version() -> str:
    """A digest of the code that folds the timeline: a change folds every journal again."""
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for name in ("timeline.py", "stored.py", "packages.py"):
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:16]


def item_key(item: TimelineItem) -> str:
    """The item's row key, in :func:`~journal.projections.timeline.order_key` order as text
    (digits only, so that any collation orders them alike): ``i:`` and the seq, or for a run
    placed by its own time, the seq it is placed after, its time's digits and its seq."""
    where, when, _ = order_key(item)
    if not when:
        return f"i:{item.seq:012d}"
    return f"i:{where:012d}{''.join(c for c in when if c.isdigit())}{item.seq:012d}"


def _plain(view: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        f.name: getattr(view, f.name)
        for f in dataclasses.fields(view)
        if not f.name.startswith("_") and f.name not in skip
    }


def _probe_json(probe: ProbeView) -> dict[str, Any]:
    out = _plain(probe, ("expectations",))
    out["expectations"] = [_plain(e) for e in probe.expectations]
    return out


def _probe_of(d: dict[str, Any]) -> ProbeView:
    checks = [ExpectationView(**e) for e in d.pop("expectations")]
    return ProbeView(**d, expectations=checks)


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
    kind = _KIND_OF[type(item)]
    if isinstance(item, StepRunView):
        out = _plain(item, ("snapshots", "probes", "expectations", "metrics"))
        out["snapshots"] = {p: snapshots.key(s) for p, s in item.snapshots.items()}
        out["probes"] = [_probe_json(p) for p in item.probes]
        out["expectations"] = [_plain(e) for e in item.expectations]
        out["metrics"] = [_plain(m) for m in item.metrics]
        if unfinished:  # stored as recorded; settled by each reader with its own liveness
            out["status"], out["reason"] = "unfinished", None
    elif isinstance(item, ProbeView):
        out = _probe_json(item)
    else:
        out = _plain(item)
    out["kind"] = kind
    return out


def item_of(d: dict[str, Any], snapshots: dict[str, Any]) -> TimelineItem:
    d = dict(d)
    kind = d.pop("kind")
    if kind == "run":
        refs = d.pop("snapshots")
        probes = [_probe_of(dict(p)) for p in d.pop("probes")]
        checks = [ExpectationView(**e) for e in d.pop("expectations")]
        metrics = [MetricView(**m) for m in d.pop("metrics")]
        view = StepRunView(**d)
        view.snapshots = {p: snapshots[k] for p, k in refs.items() if k in snapshots}
        view.probes, view.expectations, view.metrics = probes, checks, metrics
        return view
    if kind == "probe":
        return _probe_of(d)
    return _KINDS[kind](**d)


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
    for _ in range(5):
        head = cache.head(journal, PROJECTION)
        if head is None or head.version != version():
            return None
        rows = cache.rows(journal, PROJECTION)
        if cache.head(journal, PROJECTION) != head:
            continue
        return _restore(journal, head, rows)
    return None


def load_newest(cache: ProjectionCache, journal: str, newest: int) -> tuple[Restored, int] | None:
    """Only the ``newest`` items of the stored timeline (what a first page shows of a long
    journal), and how many items it holds in all; None when there is none of this version."""
    for _ in range(5):
        head = cache.head(journal, PROJECTION)
        if head is None or head.version != version():
            return None
        top = cache.rows(journal, PROJECTION, ["head"]).get("head") or {}
        rows = cache.rows(journal, PROJECTION, cache.last_keys(journal, PROJECTION, "i:", newest))
        refs = {k for d in rows.values() if d.get("kind") == "run" for k in d["snapshots"].values()}
        refs |= set(top.get("latest_packages", {}).values())
        rows.update(cache.rows(journal, PROJECTION, refs))
        rows["head"] = top
        if cache.head(journal, PROJECTION) != head:
            continue
        restored = _restore(journal, head, rows)
        restored.unfinished &= set(restored.timeline.runs)
        return restored, int(top.get("items", len(restored.timeline.items)))
    return None


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
    for host, latest in top.get("latest_probes", {}).items():
        timeline.latest_probes[host] = {p: probes[s] for p, s in latest.items() if s in probes}
    for host, key in top.get("latest_packages", {}).items():
        if key in snapshots:
            timeline.latest_packages[host] = snapshots[key]
    timeline.latest_packages_seq = dict(top.get("latest_packages_seq", {}))
    timeline.events, timeline.last_ts = top.get("events", 0), top.get("last_ts")
    return Restored(timeline, head.seq, head, set(top.get("unfinished", [])))


def save(
    cache: ProjectionCache,
    journal: str,
    timeline: Timeline,
    changed: Iterable[TimelineItem],
    unfinished: set[str],
    seq: int,
    since: Head | None,
    anew: bool = False,
) -> bool:
    """Store the ``changed`` items (unsettled: runs in ``unfinished`` as not ended) and the
    head at ``seq``; False when another process saved since ``since``."""
    snapshots = _Snapshots()
    rows: dict[str, Any] = {}
    for item in changed:
        run = isinstance(item, StepRunView) and item.run_id in unfinished
        rows[item_key(item)] = item_json(item, snapshots, unfinished=run)
    latest_packages = {h: snapshots.key(p) for h, p in timeline.latest_packages.items()}
    rows.update(snapshots.rows)
    rows["head"] = {
        "plan": timeline.plan,
        "hosts": timeline.hosts,
        "events": timeline.events,
        "last_ts": timeline.last_ts,
        "latest_probes": {
            h: {p: v.seq for p, v in latest.items()} for h, latest in timeline.latest_probes.items()
        },
        "latest_packages": latest_packages,
        "latest_packages_seq": timeline.latest_packages_seq,
        "unfinished": sorted(unfinished),
        "items": len(timeline.items),
    }
    return cache.save(journal, PROJECTION, Head(version(), seq), rows, since=since, replace=anew)


def fold_on(timeline: Timeline, records: Iterable[Recorded]) -> tuple[list[TimelineItem], int]:
    """Fold ``records`` into ``timeline`` in place; the items they made or changed, and the
    last event folded (0 when none)."""
    touched: dict[int, TimelineItem] = {}
    last = first = 0
    for rec in records:
        first = first or rec.seq
        event = rec.event
        timeline.events += 1
        timeline.last_ts = rec.ts
        apply(event, rec, timeline)
        last = rec.seq
        run = timeline.runs.get(event.run_id) if event.run_id else None
        if run is not None:
            touched[id(run)] = run
        elif isinstance(event, ExpectationChecked):
            for item in reversed(timeline.items):  # the standalone probe it attached to
                if isinstance(item, ProbeView) and item.host == event.host_name:
                    touched[id(item)] = item
                    break
    # the new items are last (a run placed by its own time among earlier ones is touched above)
    for item in reversed(timeline.items):
        if not first or item.seq < first:
            break
        touched[id(item)] = item
    return list(touched.values()), last


def current_timeline(store: Any, journal: str, alive: Alive | None = None) -> Timeline:
    """The timeline of ``journal`` as it stands: the stored one folded on with the events
    after it (saved again for the next reader), runs not ended settled with ``alive`` (by
    default, the recorders' heartbeats in the store)."""
    cache = ProjectionCache(store.engine)
    restored = load(cache, journal)
    if restored is None:  # none stored, or of older code: folded anew, replacing it
        timeline, start, unfinished = Timeline(journal), 0, set()
        since, anew = cache.head(journal, PROJECTION), True
    else:
        timeline, start = restored.timeline, restored.seq
        since, unfinished, anew = restored.head, restored.unfinished, False
    changed, last = fold_on(timeline, store.read(journal, after=start))
    unfinished = {r for r, v in timeline.runs.items() if v.status == "unfinished"} | {
        r for r in unfinished if timeline.runs.get(r) is not None and not timeline.runs[r].finished
    }
    if last:
        save(cache, journal, timeline, changed, unfinished, last, since, anew=anew)
    return _settled(store, timeline, unfinished, alive)


def _settled(store: Any, timeline: Timeline, unfinished: set[str], alive: Alive | None) -> Timeline:
    """``timeline`` with its runs in ``unfinished`` (those not ended) settled as running or
    lost by ``alive`` (by default, the recorders' heartbeats in the store)."""
    for run in unfinished:
        view = timeline.runs.get(run)
        if view is not None:
            view.status, view.reason = "unfinished", None
    return settle(timeline, alive or store.liveness())


def one_run(
    store: Any, journal: str, run_id: str, seq: int, alive: Alive | None = None
) -> StepRunView:
    """The step run ``run_id`` of ``journal`` (started at event ``seq``: see
    :func:`journal.service.runs.find_stored_run`) as it stands, settled as
    :func:`current_timeline` settles it. When the stored timeline is up to date only the run's
    row and the snapshots it names are read; else the timeline is brought up to date (for the
    next reader too) and the run taken from it."""
    cache = ProjectionCache(store.engine)
    for _ in range(5):
        head = cache.head(journal, PROJECTION)
        if head is None or head.version != version() or head.seq != store.last_seq(journal):
            break
        key = f"i:{seq:012d}"
        rows = cache.rows(journal, PROJECTION, [key])
        if key not in rows:  # an imported run placed by its own time: its key ends in its seq
            placed = cache.keys(journal, PROJECTION, "i:", suffix=f"{seq:012d}")
            rows = cache.rows(journal, PROJECTION, placed[:1])
            key = placed[0] if placed else key
        found = rows.get(key)
        if found is None or found.get("kind") != "run" or found.get("run_id") != run_id:
            break
        snapshots = cache.rows(journal, PROJECTION, found["snapshots"].values())
        if cache.head(journal, PROJECTION) != head:
            continue  # another process saved in between: read again
        view = item_of(found, snapshots)
        assert isinstance(view, StepRunView)
        timeline = Timeline(journal)
        timeline.runs[run_id] = view
        timeline.items.append(view)
        unfinished = {run_id} if view.status == "unfinished" else set()
        return _settled(store, timeline, unfinished, alive).runs[run_id]
    return current_timeline(store, journal, alive).runs[run_id]
