"""`journal log --follow` shows a running step's output as it is recorded."""

from __future__ import annotations

import selectors
import signal
import subprocess
import time
from pathlib import Path

from tests.helpers import JOURNAL, journal, text, write_runbook


def test_log_follow_prints_lines_of_a_step_running_in_another_process(tmp_path: Path) -> None:
    rb = write_runbook(
        tmp_path,
        '[journal]\nname = "follow"\n[hosts.here]\nssh = "local"\n'
        '[[steps]]\nname = "ticks"\n'
        "run = 'for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 0.3; done'\n",
    )
    db = tmp_path / "journal.db"
    assert journal("note", "before the run", db=db, runbook=rb).returncode == 0
    base = [*JOURNAL, "--db", str(db), "--runbook", str(rb)]
    follower = subprocess.Popen(
        [*base, "log", "--follow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    seen = b""
    selector = selectors.DefaultSelector()
    assert follower.stdout is not None
    selector.register(follower.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + 20
    # The step starts once the follower is following, so its start arrives as a live event.
    while b"-- following" not in seen and time.monotonic() < deadline:
        if selector.select(0.2):
            seen += follower.stdout.read1(65536)
    step = subprocess.Popen(
        [*base, "run", "step", "ticks"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    while b"tick 3\n" not in seen and time.monotonic() < deadline:
        if selector.select(0.2):
            seen += follower.stdout.read1(65536)
    step_still_running = step.poll() is None
    step.wait(timeout=30)
    follower.send_signal(signal.SIGINT)
    rest, err = follower.communicate(timeout=10)
    selector.close()
    seen += rest
    assert b"note: before the run" in seen
    assert b"==> ticks on here" in seen
    assert b"tick 1\ntick 2\ntick 3\n" in seen
    assert step_still_running, "tick 3 should show before the step's end (tick 8)"
    assert follower.returncode == 0, text(err)
