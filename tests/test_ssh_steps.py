"""Steps run over a real sshd on loopback: streams, exact bytes, live chunks, fleets, failures."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from journal.events import HostKeyAccepted, OutputChunk, StepFinished, StepStarted
from journal.output import decode
from journal.store import EventStore
from tests.helpers import JOURNAL, journal, no_traceback, text, write_runbook
from tests.sshd import SshHome, SshServer


def runbook_for(folder: Path, servers: list[SshServer], steps: str, **host_opts: str) -> Path:
    hosts = "".join(
        f'[hosts.h{i}]\nssh = "{s.alias}"\n' + "".join(f"{k} = {v}\n" for k, v in host_opts.items())
        for i, s in enumerate(servers, 1)
    )
    return write_runbook(folder, f'[journal]\nname = "ssh-test"\n\n{hosts}\n{steps}')


def step(name: str, run: str, extra: str = "") -> str:
    return f"[[steps]]\nname = \"{name}\"\nrun = '''{run}'''\n{extra}\n"


def events(db: Path, kind: type | None = None) -> list:
    store = EventStore(str(db))
    try:
        found = [r for r in store.read("ssh-test")]
    finally:
        store.close()
    return [r for r in found if kind is None or isinstance(r.event, kind)]


def output(db: Path, stream: str | None = None) -> bytes:
    return b"".join(
        decode(r.event) for r in events(db, OutputChunk) if stream in (None, r.event.stream)
    )


@pytest.fixture
def one_host(tmp_path: Path, sshd: SshServer, ssh_home: SshHome):
    """(runbook writer, db, env) for a journal whose only host is the 127.0.0.1 sshd."""
    db = tmp_path / "journal.db"

    def write(steps: str, **opts: str) -> Path:
        return runbook_for(tmp_path, [sshd], steps, **opts)

    return write, db, ssh_home.env()


def test_streams_are_kept_apart_and_the_exit_status_is_the_steps(one_host, sshd: SshServer) -> None:
    write, db, env = one_host
    rb = write(step("mixed", "echo to-out; echo to-err >&2; echo more-out; exit 3"))
    result = journal("run", "step", "mixed", db=db, runbook=rb, env=env)
    assert result.returncode == 3, text(result.stderr)
    assert b"to-out\nmore-out\n" in result.stdout  # echoed live to the terminal
    assert b"to-err" in result.stderr
    assert output(db, "stdout") == b"to-out\nmore-out\n"
    assert output(db, "stderr") == b"to-err\n"
    finished = events(db, StepFinished)[-1].event
    assert (finished.status, finished.exit_code) == ("failed", 3)
    started = events(db, StepStarted)[-1].event
    assert started.target.endswith(f"@{sshd.address}:{sshd.port}")  # resolved via ~/.ssh/config


def test_non_utf8_bytes_and_a_5_mb_line_come_back_byte_exact(one_host, tmp_path: Path) -> None:
    write, db, env = one_host
    payload = tmp_path / "payload.bin"
    blob = bytes(range(256)) * 64 + b"\xff\xfe\xc3(\xe2\x82\n" + b"y" * 5_000_000 + b"\xc3\xa9\n"
    payload.write_bytes(blob)
    rb = write(step("cat", f"cat {payload}; cat {payload} >&2"))
    result = journal("run", "step", "cat", db=db, runbook=rb, env=env)
    assert result.returncode == 0, text(result.stderr)
    assert output(db, "stdout") == blob
    assert output(db, "stderr") == blob
    assert result.stdout == blob  # the live echo is exact too


def test_output_is_recorded_while_the_step_runs_not_at_the_end(one_host) -> None:
    write, db, env = one_host
    rb = write(step("slow", "for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.4; done"))
    proc = subprocess.Popen(
        [*JOURNAL, "--db", str(db), "--runbook", str(rb), "run", "step", "slow"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    seen_while_running = 0
    while proc.poll() is None:
        if db.exists():
            try:
                seen_while_running = max(seen_while_running, len(events(db, OutputChunk)))
            except Exception:  # noqa: BLE001 - the schema may not exist yet
                pass
        time.sleep(0.1)
    _, err = proc.communicate()
    assert proc.returncode == 0, text(err)
    assert seen_while_running >= 2  # chunks were in the database before the step ended
    chunks = [r.event for r in events(db, OutputChunk)]
    assert len(chunks) >= 4
    # stamped when printed, not all at the end: in order, and the later chunks after the first
    stamps = [c.t for c in chunks]
    assert stamps == sorted(stamps) and stamps[-1] > stamps[0]
    assert output(db) == b"".join(f"tick {i}\n".encode() for i in range(1, 7))


def test_a_fleet_runs_in_parallel_and_fails_if_any_host_fails(
    tmp_path: Path, sshd_fleet: list[SshServer], ssh_home: SshHome
) -> None:
    db = tmp_path / "journal.db"
    run = (
        "date +%s.%N; sleep 1; date +%s.%N; "
        'case "$SSH_CONNECTION" in *" 127.0.0.2 "*) echo failing here >&2; exit 4;; esac'
    )
    rb = runbook_for(tmp_path, sshd_fleet, step("fleet", run))
    result = journal("run", "step", "fleet", "--all-hosts", db=db, runbook=rb, env=ssh_home.env())
    assert result.returncode == 4, text(result.stderr)
    # live output is prefixed per host
    assert re.search(rb"^\[h1\] \d+\.\d+$", result.stdout, re.M)
    assert b"[h2] failing here" in result.stderr
    finished = {r.event.host_name: r.event for r in events(db, StepFinished)}
    assert {h: f.status for h, f in finished.items()} == {
        "h1": "succeeded",
        "h2": "failed",
        "h3": "succeeded",
    }
    runs = {r.event.run: r.event.host_name for r in events(db, StepStarted)}
    assert len(set(runs)) == 3  # one step run per host
    spans = []
    for run_id in runs:
        stamps = [
            float(x)
            for r in events(db, OutputChunk)
            if r.event.run == run_id and r.event.stream == "stdout"
            for x in decode(r.event).split()
        ]
        spans.append((stamps[0], stamps[1]))
    # every host started before any host finished: they overlapped
    assert max(s for s, _ in spans) < min(e for _, e in spans)


def test_kill_9_of_journal_leaves_a_readable_journal_with_a_lost_step(one_host) -> None:
    write, db, env = one_host
    rb = write(
        step("long", "for i in $(seq 1 400); do echo line $i $(date +%s.%N); sleep 0.02; done")
    )
    proc = subprocess.Popen(
        [*JOURNAL, "--db", str(db), "--runbook", str(rb), "run", "step", "long"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # killed once its output is being recorded (however slowly a loaded machine starts it)
    seen = 0
    deadline = time.monotonic() + 60
    while seen < 20:
        assert proc.poll() is None and time.monotonic() < deadline, "no output recorded"
        time.sleep(0.1)
        if db.exists():
            try:
                seen = output(db).count(b"\n")
            except Exception:  # noqa: BLE001 - the schema may not exist yet
                seen = 0
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert journal("verify", db=db, runbook=rb, env=env).returncode == 0
    status = journal("status", db=db, runbook=rb, env=env)
    # its recorder is gone: lost, and an open step-interrupted error makes status exit 1
    assert status.returncode == 1 and b"long" in status.stdout
    assert b"h1: lost" in status.stdout, text(status.stdout)
    lines = output(db).decode().splitlines()
    numbers = [int(line.split()[1]) for line in lines]
    assert numbers == list(range(1, len(numbers) + 1))  # nothing lost in between
    assert len(numbers) >= seen  # nothing already recorded was lost by the kill


def _started_proc(db: Path, rb: Path, env: dict[str, str], name: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*JOURNAL, "--db", str(db), "--runbook", str(rb), "run", "step", name],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def _wait_for(path: Path, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split()[2] != "Z"


@pytest.mark.parametrize(
    ("sent", "code", "why"),
    [
        (signal.SIGINT, 130, "Ctrl-C"),
        (signal.SIGTERM, 143, "SIGTERM"),
        (signal.SIGHUP, 129, "SIGHUP"),  # the operator's own SSH session dropped
    ],
)
def test_ctrl_c_stops_the_remote_command_and_records_an_interrupted_step(
    one_host, tmp_path: Path, sent: signal.Signals, code: int, why: str
) -> None:
    """Ctrl-C, SIGTERM and SIGHUP on journal stop the command on the host (its whole process
    group) instead of leaving it running unrecorded, and the record names what stopped it."""
    write, db, env = one_host
    marker = tmp_path / "remote.pid"
    rb = write(step("hang", f"echo started; sh -c 'echo $$ > {marker}; exec sleep 300'"))
    proc = _started_proc(db, rb, env, "hang")
    _wait_for(marker)
    remote_pid = int(marker.read_text())
    proc.send_signal(sent)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == code, text(err)
    deadline = time.monotonic() + 10
    while _alive(remote_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(remote_pid), "the remote sleep survived Ctrl-C"
    finished = events(db, StepFinished)[-1].event
    assert finished.status == "interrupted"
    assert finished.reason == f"interrupted ({why}): the command was stopped"
    assert b"h1: interrupted" in journal("status", db=db, runbook=rb, env=env).stdout


def _cut_connections(server: SshServer) -> None:
    """Kill the per-connection sshd processes of ``server`` (never the listener itself): the
    SSH connections through it drop, as when a network goes away."""
    assert server.process is not None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == server.process.pid:
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


#: A command that prints on both streams, waits for a file, prints again and exits 7.
WAITING = (
    "echo $$ > {marker}; for i in $(seq 1 20); do echo out $i; echo err $i >&2; done; "
    "while [ ! -e {go} ]; do sleep 0.05; done; "
    "for i in $(seq 21 40); do echo out $i; echo err $i >&2; done; exit 7"
)
EXPECTED_OUT = b"".join(b"out %d\n" % i for i in range(1, 41))
EXPECTED_ERR = b"".join(b"err %d\n" % i for i in range(1, 41))


def _recorded(db: Path, lines: int) -> None:
    deadline = time.monotonic() + 30
    while output(db, "stdout").count(b"\n") < lines if db.exists() else True:
        assert time.monotonic() < deadline, "the first lines were never recorded"
        time.sleep(0.05)


def test_a_cut_connection_is_opened_again_and_the_rest_recorded(
    one_host, sshd: SshServer, tmp_path: Path
) -> None:
    """The command runs under its supervisor on the host, so a dropped connection does not
    stop it: journal connects again and records the rest from where its record stood."""
    write, db, env = one_host
    marker, go = tmp_path / "remote.pid", tmp_path / "go"
    rb = write(step("cut", WAITING.format(marker=marker, go=go)))
    proc = _started_proc(db, rb, env, "cut")
    _wait_for(marker)
    _recorded(db, 20)
    _cut_connections(sshd)
    go.write_text("")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 7, text(err)
    assert output(db, "stdout") == EXPECTED_OUT
    assert output(db, "stderr") == EXPECTED_ERR
    finished = events(db, StepFinished)[-1].event
    assert (finished.status, finished.exit_code) == ("failed", 7)


@pytest.mark.parametrize("cut", [False, True], ids=["killed", "killed-and-cut"])
def test_kill_9_of_journal_then_attach_records_the_rest_and_the_true_exit_status(
    one_host, sshd: SshServer, tmp_path: Path, cut: bool
) -> None:
    write, db, env = one_host
    marker, go = tmp_path / "remote.pid", tmp_path / "go"
    rb = write(step("long", WAITING.format(marker=marker, go=go)))
    proc = _started_proc(db, rb, env, "long")
    _wait_for(marker)
    _recorded(db, 5)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    if cut:
        _cut_connections(sshd)  # the SSH session dies with it
    status = journal("status", db=db, runbook=rb, env=env)
    assert b"long  h1: lost" in status.stdout, text(status.stdout)
    assert b"`journal attach --all` records how they ended" in status.stderr
    go.write_text("")  # the command goes on without its recorder, and ends
    attached = journal("attach", "--all", db=db, runbook=rb, env=env)
    assert attached.returncode == 7, text(attached.stderr)
    assert output(db, "stdout") == EXPECTED_OUT  # byte for byte: nothing twice, no gap
    assert output(db, "stderr") == EXPECTED_ERR
    finished = events(db, StepFinished)[-1].event
    assert (finished.status, finished.exit_code) == ("failed", 7)
    assert b"long  h1: failed" in journal("status", db=db, runbook=rb, env=env).stdout
    # the spool is gone once recorded; there is nothing left to attach to
    again = journal("attach", "--all", db=db, runbook=rb, env=env)
    assert again.returncode == 0 and b"no lost runs" in again.stderr
    assert not list((Path.home() / ".journal" / "runs").glob(f"{finished.run}*"))


def test_an_unknown_host_key_is_refused_unless_accepted_and_then_recorded(
    one_host, sshd: SshServer, ssh_home: SshHome
) -> None:
    write, db, env = one_host
    rb = write(step("hello", "echo hello"))
    ssh_home.forget_host_key(sshd)
    refused = journal("run", "step", "hello", db=db, runbook=rb, env=env)
    assert refused.returncode == 255
    assert b"not in" in refused.stderr and b"known_hosts" in refused.stderr
    assert no_traceback(refused)
    assert events(db, HostKeyAccepted) == []
    assert b"hello" not in output(db)

    accepted = journal("run", "step", "hello", "--accept-new-host-key", db=db, runbook=rb, env=env)
    assert accepted.returncode == 0, text(accepted.stderr)
    recorded = events(db, HostKeyAccepted)
    assert len(recorded) == 1
    fingerprint = recorded[0].event.fingerprint
    assert fingerprint.startswith("SHA256:")
    assert f"[{sshd.address}]:{sshd.port}" in ssh_home.known_hosts.read_text()
    assert fingerprint.encode() in journal("log", db=db, runbook=rb, env=env).stdout

    # Known now: no flag needed, nothing more recorded.
    again = journal("run", "step", "hello", db=db, runbook=rb, env=env)
    assert again.returncode == 0 and len(events(db, HostKeyAccepted)) == 1


def test_a_changed_host_key_is_refused_even_when_new_keys_are_accepted(
    one_host, sshd: SshServer, ssh_home: SshHome, tmp_path: Path
) -> None:
    write, db, env = one_host
    rb = write(step("hello", "echo hello"), accept_new_host_key="true")
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    forged = other.with_suffix(".pub").read_text().split()[:2]
    ssh_home.known_hosts.write_text(f"[{sshd.address}]:{sshd.port} {forged[0]} {forged[1]}\n")
    result = journal("run", "step", "hello", db=db, runbook=rb, env=env)
    assert result.returncode == 255
    assert b"CHANGED" in result.stderr and no_traceback(result)
    assert events(db, HostKeyAccepted) == []
