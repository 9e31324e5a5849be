"""The timeline: step runs and notes of one journal in the order they happened.

:func:`apply` is the one fold step (every reader of the timeline folds with it, all at once by
:func:`project` or on from where a timeline stood by :class:`journal.projections.folder.Folder`)
and says which item it made or changed; :func:`target` says, before, which existing item an
event changes (what a reader sharing items copies first)."""

from __future__ import annotations

import base64
import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import singledispatch
from typing import Any

from journal.events import (
    CommandLaunched,
    Event,
    ExpectationChecked,
    HostKeyAccepted,
    JournalOpened,
    MetricRecorded,
    NoteAdded,
    OutputChunk,
    PackagesSnapshotted,
    ProbeRecorded,
    StepFinished,
    StepReattached,
    StepStarted,
)
from journal.mapper import Recorded
from journal.projections.packages import PackageDiff, diff_packages
from journal.runs import UNFINISHED


@dataclass
class ExpectationView:
    """One expectation checked after a step or a probe."""

    seq: int
    host: str
    key: str
    expected: str
    actual: Any
    ok: bool
    reason: str | None
    probe: str | None
    run: str | None


@dataclass
class ProbeView:
    """A probe's result on a host (after a step, or run on its own)."""

    seq: int
    ts: str
    host: str
    probe: str
    result: dict[str, Any] | None
    error: str | None
    seconds: float
    run: str | None
    expectations: list[ExpectationView] = field(default_factory=list)
    #: ``before`` / ``after`` its step run, or ``probe`` on its own; None where an old event
    #: did not say and the record cannot tell (a failed snapshot of a run that printed nothing)
    phase: str | None = None


@dataclass(slots=True)
class MetricView:
    """A figure recorded on the timeline: by a benchmark run, by hand, or from a transcript."""

    seq: int
    ts: str
    name: str
    value: float
    unit: str | None
    labels: dict[str, str]
    source: str
    host: str | None
    run: str | None
    benchmark: str | None
    line: int | None
    text: str | None
    invalid: str | None
    author: str

    @property
    def phase(self) -> str | None:
        return self.labels.get("phase")


@dataclass
class StepRunView:
    """One step on one host: what ran, how it ended, how much it printed."""

    run_id: str
    step: str
    host: str
    target: str
    command: str
    env: dict[str, str]
    cwd: str | None
    seq: int
    started: str
    pid: int
    machine: str
    plan_run: str | None
    imported: bool
    redactions: list[dict[str, Any]]
    benchmark: str | None = None
    #: an imported run its transcript dates: the item (seq; 0: none) it is placed after, the
    #: last one of the record at or before its own time (None: placed where it was recorded)
    place: int | None = None
    status: str = UNFINISHED
    exit_code: int | None = None
    duration: float | None = None
    finished: str | None = None
    signal: str | None = None
    reason: str | None = None
    chunks: int = 0
    bytes: dict[str, int] = field(default_factory=lambda: {"stdout": 0, "stderr": 0})
    lines: dict[str, int] = field(default_factory=lambda: {"stdout": 0, "stderr": 0})
    snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)
    probes: list[ProbeView] = field(default_factory=list)
    expectations: list[ExpectationView] = field(default_factory=list)
    metrics: list[MetricView] = field(default_factory=list)
    #: a rollback run's target (``StepStarted.rollback``): the --to text, the run whose
    #: snapshot it is, the phase and the packages; None for any other run
    rollback: dict[str, Any] | None = None
    #: a command typed in `journal shell` (``StepStarted.interactive``)
    interactive: bool = False
    #: an Ansible task on this host (``StepStarted.ansible``: playbook, play, task, ...)
    ansible: dict[str, Any] | None = None
    #: its recorder marks the command's launch (``StepStarted.launch_marked``), and whether
    #: it did (``CommandLaunched``): a run of a dead recorder never launched is not started
    launch_marked: bool = False
    launched: bool = False
    _diff: tuple[tuple[int, int], PackageDiff] | None = field(
        default=None, repr=False, compare=False
    )

    @property
    def finished_ok(self) -> bool:
        return self.status == "succeeded"

    @property
    def diff(self) -> PackageDiff | None:
        """What the step changed in the target env (None without both snapshots)."""
        if "before" not in self.snapshots or "after" not in self.snapshots:
            return None
        key = (id(self.snapshots["before"]), id(self.snapshots["after"]))
        if self._diff is None or self._diff[0] != key:
            self._diff = (key, diff_packages(self.snapshots["before"], self.snapshots["after"]))
        return self._diff[1]


@dataclass
class NoteView:
    """A note on the timeline."""

    seq: int
    ts: str
    text: str
    tags: list[str]
    author: str
    host: str | None


@dataclass
class HostKeyView:
    """A host key accepted on first contact."""

    seq: int
    ts: str
    host: str
    target: str
    key_type: str
    fingerprint: str


TimelineItem = StepRunView | NoteView | HostKeyView | ProbeView | MetricView


@dataclass
class Timeline:
    """A journal replayed: its latest plan and hosts, and every item in order."""

    journal: str
    plan: list[str] = field(default_factory=list)
    hosts: dict[str, str] = field(default_factory=dict)
    items: list[TimelineItem] = field(default_factory=list)
    runs: dict[str, StepRunView] = field(default_factory=dict)
    #: the latest result of each probe on each host: host -> probe -> view
    latest_probes: dict[str, dict[str, ProbeView]] = field(default_factory=dict)
    #: the latest package snapshot of each host
    latest_packages: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the event of that snapshot (what a failed snapshot before it is told from)
    latest_packages_seq: dict[str, int] = field(default_factory=dict)
    #: every figure recorded, in order (those of step runs are also in the run's view)
    metrics: list[MetricView] = field(default_factory=list)
    events: int = 0
    last_ts: str | None = None

    def step_runs(self) -> list[StepRunView]:
        return [item for item in self.items if isinstance(item, StepRunView)]


def apply(event: Event, rec: Recorded, state: Timeline) -> TimelineItem | None:
    """The one fold step: ``event`` (recorded as ``rec``) folded into ``state``; the item it
    made or changed (None when it changed no item, only the timeline's own fields: its plan,
    the latest snapshot of a host), so that an incremental reader knows what to store or
    show again without comparing."""
    state.events += 1
    state.last_ts = rec.ts
    return _step(event, rec, state, target(event, state))


def target(event: Event, state: Timeline) -> TimelineItem | None:
    """The item already on the timeline that folding ``event`` changes: its run's view, or,
    for an expectation checked without a known run, the standalone probe it attaches to (the
    latest on its host); None when it changes none. A reader that shares items with another
    timeline copies this one before :func:`apply` (see :mod:`journal.projections.folder`)."""
    run = event.run_id
    if run is not None and not isinstance(event, StepStarted):
        view = state.runs.get(run)
        if view is not None:
            return view
    if isinstance(event, ExpectationChecked):
        for item in reversed(state.items):
            if isinstance(item, ProbeView) and item.host == event.host_name:
                return item
    return None


@singledispatch
def _step(event: Event, rec: Recorded, state: Timeline, item: Any) -> TimelineItem | None:
    """Events the timeline does not show change nothing."""
    return None


@_step.register
def _(event: JournalOpened, rec: Recorded, state: Timeline, item: Any) -> None:
    state.plan, state.hosts = list(event.plan), dict(event.hosts)


@_step.register
def _(event: StepStarted, rec: Recorded, state: Timeline, item: Any) -> StepRunView:
    view = StepRunView(
        run_id=event.run,
        step=event.step,
        host=event.host_name,
        target=event.target,
        command=event.command,
        env=dict(event.env),
        cwd=event.cwd,
        seq=rec.seq,
        started=rec.ts,
        pid=event.pid,
        machine=event.machine,
        plan_run=event.plan_run,
        imported=event.imported,
        redactions=list(event.redactions),
        benchmark=event.benchmark,
        rollback=event.rollback,
        interactive=event.interactive,
        launch_marked=event.launch_marked,
        ansible=event.ansible,
    )
    state.runs[event.run] = view
    if event.imported and event.at:
        view.started = event.at
        place(state.items, view)
    else:
        state.items.append(view)
    return view


@_step.register
def _(event: OutputChunk, rec: Recorded, state: Timeline, view: Any) -> StepRunView | None:
    if view is None:
        return None
    view.chunks += 1
    view.bytes[event.stream] = view.bytes.get(event.stream, 0) + event.size
    if event.encoding == "base64":
        newlines = base64.b64decode(event.data).count(b"\n")
    else:
        newlines = event.data.count("\n")
    view.lines[event.stream] = view.lines.get(event.stream, 0) + newlines
    return view


@_step.register
def _(event: CommandLaunched, rec: Recorded, state: Timeline, view: Any) -> StepRunView | None:
    if view is not None:
        view.launched = True
    return view


@_step.register
def _(event: StepReattached, rec: Recorded, state: Timeline, view: Any) -> StepRunView | None:
    if view is None or view.finished:
        return None
    # the process that took over is the run's recorder now: alive while it records
    view.pid, view.machine = event.pid, event.machine
    view.status, view.reason = UNFINISHED, None
    return view


@_step.register
def _(event: StepFinished, rec: Recorded, state: Timeline, view: Any) -> StepRunView | None:
    if view is None:
        return None
    view.status, view.exit_code, view.duration = event.status, event.exit_code, event.duration
    view.finished, view.signal, view.reason = rec.ts, event.signal, event.reason
    if view.place is not None:  # its own time: it ended its duration after it started
        view.finished = _later(view.started, event.duration or 0.0)
    return view


@_step.register
def _(event: NoteAdded, rec: Recorded, state: Timeline, item: Any) -> NoteView:
    note = NoteView(rec.seq, rec.ts, event.text, list(event.tags), event.author, event.host_name)
    state.items.append(note)
    return note


@_step.register
def _(event: PackagesSnapshotted, rec: Recorded, state: Timeline, view: Any) -> Any:
    state.latest_packages[event.host_name] = event.packages
    state.latest_packages_seq[event.host_name] = rec.seq
    if view is not None and event.phase in ("before", "after"):
        view.snapshots[event.phase] = event.packages
        return view
    return None


@_step.register
def _(event: ProbeRecorded, rec: Recorded, state: Timeline, view: Any) -> TimelineItem:
    probe = ProbeView(
        rec.seq,
        rec.ts,
        event.host_name,
        event.probe,
        event.result,
        event.error,
        event.seconds,
        event.run,
        phase=event.phase or _phase(event, view),
    )
    if event.result is not None:
        state.latest_probes.setdefault(event.host_name, {})[event.probe] = probe
    if view is not None:
        view.probes.append(probe)
        return view
    state.items.append(probe)
    return probe


def _phase(event: ProbeRecorded, view: StepRunView | None) -> str | None:
    """When a probe recorded before ``ProbeRecorded.phase`` existed ran, where the record
    tells: on its own, after its step (a probe; a snapshot once the step printed or had its
    snapshot before), else unknown."""
    if event.run is None:
        return "probe"
    if event.probe != "packages":
        return "after"
    if view is not None and (
        view.chunks or "before" in view.snapshots or any(p.probe == "packages" for p in view.probes)
    ):
        return "after"
    return None


@_step.register
def _(event: ExpectationChecked, rec: Recorded, state: Timeline, item: Any) -> Any:
    check = ExpectationView(
        rec.seq,
        event.host_name,
        event.key,
        event.expected,
        event.actual,
        event.verdict == "pass",
        event.reason,
        event.probe,
        event.run,
    )
    if item is not None:  # its run's, or the standalone probe's it attaches to
        item.expectations.append(check)
    return item


@_step.register
def _(event: MetricRecorded, rec: Recorded, state: Timeline, view: Any) -> TimelineItem:
    metric = MetricView(
        rec.seq,
        rec.ts,
        event.name,
        event.value,
        event.unit,
        dict(event.labels),
        event.source,
        event.host_name,
        event.run,
        event.benchmark,
        event.line,
        event.text,
        event.invalid,
        event.author,
    )
    state.metrics.append(metric)
    if view is not None:
        view.metrics.append(metric)
        return view
    state.items.append(metric)
    return metric


@_step.register
def _(event: HostKeyAccepted, rec: Recorded, state: Timeline, item: Any) -> HostKeyView:
    key = HostKeyView(
        rec.seq, rec.ts, event.host_name, event.target, event.key_type, event.fingerprint
    )
    state.items.append(key)
    return key


def order_key(item: TimelineItem) -> tuple[int, str, int]:
    """Where an item stands on the timeline: in the order it was recorded, but an imported run
    its transcript dates right after the last item recorded at or before its own time (runs
    placed after one item in their time order)."""
    where = getattr(item, "place", None)
    if where is None:
        return (item.seq, "", 0)
    return (where, item.started, item.seq)  # type: ignore[union-attr]


def place(items: list[TimelineItem], view: StepRunView) -> None:
    """Insert a dated imported run into ``items`` (in :func:`order_key` order) by its time."""
    view.place = 0
    for item in reversed(items):
        if getattr(item, "place", None) is not None:
            continue  # placed by its own time: the items recorded here are the landmarks
        if item_time(item) <= view.started:
            view.place = item.seq
            break
    key = order_key(view)
    items.insert(bisect.bisect_right(items, key, key=order_key), view)


def index_of(items: list[TimelineItem], item: TimelineItem) -> int:
    """The index of ``item`` (or of its copy: the same key) in ``items``, in key order."""
    return bisect.bisect_left(items, order_key(item), key=order_key)


def item_time(item: TimelineItem) -> str:
    """When an item was recorded: a step run's start, any other item's time."""
    return item.started if isinstance(item, StepRunView) else item.ts


def _later(ts: str, seconds: float) -> str:
    moment = datetime.fromisoformat(ts.replace("Z", "+00:00")) + timedelta(seconds=seconds)
    return moment.isoformat(timespec="microseconds")[:-6] + "Z"


def project(journal: str, records: Iterable[Recorded]) -> Timeline:
    """Fold a journal's events into its timeline, all at once."""
    state = Timeline(journal)
    for rec in records:
        apply(rec.event, rec, state)
    return state

