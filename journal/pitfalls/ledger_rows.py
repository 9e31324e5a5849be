"""What the findings projection (:mod:`journal.pitfalls.ledger`) stores: its rows' keys, the
findings, runs and figures in them (dataclasses through :func:`journal.mapper.to_plain`), and
per host the context that judging its next run needs (and the open findings there, read back
for the lifecycle: :class:`OpenRows`).

Rows: ``run:<run>`` the findings about one step run (``run:~<seq>`` one outside any run);
``host:<host>`` a :class:`HostContext`; ``open:<host>:<id>`` the open findings of one pitfall
there; ``acks`` the acknowledgements in force (:mod:`journal.pitfalls.acks`); ``pending`` the
runs judged but not kept, still running; ``tally`` the findings counted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from journal.mapper import of_plain, to_plain
from journal.pitfalls import SEVERITIES
from journal.pitfalls.base import Finding
from journal.pitfalls.lifecycle import Stored
from journal.pitfalls.resolution import plain
from journal.projections.packages import diff_packages
from journal.reading.bench import Figure, figure_key
from journal.reading.subject import Run, Segment
from journal.runs import SUCCEEDED

#: The row counting the stored findings by pitfall, severity and open or resolved.
TALLY = "tally"
#: Finished runs of a host kept as context for judging the next ones.
CONTEXT_RUNS = 8
#: The tail of a context run's output kept (detectors reading earlier output see this much).
CONTEXT_TEXT = 16_384
#: Runs whose figures are kept per series: the newest whose run is not judged again is what
#: the next figure is compared with.
FIGURES_KEPT = 3
#: Figures kept of one run of a series: the repeated samples a benchmark printed, compared as
#: a whole (see journal.pitfalls.throughput_regression).
SAMPLES_KEPT = 32


# -- keys ------------------------------------------------------------------------------------


def host_key(host: str | None) -> str:
    return f"host:{host or ''}"


def open_key(host: str | None, id: str) -> str:
    """The row listing the open findings of one pitfall on one host: [run row, key] pairs."""
    return f"open:{host or ''}:{id}"


def tally_key(id: str, severity: str, resolved: bool) -> str:
    return f"{id}\t{severity}\t{'resolved' if resolved else 'open'}"


def run_key(found: Finding) -> str:
    return f"run:{found.run}" if found.run else f"run:~{found.seq}"


def order(found: Finding) -> tuple[float, int, int, str]:
    """Where a finding is listed: as :func:`journal.pitfalls.judge` orders them."""
    return _placed(found.run, found.facts, found.seq, found.severity, found.id)


def stored_order(d: dict[str, Any]) -> tuple[float, int, int, str]:
    """:func:`order` of a stored finding (:func:`finding_json`), read from its row."""
    return _placed(d.get("run"), d.get("facts") or {}, d.get("seq"), d["severity"], d["id"])


def _placed(
    run: str | None, facts: dict[str, Any], seq: int | None, severity: str, id: str
) -> tuple[float, int, int, str]:
    if run and "run_event" in facts:
        at: tuple[float, int] = (facts["run_event"] or 0, 0)
    elif seq is not None:
        at = (seq, -1)
    else:
        at = (float("inf"), 0)
    return (*at, -SEVERITIES.index(severity), id)


# -- findings, runs, figures -------------------------------------------------------------------


def finding_json(f: Finding) -> dict[str, Any]:
    """A finding as stored (without its acknowledgement: those are read with it)."""
    out = to_plain(f, ("acknowledged",))
    out["facts"] = plain(f.facts)
    return out


def finding_of(d: dict[str, Any]) -> Finding:
    return of_plain(Finding, d)


def run_json(run: Run) -> dict[str, Any]:
    """A judged run kept as context: its output cut to its last CONTEXT_TEXT characters
    (from a line's start), its expectations counted."""
    text, start = run.text, 0
    if len(text) > CONTEXT_TEXT:
        cut = text.find("\n", len(text) - CONTEXT_TEXT)
        start = cut + 1 if cut >= 0 else len(text) - CONTEXT_TEXT
    out = to_plain(run, ("text", "segments", "diff", "expectations", "prompt_line", "prompt_text"))
    out["text"] = text[start:]
    out["segments"] = [to_plain(seg) for seg in _segments_from(run, start)]
    out["expectations"] = len(run.expectations)
    return out


def _segments_from(run: Run, start: int) -> list[Segment]:
    """The run's output segments for its text from ``start`` on: positions moved, and the
    segment cut in two numbered from its first kept line, so evidence keeps its lines."""
    out: list[Segment] = []
    if not run.segments:
        return out
    bounds = [s.start for s in run.segments[1:]] + [len(run.text)]
    for seg, end in zip(run.segments, bounds, strict=True):
        if start and end <= start:
            continue
        if seg.start >= start:
            out.append(replace(seg, start=seg.start - start))
        else:
            lines = run.text.count("\n", seg.start, start)
            out.append(replace(seg, start=0, first_line=seg.first_line + lines))
    return out


def run_of(d: dict[str, Any]) -> Run:
    d = {**d, "expectations": [None] * d["expectations"]}
    run = of_plain(Run, d)
    if run.before is not None and run.after is not None:
        run.diff = diff_packages(run.before, run.after)
    return run


def figure_json(f: Figure) -> dict[str, Any]:
    """A trusted figure kept as context (why one is not trusted is no matter here)."""
    return to_plain(f, ("invalid",))


def figure_of(d: dict[str, Any], run: str) -> Figure:
    """A stored figure, as one of ``run``."""
    return of_plain(Figure, {**d, "run": run, "labels": dict(d["labels"])})


def series_key(f: Figure) -> str:
    """The series a figure is kept under in its host's context."""
    return json.dumps(plain(figure_key(f)))


# -- the context of a host -------------------------------------------------------------------


@dataclass
class HostContext:
    """What judging the next run of a host needs from its past."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    probed: dict[str, Any] | None = None
    #: series -> its last figures (of different runs, newest last)
    figures: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: pitfall ids with open findings here (each id's in a row of its own: see open_key)
    open: list[str] = field(default_factory=list)
    resolved: dict[str, str] = field(default_factory=dict)  # pitfall id -> finding key

    @classmethod
    def of(cls, d: dict[str, Any] | None) -> HostContext:
        return of_plain(cls, d) if d else cls()

    def to_json(self) -> dict[str, Any]:
        return to_plain(self)

    def past(self, host: str, judged: set[str]) -> tuple[list[Run], Carrier | None]:
        """The stored past as runs to judge beside the new ones (a run judged again is left
        out: its new self is among those), and a carrier of the figures before them."""
        keep = [r for r in self.runs if r["key"] not in judged]
        if self.probed and self.probed["key"] in judged:
            self.probed = None
        if self.probed and all(r["key"] != self.probed["key"] for r in keep):
            keep.insert(0, self.probed)
        mine = [run_of(r) for r in keep]
        first = min((r.event or 0 for r in mine), default=1)
        # A kept run's figures stay its own (as if recorded with it): read again from its
        # output they could carry other labels than those the series were kept under.
        kept = {r.key for r in mine}
        # Per series the figures of the newest run not judged again now (a run judged
        # again brings its own figures back with it): its repeated samples, or one figure.
        stored = [
            f
            for mine_ in (
                [f for f in series if f.get("run") not in judged]
                for series in self.figures.values()
            )
            if mine_
            for f in _last_run(mine_)
        ]
        carrier = Carrier(host, first - 1, [f for f in stored if f.get("run") not in kept])
        carrier.figures_ += [figure_of(f, f["run"]) for f in stored if f.get("run") in kept]
        return mine, carrier if carrier.figures_ else None

    def remember(self, runs: list[Run]) -> None:
        """Keep the newest of these judged runs of the host (and its last probed one)."""
        if not runs:
            return
        again = {r.key for r in runs}
        earlier = [r for r in self.runs if r["key"] not in again]
        self.runs = [*earlier, *(run_json(r) for r in runs)][-CONTEXT_RUNS:]
        self.runs.sort(key=lambda r: r["event"] or 0)
        probed = [r for r in runs if "torch-env" in r.probes]
        if probed:
            self.probed = run_json(replace(probed[-1], text=""))

    def keep_figures(self, again: set[str], trusted: list[Figure]) -> None:
        """Drop the figures of runs judged ``again`` and keep these trusted ones of the host."""
        for series in self.figures.values():
            series[:] = [f for f in series if f.get("run") not in again]
        for f in trusted:
            series = self.figures.setdefault(series_key(f), [])
            stored = figure_json(f)
            if any(_same(g, stored) for g in series):
                continue  # one stored before, given back as context
            series.append(stored)
            _trim(series)
        for key in [k for k, series in self.figures.items() if not series]:
            del self.figures[key]


def _last_run(series: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures of a series' newest run (one figure when it was recorded outside a run)."""
    last = series[-1].get("run")
    if last is None:
        return series[-1:]
    return [f for f in series if f.get("run") == last]


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two stored figures are one (a context figure carries another run key)."""
    return a["event"] is not None and all(a[k] == b[k] for k in ("event", "value", "evidence"))


def _trim(series: list[dict[str, Any]]) -> None:
    """Keep the figures of a series' newest FIGURES_KEPT runs, the last SAMPLES_KEPT of each
    (a figure recorded outside a run counts as a run of its own)."""
    count: dict[Any, int] = {}
    kept: list[dict[str, Any]] = []
    for index in range(len(series) - 1, -1, -1):
        run = series[index].get("run")
        run = ("no run", index) if run is None else run
        if run not in count:
            if len(count) == FIGURES_KEPT:
                break
            count[run] = 0
        if count[run] < SAMPLES_KEPT:
            count[run] += 1
            kept.append(series[index])
    series[:] = kept[::-1]


class Carrier(Run):
    """A stand-in run holding a host's last figures, so detectors compare new ones with them."""

    def __init__(self, host: str, event: int, stored: list[dict[str, Any]]) -> None:
        super().__init__(key=f"context:{host}", step="(earlier figures)", host=host, command="")
        self.event = event
        self.status = SUCCEEDED
        self.figures_ = [figure_of(d, self.key) for d in stored]


class OpenRows(Stored):
    """The open findings of earlier folds, as the ledger stores them: read through ``state``
    (the rows one fold of the ledger reads), those of runs judged ``again`` left out."""

    def __init__(self, state: Any, contexts: dict[str, HostContext], again: set[str]) -> None:
        self.state, self.contexts, self.again = state, contexts, again

    def ids(self, host: str | None) -> list[str]:
        context = self.contexts.get(host) if host is not None else None
        return list(context.open) if context else []

    def load(self, host: str | None, id: str) -> list[Finding]:
        refs = [r for r in self.state.row(open_key(host, id)) or [] if r[0] not in self.again]
        self.state.need(ref for ref, _ in refs)
        found = []
        for ref, key in refs:
            for d in self.state.row(ref) or []:
                one = finding_of(d)
                if one.key == key and one.resolved_by is None:
                    found.append(one)
        return found
