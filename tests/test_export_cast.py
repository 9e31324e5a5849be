"""`journal export cast`: a step's recorded output as asciicast v2, checked line by line."""

from __future__ import annotations

import json
from pathlib import Path

from journal.events import StepStarted
from journal.store import EventStore
from tests.helpers import journal, no_traceback, text, write_runbook


def test_a_step_exports_as_asciicast_v2(tmp_path: Path) -> None:
    rb = write_runbook(
        tmp_path,
        '[journal]\nname = "cast"\n[hosts.here]\nssh = "local"\n'
        '[[steps]]\nname = "ticks"\n'
        'run = \'printf "\\\\033[32mgreen\\\\033[0m\\\\n"; sleep 0.5; echo later; '
        'echo oops >&2; printf "\\\\377\\\\n"\'\n',
    )
    db = tmp_path / "journal.db"
    assert journal("run", "step", "ticks", db=db, runbook=rb).returncode == 0
    store = EventStore(str(db))
    try:
        started = [r for r in store.read("cast") if isinstance(r.event, StepStarted)][0]
    finally:
        store.close()
    out = tmp_path / "ticks.cast"
    result = journal("export", "cast", started.event.run[:12], "-o", str(out), db=db, runbook=rb)
    assert result.returncode == 0, text(result.stderr)
    lines = out.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["version"] == 2
    assert isinstance(header["width"], int) and isinstance(header["height"], int)
    assert isinstance(header["timestamp"], int) and header["timestamp"] > 1_700_000_000
    assert header["title"] == "ticks on here" and header["command"].startswith("printf")
    events = [json.loads(line) for line in lines[1:]]
    assert len(events) >= 2
    times = [e[0] for e in events]
    assert all(isinstance(t, float | int) for t in times) and times == sorted(times)
    assert all(e[1] == "o" and isinstance(e[2], str) for e in events)
    assert times[-1] - times[0] >= 0.4  # the pause is kept
    played = "".join(e[2] for e in events)
    assert played.startswith("\x1b[32mgreen\x1b[0m\r\n")
    assert "later\r\n" in played and "oops\r\n" in played and "\ufffd\r\n" in played
    assert "\n" not in played.replace("\r\n", "")


def test_an_unknown_run_is_refused_with_the_known_ones(tmp_path: Path) -> None:
    rb = write_runbook(
        tmp_path,
        '[journal]\nname = "cast"\n[hosts.here]\nssh = "local"\n'
        "[[steps]]\nname = \"one\"\nrun = 'echo 1'\n",
    )
    db = tmp_path / "journal.db"
    assert journal("run", "step", "one", db=db, runbook=rb).returncode == 0
    result = journal("export", "cast", "nope", "-o", str(tmp_path / "x.cast"), db=db, runbook=rb)
    assert result.returncode == 2 and b"no step run 'nope'" in result.stderr
    assert no_traceback(result) and not (tmp_path / "x.cast").exists()
