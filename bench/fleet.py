"""What a fleet costs: one step on 4 and on 16 real sshds against the slowest host run alone.

Each host is a real sshd on its own loopback address (127.0.0.21 …); the step prints a line
every 0.1 s for about a second (package snapshots before and after it, as by default). For a
fleet of N hosts the script measures, as wall seconds of the whole `journal run step`:

- each host alone (``--host H``), and takes the slowest;
- the fleet at once (``--group fleet-N``), the best of ``--repeat`` runs;

and prints the fleet's wall time against the slowest host alone (1.00 would be perfect
parallelism). It also reads the fleet run's own summary line (scheduler wall against the
slowest host inside the same run), and how many CPU-seconds the whole machine was busy during
the fleet run: the hosts on loopback are this machine, so once their work (sshd sessions, the
package snapshots' pythons, the command) needs more than its cores, the fleet's wall time is
that CPU time over the core count, not journal's scheduling. No target: the figures say what a
fleet costs here.

With ``--lines N`` the step prints N distinct lines at once instead (the shape of a build or
an install on every host), and the peak RSS of the fleet run is the figure to read: the
target (issue 29) is 150 MB for 64 hosts of 20,000 lines each, memory that does not grow with
hosts × output (``--sizes 64 --lines 20000 --repeat 1``).

Run: ``.venv/bin/python bench/fleet.py [--sizes 4 16] [--repeat 3] [--lines N]`` (about two
minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.sshd import SshHome, SshServer  # noqa: E402

STEP = "for i in $(seq 1 10); do echo line $i of the fleet step; sleep 0.1; done; echo done"
SUMMARY = re.compile(r"slowest (\S+) ([\d.]+)s; wall ([\d.]+)s")


#: N distinct lines, printed as fast as the host can
LINES = "seq 1 {lines} | sed 's/^/fleet step line /; s/$/ of the build on this host/'"
RSS_TARGET_MB = 150


def runbook(folder: Path, servers: list[SshServer], sizes: list[int], step: str = STEP) -> Path:
    """Hosts h01 … hNN, a group ``fleet-N`` of the first N for each size, the step."""
    names = [f"h{i:02d}" for i in range(1, len(servers) + 1)]
    hosts = "".join(
        f'[hosts.{n}]\nssh = "{s.alias}"\npython = "{sys.executable}"\n\n'
        for n, s in zip(names, servers, strict=True)
    )
    groups = "".join(f"fleet-{n} = {names[:n]!r}\n".replace("'", '"') for n in sizes)
    path = folder / "runbook.toml"
    path.write_text(
        f'[journal]\nname = "fleet-bench"\n\n{hosts}[groups]\n{groups}\n'
        f"[[steps]]\nname = \"fleet-step\"\nrun = '''{step}'''\n"
    )
    return path


def busy_cpu_s() -> float:
    """CPU-seconds the whole machine has spent busy since boot (Linux /proc/stat)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return float("nan")
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    """CPU-seconds used by the children waited for so far (the `journal` processes)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def journal(
    folder: Path, env: dict[str, str], *args: str
) -> tuple[float, str, float, float, float]:
    """Wall seconds of `journal run step fleet-step ARGS`, what it said on stderr, the
    machine's busy CPU-seconds meanwhile, journal's own, and its peak RSS (MB)."""
    cmd = [sys.executable, "-m", "journal", "--db", str(folder / "journal.db")]
    cmd += ["--runbook", str(folder / "runbook.toml"), "run", "step", "fleet-step", *args]
    cpu, own = busy_cpu_s(), own_cpu_s()
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        said = err.read().decode("utf-8", "replace")
    took = time.perf_counter() - started
    cpu, own = busy_cpu_s() - cpu, own_cpu_s() - own
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{said}")
    return took, said, cpu, own, usage.ru_maxrss / 1024


def measure(folder: Path, env: dict[str, str], size: int, repeat: int) -> dict[str, float]:
    """The figures of one fleet size."""
    alone = {}
    for i in range(1, size + 1):
        alone[f"h{i:02d}"] = journal(folder, env, "--host", f"h{i:02d}")[0]
    slowest_host = max(alone, key=lambda h: alone[h])
    fleet_walls, inside, cpus, peaks = [], [], [], []
    for _ in range(repeat):
        took, said, cpu, own, peak = journal(folder, env, "--group", f"fleet-{size}")
        fleet_walls.append(took)
        peaks.append(peak)
        cpus.append((cpu, own))
        found = SUMMARY.search(said)
        if found:
            inside.append((float(found.group(3)), float(found.group(2))))
    best = min(fleet_walls)
    cpu, own = cpus[fleet_walls.index(best)]
    wall_in, slow_in = min(inside) if inside else (float("nan"), float("nan"))
    return {
        "alone_slowest": alone[slowest_host],
        "alone_median": sorted(alone.values())[size // 2],
        "fleet": best,
        "ratio": best / alone[slowest_host],
        "inside_wall": wall_in,
        "inside_slowest": slow_in,
        "inside_ratio": wall_in / slow_in,
        "cpu": cpu,
        "own": own,
        "floor": cpu / (os.cpu_count() or 1),
        "peak": max(peaks),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 16])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lines", type=int, help="the step prints this many distinct lines")
    args = parser.parse_args()
    step = LINES.format(lines=args.lines) if args.lines else STEP
    count = max(args.sizes)
    folder = Path(tempfile.mkdtemp(prefix="journal-bench-fleet-"))
    print(f"fleet step: `{step}` (snapshots before and after), {os.cpu_count()} CPUs here")
    try:
        with contextlib.ExitStack() as stack:
            started = time.perf_counter()
            servers = [stack.enter_context(SshServer(f"127.0.0.{21 + i}")) for i in range(count)]
            up = time.perf_counter() - started
            print(f"{count} sshds on 127.0.0.21-{20 + count} up in {up:.2f}s")
            home = SshHome(servers)
            stack.callback(home.cleanup)
            runbook(folder, servers, args.sizes, step)
            env = home.env()
            print(
                f"{'hosts':>5}  {'slowest alone':>13}  {'median alone':>12}  {'fleet':>7}  "
                f"{'ratio':>5}  {'in-run wall/slowest host':>24}  machine busy (/ cores)  "
                "journal's CPU  peak RSS"
            )
            over = False
            for size in args.sizes:
                f = measure(folder, env, size, args.repeat)
                print(
                    f"{size:>5}  {f['alone_slowest']:>12.2f}s  {f['alone_median']:>11.2f}s  "
                    f"{f['fleet']:>6.2f}s  {f['ratio']:>5.2f}  "
                    f"{f['inside_wall']:>8.2f}s / {f['inside_slowest']:.2f}s = "
                    f"{f['inside_ratio']:.2f}  {f['cpu']:>9.1f} CPU-s ({f['floor']:.2f}s)  "
                    f"{f['own']:.2f} CPU-s  {f['peak']:.0f} MB"
                )
                over |= bool(args.lines) and f["peak"] > RSS_TARGET_MB
            if args.lines:
                verdict = "OVER TARGET" if over else "OK"
                print(f"-> {verdict} (peak RSS of a fleet run <= {RSS_TARGET_MB} MB)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if args.lines and over else 0


if __name__ == "__main__":
    sys.exit(main())
