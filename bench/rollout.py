"""What a gate costs: a 64-host rollout, 8 at a time, over 64 real sshds, gated and not.

Each host is a real sshd on its own loopback address (127.0.1.1 …), its target python this
machine's (package snapshots before and after each step, as by default). The plan is one step
(a second of output). The gate is the shape a fleet has: the ``torch-env`` probe (and the stack
agreeing), a benchmark printing five samples per host judged against that host's own baseline
(recorded first, not timed), and drain / resume hooks run locally around each batch. The
script prints, for ``journal run plan --rolling 8`` with the gate and with ``--no-gate`` on a
fresh journal each, the wall time and journal's peak RSS, and their ratios.

Run: ``.venv/bin/python bench/rollout.py [--hosts 64] [--rolling 8]`` (a few minutes).
"""

from __future__ import annotations

import argparse
import contextlib
import os
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

STEP = "for i in $(seq 1 10); do echo upgrading, line $i; sleep 0.1; done"
SAMPLES = "98 99 100 101 102"
#: what a scheduler's drain and resume would do: each host of the batch marked
HOOK = "for h in $(echo {{hosts}} | tr , ' '); do echo {word} > {state}/$h; done"


def runbook(folder: Path, servers: list[SshServer]) -> Path:
    names = [f"h{i:02d}" for i in range(1, len(servers) + 1)]
    hosts = "".join(
        f'[hosts.{n}]\nssh = "{s.alias}"\npython = "{sys.executable}"\n'
        f'env = {{ FIG = "{folder / "figures"}" }}\n\n'
        for n, s in zip(names, servers, strict=True)
    )
    (folder / "figures").write_text(SAMPLES + "\n")
    state = folder / "scheduler"
    state.mkdir()
    path = folder / "runbook.toml"
    path.write_text(
        f'[journal]\nname = "rollout-bench"\ngate = "fleet"\n\n{hosts}'
        f"[[steps]]\nname = \"upgrade\"\nrun = '''{STEP}'''\n\n"
        "[benchmarks.serving]\n"
        "run = 'for v in $(cat $FIG); do echo \"Output token throughput (tok/s): $v\"; done'\n"
        'parser = "regex"\n'
        "pattern = 'Output token throughput \\(tok/s\\): (?P<output_token_throughput>[0-9.]+)'\n\n"
        "[gates.fleet]\n"
        'benchmarks = ["serving"]\n'
        'tolerance = { output_token_throughput = ">= -3%" }\n'
        f'before_batch = "{HOOK.format(state=state, word="drained")}"\n'
        f'after_batch = "{HOOK.format(state=state, word="resumed")}"\n'
    )
    return path


def journal(folder: Path, env: dict[str, str], db: Path, *args: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of `journal ARGS` on ``db``."""
    cmd = [sys.executable, "-m", "journal", "--db", str(db)]
    cmd += ["--runbook", str(folder / "runbook.toml"), *args]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        err.seek(0)
        said = err.read().decode("utf-8", "replace")
    took = time.perf_counter() - started
    if code:
        raise SystemExit(f"{' '.join(cmd)} failed ({code}):\n{said[-3000:]}")
    return took, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--rolling", type=int, default=8)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="journal-bench-rollout-"))
    print(f"{args.hosts} hosts, rolling {args.rolling} at a time, {os.cpu_count()} CPUs here")
    try:
        with contextlib.ExitStack() as stack:
            started = time.perf_counter()
            servers = [
                stack.enter_context(SshServer(f"127.0.1.{1 + i}")) for i in range(args.hosts)
            ]
            print(f"{args.hosts} sshds up in {time.perf_counter() - started:.1f}s")
            home = SshHome(servers)
            stack.callback(home.cleanup)
            runbook(folder, servers)
            env = home.env()
            gated_db, plain_db = folder / "gated.db", folder / "plain.db"
            took, _ = journal(
                folder, env, gated_db, "run", "bench", "serving", "--all-hosts",
                "--label", "phase=before",
            )  # fmt: skip
            print(f"baselines recorded on every host in {took:.1f}s (not timed below)")
            rolling = ["run", "plan", "--rolling", str(args.rolling)]
            plain, plain_rss = journal(folder, env, plain_db, *rolling, "--no-gate")
            gated, gated_rss = journal(folder, env, gated_db, *rolling)
            resumed = sorted(set((folder / "scheduler" / f.name).read_text().strip()
                                 for f in (folder / "scheduler").iterdir()))  # fmt: skip
            print(f"{'':>22}{'wall':>10}{'peak RSS':>12}")
            print(f"{'rolled, no gate':>22}{plain:>9.1f}s{plain_rss:>9.0f} MB")
            print(f"{'gated':>22}{gated:>9.1f}s{gated_rss:>9.0f} MB")
            print(
                f"{'gated / not':>22}{gated / plain:>9.2f}×{gated_rss / plain_rss:>10.2f}×"
                f"   (hooks left every host {', '.join(resumed)})"
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
