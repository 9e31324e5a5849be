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

The finding is said only where a CUDA build is wanted. GPUs in sight (NVML in a `torch-env`
probe, `nvidia-smi` rows or collect_env's GPU models in the same transcript, conda's `__cuda`
virtual package) make it an error. A CUDA build the host had before (a snapshot, pip's or uv's
uninstall lines, a conda plan going `cuda --> cpu`) replaced by the CPU one makes it a warning,
whatever was asked. An install on the host that asked for a CUDA build (`…/whl/cu130`, conda's
`pytorch-cuda=12.1` or `cudatoolkit=11.8`), or code that asked for CUDA (`Torch not compiled
with CUDA enabled`), makes it a warning; on a host with no GPU in sight (NVML listing none, no
NVIDIA driver for NVML to load, `nvidia-smi: command not found`, collect_env's `Is CUDA
available: False` with no GPU model) its advice is to look at the host's GPUs first or to ask
for the CPU build, never a CUDA wheel the host cannot use. Anywhere else (no GPU in sight and
nothing asked for CUDA, or the CPU build asked for: `…/whl/cpu`, `==x+cpu`, conda's `cpuonly`)
a CPU build is what the host can run, and no finding.

One CPU build seen on a host is one finding, however many looks show it (a probe, `pip
freeze`, a print): its evidence lists them, at the first; a CUDA build seen in between makes a
later CPU build a new one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls import runtime as rt
from journal.pitfalls.base import Finding, finding
from journal.reading import printed
from journal.reading.conda import conda_plan
from journal.reading.installs import requests_of, unique
from journal.reading.subject import Evidence, Run, Subject

ID = "cpu-torch"
ORDER = 30
#: Judges a run by what came after it too: later looks at the same build join its evidence.
LOOKS_AHEAD = True
#: Only its own ``resolves`` (below): a later look at the same CPU build joins the first
#: finding's evidence instead of making its own, so ``rerun`` alone would take it for gone.
RESOLVED_BY = ()

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


#: A CUDA build of torch going out: pip's `Found existing installation: torch 2.10.0+cu128`,
#: `Successfully uninstalled torch-2.10.0+cu128`, uv's ` - torch==2.10.0+cu128`.
CUDA_OUT = re.compile(
    r"(?:Found existing installation: torch |Uninstalling torch-|^[ \t]*- torch==)"
    r"(?P<v>\d\S*\+cu\d+)",
    re.M,
)
#: conda's virtual package of the driver (`conda info`: `virtual packages : __cuda=10.2=0`).
CONDA_CUDA = re.compile(r"\b__cuda=(?P<v>\d+\.\d+)")
#: Evidence lines one finding quotes at most (each look at the same CPU build adds its own).
EVIDENCE_KEPT = 12


def _cuda_build(run: Run) -> bool:
    """Whether ``run`` shows a CUDA build of torch (its probe, or its snapshot after)."""
    probed = rt.torch_env(run)
    if probed:
        torch = rt.torch_of(probed[0])
        if torch.get("cuda") and "+cpu" not in str(rt.torch_version(probed[0]) or ""):
            return True
    entry = (run.after or {}).get("torch") or {}
    version = str(entry.get("version") or "")
    return "+cu" in version


def _cuda_before(subject: Subject, run: Run) -> Evidence | None:
    """What shows that the host held a CUDA build of torch before this CPU build, in this run
    or an earlier one of the host: a snapshot, the installer's uninstall lines, conda's plan
    (`…_cuda11.~ --> …cpu_py312…`, pytorch-mutex `cuda --> cpu`)."""
    earlier = []
    for other in subject.runs:
        if other.host == run.host:
            earlier.append(other)
        if other is run:
            break
    for other in reversed(earlier):
        change = other.diff.get("torch") if other.diff is not None else None
        if change is not None and change.before and "+cu" in change.before:
            text = f"package snapshots: torch {change.before} -> {change.after}"
            return Evidence(text, None, other.event, other.key)
        for _, line in other.grep(CUDA_OUT, "+cu", limit=1):
            return line
        for entry in conda_plan(other):
            if entry.name in ("torch", "pytorch-mutex") and "cuda" in entry.before_build:
                if "cpu" in entry.after_build:
                    return entry.line
    return None


def _gpu_hint(subject: Subject, run: Run) -> tuple[str, list[Evidence]] | None:
    """GPUs in sight: NVML or nvidia-smi (see journal.pitfalls.runtime.host_gpus), collect_env's
    GPU models, or conda's `__cuda` virtual package (conda sees a driver)."""
    gpus = rt.host_gpus(subject, run)
    if gpus:
        return gpus
    for other in rt.host_runs(subject, run):
        for fact in printed.facts(other):
            value = str(fact.value or "").strip()
            if fact.name == "gpu.models" and value.startswith("GPU "):
                return value.split(":", 1)[-1].strip() or "a GPU", [fact.evidence]
        for match, line in other.grep(CONDA_CUDA, "__cuda=", limit=1):
            return f"a driver for CUDA {match.group('v')} (conda's __cuda)", [line]
    return None


#: Why NVML could not be asked, where that means the host has no NVIDIA driver: its library
#: missing or not loaded (pynvml's NVMLError_LibraryNotFound, _DriverNotLoaded), or neither
#: pynvml nor nvidia-smi, which every driver installs, there.
NO_DRIVER = re.compile(
    r"Library ?Not ?Found|Driver ?Not ?Loaded|nvidia-smi is not on PATH|"
    r"libnvidia-ml\.so[.\d]*: cannot open",
    re.I,
)


def _no_gpu_probed(subject: Subject, run: Run) -> Evidence | None:
    """A torch-env probe of the host whose NVML (or nvidia-smi) lists no GPU, or shows no
    NVIDIA driver there (:data:`NO_DRIVER`)."""
    for other in rt.host_runs(subject, run):
        probed = rt.torch_env(other)
        if not probed or rt.devices(probed[0]):
            continue
        if rt.nvml_devices(probed[0]) == []:
            return rt.probe_fact(other, probed[1], "no GPU listed by NVML")
        nvml = probed[0].get("nvml")
        why = nvml.get("unavailable") if isinstance(nvml, dict) else None
        if isinstance(why, str) and NO_DRIVER.search(why):
            return rt.probe_fact(other, probed[1], f"no NVIDIA driver in sight: {why}")
    return None


def detect(subject: Subject) -> Iterator[Finding]:
    looks: dict[str, dict] = {}  # host -> the CPU build it shows now: its first run, evidence
    found: list[dict] = []
    for run in subject.runs:
        probed, probed_version = _cpu_probe(run)
        shown, shown_version = _cpu_lines(run)
        other, other_version = _printed_cpu(run)
        evidence = probed + unique([*shown, *other])
        if not evidence:
            if _cuda_build(run):
                looks.pop(run.host, None)  # a CUDA build in between: a later CPU one is new
            continue
        version = probed_version or shown_version or other_version
        now = looks.get(run.host)
        if now is not None and (version is None or now["version"] in (None, version)):
            now["evidence"] += evidence
            now["version"] = now["version"] or version
            continue
        looks[run.host] = now = {"run": run, "version": version, "evidence": evidence}
        found.append(now)
    for look in found:
        made = _finding(subject, look["run"], look["version"], look["evidence"])
        if made is not None:
            yield made


def _finding(
    subject: Subject, run: Run, version: str | None, evidence: list[Evidence]
) -> Finding | None:
    evidence = unique(evidence)[:EVIDENCE_KEPT]
    what = f"torch {version}" if version else "torch"
    gpus = _gpu_hint(subject, run)
    asked = _asked_for(subject, run)
    replaced = _cuda_before(subject, run)
    asked_cuda = any(v.startswith("cu") for v in asked)
    failed = any("not compiled with CUDA" in e.text for e in evidence)
    if replaced is not None and not gpus:
        title = f"{what} is a CPU build, where the host had a CUDA build before"
        return finding(ID, "warning", title, _cuda_advice(subject, run), [*evidence, replaced], run)
    if not (gpus or asked_cuda or failed) or ("cpu" in asked and not asked_cuda):
        return None  # nothing asked for CUDA, or the CPU build was asked for: what fits
    if gpus:
        evidence += gpus[1]
        title = f"{what} is a CPU build, on a host with {gpus[0]}"
        return finding(ID, "error", title, _cuda_advice(subject, run), evidence, run)
    none = _no_gpu_probed(subject, run) or printed.no_gpu(subject, run)
    why = "an install on this host asked for CUDA" if asked_cuda else "the code asked for CUDA"
    if none is None:
        title = f"{what} is a CPU build, though {why}"
        return finding(ID, "warning", title, _cuda_advice(subject, run), evidence, run)
    title = f"{what} is a CPU build, though {why}, on a host with no GPU in sight"
    advice = (
        "a CUDA build could not use a GPU here: if this host should have GPUs, look at them "
        "first (`nvidia-smi`, the driver: `journal run probe torch-env`); if it has none, ask "
        "for the CPU build (`--index-url https://download.pytorch.org/whl/cpu`, or `+cpu` "
        "pins) and keep the code off `.cuda()` here, so that what is asked matches what runs"
    )
    return finding(ID, "warning", title, advice, [*evidence, none], run)


def _cuda_advice(subject: Subject, run: Run) -> str:
    driver = rt.host_driver_cuda(subject, run)
    wanted = rt.wheel_variant(driver) or "cu130"
    return (
        "install the CUDA build of torch: `pip install --force-reinstall torch "
        f"--index-url {rt.index_url(wanted)}` (uv: `uv pip install --reinstall …`)"
        + (f", the newest variant the driver's CUDA {rt.dotted(driver)} runs" if driver else "")
        + ", and the torchvision/torchaudio of the same index; then check that "
        "torch.version.cuda is not None (`journal run probe torch-env`)"
    )


def _shows(run: Run) -> list[Evidence]:
    """Whatever in ``run`` shows a CPU build: its probe, its output."""
    return _cpu_probe(run)[0] or _cpu_lines(run)[0] or _printed_cpu(run)[0]


def _reads(run: Run) -> bool:
    """Whether the run's torch-env probe imported torch and read its CUDA."""
    probed = rt.torch_env(run)
    return bool(probed) and rt.torch_version(probed[0]) is not None and (
        "cuda" in rt.torch_of(probed[0])
    )


resolves = rt.probe_or_rerun(_shows, _reads)
