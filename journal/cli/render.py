"""Plain-text rendering of timelines and plan progress for the terminal. What a host printed
is not trusted: every view returned has its control characters made visible
(:func:`journal.terminal.visible`), so that listing it cannot set the terminal's title or
clear its screen; a step's output itself (`journal log --output`) is printed as it was.
"""

from __future__ import annotations

import json

# Re-exported: the CLI's views and its callers write values as the web and exports do.
from journal.display import figure, first_line, plural, seconds, when  # noqa: F401
from journal.events import MetricRecorded, NoteAdded, OutputChunk, StepFinished, StepStarted
from journal.mapper import Recorded

# Re-exported: `journal log --output` prints a run's output as journal.output reassembles it.
from journal.output import decode, output_bytes  # noqa: F401
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
)
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
}


#: The indent of a timeline item's details, under its time.
PAD = " " * 22


def run_line(run: StepRunView, command: bool = True) -> str:
    """A step run's heading: when, status, exit, duration and output counts; then (unless
    ``command`` is false) its command and, for anything but a plain exit, the reason."""
    exit_text = "" if run.exit_code is None else f" exit {run.exit_code}"
    took = "" if run.duration is None else f" {seconds(run.duration)}"
    out = (
        f"{plural(run.lines.get('stdout', 0), 'line')} out, "
        f"{plural(run.lines.get('stderr', 0), 'line')} err"
    )
    line = (
        f"{when(run.started)}  [{MARK.get(run.status, run.status)}] {run.step} on {run.host}: "
        f"{run.status}{exit_text}{took}  ({out})  run {run.run_id}"
    )
    if command:
        line += f"\n{PAD}$ {first_line(run.command)}"
    if run.reason:
        line += f"\n{PAD}{run.reason}"
    return visible(line)


def timeline_text(timeline: Timeline) -> str:
    """The whole timeline, one block per item."""
    runs = timeline.step_runs()
    lines = [
        f"journal {timeline.journal}: {plural(len(runs), 'step run')}, "
        f"{plural(timeline.events, 'event')}, last at {when(timeline.last_ts)}"
    ]
    for item in timeline.items:
        if isinstance(item, StepRunView):
            lines.append(run_line(item))
            lines.extend(f"{PAD}{line}" for line in run_details(item))
        elif isinstance(item, ProbeView):
            lines.append(f"{when(item.ts)}  probe {item.probe} on {item.host}: {probe_line(item)}")
            lines.extend(f"{PAD}{expectation_line(e)}" for e in item.expectations)
        elif isinstance(item, NoteView):
            tags = f" [{', '.join(item.tags)}]" if item.tags else ""
            lines.append(f"{when(item.ts)}  note{tags}: {item.text}")
        elif isinstance(item, MetricView):
            lines.append(f"{when(item.ts)}  metric {metric_line(item)}")
        elif isinstance(item, HostKeyView):
            lines.append(
                f"{when(item.ts)}  accepted the new host key of {item.host} ({item.target}): "
                f"{item.key_type} {item.fingerprint}"
            )
    return visible("\n".join(lines))


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
    for probe in run.probes:
        if probe.probe != "packages":
            lines.append(f"probe {probe.probe}: {probe_line(probe)}")
    lines.extend(expectation_line(e) for e in run.expectations)
    lines.extend(f"metric {metric_line(m)}" for m in run.metrics)
    return lines


def progress_text(
    journal: str, plan: list[str], hosts: list[HostState], timeline: Timeline | None = None
) -> str:
    """The plan as a table of steps × hosts, then one summary line per host."""
    lines = [f"journal {journal}: plan of {plural(len(plan), 'step')}"]
    if not plan:
        lines.append("  (the runbook has no steps yet)")
    width = max([len(s) for s in plan] + [4])
    for index, step in enumerate(plan):
        cells = []
        for host in hosts:
            state = host.steps[index]
            cells.append(f"{host.host}: {state.status}")
        lines.append(f"  {index + 1:>2}. {step:<{width}}  " + "   ".join(cells))
    for host in hosts:
        last = host.last
        tail = (
            f"last: {last.step} {last.status} at {when(last.finished or last.started)}"
            if last
            else "nothing run yet"
        )
        done = f"{host.done}/{len(host.steps)} steps done"
        lines.append(f"host {host.host} ({host.target or '?'}): {done}; {tail}")
        probe = (timeline.latest_probes.get(host.host, {}) if timeline else {}).get("torch-env")
        if probe is not None and probe.result is not None:
            lines.append(f"  {summary('torch-env', probe.result)} (probed {when(probe.ts)})")
        elif timeline is not None:
            lines.append("  stack not probed yet: `journal run probe torch-env`")
    return visible("\n".join(lines))


def event_text(rec: Recorded, runs: dict[str, tuple[str, str]]) -> bytes:
    """One event as `journal log --follow` prints it as it arrives: output as it was printed,
    journal's lines with their control characters made visible."""
    event = rec.event
    if isinstance(event, OutputChunk):
        return decode(event)
    return visible(_event_line(rec, runs)).encode()


def _event_line(rec: Recorded, runs: dict[str, tuple[str, str]]) -> str:
    event = rec.event
    if isinstance(event, StepStarted):
        runs[event.run] = (event.step, event.host_name)
        head = f"{when(rec.ts)}  ==> {event.step} on {event.host_name}"
        return f"{head}: $ {first_line(event.command)}\n"
    if isinstance(event, StepFinished):
        step, host = runs.get(event.run, ("?", event.host_name))
        code = "" if event.exit_code is None else f" exit {event.exit_code}"
        reason = f" ({event.reason})" if event.reason else ""
        return f"{when(rec.ts)}  <== {step} on {host}: {event.status}{code}{reason}\n"
    if isinstance(event, NoteAdded):
        return f"{when(rec.ts)}  note: {event.text}\n"
    if isinstance(event, MetricRecorded):
        value = figure(event.value, event.unit)
        where = f" on {event.host_name}" if event.host_name else ""
        return f"{when(rec.ts)}  metric {event.name} = {value}{where}\n"
    return ""


def verdict(run) -> str:  # type: ignore[no-untyped-def]
    """The closing line of a step run: host, status, exit status, duration, reason."""
    outcome = run.outcome
    code = "" if outcome.exit_code is None else f", exit {outcome.exit_code}"
    reason = f": {outcome.reason}" if outcome.reason else ""
    mark = MARK.get(outcome.status, outcome.status).strip() or "-"
    took = seconds(outcome.duration)
    return visible(
        f"journal: [{mark}] {run.step} on {run.host} {outcome.status}{code} in {took}{reason} "
        f"(run {run.run_id})"
    )
