"""The pitfalls hit and the action items of the postmortem.

Each finding comes with the first lines of its evidence and with what became of it, as the
lifecycle (:mod:`journal.pitfalls.lifecycle`) found it in the record: the later run, probe
or figure that resolved it, and the acknowledgement (note, who, when). Open findings are the
action items, each pitfall once, with the hosts and runs it covers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from journal.export.entries import note_dict
from journal.pitfalls.base import SEVERITIES, Finding
from journal.projections.timeline import NoteView, Timeline

#: Evidence lines shown per finding (the rest are counted).
EVIDENCE_LINES = 6


def _sentence(text: str, step: str | None) -> str:
    """``text`` begun with a capital, unless it begins with a step's name (``install-six on
    gpu-01 asked for it again``: a name is written as it is)."""
    if step and text.startswith(step):
        return text
    return text[:1].upper() + text[1:]


def pitfall_dict(found: Finding, timeline: Timeline | Mapping[str, str]) -> dict[str, Any]:
    """A finding with its first evidence lines and what became of it (``timeline``: the
    runs it tells, or when each run started)."""
    if isinstance(timeline, Timeline):
        timeline = {run.run_id: run.started for run in timeline.runs.values()}
    started = timeline
    later = []
    if found.resolved_by is not None:
        by = found.resolved_by
        later.append(
            {
                "run": by.run,
                "step": by.step,
                "host": by.host,
                "kind": by.kind,
                "time": started.get(by.run) if by.run else None,
                "text": _sentence(by.why, by.step) + ".",
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
        "time": started.get(found.run) if found.run else None,
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
    actions = Actions()
    for found in findings:
        if found.is_open:
            actions.add(found)
    return actions.items(notes, journal=journal, base_url=base_url)


#: Severities, the worst first.
_ORDER = {s: i for i, s in enumerate(reversed(SEVERITIES))}


class Actions:
    """The action items, an open finding at a time (:func:`action_items`): of each pitfall
    and advice, only what the item says is kept (not the findings themselves)."""

    def __init__(self) -> None:
        self.merged: dict[tuple[str, str], dict[str, Any]] = {}

    def add(self, found: Finding) -> None:
        same = self.merged.get((found.id, found.advice))
        if same is None:
            same = self.merged[(found.id, found.advice)] = {
                "worst": None, "keys": {}, "hosts": {}, "runs": {}, "host_of": {},
                "step_of": {}, "count": 0,
            }  # fmt: skip
        worst = same["worst"]
        if worst is None or _ORDER[found.severity] < _ORDER[worst["severity"]]:
            same["worst"] = {
                "key": found.key, "id": found.id, "severity": found.severity,
                "title": found.title, "advice": found.advice, "host": found.host,
                "step": found.step,
            }  # fmt: skip
        same["keys"].setdefault(found.key)
        if found.host:
            same["hosts"].setdefault(found.host)
        if found.run:
            same["runs"].setdefault(found.run)
            same["host_of"][found.run] = found.host
            same["step_of"][found.run] = found.step
        same["count"] += 1

    def items(
        self, notes: list[NoteView], *, journal: str = "", base_url: str | None = None
    ) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for same in self.merged.values():
            worst = same["worst"]
            runs = list(same["runs"])
            items.append(
                {
                    "kind": "finding",
                    "key": worst["key"],
                    "keys": list(same["keys"]),
                    "id": worst["id"],
                    "severity": worst["severity"],
                    "title": worst["title"],
                    "advice": first_sentence(worst["advice"]),
                    "advice_full": worst["advice"],
                    "host": worst["host"],
                    "step": worst["step"],
                    "hosts": list(same["hosts"]),
                    "runs": runs,
                    "links": [
                        {
                            "run": run,
                            "host": same["host_of"].get(run),
                            "step": same["step_of"].get(run),
                            "url": run_url(base_url, journal, run),
                        }
                        for run in runs
                    ],
                    "count": same["count"],
                }
            )
        items.sort(key=lambda item: _ORDER[item["severity"]])
        items.extend({"kind": "note", **note_dict(n)} for n in notes if "action" in n.tags)
        return items
