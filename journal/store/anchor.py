"""Anchors: the chain's head written down somewhere the database's owner cannot rewrite.

The hash chain shows an event changed in the middle, but whoever can write the database can
also seal the whole chain again from the changed event on, rewrite the newest event with its
one hash, or empty the table: each leaves a chain that holds. An anchor is the head (sequence
number and hash) copied into a witness file elsewhere (another host, a ticket, a WORM bucket);
`journal verify --witness` then holds the chain against every anchor, each of which must still
be a prefix of it.

A witness file is plain text, one anchor per line, appended to and never rewritten::

    journal-anchor seq=1234 hash=<64 hex> first=<64 hex> at=2026-12-01T18:00:00.123456Z db=…

``first`` is the hash of event 1, which names the chain (a witness holding another database's
anchors says so); ``db`` is where the database was, for people. Blank lines and lines starting
with ``#`` are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from journal.errors import BadInput

MARK = "journal-anchor"

_LINE = re.compile(
    rf"{MARK} seq=(?P<seq>[1-9][0-9]{{0,17}}) hash=(?P<hash>[0-9a-f]{{64}}) "
    r"first=(?P<first>[0-9a-f]{64}) at=(?P<at>\S+)(?: db=(?P<db>.*))?\Z"
)


@dataclass(frozen=True)
class Anchor:
    """One recorded head: event ``seq`` had ``hash``; event 1 had ``first``."""

    seq: int
    hash: str
    first: str
    at: str
    db: str = ""
    line: int = 0  # where it stands in its witness file, for messages

    def format(self) -> str:
        """The witness file line (without its newline)."""
        db = self.db.replace("\n", " ").replace("\r", " ")
        return f"{MARK} seq={self.seq} hash={self.hash} first={self.first} at={self.at} db={db}"


def parse(text: str, where: str) -> list[Anchor]:
    """The anchors of a witness file's text, in the order written; BadInput naming the line
    of anything that is not an anchor."""
    anchors = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        found = _LINE.match(line)
        if found is None:
            shown = line if len(line) <= 120 else line[:117] + "..."
            raise BadInput(
                f"{where}, line {number} is not a journal anchor: {shown!r}; a witness holds "
                f"lines written by `journal anchor` ({MARK} seq=N hash=… first=… at=… db=…)"
            )
        anchors.append(
            Anchor(
                seq=int(found["seq"]),
                hash=found["hash"],
                first=found["first"],
                at=found["at"],
                db=found["db"] or "",
                line=number,
            )
        )
    if not anchors:
        raise BadInput(
            f"{where} holds no anchor, so it proves nothing; `journal anchor --witness "
            f"{where}` writes the head there"
        )
    return anchors
