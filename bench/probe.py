"""What the probes cost: torch-env against `python -m torch.utils.collect_env`, and the package
snapshot against `pip list`, all run by the same python (the env being probed).

    python bench/probe.py --python /path/to/env/bin/python [--rounds 3]

Target (DESIGN): torch-env under half of collect_env's wall time while reporting NCCL, the arch
list and the NVML driver and CUDA-driver versions, which collect_env does not.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "journal" / "probes" / "scripts"


def timed(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True)
    return time.perf_counter() - started, done


def median_of(
    cmd: list[str], rounds: int
) -> tuple[float, list[float], subprocess.CompletedProcess[str]]:
    times, last = [], None
    for _ in range(rounds):
        seconds, last = timed(cmd)
        if last.returncode != 0:
            raise SystemExit(f"{' '.join(cmd[:3])} failed:\n{last.stderr[-2000:]}")
        times.append(seconds)
    assert last is not None
    return statistics.median(times), times, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", default=sys.executable, help="the env's python")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    py = args.python
    torch_env = [py, str(SCRIPTS / "torch_env.py")]
    rows = []
    warm = subprocess.run([py, "-c", "import torch"], capture_output=True)  # the page cache
    if warm.returncode != 0:
        raise SystemExit(f"{py} cannot import torch: {warm.stderr.decode()[-500:]}")
    fast, fast_all, fast_run = median_of(torch_env, args.rounds)
    deep, deep_all, _ = median_of([*torch_env, "--import-torch"], args.rounds)
    collect, collect_all, collect_run = median_of(
        [py, "-m", "torch.utils.collect_env"], args.rounds
    )
    snap, snap_all, snap_run = median_of([py, str(SCRIPTS / "packages.py")], args.rounds)
    pip, pip_all, _ = median_of([py, "-m", "pip", "list", "--format", "json"], args.rounds)
    rows = [
        ("torch-env (default: no import torch)", fast, fast_all),
        ("torch-env --import-torch", deep, deep_all),
        ("python -m torch.utils.collect_env", collect, collect_all),
        ("packages probe (importlib.metadata)", snap, snap_all),
        ("pip list --format json", pip, pip_all),
    ]
    result = json.loads(fast_run.stdout)
    packages = json.loads(snap_run.stdout)["packages"]
    print(f"python: {py} ({result['python']}), torch {result['torch'].get('version')}")
    print(f"median of {args.rounds} runs each, wall seconds (all runs):")
    for name, median, every in rows:
        print(f"  {name:<40} {median:6.3f} s   ({', '.join(f'{t:.3f}' for t in every)})")
    print(
        f"torch-env / collect_env: {fast / collect:.2f}x (target < 0.50x)   "
        f"with --import-torch: {deep / collect:.2f}x"
    )
    print(
        f"package snapshot: {len(packages)} distributions in {snap:.3f} s; "
        f"pip list {pip:.3f} s ({snap / pip:.2f}x)"
    )
    collect_text = collect_run.stdout
    for label, present in (
        ("NCCL version", isinstance(result.get("nccl"), str)),
        ("arch list", isinstance(result["torch"].get("arch_list"), list)),
        ("NVML driver version", isinstance(result.get("driver"), str)),
        ("NVML CUDA-driver version", isinstance(result.get("cuda_driver"), str)),
    ):
        in_collect = bool(
            {
                "NCCL version": re.search(r"NCCL\S*\s*[:=]?\s*\(?\d", collect_text),
                "arch list": re.search(r"sm_\d+", collect_text),
                "NVML driver version": re.search(r"Nvidia driver version: \d", collect_text),
                "NVML CUDA-driver version": re.search(r"CUDA driver version: \d", collect_text),
            }[label]
        )
        print(
            f"  {label:<26} torch-env: {'yes' if present else 'no (unavailable here)':<22} "
            f"collect_env: {'yes' if in_collect else 'no'}"
        )


if __name__ == "__main__":
    main()
