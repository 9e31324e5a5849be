"""Drift: what each host's GPU stack is, the value most hosts of its group hold, and the hosts
that differ, each with the step run after which it diverged.

Two pure steps. :func:`fold` replays a journal's probes and snapshots into :class:`Readings`
(per host, per thing that matters, the stretches of readings that read the same, each with the
event it was read from); it can be extended with newer events. :func:`compare` lines the hosts
of each group up against each other. `journal drift` and the web UI's hosts page both show it.

The rules, which the README repeats:

- The **majority** of a row is the value more hosts of the group hold than any other (hosts
  never read do not count; an unreadable field counts as the value ``?``). When two values tie
  for most, the row has **no majority** and every host in it is flagged: nothing says which one
  is odd, and a split fleet is drift all the same (two hosts that differ are always a tie).
- A flagged host **diverged after** the step run that its first differing reading followed: the
  start of the last stretch of its readings that differ from the majority (in a tie: that read
  its current value). The step run whose own snapshot or probe showed it names itself; between
  two readings with no step run, the change was made outside the recorded steps; several step
  runs with no reading between them are all named. A host that differed from its first reading
  on differs **since first seen**.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase, translate
from functools import lru_cache, singledispatch
from typing import Any

from journal.events import (
    Event,
    JournalOpened,
    PackagesSnapshotted,
    ProbeRecorded,
    StepFinished,
    StepStarted,
)
from journal.mapper import Recorded
from journal.projections.packages import normalize

#: (key, label): what the hosts page and `journal drift` compare, read from ``torch-env``;
#: the key is the dotted path into its result, as `expect` spells it.
STACK: tuple[tuple[str, str], ...] = (
    ("torch.version", "torch"),
    ("torch.cuda", "torch CUDA"),
    ("nccl", "NCCL (torch)"),
    ("torch.cudnn", "cuDNN (torch)"),
    ("driver", "driver"),
    ("cuda_driver", "CUDA driver"),
    ("gpu_count", "GPU count"),
    ("gpu_name", "GPU name"),
    ("capability", "capability"),
    ("nvcc.release", "nvcc"),
    ("cuda_home", "CUDA_HOME"),
    ("system_nccl.NCCL_VERSION", "system NCCL"),
)

#: Packages that make or break the stack (normalised names; globs for families); a row is
#: shown for each that is installed on any host of the group.
KEY_PACKAGES = (
    "torch",
    "torchvision",
    "torchaudio",
    "numpy",
    "nvidia-nccl-cu*",
    "sgl-kernel",
    "sglang-kernel",
    "sglang",
    "vllm",
    "flashinfer*",
    "triton",
    "transformers",
)

#: The event types the fold reads (so a reader can ask the store for only these).
EVENT_TYPES = (
    "JournalOpened",
    "StepStarted",
    "StepFinished",
    "PackagesSnapshotted",
    "ProbeRecorded",
)

NOT_INSTALLED = "not installed"
UNREADABLE = "?"
NONE = "—"


@dataclass(frozen=True)
class Source:
    """Where a value was read: a ``torch-env`` probe or a package snapshot (``kind``), by
    event seq and time, the step run it belongs to, and ``phase``: ``before`` or ``after`` that
    step run, or ``probe`` for one run on its own."""

    kind: str
    seq: int
    ts: str
    run: str | None
    phase: str


@dataclass(frozen=True)
class Value:
    """A value as shown (``?`` for a field the probe could not read, ``note`` saying why)."""

    text: str
    note: str = ""


@dataclass
class Segment:
    """A stretch of one host's readings of one thing that all read the same value."""

    value: Value
    first: Source
    last: Source


@dataclass
class StepRunRef:
    """A step run as drift names it: which step, on which host, when it started and ended."""

    run_id: str
    step: str
    host: str
    seq: int
    ts: str
    benchmark: bool = False
    status: str = "unfinished"
    finished_seq: int | None = None


@dataclass
class HostReadings:
    """Everything read on one host: per key, its segments in order."""

    host: str
    series: dict[str, list[Segment]] = field(default_factory=dict)
    probed: Source | None = None
    first_snapshot: Source | None = None
    snapshot: Source | None = None


@dataclass
class Readings:
    """A journal's probes and snapshots folded per host (the state of :func:`fold`)."""

    journal: str
    hosts: dict[str, str] = field(default_factory=dict)
    runbook: str | None = None
    runs: dict[str, StepRunRef] = field(default_factory=dict)
    by_host: dict[str, HostReadings] = field(default_factory=dict)
    events: int = 0
    last_seq: int = 0

    def host(self, name: str) -> HostReadings:
        return self.by_host.setdefault(name, HostReadings(name))

    def all_hosts(self) -> list[str]:
        """The runbook's hosts, then any other host a step ran on or was read on."""
        runs = (run.host for run in self.runs.values())
        return list(dict.fromkeys([*self.hosts, *runs, *self.by_host]))


_KEY = re.compile("|".join(f"(?:{translate(pattern)})" for pattern in KEY_PACKAGES))


@lru_cache(maxsize=16384)
def key_package(name: str) -> str | None:
    """The normalised name of a distribution that is one of :data:`KEY_PACKAGES`, else None."""
    name = normalize(name)
    return name if _KEY.match(name) else None


def read_field(result: dict[str, Any], path: str) -> Value:
    """A ``torch-env`` field as a value; an unreadable part of the path says why."""
    node: Any = result
    for part in path.split("."):
        if isinstance(node, dict) and "unavailable" in node:
            break
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict) and "unavailable" in node:
        return Value(UNREADABLE, str(node["unavailable"]))
    if node is None:
        return Value(NONE)
    if isinstance(node, list):
        return Value(", ".join(str(x) for x in node) or NONE)
    return Value(str(node))


def _extend(series: dict[str, list[Segment]], key: str, value: Value, source: Source) -> None:
    segments = series.setdefault(key, [])
    if segments and segments[-1].value.text == value.text:
        segments[-1].last = source
    else:
        segments.append(Segment(value, source, source))


@singledispatch
def apply(event: Event, rec: Recorded, state: Readings) -> None:
    """Events drift does not read change nothing."""


@apply.register
def _(event: JournalOpened, rec: Recorded, state: Readings) -> None:
    state.hosts, state.runbook = dict(event.hosts), event.runbook


@apply.register
def _(event: StepStarted, rec: Recorded, state: Readings) -> None:
    state.runs[event.run] = StepRunRef(
        event.run, event.step, event.host_name, rec.seq, rec.ts, event.benchmark is not None
    )


@apply.register
def _(event: StepFinished, rec: Recorded, state: Readings) -> None:
    run = state.runs.get(event.run)
    if run is not None:
        run.status, run.finished_seq = event.status, rec.seq


@apply.register
def _(event: PackagesSnapshotted, rec: Recorded, state: Readings) -> None:
    source = Source("snapshot", rec.seq, rec.ts, event.run, event.phase)
    host = state.host(event.host_name)
    versions = {}
    for raw, entry in event.packages.items():
        name = key_package(raw)
        if name is not None:
            version = entry.get("version") if isinstance(entry, dict) else entry
            versions[name] = str(version)
    known = {key.removeprefix("packages.") for key in host.series if key.startswith("packages.")}
    for name in sorted(known | set(versions)):
        key = f"packages.{name}"
        if key not in host.series and host.first_snapshot and host.snapshot:
            # Installed now, absent from every earlier snapshot of this host.
            host.series[key] = [Segment(Value(NOT_INSTALLED), host.first_snapshot, host.snapshot)]
        _extend(host.series, key, Value(versions.get(name, NOT_INSTALLED)), source)
    host.first_snapshot = host.first_snapshot or source
    host.snapshot = source


@apply.register
def _(event: ProbeRecorded, rec: Recorded, state: Readings) -> None:
    if event.probe != "torch-env" or not isinstance(event.result, dict):
        return
    source = Source("probe", rec.seq, rec.ts, event.run, "after" if event.run else "probe")
    host = state.host(event.host_name)
    for key, _label in STACK:
        _extend(host.series, key, read_field(event.result, key), source)
    host.probed = source


def fold(journal: str, records: Iterable[Recorded], state: Readings | None = None) -> Readings:
    """Fold a journal's events (those of :data:`EVENT_TYPES` suffice) into its readings, or
    extend ``state`` with events newer than it has seen."""
    state = state or Readings(journal)
    for rec in records:
        if rec.seq <= state.last_seq:
            continue
        state.events += 1
        state.last_seq = rec.seq
        apply(rec.event, rec, state)
    return state


# -- comparing the hosts of a group ------------------------------------------------------------


@dataclass(frozen=True)
class Since:
    """When a host's value came to differ: ``first_seen`` (it always differed), else the step
    runs after which it was first seen differing (none: changed outside the recorded steps),
    and ``seen``, the reading that first showed it."""

    first_seen: bool
    runs: tuple[StepRunRef, ...]
    seen: Source


@dataclass(frozen=True)
class Cell:
    """One value on one host: ``text`` None where it was never read; ``odd`` when it differs
    from the group's majority (or the row has none), with ``since`` saying from when."""

    text: str | None
    note: str = ""
    source: Source | None = None
    odd: bool = False
    since: Since | None = None


@dataclass(frozen=True)
class Row:
    """One thing (a stack field or a key package) across the hosts of a group."""

    key: str
    label: str
    kind: str
    cells: dict[str, Cell]
    majority: str | None
    counts: dict[str, int]
    #: the steps after which the majority hosts came to hold the majority value
    majority_steps: tuple[str, ...] = ()

    @property
    def differs(self) -> bool:
        return len(self.counts) > 1

    @property
    def known(self) -> int:
        return sum(self.counts.values())

    @property
    def odd_hosts(self) -> list[str]:
        return [host for host, cell in self.cells.items() if cell.odd]


@dataclass(frozen=True)
class GroupDrift:
    """The hosts of one group side by side, and those that differ."""

    name: str
    hosts: list[str]
    rows: list[Row]
    probed: dict[str, Source | None]
    snapshotted: dict[str, Source | None]

    @property
    def drifting(self) -> list[str]:
        """The hosts flagged in any row, in the group's order."""
        odd = {host for row in self.rows for host in row.odd_hosts}
        return [host for host in self.hosts if host in odd]

    def divergences(self) -> list[tuple[Row, str]]:
        """(row, host) of every flagged value, in row order."""
        return [(row, host) for row in self.rows for host in row.odd_hosts]


@dataclass(frozen=True)
class Drift:
    """The drift report of a journal: one :class:`GroupDrift` per group of hosts."""

    journal: str
    groups: list[GroupDrift]

    @property
    def drifts(self) -> bool:
        return any(group.drifting for group in self.groups)


def _streak(segments: list[Segment], differs: bool, value: str) -> int:
    """Where the last stretch of segments that differ from (or equal) ``value`` starts."""
    start = len(segments)
    while start > 0 and (segments[start - 1].value.text != value) == differs:
        start -= 1
    return start


def _between(state: Readings, host: str, prev: Source, seen: Source) -> tuple[StepRunRef, ...]:
    """The step runs on ``host`` that could have changed what ``prev`` and ``seen`` read."""
    found = []
    for run in state.runs.values():
        if run.host != host or run.benchmark:
            continue
        if (run.run_id == prev.run and prev.phase == "after") or (
            run.run_id == seen.run and seen.phase == "before"
        ):
            continue  # read after it ran, or before it did
        ended = run.finished_seq if run.finished_seq is not None else seen.seq + 1
        if run.seq < seen.seq and ended > prev.seq:
            found.append(run)
    return tuple(sorted(found, key=lambda r: r.seq))


def _since(state: Readings, host: str, segments: list[Segment], start: int) -> Since:
    seen = segments[start].first
    if start == 0:
        return Since(True, (), seen)
    return Since(False, _between(state, host, segments[start - 1].last, seen), seen)


def _row(state: Readings, hosts: list[str], key: str, label: str, kind: str) -> Row:
    series: dict[str, list[Segment]] = {}
    cells: dict[str, Cell] = {}
    for name in hosts:
        host = state.by_host.get(name) or HostReadings(name)
        segments = host.series.get(key)
        if not segments and kind == "packages" and host.first_snapshot and host.snapshot:
            segments = [Segment(Value(NOT_INSTALLED), host.first_snapshot, host.snapshot)]
        if not segments:
            why = "no torch-env probe yet" if kind == "stack" else "no package snapshot yet"
            cells[name] = Cell(None, why)
            continue
        series[name] = segments
        last = segments[-1]
        cells[name] = Cell(last.value.text, last.value.note, last.last)
    counts = Counter(cell.text for cell in cells.values() if cell.text is not None)
    ranked = counts.most_common()
    majority = None
    if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]):
        majority = ranked[0][0]
    steps: list[str] = []
    if len(ranked) > 1:
        for name, segments in series.items():
            current = segments[-1].value.text
            if majority is None or current != majority:
                differs = majority is not None
                start = _streak(segments, differs, majority if differs else current)
                since = _since(state, name, segments, start)
                cells[name] = replace(cells[name], odd=True, since=since)
            else:
                since = _since(state, name, segments, _streak(segments, False, majority))
                steps += [run.step for run in since.runs]
    return Row(key, label, kind, cells, majority, dict(ranked), tuple(dict.fromkeys(steps)))


def _package_names(state: Readings, hosts: list[str]) -> list[str]:
    """The key packages installed now on any of ``hosts``, in :data:`KEY_PACKAGES` order."""
    present = set()
    for name in hosts:
        host = state.by_host.get(name)
        for key, segments in host.series.items() if host else ():
            if key.startswith("packages.") and segments[-1].value.text != NOT_INSTALLED:
                present.add(key.removeprefix("packages."))
    ordered = []
    for pattern in KEY_PACKAGES:
        ordered += sorted(name for name in present if fnmatchcase(name, pattern))
    return list(dict.fromkeys(ordered))


def group_hosts(
    state: Readings, groups: Mapping[str, Sequence[str]] | None
) -> dict[str, list[str]]:
    """The groups to compare within: the runbook's ``[groups]`` (hosts in none form
    ``ungrouped``), or, without groups, every host of the journal as ``all``."""
    everyone = state.all_hosts()
    if not groups:
        return {"all": everyone}
    out = {name: list(dict.fromkeys(members)) for name, members in groups.items()}
    grouped = {host for members in out.values() for host in members}
    rest = [host for host in everyone if host not in grouped]
    if rest:
        out.setdefault("ungrouped", rest)
    return out


def compare(state: Readings, groups: Mapping[str, Sequence[str]] | None = None) -> Drift:
    """Line up the hosts of each group: per row the majority, the odd hosts and since when."""
    report = []
    for name, hosts in group_hosts(state, groups).items():
        rows = [_row(state, hosts, key, label, "stack") for key, label in STACK]
        rows += [
            _row(state, hosts, f"packages.{pkg}", pkg, "packages")
            for pkg in _package_names(state, hosts)
        ]
        readings = [state.by_host.get(host) for host in hosts]
        probed = {h: r.probed if r else None for h, r in zip(hosts, readings, strict=True)}
        snapped = {h: r.snapshot if r else None for h, r in zip(hosts, readings, strict=True)}
        report.append(GroupDrift(name, hosts, rows, probed, snapped))
    return Drift(state.journal, report)


def runbook_groups(path: str | None, journal: str) -> dict[str, list[str]]:
    """The ``[groups]`` of the runbook a journal was opened from, when it is still there and
    still names that journal; else none. (Reads a file: kept here so the CLI and the web
    resolve groups alike.)"""
    if not path:
        return {}
    from journal.errors import BadInput
    from journal.runbook import load

    try:
        runbook = load(path)
    except (BadInput, OSError):
        return {}
    if runbook.name != journal:
        return {}
    return dict(getattr(runbook, "groups", None) or {})
