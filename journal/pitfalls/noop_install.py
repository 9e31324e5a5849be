"""An install that reported nothing to do, although it was asked for something new.

`uv pip install torch torchvision torchaudio --index-url …/nightly/cu130` keeps an installed
torch that already satisfies the bare name `torch`, whichever index is given: uv prints
`Audited 3 packages` (uv 0.10.10 and later: `Checked 3 packages`) and changes nothing; pip says
`Requirement already satisfied` for each package. The old build (`2.10.0+cu128`) stays and
every later step runs on it. In a journal, the package snapshots before and after the step
make the verdict certain. A request that pins exactly the build installed (`torch==2.9.1+cu128`
from the cu128 index, uv answering `Checked 1 package`) asked for nothing new and is no
finding; a torch pin without its local version (`torch==2.9.1`) from a variant's index still
asks for that variant, which the installed copy may not be.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls.base import Finding, finding
from journal.pitfalls.resolution import request_facts
from journal.reading.commands import InstallRequest, install_requests
from journal.reading.subject import Evidence, Run, Subject
from journal.runs import FAILED, STOPPED
from journal.versions import canonical_name

ID = "noop-install"
ORDER = 10
#: Resolved by a later install on the host of the same request that took (``installed``): a
#: pin to another version, or an install from another index, asked for something else.
RESOLVED_BY = ("installed",)

UV_NOOP = re.compile(r"^\s*(?:Audited|Checked) \d+ packages? in ", re.M)
UV_CHANGE = re.compile(r"^ [-+~] [A-Za-z0-9]", re.M)
PIP_SATISFIED = re.compile(r"^Requirement already satisfied: ([A-Za-z0-9._-]+)", re.M)


_normal = canonical_name


def _output_says_noop(run: Run, req: InstallRequest) -> list[Evidence]:
    if req.tool == "uv":
        noops = run.grep(UV_NOOP, "Audited", "Checked")
        if noops and not run.grep(UV_CHANGE, " + ", " - ", " ~ ", limit=1):
            return [e for _, e in noops[:1]]
        return []
    satisfied = run.grep(PIP_SATISFIED, "Requirement already satisfied", limit=200)
    names = {_normal(m.group(1)) for m, _ in satisfied}
    if satisfied and req.names() <= names and not run.has("Successfully installed"):
        return [e for m, e in satisfied if _normal(m.group(1)) in req.names()][:5]
    return []


def _advice(req: InstallRequest, run: Run) -> str:
    flag = "--reinstall" if req.tool == "uv" else "--force-reinstall"
    first = req.packages[0].name
    variant = req.variant
    installed = (run.after or {}).get(_normal(first), {}).get("version") if run.after else None
    pin = f"`{first}==<version>+{variant}`" if variant else f"`{first}==<version>`"
    now = f" (still {installed})" if installed else ""
    return (
        f"add `{flag}`, or pin the exact build you want, e.g. {pin}, so that the installed "
        f"{first}{now} no longer satisfies the request; then probe again (`journal run probe "
        "torch-env`)"
    )


def detect(subject: Subject) -> Iterator[Finding]:
    for run in subject.runs:
        if run.status in (FAILED, *STOPPED) and run.exit_code != 0:
            continue
        for req in install_requests(run.command):
            if not req.packages or req.reinstall or not req.asks_for_something_new:
                continue
            evidence = _output_says_noop(run, req)
            certain = False
            if run.diff is not None:
                if (
                    set(run.diff.names()) & req.names()
                    or {_normal(n) for n in run.diff.names()} & req.names()
                ):
                    continue  # a requested package did change
                certain = True
                if not evidence:
                    evidence = [
                        Evidence(
                            "package snapshots before and after: no requested package changed",
                            None,
                            run.event,
                            run.key,
                        )
                    ]
            if not evidence:
                continue
            strong = bool(req.indexes) or req.variant is not None
            severity = ("error" if certain else "warning") if strong else "info"
            names = " ".join(r.name for r in req.packages)
            why = f" from {req.indexes[0]}" if req.indexes else ""
            yield finding(
                ID,
                severity,
                f"`{'uv pip' if req.tool == 'uv' else 'pip'} install {names}`{why} changed "
                "nothing: what was installed already satisfied the request"
                + (" (confirmed by the package snapshots)" if certain else ""),
                _advice(req, run),
                [run.command_evidence(), *evidence],
                run,
                **request_facts(req),
            )
