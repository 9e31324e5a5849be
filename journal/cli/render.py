"""Plain-text rendering of timelines and plan progress for the terminal. What a host printed
is not trusted: every view returned has its control characters made visible
(:func:`journal.terminal.visible`), so that listing it cannot set the terminal's title or
clear its screen; a step's output itself (`journal log --full-output`) is printed as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

from journal.display import (
    ansible_text,
    figure,
    first_line,
    plural,
    rollback_text,
    seconds,
    when,
)
from journal.events import StepFinished
from journal.pitfalls.base import Finding
from journal.probes.summary import summary
from journal.projections.packages import change_text
from journal.projections.progress import HostState
from journal.projections.timeline import (
    ExpectationView,
    HostKeyView,
    MetricView,
    NoteView,
    ProbeView,
    StepRunView,
    Timeline,
    TimelineItem,
)
from journal.projections.unread import of_run, snapshots_of, texts
from journal.runs import FAILURES, ShortIds
from journal.service.story import run_status
from journal.terminal import visible

MARK = {
    "succeeded": "ok  ",
    "failed": "FAIL",
    "interrupted": "INT ",
    "lost": "LOST",
    "timed-out": "TIME",
    "running": "... ",
    "pending": "    ",
    "unfinished": "... ",
    "no change": "NOOP",
    "skipped": "skip",
    "not started": "----",  # nothing of it ran on the host
    "disk full": "FULL",
}

#: A run that succeeded but changed nothing asked is shown amber on a terminal.
AMBER = "\x1b[33m"
RESET = "\x1b[0m"


@dataclass
class Judged:
    """What the CLI says of runs beyond their own record: their findings (by run), the
    status each is shown with, its open error findings and its id as shown."""

    findings: list[Finding] = field(default_factory=list)
    colour: bool = False
    by_run: dict[str, list[Finding]] = field(default_factory=dict)
    #: how a run id is shown (:class:`journal.runs.ShortIds`; whole where no store is at hand)
    short: Callable[[str], str] = str

    def __post_init__(self) -> None:
        for found in self.findings:
            if found.run:
                self.by_run.setdefault(found.run, []).append(found)

    def of(self, run: StepRunView) -> list[Finding]:
        return self.by_run.get(run.run_id, [])

    def status(self, run: StepRunView) -> str:
        return run_status(run, self.of(run))

    def errors(self, run: StepRunView) -> list[str]:
        """The ids of the run's open error findings."""
        return [f.id for f in self.of(run) if f.is_open and f.severity == "error"]

    def shown(self, run: StepRunView) -> str:
        status = self.status(run)
        if status == "no change" and self.colour:
            return f"{AMBER}{status}{RESET}"
        return status


def short_ids(store) -> ShortIds:  # type: ignore[no-untyped-def]
    """Run ids as this command shows them: short and unique in ``store`` (an EventStore)."""
    return ShortIds(store.id_neighbours)


#: The indent of a timeline item's details, under its time.
PAD = " " * 22


def run_line(run: StepRunView, command: bool = True, judged: Judged | None = None) -> str:
    """A step run's heading: when, status, exit, duration and output counts; then (unless
    ``command`` is false) its command and, for anything but a plain exit, the reason.
    With ``judged``: ``no change`` for a run that changed nothing asked (amber on a terminal)
    and its open error findings (``open error: noop-install``)."""
    judged = judged or Judged()
    status = judged.status(run)
    errors = judged.errors(run)
    exit_text = "" if run.exit_code is None else f" exit {run.exit_code}"
    took = (
        (" untimed" if run.imported and run.finished else "")
        if run.duration is None
        else f" {seconds(run.duration)}"
    )
    out = (
        f"{plural(run.lines.get('stdout', 0), 'line')} out, "
        f"{plural(run.lines.get('stderr', 0), 'line')} err"
    )
    typed = " in journal shell" if run.interactive else ""
    line = (
        f"{when(run.started)}  [{MARK.get(status, status)}] {run.step} on {run.host}{typed}: "
        f"{status}{exit_text}{took}  ({out})  run {judged.short(run.run_id)}"
    )
    if errors:
        line += f"  open error: {', '.join(errors)}"
    if command:
        line += f"\n{PAD}$ {first_line(run.command)}"
    if run.ansible:
        line += f"\n{PAD}{ansible_text(run.ansible)}"
    if run.rollback:
        line += f"\n{PAD}{rollback_text(run.rollback, judged.short)}"
    if run.reason:
        line += f"\n{PAD}{run.reason}"
    line = visible(line)
    if judged.colour and status == "no change":  # the amber is journal's, not the host's
        line = line.replace(": no change", f": {judged.shown(run)}", 1)
    return line


@dataclass(frozen=True)
class Filter:
    """What `journal log --host/--step/--failed` keeps: step runs that match; with --step or
    --failed nothing else, with --host only the host's probes, notes and figures."""

    host: str | None = None
    step: str | None = None
    failed: bool = False

    @property
    def runs_only(self) -> bool:
        return self.step is not None or self.failed

    def run(self, run: StepRunView) -> bool:
        return (
            (self.host is None or run.host == self.host)
            and (self.step is None or run.step == self.step)
            and (not self.failed or run.status in FAILURES)
        )

    def item(self, item: TimelineItem) -> bool:
        if isinstance(item, StepRunView):
            return self.run(item)
        if self.runs_only:
            return False
        if self.host is None:
            return True
        if isinstance(item, NoteView):
            return item.host in (None, self.host)
        return getattr(item, "host", None) == self.host

    def follows(self, event: object, runs: dict[str, tuple[str, str]]) -> bool:
        """Whether `journal log --follow` prints this new event (``runs``: the step and host
        of each run started so far)."""
        run = getattr(event, "run", None)
        if run is None:  # a note, a figure by hand, a probe on its own
            host = getattr(event, "host_name", None)
            return not self.runs_only and self.host in (None, host)
        if run not in runs:
            return self == Filter()
        step, host = runs[run]
        if (self.host or host) != host or (self.step or step) != step:
            return False
        return not self.failed or (isinstance(event, StepFinished) and event.status in FAILURES)


def finding_line(found: Finding) -> str:
    """A finding under its run: ``finding noop-install (error, open): title``."""
    return f"finding {found.id} ({found.severity}, {found.state}): {first_line(found.title)}"


def timeline_text(
    timeline: Timeline,
    judged: Judged | None = None,
    keep: Filter | None = None,
    runs: int | None = None,
    total: int | None = None,
) -> str:
    """The timeline's items, newest first, one block per item (``keep``: only what the filter
    keeps); with ``judged``, each run's findings under it. ``runs`` and ``total``: how many
    step runs and items the filter keeps in the whole journal, where ``timeline`` holds a page
    of them (`journal log --limit`)."""
    judged = judged or Judged()
    keep = keep or Filter()
    shown = [item for item in timeline.items if keep.item(item)]
    count = runs if runs is not None else sum(1 for i in shown if isinstance(i, StepRunView))
    lines = [
        f"journal {timeline.journal}: {plural(count, 'step run')}, "
        f"{plural(timeline.events, 'event')}, last at {when(timeline.last_ts)}"
    ]
    if total is not None and total > len(shown):
        lines.append(
            f"the newest {len(shown):,} of {plural(total, 'item')}, newest first "
            "(`--limit N` shows N, `--limit 0` all, `--since WHEN` those since then)"
        )
    headings: set[int] = set()
    blocks: list[tuple[list[str], bool]] = []  # (lines, whether its first is a run's heading)
    for index, item in enumerate(shown):
        block: list[str] = []
        if isinstance(item, StepRunView):
            block.append(run_line(item, judged=judged))
            block.extend(f"{PAD}{line}" for line in run_details(item))
            block.extend(f"{PAD}{finding_line(f)}" for f in judged.of(item))
        elif isinstance(item, ProbeView):
            block.append(f"{when(item.ts)}  probe {item.probe} on {item.host}: {probe_line(item)}")
            block.extend(f"{PAD}{expectation_line(e)}" for e in item.expectations)
        elif isinstance(item, NoteView):
            tags = f" [{', '.join(item.tags)}]" if item.tags else ""
            block.append(f"{when(item.ts)}  note{tags}: {item.text}")
        elif isinstance(item, MetricView):
            if not _same_figures(shown, index - 1, item):  # the first of its group
                block.extend(figure_lines(_figures_from(shown, index)))
        elif isinstance(item, HostKeyView):
            block.append(
                f"{when(item.ts)}  accepted the new host key of {item.host} ({item.target}): "
                f"{item.key_type} {item.fingerprint}"
            )
        if block:
            blocks.append((block, isinstance(item, StepRunView)))
    for block, heading in reversed(blocks):
        if heading:
            headings.add(len(lines))  # made visible by run_line, with its amber kept
        lines.extend(block)
    return "\n".join(line if i in headings else visible(line) for i, line in enumerate(lines))


def _same_figures(items: list[TimelineItem], index: int, metric: MetricView) -> bool:
    """Whether ``items[index]`` is a figure recorded on its own with ``metric``'s labels and
    host (so that ``metric`` goes in its group)."""
    other = items[index] if 0 <= index < len(items) else None
    if not isinstance(other, MetricView):
        return False
    return (_labels(other), other.host) == (_labels(metric), metric.host)


def _figures_from(items: list[TimelineItem], index: int) -> list[MetricView]:
    """The figures recorded one after another with the labels and host of ``items[index]``."""
    first = items[index]
    assert isinstance(first, MetricView)
    group = [first]
    while _same_figures(items, index + len(group), first):
        group.append(items[index + len(group)])  # type: ignore[arg-type]
    return group


def figure_lines(group: list[MetricView]) -> list[str]:
    """Figures recorded on their own (by hand), one after another with the same labels and
    host, as the log shows them: one as ``metric …``; more under one header naming the labels
    once (``metrics entered by hand on gpu-box (phase=after):``), a short line per figure."""
    first = group[0]
    labels = _labels(first)
    if len(group) == 1 or not labels:
        return [f"{when(m.ts)}  metric {metric_line(m)}" for m in group]
    by_hand = all(m.source == "manual" for m in group)
    where = f" on {first.host}" if first.host else ""
    said = ", ".join(f"{k}={v}" for k, v in labels)
    lines = [
        visible(
            f"{when(first.ts)}  metrics{' entered by hand' if by_hand else ''}{where} ({said}):"
        )
    ]
    for m in group:
        how = " [entered by hand]" if m.source == "manual" and not by_hand else ""
        bad = f" [NOT TRUSTED: {m.invalid}]" if m.invalid else ""
        lines.append(visible(f"{PAD}{m.name} = {figure(m.value, m.unit)}{how}{bad}"))
    return lines


def metric_line(metric: MetricView) -> str:
    """``output_token_throughput = 96.10 tok/s (benchmark=eagle3, phase=after) on gpu-box``."""
    labels = ", ".join(f"{k}={v}" for k, v in metric.labels.items() if k != "host")
    where = f" on {metric.host}" if metric.host else ""
    how = " [entered by hand]" if metric.source == "manual" else ""
    bad = f" [NOT TRUSTED: {metric.invalid}]" if metric.invalid else ""
    return visible(
        f"{metric.name} = {figure(metric.value, metric.unit)}"
        f"{f' ({labels})' if labels else ''}{where}{how}{bad}"
    )


def probe_line(probe: ProbeView) -> str:
    if probe.result is None:
        return f"FAILED: {probe.error}"
    return summary(probe.probe, probe.result)


def expectation_line(check: ExpectationView) -> str:
    if check.ok:
        actual = check.actual
        shown = actual if isinstance(actual, str) else json.dumps(actual, ensure_ascii=False)
        return f"[ok  ] expect {check.key} = {check.expected!r} ({shown})"
    return f"[FAIL] expect {check.key} = {check.expected!r}: {check.reason}"


def run_details(run: StepRunView) -> list[str]:
    """A step run's package changes, probes and expectation verdicts."""
    lines = []
    diff = run.diff
    if diff is not None:
        if diff.empty:
            lines.append("packages: no change")
        else:
            lines.append(f"packages: {plural(len(diff.changes), 'change')}")
            lines.extend("  " + change_text(c) for c in diff.changes)
    for said in texts(snapshots_of(run), step=False):  # no diff: say why, never "no change"
        lines.append(f"packages: not known: the {said}")
    for probe in run.probes:
        if probe.probe != "packages":
            lines.append(f"probe {probe.probe}: {probe_line(probe)}")
    lines.extend(expectation_line(e) for e in run.expectations)
    lines.extend(metric_lines(run.metrics))
    return lines


def _labels(metric: MetricView) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in metric.labels.items() if k != "host")


def metric_lines(metrics: list[MetricView]) -> list[str]:
    """Figures as the log shows them: one alone as :func:`metric_line`; figures sharing their
    labels and host (a benchmark's many metrics) as one header naming the labels once, then a
    short line per figure."""
    groups: dict[tuple[object, ...], list[MetricView]] = {}
    for m in metrics:
        groups.setdefault((_labels(m), m.host), []).append(m)
    lines = []
    for (labels, host), group in groups.items():
        if len(group) == 1 or not labels:
            lines.extend(f"metric {metric_line(m)}" for m in group)
            continue
        where = f" on {host}" if host else ""
        said = ", ".join(f"{k}={v}" for k, v in labels)
        lines.append(visible(f"metrics{where} ({said}):"))
        for m in group:
            how = " [entered by hand]" if m.source == "manual" else ""
            bad = f" [NOT TRUSTED: {m.invalid}]" if m.invalid else ""
            lines.append(visible(f"  {m.name} = {figure(m.value, m.unit)}{how}{bad}"))
    return lines


def progress_text(
    journal: str,
    plan: list[str],
    hosts: list[HostState],
    timeline: Timeline | None = None,
    judged: Judged | None = None,
) -> str:
    """The plan as a table of steps × hosts (a run that changed nothing asked: ``no change``),
    then one summary line per host."""
    judged = judged or Judged()
    lines = [visible(f"journal {journal}: plan of {plural(len(plan), 'step')}")]
    played = any(h.last is not None and h.last.ansible for h in hosts)
    if not plan:
        lines.append(
            "  (no plan: the runs are an Ansible playbook's)"
            if played
            else "  (the runbook has no steps yet)"
        )
    width = max([len(s) for s in plan] + [4])
    for index, step in enumerate(plan):
        cells = []
        for host in hosts:
            state = host.steps[index]
            status = judged.shown(state.last) if state.last else state.status
            cells.append(visible(f"{host.host}: ") + status)
        lines.append(visible(f"  {index + 1:>2}. {step:<{width}}  ") + "   ".join(cells))
    rest = []
    for host in hosts:
        last = host.last
        tail = (
            f"last: {last.step} {last.status} at {when(last.finished or last.started)}"
            if last
            else "nothing run yet"
        )
        done = f"{host.done}/{len(host.steps)} steps done; " if plan else ""
        rest.append(f"host {host.host} ({host.target or '?'}): {done}{tail}")
        probe = (timeline.latest_probes.get(host.host, {}) if timeline else {}).get("torch-env")
        if probe is not None and probe.result is not None:
            rest.append(f"  {summary('torch-env', probe.result)} (probed {when(probe.ts)})")
        elif timeline is not None:
            rest.append("  stack not probed yet: `journal run probe torch-env`")
        for state in host.steps:  # a latest run that read nothing must not pass for a clean one
            if state.last is not None:
                run = judged.short(state.last.run_id)
                rest += [f"  {t} (run {run})" for t in texts(of_run(state.last))]
    return "\n".join([*lines, visible("\n".join(rest))] if rest else lines)


def rollout_line(rollout, short: Callable[[str], str] = str) -> str:  # type: ignore[no-untyped-def]
    """The latest rollout in `journal status`: its gate, how far it went, where it stopped
    and why, the hosts it left out of service (a RolloutView)."""
    passed = sum(1 for b in rollout.batches if b.passed)
    where = f"{passed} of {len(rollout.batches)} batches passed"
    text = f"rollout {short(rollout.rollout)} (gate {rollout.gate}): {rollout.status}, {where}"
    if rollout.stopped:
        text += f"; stopped at batch {rollout.batch}: {first_line(rollout.reason)}"
    if rollout.drained:
        text += f"; left drained: {', '.join(rollout.drained)}"
    return text


def verdict(run, short: Callable[[str], str] = str) -> str:  # type: ignore[no-untyped-def]
    """The closing line of a step run: host, status, exit status, duration, reason, and its
    id as ``short`` shows it."""
    outcome = run.outcome
    code = "" if outcome.exit_code is None else f", exit {outcome.exit_code}"
    reason = f": {outcome.reason}" if outcome.reason else ""
    mark = MARK.get(outcome.status, outcome.status).strip() or "-"
    took = seconds(outcome.duration)
    return visible(
        f"journal: [{mark}] {run.step} on {run.host} {outcome.status}{code} in {took}{reason} "
        f"(run {short(run.run_id)})"
    )


def _fields(view: object, *names: str) -> dict:
    return {name: getattr(view, name) for name in names}


def run_json(run: StepRunView, judged: Judged) -> dict:
    """A step run as `log`, `status` and `show --format json` give it."""
    diff = run.diff
    return {
        "run": run.run_id,
        **_fields(run, "step", "host", "command"),
        "status": judged.status(run),
        "recorded_status": run.status,
        **_fields(run, "exit_code", "duration", "started", "finished", "reason", "imported"),
        "interactive": run.interactive,
        "ansible": run.ansible,
        "rollback": run.rollback,
        "open_errors": judged.errors(run),
        "packages": None
        if diff is None
        else [_fields(c, "name", "before", "after", "kind") for c in diff.changes],
        "probes": [_fields(p, "probe", "phase", "result", "error") for p in run.probes],
        "unread": [u.to_dict() for u in of_run(run)],
        "expectations": [_fields(e, "key", "expected", "ok", "reason") for e in run.expectations],
        "metrics": [metric_json(m) for m in run.metrics],
        "findings": [f.to_dict() for f in judged.of(run)],
    }


def metric_json(m: MetricView) -> dict:
    return _fields(m, "name", "value", "unit", "labels", "host", "run", "source", "invalid")


def item_json(item: TimelineItem, judged: Judged) -> dict:
    """One timeline item of `journal log --format json`, with its ``kind``."""
    if isinstance(item, StepRunView):
        return {"kind": "run", **run_json(item, judged)}
    if isinstance(item, ProbeView):
        fields = _fields(item, "probe", "phase", "host", "result", "error")
        return {"kind": "probe", "at": item.ts, **fields}
    if isinstance(item, NoteView):
        return {"kind": "note", "at": item.ts, **_fields(item, "text", "tags", "host", "author")}
    if isinstance(item, MetricView):
        return {"kind": "metric", "at": item.ts, **metric_json(item)}
    keys = _fields(item, "host", "target", "key_type", "fingerprint")
    return {"kind": "host-key", "at": item.ts, **keys}
