"""What of a long output the detectors are shown: its first and its last few megabytes.

A compile log or a benchmark that prints 200 MB would otherwise be held whole (its events,
then its text) to be judged, and judged slowly. The detectors look at how a command began
(what it was asked, what it resolved) and how it ended (the error, the summary), so each
run's output is kept up to :data:`HEAD_BYTES` from its start and :data:`TAIL_BYTES` before
its end; the chunks in between are replaced, as they are read, by :class:`Skipped` markers
that carry their line count, so the evidence after them keeps its true line numbers.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from journal.events import OutputChunk
from journal.mapper import Recorded
from journal.output import chunk_text

HEAD_BYTES = 4 * 1024 * 1024
TAIL_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Skipped:
    """Output chunks of a run left out of judging: how many lines they held."""

    run: str
    newlines: int
    type = "Skipped"

    @property
    def run_id(self) -> str:
        return self.run


class Window:
    """Collects records in order, keeping of each run's output its head and tail only."""

    def __init__(self) -> None:
        self.records: list[Recorded] = []
        self._head: dict[str, int] = {}
        self._tail: dict[str, deque[tuple[int, int]]] = {}
        self._tail_bytes: dict[str, int] = {}

    def add(self, rec: Recorded) -> None:
        event = rec.event
        if not isinstance(event, OutputChunk):
            self.records.append(rec)
            return
        run, size = event.run, event.size
        if self._head.get(run, 0) < HEAD_BYTES:
            self._head[run] = self._head.get(run, 0) + size
            self.records.append(rec)
            return
        tail = self._tail.setdefault(run, deque())
        tail.append((len(self.records), size))
        self.records.append(rec)
        self._tail_bytes[run] = self._tail_bytes.get(run, 0) + size
        while len(tail) > 1 and self._tail_bytes[run] - tail[0][1] >= TAIL_BYTES:
            index, dropped = tail.popleft()
            self._tail_bytes[run] -= dropped
            old = self.records[index]
            assert isinstance(old.event, OutputChunk)
            newlines = chunk_text(old.event).count("\n")
            self.records[index] = Recorded(
                old.seq,
                old.journal,
                old.ts,
                Skipped(run, newlines),
                old.hash,  # type: ignore[arg-type]
            )

    def extend(self, records: object) -> Window:
        for rec in records:  # type: ignore[attr-defined]
            self.add(rec)
        return self


class KeptLines:
    """A long output's lines as :class:`Window` keeps a recorded one: its first lines up to
    :data:`HEAD_BYTES` and its last up to :data:`TAIL_BYTES` (characters, as read), with how
    many lines between them were left out; added one at a time (a transcript command's
    output, as :func:`journal.transcript.commands` reads it)."""

    def __init__(self) -> None:
        self.head: list[str] = []
        self.tail: deque[str] = deque()
        self.skipped = 0
        self._head_size = 0
        self._tail_size = 0

    def append(self, line: str) -> None:
        if self._head_size < HEAD_BYTES:
            self.head.append(line)
            self._head_size += len(line) + 1
            return
        self.tail.append(line)
        self._tail_size += len(line) + 1
        while len(self.tail) > 1 and self._tail_size - len(self.tail[0]) - 1 >= TAIL_BYTES:
            self._tail_size -= len(self.tail.popleft()) + 1
            self.skipped += 1

    def parts(self) -> list[tuple[str, int]]:
        """The text kept, as (text, lines before it): the head, then the tail after the lines
        left out (each part ending with a newline; none for no output)."""
        if not self.head:
            return []
        parts = [("\n".join(self.head) + "\n", 0)]
        if self.tail:
            parts.append(("\n".join(self.tail) + "\n", len(self.head) + self.skipped))
        return parts
