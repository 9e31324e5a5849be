"""`journal run bench` and `journal record metric`: figures, and how each compares."""

from __future__ import annotations

import argparse
import sys

from journal.cli import render
from journal.cli.context import Context, base_url_of
from journal.cli.pitfalls import say_findings
from journal.display import figure
from journal.errors import BadInput
from journal.projections.timeline import MetricView, Timeline
from journal.terminal import visible


def labels_of(values: list[str]) -> dict[str, str]:
    """``--label k=v`` options as a dict; bad input names the option."""
    from journal.benchmarks import parse_label

    labels: dict[str, str] = {}
    for text in values:
        try:
            key, value = parse_label(text)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
        labels[key] = value
    return labels


def run_bench(ctx: Context, args: argparse.Namespace) -> int:
    runbook = ctx.runbook
    spec = runbook.benchmark(args.name)
    labels = labels_of(args.label)
    hosts = runbook.chosen(args.host, args.group, args.all_hosts)
    if not hosts and spec.hosts and not args.all_hosts:
        hosts = [runbook.hosts[h] for h in spec.hosts]
    elif not hosts:
        hosts = list(runbook.hosts.values())

    base_url = base_url_of(args)
    from journal.cli.echo import Echo
    from journal.runs import exit_status
    from journal.service.bench import run_bench as run_bench_service
    from journal.service.steps import ensure_opened

    ensure_opened(ctx.store, runbook)
    notifier = ctx.notifier(base_url)
    runs = run_bench_service(
        ctx.store,
        runbook,
        spec,
        hosts,
        Echo(prefix=len(hosts) > 1),
        labels,
        accept_new_host_key=args.accept_new_host_key,
        notifier=notifier,
    )
    timeline, comparisons = _comparisons(ctx, runbook.name)
    short = render.short_ids(ctx.store)
    for bench in runs:
        print(render.verdict(bench.run, short), file=sys.stderr)
        view = timeline.runs.get(bench.run.run_id)
        for metric in view.metrics if view else []:
            print(f"journal:   {_line(metric, comparisons)}", file=sys.stderr)
        if bench.run.outcome.status != "skipped":  # a skipped run's verdict says why
            for skipped in bench.skipped:
                print(f"journal:   skipped: {visible(skipped)}", file=sys.stderr)

    say_findings(ctx.store, runbook.name, [b.run.run_id for b in runs], notifier)
    if len(runs) < len(hosts):
        return 130
    if runs and all(b.run.outcome.status == "skipped" for b in runs):
        # nothing measured, nothing failed: exit 0, and say so once
        where = ", ".join(b.run.host for b in runs)
        print(
            f"journal: {spec.name} skipped on {where}: it cannot run there (why above); "
            "nothing was measured, nothing failed",
            file=sys.stderr,
        )
    return exit_status([b.run for b in runs])


def record_metric(ctx: Context, args: argparse.Namespace) -> int:
    journal = ctx.journal()
    labels = labels_of(args.label)
    if args.host and ctx.has_runbook() and args.host not in ctx.runbook.hosts:
        from journal.projections.imported import imported_names

        # A host the journal knows from an imported transcript is as good as a runbook's.
        imported = imported_names(ctx.store, journal) if ctx.db_exists() else []
        if args.host not in imported:
            from journal.runbook import suggest

            known = [*ctx.runbook.hosts, *imported]
            raise BadInput(
                f"no host named {args.host!r} in {ctx.runbook.path} nor in a transcript imported "
                f"into {journal}{suggest(args.host, known)}"
            )
    from journal.runbook import NAME
    from journal.service.bench import record_metric as record

    if args.host is not None and not NAME.match(args.host):
        raise BadInput(f"--host {args.host!r} is not a usable host name")

    record(ctx.store, journal, args.name, args.value, args.unit, labels, args.host)
    timeline, comparisons = _comparisons(ctx, journal)
    print(f"recorded in {journal}: {_line(timeline.metrics[-1], comparisons)}")
    return 0


def _comparisons(ctx: Context, journal: str) -> tuple[Timeline, dict[int, str]]:
    """The timeline, and for the last figure of each set (the repeated samples of one
    benchmark run, or one figure) how the set compares with the set before it in its series:
    the one verdict (journal.projections.verdict.judge), median against median."""
    from journal.projections.metrics import all_series, change_steps, changes
    from journal.projections.stored import current_timeline
    from journal.projections.verdict import VERDICT_WORDS

    timeline = current_timeline(ctx.store, journal)
    steps = change_steps(timeline)
    found = {}
    for series in all_series(timeline):
        for change in changes(series, steps):
            v = change.judged
            percent = change.percent
            shown = "" if percent is None else f"{percent:+.1f}% "
            unit = change.unit
            now = (
                f"median {figure(v.after, unit)} of {v.after_count} "
                f"({figure(v.after_low, None)}–{figure(v.after_high, None)}), "
                if v.after_count > 1
                else ""
            )
            was = figure(v.before, unit) + (
                f" (median of {v.before_count}: {figure(v.before_low, None)}–"
                f"{figure(v.before_high, None)})"
                if v.before_count > 1
                else ""
            )
            said = VERDICT_WORDS.get(change.verdict, "")
            found[change.last.seq] = f"{now}{shown}against {was} ({change.between}){said}"
    return timeline, found


def _line(metric: MetricView, comparisons: dict[int, str]) -> str:
    compared = comparisons.get(metric.seq)
    return render.metric_line(metric) + (f": {compared}" if compared else "")
