"""The GPU's compute capability is not among the architectures torch was built for.

A torch wheel carries machine code (SASS) for a fixed list of GPU architectures,
`torch.cuda.get_arch_list()`: `sm_50 … sm_90` for the cu126 wheels, `sm_75 … sm_120` for cu130.
On a GPU outside that list torch warns `NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is
not compatible with the current PyTorch installation.` and every kernel launch then fails with
`no kernel image is available for execution on the device`. Blackwell (sm_100, sm_120) needs a
build made with CUDA 12.8 or newer; the cu130 builds dropped Maxwell, Pascal and Volta.

With a `torch-env` probe the verdict is computed: each device's capability (`12.0` → sm_120)
against torch's arch list. A capability is covered by
- `sm_XY` of the same major and a minor not above the device's (SASS runs on later minors of
  its major: sm_80 code runs on an 8.6 GPU, never on 9.0),
- `sm_XYa` only on exactly that capability (arch-specific features, e.g. `sm_90a` on 9.0),
- `sm_XYf` on the same major from that minor on (the family: `sm_100f` on 10.0 and 10.3),
- `compute_XY` (PTX) on any capability at or above XY: the driver compiles it at load time
  (slower start, and only when the driver knows that PTX version); `compute_XYa` only on XY.

Every later probe that shows the same is not reported again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from journal.pitfalls import runtime as rt
from journal.pitfalls.base import Finding, finding
from journal.reading.subject import Evidence, Run, Subject

ID = "arch-unsupported"
ORDER = 31
#: Only its own ``resolves`` (below): not ``rerun`` besides, which a repeated probe fools.
RESOLVED_BY = ()

#: torch's own warning (torch/cuda/__init__.py), and the line after it.
WARNING = re.compile(
    r"with CUDA capability sm_(?P<sm>\d+) is not compatible with the current PyTorch installation"
)
SUPPORTS = re.compile(
    r"\.?[ \t]*\n?[ \t]*The current PyTorch install supports CUDA capabilities "
    r"(?P<archs>[^\n]*?)\.?[ \t]*(?:\n|$)"
)
ARCH = re.compile(r"^(sm|compute)_(\d+?)(\d)([af]?)$")


def covers(arch: str, capability: tuple[int, int]) -> bool:
    """Whether code built for ``arch`` (`sm_90`, `sm_90a`, `sm_100f`, `compute_90`) runs on
    a GPU of ``capability`` ((9, 0)), by the rules in this module's docstring."""
    match = ARCH.match(arch.strip())
    if not match:
        return False
    kind, major, minor, suffix = (
        match.group(1),
        int(match.group(2)),
        int(match.group(3)),
        match.group(4),
    )
    if suffix == "a":
        return (major, minor) == capability
    if kind == "compute":
        return capability >= (major, minor)
    return capability[0] == major and capability[1] >= minor


def capability_of(text: Any) -> tuple[int, int] | None:
    """(12, 0) of "12.0"."""
    return rt.major_minor(text) if isinstance(text, str) else None


def _sm(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def _advice(capability: tuple[int, int] | None, driver: tuple[int, int] | None) -> str:
    need = rt.MIN_CUDA_FOR_CAPABILITY.get(capability) if capability else None
    sm = _sm(capability) if capability else "this GPU's sm_XY"
    if need and (driver is None or driver >= need):
        wanted = rt.wheel_variant(driver, need) or rt.variant(need)
        how = (
            f"`pip install --force-reinstall torch --index-url {rt.index_url(wanted)}` "
            f"({sm} needs a build made with CUDA {rt.dotted(need)} or newer)"
        )
    elif need:
        how = (
            f"a build made with CUDA {rt.dotted(need)} or newer, which needs a newer driver "
            f"than this one (CUDA {rt.dotted(driver)})"
            if driver
            else ""
        )
    else:
        how = "a torch build for another CUDA (older GPUs need the older cu12x builds)"
    return (
        f"install a torch build whose arch list has {sm}: {how}; rebuild the compiled "
        f"extensions (sgl-kernel, flash-attn…) for it too (`TORCH_CUDA_ARCH_LIST`), then check "
        "`torch.arch_list` with `journal run probe torch-env`"
    )


def _from_probe(run: Run) -> tuple[str, list[Evidence], tuple[int, int]] | None:
    probed = rt.torch_env(run)
    if not probed:
        return None
    env, event = probed
    archs = rt.known(rt.torch_of(env).get("arch_list"))
    if not isinstance(archs, list) or not archs:
        return None
    seen: set[tuple[int, int]] = set()
    for device in rt.devices(env):
        capability = capability_of(device.get("capability"))
        if capability is None or capability in seen:
            continue
        seen.add(capability)
        if not any(covers(str(a), capability) for a in archs):
            name = device.get("name") or "the GPU"
            version = rt.torch_version(env) or "torch"
            text = (
                f"{name} has capability {capability[0]}.{capability[1]} ({_sm(capability)}); "
                f"torch {version} is built for {' '.join(map(str, archs))}"
            )
            title = (
                f"{name} ({_sm(capability)}) is not among the architectures torch {version} "
                f"was built for ({' '.join(map(str, archs))})"
            )
            return title, [rt.probe_fact(run, event, text)], capability
    return None


def detect(subject: Subject) -> Iterator[Finding]:
    repeats = rt.Repeats()
    for run in subject.runs:
        computed = _from_probe(run)
        if rt.torch_env(run) and repeats.new(run, computed[0] if computed else None):
            assert computed is not None
            title, evidence, capability = computed
            yield finding(
                ID,
                "error",
                title,
                _advice(capability, rt.host_driver_cuda(subject, run)),
                evidence,
                run,
                probe=rt.TORCH_ENV,
            )
            continue
        warned = run.grep(WARNING, "is not compatible with the current PyTorch", limit=1)
        if not warned:
            continue
        match, line = warned[0]
        sm = match.group("sm")
        capability = (int(sm[:-1]), int(sm[-1])) if len(sm) >= 2 else None
        line_start = run.text.rfind("\n", 0, match.start()) + 1
        name = run.text[line_start : match.start()].strip().split(": ")[-1].strip() or "The GPU"
        evidence = [line]
        supports = SUPPORTS.match(run.text, match.end())
        archs = supports.group("archs") if supports else None
        if supports:
            evidence.append(run.line_at(supports.start("archs")))
        yield finding(
            ID,
            "error",
            f"{name} (sm_{sm}) is not supported by this torch build"
            + (f" (it has {archs})" if archs else ""),
            _advice(capability, rt.host_driver_cuda(subject, run)),
            evidence,
            run,
        )


def _reads(run: Run) -> bool:
    """Whether the run's torch-env probe knows torch's arch list and a GPU's capability (not
    so where torch could not be imported, or no GPU was listed)."""
    probed = rt.torch_env(run)
    if not probed:
        return False
    archs = rt.known(rt.torch_of(probed[0]).get("arch_list"))
    capabilities = [capability_of(d.get("capability")) for d in rt.devices(probed[0])]
    return isinstance(archs, list) and bool(archs) and any(capabilities)


resolves = rt.probe_or_rerun(_from_probe, _reads, detect)
