"""`journal run bench` and `journal record metric`: figures recorded as ``MetricRecorded``.

A benchmark runs as a step run flagged with its name (its output recorded like any step's);
its parser then reads the output *as recorded* (secrets already redacted) and each figure is
appended with the line it was read from. A run whose output holds no figure has failed.
"""

from __future__ import annotations

import getpass
import math
import socket
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from journal.benchmarks import BenchmarkSpec
from journal.benchmarks.parsers import ParseResult, parse
from journal.errors import BadInput
from journal.events import MetricRecorded, OutputChunk
from journal.output import output_text
from journal.redact import Redactor
from journal.runbook import Host, Runbook, Step
from journal.service.steps import Measure, StepRun, StepWatch, run_step_fleet
from journal.store import EventStore
from journal.transport import Outcome

if TYPE_CHECKING:
    from journal.notify import Notifier


@dataclass(frozen=True)
class BenchRun:
    """A benchmark on one host: its step run and the figures recorded from it."""

    run: StepRun
    figures: list[MetricRecorded]
    skipped: list[str]


def recorded_output(store: EventStore, journal: str, run_id: str) -> str:
    """A step run's output as recorded (both streams, in the order printed)."""
    return output_text(store.read(journal, types=[OutputChunk.type], run_id=run_id))


def figures_of(
    result: ParseResult,
    *,
    source: str,
    host: str | None,
    run: str | None,
    benchmark: str | None,
    labels: dict[str, str],
    invalid: str | None = None,
) -> list[MetricRecorded]:
    """The events for the figures a parser read: the benchmark's and host's labels, then the
    parser's own, then those given (which win)."""
    problem = invalid
    if problem is None and result.problems:
        problem = "; ".join(p.reason for p in result.problems)
    base = {k: v for k, v in (("benchmark", benchmark), ("host", host)) if v}
    return [
        MetricRecorded(
            name=f.name,
            value=f.value,
            unit=f.unit,
            labels={**base, **f.labels, **labels},
            source=source,
            host_name=host,
            run=run,
            benchmark=benchmark,
            line=f.line,
            text=f.text[:2000],
            invalid=problem,
        )
        for f in result.figures
    ]


def run_bench(
    store: EventStore,
    runbook: Runbook,
    spec: BenchmarkSpec,
    hosts: list[Host],
    echo: StepWatch,
    labels: dict[str, str],
    *,
    accept_new_host_key: bool = False,
    notifier: Notifier | None = None,
) -> list[BenchRun]:
    """Run benchmark ``spec`` on every host in parallel and record its figures; ``notifier``
    hears each run's end."""
    found: dict[str, tuple[list[MetricRecorded], list[str]]] = {}

    def command(host: Host) -> tuple[str, str]:
        sent = spec.command(host.python)
        if spec.builtin is None:
            return sent, sent
        return sent, f"{host.python} -u <journal's built-in benchmark script> {spec.builtin}"

    def read(run_id: str, host: Host, outcome: Outcome, redactor: Redactor) -> Outcome:
        text = recorded_output(store, runbook.name, run_id)
        result = parse(
            spec.parser, text, patterns=spec.patterns, units=spec.units, command=spec.run or ""
        )
        invalid = None
        if not outcome.ok:
            code = f" (exit status {outcome.exit_code})" if outcome.exit_code is not None else ""
            invalid = f"the benchmark run {outcome.status}{code}"
        figures = figures_of(
            result,
            source="builtin" if spec.builtin else "parsed",
            host=host.name,
            run=run_id,
            benchmark=spec.name,
            labels={**spec.labels, **labels},
            invalid=invalid,
        )
        store.append(runbook.name, figures)
        found[run_id] = (figures, list(result.skipped))
        if outcome.ok and result.errors:
            return replace(outcome, status="failed", reason="; ".join(result.errors))
        if outcome.ok and not figures:
            what = f"the {spec.parser} parser" if not spec.builtin else "the built-in benchmark"
            why = "; ".join(result.skipped) or f"{what} found no figure in the output"
            return replace(outcome, status="failed", reason=why)
        return outcome

    step = Step(
        spec.name,
        spec.run or "",
        env=spec.env,
        cwd=spec.cwd,
        timeout=spec.timeout,
        snapshots=False,
        description=spec.description,
    )
    runs = run_step_fleet(
        store,
        runbook,
        step,
        hosts,
        echo,
        accept_new_host_key=accept_new_host_key,
        measure=Measure(spec.name, command, read),
        notifier=notifier,
    ).results
    return [BenchRun(run, *found.get(run.run_id, ([], []))) for run in runs]


def record_metric(
    store: EventStore,
    journal: str,
    name: str,
    value: str,
    unit: str | None,
    labels: dict[str, str],
    host: str | None,
) -> MetricRecorded:
    """Record a figure measured elsewhere, marked as entered by hand (``source`` manual)."""
    from journal.runbook import NAME

    if not NAME.match(name):
        raise BadInput(
            f"metric name {name!r} is not usable: letters, digits, '.', '_', '-' "
            "(e.g. output_token_throughput)"
        )
    try:
        number = float(value)
    except ValueError:
        raise BadInput(f"metric value {value!r} is not a number (e.g. 96.1)") from None
    if not math.isfinite(number):
        raise BadInput(f"metric value {value!r} is not a finite number")
    if host is not None and not NAME.match(host):
        raise BadInput(f"host name {host!r} is not usable: letters, digits, '.', '_', '-'")
    base = {"host": host} if host else {}
    event = MetricRecorded(
        name=name,
        value=number,
        unit=unit or None,
        labels={**base, **labels},
        source="manual",
        host_name=host,
        author=f"{getpass.getuser()}@{socket.gethostname()}",
    )
    store.append(journal, [event])
    return event
