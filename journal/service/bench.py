"""`journal run bench` and `journal record metric`: figures recorded as ``MetricRecorded``.

A benchmark runs as a step run flagged with its name (its output recorded like any step's);
its parser then reads the output *as printed* (redaction masks no evidence there) and each
figure is appended with its line *as recorded* (:func:`as_recorded`: a figure that its line's
redaction does not leave standing was read from a secret, and is not recorded; what the
parser says is redacted too). A run whose output holds no figure has failed,
unless the benchmark said why the host cannot run it (the built-in ``allreduce`` on one GPU):
that run is ``skipped``, with the reason, and no failure anywhere.
"""

from __future__ import annotations

import getpass
import math
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from journal.benchmarks import BenchmarkSpec
from journal.benchmarks.parsers import ParseResult, parse
from journal.errors import BadInput
from journal.events import MetricRecorded, OutputChunk
from journal.output import chunk_text, chunks_of, last_text
from journal.recorder import KEEP_LIMIT
from journal.redact import MASK, Redactor
from journal.runbook import Host, Runbook, Step
from journal.runs import Outcome, StepRun
from journal.service.steps import Measure, StepWatch, run_step_fleet
from journal.store import EventStore
from journal.terminal import clean

if TYPE_CHECKING:
    from journal.notify import Notifier


@dataclass(frozen=True)
class BenchRun:
    """A benchmark on one host: its step run and the figures recorded from it."""

    run: StepRun
    figures: list[MetricRecorded]
    skipped: list[str]


#: The most of a benchmark's recorded output its parser reads: an output longer than the
#: recorder keeps as printed (:data:`journal.recorder.KEEP_LIMIT`) is read from the store, its
#: last lines up to this much (a benchmark prints its results last), never whole.
PARSED_LIMIT = KEEP_LIMIT


def recorded_output(store: EventStore, journal: str, run_id: str) -> tuple[str, int]:
    """The end of a step run's output as recorded (both streams, in the order printed), at
    most :data:`PARSED_LIMIT` characters of its last lines (:func:`journal.output.last_text`),
    and the number of its first line in the whole output."""
    return last_text(store.read(journal, types=[OutputChunk.type], run_id=run_id), PARSED_LIMIT)


def from_line(result: ParseResult, first: int) -> ParseResult:
    """What a parser read in text that starts at line ``first`` of an output, with the line
    numbers of the whole output."""
    if first == 1:
        return result
    shift = first - 1
    return replace(
        result,
        figures=[replace(f, line=f.line + shift) for f in result.figures],
        problems=[replace(p, line=p.line + shift) for p in result.problems],
    )


def recorded_lines(
    store: EventStore, journal: str, run_id: str, wanted: set[int]
) -> dict[int, str]:
    """Lines ``wanted`` (1-based) of a run's output as recorded, as a parser reads a line
    (clean, no carriage return at its end)."""
    records = store.read(journal, types=[OutputChunk.type], run_id=run_id)
    return lines_of((chunk_text(c) for c in chunks_of(records)), wanted)


def lines_of(pieces: Iterable[str], wanted: set[int]) -> dict[int, str]:
    """Lines ``wanted`` (1-based) of the text that comes in ``pieces``, as a parser reads them."""
    out: dict[int, str] = {}
    number, pending = 1, ""
    for piece in pieces:
        if not wanted or number > max(wanted):
            break
        text = pending + piece
        ends = text.count("\n")
        if not any(number <= n < number + ends for n in wanted):
            number, pending = number + ends, text[text.rfind("\n") + 1 :]
            continue
        *lines, pending = text.split("\n")
        for line in lines:
            if number in wanted:
                out[number] = clean(line).rstrip("\r")
            number += 1
    if number in wanted:
        out[number] = clean(pending).rstrip("\r")
    return out


#: A number as printed in a line (a figure's value is looked for among them).
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*(?:[eE][-+]?\d+)?")


def _stands(value: float, line: str) -> bool:
    """Whether ``value`` is printed in ``line`` (in any form a parser reads)."""
    for found in _NUMBER.finditer(line):
        try:
            if math.isclose(float(found.group().replace(",", "")), abs(value), rel_tol=1e-9):
                return True
        except ValueError:
            continue
    return False


def as_recorded(
    result: ParseResult, lines: Mapping[int, str], redactor: Redactor, where: str = "stdout"
) -> ParseResult:
    """What a parser read from the output as printed, as it may be recorded: each figure and
    problem with its line as recorded (``lines``: line number -> the recorded line; a line not
    there is redacted on its own), a figure whose value its line's redaction does not leave
    standing not recorded (said in ``errors``: it was read from a secret), a label read from
    the line and masked there masked, and the parser's sentences redacted."""
    figures = []
    errors = [redactor.text(e, where)[0] for e in result.errors]
    for figure in result.figures:
        shown = lines.get(figure.line)
        if shown is None:
            shown = redactor.text(figure.text, where)[0]
        if shown != figure.text:
            if not _stands(figure.value, shown):
                errors.append(
                    f"{figure.name} (line {figure.line}) is not recorded: its value is masked "
                    "in the output as (part of) a secret"
                )
                continue
            labels = {
                k: MASK if v and v in figure.text and v not in shown else v
                for k, v in figure.labels.items()
            }
            figure = replace(figure, text=shown, labels=labels)
        figures.append(figure)
    problems = [
        replace(
            p,
            reason=redactor.text(p.reason, where)[0],
            text=lines.get(p.line, redactor.text(p.text, where)[0]),
        )
        for p in result.problems
    ]
    skipped = [redactor.text(s, where)[0] for s in result.skipped]
    return ParseResult(figures, problems, skipped, errors)


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

    def read(
        run_id: str, host: Host, outcome: Outcome, redactor: Redactor, printed: str | None
    ) -> Outcome:
        if printed is None:  # too long to keep: the end of it as recorded, redacted already
            text, first = recorded_output(store, runbook.name, run_id)
        else:  # the output as printed
            text, first = printed, 1
        result = parse(
            spec.parser, text, patterns=spec.patterns, units=spec.units, command=spec.run or ""
        )
        result = from_line(result, first)
        as_printed = printed is not None
        del text, printed  # let go before anything more is read
        if as_printed:
            wanted = {f.line for f in result.figures} | {p.line for p in result.problems}
            lines = recorded_lines(store, runbook.name, run_id, wanted)
            result = as_recorded(result, lines, redactor)
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
        if outcome.ok and not figures and result.skipped:
            # the host cannot run it and the benchmark said why: nothing failed
            return replace(outcome, status="skipped", reason="; ".join(result.skipped))
        if outcome.ok and not figures:
            what = f"the {spec.parser} parser" if not spec.builtin else "the built-in benchmark"
            return replace(outcome, status="failed", reason=f"{what} found no figure in the output")
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
