"""Drift's readings: each host's values of what matters, folded from the journal's probes and
snapshots, in stretches that read the same, each with the event it was read from."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import translate
from functools import lru_cache, singledispatch
from typing import Any

from journal.benchmarks.parsers.nccl import nccl_triple
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

#: The facts a transcript printed (:mod:`journal.reading.printed` names them) as the
#: :data:`STACK` keys they are: an imported transcript's readings.
PRINTED: dict[str, str] = {
    "torch.version": "torch.version",
    "torch.cuda": "torch.cuda",
    "torch.nccl": "nccl",
    "cudnn": "torch.cudnn",
    "driver.version": "driver",
    "driver.cuda": "cuda_driver",
    "gpu.count": "gpu_count",
    "gpu.name": "gpu_name",
    "gpu.capability": "capability",
    "nvcc.release": "nvcc.release",
}

#: The probe name under which an import records what its transcript printed of the stack.
TRANSCRIPT = "transcript"

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
    """Where a value was read: a ``torch-env`` probe, a package snapshot or an imported
    ``transcript`` (``kind``), by event seq and time, the step run it belongs to, and
    ``phase``: ``before`` or ``after`` that step run, or ``probe`` for one run on its own."""

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
    #: the step runs on the host that could have changed the value since the stretch before
    #: (their ids, in the order they started; worked out when the stretch began)
    between: list[str] = field(default_factory=list)


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
    transcript: Source | None = None  # the latest reading printed in an imported transcript
    first_snapshot: Source | None = None
    snapshot: Source | None = None


@dataclass
class Readings:
    """A journal's probes and snapshots folded per host (the state of :func:`fold`)."""

    journal: str
    hosts: dict[str, str] = field(default_factory=dict)
    runbook: str | None = None
    #: the step runs a stretch names, and those a stretch begun later may name (the rest are
    #: let go: :func:`_let_go`)
    runs: dict[str, StepRunRef] = field(default_factory=dict)
    by_host: dict[str, HostReadings] = field(default_factory=dict)
    events: int = 0
    last_seq: int = 0
    #: the hosts steps ran on, in the order of their first run
    run_hosts: list[str] = field(default_factory=list)
    #: the groups the journal was opened with (``JournalOpened.groups``: an inventory's)
    groups: dict[str, list[str]] = field(default_factory=dict)

    def host(self, name: str) -> HostReadings:
        return self.by_host.setdefault(name, HostReadings(name))

    def all_hosts(self) -> list[str]:
        """The runbook's hosts, then any other host a step ran on or was read on."""
        return list(dict.fromkeys([*self.hosts, *self.run_hosts, *self.by_host]))


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


def _extend(state: Readings, host: HostReadings, key: str, value: Value, source: Source) -> None:
    segments = host.series.setdefault(key, [])
    if segments and segments[-1].value.text == value.text:
        segments[-1].last = source
    elif segments:
        between = _between(state, host.host, segments[-1].last, source)
        segments.append(Segment(value, source, source, between))
        _prune(segments)
    else:
        segments.append(Segment(value, source, source))


def _prune(segments: list[Segment]) -> None:
    """Keep of a thing's stretches those drift can name, so that a host whose reading flips
    at every import of a year costs its distinct values, not its history: the first, and
    for each value read its last stretch and the one after it (a host that differs from a
    value does so since the stretch after it last read that value:
    :func:`~journal.projections.drift.compare._streak` finds the same stretch in what is
    kept, for any value)."""
    last: dict[str, int] = {}
    for at, segment in enumerate(segments):
        last[segment.value.text] = at
    count = len(segments)
    kept = {0, *last.values(), *(at + 1 for at in last.values() if at + 1 < count)}
    if len(kept) < count:
        segments[:] = [segment for at, segment in enumerate(segments) if at in kept]


def _between(state: Readings, host: str, prev: Source, seen: Source) -> list[str]:
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
    return [run.run_id for run in sorted(found, key=lambda r: r.seq)]


def _let_go(state: Readings) -> None:
    """Drop the step runs no stretch names and none begun later can: those that ended at or
    before every host's thing was last read (a new stretch looks back from there), or on a
    host nothing was read on yet (its first readings begin stretches that look back at none).
    The readings are what they were; only their memory stops growing with the journal."""
    named = {
        run
        for host in state.by_host.values()
        for segments in host.series.values()
        for segment in segments
        for run in segment.between
    }
    floors: dict[str, float] = {}
    for name, host in state.by_host.items():
        seqs = [segments[-1].last.seq for segments in host.series.values() if segments]
        if host.snapshot is not None:
            seqs.append(host.snapshot.seq)
        floors[name] = min(seqs, default=float("inf"))
    for run_id, run in list(state.runs.items()):
        if run_id in named or run.finished_seq is None:
            continue
        if run.finished_seq <= floors.get(run.host, float("inf")):
            del state.runs[run_id]


@singledispatch
def apply(event: Event, rec: Recorded, state: Readings) -> None:
    """Events drift does not read change nothing."""


@apply.register
def _(event: JournalOpened, rec: Recorded, state: Readings) -> None:
    state.hosts, state.runbook = dict(event.hosts), event.runbook
    state.groups = {name: list(hosts) for name, hosts in event.groups.items()}


@apply.register
def _(event: StepStarted, rec: Recorded, state: Readings) -> None:
    state.runs[event.run] = StepRunRef(
        event.run, event.step, event.host_name, rec.seq, rec.ts, event.benchmark is not None
    )
    if event.host_name not in state.run_hosts:
        state.run_hosts.append(event.host_name)


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
        _extend(state, host, key, Value(versions.get(name, NOT_INSTALLED)), source)
    host.first_snapshot = host.first_snapshot or source
    host.snapshot = source


@apply.register
def _(event: ProbeRecorded, rec: Recorded, state: Readings) -> None:
    if event.probe == TRANSCRIPT and isinstance(event.result, dict):
        _printed(event, rec, state)
        return
    if event.probe != "torch-env" or not isinstance(event.result, dict):
        return
    source = Source("probe", rec.seq, rec.ts, event.run, "after" if event.run else "probe")
    host = state.host(event.host_name)
    for key, _label in STACK:
        _extend(state, host, key, read_field(event.result, key), source)
    host.probed = source


def _printed(event: ProbeRecorded, rec: Recorded, state: Readings) -> None:
    """What an imported transcript printed: only the keys it showed, each with its line."""
    result = event.result or {}
    source = Source(TRANSCRIPT, rec.seq, rec.ts, event.run, "after")
    host = state.host(event.host_name)
    evidence = result.get("evidence") if isinstance(result.get("evidence"), dict) else {}
    for key, _label in STACK:
        seen = evidence.get(key)
        if not isinstance(seen, dict):
            continue
        value = read_field(result, key)
        note = f"read from a transcript, line {seen.get('line')}: {seen.get('text', '')}"
        _extend(state, host, key, Value(value.text, note.strip()), source)
    host.transcript = source


def transcript_reading(found: dict[str, Any]) -> dict[str, Any]:
    """A ``transcript`` reading's result from the facts a transcript printed (name to
    :class:`journal.reading.printed.Fact`): shaped as ``torch-env``'s, with ``evidence``
    (per key, the line number in the file and its text)."""
    result: dict[str, Any] = {"evidence": {}}
    for name, key in PRINTED.items():
        fact = found.get(name)
        if fact is None:
            continue
        value = fact.value
        if name == "torch.nccl":
            triple = nccl_triple(value)
            value = ".".join(str(x) for x in triple) if triple else value
        elif isinstance(value, tuple):
            value = ".".join(str(x) for x in value)
        node = result
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value if value is None or isinstance(value, int | float) else str(value)
        result["evidence"][key] = {"line": fact.evidence.line, "text": fact.evidence.text}
    return result


def fold(journal: str, records: Iterable[Recorded], state: Readings | None = None) -> Readings:
    """Fold a journal's events (those of :data:`EVENT_TYPES` suffice) into its readings, or
    extend ``state`` with events newer than it has seen."""
    state = state or Readings(journal)
    folded = 0
    for rec in records:
        if rec.seq <= state.last_seq:
            continue
        state.events += 1
        state.last_seq = rec.seq
        apply(rec.event, rec, state)
        folded += 1
        if folded % LET_GO_EVERY == 0:
            _let_go(state)
    if folded:
        _let_go(state)
    return state


#: How many events are folded between two looks at which step runs can be let go.
LET_GO_EVERY = 5000


# -- comparing the hosts of a group ------------------------------------------------------------
