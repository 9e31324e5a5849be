"""Pitfall detectors: one module per pitfall id, its docstring the user-facing explanation.

``judge(subject)`` runs every detector of the catalogue over a journal or a transcript.
Findings are computed on read, so a better detector re-judges old journals.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from functools import cache
from types import ModuleType

from journal.pitfalls.base import SEVERITIES, Finding, Subject

#: Modules of this package that are the framework, not detectors.
FRAMEWORK = {"base", "commands", "subjects"}


@cache
def detectors() -> tuple[ModuleType, ...]:
    """The detector modules, in the order of the catalogue (their ORDER, then id)."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.name in FRAMEWORK or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(module, "ID") and hasattr(module, "detect"):
            found.append(module)
    return tuple(sorted(found, key=lambda m: (getattr(m, "ORDER", 100), m.ID)))


def catalogue() -> dict[str, ModuleType]:
    """id -> detector module."""
    return {m.ID: m for m in detectors()}


def judge(subject: Subject) -> list[Finding]:
    """Every finding for ``subject``, in the order of its runs (in a journal, of their events),
    worst first within a run (their
    lifecycle is :func:`journal.pitfalls.lifecycle.follow`'s)."""
    order = {run.key: (run.event or 0, i) for i, run in enumerate(subject.runs)}
    findings: list[Finding] = []
    for module in detectors():
        findings.extend(module.detect(subject))
    last = (float("inf"), len(order))

    def place(f: Finding) -> tuple[float, int]:
        # a finding about no run (a figure entered by hand) stands where its figure does
        if f.run in order:
            return order[f.run]
        return (f.seq, -1) if f.seq is not None else last

    return sorted(findings, key=lambda f: (*place(f), -SEVERITIES.index(f.severity), f.id))


def counts(findings: Iterable[Finding]) -> dict[str, int]:
    """Open findings (neither resolved nor acknowledged) by severity."""
    out = dict.fromkeys(SEVERITIES, 0)
    for f in findings:
        if f.is_open:
            out[f.severity] += 1
    return out


def catalogue_markdown() -> str:
    """The pitfall catalogue as Markdown, made from the detectors' docstrings (the README's
    catalogue section is this text: `python -m journal.pitfalls` prints it)."""
    lines = []
    for module in detectors():
        doc = (module.__doc__ or "").strip()
        summary, _, body = doc.partition("\n\n")
        lines.append(f"#### `{module.ID}`\n")
        lines.append(" ".join(summary.split()) + "\n")
        for paragraph in body.split("\n\n"):
            if paragraph.strip():
                lines.append(" ".join(paragraph.split()) + "\n")
        rules = "".join(f"- {rule}\n" for rule in resolution_rules(module))
        lines.append(f"Resolved by any of:\n\n{rules}")
    return "\n".join(lines)


def resolution_rules(module: ModuleType) -> list[str]:
    """What resolves a pitfall's findings, in words: the docstrings of the rules the lifecycle
    applies to it (:func:`journal.pitfalls.lifecycle.rules_of`, so the catalogue cannot say
    other than the code does), then the acknowledgement that closes any finding."""
    from journal.pitfalls.lifecycle import rules_of

    runs, figures = rules_of(module)
    said = []
    for rule in [*runs, *figures]:
        text = " ".join((rule.__doc__ or "").strip().split("\n\n")[0].split())
        text = text.replace("``", "`")
        if text and text not in said:
            said.append(text)
    said.append("An acknowledgement (`journal pitfalls ack KEY --note …`).")
    return said
