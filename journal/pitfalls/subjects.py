"""Building the Subject detectors judge: from a journal's events, or from a transcript's text."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from typing import Any

from journal.events import OutputChunk, PackagesSnapshotted
from journal.mapper import Recorded
from journal.output import chunk_text
from journal.projections.folder import recorder_alive, settle
from journal.projections.timeline import MetricView, ProbeView, Timeline, project
from journal.projections.unread import of_probe
from journal.reading.bench import Figure
from journal.reading.subject import Evidence, Run, Segment, Subject
from journal.reading.window import KeptLines, Skipped
from journal.runs import Alive
from journal.terminal import clean, clean_chunks
from journal.transcript import Command, commands, lines_of, stamped_throughout, step_name


def from_journal(
    journal: str, records: Iterable[Recorded], alive: Alive = recorder_alive
) -> tuple[Subject, Timeline]:
    """The subject of a journal, and its timeline (folded in the same single pass); a run
    without its end is running while ``alive(machine, pid)`` says its recorder is."""
    texts: dict[str, list[str]] = {}
    segments: dict[str, list[Segment]] = {}
    offsets: dict[str, int] = {}
    lines: dict[str, int] = {}
    alone: list[tuple[int, str]] = []  # snapshots taken on their own: (event, host)

    def chunks(records: Iterable[Recorded]) -> Iterable[Recorded]:
        for rec in records:
            event = rec.event
            if isinstance(event, Skipped):  # the middle of a long output: its lines counted
                lines[event.run] = lines.get(event.run, 0) + event.newlines
                continue
            if isinstance(event, OutputChunk):
                data = chunk_text(event)
                run = event.run
                start = offsets.get(run, 0)
                segments.setdefault(run, []).append(
                    Segment(start, event.stream, rec.seq, lines.get(run, 0) + 1)
                )
                texts.setdefault(run, []).append(data)
                offsets[run] = start + len(data)
                lines[run] = lines.get(run, 0) + data.count("\n")
            elif isinstance(event, PackagesSnapshotted) and event.run is None:
                alone.append((rec.seq, event.host_name))
            yield rec

    timeline = settle(project(journal, chunks(records)), alive)
    runs = []
    for item in timeline.items:
        if isinstance(item, ProbeView):
            # A probe run on its own (`journal run probe`) is judged like a step with no
            # output; one that could not be read checked nothing, but is a fact to judge.
            read = item.result is not None
            runs.append(
                Run(
                    key=f"probe-{item.seq}",
                    step=f"probe {item.probe}",
                    host=item.host,
                    command=f"journal run probe {item.probe}",
                    event=item.seq,
                    probes={item.probe: item.result} if read else {},
                    probe_events={item.probe: item.seq} if read else {},
                    unread=[] if read else [_unread(item)],
                )
            )
    for seq, host in alone:
        # A snapshot on its own (`journal run probe packages`) shows the env can be read
        # again: what resolves an earlier snapshot that could not be.
        runs.append(
            Run(
                key=f"probe-{seq}",
                step="probe packages",
                host=host,
                command="journal run probe packages",
                event=seq,
                snapshotted=("probe",),
            )
        )
    for view in timeline.step_runs():
        # Detectors read the output as the terminal showed it (colours and redraws gone,
        # the same lines): chunk positions are moved onto the clean text.
        output, starts = clean_chunks(texts.pop(view.run_id, []))
        run = Run(
            key=view.run_id,
            step=view.step,
            host=view.host,
            command=view.command,
            text=output,
            segments=[
                Segment(start, s.stream, s.event, s.first_line)
                for start, s in zip(starts, segments.get(view.run_id, []), strict=True)
            ],
            exit_code=view.exit_code,
            status=view.status,
            event=view.seq,
            env=view.env,
            diff=view.diff,
            before=view.snapshots.get("before"),
            after=view.snapshots.get("after"),
            probes={p.probe: p.result for p in view.probes if p.result is not None},
            probe_events={p.probe: p.seq for p in view.probes},
            expectations=view.expectations,
            imported=view.imported,
            reason=view.reason,
            signal=view.signal,
            rollback=view.rollback,
            interactive=view.interactive,
            snapshotted=tuple(view.snapshots),
            unread=[_unread(p) for p in view.probes if p.result is None],
        )
        runs.append(run)
    runs.sort(key=lambda run: run.event or 0)  # standalone probes in their place in time
    metrics = [_figure(m, segments.get(m.run or "", [])) for m in timeline.metrics]
    return Subject("journal", runs, journal, metrics=metrics), timeline


def _unread(probe: ProbeView) -> dict[str, Any]:
    """A probe or snapshot that could not be read, as a run carries it."""
    miss = of_probe(probe)
    assert miss is not None  # only failed probes are asked for
    return {"probe": miss.probe, "phase": miss.phase, "error": miss.error, "event": miss.seq}


def _figure(metric: MetricView, segments: list[Segment]) -> Figure:
    """A recorded figure as detectors read it, its evidence the output line it was read from
    (or the figure itself, for one entered by hand)."""
    if metric.text is not None and metric.line is not None:
        starts = [s.first_line for s in segments]
        at = bisect.bisect_right(starts, metric.line) - 1
        event = segments[at].event if at >= 0 else metric.seq
        evidence = Evidence(metric.text, metric.line, event, metric.run)
    else:
        evidence = None
    return Figure(
        metric.name,
        metric.value,
        metric.unit,
        dict(metric.labels),
        metric.run,
        metric.seq,
        metric.host,
        evidence,
        metric.invalid,
    )


def from_transcript(text: str | Iterable[str], name: str = "", host: str | None = None) -> Subject:
    """The subject of a pasted terminal session (its text, or its lines read again on each
    iteration: :class:`journal.transcript.TranscriptFile`): one run per command, no
    snapshots; read as the terminal showed it (colour codes and redraws gone, every line
    where it was). Of a long output the detectors see its head and tail, as of a recorded
    one (:class:`journal.reading.window.KeptLines`)."""
    lines: Iterable[str] = lines_of(clean(text)) if isinstance(text, str) else _Clean(text)
    kept: dict[int, KeptLines] = {}

    def keep(command: Command) -> KeptLines:
        kept[command.index] = KeptLines()
        return kept[command.index]

    runs = []
    seen: str | None = host
    for command in commands(lines, stamped_throughout(lines), keep):
        seen = seen or command.host
        parts = kept.pop(command.index).parts()
        first = command.first_output_line
        runs.append(
            Run(
                key=f"cmd-{command.index + 1}",
                step=step_name(command.command),
                host="",
                command=command.command,
                text="".join(part for part, _ in parts),
                segments=_segments(parts, first),
                prompt_line=command.line,
                prompt_text=command.raw,
            )
        )
    # One pasted session is one host: the prompt's, where one names it.
    for run in runs:
        run.host = seen or "?"
    return Subject("transcript", runs, name)


def _segments(parts: list[tuple[str, int]], first: int) -> list[Segment]:
    """Where each kept part of a command's output starts, in its text and in the file."""
    if not parts:
        return [Segment(0, "output", None, first)]
    out, at = [], 0
    for part, before in parts:
        out.append(Segment(at, "output", None, first + before))
        at += len(part)
    return out


class _Clean:
    """Lines read again on each iteration, each as the terminal showed it."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = lines

    def __iter__(self) -> Iterator[str]:
        return (clean(line) for line in self.lines)
