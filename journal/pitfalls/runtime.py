"""Helpers shared by the runtime detectors (CUDA, driver, toolkit, ABI): reading the
`torch-env` probe, versions as (major, minor), the GPUs a host is known to have, and the torch
wheel variants. Not a detector: :data:`journal.pitfalls.DETECTORS` does not list it."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from journal.pitfalls.base import Finding
from journal.reading import printed as _printed
from journal.reading.subject import Evidence, Run, Subject

TORCH_ENV = "torch-env"

#: The CUDA variants of the torch wheels on download.pytorch.org, newest first.
WHEEL_CUDAS: tuple[tuple[int, int], ...] = (
    (13, 0),
    (12, 9),
    (12, 8),
    (12, 6),
    (12, 4),
    (12, 1),
    (11, 8),
)

#: The oldest CUDA whose nvcc can build for a compute capability (and so the oldest torch
#: wheel variant that can carry it): sm_120 and sm_100 came with CUDA 12.8, sm_90 with 11.8.
MIN_CUDA_FOR_CAPABILITY: dict[tuple[int, int], tuple[int, int]] = {
    (12, 1): (12, 9),
    (12, 0): (12, 8),
    (11, 0): (13, 0),
    (10, 3): (12, 9),
    (10, 0): (12, 8),
    (9, 0): (11, 8),
    (8, 9): (11, 8),
    (8, 7): (11, 4),
    (8, 6): (11, 1),
    (8, 0): (11, 0),
}

#: The oldest Linux driver of each CUDA release (its toolkit's release notes, table 3).
MIN_DRIVER_FOR_CUDA: dict[tuple[int, int], str] = {
    (13, 0): "580.65.06",
    (12, 9): "575.51.03",
    (12, 8): "570.26",
    (12, 6): "560.28.03",
    (12, 5): "555.42.02",
    (12, 4): "550.54.14",
    (12, 3): "545.23.06",
    (12, 2): "535.54.03",
    (12, 1): "530.30.02",
    (12, 0): "525.60.13",
    (11, 8): "520.61.05",
    (11, 7): "515.43.04",
    (11, 6): "510.39.01",
    (11, 5): "495.29.05",
    (11, 4): "470.42.01",
    (11, 3): "465.19.01",
    (11, 2): "460.27.03",
    (11, 1): "455.23.04",
    (11, 0): "450.36.06",
    (10, 2): "440.33",
    (10, 1): "418.39",
    (10, 0): "410.48",
    (9, 2): "396.26",
    (9, 0): "384.81",
}

#: Compute capabilities of the data-centre and recent GPUs, by the name NVML gives them.
CAPABILITY_BY_NAME: tuple[tuple[re.Pattern[str], tuple[int, int]], ...] = tuple(
    (re.compile(pattern, re.I), capability)
    for pattern, capability in (
        (r"\bGB10\b|DGX Spark", (12, 1)),
        (r"RTX (?:PRO )?[56]0\d\d|RTX 50\d\d|RTX PRO \d+ Blackwell", (12, 0)),
        (r"\bG?B[23]00\b", (10, 0)),
        (r"\bG?H[12]00\b|\bH800\b|\bH20\b", (9, 0)),
        (r"\bL40S?\b|\bL4\b|RTX 40\d\d|RTX \d000 Ada", (8, 9)),
        (r"\bA(?:10|40|16|2)\b|RTX 30\d\d|RTX A\d000", (8, 6)),
        (r"\bA(?:100|800|30)\b", (8, 0)),
        (r"\bV100\b|TITAN V\b", (7, 0)),
        (r"\bT4\b|RTX 20\d\d|TITAN RTX", (7, 5)),
    )
)

_MAJOR_MINOR = re.compile(r"(\d+)\.(\d+)")

#: A GPU row of the `nvidia-smi` table: `|   0  NVIDIA H200    On  |   00000000:00:06.0 Off |`.
SMI_ROW = re.compile(
    r"^\|[ \t]+(?P<index>\d+)[ \t]+(?P<name>\S[^\n]*?)[ \t]+(?:On|Off)[ \t]+\|[ \t]+"
    r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d",
    re.M,
)
#: A line of `nvidia-smi -L`: `GPU 0: NVIDIA H200 (UUID: GPU-07721f8b-…)`.
SMI_LIST = re.compile(r"^GPU (?P<index>\d+): (?P<name>.+?) \(UUID: GPU-", re.M)
#: The banner of `nvidia-smi`: `Driver Version: 580.159.04     CUDA Version: 13.0`.
SMI_BANNER = re.compile(
    r"Driver Version:\s*(?P<driver>[\d.]+)\s+CUDA Version:\s*(?P<cuda>\d+\.\d+)"
)


def cuda_of_driver(version: Any) -> tuple[int, int] | None:
    """The newest CUDA a Linux driver supports (470.82.01: 11.4), from the oldest driver of
    each CUDA release; None for a version older than any of them, or no version."""
    if not isinstance(version, str) or not re.match(r"^\d+\.\d+", version):
        return None
    have = tuple(int(p) for p in re.findall(r"\d+", version)[:3])
    for cuda, minimum in sorted(MIN_DRIVER_FOR_CUDA.items(), reverse=True):
        if have >= tuple(int(p) for p in minimum.split(".")):
            return cuda
    return None


def known(value: Any) -> Any:
    """``value``, or None where the probe could not read it (``{"unavailable": why}``)."""
    return None if isinstance(value, dict) and "unavailable" in value else value


def major_minor(text: Any) -> tuple[int, int] | None:
    """``(13, 0)`` for "13.0", "13.0.88" or "V13.0"; None when there is no version."""
    if not isinstance(text, str):
        return None
    match = _MAJOR_MINOR.search(text)
    return (int(match.group(1)), int(match.group(2))) if match else None


def capability_from_name(name: str) -> tuple[int, int] | None:
    """(9, 0) for "NVIDIA H200": the compute capability of a GPU known by its name."""
    for pattern, capability in CAPABILITY_BY_NAME:
        if pattern.search(name):
            return capability
    return None


def dotted(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


def variant(version: tuple[int, int]) -> str:
    """``cu130`` for (13, 0)."""
    return f"cu{version[0]}{version[1]}"


def wheel_variant(
    at_most: tuple[int, int] | None, at_least: tuple[int, int] | None = None
) -> str | None:
    """The newest torch wheel variant (``cu128``) within the bounds, or None."""
    for cuda in WHEEL_CUDAS:
        if (at_most is None or cuda <= at_most) and (at_least is None or cuda >= at_least):
            return variant(cuda)
    return None


def index_url(cuda_variant: str) -> str:
    return f"https://download.pytorch.org/whl/{cuda_variant}"


def torch_env(run: Run) -> tuple[dict[str, Any], int | None] | None:
    """The run's `torch-env` probe result and its event: the built-in probe, or a custom
    ``json = true`` probe that prints a torch-env capture (``"probe": "torch-env"``)."""
    result = run.probes.get(TORCH_ENV)
    if isinstance(result, dict):
        return result, run.probe_events.get(TORCH_ENV)
    for name, result in run.probes.items():
        if isinstance(result, dict) and result.get("probe") == TORCH_ENV:
            return result, run.probe_events.get(name)
    return None


class Repeats:
    """Per host, the probe-based fact last seen: a condition that every later probe shows
    again is reported once, where it first appeared, and again only when it changes."""

    def __init__(self) -> None:
        self._last: dict[str, object] = {}

    def new(self, run: Run, fact: object | None) -> bool:
        """Record ``fact`` (None: the probe showed no problem) for ``run``'s host; whether it
        is a problem not reported by the host's previous probe."""
        last = self._last.get(run.host)
        self._last[run.host] = fact
        return fact is not None and fact != last

    def probed(self, run: Run, computed: Finding | None) -> Finding | None:
        """``computed`` (a detector's finding from ``run``'s torch-env probe) when the run has
        that probe and the finding is new for its host, else None."""
        if torch_env(run) and self.new(run, computed.title if computed else None):
            return computed
        return None


def probe_clears(later: Run, shows: Callable[[Run], object | None]) -> str | None:
    """Why ``later`` resolves a probe-based finding: its torch-env probe no longer shows the
    condition (``shows`` is the detector's reading of a probe), or None."""
    if torch_env(later) is None or shows(later):
        return None
    where = "on its own" if later.key.startswith("probe-") else f"after {later.step}"
    return f"the torch-env probe {where} on {later.host} no longer shows it"


def probe_or_rerun(
    shows: Callable[[Run], object | None],
    reads: Callable[[Run], bool] | None = None,
    detect: Callable[[Subject], Iterator[Finding]] | None = None,
) -> Callable[..., str | None]:
    """A detector's ``resolves`` (its docstring is the rule the catalogue prints): a later
    torch-env probe that reads the condition (``reads``: what it is about is known, not
    ``unavailable``) and no longer shows it; where the run has no such probe, the same step run
    again without the finding, unless the finding was read from a probe (its ``probe`` fact):
    only a probe shows that gone. A run that shows it again (in its probe or its output)
    resolves nothing: ``detect``, the detector's own, judges a rerun alone, since a condition
    printed again on the host is not reported again and leaves the rerun no finding of its
    own."""
    from journal.pitfalls.resolution import SAME, has_probes, rerun, went_through

    def resolves(found: Finding, later: Run, ids: frozenset[str]) -> str | None:
        if found.id in ids:
            return None
        if torch_env(later) is not None and (reads is None or reads(later)):
            # the probe decides: one that still shows the condition resolves nothing, even
            # in the same step run again (a repeated condition is not reported again)
            return probe_clears(later, shows)
        if found.facts.get("probe") == TORCH_ENV or shows(later):
            return None
        why = rerun(found, later, ids)
        if why and detect is not None and shows_alone(later, detect):
            return None
        return why

    resolves.__doc__ = (
        "A later torch-env probe on the host that reads what the finding is about and no "
        "longer shows it. Or, for a finding read from a step's output (not from a probe), the "
        "same step (for an imported or interactive command, the same command) run again on "
        "the host that went through showing it nowhere and has no such probe."
    )
    resolves.needs = lambda later: has_probes(later) or went_through(later)  # type: ignore[attr-defined]
    resolves.refused_by = frozenset({SAME})  # type: ignore[attr-defined]
    return resolves


def shows_alone(run: Run, detect: Callable[[Subject], Iterator[Finding]]) -> bool:
    """Whether ``detect`` finds anything in ``run`` judged on its own (what it printed, not
    what the host's earlier runs showed)."""
    return next(iter(detect(Subject("journal", [run]))), None) is not None


def with_probe_findings(
    subject: Subject, from_probe: Callable[[Run], Finding | None]
) -> Iterator[tuple[Run, Finding | None]]:
    """Each run with its finding from its torch-env probe when that finding is new for its
    host (else None): a detector yields it, or reads the run's output when there is none."""
    repeats = Repeats()
    for run in subject.runs:
        yield run, repeats.probed(run, from_probe(run))


def probe_fact(run: Run, event: int | None, text: str) -> Evidence:
    """A fact read from the torch-env probe, as evidence."""
    return Evidence(f"torch-env probe: {text}", None, event, run.key)


def torch_of(env: dict[str, Any]) -> dict[str, Any]:
    torch = env.get("torch")
    return torch if isinstance(torch, dict) else {}


def torch_version(env: dict[str, Any]) -> str | None:
    version = known(torch_of(env).get("version"))
    return version if isinstance(version, str) else None


def nvml_devices(env: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The GPUs NVML (or nvidia-smi) lists, or None where it could not be asked."""
    nvml = known(env.get("nvml"))
    if not isinstance(nvml, dict):
        return None
    devices = nvml.get("devices")
    return [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else None


def devices(env: dict[str, Any]) -> list[dict[str, Any]]:
    """The GPUs torch sees (its own device list), else the ones NVML lists."""
    seen = known(torch_of(env).get("devices"))
    if isinstance(seen, list) and seen:
        return [d for d in seen if isinstance(d, dict)]
    return nvml_devices(env) or []


def describe_gpus(found: list[dict[str, Any]]) -> str:
    names = sorted({str(d.get("name")) for d in found if d.get("name")})
    count = f"{len(found)} GPU{'s' if len(found) != 1 else ''}"
    return f"{count} ({', '.join(names)})" if names else count


def driver_cuda(env: dict[str, Any]) -> tuple[int, int] | None:
    """The CUDA version the driver supports, from NVML."""
    nvml = known(env.get("nvml"))
    if isinstance(nvml, dict):
        return major_minor(nvml.get("cuda_driver"))
    return None


def driver_version(env: dict[str, Any]) -> str | None:
    nvml = known(env.get("nvml"))
    value = nvml.get("driver") if isinstance(nvml, dict) else None
    return value if isinstance(value, str) else None


def host_runs(subject: Subject, run: Run) -> Iterator[Run]:
    """``run`` first, then the other runs of its host (before and after it)."""
    yield run
    for other in subject.runs:
        if other is not run and other.host == run.host:
            yield other


def smi_gpus(run: Run) -> list[Evidence]:
    """The GPU lines `nvidia-smi` (or `nvidia-smi -L`) printed in this run."""
    rows = run.grep(SMI_ROW, "|", limit=64)
    if not rows:
        rows = run.grep(SMI_LIST, "UUID: GPU-", limit=64)
    return [line for _, line in rows]


def host_gpus(subject: Subject, run: Run) -> tuple[str, list[Evidence]] | None:
    """What shows that ``run``'s host has GPUs: NVML devices in a torch-env probe, or the GPU
    rows of `nvidia-smi`, in this run or another of the same host (a transcript is one
    session on one host). ``(description, evidence)``, or None."""
    for other in host_runs(subject, run):
        probed = torch_env(other)
        if probed:
            env, event = probed
            listed = nvml_devices(env)
            if listed:
                text = f"NVML lists {describe_gpus(listed)}"
                if driver_version(env):
                    text += f", driver {driver_version(env)}"
                return describe_gpus(listed), [probe_fact(other, event, text)]
        rows = smi_gpus(other)
        if rows:
            names = [SMI_ROW.match(r.text) or SMI_LIST.match(r.text) for r in rows]
            found = [{"name": m.group("name").rstrip(". ")} for m in names if m]
            return describe_gpus(found), rows[:4]
    return None


def host_driver_cuda(subject: Subject, run: Run) -> tuple[int, int] | None:
    """The CUDA version the host's driver supports (torch-env probe, or nvidia-smi's banner)."""
    for other in host_runs(subject, run):
        probed = torch_env(other)
        if probed and driver_cuda(probed[0]):
            return driver_cuda(probed[0])
        banner = other.grep(SMI_BANNER, "CUDA Version", limit=1)
        if banner:
            return major_minor(banner[0][0].group("cuda"))
    return None


def printed_pair(
    subject: Subject, run: Run, first: tuple[str, ...], second: tuple[str, ...]
) -> tuple[Any, Any] | None:
    """Two facts of ``run``'s host as its output (and earlier output on the host) shows them,
    the first known of each list of names (:mod:`journal.reading.printed`), when ``run``
    itself showed one of them and has no torch-env probe (which decides by itself)."""
    seen = _printed.at(subject, run)
    if seen is None or torch_env(run) is not None:
        return None
    if not (set(first) | set(second)) & seen.shown:
        return None
    a = next((seen.get(n) for n in first if seen.get(n) is not None), None)
    b = next((seen.get(n) for n in second if seen.get(n) is not None), None)
    return (a, b) if a is not None and b is not None else None


def site_package(path: str) -> str | None:
    """The top-level package of a path under site-packages (``sgl_kernel`` of
    ``…/site-packages/sgl_kernel/common_ops.abi3.so``), or of a module file beside it
    (``flash_attn_2_cuda`` of ``…/site-packages/flash_attn_2_cuda.cpython-310-….so``)."""
    match = re.search(r"(?:site|dist)-packages/([^/\s\"']+)", path)
    if not match:
        return None
    name = match.group(1)
    return name.split(".", 1)[0] if "." in name else name
