"""The database itself (docs/operations.md): `journal verify` checks its hash chain and
anchors, `journal anchor` writes the chain's head to a witness, `journal rebuild` folds its
stored projections again, and `journal db copy` moves it to another backend (SQLite,
PostgreSQL)."""

from __future__ import annotations

import argparse
import sys
import time

from journal.cli.context import Context
from journal.display import plural
from journal.errors import BadInput


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
    from journal.projections.digest import Digest
    from journal.projections.drift.kept import current_readings
    from journal.projections.stored import brought_up
    from journal.service.story import headline
    from journal.store.cache import ProjectionCache

    ctx.require_db()
    started = time.perf_counter()
    total = 0
    # The stored projections are a cache: dropped, then folded again from the events, a batch
    # at a time; the summary is read from what was stored.
    ProjectionCache(ctx.store.engine).drop()
    for journal in ctx.store.journals():
        brought_up(ctx.store, journal, anew=True)
        current_readings(ctx.store, journal)  # what `journal drift` and the hosts page read
        timeline = Digest(ctx.store, journal)
        timeline.headline(headline)  # worked out now, for the first reader
        total += timeline.events
        counts = timeline.status_counts()
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no step runs"
        told = Ledger(ctx.store, journal).tally()
        opened = sum(told.open.values())
        print(
            f"{journal}: {timeline.events} events replayed; step runs: {summary}; "
            f"findings: {opened + told.acknowledged + told.resolved} ({opened} open)"
        )
    print(f"replayed {total} events in {time.perf_counter() - started:.2f} s")
    return 0
