"""Findings and transcripts (docs/cli-findings.md): `journal pitfalls`, `pitfalls ack`, `lint`
and `import transcript`, and how findings are worded in the terminal."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from journal.cli.context import Context
from journal.pitfalls.base import Finding
from journal.terminal import visible

LABEL = {"error": "ERROR  ", "warning": "WARNING", "info": "INFO   "}


def finding_text(
    found: Finding, where: str = "", with_key: bool = False, short: Callable[[str], str] = str
) -> str:
    """A finding as a few lines: severity, id, where (its run's id as ``short`` shows it),
    state; title; evidence; advice; and, in a journal, the key that `journal pitfalls ack`
    takes (the whole run id in it). Control characters of the
    evidence (host output, a pasted transcript) are made visible, not obeyed."""
    place = where or (f"{found.step} on {found.host} (run {short(found.run)})" if found.run else "")
    state = "" if found.is_open else f"  [{found.state.upper()}]"
    lines = [f"{LABEL[found.severity]} {found.id}  {place}{state}", f"        {found.title}"]
    if found.regression_of:
        lines.append(f"        again: it had been resolved before ({found.regression_of})")
    for ev in found.evidence[:6]:
        at = f"line {ev.line}: " if ev.line is not None else ""
        lines.append(f"        | {at}{ev.text[:300]}")
    lines.append(f"        advice: {found.advice}")
    if found.resolved_by is not None:
        lines.append(f"        resolved: {found.resolved_by.why}")
    if found.acknowledged is not None:
        ack = found.acknowledged
        lines.append(f"        acknowledged by {ack.by} at {ack.at}: {ack.note}")
    if with_key:
        lines.append(f"        key: {found.key}")
    return visible("\n".join(lines))


def one_line(found: Finding) -> str:
    """The run-time verdict: id, severity and advice on one line."""
    return visible(
        f"pitfall {found.id} ({found.severity}) on {found.host}: {found.title} -> {found.advice}"
    )


def say_findings(  # type: ignore[no-untyped-def]
    store, journal: str, runs: list[str], notifier=None
) -> None:
    """The run-time verdict the commands that run steps end with: each finding about these
    runs, one line with id and advice on stderr (told to ``notifier`` too)."""
    from journal.service.findings import findings_for_runs

    for found in findings_for_runs(store, journal, runs, notifier):
        print(f"journal: {one_line(found)}", file=sys.stderr)


def pitfalls(ctx: Context, args: argparse.Namespace) -> int:
    from journal.service.findings import (
        acknowledge,
        findings,
        open_findings,
        tally,
        unacknowledge,
    )

    journal = ctx.read_journal()
    if args.action == "ack":
        covered = acknowledge(ctx.store, journal, args.finding, args.note, args.by)
        what = _n(covered) if covered is not None else f"every {args.finding} finding so far"
        print(f"acknowledged {what} ({args.finding}) in {journal}")
        return 0
    if args.action == "unack":
        covered = unacknowledge(ctx.store, journal, args.finding, args.by)
        what = _n(covered) if covered is not None else f"every {args.finding} finding"
        print(f"withdrew the acknowledgement of {args.finding} ({what}) in {journal}")
        return 0
    # the open ones are read through the pitfalls open (the rest only counted); --all reads
    # every finding
    if args.all and args.format == "json":
        # every finding read from the ledger's rows a batch at a time, written as read
        from journal.pitfalls.ledger import Ledger
        from journal.streamed import Lazy, write_json

        listing = Ledger(ctx.store, journal).listing()
        every = Lazy(lambda: (f.to_dict() for f in listing), len(listing))
        write_json(sys.stdout.write, {"journal": journal, "findings": every})
        sys.stdout.write("\n")
        return 0
    shown = findings(ctx.store, journal) if args.all else open_findings(ctx.store, journal)
    if args.format == "json":
        print(json.dumps({"journal": journal, "findings": [f.to_dict() for f in shown]}, indent=2))
        return 0
    counted = tally(ctx.store, journal)
    total = sum(counted.open.values()) + counted.acknowledged + counted.resolved
    print(
        f"journal {journal}: {_n(total)}; open: {counted.open.get('error', 0)} error, "
        f"{counted.open.get('warning', 0)} warning, {counted.open.get('info', 0)} info; "
        f"{counted.resolved} resolved, {counted.acknowledged} acknowledged"
        + ("" if args.all or len(shown) == total else " (--all lists them too)")
    )
    from journal.cli.render import short_ids

    short = short_ids(ctx.store)
    short.know([f.run for f in shown if f.run])
    for one in shown:
        print(finding_text(one, with_key=True, short=short))
    return 0


def _n(count: int) -> str:
    return f"{count} finding{'s' if count != 1 else ''}"


def _lint(files: list[str]) -> list[tuple[Path, Finding]]:
    """Findings for each transcript; ``-`` is the one on standard input."""
    from journal.service.lint import lint as lint_files
    from journal.service.lint import lint_stream

    found: list[tuple[Path, Finding]] = []
    for name in files:
        if name != "-":
            found.extend(lint_files([Path(name)]))
            continue
        found.extend((Path("<stdin>"), f) for f in lint_stream(sys.stdin.buffer))
    return found


def lint(ctx: Context, args: argparse.Namespace) -> int:
    found = _lint(args.files)
    if args.format == "json":
        print(
            json.dumps(
                {"findings": [{**f.to_dict(with_event=False), "file": str(p)} for p, f in found]},
                indent=2,
            )
        )
    else:
        for path, f in found:
            print(finding_text(f, f"{path} ({f.step})"))
        print(
            f"{len(found)} finding{'s' if len(found) != 1 else ''} in {len(args.files)} "
            f"file{'s' if len(args.files) != 1 else ''}",
            file=sys.stderr,
        )
    return 1 if any(f.severity != "info" for _, f in found) else 0


def import_transcript(ctx: Context, args: argparse.Namespace) -> int:
    from journal.service.imports import import_transcript as do_import

    journal = ctx.journal()
    redact = ctx.runbook.redact if ctx.has_runbook() and ctx.runbook.name == journal else []
    count = do_import(
        ctx.store, journal, Path(args.file), args.host, redact, lambda: ctx.open_journal(journal)
    )
    print(
        f"imported {count} command{'s' if count != 1 else ''} from {args.file} as step runs "
        f"on {args.host} in {journal}; `journal pitfalls` judges them"
    )
    return 0
