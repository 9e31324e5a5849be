"""A step downgraded packages it did not name.

Installing one thing can move others: the resolver picks whatever versions satisfy the new
package's requirements, and `--reinstall` together with `--index-url` fetches every dependency
again from that one index, which may only carry older copies. In the seed upgrade, swapping
torch for the cu130 nightly quietly took numpy from 2.4.2 to 2.4.1 and pillow from 12.1.1 to
12.1.0. Nothing fails at that moment; the older versions surface later as a missing function
or a changed default. When a major version goes down (numpy 2 → 1, because an extension still
asks for `numpy<2`) everything written for the newer one breaks: an error.

In a journal the package snapshots before and after the step make the verdict certain; in a
transcript uv's ` - numpy==2.4.2` / ` + numpy==2.4.1` lines, or pip's `Found existing
installation: numpy 2.4.2` and `Successfully installed … numpy-2.4.1`, or conda's plan (`The
following packages will be DOWNGRADED:`) and mamba's transaction table (`Downgrade:`), show it.
A downgrade of torch itself is reported as `torch-replaced`, not here; a package named on the
command line (`numpy==2.4.1`) was asked for. When a requirements or constraints file was
given, it may have asked for the older version: one level less severe.
"""

from __future__ import annotations

from collections.abc import Iterator

from journal.pitfalls.base import Finding, finding
from journal.reading.installs import Change, changes, named, requests, short, tool, unique
from journal.reading.subject import Run, Subject

ID = "downgrade-cascade"
ORDER = 12
#: Resolved by a later snapshot with every downgraded package back where it was.
RESOLVED_BY = ("restored",)

SEVERITY_DOWN = {"error": "warning", "warning": "info", "info": "info"}


def _advice(run: Run, down: list[Change], files: tuple[str, ...]) -> str:
    pins = " ".join(f"{c.name}=={c.before}" for c in down)
    reqs = requests(run.command)
    uv = tool(run.command) == "uv"
    check = "uv pip check" if uv else "pip check"
    parts = [
        f"if the older versions were not meant, add `{pins}` to the same install: the resolver "
        "then keeps them or says which package forbids them"
    ]
    forced = [r for r in reqs if r.reinstall and r.indexes and r.packages]
    if forced:
        only = (
            " ".join(f"--reinstall-package {r.name}" for r in forced[0].packages)
            if uv
            else "--no-deps --force-reinstall " + " ".join(r.name for r in forced[0].packages)
        )
        parts.append(
            "a forced reinstall from one index fetches every dependency again from that "
            f"index, which may only carry older copies; `{only}` reinstalls only what you name"
        )
    if files:
        parts.append(f"check whether {', '.join(files)} pins them on purpose")
    if any(c.major_down for c in down):
        parts.append(f"a major version down breaks what needs the newer one: `{check}` lists it")
    parts.append(f"then run `{check}` and probe again")
    return "; ".join(parts)


def detect(subject: Subject) -> Iterator[Finding]:
    for run in subject.runs:
        down = [c for c in changes(run) if c.kind == "downgraded" and c.key != "torch"]
        if not down:
            continue
        asked = named(run.command)
        down = [c for c in down if c.key not in asked.names]
        if not down:
            continue
        severity = "error" if any(c.major_down for c in down) else "warning"
        if asked.files:
            severity = SEVERITY_DOWN[severity]
        listed = ", ".join(c.text() for c in down[:6]) + (
            f" and {len(down) - 6} more" if len(down) > 6 else ""
        )
        certain = " (package snapshots)" if all(c.certain for c in down) else ""
        evidence = [run.command_evidence()]
        for change in down:
            evidence.extend(change.evidence)
        yield finding(
            ID,
            severity,
            f"{short(run)} downgraded {listed}, which it did not name{certain}",
            _advice(run, down, asked.files),
            unique(evidence),
            run,
            restore={c.key: c.before for c in down if c.before},
        )
