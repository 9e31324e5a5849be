"""Whether a command's cost follows the work or the history: the same commands on a fresh
journal and on journals of 10,000, 100,000 (and with --million, 1,000,000) events.

Targets (../shared/DESIGN.md, "History"; issue "Findings that follow the upgrade"):
`journal run step` of `true` on a `local` host with `snapshots = false` within 1.2x of the
same on a fresh journal and at most 120 MB peak RSS; `journal pitfalls ack` under 0.5 s; the
web timeline's first (cold) request after `journal serve` starts under 300 ms.

Each journal's stored projections (findings, timeline) are made once first by `journal
rebuild` (what the first command after an upgrade of journal does, timed apart), since every
command leaves them up to date. The cold timeline shows the newest 500 items of the 33,000.

The history is a pasted session imported again and again, as a team's journal gathers it:
each command a step run (started, its output, finished) on host `gpu-box`, with a noop
install, an unswitched variant and a throughput figure among them, so that judging has
something to find. It is appended through the real store and kept in a cache folder; each
measurement works on a copy. Each figure is the median of ``--runs`` runs of the whole
process, its peak RSS from the OS's accounting of the child (``os.wait4``); the cold timeline
is the median of as many fresh starts of `journal serve`.

Run: ``.venv/bin/python bench/history.py [--million] [--runs 3] [--cache DIR]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from journal.events import (  # noqa: E402
    JournalOpened,
    MetricRecorded,
    OutputChunk,
    StepFinished,
    StepStarted,
)
from journal.store import EventStore  # noqa: E402
from tests.browsing import free_port  # noqa: E402

JOURNAL = "history"
SHAPE = 1
STEP_RATIO_TARGET = 1.2
STEP_RSS_TARGET_MB = 120
ACK_TARGET_S = 0.5
COLD_TARGET_S = 0.300

SESSION = [
    (
        "uv pip install torch --index-url https://download.pytorch.org/whl/nightly/cu130",
        "Resolved 3 packages in 512ms\nChecked 3 packages in 29ms\n",
    ),
    (
        "python -c 'import torch; print(torch.__version__, torch.version.cuda)'",
        "2.10.0+cu128 12.8\n",
    ),
    ("nvidia-smi --query-gpu=name --format=csv,noheader", "NVIDIA H200\n" * 8),
    (
        "make -j32 kernels",
        "".join(f"[ {i:3d}%] Building CUDA object csrc/kernel_{i}.cu.o\n" for i in range(40)),
    ),
]

RUNBOOK = """\
[journal]
name = "history"

[hosts.here]
ssh = "local"
python = "{python}"

[[steps]]
name = "noop"
run = "true"
snapshots = false
"""


def build(db: Path, events: int) -> None:
    """Append a journal of about ``events`` events to a fresh database at ``db``."""
    store = EventStore(str(db))
    store.append(JOURNAL, [JournalOpened(JOURNAL, "runbook.toml", {"here": "local"}, ["noop"])])
    made, n, batch = 1, 0, []
    while made < events:
        command, output = SESSION[n % len(SESSION)]
        run = f"h{n:09d}"
        batch += [
            StepStarted(run, "imported", "gpu-box", "imported", command, imported=True),
            OutputChunk(run, "gpu-box", "stdout", output, "utf-8", len(output), 0.0),
            StepFinished(run, "gpu-box", "imported", None, 0.0),
        ]
        made += 3
        if n % 50 == 0:
            batch.append(
                MetricRecorded(
                    "output_token_throughput",
                    90.0 - (n % 100) / 2,
                    "tok/s",
                    {},
                    "manual",
                    host_name="gpu-box",
                )
            )
            made += 1
        n += 1
        if len(batch) >= 5000:
            store.append(JOURNAL, batch)
            batch = []
    if batch:
        store.append(JOURNAL, batch)
    store.close()


def cached(cache: Path, events: int) -> Path:
    cache.mkdir(parents=True, exist_ok=True)
    db = cache / f"history-{SHAPE}-{events}.db"
    if not db.exists():
        partial = cache / "history-partial.db"
        for stale in cache.glob("history-partial.db*"):
            stale.unlink()
        started = time.perf_counter()
        print(f"building a journal of {events:,} events in {db} (once)…", flush=True)
        build(partial, events)
        partial.rename(db)
        print(f"  built in {time.perf_counter() - started:.1f} s", flush=True)
    return db


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one run of ``argv`` (that process's own accounting,
    from wait4); it must succeed."""
    errors = tempfile.TemporaryFile()
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.DEVNULL, stderr=errors, stdin=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        errors.seek(0)
        raise SystemExit(f"{' '.join(argv)} failed:\n{errors.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def journal_cmd(db: Path, rb: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "journal", "--db", str(db), "--runbook", str(rb), *args]


def median_of(
    runs: int, argv_for: Callable[[int], list[str]], env: dict[str, str]
) -> tuple[float, float]:
    walls, peaks = [], []
    for i in range(runs):
        wall, peak = timed(argv_for(i), env)
        walls.append(wall)
        peaks.append(peak)
    return statistics.median(walls), max(peaks)


def cold_timeline(db: Path, rb: Path, env: dict[str, str]) -> float:
    """Seconds of the first timeline request after `journal serve` answers at all."""
    port = free_port()
    server = subprocess.Popen(
        journal_cmd(db, rb, "serve", "--port", str(port)),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/static/journal.css", timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("journal serve did not answer") from None
                time.sleep(0.05)
        started = time.perf_counter()
        urllib.request.urlopen(f"http://127.0.0.1:{port}/j/{JOURNAL}", timeout=600).read()
        return time.perf_counter() - started
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--million", action="store_true", help="also 1,000,000 events")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-cache")
    args = parser.parse_args()
    sizes = [10_000, 100_000] + ([1_000_000] if args.million else [])
    env = {k: v for k, v in os.environ.items() if not k.startswith("JOURNAL_")}
    work = Path(tempfile.mkdtemp(prefix="journal-history-"))
    try:
        rb = work / "runbook.toml"
        rb.write_text(RUNBOOK.format(python=sys.executable))
        fresh = work / "fresh.db"
        base, base_rss = median_of(
            args.runs, lambda i: journal_cmd(fresh, rb, "run", "step", "noop"), env
        )
        print(
            f"{'events':>10}  {'run step':>9} {'ratio':>6} {'peak MB':>8}  {'ack':>7}  "
            f"{'cold timeline':>13}"
        )
        print(f"{'fresh':>10}  {base:8.2f}s {1.0:6.2f} {base_rss:8.0f}")
        for size in sizes:
            source = cached(args.cache, size)
            db = work / f"h{size}.db"
            shutil.copy(source, db)
            # The stored projections are made once (as after an upgrade of journal); then
            # every command goes on from them.
            prime, prime_rss = median_of(1, lambda i, db=db: journal_cmd(db, rb, "rebuild"), env)
            print(
                f"{size:>10,}  (first judging of the whole journal: {prime:.2f}s, "
                f"{prime_rss:.0f} MB)"
            )
            step, rss = median_of(
                args.runs, lambda i, db=db: journal_cmd(db, rb, "run", "step", "noop"), env
            )
            ack, _ = median_of(
                args.runs,
                lambda i, db=db: journal_cmd(
                    db, rb, "pitfalls", "ack", "noop-install", "--note", "bench"
                ),
                env,
            )
            cold = statistics.median(cold_timeline(db, rb, env) for _ in range(args.runs))
            # the story's readers (issue 16): status counts findings, show reads one run
            told = {
                what: median_of(
                    args.runs, lambda i, db=db, argv=argv: journal_cmd(db, rb, *argv), env
                )
                for what, argv in (
                    ("status", ["status"]),
                    ("show", ["show", "h000000003"]),
                    ("log --step noop", ["log", "--step", "noop"]),
                    # the findings, with their resolutions
                    ("pitfalls --all", ["pitfalls", "--all", "--format", "json"]),
                    # the whole journal's postmortem (its target: under 10 s at 100,000)
                    ("export postmortem", ["export", "postmortem", "--format", "md"]),
                )
            }
            ratio = step / base
            print(
                f"{size:>10,}  {step:8.2f}s {ratio:6.2f} {rss:8.0f}  {ack:6.2f}s  {cold:12.3f}s"
                f"   {'ok' if ratio <= STEP_RATIO_TARGET else 'OVER'} {STEP_RATIO_TARGET}x,"
                f" {'ok' if rss <= STEP_RSS_TARGET_MB else 'OVER'} {STEP_RSS_TARGET_MB} MB,"
                f" {'ok' if ack <= ACK_TARGET_S else 'OVER'} ack {ACK_TARGET_S}s,"
                f" {'ok' if cold <= COLD_TARGET_S else 'OVER'} cold {COLD_TARGET_S}s",
                flush=True,
            )
            print(
                f"{'':>10}  "
                + ", ".join(f"{what} {t:.2f}s {peak:.0f} MB" for what, (t, peak) in told.items()),
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
