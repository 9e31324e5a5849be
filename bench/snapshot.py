"""What a package snapshot costs on a real env, and whether every package survives it.

    python bench/snapshot.py --python /path/to/env/bin/python [--rounds 5]
    python bench/snapshot.py --make-venv 500 [--rounds 5]

For the env of ``--python`` (a real ML env: the H200 image's, over 200 packages), or for a venv
of N real distributions installed here from the wheels on this machine's disk (``--make-venv N``;
``--wheels DIR``, default the local index /opt/pypi; built once under .bench-cache/), it prints:

- the packages probe alone (the script the env's python runs), median of the rounds;
- journal reading that output, two ways: **before** (issue 25: the raw output redacted as text
  by the redactor of commit edc6430, then parsed, which is how every snapshot of an env holding
  ``tiktoken`` failed; ``--old-redact FILE`` names that redact.py where there is no git
  history) and **after** (parsed from the raw bytes, then its values redacted), with how many
  package names and versions came out exactly as the env has them;
- ``journal run probe packages`` as a whole on a runbook whose host is that env (``local``);
- with ``--history``, the commands a snapshot feeds on a fresh journal and on a copy of
  bench/history.py's 100,000-event journal (built and cached by it): a step with its
  snapshots before and after, ``show`` of it, ``status``, ``pitfalls`` and
  ``rollback --dry-run`` to before it, each the median wall time and the peak RSS.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from journal.probes import BUILTIN, ProbeSpec  # noqa: E402
from journal.probes.runner import read_outcome  # noqa: E402
from journal.redact import Redactor  # noqa: E402

SCRIPT = ROOT / "journal" / "probes" / "scripts" / "packages.py"
CACHE = ROOT / ".bench-cache"
#: the last commit before issue 25's change of the redactor
BEFORE = "edc6430"


def median_time(fn, rounds: int) -> tuple[float, object]:
    times, last = [], None
    for _ in range(rounds):
        started = time.perf_counter()
        last = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), last


def old_redactor(path: Path | None) -> Redactor | None:
    """The redactor as it was before issue 25 (commit edc6430), loaded from ``path`` or from
    git; None when neither has it."""
    if path is None:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{BEFORE}:journal/redact.py"], capture_output=True
        )
        if done.returncode != 0:
            return None
        path = Path(tempfile.mkdtemp()) / "old_redact.py"
        path.write_bytes(done.stdout)
    spec = importlib.util.spec_from_file_location("old_redact", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_redact"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.Redactor.for_run()


def make_venv(count: int, wheels: Path) -> Path:
    """A venv of ``count`` real distributions (pure-Python wheels from ``wheels``, no deps
    resolved: what matters to a snapshot is how many dist-info folders there are)."""
    folder = CACHE / f"venv-{count}"
    python = folder / "bin" / "python"
    if python.exists():
        listed = subprocess.run(
            [str(python), "-m", "pip", "list", "--format", "json"], capture_output=True, text=True
        )
        if listed.returncode == 0 and len(json.loads(listed.stdout)) >= count:
            return python
    files = sorted(wheels.rglob("*-py3-none-any.whl")) + sorted(
        wheels.rglob("*-py2.py3-none-any.whl")
    )
    picked: dict[str, Path] = {}
    for wheel in files:
        picked.setdefault(wheel.name.split("-")[0].lower(), wheel)
    chosen = list(picked.values())[:count]
    if len(chosen) < count:
        raise SystemExit(f"only {len(chosen)} pure-Python wheels under {wheels}: pass --wheels")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--no-compile",
            "--disable-pip-version-check",
            *map(str, chosen),
        ],
        check=True,
    )
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", help="the env's python")
    parser.add_argument("--make-venv", type=int, metavar="N", help="a venv of N packages here")
    parser.add_argument("--wheels", type=Path, default=Path("/opt/pypi"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--old-redact", type=Path, help="redact.py as of commit edc6430")
    parser.add_argument("--history", action="store_true", help="also on a 100,000-event journal")
    args = parser.parse_args()
    py = str(make_venv(args.make_venv, args.wheels)) if args.make_venv else args.python
    if not py:
        raise SystemExit("name an env: --python PATH or --make-venv N")

    def probe() -> bytes:
        done = subprocess.run([py, str(SCRIPT)], capture_output=True)
        if done.returncode != 0:
            raise SystemExit(f"the packages probe failed: {done.stderr.decode()[-1000:]}")
        return done.stdout

    probe_s, raw = median_time(probe, args.rounds)
    assert isinstance(raw, bytes)
    truth = json.loads(raw)["packages"]
    spec = ProbeSpec("packages", script=BUILTIN["packages"])
    redactor = Redactor.for_run()
    old = old_redactor(args.old_redact)

    def before() -> dict | None:
        assert old is not None
        text, _ = old.bytes(raw, "probe packages")
        try:
            return old.value(json.loads(text), "probe packages")
        except ValueError:
            return None

    def after() -> dict | None:
        return read_outcome(spec, raw, b"", redactor)[0]

    rows = [("packages probe alone", probe_s, "")]
    ways = [("after: parsed, then values redacted", after)]
    if old is not None:
        ways.insert(0, ("before: redacted as text, then parsed", before))
    for name, fn in ways:
        seconds, result = median_time(fn, args.rounds)
        got = (result or {}).get("packages") if isinstance(result, dict) else None
        if not isinstance(got, dict):
            intact = "the snapshot FAILED (no JSON object)"
        else:
            same = sum(
                1
                for k, v in truth.items()
                if k in got
                and got[k].get("name") == v["name"]
                and got[k].get("version") == v["version"]
            )
            intact = f"{same}/{len(truth)} names and versions intact"
        rows.append((f"journal reading it, {name}", seconds, intact))

    with tempfile.TemporaryDirectory() as work:
        runbook = Path(work) / "runbook.toml"
        runbook.write_text(
            f'[journal]\nname = "snapshot-bench"\n\n[hosts.env]\nssh = "local"\npython = "{py}"\n'
        )
        journal = [
            sys.executable,
            "-m",
            "journal",
            "--db",
            f"{work}/journal.db",
            "--runbook",
            str(runbook),
            "run",
            "probe",
            "packages",
        ]

        def command() -> int:
            return subprocess.run(journal, capture_output=True).returncode

        seconds, code = median_time(command, args.rounds)
        rows.append(("`journal run probe packages`", seconds, f"exit {code}"))

    print(f"env: {py} ({len(truth)} distributions; {args.rounds} rounds, medians)")
    for what, seconds, note in rows:
        print(f"  {what:<62} {seconds * 1000:8.1f} ms  {note}")
    if args.history:
        history(py, args.rounds)


def history(py: str, rounds: int) -> None:
    """The commands a snapshot feeds, fresh and on the 100,000-event journal."""
    sys.path.insert(0, str(ROOT / "bench"))
    import history as long_journal

    events = 100_000
    long_db = long_journal.cached(CACHE, events)
    env = dict(os.environ)
    print(f"\nwhat a snapshot feeds, fresh and on {events:,} events ({rounds} rounds):")
    for label, source in (("fresh", None), (f"{events:,}", long_db)):
        with tempfile.TemporaryDirectory() as work:
            db = Path(work) / "journal.db"
            if source is not None:
                shutil.copy(source, db)
            else:
                long_journal.build(db, 1)  # the journal opened, nothing else
            runbook = Path(work) / "runbook.toml"
            runbook.write_text(
                f'[journal]\nname = "{long_journal.JOURNAL}"\n\n[hosts.here]\nssh = "local"\n'
                f'python = "{py}"\n\n[[steps]]\nname = "snap"\nrun = "true"\n'
            )

            def cmd(*more: str, db: Path = db, runbook: Path = runbook) -> list[str]:
                return long_journal.journal_cmd(db, runbook, *more)

            long_journal.timed(cmd("rebuild"), env)  # the stored projections, once
            wall, peak = long_journal.median_of(rounds, lambda _i: cmd("run", "step", "snap"), env)
            print(
                f"  {label:>8}  {'run step snap (snapshots before and after)':<46} "
                f"{wall:6.2f} s  {peak:6.0f} MB"
            )
            listed = subprocess.run(
                cmd("log", "--step", "snap", "--format", "json"), capture_output=True, env=env
            )
            run = [i for i in json.loads(listed.stdout)["items"] if i.get("kind") == "run"][-1]
            for what, argv in (
                ("show RUN (the latest snap run)", cmd("show", run["run"])),
                ("log --step snap", cmd("log", "--step", "snap")),
                ("status", cmd("status")),
                ("pitfalls", cmd("pitfalls")),
                (
                    "rollback --to before:snap --dry-run",
                    cmd("rollback", "--to", "before:snap", "--dry-run"),
                ),
            ):
                wall, peak = long_journal.median_of(rounds, lambda _i, a=argv: a, env)
                print(f"  {label:>8}  {what:<46} {wall:6.2f} s  {peak:6.0f} MB")


if __name__ == "__main__":
    main()
