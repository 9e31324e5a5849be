"""Acknowledgements folded from the journal: the one fold of PitfallAcknowledged and
PitfallUnacknowledged events that replaying the findings (:mod:`journal.service.findings`),
the web's fold (:mod:`journal.web.fold`) and the findings projection
(:mod:`journal.pitfalls.ledger`) share, and the book in force as the projection stores it."""

from __future__ import annotations

from typing import Any

from journal.events import PitfallAcknowledged, PitfallUnacknowledged
from journal.mapper import Recorded, of_plain, to_plain
from journal.pitfalls.base import Acknowledgement
from journal.pitfalls.lifecycle import AckBook

#: The event types :func:`fold_ack` folds (what a reader of acknowledgements only asks for).
TYPES = [PitfallAcknowledged.type, PitfallUnacknowledged.type]


def fold_ack(book: AckBook, rec: Recorded) -> bool:
    """Fold an acknowledgement, or its withdrawal, into ``book``; whether ``rec`` was one."""
    event = rec.event
    if isinstance(event, PitfallAcknowledged):
        book.acknowledged(event.finding, event.note, event.author, rec.ts, rec.seq)
    elif isinstance(event, PitfallUnacknowledged):
        book.withdrawn(event.finding)
    else:
        return False
    return True


def book_json(book: AckBook) -> dict[str, Any]:
    """The book as a stored row: target -> its acknowledgement."""
    return {target: to_plain(ack) for target, ack in book.acks.items()}


def book_of(row: dict[str, Any] | None) -> AckBook:
    """The book a stored row holds."""
    return AckBook({target: of_plain(Acknowledgement, d) for target, d in (row or {}).items()})
