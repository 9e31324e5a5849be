"""Short texts the Markdown and HTML postmortems both print, so that they say the same.

Each takes a part of the document :func:`journal.export.postmortem.build` made and returns
plain text (escaping is the renderer's job).
"""

from __future__ import annotations

import re
from typing import Any

from journal.display import first_line, seconds, when
from journal.export.changes import quiet_text
from journal.export.changes import told as told_changes
from journal.export.impact import figure, percent_text, spread_text
from journal.projections.metrics import higher_is_better

__all__ = [
    "figure",
    "first_line",
    "percent_text",
    "spread_text",
    "seconds",
    "when",
    "elapsed",
    "series_name",
    "outcome",
    "what",
    "took",
    "period",
    "EMPTY",
    "stack_rows",
    "code_spans",
    "told_changes",
    "quiet_text",
]

#: What an empty section says, and how the record could fill it.
EMPTY = {
    "impact": "No figure was recorded: `journal run bench NAME` or `journal record metric` "
    "records one.",
    "timeline": "Nothing was recorded.",
    "changes": "No package snapshot, installer output or repeated probe shows a change.",
    "pitfalls": "No pitfall was found.",
    "root_causes": "No note tagged root-cause: `journal note --tag root-cause TEXT` adds one.",
    "trigger": "No note tagged trigger: `journal note --tag trigger TEXT` adds one.",
    "action_items": "None: every finding is resolved or acknowledged.",
    "no_findings": "No findings: nothing to resolve or acknowledge.",
    "lessons": "No note tagged lesson: `journal note --tag lesson TEXT` adds one.",
    "versions": "No probe or package snapshot was recorded.",
}

#: Figures a benchmark's timeline entry names (the rest are in the impact section).
SHOWN_FIGURES = 3


def elapsed(value: float | None) -> str:
    """``+3m05s`` since the start of the record."""
    if value is None:
        return "-"
    return "+" + seconds(value) if value >= 0 else "-" + seconds(-value)


def period(doc: dict[str, Any]) -> str:
    """``2026-02-26 09:41:02Z to 2026-02-26 11:02:10Z (1h21m)``."""
    span = doc["period"]
    if not span["start"]:
        return "-"
    length = f" ({seconds(span['seconds'])})" if span["seconds"] is not None else ""
    return f"{when(span['start'])} to {when(span['end'])}{length}"


def series_name(series: dict[str, Any]) -> str:
    """``Output token throughput (sglang.bench_serving, phase…)``: the metric and the labels
    that tell the workload (a pasted command's full text is in the JSON)."""
    labels = {k: v for k, v in series["labels"].items() if k not in ("command", "benchmark")}
    named = [series["labels"]["benchmark"]] if "benchmark" in series["labels"] else []
    named += [f"{k}={v}" for k, v in sorted(labels.items())]
    return series["display"] + (f" ({', '.join(named)})" if named else "")


def took(entry: dict[str, Any]) -> str:
    """A run's duration, or a dash (an imported command has none)."""
    if entry.get("imported") or entry.get("duration") is None:
        return "-"
    return seconds(entry["duration"])


def what(entry: dict[str, Any]) -> str:
    """What a timeline entry is: ``step install-torch``, ``note [lesson]``."""
    kind = entry["kind"]
    if kind in ("step", "benchmark"):
        return f"{kind} {entry['step']}"
    if kind == "rollback":
        back = entry["rollback"]
        side = "before" if back["phase"] == "before" else "after"
        return f"rollback to {back['to']} (the packages {side} run {back['run']})"
    if kind == "note":
        tags = f" [{', '.join(entry['tags'])}]" if entry["tags"] else ""
        return f"note{tags}"
    if kind == "probe":
        return f"probe {entry['probe']}"
    if kind == "metric":
        return f"figure {entry['name']}"
    return "host key accepted"


def outcome(entry: dict[str, Any]) -> str:
    """How a timeline entry ended and what it found, in one line."""
    kind = entry["kind"]
    if kind == "note":
        by = f" ({entry['author']})" if entry["author"] else ""
        return entry["text"] + by
    if kind == "probe":
        return entry["summary"] or f"failed: {entry['error']}"
    if kind == "metric":
        invalid = f" (not trusted: {entry['invalid']})" if entry["invalid"] else ""
        return f"{figure(entry['value'], entry['unit'])}, {entry['source']}{invalid}"
    if kind == "host-key":
        return f"{entry['target']}: {entry['key_type']} {entry['fingerprint']}"
    parts = []
    if entry["imported"]:
        parts.append("imported (exit status unknown)")
    else:
        code = f", exit {entry['exit_code']}" if entry["exit_code"] is not None else ""
        parts.append(f"{entry['status']}{code}")
    if entry["reason"] and not entry["imported"]:
        parts.append(entry["reason"])
    if entry["packages_changed"] is not None:
        count = entry["packages_changed"]
        parts.append(
            "no package changed"
            if not count
            else f"{count} package{'' if count == 1 else 's'} changed"
        )
    for miss in entry.get("unread", ()):
        if miss["probe"] == "packages":  # a failed probe is said with the probes below
            parts.append(f"{miss['text']}: what it changed is not known")
    for probe in entry["probes"]:
        parts.append(f"{probe['probe']}: {probe['summary'] or 'failed: ' + str(probe['error'])}")
    checks = entry["expectations"]
    if checks:
        failed = [c for c in checks if not c["ok"]]
        parts.append(
            f"expectations: {len(checks) - len(failed)}/{len(checks)} passed"
            + (f" (failed: {', '.join(c['key'] for c in failed)})" if failed else "")
        )
    rates = [m for m in entry["metrics"] if higher_is_better(m["name"], m["unit"])]
    rates = rates or entry["metrics"]
    for metric in rates[:SHOWN_FIGURES]:
        parts.append(f"{metric['name']} = {figure(metric['value'], metric['unit'])}")
    if len(entry["metrics"]) > SHOWN_FIGURES:
        parts.append(f"{len(entry['metrics'])} figures in all")
    if entry["findings"]:
        parts.append("pitfalls: " + ", ".join(k.split(":")[0] for k in entry["findings"]))
    return "; ".join(parts)


def stack_rows(host: dict[str, Any]) -> list[dict[str, Any]]:
    """A host's stack table: torch, CUDA, NCCL, driver, then the key packages that moved
    (torch's package only when no torch-env reading gave torch already)."""
    read = {m["what"] for m in host["stack"]}
    return [*host["stack"], *(m for m in host["packages"] if m["what"] not in read)]


#: A code span in prose: a run of backticks, then anything up to the same run (CommonMark).
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def code_spans(value: Any) -> Any:
    """Prose as HTML with its code spans (```--reinstall```) as ``<code>``, the rest escaped."""
    from markupsafe import Markup, escape

    line = str(value)
    out, at = [], 0
    for span in CODE_SPAN.finditer(line):
        out.append(escape(line[at : span.start()]))
        out.append(Markup("<code>%s</code>") % span.group(2).strip())
        at = span.end()
    out.append(escape(line[at:]))
    return Markup("").join(out)
