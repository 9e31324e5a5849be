"""Liveness across machines: a recorder's heartbeat says a run is running, wherever it records;
a stale heartbeat makes the run lost, never interrupted by guess. The other machine is another
hostname in a UTS namespace (`unshare -u`), recording into the same journal."""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import journal, text, write_runbook
from tests.test_ssh_steps import _wait_for

RUNBOOK = """\
[journal]
name = "shared"

[hosts.here]
ssh = "local"

[[steps]]
name = "slow"
snapshots = false
run = "echo $$ > {marker}; echo started; while [ ! -e {go} ]; do sleep 0.1; done; echo done"
"""

needs_unshare = pytest.mark.skipif(
    shutil.which("unshare") is None
    or subprocess.run(["unshare", "-u", "true"], capture_output=True).returncode != 0,
    reason="unshare -u (a UTS namespace) is not allowed here",
)


def _status(db: Path, rb: Path) -> str:
    done = journal("status", db=db, runbook=rb)
    # 1 while the lost run's step-interrupted finding (an error) is open
    assert done.returncode in (0, 1), text(done.stderr)
    assert done.returncode == 1 or b"here: lost" not in done.stdout
    return text(done.stdout)


@needs_unshare
def test_a_run_recorded_on_another_machine_is_running_while_its_heartbeat_is_fresh(
    tmp_path: Path,
) -> None:
    marker, go = tmp_path / "shell.pid", tmp_path / "go"
    rb = write_runbook(tmp_path, RUNBOOK.format(marker=marker, go=go))
    db = tmp_path / "journal.db"
    other = subprocess.Popen(
        [
            "unshare",
            "-u",
            "sh",
            "-c",
            'hostname other-box && exec "$@"',
            "sh",
            sys.executable,
            "-m",
            "journal",
            "--db",
            str(db),
            "--runbook",
            str(rb),
            "run",
            "step",
            "slow",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for(marker)
        with sqlite3.connect(db) as conn:
            leases = conn.execute("SELECT machine, pid FROM recorder_leases").fetchall()
        assert [m for m, _ in leases] == ["other-box"]  # recorded from the other machine
        # this machine cannot see that process: the heartbeat alone says it runs
        assert "slow  here: running" in _status(db, rb)
        # the beat goes stale (as when the other machine dies): the run is lost, not guessed;
        # the recorder is stopped meanwhile, so that its next beat cannot come in between
        # (under load, the two commands below take longer than a beat)
        other.send_signal(signal.SIGSTOP)
        try:
            with sqlite3.connect(db) as conn:
                conn.execute("UPDATE recorder_leases SET beat = beat - 60")
            assert "slow  here: lost" in _status(db, rb)
            listed = journal("pitfalls", db=db, runbook=rb)
            assert b"slow is lost" in listed.stdout
        finally:
            other.send_signal(signal.SIGCONT)
        # the other recorder is alive after all: its next beat makes the run running again
        deadline = time.monotonic() + 20
        while "slow  here: running" not in _status(db, rb):
            assert time.monotonic() < deadline, "the heartbeat never came back"
            time.sleep(0.5)
    finally:
        go.write_text("")
        out, err = other.communicate(timeout=60)
    assert other.returncode == 0, err.decode()
    assert "slow  here: succeeded" in _status(db, rb)
    with sqlite3.connect(db) as conn:  # the recorder removed its lease when it was done
        assert conn.execute("SELECT count(*) FROM recorder_leases").fetchone()[0] == 0
