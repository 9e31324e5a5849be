"""The index rows of the stored timeline: small rows whose keys sort like the items they come
from, so that a prefix of keys answers a reader without restoring the timeline.

A journal of a year holds tens of thousands of items; `journal status` shows the latest run of
each plan step on each host and the story, `journal log` a page. Each item stored by
:mod:`journal.projections.stored` also stores the rows made here (and the item row names them,
so that a later save of the item deletes those that no longer hold):

- ``r:RUN`` the item key of each step run;
- ``p:HOST␟STEP␟POS`` each run of a step on a host with its stored status (progress: the
  latest run that stands);
- ``o:HOST␟POS`` each item of a host (``N:POS`` a note of none), ``t:STEP␟POS`` each run
  of a step, ``f:POS`` each
  failed run, ``H:``/``I:HOST␟POS`` a host's recorded and imported runs (`journal log
  --host/--step/--failed`, the hosts known only from imports);
- the story's facts, in the order its fold meets them: ``d:HOST␟POS`` a stack reading,
  ``g:HOST␟KIND␟POS`` a good read of packages or of a reading probe, ``m:HOST␟KIND␟POS`` one that
  failed, ``n:HOST␟POS`` a run's first package snapshot, ``x:HOST␟POS`` a transcript reading;
- ``M:POS`` each figure (the headline's series, the throughput page's figures);
- ``c:POS`` each step run in brief (run, step, host, seq, start, benchmark, command, stored
  status, imported, item key): the runs the throughput page marks on its charts and names
  between two figures, and those rollback planning looks through;
- ``P:PLAN␟POS`` each run of a `journal run plan` and ``L:POS`` its plan run's id (the
  postmortem of one plan run: ``--plan-run``).

``POS`` is the item's place as fixed-width digits (:func:`pos`), then a number within the item:
keys of one prefix sort in timeline order under any collation.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any, Protocol

from journal.mapper import to_plain
from journal.projections.timeline import (
    MetricView,
    NoteView,
    ProbeView,
    StepRunView,
    Timeline,
    TimelineItem,
)
from journal.projections.unread import Unread, of_probe, of_run
from journal.runs import FAILURES

#: Between the parts of a key (a host or step name never holds it).
SEP = "\x1f"

#: The probes that read the stack: torch-env, and what an imported transcript printed of it
#: (recorded as a ``transcript`` reading of the same shape).
READINGS = frozenset({"torch-env", "transcript"})

#: What a torch-env reading says of the stack: (label, dotted path in the result).
STACK = (
    ("torch", "torch.version"),
    ("CUDA", "torch.cuda"),
    ("NCCL", "nccl"),
    ("driver", "driver"),
)

#: The probe an imported transcript's readings are recorded as.
TRANSCRIPT = "transcript"


def pos(key: str) -> str:
    """An item key's place as 56 digits: its seq (or the seq it is placed after), its time's
    digits (zeros for an item recorded in place) and its seq."""
    digits = key[2:]
    if len(digits) == 12:
        return digits + "0" * 32 + digits
    return digits[:12] + digits[12:-12][:32].ljust(32, "0") + digits[-12:]


def reading(probe: ProbeView) -> dict[str, str | None]:
    """What a torch-env (or transcript) reading says of the stack: torch, CUDA, NCCL, driver."""
    from journal.probes.summary import value

    out: dict[str, str | None] = {}
    for label, path in STACK:
        found = value(probe.result or {}, path)
        # a part the probe could not read is {"unavailable": why}: not a version
        out[label] = None if found in (None, "") or isinstance(found, dict) else str(found)
    return out


def rows_of(
    item: TimelineItem,
    key: str,
    snapshot: Callable[[dict[str, Any]], str],
    status: str | None = None,
) -> dict[str, Any]:
    """The index rows of ``item`` stored under ``key`` (``snapshot``: a package set's row key;
    ``status``: a run's as stored, where that is not its own: one not ended)."""
    at = pos(key)
    out: dict[str, Any] = {}
    host = getattr(item, "host", None)
    if host:
        out[f"o:{host}{SEP}{at}"] = key
    elif isinstance(item, NoteView):  # a note of no host: on every host's page
        out[f"N:{at}"] = key
    facts = _Facts(out, at)
    if isinstance(item, StepRunView):
        status = status or item.status
        out[f"r:{item.run_id}"] = key
        out[f"p:{item.host}{SEP}{item.step}{SEP}{at}"] = {"k": key, "s": status}
        out[f"t:{item.step}{SEP}{at}"] = key
        out[f"c:{at}"] = {
            "r": item.run_id,
            "s": item.step,
            "h": item.host,
            "q": item.seq,
            "t": item.started,
            "b": item.benchmark,
            "x": item.command,
            "st": status,
            "i": item.imported,
            "k": key,
        }
        out[f"{'I' if item.imported else 'H'}:{item.host}{SEP}{at}"] = key
        if item.plan_run:
            out[f"P:{item.plan_run}{SEP}{at}"] = key
            out[f"L:{at}"] = item.plan_run
        if status in FAILURES:
            out[f"f:{at}"] = key
        first = item.snapshots.get("before") or item.snapshots.get("after")
        if first is not None:
            facts.add("n", item.host, snapshot(first))
        if "before" in item.snapshots:
            facts.good(item.host, "packages")
        for miss in of_run(item):
            facts.miss(miss)
        if "after" in item.snapshots:
            facts.good(item.host, "packages")
        for probe in item.probes:
            facts.read(probe)
        for metric in item.metrics:
            facts.add("M", None, to_plain(metric))
    elif isinstance(item, ProbeView):
        miss = of_probe(item)
        if miss is not None:
            facts.miss(miss)
        facts.read(item)
    elif isinstance(item, MetricView):
        facts.add("M", None, to_plain(item))
    return out


class _Facts:
    """The story's facts of one item, numbered in the order its fold meets them."""

    def __init__(self, out: dict[str, Any], at: str) -> None:
        self.out, self.at, self.n = out, at, 0

    def add(self, prefix: str, host: str | None, value: Any, kind: str | None = None) -> None:
        parts = [p for p in (host, kind) if p is not None]
        self.out[f"{prefix}:{''.join(p + SEP for p in parts)}{self.at}{self.n:04d}"] = value
        self.n += 1

    def good(self, host: str, kind: str) -> None:
        self.add("g", host, 1, kind)  # a row of None is no row to the store

    def miss(self, miss: Unread) -> None:
        kind = "packages" if miss.snapshot else miss.probe
        if kind in ("packages", *READINGS):
            self.add("m", miss.host, to_plain(miss), kind)

    def read(self, probe: ProbeView) -> None:
        if probe.probe not in READINGS or probe.result is None:
            return
        self.add("d", probe.host, reading(probe))
        if probe.probe == TRANSCRIPT and probe.run is not None:
            self.add("x", probe.host, probe.result)
        self.good(probe.host, probe.probe)


class Facts(Protocol):
    """The index rows a reader asks by prefix (the story's facts): a timeline's own
    (:func:`facts_of`) or the stored ones (:class:`journal.projections.digest.Digest`)."""

    def story_hosts(self) -> list[str]:
        """The journal's hosts, then every other host of a run or probe, first seen first."""

    def first(self, prefix: str) -> tuple[str, Any] | None: ...

    def last(self, prefix: str) -> tuple[str, Any] | None: ...

    def count(self, prefix: str) -> int: ...

    def all(self, prefix: str, start: str = "", end: str = "") -> list[tuple[str, Any]]:
        """The rows of ``prefix`` (from ``prefix`` + ``start`` on, before ``prefix`` +
        ``end`` where given), in key order."""

    def snapshot(self, key: str) -> dict[str, Any]:
        """The package set stored under ``key``."""

    def latest_packages(self, host: str) -> dict[str, Any] | None: ...

    def latest_packages_seq(self, host: str) -> int:
        """The event of the host's latest package set (0: none)."""

    def metrics(self) -> list[MetricView]:
        """Every figure, in the order recorded."""

    def headline(self, make: Callable[[list[MetricView]], Any]) -> Any:
        """``make`` of every figure (the story's headline)."""


class _TimelineFacts:
    """The facts of a timeline in memory, made by :func:`rows_of` as the stored ones are."""

    def __init__(self, timeline: Timeline) -> None:
        from journal.projections.stored import _Snapshots, item_key

        self.timeline = timeline
        self.held = _Snapshots()  # the package sets under their digest, as stored
        rows: dict[str, Any] = {}
        order: dict[str, None] = dict.fromkeys(timeline.hosts)
        for item in timeline.items:
            if isinstance(item, StepRunView | ProbeView):
                order.setdefault(item.host)
            rows.update(rows_of(item, item_key(item), self.held.key))
        self.order = list(order)
        self.rows = rows
        self.keys = sorted(rows)

    def story_hosts(self) -> list[str]:
        return self.order

    def _span(self, prefix: str) -> tuple[int, int]:
        lo = bisect.bisect_left(self.keys, prefix)
        return lo, bisect.bisect_left(self.keys, prefix + "\U0010ffff", lo)

    def first(self, prefix: str) -> tuple[str, Any] | None:
        lo, hi = self._span(prefix)
        return (self.keys[lo], self.rows[self.keys[lo]]) if lo < hi else None

    def last(self, prefix: str) -> tuple[str, Any] | None:
        lo, hi = self._span(prefix)
        return (self.keys[hi - 1], self.rows[self.keys[hi - 1]]) if lo < hi else None

    def count(self, prefix: str) -> int:
        lo, hi = self._span(prefix)
        return hi - lo

    def all(self, prefix: str, start: str = "", end: str = "") -> list[tuple[str, Any]]:
        lo, hi = self._span(prefix)
        if start:
            lo = bisect.bisect_left(self.keys, prefix + start, lo, hi)
        if end:
            hi = bisect.bisect_left(self.keys, prefix + end, lo, hi)
        return [(k, self.rows[k]) for k in self.keys[lo:hi]]

    def snapshot(self, key: str) -> dict[str, Any]:
        return self.held.rows[key]

    def latest_packages(self, host: str) -> dict[str, Any] | None:
        return self.timeline.latest_packages.get(host)

    def latest_packages_seq(self, host: str) -> int:
        return self.timeline.latest_packages_seq.get(host, 0)

    def metrics(self) -> list[MetricView]:
        return self.timeline.metrics

    def headline(self, make: Callable[[list[MetricView]], Any]) -> Any:
        return make(self.timeline.metrics)


def facts_of(timeline: Timeline) -> Facts:
    """A timeline's facts, as its stored index would hold them."""
    return _TimelineFacts(timeline)
