"""The hosts page: a matrix of hosts × what matters in a GPU stack, read from each host's
latest ``torch-env`` probe and latest package snapshot; a row whose values differ between
hosts is marked, since that is where a fleet upgrade went unevenly."""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from flask import Blueprint, render_template

from journal.probes.summary import value
from journal.projections.packages import normalize
from journal.projections.timeline import Timeline
from journal.web.selection import hosts_of
from journal.web.state import journal_or_404

bp = Blueprint("hosts", __name__, url_prefix="/j/<journal>/hosts")

#: (label, dotted path into the torch-env result)
STACK = (
    ("torch", "torch.version"),
    ("torch CUDA", "torch.cuda"),
    ("NCCL (torch)", "nccl"),
    ("cuDNN (torch)", "torch.cudnn"),
    ("driver", "driver"),
    ("CUDA driver", "cuda_driver"),
    ("GPU count", "gpu_count"),
    ("GPU name", "gpu_name"),
    ("capability", "capability"),
    ("nvcc", "nvcc.release"),
    ("CUDA_HOME", "cuda_home"),
    ("system NCCL", "system_nccl.NCCL_VERSION"),
)

#: Packages that make or break the stack (normalised names; globs for families).
KEY_PACKAGES = (
    "torch",
    "torchvision",
    "torchaudio",
    "numpy",
    "nvidia-nccl-cu*",
    "flashinfer*",
    "sglang",
    "sgl-kernel",
    "vllm",
    "triton",
)

MISSING = "—"


@dataclass(frozen=True)
class Cell:
    """One value on one host: the text shown, why it is missing where it is, and whether the
    host was read at all (a host never probed differs from none)."""

    text: str
    note: str = ""
    known: bool = True


@dataclass(frozen=True)
class MatrixRow:
    """One thing (a stack field or a package) across the hosts."""

    label: str
    group: str
    cells: dict[str, Cell]

    @property
    def differs(self) -> bool:
        return len({cell.text for cell in self.cells.values() if cell.known}) > 1


def _cell(item: Any) -> Cell:
    if isinstance(item, dict) and "unavailable" in item:
        return Cell("?", str(item["unavailable"]))
    if item is None:
        return Cell(MISSING)
    if isinstance(item, list):
        return Cell(", ".join(str(x) for x in item) or MISSING)
    return Cell(str(item))


def _package_names(timeline: Timeline, hosts: list[str]) -> list[str]:
    """The key packages installed on any host, globs expanded, in KEY_PACKAGES order."""
    present = set()
    for host in hosts:
        present.update(normalize(name) for name in timeline.latest_packages.get(host, {}))
    names: list[str] = []
    for pattern in KEY_PACKAGES:
        if any(ch in pattern for ch in "*?["):
            names.extend(sorted(n for n in present if fnmatchcase(n, pattern)))
        else:
            names.append(pattern)
    return list(dict.fromkeys(names))


def matrix(timeline: Timeline, hosts: list[str]) -> list[MatrixRow]:
    """The rows of the hosts page for ``hosts``."""
    rows = []
    for label, path in STACK:
        cells = {}
        for host in hosts:
            probe = timeline.latest_probes.get(host, {}).get("torch-env")
            if probe is None or probe.result is None:
                cells[host] = Cell(MISSING, "no torch-env probe yet", known=False)
            else:
                cells[host] = _cell(value(probe.result, path))
        rows.append(MatrixRow(label, "stack", cells))
    for name in _package_names(timeline, hosts):
        cells = {}
        for host in hosts:
            snapshot = timeline.latest_packages.get(host)
            if snapshot is None:
                cells[host] = Cell(MISSING, "no package snapshot yet", known=False)
                continue
            entries = {normalize(k): v for k, v in snapshot.items()}
            entry = entries.get(name)
            cells[host] = Cell(str(entry.get("version"))) if entry else Cell("not installed")
        rows.append(MatrixRow(name, "packages", cells))
    return rows


@bp.get("")
def page(journal: str) -> str:
    state = journal_or_404(journal)
    timeline = state.timeline
    hosts = hosts_of(state, timeline.items)
    probes = {host: timeline.latest_probes.get(host, {}).get("torch-env") for host in hosts}
    return render_template(
        "hosts/page.html",
        state=state,
        journal=journal,
        hosts=hosts,
        rows=matrix(timeline, hosts),
        probes=probes,
    )
