"""The CUDA toolkit that builds extensions (nvcc, CUDA_HOME) is not torch's CUDA.

torch's wheels bundle their CUDA runtime, so torch itself ignores the system toolkit; but
everything compiled against torch uses it: `pip install` of sgl-kernel, flash-attn, apex or
DeepEP from source, `torch.utils.cpp_extension`, and the JIT of flashinfer, DeepGEMM and
TransformerEngine all run the `nvcc` of `CUDA_HOME` (or `/usr/local/cuda`). A toolkit of
another major version than `torch.version.cuda` makes torch refuse the build (`The detected CUDA
version (12.8) mismatches the version that was used to compile PyTorch (13.0)`); another minor
version builds, but code from a newer toolkit than the driver's CUDA cannot load.

From a `torch-env` probe: nvcc's release (or the version in CUDA_HOME's path) against
`torch.version.cuda`; another major version is a warning (every extension build will fail),
another minor version information. Every later probe that shows the same is not reported
again. In a transcript (or a step's output) the same comparison is made between commands:
`nvcc --version` or collect_env's `CUDA runtime version` against `torch.version.cuda` or
collect_env's `CUDA used to build PyTorch`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls import runtime as rt
from journal.pitfalls.base import Finding, finding
from journal.reading.subject import Run, Subject

ID = "toolkit-mismatch"
ORDER = 34
#: Only its own ``resolves`` (below): not ``rerun`` besides, which a repeated probe fools.
RESOLVED_BY = ()

#: torch.utils.cpp_extension's refusal. torch 2.11 raises it unformatted, with the versions
#: after the template: `RuntimeError: ('The detected CUDA version (%s) mismatches the version
#: that was used to compilePyTorch (%s). …', '12.8', '13.0')`.
MISMATCH = re.compile(
    r"The detected CUDA version \((?P<toolkit>[\d.]+|%s)\) mismatches the version that was used "
    r"to\s*compile\s*PyTorch \((?P<torch>[\d.]+|%s)\)"
    r"(?:[^\n]*?',\s*'(?P<toolkit_arg>[\d.]+)',\s*'(?P<torch_arg>[\d.]+)'\))?"
)
MINOR = re.compile(
    r"The detected CUDA version \((?P<toolkit>[\d.]+)\) has a minor version mismatch with the "
    r"version that was used to\s+compile\s+PyTorch \((?P<torch>[\d.]+)\)"
)
HOME_VERSION = re.compile(r"cuda-(\d+\.\d+)")


def _advice(torch_cuda: str, toolkit: str) -> str:
    return (
        f"point CUDA_HOME and PATH at a CUDA {torch_cuda} toolkit before building or JIT-compiling "
        f"extensions (`export CUDA_HOME=/usr/local/cuda-{torch_cuda} "
        f"PATH=/usr/local/cuda-{torch_cuda}/bin:$PATH`, or the step's `env`), installing it "
        f"beside {toolkit} if missing; or use the torch build for CUDA {toolkit}; then check "
        "`nvcc` with `journal run probe torch-env`"
    )


def _minor_advice(torch_cuda: str, toolkit: str) -> str:
    return (
        f"usually harmless, as torch says; if an extension built with CUDA {toolkit} fails to "
        f"load (a driver older than {toolkit}, PTX errors), rebuild it with CUDA_HOME at a "
        f"CUDA {torch_cuda} toolkit (`export CUDA_HOME=/usr/local/cuda-{torch_cuda}`)"
    )


def _from_probe(run: Run) -> Finding | None:
    probed = rt.torch_env(run)
    if not probed:
        return None
    env, event = probed
    torch_cuda = rt.major_minor(rt.known(rt.torch_of(env).get("cuda")))
    nvcc = rt.known(env.get("nvcc"))
    home = rt.known(env.get("cuda_home"))
    if isinstance(nvcc, dict) and rt.major_minor(nvcc.get("release")):
        toolkit = rt.major_minor(nvcc.get("release"))
        where = f"nvcc {nvcc.get('version') or nvcc.get('release')} ({nvcc.get('path')})"
    elif isinstance(home, str) and HOME_VERSION.search(home):
        toolkit = rt.major_minor(HOME_VERSION.search(home).group(1))
        where = f"CUDA_HOME {home}"
    else:
        return None
    if not torch_cuda or not toolkit or toolkit == torch_cuda:
        return None
    version = rt.torch_version(env) or "torch"
    fact = f"{where} is CUDA {rt.dotted(toolkit)}; torch {version} has CUDA {rt.dotted(torch_cuda)}"
    if toolkit[0] != torch_cuda[0]:
        severity, title = "warning", f"{fact}: building extensions against torch will fail"
    else:
        severity = "info"
        title = f"{fact}: extensions build, with a minor-version mismatch"
    advise = _advice if severity == "warning" else _minor_advice
    return finding(
        ID,
        severity,
        title,
        advise(rt.dotted(torch_cuda), rt.dotted(toolkit)),
        [rt.probe_fact(run, event, fact)],
        run,
        probe=rt.TORCH_ENV,
    )


def _from_printed(subject: Subject, run: Run, told: set[object]) -> Finding | None:
    """`nvcc --version` (or collect_env's `CUDA runtime version`, which is nvcc's) against
    torch's build CUDA as a check or collect_env printed it; once per host and pair."""
    pair = rt.printed_pair(subject, run, ("nvcc.release", "runtime.cuda"), ("torch.cuda",))
    if pair is None:
        return None
    toolkit_fact, torch_fact = pair
    toolkit = rt.major_minor(str(toolkit_fact.value))
    torch_cuda = rt.major_minor(str(torch_fact.value))
    if not toolkit or not torch_cuda or toolkit == torch_cuda:
        return None
    if (run.host, toolkit, torch_cuda) in told or run.host in told:
        return None
    told.add((run.host, toolkit, torch_cuda))
    where = "nvcc" if toolkit_fact.name == "nvcc.release" else "collect_env's CUDA runtime (nvcc)"
    fact = (
        f"{where} is CUDA {rt.dotted(toolkit)}; torch was built with CUDA {rt.dotted(torch_cuda)}"
    )
    if toolkit[0] != torch_cuda[0]:
        severity, title = "warning", f"{fact}: building extensions against torch will fail"
        advice = _advice(rt.dotted(torch_cuda), rt.dotted(toolkit))
    else:
        severity, title = "info", f"{fact}: extensions build, with a minor-version mismatch"
        advice = _minor_advice(rt.dotted(torch_cuda), rt.dotted(toolkit))
    return finding(ID, severity, title, advice, [toolkit_fact.evidence, torch_fact.evidence], run)


def detect(subject: Subject) -> Iterator[Finding]:
    told: set[object] = set()
    for run, probed in rt.with_probe_findings(subject, _from_probe):
        if probed is not None:
            yield probed
            continue
        if not run.has("mismatches the version", "minor version mismatch"):
            compared = _from_printed(subject, run, told)
            if compared is not None:
                yield compared
                continue
        else:
            told.add(run.host)  # torch's own message says it
        refused = run.grep(MISMATCH, "mismatches the version", limit=1)
        if refused:
            match, line = refused[0]
            toolkit = match.group("toolkit_arg") or match.group("toolkit")
            torch_cuda = match.group("torch_arg") or match.group("torch")
            yield finding(
                ID,
                "error",
                f"the build found CUDA {toolkit} (nvcc of CUDA_HOME) but torch was built with "
                f"CUDA {torch_cuda}: torch refused to compile the extension",
                _advice(torch_cuda, toolkit),
                [line, *([run.line_at(match.end())] if "\n" in match.group(0) else [])],
                run,
            )
            continue
        minor = run.grep(MINOR, "minor version mismatch", limit=1)
        if minor:
            match, line = minor[0]
            yield finding(
                ID,
                "info",
                f"the build used CUDA {match.group('toolkit')} while torch has CUDA "
                f"{match.group('torch')} (a minor-version mismatch)",
                _minor_advice(match.group("torch"), match.group("toolkit")),
                [line],
                run,
            )


def _reads(run: Run) -> bool:
    """Whether the run's torch-env probe read both sides: torch's CUDA and the toolkit (nvcc's
    release, or a CUDA_HOME that names its version, or their absence: no toolkit builds
    nothing against the wrong CUDA)."""
    probed = rt.torch_env(run)
    if not probed:
        return False
    env = probed[0]
    torch_cuda = rt.major_minor(rt.known(rt.torch_of(env).get("cuda")))
    if torch_cuda is None or "nvcc" not in env:
        return False
    nvcc = env["nvcc"]
    why = str(nvcc.get("unavailable", "")) if isinstance(nvcc, dict) else ""
    # an nvcc that failed or printed no release is not read; no nvcc at all is no toolkit
    return "failed" not in why and "no release" not in why


resolves = rt.probe_or_rerun(_from_probe, _reads, detect)
