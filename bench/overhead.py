"""What journaling costs: `journal run step` against bare Fabric over a real sshd on loopback.

Target (../shared/DESIGN.md, "Targets"): a command printing 200,000 lines through
`journal run step` within 1.10x the wall time of the same command through Fabric's
``Connection.run(hide=True)``, and journal's peak memory flat (under 150 MB) whatever the output
size. Also checks that every byte printed was recorded.

Run: ``.venv/bin/python bench/overhead.py [--lines N ...] [--repeat K]`` (about a minute).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from fabric import Config, Connection  # noqa: E402

from bench.startup import HELP_TARGET_S, help_seconds  # noqa: E402
from journal.output import decode  # noqa: E402
from journal.store import EventStore  # noqa: E402
from tests.sshd import SshHome, SshServer  # noqa: E402

RATIO_TARGET = 1.10
#: a step's fixed cost over bare Fabric, without snapshots and with them
FIXED_EXTRA_S = 0.5
SNAPSHOT_EXTRA_S = 0.9
SEQ = "seq 200000"
RSS_TARGET_MB = 150
TIME = "/usr/bin/time"
JOURNAL_NAME = "overhead"


def command(lines: int) -> str:
    return f"seq -f 'line %g of the compile log, some padding text to make it realistic' {lines}"


def step_name(lines: int) -> str:
    return f"print-{lines}"


def write_runbook(folder: Path, alias: str, sizes: list[int]) -> None:
    steps = "".join(
        f'\n[[steps]]\nname = "{step_name(n)}"\nrun = "{command(n)}"\nsnapshots = false\n'
        for n in sizes
    )
    # `seq 200000` with the package snapshots before and after (the default)
    steps += f'\n[[steps]]\nname = "seq-snapshots"\nrun = "{SEQ}"\n'
    (folder / "runbook.toml").write_text(
        f'[journal]\nname = "{JOURNAL_NAME}"\n\n[hosts.box]\nssh = "{alias}"\n'
        f"python = {json.dumps(sys.executable)}\n{steps}"
    )


def expected_output(lines: int) -> tuple[int, str]:
    """Size and sha256 of what the command prints (run here: the host is this machine)."""
    out = subprocess.run(["sh", "-c", command(lines)], capture_output=True, check=True).stdout
    return len(out), hashlib.sha256(out).hexdigest()


def fabric_run(home: SshHome, alias: str, lines: int, run: str | None = None) -> tuple[float, int]:
    """Wall seconds (connect included) and stdout length of bare Fabric running the command."""
    started = time.perf_counter()
    with Connection(alias, config=Config(runtime_ssh_path=str(home.config_path))) as conn:
        result = conn.run(run or command(lines), hide=True, in_stream=False)
    return time.perf_counter() - started, len(result.stdout.encode())


def process_cpu(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    """CPU seconds (user + system) of the process ``argv`` and its children, from wait4."""
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv[:6])} exited {os.waitstatus_to_exitcode(status)}")
    return usage.ru_utime + usage.ru_stime


#: bare Fabric as a process of its own: the interpreter, Fabric's imports, the handshake and a
#: one-line command, what journal's own CPU is measured over
BARE_FABRIC = (
    "import sys\n"
    "from fabric import Config, Connection\n"
    "with Connection(sys.argv[1], config=Config(runtime_ssh_path=sys.argv[2])) as c:\n"
    "    c.run({run!r}, hide=True, in_stream=False)\n"
)


def channel_run(home: SshHome, alias: str, lines: int) -> tuple[float, int]:
    """The floor: the same connection, the command read off a raw channel 256 KiB at a time,
    output discarded (what any recorder over Fabric's connection must at least pay)."""
    started = time.perf_counter()
    size = 0
    with Connection(alias, config=Config(runtime_ssh_path=str(home.config_path))) as conn:
        conn.open()
        chan = conn.client.get_transport().open_session()  # type: ignore[union-attr]
        chan.exec_command(command(lines))
        while True:
            data = chan.recv(256 * 1024)
            if not data:
                break
            size += len(data)
        chan.recv_exit_status()
        chan.close()
    return time.perf_counter() - started, size


def journal_run(
    folder: Path, env: dict[str, str], lines: int, step: str | None = None
) -> tuple[float, float | None]:
    """Wall seconds of the `journal run step` process and its peak RSS in MB."""
    argv = [sys.executable, "-m", "journal", "run", "step", step or step_name(lines)]
    stats = folder / "time.txt"
    timed = [TIME, "-v", "-o", str(stats), *argv] if Path(TIME).exists() else argv
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = subprocess.run(
        timed,
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"journal run step {step_name(lines)} exited {done.returncode}")
    rss_mb: float | None = None
    if timed[0] == TIME:
        found = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stats.read_text())
        rss_mb = int(found.group(1)) / 1024 if found else None
    else:
        after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        rss_mb = after / 1024 if after > before else None  # a peak over all children so far
    return wall, rss_mb


def recorded_output(db: Path, lines: int) -> tuple[int, str, int]:
    """Size, sha256 and chunk count of the newest run of the step, read back from the store."""
    store = EventStore(str(db))
    try:
        run = None
        for rec in store.read(JOURNAL_NAME, types=["StepStarted"]):
            if rec.event.step == step_name(lines):  # type: ignore[attr-defined]
                run = rec.event.run  # type: ignore[attr-defined]
        assert run is not None, "no recorded run"
        digest, size, chunks = hashlib.sha256(), 0, 0
        for rec in store.read(JOURNAL_NAME, run_id=run, types=["OutputChunk"]):
            if rec.event.stream == "stdout":  # type: ignore[attr-defined]
                data = decode(rec.event)  # type: ignore[arg-type]
                digest.update(data)
                size += len(data)
                chunks += 1
        return size, digest.hexdigest(), chunks
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, nargs="+", default=[200_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=3, help="runs of the first size (best of)")
    parser.add_argument(
        "--fabric-all",
        action="store_true",
        help="time bare Fabric at every size, not only the first (it takes ~50 s per 1M lines)",
    )
    args = parser.parse_args()
    sizes: list[int] = args.lines

    os.environ.pop("SSH_AUTH_SOCK", None)  # keys from the ssh home only, as journal does
    folder = Path(tempfile.mkdtemp(prefix="journal-overhead-"))
    failed = False
    with SshServer("127.0.0.1") as server:
        home = SshHome([server])
        try:
            write_runbook(folder, server.alias, [1, *sizes])
            env = home.env()
            env.pop("JOURNAL_DB", None)
            env.pop("JOURNAL_RUNBOOK", None)
            # What any step costs whatever it prints: interpreter, imports, database, handshake.
            journal_run(folder, env, 1)  # creates the database and the journal
            # medians of five: one run of a fraction of a second is at the mercy of the load
            fabric_fixed = statistics.median(fabric_run(home, server.alias, 1)[0] for _ in range(5))
            fixed = [journal_run(folder, env, 1) for _ in range(5)]
            journal_fixed = statistics.median(wall for wall, _ in fixed)
            base_mb = max((mb for _, mb in fixed if mb is not None), default=None)
            help_s = help_seconds(5, env)  # bench/startup.py says more of it
            print(
                f"journal --help: {help_s:.2f} s (median of 5)  "
                f"{'OK' if help_s <= HELP_TARGET_S else 'OVER TARGET'} <= {HELP_TARGET_S} s"
            )
            extra = journal_fixed - fabric_fixed
            print(
                f"fixed cost (a 1-line command, medians of 5): bare Fabric {fabric_fixed:.2f} s, "
                f"journal run step {journal_fixed:.2f} s (+{extra:.2f} s, "
                f"{'OK' if extra <= FIXED_EXTRA_S else 'OVER TARGET'} <= +{FIXED_EXTRA_S} s), "
                f"peak RSS {base_mb or 0:.0f} MB"
            )
            failed |= help_s > HELP_TARGET_S or extra > FIXED_EXTRA_S
            # the same in CPU seconds, which load inflates least: journal's own work over a
            # process that imports Fabric and runs the command
            bare = [sys.executable, "-c", BARE_FABRIC.format(run=command(1)), server.alias,
                    str(home.config_path)]  # fmt: skip
            step = [sys.executable, "-m", "journal", "run", "step", step_name(1)]
            fabric_cpu = statistics.median(process_cpu(bare, env, folder) for _ in range(5))
            journal_cpu = statistics.median(process_cpu(step, env, folder) for _ in range(5))
            own = journal_cpu - fabric_cpu
            print(
                f"fixed CPU (medians of 5): bare Fabric process {fabric_cpu:.2f} CPU-s, journal "
                f"run step {journal_cpu:.2f} CPU-s (+{own:.2f}, "
                f"{'OK' if own <= FIXED_EXTRA_S else 'OVER TARGET'} <= +{FIXED_EXTRA_S})"
            )
            failed |= own > FIXED_EXTRA_S
            bare_seq, _ = fabric_run(home, server.alias, 0, SEQ)
            snap, _ = journal_run(folder, env, 0, "seq-snapshots")
            extra = snap - bare_seq
            print(
                f"`{SEQ}` with the package snapshots before and after: bare Fabric "
                f"{bare_seq:.2f} s, journal run step {snap:.2f} s (+{extra:.2f} s, "
                f"{'OK' if extra <= SNAPSHOT_EXTRA_S else 'OVER TARGET'} <= +{SNAPSHOT_EXTRA_S} s)"
            )
            failed |= extra > SNAPSHOT_EXTRA_S
            print(
                f"targets: journal <= {RATIO_TARGET:.2f}x bare Fabric; "
                f"peak RSS < {RSS_TARGET_MB} MB at every size"
            )
            for index, lines in enumerate(sizes):
                size, digest = expected_output(lines)
                repeat = args.repeat if index == 0 else 1
                floor, _ = channel_run(home, server.alias, lines)
                fabric_times, journal_times, rss = [], [], []
                for _ in range(repeat):
                    if index == 0 or args.fabric_all:
                        seconds, got = fabric_run(home, server.alias, lines)
                        if got != size:
                            print(f"  (Fabric returned {got} bytes of {size})")
                        fabric_times.append(seconds)
                    seconds, peak = journal_run(folder, env, lines)
                    journal_times.append(seconds)
                    rss.append(peak)
                stored, stored_digest, chunks = recorded_output(folder / "journal.db", lines)
                complete = stored == size and stored_digest == digest
                peak_mb = max((r for r in rss if r is not None), default=None)
                print(f"\n{lines:,} lines ({size / 1e6:.1f} MB) over SSH to 127.0.0.1:")
                print(f"  raw SSH channel, output discarded (floor): {floor:.2f} s")
                if fabric_times:
                    print(
                        "  bare Fabric Connection.run(hide=True):     "
                        + ", ".join(f"{t:.2f} s" for t in fabric_times)
                    )
                print(
                    "  journal run step:                          "
                    + ", ".join(f"{t:.2f} s" for t in journal_times)
                )
                if fabric_times:
                    first = journal_times[0] / fabric_times[0]
                    best = min(journal_times) / min(fabric_times)
                    verdict = "OK" if first <= RATIO_TARGET else "OVER TARGET"
                    print(
                        f"  ratio (first run): {first:.2f}x  {verdict}"
                        + (f"; best of {repeat}: {best:.2f}x" if repeat > 1 else "")
                    )
                    failed |= first > RATIO_TARGET
                if peak_mb is None:
                    print("  journal peak RSS: unknown")
                else:
                    mark = "OK" if peak_mb < RSS_TARGET_MB else "OVER TARGET"
                    print(f"  journal peak RSS: {peak_mb:.0f} MB  {mark}")
                print(
                    f"  recorded: {stored:,} of {size:,} bytes in {chunks} chunks, "
                    f"{'byte-exact' if complete else 'INCOMPLETE OR DIFFERENT'}"
                )
                failed |= not complete or (peak_mb or 0) >= RSS_TARGET_MB
        finally:
            home.cleanup()
            shutil.rmtree(folder, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
