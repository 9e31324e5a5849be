"""Reading the record: `journal status`, `log`, `show` and `note` (docs/cli-reading.md), with
what only they print: a run in full (`show`) and each event as `log --follow` prints it."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import sys
import time
from typing import TYPE_CHECKING

from journal.cli import render
from journal.cli.context import Context
from journal.cli.parser import LOG_LIMIT
from journal.display import (
    ansible_text,
    figure,
    first_line,
    plural,
    rollback_text,
    seconds,
    when,
)
from journal.errors import BadInput
from journal.events import MetricRecorded, NoteAdded, OutputChunk, StepFinished, StepStarted
from journal.mapper import Recorded
from journal.output import decode
from journal.projections.timeline import StepRunView, Timeline

if TYPE_CHECKING:
    from journal.projections.digest import Digest
from journal.projections.unread import snapshots_of
from journal.runs import OWN_FAILURES
from journal.service.runs import find_stored_run
from journal.terminal import visible, visible_output


def note(ctx: Context, args: argparse.Namespace) -> int:
    journal = ctx.journal()
    if not args.text.strip():
        raise BadInput("the note is empty")
    if args.host and ctx.has_runbook():
        ctx.runbook.host(args.host)
    author = args.author or f"{getpass.getuser()}@{socket.gethostname()}"
    ctx.open_journal(journal)
    ctx.store.append(
        journal, [NoteAdded(text=args.text, author=author, tags=args.tag, host_name=args.host)]
    )
    print(f"noted in {journal}")
    return 0


def _colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _story_text(told) -> str:  # type: ignore[no-untyped-def]
    from journal.service.story import lines

    return visible("\n".join(["story:", *(f"  {line}" for line in lines(told))]))


def _dump(data: object) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def status(ctx: Context, args: argparse.Namespace) -> int:
    """Plan progress with the story at the top. Exits 1 when the latest run of a plan step on
    some host failed (or timed out), or an error finding is open; else 0."""
    from journal.projections.digest import digest
    from journal.projections.imported import as_dict, status_lines
    from journal.projections.rollouts import rollouts
    from journal.projections.unread import of_run
    from journal.service.findings import open_findings, run_findings, tally
    from journal.service.story import story

    journal = ctx.read_journal()

    def read(timeline: Digest):  # type: ignore[no-untyped-def]
        # the stored timeline's index: the latest run of each step on each host, the story's
        # readings and the runs not ended, never every item
        if ctx.has_runbook() and ctx.runbook.name == journal:
            timeline.plan = ctx.runbook.plan
            timeline.hosts = {n: h.ssh for n, h in ctx.runbook.hosts.items()}
        imported = timeline.imported_hosts()  # known only from imports: no plan to be pending in
        hosts = [host for host in timeline.progress() if host.host not in imported]
        told = story(timeline, tally(ctx.store, journal))
        return timeline, imported, hosts, told, timeline.lost()

    timeline, imported, hosts, told, lost = digest(ctx.store, journal, read)
    failed = [
        state.last
        for host in hosts
        for state in host.steps
        if state.last is not None and state.last.status in OWN_FAILURES
    ]
    # Only the findings shown are read: those of each step's latest run, the open errors,
    # and the counts of the rest.
    latest = [state.last.run_id for host in hosts for state in host.steps if state.last]
    short = render.short_ids(ctx.store)
    judged = render.Judged(run_findings(ctx.store, journal, latest), colour=_colour(), short=short)
    open_errors = open_findings(ctx.store, journal, "error")
    rollout = rollouts(ctx.store, journal).latest()
    code = 1 if failed or open_errors else 0
    if args.format == "json":
        _dump(
            {
                "journal": journal,
                "story": told.as_dict(),
                "plan": timeline.plan,
                "hosts": [
                    {
                        "host": host.host,
                        "target": host.target,
                        "done": host.done,
                        "steps": [
                            {
                                "step": state.step,
                                "status": judged.status(state.last) if state.last else "pending",
                                "run": state.last.run_id if state.last else None,
                                "open_errors": judged.errors(state.last) if state.last else [],
                                # snapshots and probes of that run that could not be read
                                "unread": [u.to_dict() for u in of_run(state.last)]
                                if state.last
                                else [],
                            }
                            for state in host.steps
                        ],
                    }
                    for host in hosts
                ],
                "imported_hosts": [as_dict(host) for host in imported.values()],
                "failed": [{"step": r.step, "host": r.host, "run": r.run_id} for r in failed],
                "open_errors": [f.to_dict() for f in open_errors],
                "rollout": rollout.as_dict() if rollout is not None else None,
                "exit_status": code,
            }
        )
    else:
        short.know(latest + [f.run for f in open_errors if f.run])
        print(_story_text(told))
        print(render.progress_text(journal, timeline.plan, hosts, timeline, judged))
        for host in imported.values():
            print(visible("\n".join(status_lines(host))))
        if rollout is not None:
            print(visible(render.rollout_line(rollout, short)))
        for found in open_errors:
            where = (
                f"{found.step} on {found.host} (run {short(found.run)})"
                if found.run
                else found.host
            )
            print(visible(f"open error {found.id}: {where or journal}: {first_line(found.title)}"))
        if code:
            why = [plural(len(failed), "failed step run")] if failed else []
            why += [plural(len(open_errors), "open error finding")] if open_errors else []
            print(
                f"journal: status 1: {' and '.join(why)} (`journal show RUN` tells more)",
                file=sys.stderr,
            )
    if lost:
        runs = ", ".join(f"{v.step} on {v.host} (run {short(v.run_id)})" for v in lost[:5])
        more = f" and {len(lost) - 5} more" if len(lost) > 5 else ""
        print(
            f"journal: lost (their recorder is gone; the commands may still run): {runs}{more}; "
            "`journal attach --all` records how they ended",
            file=sys.stderr,
        )
    return code


def _since_seq(ctx: Context, journal: str, text: str | None) -> int:
    """The first event of the journal recorded at or after ``--since`` (0: none given)."""
    from journal.projections.period import since_moment

    if text is None:
        return 0
    try:
        moment = since_moment(text)
    except ValueError as exc:
        raise BadInput(f"--since: {exc}") from None
    return max(ctx.store.seq_since(journal, moment), 1)


def log(ctx: Context, args: argparse.Namespace) -> int:
    """The story, then the newest items of the timeline (``--limit``, ``--since``), newest
    first; read from the stored timeline's index (:mod:`journal.projections.digest`)."""
    from journal.projections.digest import digest
    from journal.service.findings import run_findings, tally
    from journal.service.story import story

    journal = ctx.read_journal()
    store = ctx.store
    keep = render.Filter(args.host, args.step, args.failed)
    if args.limit is not None and args.limit < 0:
        raise BadInput(f"--limit {args.limit}: give a number of items (0: all of them)")
    limit = LOG_LIMIT if args.limit is None else args.limit
    since = _since_seq(ctx, journal, args.since)

    def read(found: Digest):  # type: ignore[no-untyped-def]
        _known_filters(ctx, journal, found, args.host, args.step)
        items, total = found.page(keep, limit, since)
        return found, items, total, found.run_count(keep), story(found, tally(store, journal))

    found, items, total, run_count, told = digest(store, journal, read)
    page = Timeline(journal, plan=found.plan, hosts=found.hosts, items=items)
    page.runs = {i.run_id: i for i in items if isinstance(i, StepRunView)}
    page.events, page.last_ts = found.events, found.last_ts
    short = render.short_ids(store)
    judged = render.Judged(
        run_findings(store, journal, list(page.runs)), colour=_colour(), short=short
    )
    if args.format == "json":
        if args.follow or args.output:
            raise BadInput("--format json lists the timeline; it cannot --follow or --full-output")
        _dump(
            {
                "journal": journal,
                "story": told.as_dict(),
                "items": [render.item_json(i, judged) for i in reversed(items)],
                "total": total,
            }
        )
        return 0
    short.know(list(page.runs))
    timeline = page
    # Output is printed as it was recorded; to a terminal with only its colours obeyed (a
    # title, a cleared screen, a cursor move are shown as escapes, not done).
    shown = visible_output if sys.stdout.isatty() else bytes
    if args.output:
        for run in reversed(timeline.step_runs()):
            if not keep.run(run):
                continue
            print(render.run_line(run, command=False, judged=judged))
            sys.stdout.flush()
            _write_output(store, journal, run.run_id, shown)
    else:
        print(_story_text(told))
        print(render.timeline_text(timeline, judged, keep, runs=run_count, total=total))
    if not args.follow:
        return 0
    last = found.head.seq if found.head else 0
    runs = {run.run_id: (run.step, run.host) for run in timeline.runs.values()}
    print("-- following; Ctrl-C to stop --", flush=True)
    try:
        while True:
            for rec in store.read(journal, after=last):
                last = rec.seq
                if isinstance(rec.event, StepStarted):
                    runs[rec.event.run] = (rec.event.step, rec.event.host_name)
                elif rec.event.run_id and rec.event.run_id not in runs:
                    known = found.step_and_host(rec.event.run_id)  # a run begun before
                    if known is not None:
                        runs[rec.event.run_id] = known
                if keep.follows(rec.event, runs):
                    sys.stdout.buffer.write(shown(event_text(rec, runs)))
            sys.stdout.flush()
            time.sleep(0.2)
    except KeyboardInterrupt:
        return 0


def _known_filters(
    ctx: Context, journal: str, timeline: Digest, host: str | None, step: str | None
) -> None:
    """Bad input for `log --host H` or `--step S` naming what the journal (and its runbook)
    does not know: a typo would otherwise print an empty timeline and exit 0."""
    from journal.errors import shown
    from journal.runbook import suggest

    if host is None and step is None:
        return
    runbook = ctx.runbook if ctx.has_runbook() and ctx.runbook.name == journal else None
    if host is not None:
        hosts = dict.fromkeys([*timeline.hosts, *(runbook.hosts if runbook else [])])
        hosts.update(dict.fromkeys([*timeline.story_hosts(), *timeline.latest_probes]))
        known = [h for h in hosts if h]
        if host not in known and not timeline.holds_host(host):
            raise BadInput(
                f"log --host {shown(host)}: journal {journal} has no host by that name"
                f"{suggest(host, known)}; nothing was shown"
            )
    if step is not None:
        steps = dict.fromkeys([*timeline.plan, *(runbook.plan if runbook else [])])
        steps.update(dict.fromkeys([*(runbook.benchmarks if runbook else [])]))
        steps.update(dict.fromkeys(timeline.steps_known()))
        known = [s for s in steps if s]
        if step not in known:
            raise BadInput(
                f"log --step {shown(step)}: journal {journal} has no step by that name"
                f"{suggest(step, known)}; nothing was shown"
            )


def _write_output(store, journal: str, run: str, shown) -> None:  # type: ignore[no-untyped-def]
    """A run's recorded output, chunk by chunk as it is read (never all of it at once)."""
    from journal.output import chunks_of

    held = b""  # to a terminal, whole lines: an escape cut between two chunks stays one
    for chunk in chunks_of(store.read(journal, run_id=run, types=["OutputChunk"])):
        data = decode(chunk)
        if shown is bytes:
            sys.stdout.buffer.write(data)
            continue
        data = held + data
        cut = data.rfind(b"\n") + 1
        held = data[cut:]
        sys.stdout.buffer.write(shown(data[:cut]))
    sys.stdout.buffer.write(shown(held))
    sys.stdout.flush()


#: The lines of output `journal show` prints without --full-output.
TAIL = 40

#: The end of a line that much longer `journal show` prints (--full-output prints it whole).
TAIL_LINE_BYTES = 16_384


def _tail(store, journal: str, run: str, count: int = TAIL) -> tuple[list[bytes], int]:  # type: ignore[no-untyped-def]
    """The last ``count`` lines of a run's output, and how many lines it has in all, read
    chunk by chunk (:func:`journal.output.tail`); a line longer than :data:`TAIL_LINE_BYTES`
    keeps its end, after a mark saying how much came before (a 200 MB line is never held)."""
    from journal.output import tail

    records = store.read(journal, run_id=run, types=["OutputChunk"])
    found = tail(records, count, limit=TAIL_LINE_BYTES)
    return [
        f"[… {line.cut:,} bytes] ".encode() + line.text if line.cut else line.text
        for line in found.lines
    ], found.total


def show(ctx: Context, args: argparse.Namespace) -> int:
    """`journal show RUN`: one run in full, its findings with advice and its output's tail."""
    from journal.cli.pitfalls import finding_text
    from journal.projections.stored import one_run
    from journal.service.findings import run_findings

    journal = ctx.read_journal()
    store = ctx.store
    run = one_run(store, journal, *find_stored_run(store, journal, args.run))
    judged = render.Judged(run_findings(store, journal, [run.run_id]), colour=_colour())
    if args.format == "json":
        if args.output:
            raise BadInput("--format json gives the output's tail; drop --full-output")
        lines, total = _tail(store, journal, run.run_id)
        _dump(
            {
                "journal": journal,
                **render.run_json(run, judged),
                "output_lines": total,
                "output_tail": [line.decode("utf-8", "replace") for line in lines],
            }
        )
        return 0
    print(show_text(run, judged))
    for found in judged.of(run):
        print(finding_text(found, with_key=True))
    shown = visible_output if sys.stdout.isatty() else bytes
    sys.stdout.flush()
    if args.output:
        print("output:", flush=True)
        _write_output(store, journal, run.run_id, shown)
        return 0
    lines, total = _tail(store, journal, run.run_id)
    if not total:
        print("output: none recorded")
        return 0
    head = (
        "output"
        if total <= len(lines)
        else f"output (last {len(lines)} of {total} lines; --full-output for all)"
    )
    print(f"{head}:", flush=True)
    sys.stdout.buffer.write(shown(b"\n".join(lines) + b"\n"))
    sys.stdout.flush()
    return 0


def show_text(run: StepRunView, judged: render.Judged) -> str:
    """`journal show RUN`: the run in full (its findings and output follow)."""
    status = judged.status(run)
    lines = [
        f"run {run.run_id}: {run.step} on {run.host}" + (f" ({run.target})" if run.target else ""),
        f"  command:  {run.command}",
        f"  status:   {status}"
        + (" (succeeded, but changed nothing it was asked to)" if status == "no change" else "")
        + (" (could not run on this host, said why: no failure)" if status == "skipped" else "")
        + (" (never launched: nothing of it ran on the host)" if status == "not started" else ""),
        f"  exit:     {'-' if run.exit_code is None else run.exit_code}",
        f"  started:  {when(run.started)}",
        f"  finished: {when(run.finished) if run.finished else '-'}",
        f"  duration: {_duration(run)}",
        f"  output:   {plural(run.lines.get('stdout', 0), 'line')} out, "
        f"{plural(run.lines.get('stderr', 0), 'line')} err",
    ]
    if run.reason:
        lines.append(f"  reason:   {run.reason}")
    if run.rollback:
        lines.append(f"  {rollback_text(run.rollback)}")
    if run.imported:
        lines.append("  imported from a transcript")
    if run.interactive:
        lines.append("  typed in `journal shell`")
    if run.ansible:
        lines.append(f"  {ansible_text(run.ansible)}")
    errors = judged.errors(run)
    if errors:
        lines.append(f"  open error: {', '.join(errors)}")
    lines.extend(f"  {line}" for line in render.run_details(run))
    if run.diff is None and not snapshots_of(run):
        lines.append("  packages: no snapshots to compare")
    text = visible("\n".join(lines))
    if judged.colour and status == "no change":
        text = text.replace("status:   no change", f"status:   {judged.shown(run)}", 1)
    return text


def _duration(run: StepRunView) -> str:
    """A run's duration; ``untimed`` for an imported command its transcript gave no time for."""
    if run.duration is not None:
        return seconds(run.duration)
    return "untimed" if run.imported and run.finished else "-"


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
