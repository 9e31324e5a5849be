"""What detectors return: findings, with what became of them (acknowledged, resolved).

Detectors are small functions ``detect(subject) -> Iterable[Finding]``; what they read (a
:class:`~journal.reading.subject.Subject` of runs, the :class:`~journal.reading.subject.Evidence`
they quote) is :mod:`journal.reading.subject`'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from journal.reading.subject import Evidence, Run

SEVERITIES = ("info", "warning", "error")

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
