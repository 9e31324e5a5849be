"""What journal costs before it does anything: `journal --help`, `journal --version` and a
command's `--help`, each run as its own process several times, against the bare interpreter.

Target (../shared/DESIGN.md, "Targets"): `journal --help` <= 0.15 s. The command line's
parser names each command's function and imports its family only when it runs
(journal/cli/parser.py), so these load argparse and nothing of the store, Flask or Fabric.
The figures are medians (wall and CPU seconds); on a loaded machine the ratio to
``python -c pass`` says more than the seconds. Also lists the slowest imports of `journal
--help` (``python -X importtime``). Run: ``.venv/bin/python bench/startup.py [--runs N]``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HELP_TARGET_S = 0.15
#: The console script pip made beside this interpreter (what a user types), else `-m journal`.
SCRIPT = Path(sys.executable).with_name("journal")
JOURNAL = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "journal"]
CASES = {
    "python -c pass (the floor)": [sys.executable, "-c", "pass"],
    "journal --help": [*JOURNAL, "--help"],
    "journal --version": [*JOURNAL, "--version"],
    "journal run step --help": [*JOURNAL, "run", "step", "--help"],
    "journal export postmortem --help": [*JOURNAL, "export", "postmortem", "--help"],
}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], runs: int, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Median wall and median CPU seconds (user + system) of ``runs`` runs of ``argv``."""
    walls, cpus = [], []
    for _ in range(runs):
        cpu, started = _children_cpu(), time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, check=True)
        walls.append(time.perf_counter() - started)
        cpus.append(_children_cpu() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def help_seconds(runs: int = 5, env: dict[str, str] | None = None) -> float:
    """Median wall seconds of `journal --help` (bench/overhead.py reports it too)."""
    return timed(CASES["journal --help"], runs, env)[0]


def slowest_imports(argv: list[str], most: int = 6) -> list[tuple[str, float]]:
    """The top-level imports of ``argv`` (a Python command) taking longest, in seconds."""
    done = subprocess.run([sys.executable, "-X", "importtime", *argv[1:]], capture_output=True)
    found = []
    for line in done.stderr.decode().splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| ( *)(\S+)", line)
        if m and not m.group(2):  # imported by the program itself, not by another module
            found.append((m.group(3), int(m.group(1)) / 1e6))
    return sorted(found, key=lambda item: -item[1])[:most]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each command (default 10)")
    args = parser.parse_args()
    env = dict(os.environ, COLUMNS="100")
    print(f"target: journal --help <= {HELP_TARGET_S} s (medians of {args.runs} runs)")
    floor = None
    failed = False
    for label, argv in CASES.items():
        wall, cpu = timed(argv, args.runs, env)
        floor = floor or wall
        verdict = ""
        if label == "journal --help":
            failed = wall > HELP_TARGET_S
            verdict = f"  {'OVER TARGET' if failed else 'OK'} <= {HELP_TARGET_S} s"
        print(
            f"{label:<34} {wall:6.3f} s wall  {cpu:6.3f} CPU-s  "
            f"{wall / floor:5.2f}x the floor{verdict}"
        )
    script = [sys.executable, "-m", "journal", "--help"]
    print("slowest imports of `python -m journal --help` (cumulative):")
    for name, seconds in slowest_imports(script):
        print(f"  {name:<40} {seconds * 1000:7.1f} ms")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
