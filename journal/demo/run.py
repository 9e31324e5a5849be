"""`journal demo`: the seed's upgrade re-enacted offline with real uv and stand-in wheels.

The wheels (torch 2.10.0+cu128 → 2.12.0.dev20260226+cu130 and friends) are built locally by
:mod:`journal.demo.wheels`, so the demo needs no network and runs in seconds; uv, the venv,
the commands and the journal are all real.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from journal.cli import render
from journal.cli.context import Context
from journal.demo.wheels import build_indexes
from journal.errors import BadInput
from journal.projections.timeline import project, settle
from journal.runbook import load
from journal.service.plan import run_plan
from journal.service.steps import ensure_opened

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

[hosts.local]
ssh = "local"
python = "{py}"
env = {{ UV_CACHE_DIR = "{root}/uv-cache", UV_NO_CONFIG = "1", UV_PYTHON_DOWNLOADS = "never" }}

# The stand-in torch answers torch.cuda.nccl.version() but ships no libnccl, so the probe
# asks torch itself (on a real GPU host the default reads the library, seconds faster).
[probes.torch-env]
import_torch = true

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


def find_uv() -> str:
    """The uv beside journal's own python (installed with it), else the one on PATH."""
    beside = Path(sys.executable).with_name("uv")
    if beside.exists():
        return str(beside)
    found = shutil.which("uv")
    if found is None:
        raise BadInput(
            "the demo needs uv: `pip install uv` in journal's environment (make demo does)"
        )
    return found


def prepare(root: Path) -> Path:
    """Build the wheels, a target venv holding the old stack, and the runbook; return its path."""
    if root.exists() and any(root.iterdir()) and not (root / MARKER).exists():
        raise BadInput(f"{root} is not empty and is not a journal demo folder; name another")
    root.mkdir(parents=True, exist_ok=True)
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
        root=root, uv=uv, py=py, cu130=indexes["cu130"].as_uri(), verify=VERIFY.format(py=py)
    )
    path = root / "runbook.toml"
    path.write_text(text)
    return path


def run_demo(root: Path, ctx: Context) -> int:
    """Prepare the demo, run its plan with real uv, print the timeline."""
    runbook = load(prepare(root))
    if not ctx.db_given:
        ctx.db = str(root.resolve() / "journal.db")
    ctx.runbook_path = str(runbook.path)
    ensure_opened(ctx.store, runbook)
    code = run_plan(ctx.store, runbook)
    timeline = settle(project(runbook.name, ctx.store.read(runbook.name)))
    print()
    print(render.timeline_text(timeline))
    print()
    me = Path(sys.argv[0])
    command = os.path.relpath(me) if me.name == "journal" else "journal"
    print(f"the demo journal is {ctx.db}; look at it with:")
    print(f"  {command} --db {ctx.db} --runbook {runbook.path} status")
    print(f"  {command} --db {ctx.db} --runbook {runbook.path} log --output")
    print(f"  {command} --db {ctx.db} --runbook {runbook.path} serve   # in the browser")
    return code
