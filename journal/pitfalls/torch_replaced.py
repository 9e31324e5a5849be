"""A step that did not name torch replaced torch.

Serving frameworks and kernels pin torch exactly (sglang 0.5.9 requires `torch==2.9.1`), so
`pip install sglang` on a host that runs a nightly `2.12.0.dev20260226+cu130` uninstalls the
nightly and installs the pinned release, often built for another CUDA, and exits 0. Everything
chosen to match the old torch (its CUDA, NCCL, the kernels compiled against its ABI) no
longer matches; the step looks like a success and the next benchmark runs on a stack nobody
picked. In a journal the package snapshots before and after the step make the verdict certain;
in a transcript uv's ` - torch==…` / ` + torch==…` lines, or pip's `Found existing
installation: torch …` and `Successfully installed … torch-2.9.1`, or a conda or mamba plan,
show it (conda's `pytorch` is torch, and a CUDA build superseded by a CPU one is replaced).
Where only pip's last line was pasted, it cannot tell whether another torch was there
before: a warning.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls.base import Finding, finding
from journal.reading.installs import (
    TorchInstalls,
    changes,
    grep_lines,
    named,
    requests,
    short,
    tool,
)
from journal.reading.subject import Run, Subject

ID = "torch-replaced"
ORDER = 13
#: Resolved by a later snapshot with the earlier torch back.
RESOLVED_BY = ("restored",)

#: pip naming who pulled torch in: `Collecting torch==2.9.1 (from sglang==0.5.9)`.
PULLED = re.compile(
    r"(?:Collecting|Processing) (?:torch(?=[\s=<>!~\[])\S*|\S*/torch-[^/\s]+\.whl)"
    r"\s+\(from ([^)\s,]+)"
)
PULLED_FAST = re.compile(r" \(from ")


def _put_back(installs: TorchInstalls, run: Run, version: str | None) -> str:
    """How to reinstall the torch that was there: the earlier command that pinned it, or a
    pinned install from the index an earlier torch install used."""
    if version is None:
        return "decide which torch this host should run and install it on purpose"
    source = ""
    for other, req in installs.before(run):
        torch = next(r for r in req.packages if r.key == "torch")
        if torch.pinned == version:
            return f"put torch {version} back: run `{other.command}` again"
        if not source and req.indexes:
            index = req.indexes[0]
            option = "--index-url" if "://" in index else "--find-links"
            source = f" {option} {index}"
    installer = "uv pip" if tool(run.command) == "uv" else "pip"
    return f"put torch {version} back: `{installer} install torch=={version}{source}`"


def _advice(installs: TorchInstalls, run: Run, before: str | None, puller: str | None) -> str:
    pin = before or "<the version you want>"
    reqs = requests(run.command)
    asked = " ".join(r.name for req in reqs for r in req.packages)
    what = puller or asked or "the package that pulled it in"
    if tool(run.command) == "uv":
        guard = f"`--override overrides.txt` with `torch=={pin}` in the file"
    else:
        guard = (
            "`--no-deps` (then install its other requirements), or `-c constraints.txt` "
            f"holding `torch=={pin}`, so that pip refuses instead of replacing"
        )
    return (
        f"{_put_back(installs, run, before)}; install {what} so that it cannot touch torch: "
        f"{guard}; then `pip check` lists the pin you overrode (acknowledge it if deliberate) "
        "and `journal run probe torch-env` shows the torch that runs"
    )


def detect(subject: Subject) -> Iterator[Finding]:
    installs: TorchInstalls | None = None
    for run in subject.runs:
        if run.diff is None and not run.has("torch"):
            continue
        change = next((c for c in changes(run) if c.key == "torch"), None)
        if change is None or change.kind == "reinstalled":
            continue
        asked = named(run.command)
        if "torch" in asked.names:
            continue
        if change.kind == "added" and change.before_known:
            continue  # torch was not there before: nothing was replaced
        pulled = next((m[1] for m, _ in grep_lines(run, PULLED_FAST, PULLED, limit=1)), None)
        by = f" (pulled in by {pulled})" if pulled else ""
        if change.kind == "added":
            severity = "warning"
            title = (
                f"{short(run)} installed torch {change.after}{by} without naming it; the output "
                "shown does not say whether another torch was there before"
            )
        else:
            severity = "warning" if asked.files else "error"
            did = (
                f"removed torch {change.before}"
                if change.after is None
                else f"replaced torch {change.before} with {change.after}"
            )
            title = f"{short(run)} {did} without naming torch{by}" + (
                " (package snapshots)" if change.certain else ""
            )
        if asked.files:
            title += f"; {', '.join(asked.files)} may ask for it"
        installs = installs or TorchInstalls(subject)
        yield finding(
            ID,
            severity,
            title,
            _advice(installs, run, change.before, pulled),
            [run.command_evidence(), *change.evidence],
            run,
            restore={"torch": change.before} if change.before else {},
        )
