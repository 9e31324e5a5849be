"""What the postmortem tells, gathered in one pass over a journal's items and one over its
findings, holding only what its sections add up (counts, the failed runs, the notes, the
figures, what changed): the long lists themselves (the timeline, the commands, the
pitfalls) are read again when they are written (:mod:`journal.streamed`).

A :class:`Source` says where the items and findings come from: a timeline and findings held
in memory (the web's, :meth:`Source.held`), or the stored timeline and the findings
projection read a batch at a time (`journal export postmortem`, :func:`stored`); both give the
same document, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from journal.export.changes import HostChanges, _is_bench
from journal.export.marks import Marks
from journal.pitfalls.base import SEVERITIES, STATES, Finding, Tally
from journal.projections.index import SEP, rows_of
from journal.projections.period import Latest, Part, within
from journal.projections.stored import item_key
from journal.projections.timeline import (
    MetricView,
    NoteView,
    ProbeView,
    StepRunView,
    Timeline,
    TimelineItem,
)
from journal.reading.installs import requests
from journal.runs import DONE

#: Items read from the stored timeline at a time.
BATCH_ITEMS = 200


@dataclass
class Source:
    """Where a postmortem's items and findings come from."""

    journal: str
    hosts: dict[str, str]
    events: int
    last_ts: str | None
    #: every item of the journal in timeline order, a batch at a time (read again each call)
    batches: Callable[[], Iterable[list[TimelineItem]]]
    #: every finding in order (a list, or the ledger's listing)
    findings: Any
    #: the recorded output of a run without snapshots that installed (None: not read)
    output: Callable[[StepRunView], str | None]
    #: the stderr tail of a failed run (:func:`journal.export.changes.stderr_tail`)
    tail: Callable[[str], dict[str, Any] | None]
    #: each host's latest package set and probes (the whole journal's; a part's are its own)
    latest_packages: Callable[[str], dict[str, Any] | None]
    latest_packages_seq: Callable[[str], int]
    latest_probes: Callable[[str], dict[str, ProbeView] | None]
    #: when each of some step runs (ids) started
    started: Callable[[list[str]], Mapping[str, str]]
    #: the keys of each of some step runs' findings, in order
    finding_keys: Callable[[list[str]], Mapping[str, list[str]]]

    @classmethod
    def held(
        cls,
        findings: list[Finding],
        timeline: Timeline,
        outputs: Mapping[str, str],
        tails: Mapping[str, dict[str, Any]],
    ) -> Source:
        """A timeline and its findings held in memory (``outputs`` and ``tails`` as
        :func:`~journal.export.changes.read_outputs` and ``failures`` read them)."""
        return cls(
            timeline.journal,
            dict(timeline.hosts),
            timeline.events,
            timeline.last_ts,
            lambda: [timeline.items],
            findings,
            lambda run: outputs.get(run.run_id),
            tails.get,
            timeline.latest_packages.get,
            lambda host: timeline.latest_packages_seq.get(host, 0),
            timeline.latest_probes.get,
            lambda runs: {r: timeline.runs[r].started for r in runs if r in timeline.runs},
            _KeysOf(findings),
        )


def stored(store: Any, journal: str, digest: Any) -> Source:
    """The journal's stored timeline (``digest``: its :class:`Digest`) and its findings
    projection, read a batch at a time; outputs and stderr tails read from ``store`` as
    they are needed."""
    from journal.events import OutputChunk
    from journal.export.changes import stderr_tail
    from journal.output import output_text
    from journal.pitfalls.ledger import Ledger
    from journal.reading.window import Window

    def output(run: StepRunView) -> str | None:
        if run.diff is not None or _is_bench(run) or not requests(run.command):
            return None
        chunks = store.read(journal, types=[OutputChunk.type], run_id=run.run_id)
        return output_text(Window().extend(chunks).records)

    probes = digest.latest_probes
    ledger = Ledger(store, journal)
    return Source(
        journal,
        dict(digest.hosts),
        digest.events,
        digest.last_ts,
        lambda: digest.batches(BATCH_ITEMS),
        _Whole(ledger),
        output,
        lambda run: stderr_tail(store, run),
        digest.latest_packages,
        digest.latest_packages_seq,
        probes.get,
        digest.started_of,
        lambda runs: _keys(ledger.findings_of(runs, again=False)),
    )


def _keys(findings: Iterable[Finding]) -> dict[str, list[str]]:
    """The keys of each run's findings, in order."""
    out: dict[str, list[str]] = {}
    for found in findings:
        if found.run:
            out.setdefault(found.run, []).append(found.key)
    return out


class _KeysOf:
    """The keys of each run's findings among ``findings`` (held: the web's), found once."""

    def __init__(self, findings: list[Finding]) -> None:
        self.findings = findings
        self._by_run: dict[str, list[str]] | None = None

    def __call__(self, runs: list[str]) -> dict[str, list[str]]:
        if self._by_run is None:
            self._by_run = _keys(self.findings)
        return {run: self._by_run[run] for run in runs if run in self._by_run}


class _Whole:
    """Every finding of the journal (:meth:`Ledger.listing`), listed when first asked: a
    postmortem of a part reads the part's alone (:meth:`Ledger.part_listing`)."""

    def __init__(self, ledger: Any) -> None:
        self.ledger = ledger
        self._listing: Any = None

    def listing(self) -> Any:
        if self._listing is None:
            self._listing = self.ledger.listing()
        return self._listing

    def __len__(self) -> int:
        return len(self.listing())

    def __iter__(self) -> Iterator[Finding]:
        return iter(self.listing())


def items_of(
    source: Source,
    part: Part | None,
    span: tuple[str, str],
    batches: Callable[[], Iterable[list[TimelineItem]]] | None = None,
) -> Iterator[TimelineItem]:
    """The items of ``part`` (every item without one), in timeline order; ``batches``: the
    items that can be of it (by default every item)."""
    keep = within(part, span) if part else None
    for batch in (batches or source.batches)():
        for item in batch:
            if keep is None or keep(item):
                yield item


class Facts:
    """The story's facts (:class:`journal.projections.index.Facts`) of the items added, as
    :func:`~journal.projections.index.facts_of` makes them, keeping only what the story
    reads: per list its first and last row and its count, every failed read, each host's
    first package set."""

    KEPT = "dgmn"

    def __init__(self, hosts: Iterable[str], latest: Any, metrics: list[MetricView]) -> None:
        self.order: dict[str, None] = dict.fromkeys(hosts)
        self.latest = latest  # its latest_packages(host) and latest_packages_seq(host)
        self._metrics = metrics
        self.ends: dict[str, list[Any]] = {}  # list prefix -> [first (key, row), last, count]
        self.misses: dict[str, list[tuple[str, Any]]] = {}

    def add(self, item: TimelineItem) -> None:
        if isinstance(item, StepRunView | ProbeView):
            self.order.setdefault(item.host)
        if not isinstance(item, StepRunView | ProbeView):
            return
        for key, row in rows_of(item, item_key(item), lambda packages: packages).items():
            if key[0] not in self.KEPT or key[1] != ":":
                continue
            prefix = key[: key.rindex(SEP) + 1]
            if key[0] == "m":
                self.misses.setdefault(prefix, []).append((key, row))
            ends = self.ends.get(prefix)
            if ends is None:
                self.ends[prefix] = [(key, row), (key, row), 1]
                continue
            ends[2] += 1
            if key < ends[0][0]:
                ends[0] = (key, row)
            if key > ends[1][0]:
                ends[1] = (key, row)

    def story_hosts(self) -> list[str]:
        return list(self.order)

    def first(self, prefix: str) -> tuple[str, Any] | None:
        ends = self.ends.get(prefix)
        return ends[0] if ends else None

    def last(self, prefix: str) -> tuple[str, Any] | None:
        ends = self.ends.get(prefix)
        return ends[1] if ends else None

    def count(self, prefix: str) -> int:
        ends = self.ends.get(prefix)
        return ends[2] if ends else 0

    def all(self, prefix: str, start: str = "", end: str = "") -> list[tuple[str, Any]]:
        return sorted(
            (key, row)
            for key, row in self.misses.get(prefix, ())
            if key >= prefix + start and (not end or key < prefix + end)
        )

    def snapshot(self, key: Any) -> dict[str, Any]:
        return key  # the row of a first package set is the set itself

    def latest_packages(self, host: str) -> dict[str, Any] | None:
        return self.latest.latest_packages(host)

    def latest_packages_seq(self, host: str) -> int:
        return self.latest.latest_packages_seq(host)

    def metrics(self) -> list[MetricView]:
        return self._metrics

    def headline(self, make: Callable[[list[MetricView]], Any]) -> Any:
        return make(self._metrics)


@dataclass
class Gathered:
    """What one pass over a part's items adds up."""

    journal: str
    hosts: dict[str, str]
    count: int = 0
    start: str | None = None
    end: str | None = None
    first_seq: int | None = None
    last_seq: int | None = None
    notes: list[NoteView] = field(default_factory=list)
    metrics: list[MetricView] = field(default_factory=list)
    marks: Marks = field(default_factory=Marks)
    #: the runs of a part (a whole journal's are not held: its findings are all of them)
    run_ids: set[str] = field(default_factory=set)
    # the step runs
    runs: int = 0
    benches: int = 0
    imported: int = 0
    run_hosts: dict[str, list[Any]] = field(default_factory=dict)  # host -> [runs, failed, target]
    steps: dict[str, None] = field(default_factory=dict)
    failed: list[dict[str, Any]] = field(default_factory=list)
    unstarted: dict[str, list[Any]] = field(default_factory=dict)  # status -> [count, first 5]
    running: list[tuple[str, str]] = field(default_factory=list)
    latest: dict[tuple[str, str], tuple[str, str, str, int | None]] = field(default_factory=dict)
    fence: int = 0  # the longest run of 3+ backticks in the commands' block
    packages: dict[str, dict[str, Any]] = field(default_factory=dict)
    packages_seq: dict[str, int] = field(default_factory=dict)
    probes: dict[str, dict[str, ProbeView]] = field(default_factory=dict)

    def latest_packages(self, host: str) -> dict[str, Any] | None:
        return self.packages.get(host)

    def latest_packages_seq(self, host: str) -> int:
        return self.packages_seq.get(host, 0)


def gather(
    source: Source, items: Iterable[TimelineItem], part: Part | None, changes: HostChanges
) -> tuple[Gathered, Facts]:
    """One pass over a part's items (``changes`` adds what changed on each host)."""
    from journal.export.markdown import command_lines, fence_run

    out = Gathered(source.journal, source.hosts)
    shared = Shared()
    latest = Latest() if part else None
    facts = Facts(source.hosts, out if part else source, out.metrics)
    for item in items:
        out.count += 1
        seq = item.seq
        out.first_seq = seq if out.first_seq is None else min(out.first_seq, seq)
        out.last_seq = seq if out.last_seq is None else max(out.last_seq, seq)
        if latest is not None:
            latest.add(item)
        facts.add(item)
        changes.add(item)
        if isinstance(item, StepRunView):
            _time(out, item.started)
            if item.finished:
                _time(out, item.finished)
            _run(out, item, shared)
            if part:
                out.run_ids.add(item.run_id)
            for line in command_lines(command_of(item)):
                out.fence = max(out.fence, fence_run(line))
        else:
            _time(out, item.ts)
            if isinstance(item, NoteView):
                out.notes.append(item)
            elif isinstance(item, MetricView):
                out.metrics.append(shared(item))
    out.metrics.sort(key=lambda m: m.seq)
    out.marks.sort()
    if latest is not None:
        out.packages, out.packages_seq, out.probes = (
            latest.packages,
            latest.packages_seq,
            latest.probes,
        )
    else:
        for host in dict.fromkeys([*source.hosts, *out.run_hosts, *changes.packages]):
            packages = source.latest_packages(host)
            if packages is not None:
                out.packages[host] = packages
                out.packages_seq[host] = source.latest_packages_seq(host)
            probes = source.latest_probes(host)
            if probes is not None:
                out.probes[host] = probes
    return out, facts


class Shared:
    """Words a gather keeps many times held once: a figure's name, unit, host, labels and
    where it came from repeat across a year of figures, and each read of a row makes them
    anew (the 37,000 figures of a 1M-event journal held 80 MB before)."""

    def __init__(self) -> None:
        self._texts: dict[str, str] = {}
        self._labels: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}

    def text(self, value: str) -> str:
        return self._texts.setdefault(value, value)

    def __call__(self, figure: MetricView) -> MetricView:
        """``figure`` with its repeated words shared (its labels are read, never changed), the
        time and run of a benchmark's samples too, and without the line it was read from
        (``text``: the sections told from these figures never print it; the timeline, which
        does, reads each figure again)."""
        text = self.text
        labels = {text(k): text(v) for k, v in figure.labels.items()}
        return replace(
            figure,
            ts=text(figure.ts),
            run=figure.run and text(figure.run),
            text=None,
            name=text(figure.name),
            unit=figure.unit and text(figure.unit),
            labels=self._labels.setdefault(tuple(labels.items()), labels),
            source=text(figure.source),
            host=figure.host and text(figure.host),
            benchmark=figure.benchmark and text(figure.benchmark),
            author=text(figure.author),
        )


def _time(out: Gathered, ts: str) -> None:
    if out.start is None or ts < out.start:
        out.start = ts
    if out.end is None or ts > out.end:
        out.end = ts


def command_of(run: StepRunView) -> dict[str, Any]:
    """A step run as the supporting commands list it."""
    return {
        "time": run.started,
        "step": run.step,
        "host": run.host,
        "run": run.run_id,
        "command": run.command,
        "status": run.status,
        "exit_code": run.exit_code,
        "imported": run.imported,
        # an Ansible task's: where in the playbook it came from
        "ansible": (
            {k: run.ansible.get(k) for k in ("playbook", "play", "task", "path", "batch")}
            if run.ansible
            else None
        ),
    }


def _run(out: Gathered, run: StepRunView, shared: Shared) -> None:
    out.runs += 1
    out.metrics.extend(shared(m) for m in run.metrics)
    bench = run.benchmark is not None or bool(run.metrics)
    failed = run.status not in (*DONE, "running")
    host = out.run_hosts.setdefault(run.host, [0, 0, run.target])
    host[0] += 1
    host[1] += failed
    if bench:
        out.benches += 1
    else:
        out.steps.setdefault(run.step)
        out.marks.add(run.seq, run.started, run.step, run.host)
        before = out.latest.get((run.step, run.host))
        if before is None or run.status != "not started":
            out.latest[(run.step, run.host)] = (run.step, run.host, run.status, run.exit_code)
    if run.imported:
        out.imported += 1
    if run.status == "running":
        out.running.append((run.step, run.host))
    if failed:
        out.failed.append(
            {
                "run": run.run_id,
                "step": run.step,
                "host": run.host,
                "time": run.started,
                "status": run.status,
                "exit_code": run.exit_code,
                "command": run.command,
            }
        )
    if run.status in ("skipped", "not started"):
        these = out.unstarted.setdefault(run.status, [0, []])
        these[0] += 1
        if len(these[1]) < 5:
            these[1].append((run.step, run.host, run.reason))


@dataclass
class Judged:
    """What one pass over a part's findings adds up."""

    count: int = 0
    severities: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SEVERITIES, 0))
    states: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STATES, 0))
    ids: dict[str, None] = field(default_factory=dict)
    open: dict[str, list[Any]] = field(default_factory=dict)  # severity -> [count, "id on host"]
    tally: Tally = field(default_factory=lambda: Tally.of([]))
    actions: Any = None


def judge(findings: Iterable[Finding], actions: Any) -> Judged:
    """One pass over a part's findings (``actions`` merges the open ones)."""
    out = Judged(actions=actions)
    for found in findings:
        out.count += 1
        out.severities[found.severity] += 1
        out.states[found.state] += 1
        out.ids.setdefault(found.id)
        if found.is_open:
            worry = out.open.setdefault(found.severity, [0, {}])
            worry[0] += 1
            worry[1].setdefault(f"{found.id} on {found.host}")
            actions.add(found)
    out.tally = Tally(
        {s: out.open.get(s, [0])[0] for s in reversed(SEVERITIES)},
        out.states["acknowledged"],
        out.states["resolved"],
    )
    return out
