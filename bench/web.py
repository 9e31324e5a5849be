"""How fast the web UI answers on a big journal, and how soon a printed line shows in a browser.

Targets (../shared/DESIGN.md, "Targets"): the timeline of a journal with 100,000 events and
50 MB of output answers in under 150 ms; a line printed on the host shows in the browser
within 0.5 s.

The journal is built once through the real store (a 4-host fleet running a 25-step plan
twice: every step run with package snapshots from a real H200 env, `torch-env` probes from a
real H200, expectations, and compile-log output flushed as the recorder flushes it) and kept
in a cache folder; each run works on a copy, whose stored projections `journal rebuild` makes
first (timed apart). Then `journal serve` answers the timeline and a
step-run page (the first request after start, cold, and the median of warm ones), and a
`journal run step` on a `local` host prints timestamped lines while chromium (playwright)
shows its run page: the delay from each print to the line in the page.

Run: ``.venv/bin/python bench/web.py [--cache DIR]`` (about a minute the first time,
seconds after).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from journal.events import (  # noqa: E402
    Event,
    ExpectationChecked,
    JournalOpened,
    NoteAdded,
    OutputChunk,
    PackagesSnapshotted,
    ProbeRecorded,
    StepFinished,
    StepStarted,
)
from journal.store import EventStore  # noqa: E402
from tests.browsing import BROWSER_ARGS, CHROMIUM, free_port  # noqa: E402

JOURNAL = "bench-web"
EVENTS = 100_000
OUTPUT_BYTES = 50_000_000
HOSTS = ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]
STEPS = 25
PLAN_RUNS = 2
#: bump when the shape of the built journal changes, so that a stale cache is rebuilt
SHAPE = 5

TIMELINE_TARGET_S = 0.150
LIVE_TARGET_S = 0.5
WARM_REQUESTS = 15
LIVE_LINES = 12

H200 = ROOT / "tests" / "data" / "h200"

# -- the journal ------------------------------------------------------------------------------

LOG_LINES = [
    "[ {pct:3d}%] Building CUDA object csrc/CMakeFiles/_C.dir/attention/flash_fwd_{n}.cu.o",
    "\x1b[32m[ {pct:3d}%]\x1b[0m Linking CXX shared library lib/libtorch_cuda_{n}.so",
    "  ptxas info    : Used {n} registers, 464 bytes cmem[0] for kernel_{n}_sm90a",
    "  Downloading nvidia-cublas-cu13 ({n}.4 MiB) from the cu130 index, {pct}% done",
    "/opt/src/csrc/kernels/moe_align_{n}.cu(213): warning #177-D: variable was declared",
    "Collecting flashinfer-python=={n}.2.1 (from sglang[all]==0.5.{n})",
]


def _plan() -> list[str]:
    names = ["backup-env", "install-cuda-13", "install-torch", "verify-torch"]
    names += [f"build-kernel-{i:02d}" for i in range(STEPS - len(names) - 1)]
    return [*names, "verify-stack"]


def _output(rng: random.Random, per_chunk: int) -> Iterator[tuple[str, str]]:
    """(stream, text) chunks of whole log lines, ``per_chunk`` bytes each on average."""
    n, made, owed = 0, 0, 0
    while True:
        owed += per_chunk
        lines = []
        while made < owed or not lines:
            n += 1
            template = LOG_LINES[n % len(LOG_LINES)]
            line = template.format(pct=n % 100, n=rng.randrange(1000)) + "\n"
            lines.append(line)
            made += len(line.encode())
        yield ("stderr" if n % 7 == 0 else "stdout"), "".join(lines)


def build(db: Path) -> None:
    """Append the bench journal to a fresh database at ``db``."""
    packages = json.loads((H200 / "packages.json").read_text())["packages"]
    torch_env = json.loads((H200 / "torch-env.json").read_text())
    plan = _plan()
    rng = random.Random(7)
    store = EventStore(str(db))
    hosts = {h: f"ubuntu@{h}.cluster.internal" for h in HOSTS}
    store.append(JOURNAL, [JournalOpened(JOURNAL, "/srv/runbook.toml", hosts, plan)])
    runs = PLAN_RUNS * len(plan) * len(HOSTS)
    # Events besides chunks: per run start, two snapshots, finish, and a probe with three
    # expectations on every verify step; a note per plan run.
    verify = sum(1 for s in plan if s.startswith("verify"))
    others = 1 + runs * 4 + PLAN_RUNS * verify * len(HOSTS) * 4 + PLAN_RUNS
    per_run = (EVENTS - others) // runs
    extra = (EVENTS - others) - per_run * runs
    per_chunk = OUTPUT_BYTES // (EVENTS - others)
    seq = 0
    for plan_run in range(PLAN_RUNS):
        for index, step in enumerate(plan):
            for host in HOSTS:
                seq += 1
                run = f"r{seq:05d}{rng.randrange(16**6):06x}"
                started = time.time()
                command = _command(step)
                store.append(
                    JOURNAL,
                    [
                        StepStarted(
                            run=run,
                            step=step,
                            host_name=host,
                            target=hosts[host],
                            command=command,
                            env={"CUDA_HOME": "/usr/local/cuda-13.0", "MAX_JOBS": "32"},
                            cwd="~",
                            pid=1000 + seq,
                            machine="bench-builder",
                            plan_run=f"plan{plan_run}",
                        ),
                        PackagesSnapshotted(
                            host, "before", "/opt/env/bin/python3", packages, 0.4, run
                        ),
                    ],
                )
                count = per_run + (1 if extra > 0 else 0)
                extra -= 1
                chunks: list[Event] = []
                made = _output(rng, per_chunk)
                for i in range(count):
                    stream, text = next(made)
                    if step == "install-torch" and i == count - 1:
                        stream, text = "stderr", "Checked 3 packages in 31ms\n"
                    if step == "build-kernel-07" and host == "gpu-3" and i == count // 2:
                        text = (
                            "RuntimeError: CUDA error: no kernel image is available for "
                            "execution on the device\n"
                        )
                    size = len(text.encode())
                    chunks.append(OutputChunk(run, host, stream, text, "utf-8", size, i * 0.2))
                for i in range(0, len(chunks), 2000):
                    store.append(JOURNAL, chunks[i : i + 2000])
                after: list[Event] = [
                    PackagesSnapshotted(host, "after", "/opt/env/bin/python3", packages, 0.4, run)
                ]
                if step.startswith("verify"):
                    after.append(ProbeRecorded(host, "torch-env", torch_env, 0.43, None, run))
                    for key, expected, actual in (
                        ("torch.cuda", "13.0", torch_env.get("torch", {}).get("cuda")),
                        ("gpu_count", "8", 8),
                        ("nccl", ">=2.28", "2.28.9"),
                    ):
                        after.append(
                            ExpectationChecked(host, key, expected, actual, "pass", None, None, run)
                        )
                failed = step == "build-kernel-07" and host == "gpu-3"
                after.append(
                    StepFinished(
                        run,
                        host,
                        "failed" if failed else "succeeded",
                        1 if failed else 0,
                        round(time.time() - started + 60 + index, 3),
                    )
                )
                store.append(JOURNAL, after)
        store.append(
            JOURNAL,
            [NoteAdded(f"plan run {plan_run} done; throughput next", "bench", ["lesson"])],
        )
    store.close()


def _command(step: str) -> str:
    if step == "install-torch":
        return (
            "~/.local/bin/uv pip install --python /opt/env/bin/python3 torch torchvision "
            "--index-url https://download.pytorch.org/whl/nightly/cu130"
        )
    if step.startswith("verify"):
        return "/opt/env/bin/python3 -c 'import torch; print(torch.__version__)'"
    return f"cd ~/src && make -j32 {step}"


def cached_journal(cache: Path) -> Path:
    """The built journal in ``cache`` (built first when missing or of another shape)."""
    cache.mkdir(parents=True, exist_ok=True)
    db = cache / f"web-bench-{SHAPE}.db"
    if not db.exists():
        partial = cache / "web-bench-partial.db"
        for stale in cache.glob("web-bench-partial.db*"):
            stale.unlink()
        started = time.perf_counter()
        print(f"building the journal in {db} (once)…", flush=True)
        build(partial)
        partial.rename(db)
        print(f"  built in {time.perf_counter() - started:.1f} s", flush=True)
    return db


# -- measuring --------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("JOURNAL_DB", "JOURNAL_RUNBOOK", "JOURNAL_TOKEN"):
        env.pop(name, None)
    return env


def _timed_get(url: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        body = response.read()
    return time.perf_counter() - started, body


def _warm(url: str, times: int = WARM_REQUESTS) -> float:
    return statistics.median(_timed_get(url)[0] for _ in range(times))


def _row(label: str, seconds: float, target: float | None = None) -> str:
    ratio = f"  ({seconds / target:.2f}× the {target * 1000:.0f} ms target)" if target else ""
    return f"  {label:<44} {seconds * 1000:9.1f} ms{ratio}"


class Server:
    """`journal serve` on a free port, for the length of a with block."""

    def __init__(self, db: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = log.open("wb")
        cmd = [sys.executable, "-m", "journal", "--db", str(db), "serve", "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, env=_env(), stdout=self._log, stderr=subprocess.STDOUT)

    def __enter__(self) -> Server:
        deadline = time.monotonic() + 60
        while True:  # listening: the static file answers without the journal
            if self.proc.poll() is not None:
                raise SystemExit("journal serve stopped; see its log")
            try:
                _timed_get(self.url + "/static/journal.css")
                return self
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def _run_to_show(db: Path) -> tuple[str, int, int]:
    """The failed build step's run (the one with a finding): id, chunks, lines."""
    store = EventStore(str(db))
    try:
        with store.engine.connect() as conn:
            row = conn.exec_driver_sql(
                "SELECT run_id, count(*), sum(length(json_extract(payload, '$.data')) - "
                "length(replace(json_extract(payload, '$.data'), char(10), ''))) FROM events "
                "WHERE type = 'OutputChunk' AND run_id = (SELECT run_id FROM events WHERE "
                "type = 'StepFinished' AND json_extract(payload, '$.status') = 'failed' "
                "ORDER BY seq LIMIT 1) GROUP BY run_id"
            ).one()
        return str(row[0]), int(row[1]), int(row[2])
    finally:
        store.close()


def prime(db: Path) -> None:
    """Make the stored projections once (what the first command after an upgrade of journal
    does, whichever it is): the cold request after start then goes on from them."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "journal", "--db", str(db), "rebuild"],
        env=_env(),
        check=True,
        capture_output=True,
    )
    print(f"projections made once (journal rebuild): {time.perf_counter() - started:.1f} s")


def pages(db: Path, work: Path) -> None:
    with Server(db, work / "serve.log") as server:
        timeline = f"{server.url}/j/{JOURNAL}"
        cold, body = _timed_get(timeline)
        assert b"timeline-items" in body
        run, chunks, lines = _run_to_show(db)
        page = f"{timeline}/run/{run}"
        run_cold, body = _timed_get(page)
        assert b'id="L2000"' in body
        target = TIMELINE_TARGET_S
        median = f"warm (median of {WARM_REQUESTS})"
        kib = len(body) // 1024
        print(f"pages (the run page: {kib} KiB, page 1 of {lines:,} lines in {chunks} chunks)")
        print(_row("timeline, first request after start (cold)", cold, target))
        print(_row(f"timeline, {median}", _warm(timeline), target))
        print(_row("step-run page, first request (cold)", run_cold, target))
        print(_row(f"step-run page, {median}", _warm(page), target))
        for label, url in (
            ("journals page, warm", f"{server.url}/"),
            ("timeline ?severity=error, warm", f"{timeline}?severity=error"),
            ("timeline hosts side by side, warm", f"{timeline}?layout=hosts"),
            ("timeline ?q= (search the output), warm", f"{timeline}?q=no+kernel+image"),
            ("findings page, warm", f"{timeline}/findings"),
            ("hosts page, warm", f"{timeline}/hosts"),
            ("step-run page 2, warm", f"{page}?page=2"),
        ):
            print(_row(label, _warm(url, 5), None))


TICKER = """import time
for i in range({lines}):
    print("tick", i, repr(time.time()), flush=True)
    time.sleep(0.5)
"""


def live(db: Path, work: Path) -> None:
    """Delay from a line printed by a step on `local` to the line in chromium's DOM."""
    from playwright.sync_api import sync_playwright

    script = work / "ticker.py"
    script.write_text(TICKER.format(lines=LIVE_LINES))
    runbook = work / "runbook.toml"
    runbook.write_text(
        f'[journal]\nname = "{JOURNAL}"\n\n[hosts.bench-local]\nssh = "local"\n\n'
        f'[[steps]]\nname = "ticker"\nrun = "{sys.executable} -u {script}"\nsnapshots = false\n'
    )
    with Server(db, work / "serve-live.log") as server, sync_playwright() as pw:
        _timed_get(f"{server.url}/j/{JOURNAL}")  # folded and judged before the step starts
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            page = browser.new_page()
            page.goto(f"{server.url}/j/{JOURNAL}")
            # when the new run's item enters the page (playwright's own waiting adds its
            # polling to what it measures: the page notes the time itself)
            page.evaluate(
                """() => {
                  window.__added = null;
                  new MutationObserver(records => {
                    for (const r of records) for (const n of r.addedNodes)
                      if (n.classList && n.classList.contains('status-running') && !window.__added)
                        window.__added = Date.now() / 1000;
                  }).observe(document.getElementById('timeline-list'), {childList: true});
                }"""
            )
            step = subprocess.Popen(
                [sys.executable, "-m", "journal", "--db", str(db), "--runbook", str(runbook)]
                + ["run", "step", "ticker"],
                env=_env(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            running = page.locator("#timeline-list > li.item.step.status-running")
            running.wait_for(timeout=30_000)
            on_timeline = float(page.evaluate("window.__added"))
            running.locator("a.step").click()
            page.wait_for_selector("#output-lines.following", timeout=30_000)
            page.evaluate(  # the same for each line added to the output
                """() => {
                  window.__seen = [];
                  new MutationObserver(records => {
                    const now = Date.now() / 1000;
                    for (const r of records) for (const n of r.addedNodes)
                      if (n.classList && n.classList.contains('line'))
                        window.__seen.push([n.querySelector('.text').textContent, now]);
                  }).observe(document.getElementById('output-lines'), {childList: true});
                }"""
            )
            page.wait_for_selector("#output-lines.followed", timeout=60_000)
            step.wait(timeout=60)
            seen = page.evaluate("window.__seen")
        finally:
            browser.close()
    on_timeline -= _started_at(db, "ticker")
    delays = []
    for content, shown in seen:
        parts = content.split()
        if len(parts) == 3 and parts[0] == "tick":
            delays.append(shown - float(parts[2]))
    print(f"live ({len(delays)} of {LIVE_LINES} lines arrived while the run page was open)")
    print(_row("StepStarted -> its item on the open timeline", on_timeline, LIVE_TARGET_S))
    if delays:
        print(_row("printed -> visible, median", statistics.median(delays), LIVE_TARGET_S))
        print(_row("printed -> visible, max", max(delays), LIVE_TARGET_S))


def _started_at(db: Path, step: str) -> float:
    """When the newest run of ``step`` was recorded as started (seconds since the epoch)."""
    store = EventStore(str(db))
    try:
        with store.engine.connect() as conn:
            ts = conn.exec_driver_sql(
                "SELECT ts FROM events WHERE type = 'StepStarted' AND "
                "json_extract(payload, '$.step') = ? ORDER BY seq DESC LIMIT 1",
                (step,),
            ).scalar()
    finally:
        store.close()
    return datetime.fromisoformat(str(ts).replace("Z", "+00:00")).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "journal-bench-web",
        help="where the built journal is kept between runs (default: %(default)s)",
    )
    args = parser.parse_args()
    source = cached_journal(args.cache)
    with tempfile.TemporaryDirectory(prefix="journal-bench-web-") as tmp:
        work = Path(tmp)
        db = work / "journal.db"
        shutil.copy(source, db)
        store = EventStore(str(db))
        try:
            events = store.count(JOURNAL)
            with store.engine.connect() as conn:
                output = conn.exec_driver_sql(
                    "SELECT sum(json_extract(payload, '$.size')) FROM events "
                    "WHERE type = 'OutputChunk'"
                ).scalar()
        finally:
            store.close()
        size = db.stat().st_size
        print(
            f"journal {JOURNAL}: {events:,} events, {int(output) / 1e6:.1f} MB of output, "
            f"{PLAN_RUNS * STEPS * len(HOSTS)} step runs on {len(HOSTS)} hosts "
            f"(database {size / 1e6:.0f} MB)"
        )
        prime(db)
        pages(db, work)
        live(db, work)


if __name__ == "__main__":
    main()
