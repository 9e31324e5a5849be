"""Findings of a journal (with acknowledgements), of transcripts, and importing a transcript."""

from __future__ import annotations

import getpass
import hashlib
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from journal.errors import BadInput
from journal.events import (
    MetricRecorded,
    OutputChunk,
    PitfallAcknowledged,
    PitfallUnacknowledged,
    ProbeRecorded,
    StepFinished,
    StepStarted,
    TranscriptImported,
)
from journal.output import encode
from journal.pitfalls import catalogue, judge
from journal.pitfalls.acks import TYPES as ACK_TYPES
from journal.pitfalls.acks import fold_ack
from journal.pitfalls.base import Finding, Tally
from journal.pitfalls.lifecycle import AckBook
from journal.pitfalls.subjects import from_journal
from journal.projections.drift.readings import TRANSCRIPT
from journal.projections.timeline import Timeline
from journal.reading.subject import Subject
from journal.redact import Redactor
from journal.runbook import NAME, NAME_RULE
from journal.service.lint import read_transcript
from journal.service.steps import new_run_id
from journal.store import EventStore
from journal.transcript import parse, step_name

if TYPE_CHECKING:
    from journal.notify import Notifier


def findings(store: EventStore, journal: str) -> list[Finding]:
    """The findings of a journal with their lifecycle (open, acknowledged, resolved), from its
    findings projection brought up to date (judging only what came since it was stored)."""
    from journal.pitfalls.ledger import Ledger

    return Ledger(store, journal).findings()


def journal_findings(store: EventStore, journal: str) -> tuple[list[Finding], Timeline]:
    """The findings of a journal (from its projection) and its timeline (replayed)."""
    found = findings(store, journal)
    from journal.projections.stored import current_timeline

    return found, current_timeline(store, journal)


def findings_in(found: list[Finding], timeline: Timeline) -> list[Finding]:
    """The findings about a part of a journal (``timeline`` cut by
    :func:`journal.projections.period.cut`): those of its runs, and those of no run that hold
    from an event within it (a figure that fell, a host's drift)."""
    if not timeline.items:
        return []
    first = min(item.seq for item in timeline.items)
    last = max(item.seq for item in timeline.items)
    return [
        f
        for f in found
        if f.run in timeline.runs
        or (f.run is None and f.seq is not None and first <= f.seq <= last)
    ]


def replayed_findings(store: EventStore, journal: str) -> tuple[list[Finding], Timeline]:
    """The findings of a journal judged from scratch over every event, and its timeline:
    what the findings projection must always agree with."""
    book = AckBook()
    records = []
    for rec in store.read(journal):
        fold_ack(book, rec)
        records.append(rec)
    subject, timeline = from_journal(journal, records)
    return judged(subject, book), timeline


def judged(subject: Subject, book: AckBook | None = None) -> list[Finding]:
    """Every finding of a journal's subject, with what became of it."""
    from journal.pitfalls.lifecycle import follow
    from journal.reading.bench import figures

    trusted = [f for f, block in figures(subject) if block is None or not block.problems()]
    return follow(subject.runs, trusted, judge(subject), book)


def tally(store: EventStore, journal: str) -> Tally:
    """How many findings are open (by severity), acknowledged and resolved (every finding
    counted, none of them read: the findings projection keeps the counts)."""
    from journal.pitfalls.ledger import Ledger

    return Ledger(store, journal).tally()


def open_findings(store: EventStore, journal: str, severity: str) -> list[Finding]:
    """The open findings of one severity (read from the pitfalls open at it only)."""
    from journal.pitfalls.ledger import Ledger

    return Ledger(store, journal).open_findings(severity)


def run_findings(store: EventStore, journal: str, runs: list[str]) -> list[Finding]:
    """Every finding about these step runs, in any state."""
    from journal.pitfalls.ledger import Ledger

    return Ledger(store, journal).findings_of(runs)


def findings_for_runs(
    store: EventStore, journal: str, runs: list[str], notifier: Notifier | None = None
) -> list[Finding]:
    """The open findings about these step runs (the verdict printed as a step ends), told to
    ``notifier`` (which sends those its channels ask for)."""
    from journal.pitfalls.ledger import Ledger

    found = [f for f in Ledger(store, journal).findings_of(runs) if f.is_open]
    if notifier is not None and found:
        notifier.findings(found)
    return found


def author_of(by: str | None) -> str:
    """Who acknowledges: ``by`` when given, else the local user at this machine."""
    return by.strip() if by and by.strip() else f"{getpass.getuser()}@{socket.gethostname()}"


def acknowledge(
    store: EventStore, journal: str, target: str, note: str, by: str | None = None
) -> int | None:
    """Record that ``target`` (a finding's key, or a pitfall id: every finding of it made so
    far) was looked at; how many findings a key covers (None for a pitfall id). An unknown key
    or id is refused, so a typo records nothing. Only the findings the target names are read."""
    from journal.pitfalls.ledger import Ledger

    if not note.strip():
        raise BadInput(
            "acknowledging a finding needs a note saying why it is fine or what was done"
        )
    ledger = Ledger(store, journal)
    covered: int | None
    if ":" in target:
        covered = sum(1 for f in ledger.findings_of([target.split(":", 1)[1]]) if f.key == target)
        found = covered > 0
    else:
        covered, found = None, target in catalogue() and ledger.has(target)
    if not found:
        _covered(ledger.findings(), journal, target)  # says what is wrong
    store.append(journal, [PitfallAcknowledged(finding=target, note=note, author=author_of(by))])
    return covered


def unacknowledge(
    store: EventStore, journal: str, target: str, by: str | None = None
) -> int | None:
    """Withdraw the acknowledgement of ``target`` (a key or a pitfall id, as acknowledged);
    how many findings a key covered (None for a pitfall id). One not in force is refused, so
    a typo records nothing."""
    from journal.pitfalls.ledger import Ledger

    book = AckBook()
    for rec in store.read(journal, types=ACK_TYPES):
        fold_ack(book, rec)
    if target not in book.acks:
        known = sorted(book.acks)
        raise BadInput(
            f"{target!r} is not acknowledged in the journal {journal!r}"
            + (f"; acknowledged there: {', '.join(known[:8])}" if known else "")
        )
    covered: int | None = None
    if ":" in target:
        found = Ledger(store, journal).findings_of([target.split(":", 1)[1]])
        covered = sum(1 for f in found if f.key == target)
    store.append(journal, [PitfallUnacknowledged(finding=target, author=author_of(by))])
    return covered


def _covered(found: list[Finding], journal: str, target: str) -> list[Finding]:
    covered = [f for f in found if target in (f.key, f.id)]
    if covered:
        return covered
    known = sorted({f.key for f in found} | {f.id for f in found})
    if target in catalogue():
        raise BadInput(f"the journal {journal!r} has no {target} finding to acknowledge")
    from journal.runbook import suggest

    raise BadInput(f"no finding {target!r} in the journal {journal!r}{suggest(target, known)}")


def import_transcript(
    store: EventStore, journal: str, path: Path, host: str, redact: list[str]
) -> int:
    """Record each command of a transcript as an imported step run; how many there were."""
    if not NAME.match(host):
        raise BadInput(f"--host {host!r} is not a usable host name ({NAME_RULE})")
    text = read_transcript(path)
    commands = parse(text)
    if not commands:
        raise BadInput(
            f"{path}: no commands found: a transcript has prompt lines such as "
            "`user@host:~$ cmd` or `$ cmd`, each followed by its output"
        )
    redactor = Redactor.for_run(redact)
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
    batch: list = [TranscriptImported(str(path), digest, host, len(commands))]
    readings = _readings(text, path, host, redactor)
    now = datetime.now().astimezone()  # a transcript's times are of the importing machine's zone
    for command in commands:
        run = new_run_id()
        moment = command.moment(now)
        shown, found = redactor.text(command.command, "command")
        step = step_name(shown)
        batch.append(
            StepStarted(
                run=run,
                step=step,
                host_name=host,
                target="imported",
                command=shown,
                imported=True,
                redactions=found,
                at=None if moment is None else _stored_time(moment),
            )
        )
        output = "\n".join(command.output)
        figures = []
        if output:
            data, redactions = redactor.bytes((output + "\n").encode(), "stdout")
            figures = _figures(shown, output, data.decode("utf-8", "replace"), host, run, redactor)
            body, encoding = encode(data)
            batch.append(
                OutputChunk(
                    run=run,
                    host_name=host,
                    stream="stdout",
                    data=body,
                    encoding=encoding,
                    size=len(data),
                    t=0.0,
                    redactions=redactions,
                )
            )
        batch.extend(figures)
        reading = readings.get(command.line)
        if reading:
            batch.append(
                ProbeRecorded(
                    host_name=host, probe=TRANSCRIPT, result=reading, seconds=0.0, run=run
                )
            )
        when = f", at {command.at}" if command.at else ""
        batch.append(
            StepFinished(
                run=run,
                host_name=host,
                status="imported",
                exit_code=None,
                duration=command.duration,  # type: ignore[arg-type]  # None: untimed
                reason=f"imported from {path.name}, line {command.line}{when}"
                + ("" if command.duration is not None else " (untimed)"),
            )
        )
    store.append(journal, batch)
    return len(commands)


def _stored_time(moment: datetime) -> str:
    """An aware time as the store writes its own (UTC, microseconds, a ``Z``)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def _readings(text: str, path: Path, host: str, redactor: Redactor) -> dict[int, dict]:
    """What the transcript printed of the host's stack (torch, CUDA, NCCL, the driver … as
    :mod:`journal.reading.printed` reads them), by the prompt line of each command that
    printed any: the facts that command printed, each with its line (redacted)."""
    from journal.pitfalls.subjects import from_transcript
    from journal.projections.drift import transcript_reading
    from journal.reading.printed import host_facts

    subject = from_transcript(text, path.name, host)
    out: dict[int, dict] = {}
    for run in subject.runs:
        known = host_facts(subject).get(id(run))
        if known is None:
            continue
        shown = {name: fact for name, fact in known.known.items() if name in known.shown}
        reading = transcript_reading(shown)
        if not reading["evidence"]:
            continue
        out[run.prompt_line] = redactor.value(reading, "stdout")  # values and lines alike
    return out


def _figures(
    command: str, output: str, recorded: str, host: str, run: str, redactor: Redactor
) -> list[MetricRecorded]:
    """The figures of a pasted benchmark's output, read from it as pasted, each with its line
    as ``recorded`` (redacted: :func:`journal.service.bench.as_recorded`), labelled with its
    command (options that only name output files or the server's address left out, so reruns
    share a series)."""
    from journal.benchmarks import guess_parser
    from journal.benchmarks.parsers import parse
    from journal.reading.bench import bench_key
    from journal.service.bench import as_recorded, figures_of, lines_of

    parser = guess_parser(command, output)
    if parser is None:
        return []
    result = parse(parser, output, command=command)
    wanted = {f.line for f in result.figures} | {p.line for p in result.problems}
    result = as_recorded(result, lines_of([recorded], wanted), redactor)
    key = bench_key(command)
    return figures_of(
        result,
        source="imported",
        host=host,
        run=run,
        benchmark=None,
        labels={"benchmark": _program(key), "command": key},
    )


def _program(key: str) -> str:
    """A benchmark's short name from its key: ``sglang.bench_serving`` for ``python -m
    sglang.bench_serving --backend …``, ``vllm bench serve``, ``all_reduce_perf``."""
    words = []
    for word in key.split():
        if "=" in word and not words:
            continue  # VAR=value before the program
        if word.startswith("--") or (word.startswith("-") and word != "-m"):
            break
        words.append(word)
    text = " ".join(w for w in words if w != "python").replace("-m ", "")
    return text[:60] or "benchmark"
