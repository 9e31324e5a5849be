"""The web under concurrent readers: 20 clients for 30 s against a real `journal serve`.

Targets (issue 29): on a journal of 100,000 events, at least 0.5x the requests per second
of a fresh journal, with the server's peak RSS at most 150 MB.

Two journals, each served by its own `journal serve` (waitress), after its stored
projections are made by `journal rebuild` and one request has warmed the server. With
``--shape real`` (the default), bench/readers.py's journals of real runs: the fresh one is its
seed (real `journal run` steps with package snapshots and torch-env probes on 4 hosts, plus
imported GPU sessions), the long one the same runs replayed on 10 hosts to 100,000 events.
With ``--shape synthetic``, bench/history.py's journals of 10 and 100,000 events.

First, on the server just started, the first request of the journal's page (its timeline), of a
run's page and of the findings page is timed (the cold pages, each under 300 ms at 100,000
events; the findings page under 1 MB of HTML). Then each client loops over what a team's
browsers ask for: the journal's page, its findings page, and one of the latest step runs'
pages, until the time is up. Printed: requests per second, the median and 99th percentile
latency, errors, and the server's peak RSS (from /proc: VmHWM), then the ratio long / fresh.

Run: ``.venv/bin/python bench/web_clients.py [--shape real|synthetic] [--clients 20] [--seconds 30]
[--events 100000]``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import history, readers  # noqa: E402
from tests.browsing import free_port  # noqa: E402

RATIO_TARGET = 0.5
RSS_TARGET_MB = 150
#: The first request of a journal's timeline, a run's page and the findings page of a server
#: just started (its stored projections made), and the findings page's size.
COLD_TARGET_S = 0.3
FINDINGS_TARGET_BYTES = 1_000_000


def _peak_mb(pid: int) -> float:
    """The peak RSS of a running process, MB (VmHWM)."""
    found = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text())
    return int(found.group(1)) / 1024 if found else float("nan")


def _get(url: str) -> tuple[float, bool]:
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            answer.read()
            ok = answer.status == 200
    except OSError:
        ok = False
    return time.perf_counter() - started, ok


def served(db: Path, name: str, clients: int, seconds: float) -> dict[str, Any]:
    """The figures of ``clients`` readers of the journal ``name`` of ``db`` for
    ``seconds``."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    journal = [sys.executable, "-m", "journal", "--db", str(db)]
    subprocess.run([*journal, "rebuild"], check=True, capture_output=True)
    proc = subprocess.Popen(
        [*journal, "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while _get(base + "/")[1] is False:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("journal serve did not answer")
            time.sleep(0.2)
        cold: dict[str, tuple[float, int]] = {}

        def first(what: str, path: str) -> str:
            started = time.perf_counter()
            with urllib.request.urlopen(base + path, timeout=120) as answer:
                body = answer.read()
            cold[what] = (time.perf_counter() - started, len(body))
            return body.decode()

        page = first("timeline", f"/j/{name}")
        runs = list(dict.fromkeys(re.findall(rf'href="(/j/{name}/run/\w+)"', page)))[:20]
        first("run page", runs[0])
        first("findings", f"/j/{name}/findings")
        paths = [f"/j/{name}", f"/j/{name}/findings", *runs]
        for path in paths:  # warmed once: the figures are of readers, not of the first fold
            _get(base + path)
        latencies: list[float] = []
        errors = [0]
        lock = threading.Lock()
        ends = time.monotonic() + seconds

        def client(index: int) -> None:
            i = index
            while time.monotonic() < ends:
                took, ok = _get(base + paths[i % len(paths)])
                i += 1
                with lock:
                    latencies.append(took)
                    errors[0] += not ok

        threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        latencies.sort()
        return {
            "rps": len(latencies) / wall,
            "p50": statistics.median(latencies),
            "p99": latencies[int(len(latencies) * 0.99) - 1],
            "errors": errors[0],
            "peak": _peak_mb(proc.pid),
            "cold": cold,
        }
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def journal_of(shape: str, cache: Path, events: int, work: Path) -> tuple[Path, str]:
    """The cached journal of ``shape`` of about ``events`` events (0: the fresh one), and
    its name."""
    if shape == "synthetic":
        return history.cached(cache, events or 10), history.JOURNAL
    seed, venvs, has_torch = readers.seed_db(cache)
    if not events:
        return seed, readers.JOURNAL
    rb = readers.runbook(work / "runbook.toml", readers.FLEET, venvs, readers.expect(has_torch))
    return readers.grown_db(cache, seed, events, rb)[0], readers.JOURNAL


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", choices=("real", "synthetic"), default="real")
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-cache")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="journal-web-clients-"))
    figures = {}
    try:
        for label, events in (("fresh", 0), (f"{args.events:,} events", args.events)):
            db = work / f"{events}.db"
            source, name = journal_of(args.shape, args.cache, events, work)
            shutil.copy(source, db)
            figures[label] = f = served(db, name, args.clients, args.seconds)
            print(
                f"{label:>16}: {f['rps']:6.1f} requests/s, p50 {f['p50'] * 1000:6.0f} ms, "
                f"p99 {f['p99'] * 1000:6.0f} ms, {f['errors']:.0f} errors, "
                f"server peak {f['peak']:.0f} MB",
                flush=True,
            )
            print(
                " " * 18
                + "; ".join(
                    f"cold {what} {took * 1000:.0f} ms, {size / 1e6:.2f} MB"
                    for what, (took, size) in f["cold"].items()
                ),
                flush=True,
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    fresh, long = figures["fresh"], figures[f"{args.events:,} events"]
    ratio = long["rps"] / fresh["rps"]
    ok = ratio >= RATIO_TARGET and long["peak"] <= RSS_TARGET_MB and not long["errors"]
    cold_ok = all(took < COLD_TARGET_S for took, _ in long["cold"].values())
    small = long["cold"]["findings"][1] < FINDINGS_TARGET_BYTES
    ok = ok and cold_ok and small
    print(
        f"-> {'OK' if ok else 'OVER TARGET'}: {ratio:.2f}x the requests/s of a fresh journal "
        f"(target >= {RATIO_TARGET}x), server peak {long['peak']:.0f} MB "
        f"(target <= {RSS_TARGET_MB} MB); cold pages {'OK' if cold_ok else 'OVER'} "
        f"(target < {COLD_TARGET_S * 1000:.0f} ms each), findings page "
        f"{'OK' if small else 'OVER'} (target < {FINDINGS_TARGET_BYTES / 1e6:.0f} MB of HTML)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
