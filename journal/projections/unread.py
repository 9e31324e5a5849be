"""Snapshots and probes that could not be read: which one, around which run, where, and why.

A package snapshot or a probe that failed is recorded as a ``ProbeRecorded`` with no result
and the ``error`` that says why (a failed snapshot is the ``packages`` probe's). Every view
that shows a run or a host (the run page, `journal show`, `journal log`, `journal status`, the
story and the postmortem) says it in the words made here, so a run whose snapshot failed never
reads as a plain "succeeded, no package change".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from journal.projections.timeline import ProbeView, StepRunView

#: The most characters of an error one line shows (the finding and the JSON keep it whole).
SHORT = 400


@dataclass(frozen=True)
class Unread:
    """One snapshot or probe that could not be read."""

    probe: str  # "packages" for a package snapshot
    phase: str | None  # "before" / "after" its run, "probe" on its own, None: not known
    host: str
    error: str
    seq: int
    run: str | None = None
    step: str | None = None

    @property
    def snapshot(self) -> bool:
        return self.probe == "packages"

    @property
    def what(self) -> str:
        """``packages snapshot`` or ``torch-env probe``."""
        return "packages snapshot" if self.snapshot else f"{self.probe} probe"

    def where(self, step: bool = True) -> str:
        """``after install-numpy`` (``after`` without ``step``), ``on its own``."""
        if self.run is None or self.phase == "probe":
            return "on its own"
        if self.phase is None:
            return f"of {self.step}" if step and self.step else "of the step"
        return f"{self.phase} {self.step}" if step and self.step else f"{self.phase} the step"

    def text(self, step: bool = True) -> str:
        """``packages snapshot after install-numpy failed: the probe failed with …``."""
        return f"{self.what} {self.where(step)} failed: {short(self.error)}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "probe": self.probe,
            "phase": self.phase,
            "host": self.host,
            "run": self.run,
            "step": self.step,
            "error": self.error,
            "what": self.what,
            "where": self.where(),
            "short": short(self.error),
            "text": self.text(),
        }


def texts(misses: list[Unread], step: bool = True) -> list[str]:
    """The failed reads in words, those of one run that failed alike said once: ``packages
    snapshots before and after install-numpy failed: …``."""
    out: list[str] = []
    groups: dict[tuple[Any, ...], list[Unread]] = {}
    for miss in misses:
        key = (miss.run or f"~{miss.seq}", miss.probe, miss.error)  # one on its own: alone
        groups.setdefault(key, []).append(miss)
    for group in groups.values():
        phases = [m.phase for m in group]
        first = group[0]
        if len(group) > 1 and set(phases) == {"before", "after"}:
            where = f" {first.step}" if step and first.step else " the step"
            out.append(f"{first.what}s before and after{where} failed: {short(first.error)}")
        else:
            out += [m.text(step) for m in group]
    return out


def short(error: str) -> str:
    """An error on one line: its first line and, for a longer one (a traceback), its last,
    which says what broke; cut at :data:`SHORT` characters."""
    lines = [" ".join(line.split()) for line in error.splitlines() if line.strip()]
    if not lines:
        return "(no reason given)"
    shown = lines[0] if len(lines) == 1 else f"{lines[0]} … {lines[-1]}"
    return shown if len(shown) <= SHORT else shown[: SHORT - 1] + "…"


def of_probe(probe: ProbeView, run: StepRunView | None = None) -> Unread | None:
    """The probe as a failed read, or None when it read something."""
    if probe.result is not None:
        return None
    return Unread(
        probe.probe,
        probe.phase,
        probe.host,
        probe.error or "the probe returned nothing",
        probe.seq,
        run.run_id if run is not None else probe.run,
        run.step if run is not None else None,
    )


def of_run(run: StepRunView) -> list[Unread]:
    """The snapshots and probes of a step run that could not be read, in order."""
    found = (of_probe(p, run) for p in run.probes)
    return [u for u in found if u is not None]


def snapshots_of(run: StepRunView) -> list[Unread]:
    """The run's package snapshots that could not be read."""
    return [u for u in of_run(run) if u.snapshot]
