"""The ``journal`` command line: argument parsing and the exit-status contract.

0 on success, the step's own exit status for a failed step, 1 when `journal verify` finds
tampering, 2 for bad input with a one-paragraph message and no traceback.
"""

from __future__ import annotations

import journal.cli.startup  # first: a Ctrl-C while the rest loads ends journal cleanly

# isort: split
import argparse
import os
import signal
import sys

from journal import __version__
from journal.cli import db, metrics, pitfalls, reading, running, serve
from journal.cli.context import Context, default_db, default_runbook, text_argument
from journal.cli.notify import base_url_option
from journal.errors import BadInput


class _Parser(argparse.ArgumentParser):
    def _get_value(self, action: argparse.Action, arg_string: str) -> object:
        text_argument(action, arg_string)  # bytes that are no UTF-8: exit 2, naming it
        return super()._get_value(action, arg_string)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"journal: {message} (see `{self.prog} --help`)\n")


def _globals(suppress: bool) -> argparse.ArgumentParser:
    """The global options, accepted before or after the command name."""
    parent = argparse.ArgumentParser(add_help=False)
    default = argparse.SUPPRESS if suppress else None
    parent.add_argument(
        "--db",
        default=default if suppress else default_db(),
        metavar="URL|PATH",
        help="database: a file path or an SQLAlchemy URL (env JOURNAL_DB, default ./journal.db)",
    )
    parent.add_argument(
        "--runbook",
        default=default if suppress else default_runbook(),
        metavar="FILE",
        help="the runbook (env JOURNAL_RUNBOOK, default ./runbook.toml)",
    )
    parent.add_argument(
        "--journal",
        default=default,
        metavar="NAME",
        help="which journal of the database (default: the runbook's, or the only one)",
    )
    return parent


def build_parser() -> argparse.ArgumentParser:
    sub_globals = _globals(suppress=True)
    parser = _Parser(
        prog="journal",
        parents=[_globals(suppress=False)],
        description="Record GPU-server upgrades over SSH as an append-only journal.",
    )
    parser.add_argument("--version", action="version", version=f"journal {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def command(name: str, func, help_text: str, parent=sub):  # type: ignore[no-untyped-def]
        p = parent.add_parser(name, parents=[sub_globals], help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    p = command("init", running.init, "write a commented runbook.toml and create the database")
    p.add_argument("dir", nargs="?", default=".", help="folder for runbook.toml (default: here)")

    run = sub.add_parser("run", help="run a step, the plan, a probe or a benchmark")
    run_sub = run.add_subparsers(dest="what", metavar="WHAT", parser_class=_Parser)
    run_sub.required = True
    p = command("step", running.run_step, "run one step of the runbook", parent=run_sub)
    p.add_argument("name", help="the step's name")
    p.add_argument(
        "--detach",
        action="store_true",
        help="on Ctrl-C, SIGTERM or SIGHUP, leave the command running on its hosts (then "
        "`journal attach`) instead of stopping it",
    )
    _host_options(p, schedule=True)
    base_url_option(p)
    p = command(
        "probe", running.run_probe, "run a probe on the hosts and record it", parent=run_sub
    )
    p.add_argument("name", help="packages, torch-env, or a [probes.NAME] of the runbook")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    _host_options(p, schedule=True)
    p = command("plan", running.run_plan, "run the plan's steps in order, resuming", parent=run_sub)
    p.add_argument("--from", dest="from_step", metavar="NAME", help="start at this step")
    p.add_argument("--to", dest="to_step", metavar="NAME", help="stop after this step")
    p.add_argument(
        "--detach",
        action="store_true",
        help="on Ctrl-C, SIGTERM or SIGHUP, leave the running step's command going on its "
        "hosts (then `journal attach`) instead of stopping it",
    )
    _host_options(p, schedule=True, plan=True)
    base_url_option(p)

    p = command(
        "bench", metrics.run_bench, "run a benchmark and record its figures", parent=run_sub
    )
    p.add_argument("name", help="a [benchmarks.NAME] of the runbook")
    _label_option(p)
    _host_options(p)
    base_url_option(p)
    rec = sub.add_parser("record", help="record a figure measured elsewhere")
    rec_sub = rec.add_subparsers(dest="what", metavar="WHAT", parser_class=_Parser)
    rec_sub.required = True
    p = command(
        "metric",
        metrics.record_metric,
        "record a figure measured elsewhere (marked as entered by hand)",
        parent=rec_sub,
    )
    p.add_argument("name", help="the metric, e.g. output_token_throughput")
    p.add_argument("value", help="the figure, e.g. 96.1")
    p.add_argument("--unit", help="e.g. tok/s, GB/s, ms")
    p.add_argument("--host", help="the host it was measured on")
    _label_option(p)

    p = command("note", reading.note, "add a note to the timeline")
    p.add_argument("text")
    p.add_argument("--tag", action="append", default=[], help="e.g. lesson, root-cause")
    p.add_argument("--host", help="the host the note is about")
    p.add_argument("--author", help="who wrote it (default: user@machine)")

    p = command(
        "status",
        reading.status,
        "the story, plan progress and the state of each host; exit 1 when the latest run of a "
        "plan step failed or timed out on some host, or an error finding is open (else 0)",
    )
    _format_option(p)
    p = command(
        "show", reading.show, "one step run in full: status, packages, findings, output tail"
    )
    p.add_argument("run", metavar="RUN", help="the run's id, or a unique start of it")
    p.add_argument(
        "--output", action="store_true", help="all of its output instead of the last 40 lines"
    )
    _format_option(p)
    p = command(
        "attach",
        running.attach,
        "record the rest of runs whose recorder was lost (the command went on on its host)",
    )
    p.add_argument("runs", nargs="*", metavar="RUN", help="a run id (or its start)")
    p.add_argument("--all", action="store_true", help="every lost run of the journal")
    p.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="accept (and record) an SSH host key not yet in known_hosts",
    )
    from journal.cli import drift

    drift.add_parser(sub, command)
    p = command("pitfalls", pitfalls.pitfalls, "the pitfalls found in the journal")
    p.set_defaults(action="list")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument(
        "--all", action="store_true", help="every finding, resolved and acknowledged ones too"
    )
    acks = p.add_subparsers(dest="action", metavar="ack|unack", parser_class=_Parser)
    ack = acks.add_parser(
        "ack", parents=[sub_globals], help="acknowledge a finding (or every finding of an id)"
    )
    ack.add_argument("finding", help="a finding's key (ID:RUN, as listed) or a pitfall id")
    ack.add_argument("--note", required=True, help="why it is fine, or what was done")
    ack.add_argument("--by", help="who acknowledges it (default: user@machine)")
    unack = acks.add_parser("unack", parents=[sub_globals], help="withdraw an acknowledgement")
    unack.add_argument("finding", help="the key or pitfall id that was acknowledged")
    unack.add_argument("--by", help="who withdraws it (default: user@machine)")
    p = command("lint", pitfalls.lint, "findings for terminal transcripts (no database needed)")
    p.add_argument(
        "files", nargs="+", metavar="FILE", help="a transcript; - reads one from standard input"
    )
    p.add_argument("--format", choices=["text", "json"], default="text")
    exp = sub.add_parser("export", help="export the record: the postmortem, a step's asciicast")
    exp_sub = exp.add_subparsers(dest="what", metavar="WHAT", parser_class=_Parser)
    exp_sub.required = True
    from journal.cli import export

    export.add_parser(exp_sub, command)
    imp = sub.add_parser("import", help="import a terminal transcript as step runs")
    imp_sub = imp.add_subparsers(dest="what", metavar="WHAT", parser_class=_Parser)
    imp_sub.required = True
    p = command(
        "transcript",
        pitfalls.import_transcript,
        "record a pasted terminal session as step runs",
        parent=imp_sub,
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--host", required=True, help="the host the session ran on")
    p = command("log", reading.log, "the timeline in the terminal")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new events live")
    p.add_argument("--output", action="store_true", help="print each step's recorded output")
    p.add_argument("--host", help="only this host's runs (and its probes, notes, figures)")
    p.add_argument("--step", help="only the runs of this step")
    p.add_argument(
        "--failed",
        action="store_true",
        help="only runs that failed, timed out, were lost or interrupted",
    )
    p.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help=f"the newest N items (default {reading.LOG_LIMIT}; 0: all of them)",
    )
    p.add_argument(
        "--since",
        metavar="WHEN",
        help="only what was recorded since WHEN: a date, a UTC time or a span (12h, 7d)",
    )
    _format_option(p)
    p = command("serve", serve.serve, "the web UI: timeline, step runs, findings, hosts")
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5000, help="port (default 5000; 0 picks a free one)")
    p.add_argument(
        "--token",
        help="every request must carry it (env JOURNAL_TOKEN); needed "
        "to bind anything but loopback",
    )
    p = command(
        "verify",
        db.verify,
        "check the hash chain, the schema and any anchors; print the head (exit 1 if broken)",
    )
    p.add_argument(
        "--witness",
        metavar="FILE|HOST:FILE",
        help="also hold the chain against every anchor this witness file holds",
    )
    p = command("anchor", db.anchor, "write the chain's head to a witness file, here or over SSH")
    p.add_argument(
        "--witness",
        metavar="FILE|HOST:FILE",
        help="append the head to this file (HOST: a runbook host or user@host, over SSH); "
        "without it the anchor line is printed",
    )
    command("rebuild", db.rebuild, "replay every event into the projections")
    p = command("demo", running.demo, "run the offline demo upgrade with stand-in wheels")
    p.add_argument("dir", nargs="?", default="demo", help="folder for the demo (default: ./demo)")
    from journal.cli import notify, rollback

    rollback.add_parser(sub, command, _host_options, base_url_option)
    db.add_parser(sub, command)
    notify.add_parser(sub, command, _Parser, sub_globals)
    from journal.cli import shell

    shell.add_parser(sub, command)
    return parser


def _format_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="json: the same as one JSON document (its keys: docs/cli-reading.md)",
    )


def _label_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="K=V",
        help="a label of the figures, e.g. phase=before or concurrency=1 (repeatable)",
    )


def _host_options(p: argparse.ArgumentParser, schedule: bool = False, plan: bool = False) -> None:
    """Which hosts (--host, --group, --all-hosts) and, where ``schedule``, how many at once."""
    p.add_argument(
        "--host", action="append", default=[], metavar="H", help="run on this host (repeatable)"
    )
    p.add_argument(
        "--group",
        action="append",
        default=[],
        metavar="NAME",
        help="run on the hosts of this [groups] entry, in its order (repeatable; with --host, "
        "the groups' hosts come first)",
    )
    p.add_argument("--all-hosts", action="store_true", help="run on every host of the runbook")
    if schedule:
        p.add_argument(
            "--parallel",
            type=int,
            metavar="N",
            help="at most N hosts at work at once (default: all of them)",
        )
        rolling = (
            "roll the plan out N hosts at a time: each batch runs the whole plan (step by step, "
            "resuming as usual) before the next starts; stop the roll at the first batch whose "
            "plan fails, leaving the later hosts untouched"
            if plan
            else "N hosts at a time, in the order named; after each batch, stop if any of its "
            "hosts failed (the command, an expectation, a probe), leaving the rest untouched"
        )
        p.add_argument("--rolling", type=int, metavar="N", help=rolling)
    p.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="accept (and record) an SSH host key not yet in known_hosts",
    )


class Stopped(KeyboardInterrupt):
    """journal itself got SIGTERM or SIGHUP: it stops the steps at work as for Ctrl-C (their
    whole process groups: INT, then TERM, then KILL) and records them interrupted by it."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.why = signal.Signals(signum).name
        super().__init__(self.why)


#: The signal that stopped journal, once one did (its exit status is then 128 + it).
_stopped_by: list[int] = []


def _stop(signum: int, frame: object) -> None:
    _stopped_by.append(signum)
    if signum == signal.SIGHUP:
        # the terminal is gone: what journal still prints goes nowhere instead of failing
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            try:
                os.dup2(devnull, fd)
            except OSError:
                pass
        os.close(devnull)
    raise Stopped(signum)


def _stop_on_signals() -> None:
    """SIGTERM and SIGHUP (the operator's SSH session dropping) stop journal the way Ctrl-C
    does, so that no step's command outlives its record unseen; a signal ignored when journal
    started stays ignored (`nohup journal run plan &`: the logout's SIGHUP goes nowhere).
    Ctrl-C raises KeyboardInterrupt again (:mod:`journal.cli.startup` ended journal on it
    while it started)."""
    try:
        if signal.getsignal(signal.SIGINT) is journal.cli.startup.interrupted:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) != signal.SIG_IGN:
                signal.signal(signum, _stop)
    except (ValueError, OSError):
        pass  # not the main thread (journal called from a program): leave its handlers


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    ctx = Context(
        db=args.db or "journal.db",
        runbook_path=args.runbook,
        journal_name=args.journal,
        db_given=args.db is not None,
    )
    try:
        _stop_on_signals()  # in the try: from here a signal ends journal through it
        code = int(args.func(ctx, args) or 0)
        # the steps were stopped as for Ctrl-C (130); the exit status names the real signal
        return 128 + _stopped_by[0] if _stopped_by and code == 130 else code
    except BadInput as exc:
        print(f"journal: {exc}", file=sys.stderr)
        return 2
    except Stopped as stop:
        print(f"journal: stopped by {stop.why}", file=sys.stderr)
        return 128 + stop.signum
    except KeyboardInterrupt:
        print("journal: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    finally:
        ctx.close()
