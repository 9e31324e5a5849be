"""A CUDA kernel had no machine code for this GPU: `no kernel image is available for
execution on the device`.

The CUDA runtime says this (`cudaErrorNoKernelImageForDevice`, error 209; 48 before CUDA 11)
when a library holds no SASS for the GPU's architecture and no PTX it can compile: torch built
without the GPU's sm_XY (see arch-unsupported), or an extension — sgl-kernel, flash-attn,
vLLM's `_C`, a JIT cache — built for other architectures (`TORCH_CUDA_ARCH_LIST`) or against
an older CUDA that did not know this GPU. torch reports it as
`RuntimeError: CUDA error: no kernel image is available for execution on the device`, often
at the first tensor operation after a successful import. The package named in the traceback
says which library to rebuild or replace.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls import runtime as rt
from journal.pitfalls.base import Finding, finding
from journal.reading.subject import Run, Subject

ID = "no-kernel-image"
ORDER = 32

MESSAGE = re.compile(r"no kernel image is available for execution on the device")
FRAME = re.compile(r'File "(?P<path>[^"]+)", line \d+')
#: Packages whose frames say nothing about which kernel failed.
WARNED = re.compile(r"with CUDA capability sm_(\d+) is not compatible")
ARCH_LIST = re.compile(r"\bTORCH_CUDA_ARCH_LIST=(\"[^\"]*\"|'[^']*'|\S+)")
PLAIN = frozenset({"torch", "numpy", "typing_extensions", "importlib", "runpy"})


def _package(run: Run, before: int) -> str | None:
    """The package of the innermost frame (outside torch) of the traceback that ends in the
    error at position ``before``."""
    start = run.text.rfind("Traceback (most recent call last)", max(0, before - 50_000), before)
    if start == -1:
        return None
    found = None
    for match in FRAME.finditer(run.text, start, before):
        package = rt.site_package(match.group("path"))
        if package and package not in PLAIN:
            found = package
    return found


def _gpu(subject: Subject, run: Run) -> tuple[str | None, str | None]:
    """(sm_XY, name) of the host's GPU: from a torch-env probe, torch's own warning, or the
    name `nvidia-smi` printed (the capability of a known model)."""
    for other in rt.host_runs(subject, run):
        probed = rt.torch_env(other)
        if probed:
            for device in rt.devices(probed[0]):
                capability = rt.major_minor(device.get("capability"))
                if capability:
                    return f"sm_{capability[0]}{capability[1]}", device.get("name")
    for other in rt.host_runs(subject, run):
        warned = other.grep(WARNED, "CUDA capability sm_", limit=1)
        if warned:
            return f"sm_{warned[0][0].group(1)}", None
    for other in rt.host_runs(subject, run):
        for line in rt.smi_gpus(other):
            match = rt.SMI_ROW.match(line.text) or rt.SMI_LIST.match(line.text)
            capability = rt.capability_from_name(match.group("name")) if match else None
            if capability:
                return f"sm_{capability[0]}{capability[1]}", match.group("name").strip()
    return None, None


def _arch_list(subject: Subject, run: Run) -> str | None:
    """The TORCH_CUDA_ARCH_LIST that a build on this host (up to this run) was given."""
    found = None
    for other in subject.runs:
        if other.host == run.host:
            value = other.env.get("TORCH_CUDA_ARCH_LIST")
            match = ARCH_LIST.search(other.command)
            found = match.group(1).strip("'\"") if match else value or found
        if other is run:
            break
    return found


def detect(subject: Subject) -> Iterator[Finding]:
    for run in subject.runs:
        found = run.grep(MESSAGE, "no kernel image", limit=3)
        if not found:
            continue
        match, line = found[0]
        package = _package(run, match.start())
        sm, name = _gpu(subject, run)
        gpu = f" ({', '.join(p for p in (sm, name) if p)})" if sm else ""
        archs = _arch_list(subject, run)
        built = f"; the build before it had TORCH_CUDA_ARCH_LIST={archs}" if archs else ""
        wanted = (
            f'`TORCH_CUDA_ARCH_LIST="{_arch_value(sm)}"`'
            if sm
            else "`TORCH_CUDA_ARCH_LIST` set to the GPU's compute capability (`nvidia-smi "
            "--query-gpu=compute_cap --format=csv`)"
        )
        if package:
            title = f"a kernel of `{package}` has no machine code for this GPU{gpu}{built}"
            advice = (
                f"install the build of `{package}` made for this torch and this GPU's "
                f"architecture{gpu}, or rebuild it from source with "
                f"{wanted}; if torch's own arch list lacks "
                "it as well, replace torch first (see arch-unsupported); check with "
                "`journal run probe torch-env`"
            )
        elif archs:
            title = (
                f"a kernel built for TORCH_CUDA_ARCH_LIST={archs} has no machine code for "
                f"this GPU{gpu}"
            )
            advice = (
                f"rebuild the extension with {wanted} (add `+PTX` to "
                "the last entry to keep code that newer GPUs can compile), then run it again"
            )
        else:
            title = f"a CUDA kernel has no machine code for this GPU{gpu}"
            advice = (
                "find the library that launched it (the traceback above the error; run with "
                "`CUDA_LAUNCH_BLOCKING=1`): if it is torch, install a torch build whose "
                f"`torch.cuda.get_arch_list()` has this GPU{gpu} (cu128 or newer for Blackwell); "
                "if it is an extension (sgl-kernel, flash-attn, vLLM), reinstall or rebuild it "
                f"for this architecture ({wanted})"
            )
        evidence = [line for _, line in found]
        yield finding(ID, "error", f"{title}: {line.text.strip()}", advice, evidence, run)


def _arch_value(sm: str | None) -> str:
    """`12.0` for sm_120, for TORCH_CUDA_ARCH_LIST."""
    if not sm:
        return "X.Y"
    digits = sm[3:]
    return f"{digits[:-1]}.{digits[-1]}"
