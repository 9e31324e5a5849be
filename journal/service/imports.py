"""`journal import transcript`: a pasted terminal session recorded as step runs, read a line
at a time.

The file is read three times, never held whole: once for its digest, its commands and its
stamps; once as the terminal showed it, for what it printed of the host's stack (the
readings); once to record each command as an imported step run (``StepStarted``, its output
as chunks of at most :data:`journal.recorder.MAX_CHUNK` redacted as a recorded step's are,
the figures of a pasted benchmark, the reading, ``StepFinished``). The events are appended
in batches of :data:`BATCH_BYTES`: a session of a few commands is one transaction, a 200 MB
one a few megabytes at a time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from journal.errors import BadInput
from journal.events import (
    Event,
    MetricRecorded,
    OutputChunk,
    ProbeRecorded,
    StepFinished,
    StepStarted,
    TranscriptImported,
)
from journal.projections.drift.readings import TRANSCRIPT
from journal.recorder import OutputRecorder
from journal.redact import Redactor
from journal.runbook import NAME, NAME_RULE
from journal.runs import new_run_id
from journal.service.lint import transcript_file
from journal.store import EventStore
from journal.transcript import (
    Command,
    Stamps,
    TranscriptFile,
    commands,
    is_prompt_line,
    step_name,
)

#: Events held before they are appended (their output's bytes).
BATCH_BYTES = 4 * 1024 * 1024
#: Output lines handed to the recorder at once (characters).
FEED_BYTES = 64 * 1024


def import_transcript(
    store: EventStore,
    journal: str,
    path: Path,
    host: str,
    redact: list[str],
    opened: Callable[[], None] = lambda: None,
) -> int:
    """Record each command of a transcript as an imported step run; how many there were.
    ``opened`` is called once the transcript was read, before anything is recorded (a
    transcript that cannot be read records nothing, not even the journal's opening)."""
    if not NAME.match(host):
        raise BadInput(f"--host {host!r} is not a usable host name ({NAME_RULE})")
    lines = transcript_file(path)
    scan = _scan(lines)
    if not scan.commands:
        raise BadInput(
            f"{path}: no commands found: a transcript has prompt lines such as "
            "`user@host:~$ cmd` or `$ cmd`, each followed by its output"
        )
    redactor = Redactor.for_run(redact)
    readings = _readings(lines, path, host, redactor)
    opened()
    batches = _Batches(store, journal)
    batches.add([TranscriptImported(str(path), scan.digest, host, scan.commands)])
    now = datetime.now().astimezone()  # a transcript's times are of the importing machine's zone
    fed: dict[int, _Fed] = {}

    def begin(command: Command) -> _Fed:
        run = new_run_id()
        moment = command.moment(now)
        shown, found = redactor.text(command.command, "command")
        batches.add(
            [
                StepStarted(
                    run=run,
                    step=step_name(shown),
                    host_name=host,
                    target="imported",
                    command=shown,
                    imported=True,
                    redactions=found,
                    at=None if moment is None else _stored_time(moment),
                )
            ]
        )
        recorder = OutputRecorder(batches.add, run, host, redactor, keep=True)
        fed[command.index] = _Fed(run, shown, recorder)
        return fed[command.index]

    for command in commands(lines, scan.every, begin):
        done = fed.pop(command.index)
        done.close()
        printed = done.recorder.printed()
        figures: list[MetricRecorded] = []
        if printed:  # the output as pasted (none past the recorder's keep limit)
            figures = _figures(done.shown, printed, host, done.run, redactor)
        after: list[Event] = list(figures)
        reading = readings.get(command.line)
        if reading:
            after.append(
                ProbeRecorded(
                    host_name=host, probe=TRANSCRIPT, result=reading, seconds=0.0, run=done.run
                )
            )
        when = f", at {command.at}" if command.at else ""
        after.append(
            StepFinished(
                run=done.run,
                host_name=host,
                status="imported",
                exit_code=None,
                duration=command.duration,  # type: ignore[arg-type]  # None: untimed
                reason=f"imported from {path.name}, line {command.line}{when}"
                + ("" if command.duration is not None else " (untimed)"),
            )
        )
        batches.add(after)
    batches.flush()
    return scan.commands


@dataclass(frozen=True)
class _Scan:
    digest: str  # of the text as read (bad bytes replaced)
    commands: int
    every: bool  # `ts` stamped every line (journal.transcript.stamped_throughout)


def _scan(lines: TranscriptFile) -> _Scan:
    """The first reading: the digest of the text, how many commands, whether `ts` stamped
    every line."""
    digest = hashlib.sha256()
    count = 0
    stamps = Stamps()
    with lines.path.open("rb") as file:
        for raw in file:
            text = raw.decode("utf-8", "replace")
            digest.update(text.encode("utf-8", "surrogateescape"))
            line = text.removesuffix("\n").rstrip("\r")
            stamps.add(line)
            count += is_prompt_line(line)
    return _Scan(digest.hexdigest(), count, stamps.every)


class _Fed:
    """One command being recorded: its run, its command as shown, its output's recorder (fed
    :data:`FEED_BYTES` of lines at a time)."""

    def __init__(self, run: str, shown: str, recorder: OutputRecorder) -> None:
        self.run, self.shown, self.recorder = run, shown, recorder
        self._lines: list[str] = []
        self._size = 0

    def append(self, line: str) -> None:
        self._lines.append(line)
        self._size += len(line) + 1
        if self._size >= FEED_BYTES:
            self._feed()

    def _feed(self) -> None:
        if self._lines:
            self.recorder.feed("stdout", ("\n".join(self._lines) + "\n").encode())
        self._lines, self._size = [], 0

    def close(self) -> None:
        """Record what is left of the output."""
        self._feed()
        self.recorder.close()


class _Batches:
    """Events appended in batches of about :data:`BATCH_BYTES`, in order."""

    def __init__(self, store: EventStore, journal: str) -> None:
        self.store, self.journal = store, journal
        self.events: list[Event] = []
        self.size = 0

    def add(self, events: Sequence[Event]) -> None:
        self.events.extend(events)
        self.size += sum(e.size if isinstance(e, OutputChunk) else 256 for e in events)
        if self.size >= BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.events:
            self.store.append(self.journal, self.events)
        self.events, self.size = [], 0


def _stored_time(moment: datetime) -> str:
    """An aware time as the store writes its own (UTC, microseconds, a ``Z``)."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")[:-6] + "Z"


def _readings(lines: Iterable[str], path: Path, host: str, redactor: Redactor) -> dict[int, dict]:
    """What the transcript printed of the host's stack (torch, CUDA, NCCL, the driver … as
    :mod:`journal.reading.printed` reads them), by the prompt line of each command that
    printed any: the facts that command printed, each with its line (redacted)."""
    from journal.pitfalls.subjects import from_transcript
    from journal.projections.drift import transcript_reading
    from journal.reading.printed import host_facts

    subject = from_transcript(lines, path.name, host)
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
    command: str, printed: str, host: str, run: str, redactor: Redactor
) -> list[MetricRecorded]:
    """The figures of a pasted benchmark's output (``printed``: its lines, each ended by a
    newline), read from it as pasted, each with its line as recorded (redacted, only where a
    parser reads the output: :func:`journal.service.bench.as_recorded`), labelled with its
    command (options that only name output files or the server's address left out, so reruns
    share a series)."""
    from journal.benchmarks import guess_parser
    from journal.benchmarks.parsers import parse
    from journal.reading.bench import bench_key
    from journal.service.bench import as_recorded, figures_of, lines_of

    output = printed[:-1]
    parser = guess_parser(command, output)
    if parser is None:
        return []
    recorded = redactor.bytes(printed.encode(), "stdout")[0].decode("utf-8", "replace")
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
