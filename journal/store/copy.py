"""`journal db copy`: a database's events moved to another database, on any backend.

The hash chain runs over every journal of a database in global order, so what can be copied
with its hashes intact is the whole chain: every event, its sequence number, timestamp,
payload and hash byte for byte, into a database that holds nothing yet, or that holds the
start of this very chain (an earlier copy, cut short or older): then only the events after it
are added, each checked to seal the one before. Anything else in the target is refused.

One journal of several (``--journal NAME``) cannot keep its hashes: they seal other journals'
events too. Its events are copied with their timestamps and payloads and sealed anew in the
target's chain, and a note recorded after them says where they came from, which events they
were there, and the source chain's head at the time, so the copy can be traced back to it.
A journal that is the source's only one is copied whole, hashes intact.
"""

from __future__ import annotations

from dataclasses import dataclass

from journal.errors import BadInput
from journal.events import NoteAdded
from journal.store import ChainBreak, EventStore
from journal.store.engine import shown

#: Rows moved per transaction: a copy cut short leaves the start of the chain, which a second
#: run continues.
BATCH = 2000


@dataclass(frozen=True)
class CopyReport:
    """What a copy did: events added, which journals, and whether the hashes were kept."""

    copied: int
    journals: list[str]
    hashes_kept: bool
    already_there: int = 0


def check_journal(source: EventStore, journal: str | None) -> list[str]:
    """The source's journals; BadInput when ``journal`` is given and is not one of them."""
    names = source.journals()
    if journal is not None and journal not in names:
        raise BadInput(
            f"the source {shown(source.db)} holds no journal {journal!r} "
            f"(it holds {', '.join(map(repr, names)) or 'none'})"
        )
    return names


def copy_events(source: EventStore, target: EventStore, journal: str | None = None) -> CopyReport:
    """Copy every event of ``source`` (or one journal's) into ``target``; see the module."""
    names = check_journal(source, journal)
    if journal is None or names == [journal]:
        return _copy_chain(source, target, names)
    return _copy_journal(source, target, journal)


def _copy_chain(source: EventStore, target: EventStore, names: list[str]) -> CopyReport:
    """Every row as it is; the target empty or holding the start of the same chain."""
    there = target.last()
    after = 0
    if there is not None:
        if source.row(there.seq) != there:
            raise BadInput(
                f"the target {shown(target.db)} already holds {target.count()} events that are "
                f"not the start of the source's chain, so the source's hashes cannot continue "
                "it: copy into an empty database (or copy one journal with --journal NAME, "
                "sealed anew)"
            )
        after = there.seq
    copied = 0
    for rows in source.rows(after=after, batch=BATCH):
        try:
            target.import_rows(rows)
        except ChainBreak as exc:
            raise BadInput(
                f"the source's chain does not continue in {shown(target.db)}: {exc}; "
                f"nothing after event {exc.row.seq - 1} was copied (`journal verify` on the "
                "source says more)"
            ) from None
        copied += len(rows)
    return CopyReport(copied, names, hashes_kept=True, already_there=target.count() - copied)


def _copy_journal(source: EventStore, target: EventStore, journal: str) -> CopyReport:
    """One journal's rows sealed anew in the target's chain, then a note saying so."""
    if journal in target.journals():
        raise BadInput(
            f"the target {shown(target.db)} already holds a journal {journal!r}: two "
            "histories of one journal cannot be merged; copy into another database"
        )
    head = source.last()
    assert head is not None  # the journal has events
    copied, first, last = 0, 0, 0
    for rows in source.rows(journal, batch=BATCH):
        target.append_rows(rows)
        first, last = first or rows[0].seq, rows[-1].seq
        copied += len(rows)
    target.append(
        journal,
        [
            NoteAdded(
                text=(
                    f"copied from {shown(source.db)} by `journal db copy`: the {copied} events "
                    f"of this journal before this note were events {first} to {last} there, "
                    "sealed anew here because that chain also holds other journals; it ended "
                    f"at event {head.seq} with hash {head.hash}"
                ),
                author="journal db copy",
                tags=["provenance"],
            )
        ],
    )
    return CopyReport(copied, [journal], hashes_kept=False)
