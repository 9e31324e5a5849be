"""The NCCL torch loads is not the system's NCCL.

torch's wheels bring their own NCCL (`nvidia-nccl-cu13`, loaded from site-packages), while a
CUDA image or the host has another: NGC and `nvidia/cuda` images set `NCCL_VERSION=2.28.3-1`
and ship `/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3`, while torch 2.11 (cu130) loads 2.28.9.
Anything built against the system's NCCL (nccl-tests, a source-built extension, MPI jobs)
then runs another NCCL than torch: nccl-tests measure a stack torch does not use, and ranks
of one job on two NCCL versions can hang or fail. When torch reports a version other than its
own `nvidia-nccl-*` wheel's, it loads another libnccl (`LD_LIBRARY_PATH`, `LD_PRELOAD`).
Read from the `torch-env` probe (`nccl`, `system_nccl`, `packages`), or from a transcript that
shows torch's NCCL (`NCCL: (2, 28, 9)`) and the system's (`NCCL_VERSION=2.28.3-1`,
`libnccl.so.2.28.3`, dpkg's `libnccl2 2.28.3-1+cuda13.0`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls import runtime as rt
from journal.pitfalls.base import Finding, finding
from journal.pitfalls.nccl_changed import nccl_lines, output_versions, parse_version, probe_nccl
from journal.reading.bench import lines_with, probe_source
from journal.reading.subject import Evidence, Run, Subject

ID = "nccl-skew"
ORDER = 71
#: Only its own ``resolves`` (below): not ``rerun`` besides, which a repeated probe fools.
RESOLVED_BY = ()

Version = tuple[int, int, int]

SYS_ENV = re.compile(
    r"^[ \t]*(?:export[ \t]+|declare -x[ \t]+)?NCCL_VERSION=\"?(\d+\.\d+\.\d+)", re.M
)
SYS_LIB = re.compile(
    r"(?<![\w.-])(/(?:usr|lib|lib64|opt)/[\w./+-]*?libnccl\.so\.(\d+\.\d+\.\d+))\b"
)
DPKG = re.compile(r"^[hi]i[ \t]+libnccl2(?::\w+)?[ \t]+(\d+\.\d+\.\d+)\S*", re.M)


def _text(version: Version) -> str:
    return ".".join(str(p) for p in version)


def _from_probe(
    run: Run,
) -> tuple[Version, list[tuple[Version, Evidence]], list[tuple[Version, Evidence]]] | None:
    """(torch's NCCL, the system's NCCLs, torch's wheel) from the run's torch-env probe."""
    result = run.probe("torch-env")
    torch = probe_nccl(result)
    if torch is None or not isinstance(result, dict):
        return None
    event = run.probe_events.get("torch-env", run.event)
    systems: list[tuple[Version, Evidence]] = []
    system = result.get("system_nccl")
    if isinstance(system, dict):
        env = parse_version(system.get("NCCL_VERSION"))
        if env is not None:
            systems.append(
                (
                    env,
                    Evidence(
                        f"torch-env probe: system NCCL_VERSION={system['NCCL_VERSION']}",
                        None,
                        event,
                        run.key,
                    ),
                )
            )
        for lib in system.get("libraries") or []:
            if isinstance(lib, dict):
                version = parse_version(lib.get("version"))
                if version is not None:
                    systems.append(
                        (
                            version,
                            Evidence(
                                f"torch-env probe: system library {lib.get('path')} "
                                f"({lib.get('version')})",
                                None,
                                event,
                                run.key,
                            ),
                        )
                    )
    elif isinstance(result.get("env"), dict):
        env = parse_version(result["env"].get("NCCL_VERSION"))
        if env is not None:
            systems.append(
                (
                    env,
                    Evidence(
                        f"torch-env probe: NCCL_VERSION={result['env']['NCCL_VERSION']}",
                        None,
                        event,
                        run.key,
                    ),
                )
            )
    wheels: list[tuple[Version, Evidence]] = []
    packages = result.get("packages")
    if isinstance(packages, dict):
        for name, value in sorted(packages.items()):
            version = parse_version(value)
            if re.match(r"^nvidia-nccl(?:-cu\d+)?$", str(name)) and version is not None:
                wheels.append(
                    (
                        version,
                        Evidence(
                            f"torch-env probe: {name} {value} (torch's NCCL wheel)",
                            None,
                            event,
                            run.key,
                        ),
                    )
                )
    return torch, systems, wheels


def _probe_evidence(run: Run, torch: Version) -> Evidence:
    result = run.probe("torch-env") or {}
    how = (
        "torch.cuda.nccl.version()"
        if result.get("torch_imported") is not False
        else "the libnccl of torch's wheel"
    )
    return Evidence(
        f"{probe_source(run)}: torch loads NCCL {_text(torch)} ({how})",
        None,
        run.probe_events.get("torch-env", run.event),
        run.key,
    )


def _system_from_output(run: Run, spans: list[tuple[int, int]]) -> list[tuple[Version, Evidence]]:
    """The system's NCCL as the output shows it: `NCCL_VERSION=2.28.3-1`, a libnccl.so.2.28.3
    outside site-packages, dpkg's `libnccl2 2.28.3-1+cuda13.0`."""
    text = run.text
    found = []
    for start, end in spans:
        match = SYS_ENV.match(text, start, end) or DPKG.match(text, start, end)
        if match:
            version = parse_version(match.group(1))
            if version is not None:
                found.append((version, run.line_at(match.start())))
        else:
            for lib in SYS_LIB.finditer(text, start, end):
                if "site-packages" in lib.group(1) or "dist-packages" in lib.group(1):
                    continue
                version = parse_version(lib.group(2))
                if version is not None:
                    found.append((version, run.line_at(lib.start())))
                    break
        if len(found) >= 10:
            break
    return found


def _skew_title(torch: Version, systems: list[tuple[Version, Evidence]]) -> str:
    others = sorted({v for v, _ in systems if v != torch})
    return (
        f"torch loads NCCL {_text(torch)} but the system's NCCL is "
        f"{', '.join(_text(v) for v in others)}"
    )


SKEW_ADVICE = (
    "anything built against the system's NCCL (nccl-tests, source-built extensions, MPI jobs "
    "in this image) runs NCCL {system} while torch runs {torch}: build nccl-tests against "
    "torch's NCCL (`make MPI=1 NCCL_HOME=<site-packages>/nvidia/nccl`) so that its figures "
    "measure what torch uses, or align the two (the system's libnccl2/libnccl-dev {torch}, or "
    "the nvidia-nccl wheel at {system}); keep every rank of a job on one version, and check "
    "which one a process loads with NCCL_DEBUG=INFO (`NCCL INFO NCCL version …`)"
)
WHEEL_ADVICE = (
    "torch is not loading the NCCL of its own wheel ({wheel}) but {torch}: look for another "
    "libnccl.so.2 earlier in LD_LIBRARY_PATH or in LD_PRELOAD (`ldd`, NCCL_DEBUG=INFO), and "
    "remove it or install the matching nvidia-nccl wheel, so that torch runs the NCCL it was "
    "built and tested with"
)


def detect(subject: Subject) -> Iterator[Finding]:
    told: set[tuple] = set()
    spans = nccl_lines(subject)
    torch_seen: dict[str, tuple[Version, Evidence]] = {}
    system_seen: dict[str, list[tuple[Version, Evidence]]] = {}
    for run in subject.runs:
        probed = _from_probe(run)
        if probed is not None:
            torch, systems, wheels = probed
            torch_seen[run.host] = (torch, _probe_evidence(run, torch))
            if systems:
                system_seen[run.host] = systems
            yield from _system_skew(
                run,
                torch,
                systems,
                [_probe_evidence(run, torch), *(e for _, e in systems), *(e for _, e in wheels)],
                told,
                probe=rt.TORCH_ENV,
            )
            imported = (run.probe("torch-env") or {}).get("torch_imported") is not False
            off = [(v, e) for v, e in wheels if v != torch]
            signature = (run.host, "wheel", torch, tuple(sorted({v for v, _ in off})))
            if imported and off and signature not in told:
                told.add(signature)
                wheel = ", ".join(sorted({_text(v) for v, _ in off}))
                yield finding(
                    ID,
                    "warning",
                    f"torch loads NCCL {_text(torch)} but its nvidia-nccl wheel is {wheel}",
                    WHEEL_ADVICE.format(wheel=wheel, torch=_text(torch)),
                    [_probe_evidence(run, torch), *(e for _, e in off)],
                    run,
                    probe=rt.TORCH_ENV,
                )
            continue
        # Output alone: torch's NCCL from a check, the system's from env, ls or dpkg.
        versions = output_versions(run, spans[run.key], limit=5)
        if versions:
            torch_seen[run.host] = versions[-1]
        systems = _system_from_output(run, spans[run.key])
        if systems:
            system_seen[run.host] = systems
        if not (versions or systems):
            continue
        if run.host not in torch_seen or run.host not in system_seen:
            continue
        torch, torch_line = torch_seen[run.host]
        skewed = [(v, e) for v, e in system_seen[run.host] if v != torch]
        yield from _system_skew(
            run, torch, system_seen[run.host], [torch_line, *(e for _, e in skewed[:4])], told
        )


def _system_skew(
    run: Run,
    torch: Version,
    systems: list[tuple[Version, Evidence]],
    evidence: list[Evidence],
    told: set[tuple],
    **facts: str,
) -> Iterator[Finding]:
    """The finding that torch's NCCL differs from the system's, once per host and versions
    (``facts``: the probe it was read from)."""
    skewed = [(v, e) for v, e in systems if v != torch]
    signature = (run.host, "system", torch, tuple(sorted({v for v, _ in skewed})))
    if skewed and signature not in told:
        told.add(signature)
        system = ", ".join(sorted({_text(v) for v, _ in skewed}))
        yield finding(
            ID,
            "warning",
            _skew_title(torch, skewed),
            SKEW_ADVICE.format(system=system, torch=_text(torch)),
            evidence,
            run,
            torch_nccl=_text(torch),
            system_nccl=sorted({_text(v) for v, _ in skewed}),
            **facts,
        )


def _skewed(run: Run) -> bool:
    """Whether the run's torch-env probe shows torch's NCCL differing from the system's or
    its wheel's."""
    probed = _from_probe(run)
    if probed is None:
        return False
    torch, systems, wheels = probed
    return any(v != torch for v, _ in systems) or any(v != torch for v, _ in wheels)


def _reads(run: Run) -> bool:
    """Whether the run's torch-env probe read torch's NCCL and the system's side (its
    ``system_nccl``, or at least its environment)."""
    result = run.probe("torch-env")
    if _from_probe(run) is None or not isinstance(result, dict):
        return False
    return isinstance(result.get("system_nccl"), dict) or isinstance(result.get("env"), dict)


_probe_or_rerun = rt.probe_or_rerun(_skewed, _reads, detect)


def resolves(found: Finding, later: Run, ids: frozenset[str]) -> str | None:
    """A later torch-env probe on the host that reads torch's NCCL and the system's and no
    longer shows them apart. Or, for a skew read from output, the same step (for an imported
    or interactive command, the same command) run again on the host that went through and
    printed neither side at its skewed version again (torch's NCCL at the same version, with
    no system reading that now matches it, or the system's at the same skewed one)."""
    if found.facts.get("torch_nccl") and found.facts.get("probe") != rt.TORCH_ENV:
        spans = lines_with(later, "CCL", "ccl")
        printed = {_text(v) for v, _ in output_versions(later, spans, limit=5)}
        systems = {_text(v) for v, _ in _system_from_output(later, spans)}
        torch, skewed = found.facts["torch_nccl"], set(found.facts.get("system_nccl") or ())
        if (torch in printed and torch not in systems) or (systems & skewed):
            return None
    return _probe_or_rerun(found, later, ids)


resolves.needs = _probe_or_rerun.needs  # type: ignore[attr-defined]
resolves.refused_by = _probe_or_rerun.refused_by  # type: ignore[attr-defined]
