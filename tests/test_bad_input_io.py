"""Bad input from outside the runbook: a `--db` that is not a journal, a full disk, a huge
script, a bad `Last-Event-ID`, a token in the access log. Each a clear message (exit 2 where
journal exits), no traceback, and nothing recorded before lost or changed."""

from __future__ import annotations

import http.client
import logging
import os
import pwd
import re
import secrets
import shlex
import socket
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest

from journal.events import StepStarted
from journal.output import decode
from journal.store import EventStore
from journal.web import create_app
from tests import sshd as sshd_module
from tests.helpers import JOURNAL, journal, no_traceback, text, write_runbook
from tests.sshd import SshHome, SshServer

HEAD = '[journal]\nname = "io"\n\n[hosts.here]\nssh = "local"\n\n'


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _foreign(path: Path, kind: str) -> None:
    """Another program's SQLite database: plain, with Alembic of its own, or in WAL mode."""
    conn = sqlite3.connect(path)
    if kind == "wal":
        conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES ('ana')")
    if kind == "alembic":
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
        conn.execute("INSERT INTO alembic_version VALUES ('3f2a9c1b7d')")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("kind", ["plain", "alembic", "wal"])
def test_another_programs_sqlite_database_is_refused_and_left_as_it_was(
    tmp_path: Path, kind: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    db = data / "app.db"
    _foreign(db, kind)
    before = _files(data)
    rb = write_runbook(tmp_path, HEAD)
    for args in (["note", "hello"], ["status"], ["init", str(tmp_path / "new")]):
        done = journal(*args, db=db, runbook=rb)
        assert done.returncode == 2 and no_traceback(done), text(done.stderr)
        err = text(done.stderr)
        assert f"{db} is an SQLite database of something else (tables: " in err, err
        assert "users" in err and "not a journal" in err and "give a new path" in err
        assert _files(data) == before  # byte for byte, and no -wal or -shm left beside it
    assert not (tmp_path / "new" / "runbook.toml").exists()  # init left no runbook behind


def test_a_file_that_is_no_sqlite_database_is_refused_by_name(tmp_path: Path) -> None:
    rb = write_runbook(tmp_path, HEAD)
    junk = tmp_path / "junk.db"
    junk.write_bytes(os.urandom(3000))
    for path in (junk, rb):  # random bytes; the runbook given as --db by mistake
        before = path.read_bytes()
        done = journal("note", "hello", db=path, runbook=rb)
        assert done.returncode == 2 and no_traceback(done), text(done.stderr)
        assert f"{path} is not an SQLite database" in text(done.stderr)
        assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.db", "runbook.toml"]


def test_an_empty_file_or_a_new_path_becomes_a_journal(tmp_path: Path) -> None:
    rb = write_runbook(tmp_path, HEAD)
    empty = tmp_path / "empty.db"
    empty.touch()
    for db in (empty, tmp_path / "new.db"):
        for note in ("one", "two"):  # created, then opened again as the journal it is
            done = journal("note", note, db=db, runbook=rb)
            assert done.returncode == 0, text(done.stderr)
        with sqlite3.connect(db) as conn:
            count = conn.execute("SELECT count(*) FROM events WHERE type = 'NoteAdded'")
            assert count.fetchone()[0] == 2


def _namespace() -> list[str]:
    """The `unshare` that gives a mount namespace of one's own, where a tmpfs of a given size
    is a real full disk (as root, or as the root of a user namespace); the test is skipped
    where the kernel lends neither."""
    ns = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "-r", "--mount"]
    try:
        probe = subprocess.run(
            [*ns, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
            capture_output=True,
            timeout=30,
        )
    except FileNotFoundError:
        pytest.skip("no unshare here")
    if probe.returncode != 0:
        pytest.skip(f"no mount namespace here: {text(probe.stderr).strip()}")
    return ns


def _on_small_disk(tmp_path: Path, mount: Path, size: str, lines: list[str]) -> Path:
    """Run the shell ``lines`` with a tmpfs of ``size`` mounted on ``mount`` (seen by them
    alone), HOME at ``tmp_path/home``; each line's exit status and stderr land in
    ``tmp_path/out/N.rc`` and ``N.err``. The folder of those files."""
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "home").mkdir(exist_ok=True)
    mount.mkdir(exist_ok=True)
    script = [
        "set -u",
        f"mount -t tmpfs -o size={size} tmpfs {shlex.quote(str(mount))} || exit 99",
        f"export HOME={shlex.quote(str(tmp_path / 'home'))}",
    ]
    for i, line in enumerate(lines):
        script.append(f"{line} > {out}/{i}.out 2> {out}/{i}.err; echo $? > {out}/{i}.rc")
    done = subprocess.run([*_namespace(), "sh", "-c", "\n".join(script)], timeout=300)
    assert done.returncode == 0
    return out


def _said(out: Path, i: int) -> tuple[int, str]:
    return int((out / f"{i}.rc").read_text()), (out / f"{i}.err").read_text()


def test_a_full_disk_under_the_database_is_a_clear_error_and_loses_nothing(
    tmp_path: Path,
) -> None:
    rb = write_runbook(
        tmp_path, HEAD + '[[steps]]\nname = "big"\nrun = "yes 0123456789abcdef | head -c 3000000"\n'
    )
    disk = tmp_path / "disk"
    db = disk / "journal.db"
    j = shlex.join([*JOURNAL, "--db", str(db), "--runbook", str(rb)])
    copy = f"cp {disk}/journal.db* {tmp_path}/"
    out = _on_small_disk(
        tmp_path,
        disk,
        "1m",  # the note fits; 3 MB of output does not
        [
            f"{j} note before",
            f"{j} run step big",
            f"mkdir {tmp_path}/after && cp {disk}/journal.db* {tmp_path}/after/",
            f"mount -o remount,size=16m tmpfs {disk}",  # space freed
            f"{j} attach --all",
            copy,
        ],
    )
    assert _said(out, 0)[0] == 0
    code, err = _said(out, 1)
    assert code == 2, err  # not 255, "host unreachable"
    assert "Traceback" not in err
    assert f"journal: {db}: the disk is full" in err and "what was recorded before is kept" in err
    assert "`journal attach " in err
    # what was recorded before the disk filled is there, its chain whole
    after = tmp_path / "after" / "journal.db"
    assert journal("verify", db=after).returncode == 0
    store = EventStore(str(after))
    try:
        assert [r.event.text for r in store.read("io", types=["NoteAdded"])] == ["before"]
    finally:
        store.close()
    # once space is freed, attach records the rest from the spool: all of it, byte for byte
    assert _said(out, 4)[0] == 0, _said(out, 4)[1]
    store = EventStore(str(tmp_path / "journal.db"))
    try:
        chunks = store.read("io", types=["OutputChunk"])
        assert (
            b"".join(decode(r.event) for r in chunks)
            == (b"0123456789abcdef\n" * 200_000)[:3_000_000]
        )
        (finished,) = [r.event for r in store.read("io", types=["StepFinished"])]
        assert (finished.status, finished.exit_code) == ("succeeded", 0)
    finally:
        store.close()


#: Steps for a host whose disk (under ~/.journal/runs) is 256 KiB: ``big`` prints more than
#: fits; the probe ``fill`` (run straight on its channel, no spool) fills the disk; ``echo``
#: then has no room for its spool at all.
FULL_HOST = """
[[steps]]
name = "big"
run = "yes 0123456789abcdef | head -c 1000000; echo end"

[[steps]]
name = "echo"
run = "echo hi"

[probes.fill]
run = "head -c 10000000 /dev/zero > $HOME/fill; echo {}"
json = true
"""
BIG = (b"0123456789abcdef\n" * 62_500)[:1_000_000] + b"end\n"


def _full_host_record(db: Path, journal_name: str) -> dict[str, tuple[bytes, object]]:
    """Each step's recorded output and StepFinished."""
    store = EventStore(str(db))
    try:
        found: dict[str, tuple[bytes, object]] = {}
        names = {}
        for rec in store.read(journal_name):
            event = rec.event
            if event.type == "StepStarted":
                names[event.run] = event.step
                found[event.step] = (b"", None)
            elif event.type == "OutputChunk":
                step = names[event.run]
                found[step] = (found[step][0] + decode(event), None)
            elif event.type == "StepFinished":
                step = names[event.run]
                found[step] = (found[step][0], event)
        return found
    finally:
        store.close()


def _check_full_host(said: list[tuple[int, str]], record: dict, target: str) -> None:
    (big_code, big_err), (fill_code, fill_err), (echo_code, echo_err) = said
    assert all("Traceback" not in err for _, err in said), said
    # the output that did not fit: the step failed, saying so, exit 2 (not 255)
    assert big_code == 2, big_err
    assert f"the disk of {target} was full when the command ended" in big_err
    out, finished = record["big"]
    assert 0 < len(out) < len(BIG) and BIG.startswith(out)  # cut short, and said to be
    assert finished.status == "failed" and "may be cut short" in finished.reason
    assert fill_code == 0, fill_err
    # no room for the spool at all: not run, said so, exit 2, and its end recorded
    assert echo_code == 2, echo_err
    assert f"the disk of {target} is full: the run's spool" in echo_err
    assert "No space left on device" in echo_err and "unreachable" not in echo_err
    out, finished = record["echo"]
    assert out == b"" and finished.status == "failed" and finished.exit_code is None
    assert "could not be written" in finished.reason


def test_a_full_disk_on_the_host_is_said_and_not_taken_for_an_unreachable_host(
    tmp_path: Path,
) -> None:
    rb = write_runbook(tmp_path, HEAD + FULL_HOST)
    db = tmp_path / "journal.db"
    j = shlex.join([*JOURNAL, "--db", str(db), "--runbook", str(rb)])
    home = tmp_path / "home"
    out = _on_small_disk(
        tmp_path,
        home,
        "256k",
        [
            f"{j} run step big",
            f"{j} run probe fill",
            f"{j} run step echo",
            f"ls -A {home}/.journal/runs",
        ],
    )
    _check_full_host([_said(out, i) for i in range(3)], _full_host_record(db, "io"), "local")
    assert (out / "3.out").read_text() == ""  # no spool left behind by the run not started


def test_a_full_disk_on_an_ssh_host_is_said_and_not_taken_for_an_unreachable_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real sshd whose sessions see a 256 KiB disk as the user's home (a tmpfs mounted in
    a mount namespace of its own)."""
    home = pwd.getpwuid(os.getuid()).pw_dir
    if os.geteuid() != 0 or home == "/" or tempfile.gettempdir().startswith(home + "/"):
        pytest.skip("needs root, and a home apart from the temporary folder")
    ns = _namespace()
    wrapper = tmp_path / "sshd-on-a-small-disk"
    mount = f'mount -t tmpfs -o size=256k tmpfs "$0" && exec {sshd_module.SSHD} "$@"'
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.join(ns)} sh -c {shlex.quote(mount)} {home} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setattr(sshd_module, "SSHD", str(wrapper))
    with SshServer("127.0.0.1") as server:
        client = SshHome([server])
        try:
            rb = write_runbook(
                tmp_path,
                f'[journal]\nname = "io"\n\n[hosts.far]\nssh = "{server.alias}"\n' + FULL_HOST,
            )
            db = tmp_path / "journal.db"
            said = []
            for args in (["run", "step", "big"], ["run", "probe", "fill"], ["run", "step", "echo"]):
                done = journal(*args, db=db, runbook=rb, env=client.env())
                said.append((done.returncode, text(done.stderr)))
        finally:
            client.cleanup()
    target = f"{client.user}@{server.address}:{server.port}"
    _check_full_host(said, _full_host_record(db, "io"), target)


def _long_script(lines: int) -> str:
    """A script of ``lines`` lines of 63 bytes, then one that says it was reached."""
    return "".join(f": {'a' * 50} {i:09d}\n" for i in range(lines)) + "echo tail-reached\n"


@pytest.mark.parametrize("where", ["local", "ssh"])
def test_a_step_whose_script_is_longer_than_arg_max_runs_whole(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    """A 3.5 MB `run`, over ARG_MAX (2 MB) and the 128 KiB of one argument: the supervisor
    takes the script on its standard input, so it runs, whole, locally and over real SSH."""
    script = _long_script(60_000)
    assert len(script) > 3_500_000
    env = None
    host = 'ssh = "local"'
    if where == "ssh":
        server = request.getfixturevalue("sshd")
        env = request.getfixturevalue("ssh_home").env()
        host = f'ssh = "{server.alias}"'
    rb = write_runbook(
        tmp_path,
        f'[journal]\nname = "io"\n\n[hosts.h]\n{host}\n\n'
        f'[[steps]]\nname = "long"\nrun = """{script}"""\n',
    )
    db = tmp_path / "journal.db"
    done = journal("run", "step", "long", db=db, runbook=rb, env=env)
    assert done.returncode == 0 and no_traceback(done), text(done.stderr)
    assert done.stdout == b"tail-reached\n"
    store = EventStore(str(db))
    try:
        (started,) = [r.event for r in store.read("io", types=[StepStarted.type])]
        assert started.command == script  # recorded whole
    finally:
        store.close()


@pytest.mark.parametrize(
    "last_id",
    ["9" * 10_000, "99999999999999999999999", "9223372036854775808", "-5", "junk", "²", ""],
)
def test_a_last_event_id_that_is_no_sequence_number_is_ignored(
    tmp_path: Path, last_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    """What a reconnecting browser needs is the stream going on: a bad ``Last-Event-ID`` (or
    ``?after``) is ignored, the stream starting where the page's ``?after`` says (here the
    start), never a 500 nor a traceback in the log (a 400 would end the EventSource)."""
    rb = write_runbook(
        tmp_path,
        HEAD + '[[steps]]\nname = "s"\nrun = "echo $((40 + 2))-first; echo $((40 + 3))-second"\n'
        "snapshots = false\n",
    )
    db = tmp_path / "journal.db"
    assert journal("run", "step", "s", db=db, runbook=rb).returncode == 0
    store = EventStore(str(db))
    try:
        (run,) = [r.event.run for r in store.read("io", types=[StepStarted.type])]
    finally:
        store.close()
    app = create_app({"DB": str(db), "TESTING": False, "LIVE_TIMELINE_S": 0.2})
    client = app.test_client()
    caplog.set_level(logging.ERROR)
    for url in (f"/j/io/run/{run}/live", f"/j/io/run/{run}/live?after={last_id}"):
        response = client.get(url, headers={"Last-Event-ID": last_id})
        body = response.get_data(as_text=True)
        assert response.status_code == 200, body[:500]
        assert "event: lines" in body and "42-first" in body and "43-second" in body  # all
        assert "event: done" in body
    response = client.get("/j/io/live", headers={"Last-Event-ID": last_id})
    assert response.status_code == 200 and "event: items" in response.get_data(as_text=True)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    # a good id still resumes after what was sent: no line twice
    newest = re.search(r"^id: (\d+)$", body, re.M)
    assert newest is not None
    again = client.get(f"/j/io/run/{run}/live", headers={"Last-Event-ID": newest.group(1)})
    assert "event: done" in (resumed := again.get_data(as_text=True)) and "42-first" not in resumed


def test_the_token_never_shows_in_the_access_log(tmp_path: Path) -> None:
    """A real `journal serve --token T`: requests carrying the token in their query (right or
    wrong) or in their path are all logged, none with the token in it; a request line too bad
    to parse is refused by the server before the app sees it, and not logged at all."""
    db = tmp_path / "journal.db"
    assert journal("note", "hello", db=db, runbook=write_runbook(tmp_path, HEAD)).returncode == 0
    token = secrets.token_urlsafe(24)
    env = {k: v for k, v in os.environ.items() if k not in ("JOURNAL_DB", "JOURNAL_TOKEN")}
    log = tmp_path / "serve.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            # --token=T: a random token may begin with "-", which `--token T` takes for a flag
            [*JOURNAL, "--db", str(db), "serve", "--port", "0", f"--token={token}"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
        )
        try:
            assert proc.stdout is not None
            first = proc.stdout.readline().decode()  # journal: serving DB at URL?token=T
            port = int(re.search(r"http://127\.0\.0\.1:(\d+)/", first).group(1))  # type: ignore[union-attr]
            statuses = []
            for path in (f"/?token={token}", "/j/io?host=x&token=a-wrong-guess", f"/{token}"):
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                conn.request("GET", path)
                statuses.append(conn.getresponse().status)
                conn.close()
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
                raw.sendall(f"GET /?token={token} is not HTTP\r\n\r\n".encode())
                answer = b""
                while chunk := raw.recv(65536):
                    answer += chunk
                assert answer.startswith(b"HTTP/1.0 400 Bad Request")  # refused
        finally:
            proc.terminate()
            proc.wait(timeout=20)
            if proc.stdout is not None:
                proc.stdout.close()
    assert statuses == [303, 401, 401]  # the right token lets in (and goes to a cookie)
    logged = log.read_text()
    assert token not in logged, logged
    assert "Traceback" not in logged
    assert '"GET /?token=[REDACTED] HTTP/1.1" 303 -' in logged
    assert '"GET /j/io?host=x&token=[REDACTED] HTTP/1.1" 401 -' in logged
    assert "a-wrong-guess" not in logged  # a wrong token is none of the log's business either
    assert '"GET /[REDACTED] HTTP/1.1" 401 -' in logged, logged  # the token as a path
    assert "is not HTTP" not in logged
