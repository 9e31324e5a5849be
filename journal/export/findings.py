"""The pitfalls hit and the action items of the postmortem.

Each finding comes with the first lines of its evidence and with what the record says fixed
it, and nothing more: the acknowledgement note (what someone said was done, or why it is
fine), and facts found later in the record on the same host: the same step run again without
the finding, the expectations that failed after the finding's step passing after a later one,
or a figure that fell coming back. Open findings are the action items.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from journal.export.entries import DONE, note_dict
from journal.export.impact import recovered
from journal.pitfalls._install import named
from journal.pitfalls.base import SEVERITIES, Finding
from journal.projections.packages import normalize
from journal.projections.timeline import NoteView, StepRunView, Timeline

#: Evidence lines shown per finding (the rest are counted).
EVIDENCE_LINES = 6


def pitfall_dict(
    found: Finding,
    findings: list[Finding],
    timeline: Timeline,
    steps: list[StepRunView],
    changed: Mapping[str, list[dict[str, Any]]],
) -> dict[str, Any]:
    """A finding with its first evidence lines and what the record says fixed it;
    ``changed`` holds the package changes of each step run (the document's ``changes``)."""
    run = timeline.runs.get(found.run) if found.run else None
    later = []
    if run is not None:
        later = [
            *_rerun_clean(found, run, findings, timeline),
            *_expectations_pass(run, timeline),
            *_asked_changed_later(run, timeline, changed),
            *recovered(found, run, timeline, steps),
        ]
    return {
        "key": found.key,
        "id": found.id,
        "severity": found.severity,
        "title": found.title,
        "advice": found.advice,
        "host": found.host,
        "step": found.step,
        "run": found.run,
        "time": run.started if run else None,
        "evidence": [e.to_dict() for e in found.evidence[:EVIDENCE_LINES]],
        "evidence_more": max(0, len(found.evidence) - EVIDENCE_LINES),
        "open": found.acknowledged is None,
        "resolution": {"acknowledged": found.acknowledged, "later": later},
    }


def _later_runs(run: StepRunView, timeline: Timeline) -> list[StepRunView]:
    return [r for r in timeline.step_runs() if r.host == run.host and r.seq > run.seq]


def _rerun_clean(
    found: Finding, run: StepRunView, findings: list[Finding], timeline: Timeline
) -> list[dict[str, Any]]:
    """The first later run of the same step on the same host that went through without it
    (for an imported command, the very same command: its step name is only its first words)."""
    for other in _later_runs(run, timeline):
        if other.step != run.step or other.status not in DONE:
            continue
        if (run.imported or other.imported) and other.command != run.command:
            continue
        if any(f.run == other.run_id and f.id == found.id for f in findings):
            continue
        return [
            _fact(
                other,
                f"{other.step} ran again on {other.host} and {other.status} without {found.id}.",
            )
        ]
    return []


def _expectations_pass(run: StepRunView, timeline: Timeline) -> list[dict[str, Any]]:
    """The first later run on the host where every expectation that failed here passed."""
    failed = {e.key for e in run.expectations if not e.ok}
    if not failed:
        return []
    for other in _later_runs(run, timeline):
        checks = {e.key: e for e in other.expectations if e.key in failed}
        if set(checks) == failed and all(e.ok for e in checks.values()):
            shown = ", ".join(f"{key} = {checks[key].actual}" for key in sorted(failed))
            return [
                _fact(
                    other,
                    f"after {other.step} on {other.host}, the expectations that failed here "
                    f"passed: {shown}.",
                )
            ]
    return []


def _asked_changed_later(
    run: StepRunView, timeline: Timeline, changed: Mapping[str, list[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """For an install that changed none of the packages it named: the first later run on the
    host that did change one of them."""
    asked = named(run.command).names
    if not asked or any(normalize(p["name"]) in asked for p in changed.get(run.run_id, [])):
        return []
    for other in _later_runs(run, timeline):
        moved = [p for p in changed.get(other.run_id, []) if normalize(p["name"]) in asked]
        if moved:
            shown = "; ".join(p["text"] for p in moved[:3])
            more = f" and {len(moved) - 3} more" if len(moved) > 3 else ""
            return [
                _fact(
                    other,
                    f"{other.step} on {other.host} changed what {run.step} had asked for: "
                    f"{shown}{more}.",
                )
            ]
    return []


def _fact(run: StepRunView, text: str) -> dict[str, Any]:
    return {
        "run": run.run_id,
        "step": run.step,
        "host": run.host,
        "time": run.started,
        "text": text,
    }


def action_items(findings: list[Finding], notes: list[NoteView]) -> list[dict[str, Any]]:
    """Open findings, worst first, then notes tagged ``action``."""
    order = {s: i for i, s in enumerate(reversed(SEVERITIES))}
    items: list[dict[str, Any]] = [
        {
            "kind": "finding",
            "key": f.key,
            "id": f.id,
            "severity": f.severity,
            "title": f.title,
            "advice": f.advice,
            "host": f.host,
            "step": f.step,
        }
        for f in sorted(
            (f for f in findings if f.acknowledged is None), key=lambda f: order[f.severity]
        )
    ]
    items.extend({"kind": "note", **note_dict(n)} for n in notes if "action" in n.tags)
    return items
