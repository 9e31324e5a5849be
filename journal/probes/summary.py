"""One-line summaries of probe results, for the terminal and the timeline."""

from __future__ import annotations

import json
from typing import Any


def value(result: dict[str, Any], path: str) -> Any:
    """The value at a dotted path of a probe result (None where absent)."""
    node: Any = result
    for part in path.split("."):
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def shown(item: Any) -> str:
    """A field as text: unreadable fields say so briefly."""
    if isinstance(item, dict) and "unavailable" in item:
        return "?"
    if item is None:
        return "None"
    if isinstance(item, list):
        return " ".join(str(x) for x in item) if item else "[]"
    return str(item)


def torch_env(result: dict[str, Any]) -> str:
    """``torch 2.12.0…+cu130 (CUDA 13.0), NCCL 2.28.9, driver 580.159.04 (CUDA 13.0), 8 GPUs``."""
    t = result.get("torch", {})
    built = t.get("cuda")
    # a value Python left None is said in words: torch built without CUDA, no driver
    cuda = "CPU build" if built is None and t.get("version") else f"CUDA {shown(built)}"
    parts = [f"torch {shown(t.get('version'))} ({cuda})"]
    nccl = result.get("nccl")
    parts.append("no NCCL" if nccl is None else f"NCCL {shown(nccl)}")
    driver, driver_cuda = result.get("driver"), result.get("cuda_driver")
    if driver is None and driver_cuda is None:
        parts.append("no NVIDIA driver")
    else:
        parts.append(f"driver {shown(driver)} (CUDA {shown(driver_cuda)})")
    count = result.get("gpu_count")
    name = result.get("gpu_name")
    gpus = f"{shown(count)} GPU" + ("" if count == 1 else "s")
    if name:
        gpus += f" {name} (sm {result.get('capability')})"
    parts.append(gpus)
    nvcc = result.get("nvcc")
    if isinstance(nvcc, dict) and "release" in nvcc:
        parts.append(f"nvcc {nvcc['release']}")
    nvml = result.get("nvml")
    if isinstance(nvml, dict) and "unavailable" in nvml:
        parts.append(f"NVML unavailable: {nvml['unavailable']}")
    return ", ".join(parts)


def printed(result: dict[str, Any]) -> str:
    """What an imported transcript printed of the stack (a ``transcript`` reading: the fields
    of ``torch-env`` it saw), those it printed only: ``torch 2.10.0+cu128 (CUDA 12.8), NCCL
    2.27.5, driver 580.159.04, 8 GPUs, lines 3, 7``."""
    t = result.get("torch") if isinstance(result.get("torch"), dict) else {}
    parts = []
    if t.get("version") is not None:
        cuda = f" (CUDA {t['cuda']})" if t.get("cuda") is not None else ""
        parts.append(f"torch {t['version']}{cuda}")
    elif t.get("cuda") is not None:
        parts.append(f"torch's CUDA {t['cuda']}")
    if t.get("cudnn") is not None:
        parts.append(f"cuDNN {t['cudnn']}")
    if result.get("nccl") is not None:
        parts.append(f"NCCL {result['nccl']}")
    if result.get("driver") is not None:
        cuda = f" (CUDA {result['cuda_driver']})" if result.get("cuda_driver") is not None else ""
        parts.append(f"driver {result['driver']}{cuda}")
    count, gpu = result.get("gpu_count"), result.get("gpu_name")
    if count is not None or gpu is not None:
        many = "" if count is None else f"{count} GPU{'' if count == 1 else 's'}"
        parts.append(" ".join(str(x) for x in (many, gpu) if x))
    nvcc = result.get("nvcc")
    if isinstance(nvcc, dict) and nvcc.get("release") is not None:
        parts.append(f"nvcc {nvcc['release']}")
    lines = sorted(
        {e["line"] for e in (result.get("evidence") or {}).values() if isinstance(e, dict)}
    )
    where = f", line{'' if len(lines) == 1 else 's'} {', '.join(map(str, lines))}" if lines else ""
    return (", ".join(parts) or "nothing of the stack") + where


def summary(name: str, result: dict[str, Any]) -> str:
    """A probe result in one line."""
    if name == "torch-env":
        return torch_env(result)
    if name == "transcript":
        return printed(result)
    if name == "packages":
        packages = result.get("packages", {})
        return f"{len(packages)} packages in {result.get('executable', '?')}"
    return ", ".join(f"{k}={_spelled(v)}" for k, v in result.items() if not k.startswith("_"))


def _spelled(item: Any) -> str:
    """A custom probe's field as an expectation spells it: text as is, the rest as JSON
    (``true``, ``{"cuda": "13.0"}``), an unreadable one as ``?``."""
    if isinstance(item, dict) and "unavailable" in item:
        return "?"
    if isinstance(item, str):
        return item
    return json.dumps(item, ensure_ascii=False)
