"""What detectors read (runs with their output, diffs, probes) and what they return (findings).

A :class:`Subject` is either a projected journal (step runs with snapshots and probes, where a
verdict can be certain) or a transcript (commands and their pasted output, where the output
alone must do). Detectors are small functions ``detect(subject) -> Iterable[Finding]``.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from journal.projections.packages import PackageDiff

SEVERITIES = ("info", "warning", "error")
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


#: The states of a finding (see :mod:`journal.pitfalls.lifecycle`).
STATES = ("open", "acknowledged", "resolved")


@dataclass(frozen=True)
class Acknowledgement:
    """Someone looked at a finding: their note, who they are, when, the event saying so, and
    what they named (the finding's key, or its pitfall id for every finding of it)."""

    note: str
    by: str
    at: str
    event: int
    target: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "note": self.note,
            "by": self.by,
            "at": self.at,
            "event": self.event,
            "target": self.target,
        }


@dataclass(frozen=True)
class Resolution:
    """What shows a finding's condition gone: a later step run, probe or figure (``kind``),
    where it happened and, in a sentence, what it showed (``why``)."""

    kind: str  # "run", "probe" or "figure"
    run: str | None
    step: str | None
    host: str | None
    event: int | None
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "step": self.step,
            "host": self.host,
            "kind": self.kind,
            "event": self.event,
            "why": self.why,
        }


@dataclass(frozen=True)
class Finding:
    """A pitfall found: which (``id``), how bad (``severity``), why (``title``), what to do
    (``advice``) and the lines that show it (``evidence``); then what became of it (``state``:
    open, acknowledged by hand, or resolved by a later run, probe or figure)."""

    id: str
    severity: str
    title: str
    advice: str
    evidence: tuple[Evidence, ...] = ()
    run: str | None = None
    host: str | None = None
    step: str | None = None
    acknowledged: Acknowledgement | None = None
    resolved_by: Resolution | None = None
    regression_of: str | None = None  # the key of the earlier finding this one repeats
    #: the event from which the finding holds (its run's start, or the figure that fell)
    seq: int | None = field(default=None, compare=False)
    #: what a detector tells the lifecycle about the condition (asked-for packages, a series)
    facts: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        assert self.severity in SEVERITIES, self.severity

    @property
    def state(self) -> str:
        """``resolved`` once a later fact shows the condition gone, else ``acknowledged``
        once someone acknowledged it, else ``open``."""
        if self.resolved_by is not None:
            return "resolved"
        return "acknowledged" if self.acknowledged is not None else "open"

    @property
    def is_open(self) -> bool:
        return self.state == "open"

    @property
    def key(self) -> str:
        """Identifies this finding for acknowledgement: ``id:run`` (``id`` when it has none)."""
        return f"{self.id}:{self.run}" if self.run else self.id

    def to_dict(self, with_event: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "severity": self.severity,
            "title": self.title,
            "advice": self.advice,
            "evidence": [e.to_dict(with_event) for e in self.evidence],
        }
        if with_event:
            out.update(
                key=self.key,
                run=self.run,
                host=self.host,
                step=self.step,
                state=self.state,
                resolved_by=self.resolved_by.to_dict() if self.resolved_by else None,
                acknowledged=self.acknowledged.to_dict() if self.acknowledged else None,
                regression_of=self.regression_of,
            )
        else:
            out.update(step=self.step, host=self.host)
        return out


@dataclass(frozen=True)
class Tally:
    """How many findings a journal has in each state: the open ones by severity."""

    open: dict[str, int]
    acknowledged: int
    resolved: int

    @classmethod
    def of(cls, findings: Iterable[Finding]) -> Tally:
        open_by = {severity: 0 for severity in reversed(SEVERITIES)}
        counts = {state: 0 for state in STATES}
        for found in findings:
            counts[found.state] += 1
            if found.state == "open":
                open_by[found.severity] += 1
        return cls(open_by, counts["acknowledged"], counts["resolved"])


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
    _facts: list[Any] | None = field(default=None, repr=False)  # journal.pitfalls._printed

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
    _printed: dict[int, Any] | None = field(default=None, repr=False)  # pitfalls._printed

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


def finding(
    id: str,
    severity: str,
    title: str,
    advice: str,
    evidence: Iterable[Evidence],
    run: Run | None = None,
    **facts: Any,
) -> Finding:
    """A Finding about ``run`` (host, step, run key and position filled in from it);
    ``facts`` tell the lifecycle what a later fact must show to resolve it."""
    if run is not None:
        facts.setdefault("command", run.command)
        facts.setdefault("imported", run.imported)
        if run.interactive:
            facts.setdefault("interactive", True)
    return Finding(
        id,
        severity,
        title,
        advice,
        tuple(evidence),
        run=run.key if run else None,
        host=run.host if run else None,
        step=run.step if run else None,
        seq=run.event if run else None,
        facts=facts,
    )
