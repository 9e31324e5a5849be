"""`journal db copy`: move a journal's database to another backend (SQLite, PostgreSQL)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from journal.cli.context import Context
from journal.errors import BadInput


def add_parser(sub: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``journal db`` and its ``copy`` to the command line's subcommands ``sub``."""
    group = sub.add_parser("db", help="the database itself: copy it to another backend")
    group_sub = group.add_subparsers(dest="what", metavar="WHAT", parser_class=type(group))
    group_sub.required = True
    p = command(
        "copy",
        copy,
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


def copy(ctx: Context, args: argparse.Namespace) -> int:
    """Copy, then verify the target: 1 when the source or the copy is not intact."""
    from journal.store import EventStore
    from journal.store.copy import check_journal, copy_events
    from journal.store.engine import shown, to_url

    source_db = args.source or ctx.db
    if to_url(source_db) == to_url(args.target):
        raise BadInput(f"--from and --to name the same database ({shown(source_db)})")
    # A source that is not there is a mistake, not an empty database to create and copy.
    Context(db=source_db, runbook_path=ctx.runbook_path).require_db("the source: ")
    source = EventStore(source_db)
    try:
        checked = source.verify()
        if not checked.ok:
            for problem in checked.problems:
                print(f"journal db copy: the source: {problem}", file=sys.stderr)
            print(
                f"{shown(source_db)}: NOT intact, nothing copied ({checked.checked} events read)",
                file=sys.stderr,
            )
            return 1
        check_journal(source, ctx.journal_name)  # before a target is created for nothing
        target = EventStore(args.target)
        try:
            done = copy_events(source, target, ctx.journal_name)
            report = target.verify()
        finally:
            target.close()
    finally:
        source.close()
    what = ", ".join(done.journals) or "none"
    kept = "hashes as they were" if done.hashes_kept else "sealed anew, with a note saying so"
    earlier = f" ({done.already_there} were there already)" if done.already_there else ""
    print(
        f"copied {done.copied} events (journals: {what}) from {shown(source_db)} to "
        f"{shown(args.target)}{earlier}, {kept}"
    )
    if report.ok:
        print(f"{shown(args.target)}: {report.checked} events, hash chain intact, schema at head")
        return 0
    for problem in report.problems:
        print(f"journal db copy: the copy: {problem}", file=sys.stderr)
    print(f"{shown(args.target)}: NOT intact ({report.checked} events read)", file=sys.stderr)
    return 1
