"""Whether checking a runbook costs what its size does: the time `journal.runbook.load` takes to
read and check a generated runbook of 10,000, 50,000 and 100,000 steps, and how it grows.

Each step has a name, a command, an env table, a probe, an expectation and a host (one of
four, or a group); each tenth a cwd and timeout; besides them the runbook has groups, a custom
probe and 100 benchmarks, so that every check that looks names up (duplicate step names, a
step's hosts and probes, a benchmark named like a step) runs on every step. The time of
10,000 steps times the size ratio is what linear growth would take; ``ratio`` is the time
measured against the smallest size's, which linear growth keeps near the size ratio (5, 10),
and quadratic growth near its square (25, 100). What grows beyond linear is the garbage
collector's full passes over a bigger heap (with ``gc.disable()``, 50.0 and 49.6 us a step at
10,000 and 100,000 steps); a set of the step names, not a scan of the steps before, tells a
name given twice.

Run: ``.venv/bin/python bench/runbook_size.py [--sizes 10000,50000,100000] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from journal.runbook import load  # noqa: E402

HOSTS = ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]
#: The table's columns and their widths.
HEADS = [("steps", 8), ("bytes", 11), ("check", 8), ("per step", 9), ("ratio", 6), ("size x", 6)]


def runbook_text(steps: int, benchmarks: int = 100) -> str:
    """A valid runbook of ``steps`` steps (and ``benchmarks`` benchmarks)."""
    parts = ['[journal]\nname = "size"\nredact = ["a-literal-secret"]\n']
    for host in HOSTS:
        parts.append(
            f'[hosts.{host}]\nssh = "me@{host}"\nenv = {{ CUDA_HOME = "/usr/local/cuda" }}\n'
        )
    parts.append('[groups]\nfirst = ["gpu-1", "gpu-2"]\nsecond = ["gpu-3", "gpu-4"]\n')
    parts.append(
        '[probes.driver]\nrun = "nvidia-smi"\ncapture = { version = "Driver Version: (\\\\S+)" }\n'
    )
    for i in range(steps):
        hosts = f'"{HOSTS[i % 4]}"' if i % 3 else '"first", "gpu-4"'
        extra = 'cwd = "~"\ntimeout = 600\n' if i % 10 == 0 else ""
        parts.append(
            f'[[steps]]\nname = "step-{i}"\nrun = "echo {i} && uv pip install pkg=={i}"\n'
            f'env = {{ STEP = "{i}", UV_HTTP_TIMEOUT = "120" }}\nprobes = ["driver"]\n'
            f'hosts = [{hosts}]\n{extra}expect = {{ version = ">=550" }}\n'
        )
    for i in range(benchmarks):
        parts.append(
            f'[benchmarks.bench-{i}]\nrun = "python3 b.py {i}"\nparser = "regex"\n'
            f"pattern = 'tok: (?P<tok_{i}>[0-9.]+)'\nhosts = [\"second\"]\n"
        )
    return "\n".join(parts)


def timed(path: Path, runs: int) -> float:
    """The median seconds of ``runs`` loads of the runbook at ``path``."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        runbook = load(path)
        times.append(time.perf_counter() - started)
        assert len(runbook.steps) > 0
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="10000,50000,100000", help="step counts, comma-separated"
    )
    parser.add_argument("--runs", type=int, default=3, help="loads per size (the median is shown)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as folder:
        base: tuple[int, float] | None = None
        print("  ".join(f"{head:>{width}}" for head, width in HEADS))
        for size in sizes:
            path = Path(folder) / f"runbook-{size}.toml"
            path.write_text(runbook_text(size))
            seconds = timed(path, args.runs)
            base = base or (size, seconds)
            print(
                f"{size:>8,}  {path.stat().st_size:>11,}  {seconds:>7.2f}s  "
                f"{seconds / size * 1e6:>7.1f}us  {seconds / base[1]:>6.1f}  {size / base[0]:>6.1f}"
            )


if __name__ == "__main__":
    main()
