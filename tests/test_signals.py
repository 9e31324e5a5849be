"""journal stopped by a signal stops the step it records: the issue's repro, on `local`."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from journal.events import StepFinished
from journal.store import EventStore
from tests.helpers import JOURNAL, journal, text, write_runbook
from tests.test_ssh_steps import _alive, _wait_for

RUNBOOK = """\
[journal]
name = "signals"

[hosts.here]
ssh = "local"

[[steps]]
name = "slow"
snapshots = false
run = "echo start; echo $$ > {marker}; sleep 30; date > {finished}"
"""


@pytest.mark.parametrize(
    ("sent", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)]
)
def test_a_signal_to_journal_stops_the_local_command(
    tmp_path: Path, sent: signal.Signals, code: int
) -> None:
    marker, finished = tmp_path / "shell.pid", tmp_path / "finished.txt"
    rb = write_runbook(tmp_path, RUNBOOK.format(marker=marker, finished=finished))
    db = tmp_path / "journal.db"
    proc = subprocess.Popen(
        [*JOURNAL, "--db", str(db), "--runbook", str(rb), "run", "step", "slow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    _wait_for(marker)
    shell = int(marker.read_text())
    proc.send_signal(sent)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, text(err)
    deadline = time.monotonic() + 10
    while _alive(shell) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(shell), "the step's shell outlived journal"
    with pytest.raises(ProcessLookupError):
        os.killpg(shell, 0)  # nothing of its process group is left either
    assert not finished.exists()
    store = EventStore(str(db))
    try:
        done = [r.event for r in store.read("signals") if isinstance(r.event, StepFinished)][-1]
    finally:
        store.close()
    why = "Ctrl-C" if sent == signal.SIGINT else sent.name
    assert done.status == "interrupted"
    assert done.reason == f"interrupted ({why}): the command was stopped"
    listed = journal("pitfalls", db=db, runbook=rb)
    assert f"slow was interrupted ({why}) before it finished".encode() in listed.stdout
