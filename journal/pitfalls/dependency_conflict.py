"""An installed package's requirements are not met: pip said so, and exited 0.

pip's resolver only looks at what it is installing, not at everything already installed. When
the new packages break an installed one's requirement it prints `ERROR: pip's dependency
resolver does not currently take into account all the packages that are installed. This
behaviour is the source of the following dependency conflicts.` and one line per conflict
(`sglang 0.5.9 requires torch==2.9.1, but you have torch 2.12.0.dev20260226+cu130 which is
incompatible.`), and then exits 0: the step looks like a success. `pip check` (`… has
requirement …, but you have …`, `… requires …, which is not installed.`) and `uv pip check`
(``The package `x` requires `y`, but `z` is installed``) report the same state, failing.

A version conflict may be deliberate (a nightly torch over a framework's exact pin) and then
wants an acknowledgement and a probe that the pair really works; a requirement that is not
installed at all means an import will fail: an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from journal.pitfalls.base import Finding, finding
from journal.reading.installs import grep_lines
from journal.reading.subject import Evidence, Run, Subject

ID = "dependency-conflict"
ORDER = 14
#: Resolved by a later clean `pip check` on the host, or the step run again without it.
RESOLVED_BY = ("pip-check", "rerun")

#: Whole-line patterns, each found through a literal that every such line holds (see
#: :func:`journal.reading.installs.grep_lines`).
RESOLVER = re.compile(
    r"ERROR: pip's (?:legacy )?dependency resolver does (?:not currently take into account"
    r"|not consider)[^\n]*"
)
RESOLVER_FAST = re.compile(r"ERROR: pip's ")
#: (who, version, requirement, have-name, have-version)
PIP_INCOMPATIBLE = re.compile(
    r"(\S+) (\S+) (?:requires|has requirement) (.+?), but you have (\S+) (\S+?)"
    r"(?: which is incompatible)?\.\s*$"
)
PIP_INCOMPATIBLE_FAST = re.compile(r", but you have ")
#: (who, version, requirement)
PIP_MISSING = re.compile(r"(\S+) (\S+) requires (\S+?), which is not installed\.\s*$")
PIP_MISSING_FAST = re.compile(r", which is not installed\.")
UV_INCOMPATIBLE = re.compile(
    r"The package `([^`]+)` requires `([^`]+)`, but `([^`]+)` is installed\s*$"
)
UV_MISSING = re.compile(r"The package `([^`]+)` requires `([^`]+)`, but it's not installed")
UV_FAST = re.compile(r"The package `")
#: pip check's platform complaint: `x 1.0 is not supported on this platform`.
OTHER = re.compile(r"\S+ \S+ is not supported on this platform\b[^\n]*$")
OTHER_FAST = re.compile(r" is not supported on this platform")
CHECK = re.compile(r"(?:^|[\s/;&|(])(?:uv\s+pip|pip3?(?:\.\d+)?|-m\s+pip)\s+check\b")
#: Output of a check that failed before it could check anything.
NEVER_RAN = ("No module named", "command not found", "No such file", "error: ")


@dataclass(frozen=True)
class Conflict:
    text: str  # `alpha 1.0 needs beta==1.0, has beta 2.0`
    requirement: str  # `beta==1.0`
    missing: bool
    line: Evidence


def _conflicts(run: Run) -> list[Conflict]:
    found: list[Conflict] = []
    for m, line in grep_lines(run, PIP_INCOMPATIBLE_FAST, PIP_INCOMPATIBLE, limit=50):
        text = f"{m[1]} {m[2]} needs {m[3]}, has {m[4]} {m[5]}"
        found.append(Conflict(text, m[3], False, line))
    for m, line in grep_lines(run, PIP_MISSING_FAST, PIP_MISSING, limit=50):
        text = f"{m[1]} {m[2]} needs {m[3]}, which is not installed"
        found.append(Conflict(text, m[3], True, line))
    for m, line in grep_lines(run, UV_FAST, UV_INCOMPATIBLE, limit=50):
        found.append(Conflict(f"{m[1]} needs {m[2]}, has {m[3]}", m[2], False, line))
    for m, line in grep_lines(run, UV_FAST, UV_MISSING, "but it's not installed", limit=50):
        found.append(Conflict(f"{m[1]} needs {m[2]}, which is not installed", m[2], True, line))
    for _, line in grep_lines(run, OTHER_FAST, OTHER, limit=50):
        found.append(Conflict(line.text.strip(), "", False, line))
    return sorted(found, key=lambda c: c.line.line or 0)


def _tail(run: Run, count: int = 3) -> list[Evidence]:
    """The last non-blank output lines, for a failed check whose wording is not known here."""
    lines = []
    end = len(run.text)
    while end > 0 and len(lines) < count:
        start = run.text.rfind("\n", 0, end - 1) + 1
        if run.text[start:end].strip():
            lines.append(run.line_at(start))
        end = start - 1 if start > 0 else 0
    return lines[::-1]


def _who(run: Run, header: bool) -> str:
    if header:
        return "pip's resolver"
    if re.search(r"uv\s+pip\s+check", run.command):
        return "`uv pip check`"
    if CHECK.search(run.command):
        return "`pip check`"
    return "pip"


def detect(subject: Subject) -> Iterator[Finding]:
    for run in subject.runs:
        header = [e for _, e in grep_lines(run, RESOLVER_FAST, RESOLVER, limit=1)]
        conflicts = _conflicts(run)
        failed_check = (
            bool(CHECK.search(run.command))
            and run.exit_code not in (None, 0)
            and not run.has(*NEVER_RAN)
        )
        if not conflicts and not header and not failed_check:
            continue
        who = _who(run, bool(header))
        if header:
            exited = " (pip exits 0 after it)" if run.exit_code in (None, 0) else ""
        else:
            exited = f" (exit status {run.exit_code})" if run.exit_code not in (None, 0) else ""
        count = len(conflicts)
        listed = "; ".join(c.text for c in conflicts[:3]) + (
            f"; and {count - 3} more" if count > 3 else ""
        )
        if conflicts:
            plural = "s" if count != 1 else ""
            title = f"{who} reports {count} broken requirement{plural}{exited}: {listed}"
        else:
            title = f"{who} reports dependency conflicts{exited}"
        missing = [c.requirement for c in conflicts if c.missing]
        ack = (
            f' (`journal pitfalls ack {ID}:{run.key} --note "why it is fine"`)'
            if subject.journal
            else ""
        )
        advice = (
            "for each conflict decide: if the newer version is deliberate (a nightly torch over "
            f"a framework's exact pin), acknowledge this finding{ack} and probe that the pair "
            "works; otherwise install the required version, or a version of the dependent "
            "package that accepts what you have; then run `pip check` (or `uv pip check`) "
            "until it reports no broken requirements"
        )
        if missing:
            advice = f"install what is missing (`{' '.join(missing[:5])}`); {advice}"
        evidence = [run.command_evidence(), *header, *(c.line for c in conflicts)]
        if not header and not conflicts:
            evidence += _tail(run)
        yield finding(ID, "error" if missing else "warning", title, advice, evidence, run)
