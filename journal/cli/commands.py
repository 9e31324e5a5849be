"""The commands behind the CLI: each takes the context and its parsed arguments."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import sys
import time
from pathlib import Path

from journal.cli import render
from journal.cli.context import Context
from journal.display import first_line, plural
from journal.errors import BadInput
from journal.events import NoteAdded, StepStarted
from journal.paths import make_folder, output_file, write_file
from journal.projections.progress import progress
from journal.projections.timeline import Timeline
from journal.runbook import TEMPLATE, parse
from journal.service.runs import find_stored_run
from journal.terminal import visible, visible_output

# journal.service (Fabric, SQLAlchemy) is imported inside the commands that run steps, so a
# command refused for bad input answers at once instead of after the heavy imports.


def init(ctx: Context, args: argparse.Namespace) -> int:
    folder = Path(args.dir)
    make_folder(folder, "`journal init`")
    target = folder / "runbook.toml"
    if target.exists():
        raise BadInput(f"{target} already exists; `journal init` never overwrites a runbook")
    from journal.runbook.checker import NAME_LENGTH

    # the folder's name as a usable journal name: ASCII letters, digits, '.', '_', '-', cut to
    # the length both backends keep (a 255-character folder name is a valid folder)
    name = "".join(
        c if (c.isascii() and c.isalnum()) or c in "._-" else "-" for c in folder.resolve().name
    )
    text = TEMPLATE.replace("{name}", name.strip("-._")[:NAME_LENGTH].strip("-._") or "upgrade")
    from journal.service.steps import ensure_opened

    runbook = parse(text, target)
    if not ctx.db_given:
        ctx.db = str(folder / "journal.db")
    store = ctx.store  # a database that cannot be opened leaves no runbook behind
    write_file(target, text, "the runbook")
    ensure_opened(store, runbook)
    from journal.store.engine import shown

    print(f"wrote {target} and created the journal {runbook.name!r} in {shown(ctx.db)}")
    print(f"next: edit {target}, then `journal run plan` (or `journal run step NAME`)")
    return 0


def schedule_of(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """The fleet schedule of ``--parallel N`` / ``--rolling N`` (bad values: bad input)."""
    from journal.service.fleet import Schedule

    parallel, rolling = args.parallel, args.rolling
    for flag, value in (("--parallel", parallel), ("--rolling", rolling)):
        if value is not None and value < 1:
            raise BadInput(
                f"{flag} {value}: give the number of hosts at work at once, 1 or more "
                f"({flag} 1 runs one host at a time)"
            )
    if parallel is not None and rolling is not None:
        raise BadInput(
            f"--parallel {parallel} and --rolling {rolling} cannot be combined: "
            "--rolling N already runs N hosts at a time (and stops at a failure), "
            "--parallel N runs every host, N at a time; pick one"
        )
    return Schedule(parallel, rolling)


def base_url_of(args: argparse.Namespace) -> str | None:
    """``--base-url``, checked (None: the runbook's ``[journal] base_url``, if any)."""
    from journal.cli.export import _base_url

    given = getattr(args, "base_url", None)
    return _base_url(given) if given else None


def run_step(ctx: Context, args: argparse.Namespace) -> int:
    runbook = ctx.runbook
    step = runbook.step(args.name)
    hosts = runbook.hosts_for(step, args.host, args.all_hosts, args.group)
    schedule = schedule_of(args)
    base_url = base_url_of(args)
    from journal.cli.live import echo_for, fleet_report
    from journal.service.steps import ensure_opened, exit_status, run_step_fleet

    ensure_opened(ctx.store, runbook)
    notifier = ctx.notifier(base_url)
    echo = echo_for(len(hosts))
    from journal.service.attach import attach_lost

    attach_lost(
        ctx.store,
        runbook,
        [h.name for h in hosts],
        echo,
        accept_new_host_key=args.accept_new_host_key,
        notifier=notifier,
    )
    fleet = run_step_fleet(
        ctx.store,
        runbook,
        step,
        hosts,
        echo,
        accept_new_host_key=args.accept_new_host_key,
        schedule=schedule,
        detach=args.detach,
        notifier=notifier,
    )
    runs = fleet.results
    for line in fleet_report(fleet, echo, render.verdict, lambda run: not run.outcome.ok):
        print(line, file=sys.stderr)
    say_findings(ctx.store, runbook.name, [run.run_id for run in runs], notifier)
    if not fleet.complete:
        return 130
    return exit_status(runs)


def attach(ctx: Context, args: argparse.Namespace) -> int:
    """`journal attach RUN... | --all`: record the rest of lost runs and how they ended."""
    if bool(args.runs) == bool(args.all):
        raise BadInput("name the runs to attach to (as `journal status` lists them), or --all")
    runbook = ctx.runbook
    from journal.cli.live import echo_for
    from journal.service.attach import attach as attach_runs
    from journal.service.attach import lost_runs
    from journal.service.steps import exit_status

    lost = lost_runs(ctx.store, runbook, args.runs)
    if not lost:
        print("journal: no lost runs to attach to", file=sys.stderr)
        return 0
    echo = echo_for(1)
    notifier = ctx.notifier()
    runs = attach_runs(
        ctx.store,
        runbook,
        lost,
        echo,
        accept_new_host_key=args.accept_new_host_key,
        notifier=notifier,
    )
    for run in runs:
        print(render.verdict(run), file=sys.stderr)
    say_findings(ctx.store, runbook.name, [run.run_id for run in runs], notifier)
    return exit_status(runs)


def _refuse_imported(ctx: Context, names: list[str]) -> None:
    """A host known only from an imported transcript has no address: exit 2 saying so."""
    unknown = [name for name in names if name not in ctx.runbook.hosts]
    if not unknown or not ctx.db_exists():
        return
    from journal.projections.imported import imported_names, probe_refusal

    imported = imported_names(ctx.store, ctx.runbook.name)
    for name in unknown:
        if name in imported:
            raise BadInput(probe_refusal(name, str(ctx.runbook.path)))


def run_probe(ctx: Context, args: argparse.Namespace) -> int:
    runbook = ctx.runbook
    if args.name not in runbook.probes:
        from journal.runbook import suggest

        hint = suggest(args.name, list(runbook.probes))
        raise BadInput(f"{runbook.path}: no probe named {args.name!r}{hint}")
    _refuse_imported(ctx, args.host)
    hosts = runbook.chosen(args.host, args.group, args.all_hosts) or list(runbook.hosts.values())
    schedule = schedule_of(args)
    from journal.cli.live import echo_for, fleet_report
    from journal.service.probe import run_probe as run_probe_service
    from journal.service.steps import ensure_opened

    ensure_opened(ctx.store, runbook)
    echo = echo_for(len(hosts))
    fleet = run_probe_service(
        ctx.store,
        runbook,
        args.name,
        hosts,
        echo,
        accept_new_host_key=args.accept_new_host_key,
        schedule=schedule,
    )
    runs = fleet.results
    # A probe's own lines (its summary, its expectations) were said as it ran: only the
    # fleet's not-run hosts and summary are left to print.
    for line in fleet_report(fleet, echo):
        print(line, file=sys.stderr)
    if args.json:
        import json

        print(json.dumps({run.host: run.result for run in runs}, indent=2, sort_keys=True))
    if not fleet.complete:
        return 130
    if any(run.error and run.error.startswith("could not connect") for run in runs):
        return 255
    return 1 if any(run.error or run.failed for run in runs) else 0


def say_findings(  # type: ignore[no-untyped-def]
    store, journal: str, runs: list[str], notifier=None
) -> None:
    """The run-time verdict: each finding about these runs, one line with id and advice
    (told to ``notifier`` too)."""
    from journal.cli.pitfalls import one_line
    from journal.service.findings import findings_for_runs

    for found in findings_for_runs(store, journal, runs, notifier):
        print(f"journal: {one_line(found)}", file=sys.stderr)


def run_plan(ctx: Context, args: argparse.Namespace) -> int:
    runbook = ctx.runbook
    # Names are checked before the journal is opened: bad input records nothing.
    for name in (args.from_step, args.to_step):
        if name is not None:
            runbook.step(name)
    if args.from_step and args.to_step:
        if runbook.plan.index(args.to_step) < runbook.plan.index(args.from_step):
            raise BadInput(f"--to {args.to_step} comes before --from {args.from_step} in the plan")
    chosen = runbook.chosen(args.host, args.group, args.all_hosts)
    schedule = schedule_of(args)
    base_url = base_url_of(args)
    from journal.cli.live import echo_for
    from journal.cli.plan import run_plan as run_plan_service
    from journal.service.attach import attach_lost
    from journal.service.steps import ensure_opened

    ensure_opened(ctx.store, runbook)
    notifier = ctx.notifier(base_url)
    attach_lost(
        ctx.store,
        runbook,
        [h.name for h in chosen] or list(runbook.hosts),
        echo_for(1),
        accept_new_host_key=args.accept_new_host_key,
        notifier=notifier,
    )
    return run_plan_service(
        ctx.store,
        runbook,
        from_step=args.from_step,
        to_step=args.to_step,
        chosen=args.host,
        groups=args.group,
        all_hosts=args.all_hosts,
        accept_new_host_key=args.accept_new_host_key,
        schedule=schedule,
        echo_for=echo_for,
        detach=args.detach,
        notifier=notifier,
    )


def note(ctx: Context, args: argparse.Namespace) -> int:
    journal = ctx.journal()
    if not args.text.strip():
        raise BadInput("the note is empty")
    if args.host and ctx.has_runbook():
        ctx.runbook.host(args.host)
    author = args.author or f"{getpass.getuser()}@{socket.gethostname()}"
    ctx.store.append(
        journal, [NoteAdded(text=args.text, author=author, tags=args.tag, host_name=args.host)]
    )
    print(f"noted in {journal}")
    return 0


def _timeline(ctx: Context, journal: str):  # type: ignore[no-untyped-def]
    from journal.projections.stored import current_timeline

    return current_timeline(ctx.store, journal)


def _judged(ctx: Context, journal: str, colour: bool = False):  # type: ignore[no-untyped-def]
    """The journal's timeline, its findings (both from their stored projections, brought up
    to date) and its story."""
    from journal.projections.story import story
    from journal.service.findings import journal_findings

    found, timeline = journal_findings(ctx.store, journal)
    return timeline, render.Judged(found, colour=colour), story(timeline, found)


def _colour() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _story_text(told) -> str:  # type: ignore[no-untyped-def]
    from journal.projections.story import lines

    return visible("\n".join(["story:", *(f"  {line}" for line in lines(told))]))


def _dump(data: object) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def status(ctx: Context, args: argparse.Namespace) -> int:
    """Plan progress with the story at the top. Exits 1 when the latest run of a plan step on
    some host failed (or timed out), or an error finding is open; else 0."""
    from journal.projections.imported import as_dict, imported_hosts, status_lines
    from journal.projections.story import story
    from journal.projections.unread import of_run
    from journal.service.findings import open_findings, run_findings, tally

    journal = ctx.read_journal()
    timeline = _timeline(ctx, journal)
    if ctx.has_runbook() and ctx.runbook.name == journal:
        timeline.plan = ctx.runbook.plan
        timeline.hosts = {n: h.ssh for n, h in ctx.runbook.hosts.items()}
    imported = imported_hosts(timeline)  # known only from imports: no plan to be pending in
    hosts = [host for host in progress(timeline) if host.host not in imported]
    failed = [
        state.last
        for host in hosts
        for state in host.steps
        if state.last is not None and state.last.status in STATUS_FAILS
    ]
    # Only the findings shown are read: those of each step's latest run, the open errors,
    # and the counts of the rest.
    latest = [state.last.run_id for host in hosts for state in host.steps if state.last]
    judged = render.Judged(run_findings(ctx.store, journal, latest), colour=_colour())
    told = story(timeline, tally(ctx.store, journal))
    open_errors = open_findings(ctx.store, journal, "error")
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
                "exit_status": code,
            }
        )
    else:
        print(_story_text(told))
        print(render.progress_text(journal, timeline.plan, hosts, timeline, judged))
        for host in imported.values():
            print(visible("\n".join(status_lines(host))))
        for found in open_errors:
            where = f"{found.step} on {found.host} (run {found.run})" if found.run else found.host
            print(visible(f"open error {found.id}: {where or journal}: {first_line(found.title)}"))
        if code:
            why = [plural(len(failed), "failed step run")] if failed else []
            why += [plural(len(open_errors), "open error finding")] if open_errors else []
            print(
                f"journal: status 1: {' and '.join(why)} (`journal show RUN` tells more)",
                file=sys.stderr,
            )
    lost = [v for v in timeline.runs.values() if v.status == "lost" and not v.imported]
    if lost:
        runs = ", ".join(f"{v.step} on {v.host} (run {v.run_id})" for v in lost[:5])
        more = f" and {len(lost) - 5} more" if len(lost) > 5 else ""
        print(
            f"journal: lost (their recorder is gone; the commands may still run): {runs}{more}; "
            "`journal attach --all` records how they ended",
            file=sys.stderr,
        )
    return code


#: The statuses of a plan step's latest run that make `journal status` exit 1.
STATUS_FAILS = frozenset({"failed", "timed-out"})


def log(ctx: Context, args: argparse.Namespace) -> int:
    journal = ctx.read_journal()
    store = ctx.store
    timeline, judged, told = _judged(ctx, journal, colour=_colour())
    _known_filters(ctx, journal, timeline, args.host, args.step)
    keep = render.Filter(args.host, args.step, args.failed)
    if args.format == "json":
        if args.follow or args.output:
            raise BadInput("--format json lists the timeline; it cannot --follow or --output")
        _dump(
            {
                "journal": journal,
                "story": told.as_dict(),
                "items": [render.item_json(i, judged) for i in timeline.items if keep.item(i)],
            }
        )
        return 0
    # Output is printed as it was recorded; to a terminal with only its colours obeyed (a
    # title, a cleared screen, a cursor move are shown as escapes, not done).
    shown = visible_output if sys.stdout.isatty() else bytes
    if args.output:
        for run in timeline.step_runs():
            if not keep.run(run):
                continue
            print(render.run_line(run, command=False, judged=judged))
            sys.stdout.flush()
            _write_output(store, journal, run.run_id, shown)
    else:
        print(_story_text(told))
        print(render.timeline_text(timeline, judged, keep))
    if not args.follow:
        return 0
    last = max([r.seq for r in timeline.runs.values()] + [0])
    for rec in store.read(journal, after=last):
        last = rec.seq
    runs = {run.run_id: (run.step, run.host) for run in timeline.runs.values()}
    print("-- following; Ctrl-C to stop --", flush=True)
    try:
        while True:
            for rec in store.read(journal, after=last):
                last = rec.seq
                if isinstance(rec.event, StepStarted):
                    runs[rec.event.run] = (rec.event.step, rec.event.host_name)
                if keep.follows(rec.event, runs):
                    sys.stdout.buffer.write(shown(render.event_text(rec, runs)))
            sys.stdout.flush()
            time.sleep(0.2)
    except KeyboardInterrupt:
        return 0


def _known_filters(
    ctx: Context, journal: str, timeline: Timeline, host: str | None, step: str | None
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
        hosts.update(dict.fromkeys(getattr(i, "host", None) for i in timeline.items))
        hosts.update(dict.fromkeys(timeline.latest_probes))
        known = [h for h in hosts if h]
        if host not in known:
            raise BadInput(
                f"log --host {shown(host)}: journal {journal} has no host by that name"
                f"{suggest(host, known)}; nothing was shown"
            )
    if step is not None:
        steps = dict.fromkeys([*timeline.plan, *(runbook.plan if runbook else [])])
        steps.update(dict.fromkeys([*(runbook.benchmarks if runbook else [])]))
        steps.update(dict.fromkeys(run.step for run in timeline.runs.values()))
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
        data = render.decode(chunk)
        if shown is bytes:
            sys.stdout.buffer.write(data)
            continue
        data = held + data
        cut = data.rfind(b"\n") + 1
        held = data[cut:]
        sys.stdout.buffer.write(shown(data[:cut]))
    sys.stdout.buffer.write(shown(held))
    sys.stdout.flush()


#: The lines of output `journal show` prints without --output.
TAIL = 40
#: The end of a line that much longer `journal show` prints (--output prints it whole).
TAIL_LINE_BYTES = 16_384


def _tail(store, journal: str, run: str, count: int = TAIL) -> tuple[list[bytes], int]:  # type: ignore[no-untyped-def]
    """The last ``count`` lines of a run's output, and how many lines it has in all, read
    chunk by chunk; a line longer than :data:`TAIL_LINE_BYTES` keeps its end, after a mark
    saying how much came before (a 200 MB line is never held, nor copied chunk after chunk)."""
    from collections import deque

    from journal.output import chunks_of

    kept: deque[bytes] = deque(maxlen=count)
    partial = b""
    dropped = 0  # bytes of the current line no longer held

    def shown(line: bytes, before: int) -> bytes:
        if len(line) > TAIL_LINE_BYTES:
            before, line = before + len(line) - TAIL_LINE_BYTES, line[-TAIL_LINE_BYTES:]
        return f"[… {before:,} bytes] ".encode() + line if before else line

    total = 0
    for chunk in chunks_of(store.read(journal, run_id=run, types=["OutputChunk"])):
        parts = (partial + render.decode(chunk)).split(b"\n")
        partial = parts.pop()
        if parts:
            total += len(parts)
            kept.extend(shown(line, dropped if i == 0 else 0) for i, line in enumerate(parts))
            dropped = 0
        if len(partial) > TAIL_LINE_BYTES:
            dropped += len(partial) - TAIL_LINE_BYTES
            partial = partial[-TAIL_LINE_BYTES:]
    if partial or dropped:
        kept.append(shown(partial, dropped))
        total += 1
    return list(kept), total


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
            raise BadInput("--format json gives the output's tail; drop --output")
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
    print(render.show_text(run, judged))
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
        else f"output (last {len(lines)} of {total} lines; --output for all)"
    )
    print(f"{head}:", flush=True)
    sys.stdout.buffer.write(shown(b"\n".join(lines) + b"\n"))
    sys.stdout.flush()
    return 0


def _witness(ctx: Context, location: str):  # type: ignore[no-untyped-def]
    from journal.service.anchor import witness_at

    return witness_at(location, ctx.runbook if ctx.has_runbook() else None)


def verify(ctx: Context, args: argparse.Namespace) -> int:
    ctx.require_db()
    from journal.service import anchor
    from journal.store.engine import shown

    witness = _witness(ctx, args.witness) if args.witness else None
    anchors = anchor.read(witness) if witness else []
    report = ctx.store.verify(anchors, str(witness or ""))
    if report.ok:
        seq, digest = report.head
        print(f"{shown(ctx.db)}: {report.checked} events, hash chain intact, schema at head")
        print(f"head: event {seq}, hash {digest}")
        if anchors:
            newest = max(anchors, key=lambda a: a.seq)
            verb = "holds" if len(anchors) == 1 else "hold"
            print(
                f"{plural(len(anchors), 'anchor')} in {witness} {verb} (the newest: event "
                f"{newest.seq}, anchored {newest.at})"
            )
        return 0
    for problem in report.problems:
        print(f"journal verify: {problem}", file=sys.stderr)
    print(f"{shown(ctx.db)}: NOT intact ({report.checked} events read)", file=sys.stderr)
    return 1


def anchor(ctx: Context, args: argparse.Namespace) -> int:
    """Append the chain's head to a witness (or print it): what `verify --witness` holds the
    chain against later."""
    ctx.require_db()
    from journal.service import anchor as witnesses
    from journal.store.engine import shown

    witness = _witness(ctx, args.witness) if args.witness else None
    head = ctx.store.anchor(shown(ctx.db))
    if head is None:
        raise BadInput(f"{shown(ctx.db)} holds no event yet: there is no head to anchor")
    if witness is None:
        print(head.format())
        return 0
    witnesses.append(witness, head)
    print(f"anchored event {head.seq} (hash {head.hash[:16]}…) in {witness}")
    return 0


def rebuild(ctx: Context, args: argparse.Namespace) -> int:
    from journal.pitfalls.ledger import Ledger
    from journal.store.cache import ProjectionCache

    ctx.require_db()
    started = time.perf_counter()
    total = 0
    # The stored projections are a cache: dropped, then folded again from the events.
    ProjectionCache(ctx.store.engine).drop()
    for journal in ctx.store.journals():
        timeline = _timeline(ctx, journal)
        total += timeline.events
        counts: dict[str, int] = {}
        for run in timeline.step_runs():
            counts[run.status] = counts.get(run.status, 0) + 1
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no step runs"
        told = Ledger(ctx.store, journal).tally()
        opened = sum(told.open.values())
        print(
            f"{journal}: {timeline.events} events replayed; step runs: {summary}; "
            f"findings: {opened + told.acknowledged + told.resolved} ({opened} open)"
        )
    print(f"replayed {total} events in {time.perf_counter() - started:.2f} s")
    return 0


def demo(ctx: Context, args: argparse.Namespace) -> int:
    from journal.demo.run import run_demo

    return run_demo(Path(args.dir), ctx)


def export_cast(ctx: Context, args: argparse.Namespace) -> int:
    from journal.export.cast import to_cast

    output = output_file(Path(args.output), "the asciicast")
    journal = ctx.read_journal()
    run, _ = find_stored_run(ctx.store, journal, args.run_id)
    lines = to_cast(ctx.store.read(journal, run_id=run, types=["StepStarted", "OutputChunk"]))
    write_file(output, "\n".join(lines) + "\n", "the asciicast")
    print(f"wrote {output}: {len(lines) - 1} output events of run {run}")
    return 0
