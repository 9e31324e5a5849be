"""`journal demo`: the seed's upgrade re-enacted offline with real uv and stand-in wheels.

The wheels (torch 2.10.0+cu128 → 2.12.0.dev20260226+cu130 and friends) are built locally by
:mod:`journal.demo.wheels`, so the demo needs no network and runs in seconds; uv, the venv,
the commands and the journal are all real.

The demo sits below the command line: it records through the services, and what it shows is
worded by the :class:`DemoReporter` that `journal demo` hands it
(:class:`journal.cli.plan.TerminalDemoReport`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from journal.demo.wheels import build_indexes
from journal.errors import BadInput
from journal.events import NoteAdded
from journal.paths import make_folder
from journal.projections.stored import current_timeline
from journal.runbook import Runbook
from journal.runs import StepRun, exit_status
from journal.service.bench import run_bench
from journal.service.findings import run_findings
from journal.service.imports import import_transcript
from journal.service.plan import PlanReporter, run_plan
from journal.service.rollback import plan
from journal.service.steps import ensure_opened

if TYPE_CHECKING:
    from journal.pitfalls.base import Finding
    from journal.projections.timeline import Timeline
    from journal.service.rollback_plan import HostPlan
    from journal.store import EventStore

MARKER = ".journal-demo"

VERIFY = (
    "{py} -c \"import torch; print('torch:', torch.__version__); "
    "print('CUDA:', torch.version.cuda); print('NCCL:', torch.cuda.nccl.version())\""
)

RUNBOOK = """\
# The demo: the seed's CUDA 13 upgrade, re-enacted offline with stand-in wheels built by
# `journal demo` (packages named torch, numpy, ... that only answer version questions).

[journal]
name = "cuda13-demo"

# The host's default index is the stand-in cu128 index the old stack came from (as a real
# host's pip.conf or UV_INDEX_URL names its mirror): `journal rollback` finds the old wheels
# there, since no recorded install brought them.
[hosts.local]
ssh = "local"
python = "{py}"
uv = "{uv}"
env = {{ UV_CACHE_DIR = "{root}/uv-cache", UV_NO_CONFIG = "1", UV_PYTHON_DOWNLOADS = "never", UV_INDEX_URL = "{cu128}" }}

# The stand-in torch answers torch.cuda.nccl.version() but ships no libnccl, so the probe
# asks torch itself (on a real GPU host the default reads the library, seconds faster).
[probes.torch-env]
import_torch = true

# A real measurement that needs no GPU: the target env's python multiplying matrices in pure
# Python, {samples} samples (each the best of three, timed in CPU time: the time other
# processes take from this one does not count) before the upgrade and {samples} after it
# (`--label phase=before` / `phase=after`): their spread shows how precise it is. Nothing the
# steps change touches it (the stand-in torch is never imported), so it declares itself a
# control (`control = "yes"`): its change is the machine's, and reads as noise everywhere.
[benchmarks.cpu-matmul]
run = '''{py} -c "{matmul}"'''
parser = "regex"
pattern = 'matmul n=\\d+ sample \\d+: (?P<matmul_mflops>[0-9.]+) MFLOP/s'
units = {{ matmul_mflops = "MFLOP/s" }}
labels = {{ control = "yes" }}
description = "pure-Python float matrix multiply, {samples} samples each the best of 3 in CPU time (CPU only): a control, nothing in the upgrade touches it, so its change is the machine's noise"

[[steps]]
name = "backup-env"
run = '''mkdir -p {root}/backup && {uv} pip freeze --python {py} > {root}/backup/requirements-before.txt && cat {root}/backup/requirements-before.txt'''

[[steps]]
name = "install-torch"
run = '''{uv} pip install --python {py} torch torchvision torchaudio --index-url {cu130}'''

[[steps]]
name = "verify-torch"
run = '''{verify}'''
probes = ["torch-env"]

[[steps]]
name = "reinstall-torch"
run = '''{uv} pip install --python {py} torch torchvision torchaudio --index-url {cu130} --reinstall'''

[[steps]]
name = "verify-torch-again"
run = '''{verify}'''
probes = ["torch-env"]
expect = {{ "torch.version" = "*+cu130", "torch.cuda" = "13.0", "nccl" = ">=2.28", "packages.numpy" = "==2.4.1" }}
"""


#: The CPU benchmark: n x n matrix products in pure Python, in MFLOP/s, printed as SAMPLES
#: repeated samples (each the best of three products, after one product to warm up) so that
#: the throughput page shows their spread. Each product is timed in the process's CPU time
#: (``time.process_time``), not wall time: on a 2-core machine busy with four other processes
#: the wall-clock samples fell from 36 to 9-18 MFLOP/s (a second demo run then said +245%),
#: the CPU-time ones stayed at 35-36; what is left (a loaded memory bus: -10%) is why the
#: benchmark also declares itself a control (``control = "yes"``).
SAMPLES = 5
MATMUL = (
    "import random, time; n = 60; r = random.Random(1); "
    "a = [[r.random() for _ in range(n)] for _ in range(n)]; "
    "b = [list(col) for col in zip(*[[r.random() for _ in range(n)] for _ in range(n)])]; "
    "product = lambda: sum(sum(x * y for x, y in zip(row, col)) for row in a for col in b); "
    "timed = lambda t: (product(), time.process_time() - t)[1]; timed(time.process_time()); "
    "[print(f'matmul n={n} sample {i + 1}: "
    "{2 * n ** 3 / min(timed(time.process_time()) for _ in range(3)) / 1e6:.1f} MFLOP/s') "
    f"for i in range({SAMPLES})]"
)

#: Notes the demo adds, as the engineer of the seed's upgrade would have: (tags, text).
NOTES = (
    (
        ["trigger"],
        "EAGLE-3 speculative decoding needed sgl-kernel built for CUDA 13, which needs a "
        "torch nightly for cu130 (demo note).",
    ),
    (
        ["root-cause"],
        "uv treated the installed torch 2.10.0+cu128 as satisfying `torch` and printed "
        "'Checked 3 packages': the cu130 index was never used until --reinstall; and the old "
        "sgl-kernel did not match the new torch, hence 54.1 tok/s (demo note).",
    ),
    (
        ["lesson"],
        "Verify the variant after every install (torch.__version__, torch.version.cuda, "
        "NCCL): a zero exit status and 'Checked N packages' prove nothing (demo note).",
    ),
    (
        ["lesson"],
        "Reinstall the kernels (sgl-kernel, flashinfer) after swapping torch, and benchmark "
        "before and after (demo note).",
    ),
)


def _command() -> str:
    """How to run this journal again: ``journal`` where that is the one on PATH, else its
    path (a venv's ``.venv/bin/journal``, relative where it lies below here)."""
    me = Path(sys.argv[0])
    if me.name != "journal":
        return "journal"
    found = shutil.which("journal")
    if found is not None and Path(found).resolve() == me.resolve():
        return "journal"
    here = Path.cwd()
    mine = me.resolve()
    return os.path.relpath(mine) if mine.is_relative_to(here) else str(mine)


def find_uv() -> str:
    """The uv beside journal's own python (installed with it), else the one on PATH."""
    beside = Path(sys.executable).with_name("uv")
    if beside.exists():
        return str(beside)
    found = shutil.which("uv")
    if found is None:
        raise BadInput(
            "the demo needs uv and finds none beside journal's python or on PATH: install "
            "journal with its demo extra (`uv tool install '.[demo]'`, `pipx install "
            "'.[demo]'`, `pip install '.[demo]'`; make demo does), or put uv on PATH"
        )
    return found


def prepare(root: Path) -> Path:
    """Build the wheels, a target venv holding the old stack, and the runbook; return its path."""
    make_folder(root, "the demo")
    if any(root.iterdir()) and not (root / MARKER).exists():
        raise BadInput(f"{root} is not empty and is not a journal demo folder; name another")
    (root / MARKER).write_text("made by `journal demo`; it wipes and remakes this folder\n")
    for stale in ("ml-env", "backup", "journal.db", "journal.db-wal", "journal.db-shm"):
        path = root / stale
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    root = root.resolve()
    uv = find_uv()
    indexes = build_indexes(root / "indexes")
    env = {**os.environ, "UV_CACHE_DIR": str(root / "uv-cache"), "UV_NO_CONFIG": "1"}
    py = root / "ml-env" / "bin" / "python3"
    for cmd in (
        [uv, "venv", "--quiet", "--python", sys.executable, str(root / "ml-env")],
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--python",
            str(py),
            "torch",
            "torchvision",
            "torchaudio",
            "numpy",
            "pillow",
            "--index-url",
            indexes["cu128"].as_uri(),
        ],
    ):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode:
            raise BadInput(f"preparing the demo failed: {' '.join(cmd)}:\n{done.stderr}")
    text = RUNBOOK.format(
        root=root,
        uv=uv,
        py=py,
        cu130=indexes["cu130"].as_uri(),
        cu128=indexes["cu128"].as_uri(),
        verify=VERIFY.format(py=py),
        matmul=MATMUL,
        samples=SAMPLES,
    )
    path = root / "runbook.toml"
    path.write_text(text)
    return path


class DemoReporter(PlanReporter, Protocol):
    """Hears the demo as it goes: its plan's progress (a :class:`PlanReporter`), and what the
    demo shows of its record besides."""

    def bench_ran(self, run: StepRun) -> None:
        """A run of the CPU benchmark ended (its verdict)."""
        ...

    def timeline(self, timeline: Timeline, findings: list[Finding]) -> None:
        """The journal the demo recorded, once it is all recorded, and its runs' findings
        (what `journal log` shows them with: ``no change`` for a no-op install)."""
        ...

    def rollback_planned(self, host_plan: HostPlan) -> None:
        """A host's way back, planned but not taken (what `journal rollback` would do)."""
        ...


def measure(store: EventStore, runbook: Runbook, reporter: DemoReporter, phase: str) -> int:
    """Run the CPU benchmark, its figures labelled with ``phase``."""
    runs = run_bench(
        store,
        runbook,
        runbook.benchmark("cpu-matmul"),
        list(runbook.hosts.values()),
        reporter.echo_for(1),
        {"phase": phase},
    )
    for bench in runs:
        reporter.bench_ran(bench.run)
    return exit_status([b.run for b in runs])


def run_demo(store: EventStore, runbook: Runbook, reporter: DemoReporter, db: str) -> int:
    """Run the prepared demo (:func:`prepare`) into ``store`` (the database ``db``): its plan
    with real uv between two measurements, the seed's GPU session imported, the notes; then
    show the timeline and the way back. The exit status."""
    ensure_opened(store, runbook)
    code = measure(store, runbook, reporter, "before")
    code = run_plan(store, runbook, reporter) or code
    code = measure(store, runbook, reporter, "after") or code
    session = Path(__file__).with_name("gpu-session.txt")
    count = import_transcript(store, runbook.name, session, "gpu-box", runbook.redact)
    print(f"journal: imported {count} commands of the seed's GPU session ({session.name})")
    store.append(
        runbook.name,
        [NoteAdded(text=text, author="journal demo", tags=tags) for tags, text in NOTES],
    )
    print()
    recorded = current_timeline(store, runbook.name)
    reporter.timeline(recorded, run_findings(store, runbook.name, list(recorded.runs)))
    print()
    # The way back, planned but not taken: what `journal rollback` would do.
    print("$ journal rollback --to before:install-torch --dry-run")
    for host_plan in plan(store, runbook, "before:install-torch", []):
        reporter.rollback_planned(host_plan)
    print()
    print(f"the demo journal is {db}; look at it with:")
    command = _command()
    print(f"  {command} --db {db} --runbook {runbook.path} status")
    print(f"  {command} --db {db} --runbook {runbook.path} log --full-output")
    print(f"  {command} --db {db} --runbook {runbook.path} serve   # in the browser")
    return code
