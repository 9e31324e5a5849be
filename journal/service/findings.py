"""Findings of a journal (with acknowledgements), of transcripts, and importing a transcript."""

from __future__ import annotations

import getpass
import socket
from typing import TYPE_CHECKING

from journal.errors import BadInput
from journal.events import (
    PitfallAcknowledged,
    PitfallUnacknowledged,
)
from journal.pitfalls import catalogue, judge
from journal.pitfalls.acks import TYPES as ACK_TYPES
from journal.pitfalls.acks import fold_ack
from journal.pitfalls.base import Finding, Tally
from journal.pitfalls.lifecycle import AckBook
from journal.pitfalls.subjects import from_journal
from journal.projections.timeline import Timeline
from journal.reading.subject import Subject
from journal.store import EventStore

if TYPE_CHECKING:
    from journal.notify import Notifier


def findings(store: EventStore, journal: str) -> list[Finding]:
    """The findings of a journal with their lifecycle (open, acknowledged, resolved), from its
    findings projection brought up to date (judging only what came since it was stored)."""
    from journal.pitfalls.ledger import Ledger

    return Ledger(store, journal).findings()


def journal_findings(store: EventStore, journal: str) -> tuple[list[Finding], Timeline]:
    """The findings of a journal (from its projection) and its timeline (replayed)."""
    found = findings(store, journal)
    from journal.projections.stored import current_timeline

    return found, current_timeline(store, journal)


def findings_in(found: list[Finding], timeline: Timeline) -> list[Finding]:
    """The findings about a part of a journal (``timeline`` cut by
    :func:`journal.projections.period.cut`): those of its runs, and those of no run that hold
    from an event within it (a figure that fell, a host's drift)."""
    if not timeline.items:
        return []
    first = min(item.seq for item in timeline.items)
    last = max(item.seq for item in timeline.items)
    return [
        f
        for f in found
        if f.run in timeline.runs
        or (f.run is None and f.seq is not None and first <= f.seq <= last)
    ]


def replayed_findings(store: EventStore, journal: str) -> tuple[list[Finding], Timeline]:
    """The findings of a journal judged from scratch over every event, and its timeline:
    what the findings projection must always agree with."""
    book = AckBook()
    records = []
    for rec in store.read(journal):
        fold_ack(book, rec)
        records.append(rec)
    subject, timeline = from_journal(journal, records)
    return judged(subject, book), timeline


def judged(subject: Subject, book: AckBook | None = None) -> list[Finding]:
    """Every finding of a journal's subject, with what became of it."""
    from journal.pitfalls.lifecycle import follow
    from journal.reading.bench import figures

    trusted = [f for f, block in figures(subject) if block is None or not block.problems()]
    return follow(subject.runs, trusted, judge(subject), book)


def tally(store: EventStore, journal: str) -> Tally:
    """How many findings are open (by severity), acknowledged and resolved (every finding
    counted, none of them read: the findings projection keeps the counts)."""
    from journal.pitfalls.ledger import Ledger

    return Ledger(store, journal).tally()


def open_findings(store: EventStore, journal: str, severity: str | None = None) -> list[Finding]:
    """The open findings of one severity, or of all (read from the pitfalls open only)."""
    from journal.pitfalls.ledger import Ledger

    return Ledger(store, journal).open_findings(severity)


def run_findings(store: EventStore, journal: str, runs: list[str]) -> list[Finding]:
    """Every finding about these step runs, in any state."""
    from journal.pitfalls.ledger import Ledger

    return Ledger(store, journal).findings_of(runs)


def findings_for_runs(
    store: EventStore, journal: str, runs: list[str], notifier: Notifier | None = None
) -> list[Finding]:
    """The open findings about these step runs (the verdict printed as a step ends), told to
    ``notifier`` (which sends those its channels ask for)."""
    from journal.pitfalls.ledger import Ledger

    found = [f for f in Ledger(store, journal).findings_of(runs) if f.is_open]
    if notifier is not None and found:
        notifier.findings(found)
    return found


def author_of(by: str | None) -> str:
    """Who acknowledges: ``by`` when given, else the local user at this machine."""
    return by.strip() if by and by.strip() else f"{getpass.getuser()}@{socket.gethostname()}"


def acknowledge(
    store: EventStore, journal: str, target: str, note: str, by: str | None = None
) -> int | None:
    """Record that ``target`` (a finding's key, or a pitfall id: every finding of it made so
    far) was looked at; how many findings a key covers (None for a pitfall id). An unknown key
    or id is refused, so a typo records nothing. Only the findings the target names are read."""
    from journal.pitfalls.ledger import Ledger

    if not note.strip():
        raise BadInput(
            "acknowledging a finding needs a note saying why it is fine or what was done"
        )
    ledger = Ledger(store, journal)
    covered: int | None
    if ":" in target:
        covered = sum(1 for f in ledger.findings_of([target.split(":", 1)[1]]) if f.key == target)
        found = covered > 0
    else:
        covered, found = None, target in catalogue() and ledger.has(target)
    if not found:
        _covered(ledger.findings(), journal, target)  # says what is wrong
    store.append(journal, [PitfallAcknowledged(finding=target, note=note, author=author_of(by))])
    return covered


def unacknowledge(
    store: EventStore, journal: str, target: str, by: str | None = None
) -> int | None:
    """Withdraw the acknowledgement of ``target`` (a key or a pitfall id, as acknowledged);
    how many findings a key covered (None for a pitfall id). One not in force is refused, so
    a typo records nothing."""
    from journal.pitfalls.ledger import Ledger

    book = AckBook()
    for rec in store.read(journal, types=ACK_TYPES):
        fold_ack(book, rec)
    if target not in book.acks:
        known = sorted(book.acks)
        raise BadInput(
            f"{target!r} is not acknowledged in the journal {journal!r}"
            + (f"; acknowledged there: {', '.join(known[:8])}" if known else "")
        )
    covered: int | None = None
    if ":" in target:
        found = Ledger(store, journal).findings_of([target.split(":", 1)[1]])
        covered = sum(1 for f in found if f.key == target)
    store.append(journal, [PitfallUnacknowledged(finding=target, author=author_of(by))])
    return covered


def _covered(found: list[Finding], journal: str, target: str) -> list[Finding]:
    covered = [f for f in found if target in (f.key, f.id)]
    if covered:
        return covered
    known = sorted({f.key for f in found} | {f.id for f in found})
    if target in catalogue():
        raise BadInput(f"the journal {journal!r} has no {target} finding to acknowledge")
    from journal.runbook import suggest

    raise BadInput(f"no finding {target!r} in the journal {journal!r}{suggest(target, known)}")
