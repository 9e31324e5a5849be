"""Running an upgrade: `journal init`, `run step`, `run probe`, `run plan`, `attach` and
`demo` (docs/cli-running.md). Each command takes the context and its parsed arguments."""

from __future__ import annotations

import argparse
import shlex
import sys
from functools import partial
from pathlib import Path

from journal.cli import render
from journal.cli.context import Context, base_url_of, schedule_of
from journal.cli.pitfalls import say_findings
from journal.errors import BadInput
from journal.paths import make_folder, write_file
from journal.runbook import TEMPLATE, parse

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
    runbook = parse(text, target)
    if not ctx.db_given:
        ctx.db = str(folder / "journal.db")
    ctx.store  # noqa: B018  # the database made: one that cannot be, leaves no runbook behind
    write_file(target, text, "the runbook")
    from journal.store.engine import shown

    # the journal itself opens with the first thing recorded, under the name the runbook has
    # then: renaming it first leaves no empty journal behind
    print(f"wrote {target} and created {shown(ctx.db)}")
    print(
        f"the journal is {runbook.name!r} ([journal] name in the runbook; it opens with the "
        "first record)"
    )
    print(f"next: edit {target}, then `journal run plan` (or `journal run step NAME`)")
    return 0


def run_step(ctx: Context, args: argparse.Namespace) -> int:
    runbook = ctx.runbook
    step = runbook.step(args.name)
    hosts = runbook.hosts_for(step, args.host, args.all_hosts, args.group)
    schedule = schedule_of(args)
    if args.gate or args.resume or args.on_gate_fail != "stop":
        # a gated rollout of one step: the plan's rollout with only that step, always run
        args.from_step = args.to_step = step.name
        return run_plan(ctx, args)
    base_url = base_url_of(args)
    from journal.cli.live import echo_for, fleet_report
    from journal.runs import exit_status
    from journal.service.steps import ensure_opened, run_step_fleet

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
    shown = partial(render.verdict, short=render.short_ids(ctx.store))
    for line in fleet_report(fleet, echo, shown, lambda run: not run.outcome.ok):
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
    from journal.runs import exit_status
    from journal.service.attach import attach as attach_runs
    from journal.service.attach import lost_runs

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
    short = render.short_ids(ctx.store)
    for run in runs:
        print(render.verdict(run, short), file=sys.stderr)
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
    gate = _gate_of(runbook, args, schedule)
    if gate is not None and gate.resume:
        from dataclasses import replace

        from journal.service.rollout import resumable

        # looked up (and refused) before anything is recorded, handed on as found
        gate = replace(gate, resumed=resumable(ctx.store, runbook))
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
        gate=gate,
        resume=_resume_command(args, gate),
    )


def _resume_command(args: argparse.Namespace, gate) -> str:  # type: ignore[no-untyped-def]
    """The command that goes on with a rollout stopped here (as typed, with --resume)."""
    what = f"step {shlex.quote(args.name)}" if getattr(args, "name", None) else "plan"
    name = gate.gate.name if gate is not None else "G"
    rolling = args.rolling or "N"
    return f"journal run {what} --rolling {rolling} --gate {shlex.quote(name)} --resume"


def _gate_of(runbook, args: argparse.Namespace, schedule):  # type: ignore[no-untyped-def]
    """The gate a rolling plan passes each batch through: --gate, else the runbook's
    [journal] gate (unless --no-gate); None for a plan that is not rolling or not gated."""
    from journal.service.rollout import GateOptions

    no_gate = getattr(args, "no_gate", False)
    if args.gate and no_gate:
        raise BadInput(f"--gate {args.gate} and --no-gate say opposite things: drop one")
    name = args.gate or (None if no_gate else runbook.gate)
    if name is None:
        for flag, given in (
            ("--resume", args.resume),
            ("--on-gate-fail rollback", args.on_gate_fail == "rollback"),
        ):
            if given:
                raise BadInput(
                    f"{flag} is for a gated rollout: name its gate (--gate NAME, or [journal] "
                    "gate in the runbook) and --rolling N"
                )
        return None
    spec = runbook.gate_named(name)
    if not schedule.rolling:
        if args.gate or args.resume or args.on_gate_fail == "rollback":
            raise BadInput(
                f"--gate {name} checks each batch of a rolling plan: add --rolling N (N hosts "
                "a batch)"
            )
        return None  # the runbook's default gate is for rolling plans
    return GateOptions(spec, args.on_gate_fail, args.resume)


def demo(ctx: Context, args: argparse.Namespace) -> int:
    """`journal demo [DIR]`: prepare the demo's folder (its wheels, venv and runbook), open its
    journal there (unless --db names one) and run it, told in the terminal."""
    from journal.cli.plan import TerminalDemoReport
    from journal.demo.run import prepare, run_demo
    from journal.runbook import load

    root = Path(args.dir)
    runbook = load(prepare(root))
    if not ctx.db_given:
        ctx.db = str(root.resolve() / "journal.db")
    ctx.runbook_path = str(runbook.path)
    report = TerminalDemoReport(short=render.short_ids(ctx.store))
    return run_demo(ctx.store, runbook, report, ctx.db)


def ansible_plugin_path(ctx: Context, args: argparse.Namespace) -> int:
    """`journal ansible plugin-path`: where journal's callback plugin is, and the lines that
    turn it on (it records into the journal JOURNAL_RUNBOOK or JOURNAL_DB names)."""
    from journal.ansible import plugin_dir

    folder = plugin_dir()
    print(folder)
    print(
        "# turn it on for a playbook run (journal importable by the python that runs Ansible;\n"
        "# it records into the journal JOURNAL_RUNBOOK, or JOURNAL_DB and JOURNAL_NAME, name):\n"
        f"#   export ANSIBLE_CALLBACK_PLUGINS={folder}\n"
        "#   export ANSIBLE_CALLBACKS_ENABLED=journal\n"
        "#   export JOURNAL_RUNBOOK=$PWD/runbook.toml   # or JOURNAL_DB=... JOURNAL_NAME=...\n"
        f"# or in ansible.cfg, [defaults]: callback_plugins = {folder}\n"
        "#   callbacks_enabled = journal",
        file=sys.stderr,
    )
    return 0
