"""Sealing rows into the hash chain, and checking that rows brought from elsewhere continue it.

Every backend's writer calls these under its write lock, once it has read the newest hash.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from journal.mapper import canonical, chain_hash
from journal.store.schema import StoredRow

#: An event ready to be sealed: (type, version, host, run_id, payload JSON, ts or None). A
#: None ts is stamped when sealed, under the write lock, so timestamps follow the sequence.
Item = tuple[str, int, str | None, str | None, str, str | None]

#: A sealed row in insert order: (journal, type, version, ts, host, run_id, payload, hash).
Sealed = tuple[str, str, int, str, str | None, str | None, str, str]


class ChainBreak(ValueError):
    """Rows that do not continue the chain they were to be added to (`journal db copy`)."""

    def __init__(self, row: StoredRow, reason: str) -> None:
        super().__init__(f"event {row.seq} ({row.type} in journal {row.journal!r}) {reason}")
        self.row = row


#: The second last stamped and its text ("2026-12-04T23:16:28"), made again when it changes.
_second: tuple[int, str] = (-1, "")


def utc_now() -> str:
    """The current UTC time as stored: ISO 8601 with microseconds and a ``Z``
    (2026-12-04T23:16:28.417058Z, as ``datetime.isoformat`` writes it)."""
    global _second
    seconds, micros = divmod(time.time_ns() // 1000, 1_000_000)
    at, text = _second
    if at != seconds:  # a fourth of the time of datetime's, stamped for every event appended
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _second = (seconds, text)
    return f"{text}.{micros:06d}Z"


def seal(prev: str, journal: str, items: Sequence[Item]) -> list[Sealed]:
    """The rows for ``items``, each sealing the one before, the first sealing ``prev``."""
    rows = []
    for type_, version, host, run_id, payload, ts in items:
        stamp = ts or utc_now()
        prev = chain_hash(prev, canonical(journal, type_, version, stamp, host, run_id, payload))
        rows.append((journal, type_, version, stamp, host, run_id, payload, prev))
    return rows


def check_continues(last_seq: int, last_hash: str, rows: Sequence[StoredRow]) -> None:
    """Raise ChainBreak unless ``rows`` come after ``last_seq`` in order and each one's hash
    seals the one before it, the first sealing ``last_hash``."""
    prev = last_hash
    for row in rows:
        if row.seq <= last_seq:
            raise ChainBreak(row, f"does not come after event {last_seq}")
        expected = chain_hash(
            prev,
            canonical(
                row.journal, row.type, row.version, row.ts, row.host, row.run_id, row.payload
            ),
        )
        if expected != row.hash:
            onto = f"event {last_seq}" if last_seq else "the start of the chain"
            raise ChainBreak(row, f"does not chain onto {onto}")
        last_seq, prev = row.seq, row.hash
