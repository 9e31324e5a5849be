"""torch's CUDA is newer than the CUDA the NVIDIA driver supports.

Each torch wheel bundles a CUDA runtime (`torch.version.cuda`: 13.0 for the cu130 builds);
the kernel driver supports CUDA up to a version of its own (`CUDA Version` in `nvidia-smi`,
NVML's `cuda_driver`). A runtime of a newer major than the driver does not start at all: torch
says `The NVIDIA driver on your system is too old (found version 12040)` (the number is the
driver's CUDA, 12040 = 12.4) or `CUDA driver version is insufficient for CUDA runtime version`,
and `torch.cuda.is_available()` is False. Within one major version CUDA's minor-version
compatibility lets a 12.8 runtime run on a 12.4 driver, except what needs the newer driver:
PTX compiled at run time (Triton, flashinfer and other JIT kernels fail with `the provided PTX
was compiled with an unsupported toolchain`) and the newest APIs.

From a `torch-env` probe: torch's CUDA against NVML's; a newer major is an error, a newer
minor a warning. Every later probe that shows the same is not reported again. In a transcript
(or a step's output) the same comparison is made between what different commands printed:
`torch.version.cuda` (or collect_env's `CUDA used to build PyTorch`) against the `CUDA
Version` of `nvidia-smi`'s banner, or the newest CUDA of the driver collect_env names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls import runtime as rt
from journal.pitfalls.base import Finding, finding
from journal.reading.subject import Run, Subject

ID = "driver-too-old"
ORDER = 33
#: Only its own ``resolves`` (below): not ``rerun`` besides, which a repeated probe fools.
RESOLVED_BY = ()

TOO_OLD = re.compile(
    r"The NVIDIA driver on your system is too old \(found version (?P<found>\d+)\)"
)
INSUFFICIENT = re.compile(r"CUDA driver version is insufficient for CUDA runtime version")


def decode(found: str) -> tuple[int, int]:
    """(12, 4) for the driver API version 12040 (major * 1000 + minor * 10)."""
    value = int(found)
    return value // 1000, value % 1000 // 10


def _advice(needed: tuple[int, int] | None, driver: tuple[int, int] | None) -> str:
    if needed:
        minimum = rt.MIN_DRIVER_FOR_CUDA.get(needed)
        upgrade = f"upgrade the NVIDIA driver to one for CUDA {rt.dotted(needed)}" + (
            f" ({minimum} or newer)" if minimum else ""
        )
    else:
        upgrade = "upgrade the NVIDIA driver to one that supports torch's CUDA"
    wanted = rt.wheel_variant(driver) if driver else None
    if driver and not wanted:
        other = f"use an older torch: no current torch wheel is built for CUDA {rt.dotted(driver)}"
    elif driver:
        other = (
            f"install the torch build for the driver's CUDA {rt.dotted(driver)}: "
            f"`pip install --force-reinstall torch --index-url {rt.index_url(wanted)}`"
        )
    else:
        other = "install the torch build for the CUDA that `nvidia-smi` shows"
    return f"{upgrade}, or {other}; then check with `journal run probe torch-env`"


def _from_probe(run: Run) -> Finding | None:
    probed = rt.torch_env(run)
    if not probed:
        return None
    env, event = probed
    torch_cuda = rt.major_minor(rt.known(rt.torch_of(env).get("cuda")))
    driver = rt.driver_cuda(env)
    if not torch_cuda or not driver or torch_cuda <= driver:
        return None
    version = rt.torch_version(env) or "torch"
    driver_text = rt.driver_version(env)
    fact = (
        f"torch {version} has CUDA {rt.dotted(torch_cuda)}; the driver"
        + (f" {driver_text}" if driver_text else "")
        + f" supports CUDA {rt.dotted(driver)}"
    )
    if torch_cuda[0] > driver[0]:
        severity, title = "error", f"{fact}: torch cannot use the GPUs"
    else:
        severity = "warning"
        title = (
            f"{fact}: it runs by minor-version compatibility, but PTX compiled at run time "
            "(Triton, flashinfer JIT) and the newest CUDA features fail"
        )
    return finding(
        ID,
        severity,
        title,
        _advice(torch_cuda, driver),
        [rt.probe_fact(run, event, fact)],
        run,
        probe=rt.TORCH_ENV,
    )


def _from_printed(subject: Subject, run: Run, told: set[object]) -> Finding | None:
    """torch's CUDA as a check or collect_env printed it, against the driver's as
    `nvidia-smi`'s banner or collect_env shows it, once per host and pair."""
    pair = rt.printed_pair(subject, run, ("torch.cuda",), ("driver.cuda", "driver.version"))
    if pair is None:
        return None
    torch_fact, driver_fact = pair
    torch_cuda = rt.major_minor(str(torch_fact.value))
    if driver_fact.name == "driver.cuda":
        driver = rt.major_minor(str(driver_fact.value))
        driver_text = f"supports CUDA {driver_fact.value}"
    else:
        driver = rt.cuda_of_driver(str(driver_fact.value))
        driver_text = (
            f"{driver_fact.value} supports CUDA {rt.dotted(driver)} at most" if driver else ""
        )
    if not torch_cuda or not driver or torch_cuda <= driver or run.host in told:
        return None
    told.add(run.host)
    fact = f"torch was built with CUDA {rt.dotted(torch_cuda)}; the driver {driver_text}"
    if torch_cuda[0] > driver[0]:
        severity, title = "error", f"{fact}: torch cannot use the GPUs"
    else:
        severity = "warning"
        title = (
            f"{fact}: it runs by minor-version compatibility, but PTX compiled at run time "
            "(Triton, flashinfer JIT) and the newest CUDA features fail"
        )
    evidence = [torch_fact.evidence, driver_fact.evidence]
    return finding(ID, severity, title, _advice(torch_cuda, driver), evidence, run)


def detect(subject: Subject) -> Iterator[Finding]:
    told: set[object] = set()
    for run, probed in rt.with_probe_findings(subject, _from_probe):
        if probed is not None:
            yield probed
            continue
        old = run.grep(TOO_OLD, "too old", limit=1)
        short = run.grep(INSUFFICIENT, "insufficient for CUDA runtime", limit=1)
        if not old and not short:
            compared = _from_printed(subject, run, told)
            if compared is not None:
                yield compared
            continue
        driver = rt.host_driver_cuda(subject, run)
        if old:
            match, line = old[0]
            driver = decode(match.group("found"))
            title = (
                f"the NVIDIA driver supports only CUDA {rt.dotted(driver)} (found version "
                f"{match.group('found')}), older than the CUDA this torch was built with"
            )
        else:
            match, line = short[0]
            title = "the NVIDIA driver is older than the CUDA runtime: " + line.text.strip()
        told.add(run.host)  # the error says it: the printed versions add nothing
        yield finding(
            ID, "error", title, _advice(None, driver), [e for _, e in (old + short)[:3]], run
        )


def _reads(run: Run) -> bool:
    """Whether the run's torch-env probe read both sides: torch's CUDA (a version, or None for
    a CPU build) and the CUDA the driver supports (NVML could be asked)."""
    probed = rt.torch_env(run)
    if not probed:
        return False
    cuda = rt.torch_of(probed[0]).get("cuda", {"unavailable": "not read"})
    return not isinstance(cuda, dict) and rt.driver_cuda(probed[0]) is not None


resolves = rt.probe_or_rerun(_from_probe, _reads, detect)
