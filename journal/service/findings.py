"""Findings of a journal (with acknowledgements), of transcripts, and importing a transcript."""

from __future__ import annotations

import getpass
import hashlib
import socket
from pathlib import Path

from journal.errors import BadInput
from journal.events import (
    MetricRecorded,
    OutputChunk,
    PitfallAcknowledged,
    StepFinished,
    StepStarted,
    TranscriptImported,
)
from journal.pitfalls import catalogue, judge
from journal.pitfalls.base import Finding
from journal.pitfalls.subjects import from_journal
from journal.projections.timeline import Timeline
from journal.recorder import encode
from journal.redact import Redactor
from journal.runbook import NAME, NAME_RULE
from journal.service.lint import read_transcript
from journal.service.steps import new_run_id
from journal.store import EventStore
from journal.transcript import parse, step_name


def journal_findings(store: EventStore, journal: str) -> tuple[list[Finding], Timeline]:
    """The findings of a journal, acknowledged ones marked, and its timeline."""
    acks: dict[str, str] = {}
    records = []
    for rec in store.read(journal):
        if isinstance(rec.event, PitfallAcknowledged):
            acks[rec.event.finding] = rec.event.note
        records.append(rec)
    subject, timeline = from_journal(journal, records)
    return judge(subject, acks), timeline


def findings_for_runs(store: EventStore, journal: str, runs: list[str]) -> list[Finding]:
    """The open findings about these step runs (the verdict printed as a step ends)."""
    wanted = set(runs)
    findings, _ = journal_findings(store, journal)
    return [f for f in findings if f.run in wanted and f.acknowledged is None]


def acknowledge(store: EventStore, journal: str, target: str, note: str) -> list[Finding]:
    """Record that ``target`` (a finding's key, or a pitfall id) was looked at; the findings it
    covers. An unknown key or id is refused, so a typo records nothing."""
    if not note.strip():
        raise BadInput(
            "acknowledging a finding needs a --note saying why it is fine or what was done"
        )
    findings, _ = journal_findings(store, journal)
    covered = [f for f in findings if target in (f.key, f.id)]
    if not covered:
        known = sorted({f.key for f in findings} | {f.id for f in findings})
        if target in catalogue():
            raise BadInput(f"the journal {journal!r} has no {target} finding to acknowledge")
        from journal.runbook import suggest

        raise BadInput(f"no finding {target!r} in the journal {journal!r}{suggest(target, known)}")
    author = f"{getpass.getuser()}@{socket.gethostname()}"
    store.append(journal, [PitfallAcknowledged(finding=target, note=note, author=author)])
    return covered


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
    for command in commands:
        run = new_run_id()
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
            )
        )
        output = "\n".join(command.output)
        figures = []
        if output:
            data, redactions = redactor.bytes((output + "\n").encode(), "stdout")
            figures = _figures(shown, data.decode("utf-8", "replace"), host, run)
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
        batch.append(
            StepFinished(
                run=run,
                host_name=host,
                status="imported",
                exit_code=None,
                duration=0.0,
                reason=f"imported from {path.name}, line {command.line}",
            )
        )
    store.append(journal, batch)
    return len(commands)


def _figures(command: str, output: str, host: str, run: str) -> list[MetricRecorded]:
    """The figures of a pasted benchmark's output, labelled with its command (options that
    only name output files or the server's address left out, so reruns share a series)."""
    from journal.benchmarks import guess_parser
    from journal.benchmarks.parsers import parse
    from journal.pitfalls._bench import bench_key
    from journal.service.bench import figures_of

    parser = guess_parser(command, output)
    if parser is None:
        return []
    result = parse(parser, output, command=command)
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
