"""Drift's comparison: the hosts of each group lined up, the majority of each row, and the step
run after which a host diverged."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase

from journal.projections.drift.readings import (
    KEY_PACKAGES,
    NOT_INSTALLED,
    STACK,
    HostReadings,
    Readings,
    Segment,
    Source,
    StepRunRef,
    Value,
)


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
    #: per host, its latest reading from an imported transcript (None: none)
    transcribed: dict[str, Source | None] = field(default_factory=dict)

    @property
    def read(self) -> list[str]:
        """The hosts with any reading (a probe, a snapshot, a transcript), in order."""
        return [
            host
            for host in self.hosts
            if self.probed.get(host) or self.snapshotted.get(host) or self.transcribed.get(host)
        ]

    @property
    def comparable(self) -> bool:
        """Whether some row has values read on two hosts or more: else "no drift" would
        be vacuous."""
        return any(row.known >= 2 for row in self.rows)

    @property
    def verdict(self) -> str:
        """The group's one-line verdict when no host is flagged (or why there is none)."""
        read = self.read
        if not read:
            return "no host read yet: nothing to compare"
        if len(read) == 1:
            return f"only one host read ({read[0]}): nothing to compare"
        if not self.comparable:
            return f"{len(read)} hosts read, but no value on two of them: nothing to compare"
        return "no drift: every host that was read agrees"

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


def _since(state: Readings, segments: list[Segment], start: int) -> Since:
    seen = segments[start].first
    if start == 0:
        return Since(True, (), seen)
    runs = tuple(state.runs[run] for run in segments[start].between)
    return Since(False, runs, seen)


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
            if kind == "stack" and host.transcript is not None:
                why = "not printed in its transcript, and no torch-env probe"
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
                since = _since(state, segments, start)
                cells[name] = replace(cells[name], odd=True, since=since)
            else:
                since = _since(state, segments, _streak(segments, False, majority))
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
        read = {h: r.transcript if r else None for h, r in zip(hosts, readings, strict=True)}
        report.append(GroupDrift(name, hosts, rows, probed, snapped, read))
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
