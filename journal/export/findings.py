"""The pitfalls hit and the action items of the postmortem.

Each finding comes with the first lines of its evidence and with what became of it, as the
lifecycle (:mod:`journal.pitfalls.lifecycle`) found it in the record: the later run, probe
or figure that resolved it, and the acknowledgement (note, who, when). Open findings are the
action items, each pitfall once, with the hosts and runs it covers.
"""

from __future__ import annotations

from typing import Any

from journal.export.entries import note_dict
from journal.pitfalls.base import SEVERITIES, Finding
from journal.projections.timeline import NoteView, Timeline

#: Evidence lines shown per finding (the rest are counted).
EVIDENCE_LINES = 6


def pitfall_dict(found: Finding, timeline: Timeline) -> dict[str, Any]:
    """A finding with its first evidence lines and what became of it."""
    run = timeline.runs.get(found.run) if found.run else None
    later = []
    if found.resolved_by is not None:
        by = found.resolved_by
        done = timeline.runs.get(by.run) if by.run else None
        later.append(
            {
                "run": by.run,
                "step": by.step,
                "host": by.host,
                "kind": by.kind,
                "time": done.started if done else None,
                "text": by.why[:1].upper() + by.why[1:] + ".",
            }
        )
    ack = found.acknowledged
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
        "state": found.state,
        "open": found.is_open,
        "regression_of": found.regression_of,
        "resolved_by": found.resolved_by.to_dict() if found.resolved_by else None,
        "acknowledged": ack.to_dict() if ack else None,
        "resolution": {
            "acknowledged": f"{ack.note} ({ack.by}, {ack.at})" if ack else None,
            "later": later,
        },
    }


#: Abbreviations whose full stop ends no sentence.
ABBREVIATIONS = ("e.g", "i.e", "etc", "vs", "cf")


def first_sentence(advice: str) -> str:
    """Advice up to the end of its first sentence (``.`` or ``;`` then a space, outside
    a code span), for the action items; the findings carry it whole."""
    inside = False
    for i, char in enumerate(advice):
        if char == "`":
            inside = not inside
        elif inside or char not in ".;" or advice[i + 1 : i + 2] != " ":
            continue
        elif char == "." and advice[:i].lower().endswith(ABBREVIATIONS):
            continue
        else:
            return advice[:i].rstrip() + "."
    return advice.rstrip().rstrip(".") + "."


def run_url(base_url: str | None, journal: str, run: str | None) -> str | None:
    """The web's page of a run (``{base_url}/j/{journal}/run/{run}``), when a base URL is
    given (`journal export postmortem --base-url URL`); None for a probe run on its own
    (``probe-N``: a timeline item, no run page)."""
    if not base_url or not run or run.startswith("probe-"):
        return None
    from urllib.parse import quote

    return f"{base_url.rstrip('/')}/j/{quote(journal, safe='')}/run/{quote(run, safe='')}"


def action_items(
    findings: list[Finding],
    notes: list[NoteView],
    *,
    journal: str = "",
    base_url: str | None = None,
) -> list[dict[str, Any]]:
    """Open findings only (resolved and acknowledged ones need nothing more), worst first,
    each pitfall once per advice (``keys``, ``hosts`` and ``runs`` it covers; ``links``: each
    run with its page under ``base_url``, None without one), the advice shortened to its first
    sentence (``advice``; ``advice_full`` whole, as the findings show it); then notes tagged
    ``action``."""
    order = {s: i for i, s in enumerate(reversed(SEVERITIES))}
    merged: dict[tuple[str, str], list[Finding]] = {}
    for found in findings:
        if found.is_open:
            merged.setdefault((found.id, found.advice), []).append(found)
    items: list[dict[str, Any]] = []
    for same in merged.values():
        worst = min(same, key=lambda f: order[f.severity])
        hosts = list(dict.fromkeys(f.host for f in same if f.host))
        runs = list(dict.fromkeys(f.run for f in same if f.run))
        host_of = {f.run: f.host for f in same if f.run}
        step_of = {f.run: f.step for f in same if f.run}
        items.append(
            {
                "kind": "finding",
                "key": worst.key,
                "keys": list(dict.fromkeys(f.key for f in same)),
                "id": worst.id,
                "severity": worst.severity,
                "title": worst.title,
                "advice": first_sentence(worst.advice),
                "advice_full": worst.advice,
                "host": worst.host,
                "step": worst.step,
                "hosts": hosts,
                "runs": runs,
                "links": [
                    {
                        "run": run,
                        "host": host_of.get(run),
                        "step": step_of.get(run),
                        "url": run_url(base_url, journal, run),
                    }
                    for run in runs
                ],
                "count": len(same),
            }
        )
    items.sort(key=lambda item: order[item["severity"]])
    items.extend({"kind": "note", **note_dict(n)} for n in notes if "action" in n.tags)
    return items
