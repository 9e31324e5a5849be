"""Every end of a run named truly (issue 27, cases 6, 7 and 9's signals), with real processes
and real signals: a run stopped before its command was launched is `not started` (nothing ran
on the host, the next `run step` runs it); journal's own stop for a full disk under its
database is `disk full`, not a kill; `nohup` keeps SIGHUP ignored; a Ctrl-C while journal
starts exits 130.

Where journal is comes from markers it leaves on its way (the host's target python starting
the before-snapshot, a module being imported), never from sleeping a while.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from journal.events import StepFinished, StepStarted
from journal.output import decode
from journal.store import EventStore
from journal.web import create_app
from tests.helpers import JOURNAL, journal, no_traceback, text, write_runbook

#: The target python of the host: slow to start while ``HOLD`` exists (it says so in
#: ``MARK`` as it begins to wait), so that journal is held in the before-snapshot.
SLOW_PYTHON = """#!/bin/sh
if [ -e {hold} ]; then
  : > {mark}
  while [ -e {hold} ]; do sleep 0.05; done
fi
exec {python} "$@"
"""

RUNBOOK = """\
[journal]
name = "ends"

[hosts.here]
ssh = "local"
python = "{python}"

[[steps]]
name = "first"
snapshots = false
run = "echo first"

[[steps]]
name = "install"
run = "echo ran >> {ran}; echo installed"
"""


def _wait_for(path: Path, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Until ``path`` exists (journal got there); fail at once if ``proc`` ended first."""
    deadline = time.monotonic() + 60
    while not path.exists():
        if proc is not None and proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"journal ended ({proc.returncode}) before {path.name}: {text(err)}")
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


class Host:
    """A runbook on `local` whose target python can be held in the before-snapshot."""

    def __init__(self, tmp_path: Path) -> None:
        self.hold, self.mark, self.ran = tmp_path / "hold", tmp_path / "mark", tmp_path / "ran"
        python = tmp_path / "slow-python"
        target = shutil.which("python3") or sys.executable
        python.write_text(SLOW_PYTHON.format(hold=self.hold, mark=self.mark, python=target))
        python.chmod(0o755)
        self.db = tmp_path / "journal.db"
        self.runbook = write_runbook(tmp_path, RUNBOOK.format(python=python, ran=self.ran))

    def start(self, *args: str, **popen: object) -> subprocess.Popen[bytes]:
        """journal ARGS, held in the first before-snapshot it takes (``mark`` says it is)."""
        self.hold.touch()
        self.mark.unlink(missing_ok=True)
        return subprocess.Popen(  # type: ignore[call-overload]
            [*JOURNAL, "--db", str(self.db), "--runbook", str(self.runbook), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            **{"start_new_session": True, **popen},
        )

    def release(self) -> None:
        self.hold.unlink(missing_ok=True)

    def journal(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return journal(*args, db=self.db, runbook=self.runbook)

    def ends(self) -> list[tuple[str, StepFinished | None]]:
        """(step, its StepFinished or None) for every run, in order."""
        store = EventStore(str(self.db))
        try:
            names: dict[str, str] = {}
            ends: dict[str, StepFinished | None] = {}
            for rec in store.read("ends"):
                event = rec.event
                if isinstance(event, StepStarted):
                    names[event.run], ends[event.run] = event.step, None
                elif isinstance(event, StepFinished):
                    ends[event.run] = event
            return [(names[run], end) for run, end in ends.items()]
        finally:
            store.close()


# -- case 6: a run whose command never started ----------------------------------------------


def test_journal_killed_in_the_before_snapshot_leaves_a_run_not_started(tmp_path: Path) -> None:
    """kill -9 of journal while the host's python takes the before-snapshot: nothing was
    launched, so the run is `not started` everywhere a status is shown (not `failed`, not
    `lost`, no finding), it is no failure of the plan, and the next `run step` runs it."""
    host = Host(tmp_path)
    assert host.journal("run", "step", "first").returncode == 0
    proc = host.start("run", "step", "install")
    _wait_for(host.mark, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    host.release()
    assert not host.ran.exists()  # the command never ran

    status = host.journal("status")
    out = text(status.stdout)
    assert "install  here: not started" in out and "1/2 steps done" in out
    assert status.returncode == 0, out  # not a failed step: nothing ran
    assert "lost" not in out + text(status.stderr)
    ((here,),) = [json.loads(host.journal("status", "--format", "json").stdout)["hosts"]]
    run = here["steps"][1]
    assert (run["step"], run["status"], here["done"]) == ("install", "not started", 1)
    logged = text(host.journal("log").stdout)
    assert "[----] install on here: not started" in logged
    assert "its recorder stopped before it launched the command" in logged
    assert "nothing of it ran on the host" in logged
    assert "install" not in text(host.journal("log", "--failed").stdout)
    shown = text(host.journal("show", run["run"]).stdout)
    assert "status:   not started (never launched: nothing of it ran on the host)" in shown
    found = json.loads(host.journal("pitfalls", "--all", "--format", "json").stdout)
    assert found["findings"] == []  # no step-interrupted: the host was not touched
    postmortem = text(host.journal("export", "postmortem", "--format", "md").stdout)
    assert "1 run not started, not failed" in postmortem and "install on here" in postmortem
    assert "did not succeed" not in postmortem
    client = create_app({"DB": str(host.db), "TESTING": True}).test_client()
    page = client.get("/j/ends").get_data(as_text=True)
    assert 'data-status="not started"' in page and "status-not-started" in page
    page = client.get(f"/j/ends/run/{run['run']}").get_data(as_text=True)
    assert 'data-status="not started"' in page

    again = host.journal("run", "step", "install")
    assert again.returncode == 0, text(again.stderr)
    assert host.ran.read_text() == "ran\n"  # run once, now
    ends = [(step, end.status if end else None) for step, end in host.ends()]
    assert ends == [("first", "succeeded"), ("install", "not started"), ("install", "succeeded")]
    assert "2/2 steps done" in text(host.journal("status").stdout)


def test_run_plan_resumes_at_the_step_not_started(tmp_path: Path) -> None:
    host = Host(tmp_path)
    proc = host.start("run", "plan")
    _wait_for(host.mark, proc)  # `first` is done; `install` is in its before-snapshot
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    host.release()
    assert "1/2 steps done" in text(host.journal("status").stdout)
    resumed = host.journal("run", "plan")
    assert resumed.returncode == 0, text(resumed.stderr)
    assert host.ran.read_text() == "ran\n"
    ends = [(step, end.status if end else None) for step, end in host.ends()]
    assert ends == [("first", "succeeded"), ("install", "not started"), ("install", "succeeded")]


def test_a_kill_after_the_launch_is_still_lost_not_not_started(tmp_path: Path) -> None:
    """The launch mark decides: once the command was handed to the host, a dead recorder
    leaves its fate unknown (`lost`), never `not started`."""
    go, began = tmp_path / "go", tmp_path / "began"
    rb = write_runbook(
        tmp_path,
        '[journal]\nname = "ends"\n\n[hosts.here]\nssh = "local"\n\n[[steps]]\n'
        f'name = "slow"\nsnapshots = false\nrun = "touch {began}; '
        f'while [ ! -e {go} ]; do sleep 0.05; done"\n',
    )
    db = tmp_path / "journal.db"
    proc = subprocess.Popen(
        [*JOURNAL, "--db", str(db), "--runbook", str(rb), "run", "step", "slow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    _wait_for(began, proc)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert "slow  here: lost" in text(journal("status", db=db, runbook=rb).stdout)
    go.touch()
    attached = journal("attach", "--all", db=db, runbook=rb)  # its end, and no spool left
    assert attached.returncode == 0, text(attached.stderr)
    assert "slow  here: succeeded" in text(journal("status", db=db, runbook=rb).stdout)


@pytest.mark.parametrize(
    ("sent", "code", "why"),
    [
        (signal.SIGINT, 130, "Ctrl-C"),
        (signal.SIGTERM, 143, "SIGTERM"),
        (signal.SIGHUP, 129, "SIGHUP"),
    ],
)
def test_a_signal_in_the_before_snapshot_launches_nothing(
    tmp_path: Path, sent: signal.Signals, code: int, why: str
) -> None:
    """Ctrl-C (or SIGTERM, SIGHUP) while the before-snapshot is taken: the command is not
    launched at all (not launched and stopped at once), the run is `not started` naming
    what stopped it, and journal exits as interrupted."""
    host = Host(tmp_path)
    proc = host.start("run", "step", "install")
    _wait_for(host.mark, proc)
    proc.send_signal(sent)
    _, err = proc.communicate(timeout=60)
    host.release()
    assert proc.returncode == code, text(err)
    assert no_traceback(subprocess.CompletedProcess([], code, b"", err))
    if sent != signal.SIGHUP:  # after SIGHUP journal prints nowhere: its terminal is gone
        assert "not started in" in text(err) and f"interrupted ({why}) before" in text(err)
    assert not host.ran.exists()
    ((step, end),) = host.ends()
    assert end is not None and (step, end.status, end.exit_code) == ("install", "not started", None)
    assert (
        end.reason
        == f"interrupted ({why}) before its command was launched: nothing of it ran on here"
    )
    assert "install  here: not started" in text(host.journal("status").stdout)
    # the snapshot journal stopped is no env that cannot be read: no snapshot-failed
    found = json.loads(host.journal("pitfalls", "--all", "--format", "json").stdout)
    assert [f["id"] for f in found["findings"]] == []
    assert host.journal("run", "step", "install").returncode == 0
    assert host.ran.read_text() == "ran\n"


# -- case 9: Ctrl-C while journal starts ----------------------------------------------------

#: A sitecustomize that holds the import of the module ``JOURNAL_TEST_HOLD`` names (after
#: touching ``JOURNAL_TEST_MARK``): a real moment of journal's start, made long enough to
#: send it a signal in.
HOLD_IMPORT = """\
import os, sys, time

class _Hold:
    def find_spec(self, name, path=None, target=None):
        if name == os.environ.get("JOURNAL_TEST_HOLD"):
            open(os.environ["JOURNAL_TEST_MARK"], "w").close()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                time.sleep(0.02)
        return None

sys.meta_path.insert(0, _Hold())
"""


@pytest.mark.parametrize(
    "module",
    [
        "journal.cli.running",  # journal's modules loading
        "journal.cli.parser",  # the command line being parsed
        "journal.store",  # the database opening (imported by the first command that needs it)
    ],
)
def test_ctrl_c_while_journal_starts_exits_130_and_records_nothing(
    tmp_path: Path, module: str
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HOLD_IMPORT)
    mark = tmp_path / "mark"
    rb = write_runbook(
        tmp_path,
        '[journal]\nname = "ends"\n\n[hosts.here]\nssh = "local"\n\n[[steps]]\n'
        f'name = "s"\nsnapshots = false\nrun = "touch {tmp_path / "ran"}"\n',
    )
    db = tmp_path / "journal.db"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
        "JOURNAL_TEST_HOLD": module,
        "JOURNAL_TEST_MARK": str(mark),
    }
    proc = subprocess.Popen(
        [*JOURNAL, "--db", str(db), "--runbook", str(rb), "run", "step", "s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    _wait_for(mark, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, text(err)
    assert text(err).strip().splitlines()[-1] == "journal: interrupted"
    assert "Traceback" not in text(err)
    assert not (tmp_path / "ran").exists()
    if db.exists():  # nothing of a run was recorded
        store = EventStore(str(db))
        try:
            assert not list(store.read("ends", types=[StepStarted.type]))
        finally:
            store.close()


# -- case 9: nohup ----------------------------------------------------------------------------


def _ignored(pid: int) -> int:
    """The mask of signals process ``pid`` ignores (/proc's SigIgn)."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("SigIgn:"):
                return int(line.split()[1], 16)
    raise AssertionError("no SigIgn in /proc")


def test_under_nohup_a_logout_does_not_stop_the_plan(tmp_path: Path) -> None:
    """`nohup journal run plan &`, then the session ends: the SIGHUP of the logout (to the
    whole process group) is ignored as nohup asked, and the plan goes on to its end."""
    began, go = tmp_path / "began", tmp_path / "go"
    rb = write_runbook(
        tmp_path,
        '[journal]\nname = "ends"\n\n[hosts.here]\nssh = "local"\n\n'
        f'[[steps]]\nname = "long"\nsnapshots = false\nrun = "touch {began}; '
        f'while [ ! -e {go} ]; do sleep 0.05; done; echo long"\n\n'
        '[[steps]]\nname = "after"\nsnapshots = false\nrun = "echo after"\n',
    )
    db = tmp_path / "journal.db"
    proc = subprocess.Popen(
        [*JOURNAL, "--db", str(db), "--runbook", str(rb), "run", "plan"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),  # what nohup does
    )
    _wait_for(began, proc)  # journal is well under way: its handlers are installed
    assert _ignored(proc.pid) & (1 << (signal.SIGHUP - 1)), "journal stopped ignoring SIGHUP"
    os.killpg(proc.pid, signal.SIGHUP)  # the logout
    go.touch()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, text(err)
    assert out == b"long\nafter\n"
    store = EventStore(str(db))
    try:
        ends = [r.event.status for r in store.read("ends", types=[StepFinished.type])]
    finally:
        store.close()
    assert ends == ["succeeded", "succeeded"]


# -- case 7: journal's own stop for a full disk -----------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A real 2 MiB tmpfs at ``tmp_path/disk`` (root only), unmounted after."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs these as root)")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"mount is not permitted here: {text(done.stderr).strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_full_disk_under_the_database_is_disk_full_not_a_kill(
    tmp_path: Path, small_disk: Path
) -> None:
    """The database fills up while a step prints: journal stops the command itself (SIGTERM)
    and exits 2. Once space is freed, `journal attach` records the rest from the spool and
    the end as `disk full`, with advice about the disk, never "killed by SIGTERM" nor the
    out-of-memory killer."""
    rb = write_runbook(
        tmp_path,
        '[journal]\nname = "ends"\n\n[hosts.here]\nssh = "local"\n\n[[steps]]\n'
        'name = "chatty"\nsnapshots = false\n'
        'run = "head -c 3000000 /dev/urandom | base64; echo printed; sleep 60; echo never"\n',
    )
    db = small_disk / "journal.db"
    home = tmp_path / "home"  # the host's spool (~/.journal/runs) is on a disk with room
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    full = journal("run", "step", "chatty", db=db, runbook=rb, env=env)
    assert full.returncode == 2 and no_traceback(full), text(full.stderr)
    assert f"{db}: the disk is full" in text(full.stderr)
    subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)  # freed
    attached = journal("attach", "--all", db=db, runbook=rb, env=env)
    said = text(attached.stderr)
    assert attached.returncode == 2, said  # a full disk, as for any: not 143
    assert "[FULL] chatty on here disk full, exit 143" in said
    store = EventStore(str(db))
    try:
        (end,) = [r.event for r in store.read("ends", types=[StepFinished.type])]
        output = b"".join(decode(r.event) for r in store.read("ends", types=["OutputChunk"]))
    finally:
        store.close()
    assert (end.status, end.exit_code, end.signal) == ("disk full", 143, "SIGTERM")
    assert end.reason is not None and end.reason.startswith(
        "journal stopped the command itself (SIGTERM): the disk under its database was full"
    )
    assert b"printed\n" in output and b"never" not in output  # all it printed, to the stop
    assert "chatty  here: disk full" in text(journal("status", db=db, runbook=rb).stdout)
    listed = text(journal("pitfalls", db=db, runbook=rb).stdout)
    assert "chatty was stopped by journal before it finished: the disk under journal's" in listed
    assert "free space on the filesystem of journal's database" in listed
    assert "out-of-memory" not in listed and "killed by SIGTERM" not in listed
