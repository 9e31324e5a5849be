"""A rollback ended with the env not at its target set: some package is missing, at another
version (or local label), or still there though the target never had it.

`journal rollback` installs each package of the recorded target set at its exact version
(`torch==2.10.0+cu128`, not any 2.10.0) and removes what the target did not hold; its run's
package snapshot afterwards must then equal the target set, name for name and version for
version, local label included. When it does not, the env is in a state nobody recorded: an
install that failed half-way, a package that could not be removed (installed outside the env
or by the system's package manager), a `.pth` or a second copy on `sys.path` shadowing the
one installed, or something that changed the env while the rollback ran. pip is never
removed by a rollback, so a pip the target lacked does not count. A later rollback run on
the same host that reaches its target resolves the finding.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from journal.pitfalls.base import Finding, finding
from journal.projections.packages import normalize
from journal.reading.subject import Evidence, Run, Subject
from journal.versions import parse_version

ID = "rollback-incomplete"
ORDER = 15
RESOLVED_BY = ("rerun",)
#: Kept by every rollback whatever its target: not a difference.
KEPT = frozenset({"pip"})
#: How many differences the title names before it counts the rest.
NAMED = 4


def differences(target: Mapping[str, str], after: Mapping[str, Any]) -> list[str]:
    """What differs between the target set (normalised name -> version) and a snapshot:
    ``torch 2.12.0+cu130 (the target: 2.10.0+cu128)``, ``numpy missing (the target:
    2.4.2)``, ``nvidia-nccl-cu13 2.28.9 (not in the target)``."""
    now: dict[str, tuple[str, str]] = {}
    for key, entry in after.items():
        if isinstance(entry, Mapping):
            now.setdefault(
                normalize(key), (str(entry.get("name") or key), str(entry.get("version") or ""))
            )
    out = []
    wanted = {normalize(k): str(v) for k, v in target.items()}
    for name in sorted(wanted.keys() | now.keys()):
        version = wanted.get(name)
        have = now.get(name)
        if version is None:
            if name not in KEPT and have is not None:
                out.append(f"{have[0]} {have[1]} (not in the target)")
        elif have is None:
            out.append(f"{name} missing (the target: {version})")
        elif have[1] != version and parse_version(have[1]) != parse_version(version):
            out.append(f"{have[0]} {have[1]} (the target: {version})")
    return out


def reached(run: Run) -> bool:
    """Whether ``run`` is a rollback whose snapshot after it shows its target set: the env is
    back at a set recorded before (what its changes brought back was judged back then)."""
    target = run.rollback or {}
    packages = target.get("packages")
    return (
        isinstance(packages, Mapping)
        and run.after is not None
        and not differences(packages, run.after)
    )


def detect(subject: Subject) -> Iterator[Finding]:
    if not subject.journal:
        return
    for run in subject.runs:
        target = run.rollback
        if not target or run.imported or run.after is None:
            continue
        packages = target.get("packages")
        if not isinstance(packages, Mapping):
            continue
        wrong = differences(packages, run.after)
        if not wrong:
            continue
        named = "; ".join(wrong[:NAMED])
        more = f" and {len(wrong) - NAMED} more" if len(wrong) > NAMED else ""
        to = target.get("to") or "its target"
        title = f"the rollback on {run.host} to {to} did not reach its target set: {named}{more}"
        advice = (
            f"run the same rollback again (`journal rollback --to {to} --host {run.host}`): "
            "it plans from what the env holds now and installs or removes only what still "
            "differs. If the same packages differ again, look at them on the host: `"
            "<python> -m pip show <name>` (where it is installed: outside the env, a system "
            "package, a second copy on sys.path), `pip check`, and the rollback's own output "
            f"(`journal show {run.key}`) for an install or uninstall that failed"
        )
        evidence = [run.command_evidence()]
        evidence += [Evidence(f"after the rollback: {w}", None, run.event, run.key) for w in wrong]
        yield finding(ID, "error", title, advice, evidence, run)
