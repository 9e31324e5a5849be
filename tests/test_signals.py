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


@pytest.mark.parametrize(
    "how", [["run", "step", "slow", "--detach"], ["run", "plan", "--detach"]], ids=["step", "plan"]
)
def test_detach_leaves_the_command_running_and_attach_records_the_rest(
    tmp_path: Path, how: list[str]
) -> None:
    """`run step --detach` (or `run plan --detach`): SIGTERM leaves the command running on its
    host (the record says how to reattach); `journal attach` then records the rest and the
    real exit status."""
    go = tmp_path / "go"
    rb = write_runbook(
        tmp_path,
        '[journal]\nname = "signals"\n\n[hosts.here]\nssh = "local"\n\n[[steps]]\n'
        'name = "slow"\nsnapshots = false\n'
        f'run = "echo start; while [ ! -e {go} ]; do sleep 0.05; done; echo end; exit 4"\n',
    )
    db = tmp_path / "journal.db"
    proc = subprocess.Popen(
        [*JOURNAL, "--db", str(db), "--runbook", str(rb), *how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while b"start" not in journal("log", "--output", db=db, runbook=rb).stdout:
        assert time.monotonic() < deadline, "the step never started"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143, text(err)
    assert b"left running on the host; `journal attach " in err
    assert "slow  here: lost" in text(journal("status", db=db, runbook=rb).stdout)
    go.write_text("")
    attached = journal("attach", "--all", db=db, runbook=rb)
    assert attached.returncode == 4, text(attached.stderr)
    logged = journal("log", "--output", db=db, runbook=rb).stdout
    assert b"start\nend\n" in logged
    assert "slow  here: failed" in text(journal("status", db=db, runbook=rb).stdout)


def test_detach_must_be_true_or_false(tmp_path: Path) -> None:
    rb = write_runbook(
        tmp_path,
        '[journal]\nname = "signals"\n\n[hosts.here]\nssh = "local"\n\n[[steps]]\n'
        'name = "slow"\nrun = "true"\ndetach = "yes"\n',
    )
    done = journal("run", "step", "slow", db=tmp_path / "journal.db", runbook=rb)
    assert done.returncode == 2
    assert "detach" in text(done.stderr) and "expected true or false" in text(done.stderr)


def test_the_next_step_on_a_host_first_records_how_its_lost_run_ended(tmp_path: Path) -> None:
    """journal killed outright: its step is lost, its command goes on. The next `run step` on
    that host attaches to it first (waiting for it to end), so nothing runs beside it."""
    go, marker = tmp_path / "go", tmp_path / "shell.pid"
    rb = write_runbook(
        tmp_path,
        '[journal]\nname = "signals"\n\n[hosts.here]\nssh = "local"\n\n'
        '[[steps]]\nname = "slow"\nsnapshots = false\n'
        f'run = "echo $$ > {marker}; echo first; while [ ! -e {go} ]; do sleep 0.05; done; '
        'echo second; exit 3"\n\n'
        '[[steps]]\nname = "next"\nsnapshots = false\nrun = "echo next"\n',
    )
    db = tmp_path / "journal.db"
    proc = subprocess.Popen(
        [*JOURNAL, "--db", str(db), "--runbook", str(rb), "run", "step", "slow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    _wait_for(marker)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert "slow  here: lost" in text(journal("status", db=db, runbook=rb).stdout)
    go.write_text("")
    done = journal("run", "step", "next", db=db, runbook=rb)
    assert done.returncode == 0, text(done.stderr)
    assert "lost their recorder: recording how they ended" in text(done.stderr)
    status = text(journal("status", db=db, runbook=rb).stdout)
    assert "slow  here: failed" in status and "next  here: succeeded" in status
    assert b"first\nsecond\n" in journal("log", "--output", db=db, runbook=rb).stdout
