"""The build variant asked for is not what is installed or probed afterwards.

An install that names a variant, through the index (`--index-url …/cu130`) or a pin
(`torch==2.12.0+cu130`), is meant to switch the build. If the package snapshot after it, or
the next probe (`torch.__version__` still `2.10.0+cu128`, `torch.version.cuda` still 12.8),
shows another variant, the switch did not happen: usually a no-op install, or a later
dependency resolution that put the old build back. conda asks for a CUDA build with
`pytorch-cuda=12.1` or `cudatoolkit=11.8` (and for the CPU build with `cpuonly`); a plan that
installs `pytorch-…-py3.8_cpu_0` anyway, or a later `torch.version.cuda` of None, is this
pitfall too. In a transcript a check's printed values count wherever they stand on the line
(`print(torch.__version__, torch.version.cuda)`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls.base import Finding, finding
from journal.pitfalls.resolution import request_facts
from journal.reading import printed
from journal.reading.commands import (
    CONDAS,
    InstallRequest,
    cuda_of_variant,
    install_requests,
    same_variant,
)
from journal.reading.conda import conda_plan
from journal.reading.installs import requests_of, unique
from journal.reading.subject import Evidence, Run, Subject
from journal.versions import local_variant

ID = "variant-not-switched"
ORDER = 11
#: Judges a run by what came after it too (the ledger revisits recent runs).
LOOKS_AHEAD = True
#: Resolved by a later install on the host of the same request (the same package from the same
#: variant's index, or pinned to it) that took: its snapshot, or its torch-env probe, shows the
#: variant. A probe on its own, or an install of another request, is no such evidence.
RESOLVED_BY = ("installed",)

VERSION_WITH_VARIANT = re.compile(
    r"(?<![\w.])(?:torch\S*\s*[:=]?\s*|__version__\S*\s*)?(\d+\.\d+(?:\.\d+)?(?:\.dev\d+|a\d+|rc\d+)?)"
    r"\+(cu\d{2,3}|cpu|rocm[\d.]+|xpu)\b"
)
CUDA_LINE = re.compile(
    r"^\s*(?:CUDA|torch\.version\.cuda|CUDA used to build PyTorch|CUDA version)\s*[:=]\s*"
    r"(\d+\.\d+|None)\s*$",
    re.M,
)


_local = local_variant


def _from_snapshot(run: Run, req: InstallRequest, variant: str) -> list[Evidence]:
    found = []
    for key in sorted(req.names()):
        entry = (run.after or {}).get(key)
        local = _local(entry.get("version")) if entry else None
        if local is not None and not same_variant(local, variant):
            found.append(
                Evidence(
                    f"{entry.get('name', key)} {entry['version']} is installed after the step",
                    None,
                    run.event,
                    run.key,
                )
            )
    return found


def _from_probe(run: Run, variant: str, cuda: str | None) -> list[Evidence]:
    result = run.probe("torch-env")
    if not result:
        return []
    torch = result.get("torch", {})
    version = torch.get("version") if isinstance(torch.get("version"), str) else None
    event = run.probe_events.get("torch-env")
    found = []
    local = _local(version)
    if local is not None and not same_variant(local, variant):
        found.append(Evidence(f"the torch-env probe reports torch {version}", None, event, run.key))
    built = torch.get("cuda")
    if cuda and (isinstance(built, str) or built is None) and "cuda" in torch and built != cuda:
        found.append(
            Evidence(
                f"the torch-env probe reports torch.version.cuda {built}",
                None,
                event,
                run.key,
            )
        )
    return found


def _from_output(run: Run, req: InstallRequest, variant: str, cuda: str | None) -> list[Evidence]:
    found = []
    for match, line in run.grep(VERSION_WITH_VARIANT, "+cu", "+cpu", "+rocm", "+xpu", limit=50):
        if not same_variant(match.group(2), variant) and not line.text.lstrip().startswith(
            ("-", "+", "~")
        ):
            found.append(line)
            break
    if cuda:
        for match, line in run.grep(CUDA_LINE, "CUDA", "cuda"):
            if match.group(1) != cuda:
                found.append(line)
                break
    if variant != "cpu":
        # `torch.version.cuda` printed among other values (or as None), a conda CPU build
        for fact in printed.facts(run):
            other = (fact.name == "torch.cuda" and fact.value is None) or (
                fact.name == "torch.cuda" and cuda and str(fact.value) != cuda
            )
            if other or (fact.name == "torch.build" and "cpu" in str(fact.value)):
                found.append(fact.evidence)
                break
    return unique(found)


def _from_plan(run: Run, req: InstallRequest, variant: str) -> list[Evidence]:
    """A conda plan that installs a build of another variant than the one asked for
    (``pytorch-1.12.1-py3.8_cpu_0`` when ``cudatoolkit=10.2`` was asked)."""
    if req.tool not in CONDAS:
        return []
    names = req.names()
    found = []
    for entry in conda_plan(run):
        if entry.name in names and entry.after and entry.after_build:
            build = entry.after_build
            cpu = "cpu" in build
            if (variant == "cpu") != cpu:
                found.append(entry.line)
    return found[:3]


def _confirmed(run: Run, req: InstallRequest, variant: str) -> bool:
    """Whether this run's snapshot or probe shows the variant asked for."""
    for key in req.names():
        entry = (run.after or {}).get(key)
        if entry and _local(entry.get("version")) == variant:
            return True
    torch = (run.probe("torch-env") or {}).get("torch", {})
    version = torch.get("version") if isinstance(torch, dict) else None
    return isinstance(version, str) and _local(version) == variant


def detect(subject: Subject) -> Iterator[Finding]:
    for run in subject.runs:
        for req in requests_of(subject, run):
            variant = req.variant
            if variant is None or not req.packages:
                continue
            cuda = cuda_of_variant(variant)
            evidence = _from_snapshot(run, req, variant) + _from_probe(run, variant, cuda)
            certain = bool(evidence)
            evidence += _from_plan(run, req, variant)
            if not evidence and _confirmed(run, req, variant):
                continue
            for later in subject.later(run):
                if any(set(r.names()) & req.names() for r in install_requests(later.command)):
                    break  # installed again: that install is judged on its own
                if _confirmed(later, req, variant):
                    break  # a later probe or snapshot shows the variant asked for
                seen = _from_probe(later, variant, cuda) + _from_output(later, req, variant, cuda)
                if seen:
                    certain = certain or bool(_from_probe(later, variant, cuda))
                    evidence += seen
                    break
                if later.after is not None:
                    snap = _from_snapshot(later, req, variant)
                    if snap:
                        evidence += snap
                        certain = True
                        break
            if not evidence:
                continue
            yield finding(
                ID,
                "error" if certain else "warning",
                f"asked for the {variant} build of {', '.join(r.name for r in req.packages)}, "
                + (f"but {evidence[0].text}" if certain else f"but later: {evidence[0].text}"),
                f"reinstall with the variant forced: add `--reinstall` (uv) or `--force-reinstall` "
                f"(pip) with the {variant} index, or pin `==<version>+{variant}`; check with "
                "`journal run probe torch-env` that torch.version ends in "
                f"+{variant}" + (f" and torch.version.cuda is {cuda}" if cuda else ""),
                [run.command_evidence(), *evidence],
                run,
                **request_facts(req),
            )
