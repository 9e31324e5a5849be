"""What a gate's health command printed, read (`nvidia-smi -q`): per GPU the facts that say a
node must not take work back, as NVIDIA's docs have them: rows awaiting a remap (pending until
the GPU is reset), a remapping that failed, memory it cannot repair or repairs pending,
uncorrectable ECC errors since the driver loaded (volatile), and a hardware slowdown active.

Any other command's health is its exit status alone (its output is recorded all the same).
"""

from __future__ import annotations

import re
from typing import Any

_GPU = re.compile(r"^GPU ([0-9A-Fa-f:.]+)\s*$", re.M)
_FIELD = re.compile(r"^(\s*)([^:\n]+?)\s*:\s*(.*?)\s*$")


def _sections(text: str) -> list[tuple[str, str]]:
    """Each GPU's block of `nvidia-smi -q`: (bus id, its text)."""
    starts = list(_GPU.finditer(text))
    return [
        (m.group(1), text[m.end() : starts[i + 1].start() if i + 1 < len(starts) else len(text)])
        for i, m in enumerate(starts)
    ]


def _paths(block: str) -> dict[str, str]:
    """A GPU block's ``Section/Sub/Field`` -> value, by indentation."""
    found: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in block.splitlines():
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        match = _FIELD.match(line)
        if match:
            path = "/".join([*(name for _, name in stack), match.group(2).strip()])
            found[path] = match.group(3)
        else:
            stack.append((indent, line.strip()))
    return found


def _count(value: str | None) -> int:
    return int(value) if value is not None and value.strip().isdigit() else 0


def nvidia_smi_q(text: str) -> dict[str, Any] | None:
    """The facts of `nvidia-smi -q` output, with the ``problems`` they show (one sentence
    each); None when ``text`` is not such output."""
    if "NVSMI LOG" not in text:
        return None
    top = {m.group(2).strip(): m.group(3) for m in map(_FIELD.match, text.splitlines()) if m}
    gpus, problems = [], []
    for bus, block in _sections(text):
        f = _paths(block)
        name = f.get("Product Name", "?")
        volatile = sum(
            _count(v)
            for k, v in f.items()
            if k.startswith("ECC Errors/Volatile/") and "Uncorrectable" in k
        )
        gpu = {
            "bus": bus,
            "name": name,
            "ecc_volatile_uncorrectable": volatile,
            "remapped_rows_pending": f.get("Remapped Rows/Pending") == "Yes",
            "remapping_failure": f.get("Remapped Rows/Remapping Failure Occurred") == "Yes",
            "repair_pending": "Yes"
            in (f.get("ECC Errors/Channel Repair Pending"), f.get("ECC Errors/TPC Repair Pending")),
            "unrepairable_memory": f.get("ECC Errors/Unrepairable Memory") == "Yes",
            "hw_slowdown": any(k.endswith("/HW Slowdown") and v == "Active" for k, v in f.items()),
        }
        gpus.append(gpu)
        said = {
            "remapped_rows_pending": "rows awaiting a remap (reset the GPU)",
            "remapping_failure": "a row remapping failed",
            "repair_pending": "a memory repair pending",
            "unrepairable_memory": "memory it cannot repair",
            "hw_slowdown": "a hardware slowdown active",
        }
        for key, words in said.items():
            if gpu[key]:
                problems.append(f"GPU {bus} ({name}): {words}")
        if volatile:
            problems.append(f"GPU {bus} ({name}): {volatile} uncorrectable ECC errors since boot")
    return {
        "tool": "nvidia-smi -q",
        "driver": top.get("Driver Version"),
        "cuda": top.get("CUDA Version"),
        "gpus": gpus,
        "problems": problems,
    }
