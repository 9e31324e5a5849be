"""Whether checking a runbook costs what its size does: the time and memory
`journal.runbook.load` takes to read and check a generated runbook of 10,000, 50,000 and
100,000 steps, and how it grows; with ``--run-step``, also one `journal run step` on it.

Each step has a name, a command, an env table, a probe, an expectation and a host (one of
four, or a group); each tenth a cwd and timeout; besides them the runbook has groups, a custom
probe and 100 benchmarks, so that every check that looks names up (duplicate step names, a
step's hosts and probes, a benchmark named like a step) runs on every step. ``ratio`` is the
time measured against the smallest size's, which linear growth keeps near the size ratio
(5, 10), and quadratic growth near its square (25, 100).

Each size is loaded in a fresh process (``--runs`` times, the median shown), so that its peak
resident memory (``peak``) is its own. ``cpu`` is the process's CPU time: on a machine other
work shares, the wall-clock ``load`` grows with that work and ``cpu`` much less. What is left
of a load is mostly the standard library's TOML parser (about three quarters of it at 100,000
steps). The garbage collector is off while a runbook is read (its passes over the growing heap
found nothing and took half the time), a set of the step names tells a name given twice, an
expectation given by many steps is parsed once, and the index of key paths to lines that
messages name is built only when a message needs it.

``--run-step`` also times `journal run step step-1 --host gpu-1` (the hosts made local) on the
largest runbook, a fresh database each time: the wall time and peak memory a user waits for.

Run: ``.venv/bin/python bench/runbook_size.py [--sizes 10000,50000,100000] [--runs 3]
[--run-step]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HOSTS = ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]
#: The table's columns and their widths.
HEADS = [
    ("steps", 8),
    ("bytes", 11),
    ("load", 8),
    ("cpu", 8),
    ("per step", 9),
    ("peak", 8),
    ("ratio", 6),
    ("size x", 6),
]


def runbook_text(steps: int, benchmarks: int = 100, local: bool = False) -> str:
    """A valid runbook of ``steps`` steps (and ``benchmarks`` benchmarks); ``local``: its
    hosts run here (for `journal run step`)."""
    parts = ['[journal]\nname = "size"\nredact = ["a-literal-secret"]\n']
    for host in HOSTS:
        ssh = "local" if local else f"me@{host}"
        parts.append(f'[hosts.{host}]\nssh = "{ssh}"\nenv = {{ CUDA_HOME = "/usr/local/cuda" }}\n')
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


def _load_once(path: str) -> None:
    """In a child process: load the runbook once and print its wall, CPU and peak RSS."""
    from journal.runbook import load

    wall, cpu = time.perf_counter(), time.process_time()
    runbook = load(path)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert len(runbook.steps) > 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"wall": wall, "cpu": cpu, "peak": peak}))


def measured(path: Path, runs: int) -> dict[str, float]:
    """The medians of ``runs`` loads of the runbook at ``path``, each in a fresh process."""
    found: list[dict[str, float]] = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, __file__, "--load-once", str(path)],
            capture_output=True,
            text=True,
            check=True,
        )
        found.append(json.loads(done.stdout))
    return {key: statistics.median(f[key] for f in found) for key in found[0]}


def run_step(size: int, folder: Path) -> tuple[float, float, int]:
    """`journal run step step-1 --host gpu-1` on a runbook of ``size`` local steps, on a fresh
    database: (wall seconds, peak MB of the command, its exit status)."""
    runbook = folder / f"local-{size}.toml"
    runbook.write_text(runbook_text(size, local=True))
    db = folder / f"run-step-{size}.db"
    env = {k: v for k, v in os.environ.items() if k not in ("JOURNAL_DB", "JOURNAL_RUNBOOK")}
    env["PYTHONPATH"] = str(ROOT)  # the journal of this tree, not whichever is installed
    command = [sys.executable, "-m", "journal", "--db", str(db), "--runbook", str(runbook)]
    started = time.perf_counter()
    child = subprocess.Popen(
        [*command, "run", "step", "step-1", "--host", "gpu-1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=folder,
    )
    _, status, usage = os.wait4(child.pid, 0)  # this command's own peak, not its siblings'
    wall = time.perf_counter() - started
    child.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss / 1024, child.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", default="10000,50000,100000", help="step counts, comma-separated"
    )
    parser.add_argument("--runs", type=int, default=3, help="loads per size (the median is shown)")
    parser.add_argument(
        "--run-step", action="store_true", help="also time one `journal run step` on the largest"
    )
    parser.add_argument("--load-once", metavar="FILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load_once:
        _load_once(args.load_once)
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        base: tuple[int, float] | None = None
        print("  ".join(f"{head:>{width}}" for head, width in HEADS))
        for size in sizes:
            path = folder / f"runbook-{size}.toml"
            path.write_text(runbook_text(size))
            got = measured(path, args.runs)
            base = base or (size, got["cpu"])
            print(
                f"{size:>8,}  {path.stat().st_size:>11,}  {got['wall']:>7.2f}s  "
                f"{got['cpu']:>7.2f}s  {got['cpu'] / size * 1e6:>7.1f}us  "
                f"{got['peak'] / 2**20:>6.0f}MB  {got['cpu'] / base[1]:>6.1f}  "
                f"{size / base[0]:>6.1f}"
            )
        if args.run_step:
            wall, peak, status = run_step(sizes[-1], folder)
            print(
                f"journal run step on {sizes[-1]:,} steps: {wall:.2f}s wall, peak {peak:.0f} MB "
                f"(exit {status}: the step's own command, not journal's)"
            )


if __name__ == "__main__":
    main()
