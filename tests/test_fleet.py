"""Fleets: [groups], --group, --parallel, --rolling and the live table, on five real sshds.

The `fleet` fixture's hosts gpu-1 … gpu-5 each probe a target venv made by real uv from the
demo's stand-in wheels; gpu-3's holds torch 2.12.0.dev20260226+cu130 where the others hold
2.10.0+cu128, so a step that expects ``*+cu128`` fails there, and a roll stops at it.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from journal.errors import BadInput
from journal.events import OutputChunk, ProbeRecorded, StepFinished, StepStarted
from journal.output import decode
from journal.runbook import parse
from journal.store import EventStore
from tests.helpers import JOURNAL, drain_pty, journal, no_traceback, text
from tests.sshd import Fleet

CHECK = """
[probes.torch-env]
import_torch = true

[[steps]]
name = "check-torch"
run = "echo checking; sleep 0.2; echo checked"
probes = ["torch-env"]
expect = { "torch.version" = "*+cu128" }
"""

SPAN = """
[[steps]]
name = "span"
run = "date +%s.%N; sleep 0.6; date +%s.%N"
snapshots = false
"""


def recorded(db: Path, kind: type) -> list:
    """The events of ``kind`` in the fleet journal, in order, with their store timestamps."""
    if not db.exists():
        return []
    store = EventStore(str(db))
    try:
        return [r for r in store.read("fleet-test") if isinstance(r.event, kind)]
    finally:
        store.close()


def started_hosts(db: Path) -> list[str]:
    return [r.event.host_name for r in recorded(db, StepStarted)]


def finished(db: Path) -> dict[str, StepFinished]:
    return {r.event.host_name: r.event for r in recorded(db, StepFinished)}


@pytest.fixture
def check_runbook(tmp_path: Path, fleet: Fleet) -> Path:
    return fleet.runbook(tmp_path, CHECK)


def check_torch(
    db: Path, runbook: Path, fleet: Fleet, *args: str
) -> subprocess.CompletedProcess[bytes]:
    """`journal run step check-torch ARGS` over the fleet."""
    return journal("run", "step", "check-torch", *args, db=db, runbook=runbook, env=fleet.env())


# --- rolling ------------------------------------------------------------------------------------


def test_rolling_one_at_a_time_stops_at_the_odd_host_and_never_touches_the_rest(
    tmp_path: Path, fleet: Fleet, check_runbook: Path
) -> None:
    db = tmp_path / "journal.db"
    result = check_torch(db, check_runbook, fleet, "--rolling", "1")
    said = text(result.stderr)
    assert result.returncode == 1, said  # the command succeeded, its expectation did not
    assert fleet.odd == "gpu-3"
    assert started_hosts(db) == ["gpu-1", "gpu-2", "gpu-3"]  # in order, and no further
    ends = finished(db)
    assert {h: e.status for h, e in ends.items()} == {
        "gpu-1": "succeeded",
        "gpu-2": "succeeded",
        "gpu-3": "failed",
    }
    assert "expectation failed" in ends["gpu-3"].reason and "cu130" in ends["gpu-3"].reason
    # one at a time: each host started after the one before it finished
    starts = {r.event.host_name: r.ts for r in recorded(db, StepStarted)}
    stops = {r.event.host_name: r.ts for r in recorded(db, StepFinished)}
    assert starts["gpu-2"] >= stops["gpu-1"] and starts["gpu-3"] >= stops["gpu-2"]
    assert "journal: [-] check-torch on gpu-4 not run: the roll stopped at gpu-3" in said
    assert "journal: [-] check-torch on gpu-5 not run: the roll stopped at gpu-3" in said
    assert re.search(
        r"check-torch on 5 hosts \(rolling, 1 at a time\): 2 succeeded, 1 failed, 2 not run "
        r"\(the roll stopped at gpu-3; not touched: gpu-4, gpu-5\); slowest gpu-\d [\d.]+s; "
        r"wall [\d.]+s",
        said,
    ), said
    assert no_traceback(result)


def test_rolling_two_at_a_time_finishes_the_batch_then_stops(
    tmp_path: Path, fleet: Fleet, check_runbook: Path
) -> None:
    db = tmp_path / "journal.db"
    result = check_torch(db, check_runbook, fleet, "--rolling", "2")
    said = text(result.stderr)
    assert result.returncode == 1, said
    assert sorted(started_hosts(db)) == ["gpu-1", "gpu-2", "gpu-3", "gpu-4"]
    ends = finished(db)
    assert [h for h, e in ends.items() if e.status != "succeeded"] == ["gpu-3"]
    starts = {r.event.host_name: r.ts for r in recorded(db, StepStarted)}
    stops = {r.event.host_name: r.ts for r in recorded(db, StepFinished)}
    # batch 2 began once batch 1 had ended on both hosts; its two hosts ran together
    assert min(starts["gpu-3"], starts["gpu-4"]) >= max(stops["gpu-1"], stops["gpu-2"])
    assert max(starts["gpu-3"], starts["gpu-4"]) < min(stops["gpu-3"], stops["gpu-4"])
    assert "gpu-5 not run" in said and "not touched: gpu-5" in said
    assert "3 succeeded, 1 failed, 1 not run" in said


def test_a_group_rolls_cleanly_when_every_host_is_as_expected(
    tmp_path: Path, fleet: Fleet, check_runbook: Path
) -> None:
    db = tmp_path / "journal.db"
    result = check_torch(
        db, check_runbook, fleet, "--group", "canary", "--host", "gpu-5", "--rolling", "2"
    )
    assert result.returncode == 0, text(result.stderr)
    assert started_hosts(db)[:2] in (["gpu-1", "gpu-2"], ["gpu-2", "gpu-1"])
    assert started_hosts(db)[2:] == ["gpu-5"]  # the group's hosts first, then --host
    assert "3 succeeded, 0 failed, 0 not run" in text(result.stderr)


def test_run_plan_rolls_the_whole_plan_out_batch_by_batch_and_resumes(
    tmp_path: Path, fleet: Fleet
) -> None:
    db = tmp_path / "journal.db"
    body = CHECK.replace('name = "check-torch"', 'name = "check-torch"\nhosts = ["gpu"]')
    rb = fleet.runbook(tmp_path, '[[steps]]\nname = "prepare"\nrun = "echo ready"\n' + body)
    result = journal("run", "plan", "--rolling", "1", db=db, runbook=rb, env=fleet.env())
    said = text(result.stderr)
    assert result.returncode == 1, said
    pairs = [(r.event.host_name, r.event.step) for r in recorded(db, StepStarted)]
    assert pairs == [
        ("gpu-1", "prepare"),
        ("gpu-1", "check-torch"),
        ("gpu-2", "prepare"),
        ("gpu-2", "check-torch"),
        ("gpu-3", "prepare"),
        ("gpu-3", "check-torch"),
    ]
    assert "the roll stopped at batch 3 (gpu-3); not touched: gpu-4, gpu-5" in said

    again = journal("run", "plan", "--rolling", "1", db=db, runbook=rb, env=fleet.env())
    said = text(again.stderr)
    assert again.returncode == 1, said
    assert "every step has already succeeded on gpu-1" in said
    assert "skip prepare: already succeeded on gpu-3" in said
    new = [(r.event.host_name, r.event.step) for r in recorded(db, StepStarted)][len(pairs) :]
    assert new == [("gpu-3", "check-torch")]  # resumed where gpu-3 stopped, nothing further


def test_a_rolling_probe_stops_at_the_host_that_fails_its_expectations(
    tmp_path: Path, fleet: Fleet
) -> None:
    db = tmp_path / "journal.db"
    rb = fleet.runbook(
        tmp_path,
        '[probes.torch-env]\nimport_torch = true\nexpect = { "torch.version" = "*+cu128" }\n',
    )
    result = journal(
        "run", "probe", "torch-env", "--rolling", "1", db=db, runbook=rb, env=fleet.env()
    )
    said = text(result.stderr)
    assert result.returncode == 1, said
    probed = [r.event.host_name for r in recorded(db, ProbeRecorded)]
    assert probed == ["gpu-1", "gpu-2", "gpu-3"]
    assert "probe torch-env on 5 hosts (rolling, 1 at a time): 2 succeeded, 1 failed" in said
    assert "not touched: gpu-4, gpu-5" in said


# --- groups and --parallel --------------------------------------------------------------------


def test_group_selects_its_hosts_and_a_step_may_name_a_group(tmp_path: Path, fleet: Fleet) -> None:
    db = tmp_path / "journal.db"
    rb = fleet.runbook(
        tmp_path,
        '[[steps]]\nname = "hello"\nrun = "echo hello from $(hostname)"\nsnapshots = false\n'
        'hosts = ["rest"]\n',
    )
    result = journal(
        "run", "step", "hello", "--group", "canary", db=db, runbook=rb, env=fleet.env()
    )
    assert result.returncode == 0, text(result.stderr)
    assert sorted(started_hosts(db)) == ["gpu-1", "gpu-2"]
    assert re.search(rb"^\[gpu-1\] hello from", result.stdout, re.M)  # no terminal: prefixes
    assert "journal: [ok] hello on gpu-2 succeeded" in text(result.stderr)

    result = journal("run", "step", "hello", db=db, runbook=rb, env=fleet.env())
    assert result.returncode == 0, text(result.stderr)
    assert sorted(started_hosts(db)[2:]) == ["gpu-3", "gpu-4", "gpu-5"]  # the step's group


def test_parallel_two_never_has_more_than_two_hosts_at_work(tmp_path: Path, fleet: Fleet) -> None:
    db = tmp_path / "journal.db"
    rb = fleet.runbook(tmp_path, SPAN)
    result = journal("run", "step", "span", "--parallel", "2", db=db, runbook=rb, env=fleet.env())
    assert result.returncode == 0, text(result.stderr)
    spans = []
    for rec in recorded(db, StepStarted):
        stamps = [
            float(x)
            for r in recorded(db, OutputChunk)
            if r.event.run == rec.event.run
            for x in decode(r.event).split()
        ]
        spans.append((stamps[0], stamps[-1]))
    assert len(spans) == 5
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    at_once, most = 0, 0
    for _, change in edges:
        at_once += change
        most = max(most, at_once)
    assert most == 2, spans  # two at a time, never three
    assert "at most 2 at once" in text(result.stderr)


# --- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--group", "canry"], "no group named 'canry' (did you mean 'canary'?)"),
        (["--group", "gpu-1"], "'gpu-1' is a host, not a group: use --host gpu-1"),
        (["--host", "canary"], "'canary' is a group of hosts, not a host: use --group canary"),
        (["--group", "gpu", "--all-hosts"], "cannot be combined with --group"),
        (["--rolling", "0"], "--rolling 0: give the number of hosts"),
        (["--parallel", "-1"], "--parallel -1: give the number of hosts"),
        (["--rolling", "1", "--parallel", "2"], "cannot be combined"),
        (["--rolling", "two"], "invalid int value"),
    ],
)
def test_bad_fleet_options_exit_2_and_record_nothing(
    tmp_path: Path, fleet: Fleet, check_runbook: Path, args: list[str], said: str
) -> None:
    db = tmp_path / "journal.db"
    for command in (["run", "step", "check-torch"], ["run", "plan"], ["run", "probe", "packages"]):
        result = journal(*command, *args, db=db, runbook=check_runbook, env=fleet.env())
        assert result.returncode == 2, (command, text(result.stderr))
        assert said in text(result.stderr) and no_traceback(result)
        assert len(text(result.stderr).strip().splitlines()) == 1  # one paragraph
        assert recorded(db, StepStarted) == []


HOSTS = '[journal]\nname = "g"\n[hosts.a]\nssh = "local"\n[hosts.b]\nssh = "local"\n'


@pytest.mark.parametrize(
    ("groups", "said"),
    [
        (
            'gpu = ["a", "bb"]',
            "rb.toml, line 8, groups.gpu: no host named 'bb' (did you mean 'b'?)",
        ),
        ("gpu = []", "groups.gpu: the group is empty"),
        ('a = ["b"]', "groups.a: 'a' is also a host's name"),
        ('gpu = ["a", "b", "a"]', "groups.gpu: 'a' listed more than once"),
        ('gpu = ["a"]\nall = ["gpu", "b"]', "no host named 'gpu' (a group lists hosts, not other"),
        ('gpu = "a"', "groups.gpu: expected a list of strings, got a string"),
    ],
)
def test_bad_groups_in_the_runbook_name_file_line_and_key(groups: str, said: str) -> None:
    with pytest.raises(BadInput) as raised:
        parse(f"{HOSTS}[groups]\n{groups}\n", Path("rb.toml"))
    assert said in str(raised.value)


def test_a_step_and_a_benchmark_may_name_groups_expanded_in_place() -> None:
    text_ = (
        f'{HOSTS}[hosts.c]\nssh = "local"\n[groups]\npair = ["b", "a"]\n'
        '[benchmarks.x]\nrun = "echo x=1"\nparser = "regex"\npattern = "x=(?P<x>\\\\d)"\n'
        'hosts = ["pair"]\n'
        '[[steps]]\nname = "s"\nrun = "true"\nhosts = ["c", "pair", "a"]\n'
    )
    book = parse(text_, Path("rb.toml"))
    assert book.groups == {"pair": ["b", "a"]}
    assert book.steps[0].hosts == ["c", "b", "a"]
    assert book.benchmarks["x"].hosts == ["b", "a"]
    with pytest.raises(BadInput, match="no host or group named 'pear' \\(did you mean 'pair'"):
        parse(text_.replace('hosts = ["c", "pair"', 'hosts = ["c", "pear"'), Path("rb.toml"))


# --- the live table in a real terminal ----------------------------------------------------------


def in_terminal(argv: list[str], env: dict[str, str], timeout: float = 90) -> str:
    """What a 120-column terminal shows while ``argv`` runs in it to the end."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env={**env, "TERM": "xterm-256color"}
    )
    os.close(slave)
    return drain_pty(master, proc, timeout).decode("utf-8", "replace")


def test_a_terminal_gets_a_live_table_of_the_hosts_and_a_summary(
    tmp_path: Path, fleet: Fleet, check_runbook: Path
) -> None:
    db = tmp_path / "journal.db"
    argv = [*JOURNAL, "--db", str(db), "--runbook", str(check_runbook)]
    shown = in_terminal([*argv, "run", "step", "check-torch", "--rolling", "2"], fleet.env())
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown).replace("\r", "")
    assert "check-torch on 5 hosts (rolling, 2 at a time)" in plain  # the table's title
    rows = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^\s*(gpu-\d)\s+(ok|FAILED|not run|running|waiting)\b", plain, re.M)
    }
    assert rows == {
        "gpu-1": "ok",
        "gpu-2": "ok",
        "gpu-3": "FAILED",
        "gpu-4": "ok",
        "gpu-5": "not run",
    }, plain  # the last drawing of each row
    assert re.search(r"gpu-1\s+ok\s+[\d.]+s\s+0\s+checked", plain), plain  # last output line
    assert re.search(r"gpu-3\s+FAILED\s+[\d.]+s\s+0\s+expectation failed", plain), plain
    assert "[gpu-1] checking" not in plain  # the table replaced the prefixed echo…
    outputs: dict[str, bytes] = {}
    for rec in recorded(db, OutputChunk):
        outputs[rec.event.run] = outputs.get(rec.event.run, b"") + decode(rec.event)
    assert list(outputs.values()) == [b"checking\nchecked\n"] * 4  # …and still recorded
    assert "3 succeeded, 1 failed, 1 not run (the roll stopped at gpu-3" in plain
    assert "journal: [FAIL] check-torch on gpu-3" in plain  # the failed host's verdict line
    assert "journal: [ok] check-torch on gpu-1" not in plain  # the table showed those
    assert "Traceback" not in plain


def test_ctrl_c_stops_the_hosts_at_work_and_starts_no_more(tmp_path: Path, fleet: Fleet) -> None:
    db = tmp_path / "journal.db"
    rb = fleet.runbook(
        tmp_path, '[[steps]]\nname = "hang"\nrun = "echo started; sleep 300"\nsnapshots = false\n'
    )
    argv = [*JOURNAL, "--db", str(db), "--runbook", str(rb), "run", "step", "hang"]
    proc = subprocess.Popen(
        [*argv, "--parallel", "2"],
        env=fleet.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while len(recorded(db, OutputChunk)) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, "the hosts never started"
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    said = text(err)
    assert proc.returncode == 130, said
    assert {h: e.status for h, e in finished(db).items()} == {
        "gpu-1": "interrupted",
        "gpu-2": "interrupted",
    }
    assert sorted(started_hosts(db)) == ["gpu-1", "gpu-2"]  # no host started after Ctrl-C
    assert "interrupted before it started" in said
    assert "(interrupted; not started: gpu-3, gpu-4, gpu-5)" in said
