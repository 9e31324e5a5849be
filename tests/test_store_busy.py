"""A write lock that cannot be had within the busy timeout: a clear message, exit 2, nothing
recorded lost, and no command left running unrecorded."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

from tests.helpers import JOURNAL, journal, no_traceback, text, write_runbook
from tests.test_ssh_steps import _alive, _wait_for

RUNBOOK = """\
[journal]
name = "busy"

[hosts.here]
ssh = "local"

[[steps]]
name = "hello"
snapshots = false
run = "echo hello"

[[steps]]
name = "ticking"
snapshots = false
run = "echo $$ > {marker}; for i in $(seq 1 300); do echo tick $i; sleep 0.1; done"
"""


def _count(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM events").fetchone()[0]


def _hold_lock(db: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(db, isolation_level=None, timeout=30)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def test_a_lock_held_past_the_busy_timeout_is_a_clear_error(tmp_path: Path) -> None:
    rb = write_runbook(tmp_path, RUNBOOK.format(marker=tmp_path / "pid"))
    db = tmp_path / "journal.db"
    assert journal("run", "step", "hello", db=db, runbook=rb).returncode == 0
    before = _count(db)
    env = {**os.environ, "JOURNAL_BUSY_TIMEOUT_S": "0.5"}
    holder = _hold_lock(db)
    try:
        result = journal("run", "step", "hello", db=db, runbook=rb, env=env)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.returncode == 2, text(result.stderr)
    assert no_traceback(result)
    assert "is locked by another writer" in text(result.stderr)
    assert "0.5 s busy timeout" in text(result.stderr)
    assert _count(db) == before
    assert journal("verify", db=db, runbook=rb).returncode == 0


def test_a_lock_taken_mid_step_stops_the_command_instead_of_orphaning_it(tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    rb = write_runbook(tmp_path, RUNBOOK.format(marker=marker))
    db = tmp_path / "journal.db"
    env = {**os.environ, "JOURNAL_BUSY_TIMEOUT_S": "0.5"}
    proc = subprocess.Popen(
        [*JOURNAL, "--db", str(db), "--runbook", str(rb), "run", "step", "ticking"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    _wait_for(marker)
    shell = int(marker.read_text())
    recorded = 0
    while recorded < 3:  # some ticks are in the record before the lock is taken
        time.sleep(0.1)
        with sqlite3.connect(db) as conn:
            recorded = conn.execute(
                "SELECT count(*) FROM events WHERE type = 'OutputChunk'"
            ).fetchone()[0]
    holder = _hold_lock(db)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert proc.returncode == 2, err.decode()
    assert b"Traceback" not in err and b"is locked by another writer" in err
    deadline = time.monotonic() + 10
    while _alive(shell) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(shell), "the step's command outlived journal"
    assert journal("verify", db=db, runbook=rb).returncode == 0
    with sqlite3.connect(db) as conn:
        chunks = conn.execute("SELECT count(*) FROM events WHERE type = 'OutputChunk'")
        assert chunks.fetchone()[0] >= recorded  # what was recorded before stays
