"""The timeline section of the postmortem: each item of the record, with its time, how long
after the start of the record it came, and for a step run how it ended and what it found.

An imported transcript's commands carry the time their transcript dates them at, else the
time of the import; they are marked ``imported``, and have no duration where the transcript
gave no times.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from journal.probes.summary import summary as probe_summary
from journal.projections.timeline import (
    HostKeyView,
    MetricView,
    NoteView,
    ProbeView,
    StepRunView,
)
from journal.projections.unread import of_run


def parse_ts(ts: str) -> datetime:
    """A stored timestamp (``2026-02-26T09:41:02.123456Z``) as an aware datetime."""
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


def elapsed(start: str | None, ts: str | None) -> float | None:
    if not start or not ts:
        return None
    return round((parse_ts(ts) - parse_ts(start)).total_seconds(), 3)


def note_dict(note: NoteView) -> dict[str, Any]:
    """A note as the document carries it."""
    return {
        "seq": note.seq,
        "time": note.ts,
        "text": note.text,
        "tags": list(note.tags),
        "author": note.author,
        "host": note.host,
    }


def entry(
    item: Any,
    start: str | None,
    by_run: Mapping[str, list[str]],
    link: Callable[[str], str | None] = lambda run: None,
) -> dict[str, Any]:
    """One timeline item as the document carries it (``by_run``: the keys of each run's
    findings); ``link`` gives a run's page (a rollback
    links the run whose packages it put back)."""
    if isinstance(item, StepRunView):
        return {
            "kind": "rollback"
            if item.rollback
            else "benchmark"
            if item.benchmark is not None or item.metrics
            else "step",
            "rollback": None
            if not item.rollback
            else {
                "to": item.rollback.get("to"),
                "run": item.rollback.get("run"),
                "phase": item.rollback.get("phase"),
                "packages": len(item.rollback.get("packages") or {}),
                "url": link(item.rollback.get("run") or ""),
            },
            "seq": item.seq,
            "time": item.started,
            "elapsed": elapsed(start, item.started),
            "finished": item.finished,
            "duration": item.duration,
            "step": item.step,
            "host": item.host,
            "run": item.run_id,
            "command": item.command,
            "status": item.status,
            "exit_code": item.exit_code,
            "reason": item.reason,
            "imported": item.imported,
            "packages_changed": None if item.diff is None else len(item.diff.changes),
            "probes": [probe_dict(p) for p in item.probes if p.probe != "packages"],
            # snapshots and probes that could not be read (journal.projections.unread)
            "unread": [u.to_dict() for u in of_run(item)],
            "expectations": [
                {
                    "key": e.key,
                    "expected": e.expected,
                    "actual": e.actual,
                    "ok": e.ok,
                    "reason": e.reason,
                }
                for e in item.expectations
            ],
            "metrics": [metric_dict(m) for m in item.metrics],
            "findings": list(by_run.get(item.run_id, ())),
        }
    base = {"seq": item.seq, "time": item.ts, "elapsed": elapsed(start, item.ts)}
    if isinstance(item, NoteView):
        return {"kind": "note", **base, **note_dict(item)}
    if isinstance(item, ProbeView):
        return {"kind": "probe", **base, **probe_dict(item)}
    if isinstance(item, MetricView):
        return {"kind": "metric", **base, **metric_dict(item)}
    assert isinstance(item, HostKeyView)
    return {
        "kind": "host-key",
        **base,
        "host": item.host,
        "target": item.target,
        "key_type": item.key_type,
        "fingerprint": item.fingerprint,
    }


def probe_dict(probe: ProbeView) -> dict[str, Any]:
    return {
        "probe": probe.probe,
        "phase": probe.phase,
        "host": probe.host,
        "summary": probe_summary(probe.probe, probe.result) if probe.result else None,
        "error": probe.error,
        "seconds": probe.seconds,
        "expectations_failed": sum(1 for e in probe.expectations if not e.ok),
    }


def metric_dict(metric: MetricView) -> dict[str, Any]:
    return {
        "name": metric.name,
        "value": metric.value,
        "unit": metric.unit,
        "labels": dict(metric.labels),
        "host": metric.host,
        "source": metric.source,
        "invalid": metric.invalid,
    }
