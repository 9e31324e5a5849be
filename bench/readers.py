"""Whether the readers' cost follows the work or the history, on a journal of the real shape:
every reader timed on a fresh journal and on journals of 100,000 (and with --million,
1,000,000) events, in one run.

Targets (issue 29, "Every reader at team scale"): at 100,000 and 1,000,000 events every reader
within 1.5x of the same on the fresh journal and at most 120 MB peak RSS; `journal export
postmortem` of the whole journal under 10 s at 100,000. What is asked for the whole journal
(every finding, the postmortem of every item, `rebuild`) is held to the memory target alone
(and the postmortem to its time): its ratio is shown, not judged; so is a rollback planned
on every host, whose time follows the fleet (4 hosts fresh, 10 in the larger journals).

The readers: `status` (text and JSON), `log` (whole, `--step`, `--host`, `--failed`), `show`
of a recent run, `rollback --dry-run` of one step (on one host, and on every host),
`pitfalls` (open, and `--all --format json`), `drift`, `export postmortem --format md -o
FILE` (whole, and `--plan-run latest`) and `rebuild`.

The journal is real runs replayed. The fresh journal (the seed) is recorded for real, once,
by journal itself: a runbook of 4 `ssh = "local"` hosts, each with a target venv of its own
made here (a CPU torch installed by pip from the machine's configured indexes, so that the
`torch-env` probe reads a real torch; `packaging` instead where torch cannot be installed,
as the output then says), a plan of 5 steps (a pip install and a pip uninstall of `six`, so
that the package snapshots around them differ; a build that prints 400 distinct lines; `true`
followed by the `torch-env` probe and an expectation; a smoke test that fails on one host),
package snapshots around every step (the default). On it: `run probe`, `run plan` four times,
`run step`, `run bench` of a CPU benchmark before and after (the headline's series), `record
metric`, a real `rollback`, notes, and `import transcript` of two captured sessions from
tests/data/transcripts (one recorded on an H200 host). The larger journals replay the seed's
events through the real store (``EventStore.append``, 5,000 a transaction) with every run and
plan-run id replaced by a fresh one and the 4 hosts spread over a fleet of 10 (the one
`JournalOpened`, first, names all 10), the same event mix as recorded. All are kept in a cache
folder (keyed by ``SHAPE``); each measurement works on a copy. The stored projections of
each copy are made first by `journal rebuild`, timed apart (as after an upgrade of journal).

Each figure is the median of ``--runs`` runs of the whole process, its peak RSS the highest
the OS accounted to the child (``os.wait4``); a command past ``--timeout`` seconds is killed
and shown as ``> N s``. Figures that miss a target are marked; the bench exits 0 either way.

Run: ``.venv/bin/python bench/readers.py [--million] [--runs 3] [--cache DIR] [--timeout 120]``
(the first run builds the seed, a few minutes, and the large journals).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from journal.events import (  # noqa: E402
    Event,
    JournalOpened,
    MetricRecorded,
    NotificationSent,
    PitfallAcknowledged,
    StepStarted,
)
from journal.store import EventStore  # noqa: E402

JOURNAL = "readers"
#: the seed's and the grown journals' shape: change it when what is recorded changes, so that
#: the cache is made again
SHAPE = 1
RATIO_TARGET = 1.5
RSS_TARGET_MB = 120
POSTMORTEM_TARGET_S = 10.0
POSTMORTEM_AT = 100_000
BATCH = 5000
TIME = "/usr/bin/time"

SEED_HOSTS = [f"gpu-{i:02d}" for i in range(1, 5)]
FLEET = [f"gpu-{i:02d}" for i in range(1, 11)]
#: the host whose smoke test fails (its GPUs' arch has no kernels in the build)
ODD_HOST = "gpu-03"
TORCH = "torch==2.13.0"
FALLBACK = "packaging"
TRANSCRIPTS = ROOT / "tests" / "data" / "transcripts"
#: captured sessions imported into the seed, and the host each is imported as
IMPORTS = [
    ("h200-clean-stack-check.txt", "h200-box"),  # captured for real on an H200 host
    ("seed-session.txt", "gpu-box"),  # the seed upgrade as pasted (a no-op install)
]
SHOW_STEP = "build-log"

#: a pure-Python loop in CPU time, three samples: a real figure that needs no GPU
LOOP = (
    "import time\n"
    "def spin(n):\n"
    "    t = time.process_time(); s = 0\n"
    "    for i in range(n): s += i * i\n"
    "    return n / (time.process_time() - t) / 1e6\n"
    "spin(100000)\n"
    "for k in range(3): print(f'loop sample {k + 1}: {spin(2000000):.2f} Mop/s')\n"
)

HOST = """\
[hosts.{name}]
ssh = "local"
python = "{python}"
env = {{ TARGET_PY = "{python}", SMOKE_ARCH = "{arch}" }}

"""

RUNBOOK = """\
[journal]
name = "{journal}"

{hosts}[probes.torch-env]
timeout = 120

[benchmarks.cpu-loop]
run = '''"$TARGET_PY" - <<'EOF'
{loop}EOF'''
parser = "regex"
pattern = 'loop sample \\d+: (?P<loop_mops>[0-9.]+) Mop/s'
units = {{ loop_mops = "Mop/s" }}
description = "a pure-Python loop in CPU time, 3 samples"

[[steps]]
name = "install-six"
run = '''"$TARGET_PY" -m pip install six'''

[[steps]]
name = "build-log"
run = '''
seq 1 400 | awk '{{printf "[%3d%%] Building CUDA object csrc/kernels/kernel_%03d.cu.o\\n",
  $1 / 4, $1}}'
echo "built 400 objects"'''

[[steps]]
name = "check-torch"
run = "true"
probes = ["torch-env"]
expect = {{ {expect} }}

[[steps]]
name = "remove-six"
run = '''"$TARGET_PY" -m pip uninstall -y six'''

[[steps]]
name = "smoke"
run = '''
if [ "$SMOKE_ARCH" = sm_120 ]; then
  echo "RuntimeError: CUDA error: no kernel image is available for execution on the device" >&2
  exit 1
fi
echo "smoke ok ($SMOKE_ARCH)"'''
"""

#: what the seed records, in order: (journal's arguments, the exit statuses that are fine)
SEED_COMMANDS: list[tuple[list[str], tuple[int, ...]]] = [
    ("run probe torch-env".split(), (0,)),
    ("run bench cpu-loop --label phase=before".split(), (0,)),
    ("run plan".split(), (0, 1)),
    (["note", "rolling the stack check out on the fleet", "--tag", "trigger"], (0,)),
    ("run plan --from install-six".split(), (0, 1)),
    ("run step build-log --host gpu-02".split(), (0,)),
    (f"import transcript {{transcript0}} --host {IMPORTS[0][1]}".split(), (0,)),
    ("run plan --from install-six --parallel 2".split(), (0, 1)),
    ("run probe packages --host gpu-01".split(), (0,)),
    (f"import transcript {{transcript1}} --host {IMPORTS[1][1]}".split(), (0,)),
    (
        f"record metric output_token_throughput 90.0 --unit tok/s --host {IMPORTS[1][1]} "
        "--label phase=before".split(),
        (0,),
    ),
    ("run step install-six".split(), (0,)),
    ("rollback --to before:install-six --host gpu-04".split(), (0, 1, 2)),
    ("run plan --from install-six".split(), (0, 1)),
    (
        ["note", f"smoke fails on {ODD_HOST}: no kernel image for its arch"]
        + f"--tag root-cause --host {ODD_HOST}".split(),
        (0,),
    ),
    ("run bench cpu-loop --label phase=after".split(), (0,)),
    (
        f"record metric output_token_throughput 96.1 --unit tok/s --host {IMPORTS[1][1]} "
        "--label phase=after".split(),
        (0,),
    ),
    (["note", "run the smoke test on every arch before the fleet", "--tag", "lesson"], (0,)),
]


def readers(show: str, postmortem: Path) -> list[tuple[str, list[str]]]:
    """What is timed: (what the table calls it, journal's arguments)."""
    return [
        ("status", ["status"]),
        ("status --format json", ["status", "--format", "json"]),
        ("log", ["log"]),
        (f"log --step {SHOW_STEP}", ["log", "--step", SHOW_STEP]),
        ("log --host gpu-01", ["log", "--host", "gpu-01"]),
        ("log --failed", ["log", "--failed"]),
        ("show RUN", ["show", show]),
        (
            "rollback --dry-run",
            ["rollback", "--to", "before:install-six", "--host", "gpu-01", "--dry-run"],
        ),
        (
            "rollback --dry-run, every host",
            ["rollback", "--to", "before:install-six", "--dry-run"],
        ),
        ("pitfalls", ["pitfalls"]),
        ("pitfalls --all --format json", ["pitfalls", "--all", "--format", "json"]),
        ("drift", ["drift"]),
        ("export postmortem", ["export", "postmortem", "--format", "md", "-o", str(postmortem)]),
        (
            "postmortem --plan-run latest",
            ["export", "postmortem", "--plan-run", "latest", "-o", str(postmortem)],
        ),
        ("rebuild", ["rebuild"]),
    ]


#: What reads the whole journal by what it is asked (every finding listed, the postmortem of
#: every item, every event folded again): its time follows the journal (the postmortem has a
#: target of its own at 100,000 events), its memory does not.
WHOLE = {"pitfalls --all --format json", "export postmortem", "rebuild"}
#: What works on every host: the fresh journal has 4, the larger ones 10 (a package snapshot
#: and dry runs on each), so its time follows the fleet: held to the memory target alone.
EVERY_HOST = {"rollback --dry-run, every host"}


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("JOURNAL_")}


def journal_cmd(db: Path, rb: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "journal", "--db", str(db), "--runbook", str(rb), *args]


def runbook(path: Path, hosts: list[str], venvs: list[Path], expect: str) -> Path:
    """A runbook of ``hosts``, each on one of ``venvs`` in turn."""
    text = "".join(
        HOST.format(
            name=name,
            python=venvs[i % len(venvs)] / "bin" / "python",
            arch="sm_120" if name == ODD_HOST else "sm_90",
        )
        for i, name in enumerate(hosts)
    )
    path.write_text(RUNBOOK.format(journal=JOURNAL, hosts=text, loop=LOOP, expect=expect))
    return path


# --- the seed: real runs ---------------------------------------------------------------


def make_venvs(folder: Path) -> tuple[list[Path], bool]:
    """The hosts' target venvs (made once): a CPU torch in each, else ``packaging``; the
    venvs and whether they hold torch."""
    venvs = [folder / f"venv-{name}" for name in SEED_HOSTS]
    marker = folder / "venvs.json"
    if marker.exists():
        return venvs, json.loads(marker.read_text())["torch"]
    has_torch = True
    for venv in venvs:
        shutil.rmtree(venv, ignore_errors=True)
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = str(venv / "bin" / "python")
        wanted = TORCH if has_torch else FALLBACK
        done = subprocess.run(
            [python, "-m", "pip", "install", "-q", wanted],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if done.returncode and has_torch:
            has_torch, wanted = False, FALLBACK
            print(
                f"  pip install {TORCH} failed (falling back to {FALLBACK} in every venv; "
                f"the torch-env probe will find no torch):\n{done.stderr[-1500:]}",
                flush=True,
            )
            for made in venvs[: venvs.index(venv) + 1]:
                subprocess.run(
                    [str(made / "bin" / "python"), "-m", "pip", "install", "-q", FALLBACK],
                    check=True,
                )
        elif done.returncode:
            raise SystemExit(f"pip install {wanted} failed:\n{done.stderr[-2000:]}")
        print(f"  {venv.name}: {wanted} in {time.perf_counter() - started:.1f} s", flush=True)
    marker.write_text(json.dumps({"torch": has_torch}))
    return venvs, has_torch


def record_seed(db: Path, rb: Path, log: Path) -> None:
    """Record the seed's runs into ``db``, each command a process of its own."""
    env = clean_env()
    transcripts = {f"{{transcript{i}}}": str(TRANSCRIPTS / f) for i, (f, _) in enumerate(IMPORTS)}
    with log.open("w") as out:
        for args, fine in SEED_COMMANDS:
            args = [transcripts.get(a, a) for a in args]
            started = time.perf_counter()
            out.write(f"$ journal {' '.join(args)}\n")
            out.flush()
            code = subprocess.run(
                journal_cmd(db, rb, *args),
                env=env,
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
            ).returncode
            took = time.perf_counter() - started
            print(f"  journal {' '.join(args[:3])} … exit {code}, {took:.1f} s", flush=True)
            if code not in fine:
                raise SystemExit(f"journal {' '.join(args)} exited {code}: see {log}")


def seed_db(cache: Path) -> tuple[Path, list[Path], bool]:
    """The seed journal (recorded once), the hosts' venvs, and whether they hold torch."""
    folder = cache / f"readers-{SHAPE}"
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "seed.db"
    if not db.exists():
        started = time.perf_counter()
        print(f"recording the seed journal in {db} (once): venvs with {TORCH} …", flush=True)
        venvs, has_torch = make_venvs(folder)
        partial = folder / "seed-partial.db"
        for stale in folder.glob("seed-partial.db*"):
            stale.unlink()
        rb = runbook(folder / "runbook-seed.toml", SEED_HOSTS, venvs, expect(has_torch))
        record_seed(partial, rb, folder / "seed.log")
        partial.rename(db)
        describe(db, started)
    venvs, has_torch = make_venvs(folder)
    return db, venvs, has_torch


def expect(has_torch: bool) -> str:
    """The check step's expectation: the torch installed, else the package installed."""
    return '"torch.version" = "==2.13.0"' if has_torch else f'"packages.{FALLBACK}" = ">=20"'


def describe(db: Path, started: float) -> None:
    """Say what a journal built holds (events by type), and how long it took."""
    store = EventStore(str(db))
    counts: dict[str, int] = {}
    for rec in store.read(JOURNAL):
        counts[rec.event.type] = counts.get(rec.event.type, 0) + 1
    store.close()
    mix = ", ".join(f"{t} {n:,}" for t, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    print(
        f"  {sum(counts.values()):,} events in {time.perf_counter() - started:.1f} s: {mix}",
        flush=True,
    )


# --- the larger journals: the seed replayed -----------------------------------------------


class Ids:
    """Fresh run ids for one replica: each seed id gets one of its own, the first time."""

    clock = int(time.time() * 1000)

    def __init__(self) -> None:
        self.made: dict[str, str] = {}

    def __call__(self, old: str) -> str:
        new = self.made.get(old)
        if new is None:
            Ids.clock += 1
            new = self.made[old] = f"{Ids.clock:x}{uuid.uuid4().hex[:8]}"
        return new


def copied(event: Event, hosts: dict[str, str], ids: Ids) -> Event:
    """``event`` of another replica: its run ids ``ids``'s, its hosts renamed by ``hosts``."""
    changes: dict[str, Any] = {}
    for name in ("run", "plan_run"):
        value = getattr(event, name, None)
        if value:
            changes[name] = ids(value)
    host = getattr(event, "host_name", None)
    if host in hosts:
        changes["host_name"] = hosts[host]
    if isinstance(event, StepStarted) and event.rollback and event.rollback.get("run"):
        changes["rollback"] = {**event.rollback, "run": ids(event.rollback["run"])}
    if isinstance(event, MetricRecorded) and event.labels.get("host") in hosts:
        changes["labels"] = {**event.labels, "host": hosts[event.labels["host"]]}
    if isinstance(event, PitfallAcknowledged) and ":" in event.finding:
        pitfall, _, run = event.finding.partition(":")
        changes["finding"] = f"{pitfall}:{ids(run)}"
    if isinstance(event, NotificationSent) and event.subject in ids.made:
        changes["subject"] = ids.made[event.subject]
    return dataclasses.replace(event, **changes) if changes else event


def grow(seed: Path, db: Path, events: int) -> str:
    """Append to a fresh database at ``db`` about ``events`` events: the seed's, replayed
    with fresh ids over the 10-host fleet; the id of the newest run of SHOW_STEP."""
    source = EventStore(str(seed))
    recorded = [rec.event for rec in source.read(JOURNAL)]
    source.close()
    opened = next(e for e in recorded if isinstance(e, JournalOpened))
    body = [e for e in recorded if not isinstance(e, JournalOpened)]
    store = EventStore(str(db))
    store.append(JOURNAL, [dataclasses.replace(opened, hosts={h: "local" for h in FLEET})])
    replicas = max(1, round((events - 1) / len(body)))
    batch: list[Event] = []
    show = ""
    for r in range(replicas):
        hosts = {h: FLEET[(r * len(SEED_HOSTS) + i) % len(FLEET)] for i, h in enumerate(SEED_HOSTS)}
        ids = Ids()
        for event in body:
            new = copied(event, hosts, ids)
            batch.append(new)
            if isinstance(new, StepStarted) and new.step == SHOW_STEP:
                show = new.run
            if len(batch) >= BATCH:
                store.append(JOURNAL, batch)
                batch = []
        if r % 20 == 19:
            print(f"    {(r + 1) * len(body) + 1:,} events …", flush=True)
    if batch:
        store.append(JOURNAL, batch)
    store.close()
    return show


def newest_run(db: Path, step: str) -> str:
    store = EventStore(str(db))
    show = ""
    for rec in store.read(JOURNAL, types=["StepStarted"]):
        if rec.event.step == step:
            show = rec.event.run
    store.close()
    return show


def grown_db(cache: Path, seed: Path, events: int, rb: Path) -> tuple[Path, dict[str, Any]]:
    """The journal of about ``events`` events (built once, then its projections made by
    `journal rebuild`, both timed), and what the build said of it."""
    folder = cache / f"readers-{SHAPE}"
    db = folder / f"readers-{events}.db"
    about = folder / f"readers-{events}.json"
    if not db.exists() or not about.exists():
        partial = folder / "grow-partial.db"
        for stale in folder.glob("grow-partial.db*"):
            stale.unlink()
        started = time.perf_counter()
        print(f"building a journal of {events:,} events in {db} (once) …", flush=True)
        show = grow(seed, partial, events)
        built = time.perf_counter() - started
        describe(partial, started)
        prime, peak, _ = timed(journal_cmd(partial, rb, "rebuild"), clean_env(), 3600)
        print(f"  journal rebuild of it: {prime:.1f} s, {peak:.0f} MB", flush=True)
        partial.rename(db)
        about.write_text(json.dumps({"show": show, "built_s": built, "rebuild_s": prime}))
    return db, json.loads(about.read_text())


# --- timing -------------------------------------------------------------------------------


def timed(argv: list[str], env: dict[str, str], timeout: float) -> tuple[float, float, int | None]:
    """Wall seconds, peak RSS (MB, from wait4) and exit status of one run of ``argv``; the
    status None when it ran past ``timeout`` and was killed (with its children)."""
    errors = tempfile.TemporaryFile()
    peak_file = tempfile.NamedTemporaryFile(suffix=".rss")
    if Path(TIME).exists():
        # GNU time between: a child's peak RSS as wait4 gives it counts the memory of the
        # process it was forked from (this bench, ~70 MB), a grandchild's does not
        argv = [TIME, "-f", "%M", "-o", peak_file.name, *argv]
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=errors,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    killed = threading.Event()

    def kill() -> None:
        killed.set()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, kill)
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    wall = time.perf_counter() - started
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    peak = usage.ru_maxrss / 1024
    said_peak = Path(peak_file.name).read_text().strip().splitlines()
    if said_peak and said_peak[-1].isdigit():
        peak = int(said_peak[-1]) / 1024
    elif argv[0] == TIME and not killed.is_set():  # "Command exited with non-zero status"
        found = [line for line in said_peak if line.isdigit()]
        peak = int(found[-1]) / 1024 if found else peak
    if killed.is_set():
        return wall, peak, None
    if code not in (0, 1):
        errors.seek(0)
        said = errors.read().decode("utf-8", "replace").strip().splitlines()
        shown = argv[argv.index("-m") + 6 :] if "-m" in argv else argv
        print(f"    ({' '.join(shown)}: exit {code}: {' / '.join(said[-3:])[:300]})")
    return wall, peak, code


def median_of(
    runs: int, argv: list[str], env: dict[str, str], timeout: float
) -> tuple[float | None, float, list[float]]:
    """Median wall seconds (None: past the timeout) and the highest peak RSS of ``runs`` runs,
    and each run's wall seconds."""
    walls, peaks = [], []
    for _ in range(runs):
        wall, peak, code = timed(argv, env, timeout)
        peaks.append(peak)
        if code is None:
            return None, max(peaks), walls  # one run past the limit is the figure: no more
        walls.append(wall)
    return statistics.median(walls), max(peaks), walls


def measure(
    label: str,
    db: Path,
    rb: Path,
    show: str,
    work: Path,
    args: argparse.Namespace,
    say: Callable[[str], None],
) -> dict[str, tuple[float | None, float]]:
    """Every reader on a copy of ``db``, once its projections are made."""
    env = clean_env()
    copy = work / f"{label}.db"
    shutil.copy(db, copy)
    prime, peak, _ = timed(journal_cmd(copy, rb, "rebuild"), env, 3600)
    say(f"{label}: first `journal rebuild` of the copy {prime:.2f} s, {peak:.0f} MB")
    figures = {}
    for what, argv in readers(show, work / f"postmortem-{label}.md"):
        wall, peak, walls = median_of(args.runs, journal_cmd(copy, rb, *argv), env, args.timeout)
        figures[what] = wall, peak
        shown = f"> {args.timeout:.0f} s" if wall is None else f"{wall:.2f} s"
        each = f"  (runs: {', '.join(f'{w:.2f}' for w in walls)})" if len(walls) > 1 else ""
        say(f"  {label:>6}  {what:<30} {shown:>9}  {mb(peak):>5} MB{each}")
    copy.unlink()
    for extra in work.glob(f"{label}.db*"):
        extra.unlink()
    return figures


def mb(peak: float) -> str:
    """A peak RSS as the table shows it: whole MB, rounded up (so 120.3 MB shows over 120)."""
    return f"{math.ceil(peak)}"


def verdict(what: str, size: int, wall: float | None, base: float | None, peak: float) -> str:
    """The marks of one figure against the targets: ok, or what it missed."""
    missed = []
    if wall is None:
        missed.append("timeout")
    elif base and wall / base > RATIO_TARGET and what not in WHOLE | EVERY_HOST:
        missed.append(f">{RATIO_TARGET}x")
    if peak > RSS_TARGET_MB:
        missed.append(f">{RSS_TARGET_MB} MB")
    if what == "export postmortem" and size == POSTMORTEM_AT:
        if wall is None or wall > POSTMORTEM_TARGET_S:
            missed.append(f">{POSTMORTEM_TARGET_S:.0f} s")
    return "ok" if not missed else "MISS " + ", ".join(missed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--million", action="store_true", help="also 1,000,000 events")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=ROOT / ".bench-cache")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per command")
    args = parser.parse_args()
    sizes = [100_000] + ([1_000_000] if args.million else [])
    seed, venvs, has_torch = seed_db(args.cache)
    if not has_torch:
        print(f"note: the hosts' venvs hold {FALLBACK}, not torch ({TORCH} did not install)")
    work = Path(tempfile.mkdtemp(prefix="journal-readers-"))
    try:
        rb = runbook(work / "runbook.toml", FLEET, venvs, expect(has_torch))
        grown = {size: grown_db(args.cache, seed, size, rb) for size in sizes}
        for size, (_, about) in grown.items():
            print(
                f"{size:,} events: built in {about['built_s']:.1f} s, "
                f"`journal rebuild` after it {about['rebuild_s']:.1f} s"
            )
        print(f"timing {len(readers('', work))} readers, median of {args.runs}:", flush=True)
        fresh = measure("fresh", seed, rb, newest_run(seed, SHOW_STEP), work, args, print)
        results = {
            size: measure(f"{size // 1000}k", db, rb, about["show"], work, args, print)
            for size, (db, about) in grown.items()
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def secs(wall: float | None) -> str:
        return f"> {args.timeout:.0f}" if wall is None else f"{wall:.2f}"

    head = f"{'command':<30} {'fresh s':>8} {'MB':>5}"
    for size in sizes:
        name = f"{size // 1000}k"
        head += f"  {name + ' s':>8} {'ratio':>6} {'MB':>5}  {'mark':<28}"
    print()
    print(head.rstrip())
    met = dict.fromkeys(sizes, 0)
    for what, (base, base_peak) in fresh.items():
        line = f"{what:<30} {secs(base):>8} {mb(base_peak):>5}"
        for size in sizes:
            wall, peak = results[size][what]
            ratio = f"{wall / base:.2f}" if wall is not None and base else "-"
            mark = verdict(what, size, wall, base, peak)
            met[size] += mark == "ok"
            line += f"  {secs(wall):>8} {ratio:>6} {mb(peak):>5}  {mark:<28}"
        print(line.rstrip())
    print(
        "; ".join(
            f"{size:,} events: {met[size]} of {len(fresh)} readers meet the targets "
            f"({RATIO_TARGET}x a fresh journal, {RSS_TARGET_MB} MB"
            + (f", postmortem {POSTMORTEM_TARGET_S:.0f} s" if size == POSTMORTEM_AT else "")
            + ")"
            for size in sizes
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
