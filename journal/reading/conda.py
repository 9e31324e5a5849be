"""Reading conda's and mamba's plans: the packages a `conda install` (or `mamba`,
`micromamba`) run's output shows it installing, changing or removing, with their builds.

conda prints ``The following packages will be DOWNGRADED:`` (UPDATED, SUPERSEDED, REMOVED,
NEW … INSTALLED) blocks and a download table; mamba and micromamba a transaction table of
``-`` and ``+`` rows. :func:`conda_plan` reads all three; :func:`conda_version` gives a
build's variant as a local version label (``1.7.1+cu102``), so that the install readers
(:mod:`journal.reading.installs`) compare conda's versions as they compare pip's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from journal.reading.subject import Evidence, Run

#: conda's plan: `The following packages will be DOWNGRADED:` (UPDATED, SUPERSEDED by a
#: higher-priority channel, REMOVED; `The following NEW packages will be INSTALLED:`), then
#: one line per package: `  numpy    1.26.0-py311h08b1b3b_0 --> 1.24.3-py311h08b1b3b_1`,
#: `  pytorch  pytorch/linux-64::pytorch-2.1.0-py3.11_cpu_0`.
CONDA_BLOCK = re.compile(
    r"^The following (?:NEW )?packages will be (?P<kind>INSTALLED|UPDATED|DOWNGRADED|REMOVED"
    r"|SUPERSEDED)\b[^\n]*:[ \t]*$",
    re.M,
)
CONDA_ENTRY = re.compile(
    r"^[ \t]+(?P<name>[A-Za-z0-9_][A-Za-z0-9._-]*)[ \t]+(?P<old>\S+)"
    r"(?:[ \t]+-->[ \t]+(?P<new>\S+))?[ \t]*$"
)


@dataclass(frozen=True)
class CondaEntry:
    """One package of a conda plan: its name (conda's ``pytorch`` is ``torch``), the version
    and build it had and gets (None where absent), and the line."""

    name: str
    before: str | None
    before_build: str
    after: str | None
    after_build: str
    line: Evidence
    downloaded: bool = False  # only in the download table: whether it was there is not said


#: conda's names of torch (``pytorch-nightly``: its nightly package until 2019).
CONDA_TORCH = ("pytorch", "pytorch-nightly")
#: conda's download table: `    pytorch-1.12.1     |      py3.8_cpu_0       133.8 MB  pytorch`.
CONDA_DOWNLOAD = re.compile(
    r"^[ \t]+(?P<name>[A-Za-z0-9_][A-Za-z0-9._-]*?)-(?P<version>\d[^\s|]*?)[ \t]*\|[ \t]*"
    r"(?P<build>\S+)[ \t]+[\d.]+ [KMG]?B\b",
    re.M,
)
_BUILD_CUDA = re.compile(r"cuda_?(\d+)\.(\d+)|(?<![a-z])cu(\d)(\d{2})(?!\d)")


def conda_version(version: str, build: str) -> str:
    """A conda version with its build's variant as a local version label, so that a CUDA
    build and a CPU build of one version differ: ``1.7.1`` with ``py3.8_cuda10.2_…`` is
    ``1.7.1+cu102``, with ``cpu_py38h6a09485_0`` ``1.7.1+cpu``."""
    if "+" in version:
        return version
    cuda = _BUILD_CUDA.search(build)
    if cuda:
        major, minor = (cuda.group(1), cuda.group(2)) if cuda.group(1) else cuda.group(3, 4)
        return f"{version}+cu{major}{minor}"
    if "cpu" in build:
        return f"{version}+cpu"
    return version


def _conda_spec(name: str, spec: str) -> tuple[str, str]:
    """(version, build) of ``pytorch/linux-64::pytorch-2.1.0-py3.11_cpu_0`` or ``1.0-cuda``
    (a build cut short with ``~`` is kept as shown)."""
    spec = spec.rpartition("::")[2]
    if spec.startswith(name + "-"):
        spec = spec[len(name) + 1 :]
    version, _, build = spec.partition("-")
    return version, build


#: mamba's and micromamba's transaction table: a section (`  Downgrade:`), then rows of
#: `  - pytorch   2.2.2  py3.11_cuda11.8_cudnn8.7.0_0  pytorch   Cached` (the old) and
#: `  + pytorch   2.0.1  …` (the new); `Install:` rows only `+`, `Remove:` rows only `-`.
MAMBA_SECTION = re.compile(
    r"^[ \t]*(?P<kind>Install|Upgrade|Downgrade|Change|Remove|Reinstall):[ \t]*$", re.M
)
MAMBA_NEEDLES = ("Install:\n", "Downgrade:\n", "Change:\n", "Upgrade:\n", "Remove:\n")
MAMBA_ROW = re.compile(
    r"^[ \t]+(?P<sign>[+-])[ \t]+(?P<name>[A-Za-z0-9_][\w.-]*)[ \t]+(?P<version>\d\S*)"
    r"[ \t]+(?P<build>\S+)[ \t]+\S+(?:[ \t]+\S+)?[ \t]*$"
)


def _mamba_table(run: Run) -> list[CondaEntry]:
    found: list[CondaEntry] = []
    text = run.text
    for section in MAMBA_SECTION.finditer(text):
        old: dict[str, tuple[str, str, Evidence]] = {}
        pos, rows = section.end() + 1, 0
        while pos < len(text) and rows < 5000:
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            line = text[pos:end]
            pos = end + 1
            stripped = line.strip()
            if not stripped or set(stripped) <= set("─━-"):
                continue
            match = MAMBA_ROW.match(line)
            if not match:
                break  # the next section, or the summary
            rows += 1
            name = match.group("name")
            key = "torch" if name in CONDA_TORCH else name
            version, build = match.group("version"), match.group("build")
            evidence = run.line_at(end - len(line))
            if match.group("sign") == "-":
                old[key] = (version, build, evidence)
                if section.group("kind") == "Remove":
                    found.append(CondaEntry(key, version, build, None, "", evidence))
                continue
            before = old.pop(key, None)
            if before is None:
                found.append(CondaEntry(key, None, "", version, build, evidence))
            else:
                found.append(CondaEntry(key, before[0], before[1], version, build, before[2]))
    return found


def conda_plan(run: Run) -> list[CondaEntry]:
    """The packages of the conda (or mamba) plans the run's output shows, in order."""
    if not run.has("The following ", *MAMBA_NEEDLES):
        return []
    found = []
    text = run.text
    for block in CONDA_BLOCK.finditer(text):
        kind = block.group("kind")
        pos = block.end() + 1
        seen = 0
        while pos < len(text) and seen < 2000:
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            line = text[pos:end]
            pos = end + 1
            if not line.strip():
                if seen:
                    break
                continue
            if line.strip().strip(".") == "":
                continue  # `  ......` where a poster cut the list
            match = CONDA_ENTRY.match(line)
            if not match:
                break
            seen += 1
            name = match.group("name")
            old = _conda_spec(name, match.group("old"))
            new = _conda_spec(name, match.group("new")) if match.group("new") else None
            key = "torch" if name in CONDA_TORCH else name
            evidence = run.line_at(end - len(line))
            if kind == "INSTALLED":
                found.append(CondaEntry(key, None, "", old[0], old[1], evidence))
            elif kind == "REMOVED":
                found.append(CondaEntry(key, old[0], old[1], None, "", evidence))
            elif new is not None:
                found.append(CondaEntry(key, old[0], old[1], new[0], new[1], evidence))
    if run.has(*MAMBA_NEEDLES):
        found += _mamba_table(run)
    listed = {e.name for e in found}
    if run.has("|"):  # the download table: builds of packages a cut-short plan does not list
        for match, line in run.grep(CONDA_DOWNLOAD, "|", limit=500):
            name = match.group("name")
            key = "torch" if name in CONDA_TORCH else name
            if key not in listed:
                found.append(
                    CondaEntry(
                        key, None, "", match.group("version"), match.group("build"), line, True
                    )
                )
    return found


#: conda's (and mamba's) word that a plan was carried out, not only shown.
CONDA_DONE = ("Executing transaction: done", "Transaction finished", "Executing transaction:")


def plan_only(run: Run) -> bool:
    """Whether the run's output shows a conda plan that it does not say was carried out (a
    thread cut at the plan, an answer of `n`, `--dry-run`)."""
    return bool(conda_plan(run)) and not run.has(*CONDA_DONE)
