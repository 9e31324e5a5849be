"""The command line's grammar: every command, its flags and their help, and the handler each
command runs, named as ``FAMILY.FUNCTION`` of a module of :mod:`journal.cli` (``running.init``).

Nothing here imports a command family: a family's module (and the store, the services, Flask,
Fabric behind it) is imported by :func:`journal.cli.handler` only when its command runs, so that
`journal --help`, `journal CMD --help` and a command refused by the parser cost no more than
argparse.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator
from typing import Any

from journal import __version__

#: The items `journal log` shows unless told (`--limit N`; 0: all).
LOG_LIMIT = 50


def encodable(text: str) -> bool:
    """Whether ``text`` is UTF-8 text (no byte that the command line could not decode)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


#: The arguments that are paths handed to the OS as they are and never recorded, so that a
#: file name in another encoding than UTF-8 is as good as any. Not the runbook's (nor `init`'s
#: folder, which holds it): the journal records where its runbook is.
PATH_ARGUMENTS = frozenset({"db", "files", "output", "witness", "source", "target"})


def text_argument(action: argparse.Action, value: str) -> None:
    """Refuse an argument that is not UTF-8 text (Python hands bytes it cannot decode over as
    lone surrogates, which no database can store) unless it is a path: what the command line
    gives is recorded as text, and the message names the argument before anything is opened."""
    if (
        isinstance(action, argparse._SubParsersAction)  # the command's own arguments follow
        or action.dest in PATH_ARGUMENTS
        or encodable(value)
    ):
        return
    bad = 0
    try:
        raw = value.encode("utf-8", "surrogateescape")
        raw.decode("utf-8")
    except UnicodeEncodeError:  # a surrogate given as such, not from a byte
        raw, at = value.encode("utf-8", "surrogatepass"), "a lone surrogate"
    except UnicodeDecodeError as exc:
        bad, at = exc.start, f"byte 0x{raw[exc.start]:02x} at {exc.start}"
    else:
        at = "a lone surrogate"
    # caf\xe9, as a shell's $'...' writes it; of a long one, the part around the first bad byte
    start, end = max(0, bad - 40), bad + 20
    spelled = raw[start:end].decode("utf-8", "backslashreplace")
    if start or end < len(raw):
        spelled = f"{'...' if start else ''}{spelled}{'...' if end < len(raw) else ''}"
        spelled += f" ({len(raw):,} bytes)"
    raise argparse.ArgumentError(
        action,
        f"{spelled} is not UTF-8 text ({at} is no UTF-8 character: the terminal or "
        "script passed another encoding, such as Latin-1); journal records text as UTF-8, "
        "so nothing was recorded: give it in UTF-8 (e.g. convert it with `iconv -f latin1 "
        "-t utf-8`, or rename a file so named)",
    )


def default_db() -> str | None:
    """--db's default: JOURNAL_DB, else None (meaning ./journal.db, or DIR/journal.db for init)."""
    return os.environ.get("JOURNAL_DB")


def default_runbook() -> str:
    return os.environ.get("JOURNAL_RUNBOOK", "runbook.toml")


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

    def command(name: str, func: str, help_text: str, parent=sub, parents=None):  # type: ignore[no-untyped-def]
        """A command running ``func`` (``FAMILY.FUNCTION``, imported when it runs; ``parents``
        the global options it takes, by default all)."""
        given = [sub_globals] if parents is None else parents
        p = parent.add_parser(name, parents=given, help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    def group(name: str, help_text: str) -> Any:
        """A command of subcommands (`journal run WHAT`): the action to add them to."""
        what = sub.add_parser(name, help=help_text).add_subparsers(
            dest="what", metavar="WHAT", parser_class=_Parser
        )
        what.required = True
        return what

    p = command("init", "running.init", "write a commented runbook.toml and create the database")
    p.add_argument("dir", nargs="?", default=".", help="folder for runbook.toml (default: here)")

    run_sub = group("run", "run a step, the plan, a probe or a benchmark")
    p = command("step", "running.run_step", "run one step of the runbook", parent=run_sub)
    p.add_argument("name", help="the step's name")
    p.add_argument(
        "--detach",
        action="store_true",
        help="on Ctrl-C, SIGTERM or SIGHUP, leave the command running on its hosts (then "
        "`journal attach`) instead of stopping it",
    )
    _host_options(p, schedule=True)
    _gate_options(p, plan=False)
    base_url_option(p)
    p = command(
        "probe", "running.run_probe", "run a probe on the hosts and record it", parent=run_sub
    )
    p.add_argument("name", help="packages, torch-env, or a [probes.NAME] of the runbook")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    _host_options(p, schedule=True)
    p = command(
        "plan", "running.run_plan", "run the plan's steps in order, resuming", parent=run_sub
    )
    p.add_argument("--from", dest="from_step", metavar="NAME", help="start at this step")
    p.add_argument("--to", dest="to_step", metavar="NAME", help="stop after this step")
    p.add_argument(
        "--detach",
        action="store_true",
        help="on Ctrl-C, SIGTERM or SIGHUP, leave the running step's command going on its "
        "hosts (then `journal attach`) instead of stopping it",
    )
    _host_options(p, schedule=True, plan=True)
    _gate_options(p)
    base_url_option(p)

    p = command(
        "bench", "metrics.run_bench", "run a benchmark and record its figures", parent=run_sub
    )
    p.add_argument("name", help="a [benchmarks.NAME] of the runbook")
    _label_option(p)
    _host_options(p)
    base_url_option(p)
    rec_sub = group("record", "record a figure measured elsewhere")
    p = command(
        "metric",
        "metrics.record_metric",
        "record a figure measured elsewhere (marked as entered by hand)",
        parent=rec_sub,
    )
    p.add_argument("name", help="the metric, e.g. output_token_throughput")
    p.add_argument("value", help="the figure, e.g. 96.1")
    p.add_argument("--unit", help="e.g. tok/s, GB/s, ms")
    p.add_argument("--host", metavar="H", help="the host it was measured on")
    _label_option(p)

    p = command("note", "reading.note", "add a note to the timeline")
    p.add_argument("text", help="the note (quote it: one argument)")
    p.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="TAG",
        help="e.g. lesson, root-cause, trigger, action, summary (the postmortem's sections)",
    )
    p.add_argument("--host", metavar="H", help="the host the note is about")
    p.add_argument("--author", help="who wrote it (default: user@machine)")

    p = command(
        "status",
        "reading.status",
        "the story, plan progress and the state of each host; exit 1 when the latest run of a "
        "plan step failed or timed out on some host, or an error finding is open (else 0)",
    )
    _format_option(p)
    p = command(
        "show", "reading.show", "one step run in full: status, packages, findings, output tail"
    )
    p.add_argument(
        "run",
        metavar="RUN",
        help="the run's id, a unique start of it, or a step's name (its latest run)",
    )
    _full_output(p, "all of its output instead of the last 40 lines")
    _format_option(p)
    p = command(
        "attach",
        "running.attach",
        "record the rest of runs whose recorder was lost (the command went on on its host)",
    )
    p.add_argument("runs", nargs="*", metavar="RUN", help="a run id (or its start)")
    p.add_argument("--all", action="store_true", help="every lost run of the journal")
    _host_key_option(p)
    _drift(sub, command)
    p = command("pitfalls", "pitfalls.pitfalls", "the pitfalls found in the journal")
    p.set_defaults(action="list")
    _format_option(p, "json: an object with a findings list (id, severity, advice, evidence…)")
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
    p = command(
        "lint",
        "pitfalls.lint",
        "findings for terminal transcripts (reads no database or runbook)",
        parents=[],
    )
    p.add_argument(
        "files", nargs="+", metavar="FILE", help="a transcript; - reads one from standard input"
    )
    _format_option(p, "json: an object with a findings list (id, severity, advice, evidence…)")
    _export(group("export", "export the record: the postmortem, a step's asciicast"), command)
    ans_sub = group("ansible", "record Ansible playbooks in the journal (the callback plugin)")
    command(
        "plugin-path",
        "running.ansible_plugin_path",
        "print the folder of journal's Ansible callback plugin and how to turn it on",
        parent=ans_sub,
    )
    imp_sub = group("import", "import a terminal transcript as step runs")
    p = command(
        "transcript",
        "pitfalls.import_transcript",
        "record a pasted terminal session as step runs",
        parent=imp_sub,
    )
    p.add_argument(
        "file", metavar="FILE", help="the session as pasted (prompts and output); - reads stdin"
    )
    p.add_argument("--host", required=True, metavar="H", help="the host the session ran on")
    p = command("log", "reading.log", "the timeline in the terminal")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new events live")
    _full_output(p, "print each step's recorded output")
    p.add_argument(
        "--host", metavar="H", help="only this host's runs (and its probes, notes, figures)"
    )
    p.add_argument("--step", metavar="NAME", help="only the runs of this step")
    p.add_argument(
        "--failed",
        action="store_true",
        help="only runs that failed, timed out, were lost or interrupted",
    )
    p.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help=f"the newest N items (default {LOG_LIMIT}; 0: all of them)",
    )
    p.add_argument(
        "--since",
        metavar="WHEN",
        help="only what was recorded since WHEN: a date, a UTC time or a span (12h, 7d)",
    )
    _format_option(p)
    p = command("serve", "serve.serve", "the web UI: timeline, step runs, findings, hosts")
    p.add_argument("--bind", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=5000, help="port (default 5000; 0 picks a free one)")
    p.add_argument(
        "--token",
        help="every request must carry it (env JOURNAL_TOKEN); needed "
        "to bind anything but loopback",
    )
    p = command(
        "verify",
        "db.verify",
        "check the hash chain, the schema and any anchors; print the head (exit 1 if broken)",
    )
    p.add_argument(
        "--witness",
        metavar="FILE|HOST:FILE",
        help="also hold the chain against every anchor this witness file holds",
    )
    p = command("anchor", "db.anchor", "write the chain's head to a witness file, here or over SSH")
    p.add_argument(
        "--witness",
        metavar="FILE|HOST:FILE",
        help="append the head to this file (HOST: a runbook host or user@host, over SSH); "
        "without it the anchor line is printed",
    )
    command("rebuild", "db.rebuild", "replay every event into the projections")
    p = command("demo", "running.demo", "run the offline demo upgrade with stand-in wheels")
    p.add_argument("dir", nargs="?", default="demo", help="folder for the demo (default: ./demo)")
    _rollback(sub, command)
    _db(group("db", "the database itself: copy it to another backend"), command)
    _notify(group("notify", "the runbook's [notify.NAME] webhooks"), command)
    _shell(sub, command)
    _grouped(parser, sub)
    return parser


#: The commands as `journal --help` lists them, by what they are for.
GROUPS = (
    ("start", ("demo", "init")),
    ("record", ("run", "shell", "note", "record", "import", "attach", "rollback", "ansible")),
    ("read", ("status", "log", "show", "pitfalls", "drift", "serve")),
    ("hand on", ("export", "notify")),
    ("the record itself", ("verify", "anchor", "rebuild", "db")),
    ("without a journal", ("lint",)),
)


def _grouped(parser: argparse.ArgumentParser, sub: Any) -> None:
    """``journal --help`` lists the commands by :data:`GROUPS`, each with its help text
    (argparse would list them in one block: :class:`_Grouped` leaves that out)."""
    import textwrap

    helps = {action.dest: action.help or "" for action in sub._choices_actions}
    assert set(helps) == {name for _, names in GROUPS for name in names}, "a command ungrouped"
    lines = ["commands:"]
    for title, names in GROUPS:
        lines.append(f"  {title}:")
        for name in names:
            lines += textwrap.wrap(
                helps[name], 78, initial_indent=f"    {name:<10}", subsequent_indent=" " * 14
            )
    lines.append("`journal COMMAND --help` tells one command's arguments.")
    sub.help = "one of the commands below"
    parser.epilog = "\n".join(lines)
    parser.formatter_class = _Grouped


class _Grouped(argparse.RawDescriptionHelpFormatter):
    """`journal --help`: the commands listed by group in the epilog, not again in one block."""

    def _iter_indented_subactions(self, action: argparse.Action) -> Iterator[argparse.Action]:
        if isinstance(action, argparse._SubParsersAction):
            return iter(())
        return super()._iter_indented_subactions(action)


def _drift(sub: Any, command: Any) -> None:
    """The `drift` command (``command`` is the parser's own helper)."""
    p = command(
        "drift",
        "drift.drift",
        "each host's torch/CUDA/NCCL/driver/packages against its group's majority "
        "(exit 1 when a host differs)",
    )
    p.add_argument("--group", metavar="NAME", help="only this group of the runbook's [groups]")
    _format_option(p, "json: the groups, rows and divergences as one JSON document")
    p.add_argument(
        "--base-url",
        metavar="URL",
        help="where `journal serve` answers: a drift notification links to its Hosts page "
        "(default: the runbook's [journal] base_url)",
    )


def _export(exp_sub: Any, command: Any) -> None:
    """The `export postmortem` and `export cast` subcommands (``command`` is the parser's own
    helper)."""
    p = command(
        "postmortem",
        "export.postmortem",
        "the postmortem: summary, impact, timeline, changes, pitfalls, action items, lessons",
        parent=exp_sub,
    )
    p.add_argument(
        "--format",
        choices=["md", "html", "json"],
        help="md, html (one self-contained file) or json (default: from -o's suffix, else md)",
    )
    p.add_argument("-o", "--output", metavar="FILE", help="write it here (default: stdout)")
    p.add_argument(
        "--base-url",
        metavar="URL",
        help="where `journal serve` is reached (http://host:8000): action items and failed "
        "steps link to their run pages there",
    )
    p.add_argument(
        "--since",
        metavar="WHEN",
        help="tell only what was recorded from WHEN on: a date (2026-11-28), a UTC date and "
        "time (2026-11-28T09:30) or a span before now (12h, 7d, 2w)",
    )
    p.add_argument(
        "--plan-run",
        metavar="PLAN_RUN",
        help="tell only one `journal run plan` (its id as the web's plan-run page shows it, "
        "a unique prefix, or latest): its step runs and what was recorded while it ran",
    )
    p = command("cast", "export.cast", "a step run's output as asciicast v2", parent=exp_sub)
    p.add_argument(
        "run_id",
        metavar="RUN",
        help="the run's id, a unique start of it, or a step's name (its latest run)",
    )
    p.add_argument(
        "-o", "--output", required=True, metavar="FILE.cast", help="the asciicast file to write"
    )


def _rollback(sub: Any, command: Any) -> None:
    """The `rollback` command (``command`` is the parser's own helper)."""
    p = command(
        "rollback",
        "rollback.rollback",
        "bring hosts back to a recorded package set (after a run or step, or before:STEP); "
        "exit 2 when a package is available from no source (nothing run), 1 when the rollback "
        "failed or did not reach its target",
    )
    p.add_argument(
        "--to",
        required=True,
        metavar="RUN|STEP|before:STEP",
        help="RUN: the packages after that run (its host's); STEP: after the latest run of "
        "the step on each host; before:STEP: before the latest try of the step (before the "
        "first of the failed tries right before it)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print each host's plan (what is installed from where, removed, kept) and "
        "record nothing",
    )
    p.add_argument(
        "--format",
        choices=["text", "json"],
        default="text",
        help="json: with --dry-run, the plan as one JSON document",
    )
    p.add_argument(
        "--detach",
        action="store_true",
        help="on Ctrl-C, SIGTERM or SIGHUP, leave the command running on its hosts (then "
        "`journal attach`) instead of stopping it",
    )
    _host_options(p, schedule=True)
    base_url_option(p)


def _db(group_sub: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    """``journal db copy``, added to ``journal db``'s subcommands ``group_sub``."""
    p = command(
        "copy",
        "db.copy",
        "copy every event (or one journal's, with --journal) to another database, then verify "
        "it there",
        parent=group_sub,
    )
    p.add_argument(
        "--from",
        dest="source",
        metavar="URL|PATH",
        help="the database to copy (default: --db)",
    )
    p.add_argument(
        "--to",
        dest="target",
        required=True,
        metavar="URL|PATH",
        help="where to: empty, or holding an earlier copy of the same chain",
    )


def _notify(notify_sub: Any, command: Any) -> None:
    """`journal notify test`, added to `journal notify`'s subcommands (``command`` is the
    parser's own helper)."""
    p = command(
        "test",
        "notify.test",
        "send a sample notification to a [notify.NAME] webhook (exit 1 if not delivered)",
        parent=notify_sub,
    )
    p.add_argument("name", metavar="NAME", help="the channel: a [notify.NAME] of the runbook")
    base_url_option(p)


def _shell(sub: Any, command: Any) -> None:
    """The `shell` command (``command`` is the parser's helper)."""
    p = command(
        "shell",
        "shell.shell",
        "open an interactive shell on a runbook host, recording each command as a step run "
        "(kind interactive), judged as it goes",
    )
    p.add_argument("--host", metavar="H", help="the runbook host (default: the only one)")
    p.add_argument(
        "--probe",
        metavar="NAME",
        help="run this probe (e.g. torch-env) after each command that installs or removes "
        "Python packages",
    )
    p.add_argument("--note", metavar="TEXT", help="record this note as the session opens")
    _host_key_option(p)


def _format_option(
    p: argparse.ArgumentParser,
    json_is: str = "json: the same as one JSON document (its keys: docs/cli-reading.md)",
) -> None:
    p.add_argument("--format", choices=["text", "json"], default="text", help=json_is)


def _full_output(p: argparse.ArgumentParser, help_text: str) -> None:
    """``--full-output`` (``-o``/``--output`` name a file to write, in every command)."""
    p.add_argument("--full-output", dest="output", action="store_true", help=help_text)
    # its name before, kept working
    p.add_argument("--output", dest="output", action="store_true", help=argparse.SUPPRESS)


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
    _host_key_option(p)


def _gate_options(p: argparse.ArgumentParser, plan: bool = True) -> None:
    """A gated rollout's options (`run plan --rolling N`; `run step` without a default)."""
    p.add_argument(
        "--gate",
        metavar="NAME",
        help="with --rolling: after each batch, each of its hosts must pass the runbook's "
        "[gates.NAME] (its probe and the stack agreeing, its benchmark figures against the "
        "host's own baseline, its health command) before the next batch starts"
        + (" (default: [journal] gate)" if plan else ""),
    )
    if plan:
        p.add_argument(
            "--no-gate",
            action="store_true",
            help="roll out without the runbook's default gate ([journal] gate)",
        )
    p.add_argument(
        "--on-gate-fail",
        choices=("stop", "rollback"),
        default="stop",
        help="what a failed gate does: stop there (default), or also roll its batch back to "
        "the packages before the rollout",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="go on with the latest rollout from the batch where it stopped (its batches and "
        "baselines as they were)",
    )


def _host_key_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="accept (and record) an SSH host key not yet in known_hosts",
    )


def base_url_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--base-url",
        metavar="URL",
        help="where `journal serve` answers (http://gpu-box:8000): notifications link to its "
        "pages (default: the runbook's [journal] base_url)",
    )
