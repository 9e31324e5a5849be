"""The judged-run vocabulary: what the readers and the detectors read (a :class:`Subject` of
:class:`Run` s with their output) and the lines they quote as :class:`Evidence`.

A :class:`Subject` is either a projected journal (step runs with snapshots and probes, where a
verdict can be certain) or a transcript (commands and their pasted output, where the output
alone must do); :mod:`journal.pitfalls.subjects` builds one from either.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from journal.projections.packages import PackageDiff

#: How much of one output line evidence quotes (pages, exports and JSON show the evidence).
EVIDENCE_CHARS = 20_000


@dataclass(frozen=True)
class Evidence:
    """A line (or a fact) that shows a finding: the event it is stored in, its line number
    (within the step's output in a journal, within the file in a transcript) and its text."""

    text: str
    line: int | None = None
    event: int | None = None
    run: str | None = None
    stream: str | None = None

    def to_dict(self, with_event: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"line": self.line, "text": self.text}
        if with_event:
            out["event"] = self.event
            out["run"] = self.run
        return out


@dataclass(frozen=True)
class Segment:
    """Where one stored chunk (or transcript block) sits in a run's output text."""

    start: int
    stream: str
    event: int | None
    first_line: int


@dataclass
class Run:
    """One command and what is known of it: a step run of a journal or a transcript command."""

    key: str
    step: str
    host: str
    command: str
    text: str = ""
    segments: list[Segment] = field(default_factory=list)
    exit_code: int | None = None
    status: str | None = None
    event: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    diff: PackageDiff | None = None
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    probes: dict[str, dict[str, Any]] = field(default_factory=dict)
    probe_events: dict[str, int] = field(default_factory=dict)
    expectations: list[Any] = field(default_factory=list)
    imported: bool = False
    reason: str | None = None
    signal: str | None = None
    prompt_line: int | None = None  # a transcript command's own line in the file
    prompt_text: str = ""  # and that line as pasted
    #: a rollback run's target (``StepStarted.rollback``), None for any other run
    rollback: dict[str, Any] | None = None
    #: a command typed in `journal shell` (``StepStarted.interactive``)
    interactive: bool = False
    #: the package snapshots read in this run: ``before``, ``after``, or ``probe`` for one
    #: taken on its own (`journal run probe packages`)
    snapshotted: tuple[str, ...] = ()
    #: the snapshots and probes that could not be read: ``{"probe", "phase", "error",
    #: "event"}`` each (journal.projections.unread)
    unread: list[dict[str, Any]] = field(default_factory=list)
    _newlines: list[int] | None = field(default=None, repr=False)
    _seen: dict[str, bool] = field(default_factory=dict, repr=False)
    _starts: list[int] | None = field(default=None, repr=False)
    _facts: list[Any] | None = field(default=None, repr=False)  # journal.reading.printed

    def has(self, *needles: str) -> bool:
        """Whether the output holds any of these strings (a fast test before a regex);
        remembered per needle, since many detectors ask about the same words."""
        seen = self._seen
        for needle in needles:
            found = seen.get(needle)
            if found is None:
                found = seen[needle] = needle in self.text
            if found:
                return True
        return False

    def _line_index(self) -> list[int]:
        if self._newlines is None:
            self._newlines = [m.start() for m in re.finditer("\n", self.text)]
        return self._newlines

    def line_at(self, pos: int) -> Evidence:
        """The evidence for the line holding character ``pos`` of the output."""
        newlines = self._line_index()
        index = bisect.bisect_right(newlines, pos - 1)  # lines ended before pos
        start = newlines[index - 1] + 1 if index else 0
        end = newlines[index] if index < len(newlines) else len(self.text)
        seg = None
        if self.segments:
            if self._starts is None:
                self._starts = [s.start for s in self.segments]
            seg = self.segments[max(0, bisect.bisect_right(self._starts, pos) - 1)]
        if seg is None:
            number = index + 1
        else:
            before_seg = bisect.bisect_right(newlines, seg.start - 1)
            number = seg.first_line + (index - before_seg)
        shown = self.text[start : min(end, start + EVIDENCE_CHARS)].rstrip("\r")
        if end - start > EVIDENCE_CHARS:  # a line too long to quote whole: its start, counted
            shown += f" … ({end - start - EVIDENCE_CHARS:,} more characters)"
        return Evidence(
            shown,
            number,
            seg.event if seg else self.event,
            self.key,
            seg.stream if seg else None,
        )

    def grep(
        self, pattern: re.Pattern[str], *needles: str, limit: int = 20
    ) -> list[tuple[re.Match[str], Evidence]]:
        """Matches of ``pattern`` in the output with their lines; skipped at once when none
        of ``needles`` (strings every match contains) is in the text."""
        if needles and not self.has(*needles):
            return []
        found = []
        for match in pattern.finditer(self.text):
            found.append((match, self.line_at(match.start())))
            if len(found) >= limit:
                break
        return found

    def command_evidence(self) -> Evidence:
        """The command itself as evidence."""
        if self.prompt_line is not None:
            return Evidence(self.prompt_text, self.prompt_line, None, self.key, None)
        return Evidence(f"$ {self.command}", None, self.event, self.key, None)

    def probe(self, name: str) -> dict[str, Any] | None:
        return self.probes.get(name)


@dataclass
class Subject:
    """What the detectors judge: the runs in order, and whether they come from a journal."""

    source: str  # "journal" or "transcript"
    runs: list[Run]
    name: str = ""
    metrics: list[Any] = field(default_factory=list)
    _index: dict[int, int] | None = field(default=None, repr=False)
    _printed: dict[int, Any] | None = field(default=None, repr=False)  # reading.printed

    @property
    def journal(self) -> bool:
        return self.source == "journal"

    def later(self, run: Run) -> Iterator[Run]:
        """The runs after ``run`` on the same host."""
        if self._index is None or len(self._index) != len(self.runs):
            self._index = {id(r): i for i, r in enumerate(self.runs)}
        start = self._index.get(id(run))
        if start is None:
            return
        for other in self.runs[start + 1 :]:
            if other.host == run.host:
                yield other
