"""`journal rollback --to RUN|STEP|before:STEP`: plan (and with --dry-run only print) the way
back to a recorded package set, then run it as a recorded step run on each host."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from journal.cli.context import Context, base_url_of, schedule_of
from journal.cli.pitfalls import say_findings
from journal.display import plural
from journal.errors import BadInput
from journal.terminal import visible


def rollback(ctx: Context, args: argparse.Namespace) -> int:
    if args.format == "json" and not args.dry_run:
        raise BadInput(
            "--format json prints the plan of a dry run: add --dry-run (a rollback that runs "
            "prints its runs as `journal run step` does)"
        )
    runbook = ctx.runbook
    ctx.require_db()

    schedule = schedule_of(args)
    base_url = base_url_of(args)
    hosts = runbook.chosen(args.host, args.group, args.all_hosts)
    from journal.service import rollback as service

    if args.dry_run:
        plans = service.plan(
            ctx.store, runbook, args.to, hosts, accept_new_host_key=args.accept_new_host_key
        )
        if args.format == "json":
            doc = {"journal": runbook.name, "to": args.to, "hosts": [p.to_dict() for p in plans]}
            print(json.dumps(doc, indent=2, ensure_ascii=False))
        else:
            for plan in plans:
                print(visible("\n".join(plan_lines(plan))))
            print("journal: dry run: nothing was run or recorded", file=sys.stderr)
        return 0
    from journal.cli.live import echo_for, fleet_report
    from journal.cli.render import verdict
    from journal.runs import exit_status
    from journal.service.attach import attach_lost
    from journal.service.findings import findings_for_runs
    from journal.service.steps import ensure_opened

    # the targets are checked first (bad input records nothing); then a run on these hosts
    # whose recorder was lost (a rollback whose journal was killed) is recorded to its end,
    # so that the plan starts from what the env holds once that command is over
    named = service.target_hosts(ctx.store, runbook, args.to, hosts)
    attach_lost(
        ctx.store, runbook, named, echo_for(1), accept_new_host_key=args.accept_new_host_key
    )
    accepted: list[Any] = []
    plans = service.plan(
        ctx.store,
        runbook,
        args.to,
        hosts,
        accept_new_host_key=args.accept_new_host_key,
        record=accepted.extend,
    )
    ensure_opened(ctx.store, runbook)
    if accepted:
        ctx.store.append(runbook.name, accepted)
    for plan in plans:
        print(visible("\n".join(plan_lines(plan, command=False))), file=sys.stderr)
    echo = echo_for(len(plans))
    notifier = ctx.notifier(base_url)
    fleet = service.run_rollback(
        ctx.store,
        runbook,
        plans,
        echo,
        accept_new_host_key=args.accept_new_host_key,
        schedule=schedule,
        detach=args.detach,
        notifier=notifier,
    )
    runs = fleet.results
    for line in fleet_report(fleet, echo, verdict, lambda run: not run.outcome.ok):
        print(line, file=sys.stderr)
    ids = [run.run_id for run in runs]
    say_findings(ctx.store, runbook.name, ids, notifier)
    if not fleet.complete:
        return 130
    code = exit_status(runs)
    if 1 < code < 124:
        return 1  # the command failed (uv's 2 is no bad input of journal's): not reached
    if code:
        return code  # 124 timed out, 130 interrupted, 255 unreachable, 128 + a signal
    incomplete = [f for f in findings_for_runs(ctx.store, runbook.name, ids) if f.id == ID]
    return 1 if incomplete else 0


#: The detector whose open finding makes a rollback exit 1.
ID = "rollback-incomplete"


def plan_lines(plan: Any, command: bool = True) -> list[str]:
    """A host's rollback plan as the terminal shows it."""
    target = plan.target
    tool = f"uv ({plan.uv})" if plan.installer == "uv" else "pip"
    lines = [
        f"rollback of {plan.host} to {target.to}: {target.describe()}, "
        f"{plural(len(target.entries), 'package')}",
        f"  with {tool}, in {plan.python}",
    ]
    if plan.empty:
        lines.append("  nothing to change: the env already holds the target set")
    if plan.install:
        lines.append(f"  install {len(plan.install)}:")
        for item in plan.install:
            now = item.current or "not installed"
            lines.append(f"    {item.pin}  (now {now}) from {item.source.describe()}")
            for tried in item.tried:
                lines.append(f"      (not found in {tried.describe()})")
    if plan.remove:
        lines.append(f"  remove {len(plan.remove)}:")
        lines += [f"    {name} {version}" for name, version in plan.remove]
    for name, version in plan.kept:
        lines.append(f"  keep {name} {version}: not in the target, but {KEPT}")
    if plan.unchanged:
        shown = ", ".join(plan.unchanged[:8])
        more = f" and {len(plan.unchanged) - 8} more" if len(plan.unchanged) > 8 else ""
        lines.append(f"  unchanged {len(plan.unchanged)}: {shown}{more}")
    for name, version, installer in plan.foreign:
        lines.append(
            f"  note: {installer} installed {name} {version}; the rollback replaces it with "
            f"{plan.installer}'s ({installer} will still list what it no longer holds)"
        )
    if command:
        lines.append(f"  command: {plan.command()}")
    return lines


KEPT = "a rollback never removes pip (it is how an env without uv rolls back)"
