"""torch is a CPU build on a host that has GPUs.

A torch wheel from PyPI's default index on some platforms, from
`https://download.pytorch.org/whl/cpu`, or pulled in by a package that pins a bare
`torch==x` resolved against the wrong index, has no CUDA at all: its version ends in `+cpu`,
`torch.version.cuda` is None, `torch.cuda.is_available()` is False whatever the driver, and
the first `.cuda()` raises `AssertionError: Torch not compiled with CUDA enabled`. Everything
still imports, so installs and simple checks pass, and the serving stack fails (or quietly
runs on the CPU) later.

The CPU build shows as a `+cpu` version, `torch.version.cuda` printed as None (by a check,
alone or among other values, or collect_env's `CUDA used to build PyTorch: None`), or a conda
build string with `cpu` (`pytorch-1.12.1-py3.8_cpu_0` in conda's plan or collect_env's
`[conda]` lines).

The GPUs are known from NVML in a `torch-env` probe, or from `nvidia-smi` printed in the same
transcript; with them the finding is an error. An install that asked for a CUDA build
(`…/whl/cu130`, conda's `pytorch-cuda=12.1` or `cudatoolkit=11.8`) makes it a warning, and so
does `Torch not compiled with CUDA enabled`. A host with no GPU in sight (`nvidia-smi: command
not found`, collect_env's `Is CUDA available: False` with no GPU model) where nothing asked
for CUDA gets no finding: a CPU build is what it can run. Otherwise, without any sign of a
GPU, a bare `+cpu` version is information, and so is a CPU build an install asked for
(`…/whl/cpu`, `==x+cpu`, conda's `cpuonly`). A CPU build that every later probe shows again
is reported at the first probe only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls import _printed as printed
from journal.pitfalls import _runtime as rt
from journal.pitfalls._install import conda_plan, requests_of, unique
from journal.pitfalls.base import Evidence, Finding, Run, Subject, finding

ID = "cpu-torch"
ORDER = 30

#: The exception line (not the `raise AssertionError("…")` source line of the traceback).
NOT_COMPILED = re.compile(
    r"^[ \t]*(?:\w+Error: )?Torch not compiled with CUDA enabled[ \t]*$", re.M
)
CPU_VERSION = re.compile(r"(?<![\w.+-])\d+\.\d+(?:\.\d+)?(?:\.?(?:dev|a|b|rc)\d+)?\+cpu\b")
#: What precedes a torch version on a line: `torch: `, `torch==`, `torch-`, `torch    `
#: (pip list), `PyTorch version: `, `torch.__version__ = `; not torchvision or torchaudio.
TORCH_BEFORE = re.compile(
    r"(?:^|[^\w-])(?:py)?torch(?:\.__version__)?(?:\s+version)?\s*[-=:]*\s*$", re.I
)
CUDA_NONE = re.compile(
    r"^[ \t]*(?:CUDA|torch\.version\.cuda|CUDA used to build PyTorch|CUDA version)[ \t]*[:=]"
    r"[ \t]*None[ \t]*$",
    re.M,
)


def _cpu_lines(run: Run) -> tuple[list[Evidence], str | None]:
    """Output lines that show a CPU build of torch, and the version they name."""
    found = [line for _, line in run.grep(NOT_COMPILED, "not compiled with CUDA", limit=1)]
    version = None
    for match, line in run.grep(CPU_VERSION, "+cpu", limit=50):
        prefix = run.text[run.text.rfind("\n", 0, match.start()) + 1 : match.start()]
        if TORCH_BEFORE.search(prefix) or not prefix.strip():
            found.append(line)
            version = match.group(0)
            break
    if not run.has("+rocm"):
        found += [line for _, line in run.grep(CUDA_NONE, "None", limit=1)]
    return found, version


def _cpu_probe(run: Run) -> tuple[list[Evidence], str | None]:
    probed = rt.torch_env(run)
    if not probed:
        return [], None
    env, event = probed
    torch = rt.torch_of(env)
    version = rt.torch_version(env)
    if version is None or "cuda" not in torch or "+rocm" in version:
        return [], None
    if version.endswith("+cpu") or torch.get("cuda") is None:
        return [rt.probe_fact(run, event, f"torch {version}, torch.version.cuda None")], version
    return [], None


def _asked_for(subject: Subject, run: Run) -> set[str]:
    """The variants installs on ``run``'s host asked for (``cpu``, ``cu130``, ``cuda``)."""
    return {
        req.variant
        for other in rt.host_runs(subject, run)
        for req in requests_of(subject, other)
        if req.variant
    }


def _printed_cpu(run: Run) -> tuple[list[Evidence], str | None]:
    """A CPU build as the output shows it otherwise: `torch.version.cuda` printed as None by a
    check or collect_env, a conda build string with `cpu` (collect_env's `[conda] pytorch …
    py3.10_cpu_0`, a conda plan that installs `pytorch-…-py3.8_cpu_0`)."""
    found, version = [], None
    rocm = run.has("+rocm") or any(f.name == "torch.hip" and f.value for f in printed.facts(run))
    for fact in printed.facts(run):
        if fact.name == "torch.cuda" and fact.value is None and not rocm:
            found.append(fact.evidence)
        elif fact.name == "torch.build" and "cpu" in str(fact.value):
            found.append(fact.evidence)
            version = version or str(fact.value).split()[0]
    for entry in conda_plan(run):
        if entry.name == "torch" and entry.after and "cpu" in entry.after_build:
            found.append(entry.line)
            version = version or f"{entry.after} ({entry.after_build})"
    return found, version


def detect(subject: Subject) -> Iterator[Finding]:
    repeats = rt.Repeats()
    for run in subject.runs:
        probed, probed_version = _cpu_probe(run)
        if rt.torch_env(run) and not repeats.new(run, probed_version if probed else None):
            probed, probed_version = [], None  # the previous probe of this host said so
        shown, shown_version = _cpu_lines(run)
        other, other_version = _printed_cpu(run)
        evidence = probed + unique([*shown, *other])
        if not evidence:
            continue
        version = probed_version or shown_version or other_version
        failed = any("not compiled with CUDA" in e.text for e in evidence)
        what = f"torch {version}" if version else "torch"
        gpus = rt.host_gpus(subject, run)
        asked = _asked_for(subject, run)
        asked_cuda = any(v.startswith("cu") for v in asked)
        if not gpus and not asked_cuda and not probed and printed.no_gpu(subject, run):
            continue  # no GPU in sight and nothing asked for CUDA: a CPU build is what fits
        driver = rt.host_driver_cuda(subject, run)
        wanted = rt.wheel_variant(driver) or "cu130"
        advice = (
            "install the CUDA build of torch: `pip install --force-reinstall torch "
            f"--index-url {rt.index_url(wanted)}` (uv: `uv pip install --reinstall …`)"
            + (f", the newest variant the driver's CUDA {rt.dotted(driver)} runs" if driver else "")
            + ", and the torchvision/torchaudio of the same index; then check that "
            "torch.version.cuda is not None (`journal run probe torch-env`)"
        )
        if "cpu" in asked and not asked_cuda:
            severity = "info"
            title = f"{what} is a CPU build, as an install on this host asked (`…/cpu`, `+cpu`)"
        elif gpus:
            severity = "error"
            title = f"{what} is a CPU build, on a host with {gpus[0]}"
            evidence += gpus[1]
        elif asked_cuda:
            severity = "warning"
            title = f"{what} is a CPU build, though an install on this host asked for CUDA"
        elif failed:
            severity = "warning"
            title = f"{what} is a CPU build, and the code asked for CUDA"
        else:
            severity = "info"
            title = f"{what} is a CPU build (no GPU seen on this host)"
        yield finding(ID, severity, title, advice, [*evidence], run)


#: Resolved by a later torch-env probe that no longer shows it, or the step run again without it.
resolves = rt.probe_or_rerun(lambda run: _cpu_probe(run)[0])
