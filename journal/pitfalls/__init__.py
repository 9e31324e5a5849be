"""Pitfall detectors: one module per pitfall id, its docstring the user-facing explanation.

``judge(subject)`` runs every detector of the catalogue over a journal or a transcript.
Findings are computed on read, so a better detector re-judges old journals. The detectors are
the modules :data:`DETECTORS` lists; the package's other modules (:mod:`.base`, :mod:`.runtime`,
:mod:`.subjects`, :mod:`.lifecycle`, :mod:`.ledger`) are what they stand on.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from functools import cache
from types import ModuleType

from journal.pitfalls.base import SEVERITIES, Finding
from journal.reading.subject import Subject

#: The detector modules of this package, by name: a new detector is listed here (a test fails
#: for a module that defines ``ID`` and ``detect`` and is not). The catalogue orders them by
#: their ``ORDER``, then id, not by this list.
DETECTORS = (
    "abi_mismatch",
    "arch_unsupported",
    "bench_invalid",
    "cpu_torch",
    "dependency_conflict",
    "downgrade_cascade",
    "driver_too_old",
    "masked_exit",
    "nccl_changed",
    "nccl_skew",
    "no_kernel_image",
    "noop_install",
    "numpy_abi",
    "rollback_incomplete",
    "snapshot_failed",
    "step_interrupted",
    "throughput_regression",
    "toolkit_mismatch",
    "torch_replaced",
    "unverified_change",
    "variant_not_switched",
    "version_guard",
)


@cache
def detectors() -> tuple[ModuleType, ...]:
    """The detector modules, in the order of the catalogue (their ORDER, then id)."""
    found = [importlib.import_module(f"{__name__}.{name}") for name in DETECTORS]
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
    """The pitfall catalogue as Markdown, made from the detectors' docstrings (the
    catalogue of docs/pitfalls.md is this text: `python -m journal.pitfalls` prints it)."""
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
    applies to it (:func:`journal.pitfalls.resolution.rules_of`, so the catalogue cannot say
    other than the code does), then the acknowledgement that closes any finding."""
    from journal.pitfalls.resolution import rules_of

    runs, figures = rules_of(module)
    said = []
    for rule in [*runs, *figures]:
        text = " ".join((rule.__doc__ or "").strip().split("\n\n")[0].split())
        text = text.replace("``", "`")
        if text and text not in said:
            said.append(text)
    said.append("An acknowledgement (`journal pitfalls ack KEY --note …`).")
    return said
