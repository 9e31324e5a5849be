"""`journal shell` driven through a real pseudo-terminal, locally and over the real sshd: each
command typed is a step run of kind interactive with its exact command, output, exit status
and order; installs get snapshots and are judged before the next prompt."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from journal.demo.run import find_uv
from journal.events import (
    NoteAdded,
    OutputChunk,
    PackagesSnapshotted,
    StepFinished,
    StepStarted,
)
from journal.output import decode
from journal.service.shell_commands import changes_packages, named_python, outcome_of, where_of
from journal.service.shell_hooks import bash_rc
from journal.service.shell_marks import OSC, Mark, Marks
from journal.store import EventStore
from journal.web import create_app
from tests.helpers import JOURNAL, journal, text
from tests.sshd import SshHome, SshServer

PROMPT = b"PROMPT> "
UV = find_uv()
#: Generous: a slow CI machine, never a measure of anything.
WAIT_S = 60


class Pty:
    """`journal shell` in a pseudo-terminal of its own, as a person's terminal runs it."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # pragma: no cover - the child
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
                os.chdir(cwd)
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        self.seen = b""  # everything the terminal got
        self.pending = b""

    def expect(self, wanted: bytes, wait: float = WAIT_S) -> bytes:
        """What the terminal got up to and with ``wanted``."""
        end = time.monotonic() + wait
        while wanted not in self.pending:
            left = end - time.monotonic()
            assert left > 0, f"no {wanted!r} in {self.pending[-2000:]!r}"
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.5))
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                assert data, f"the terminal closed before {wanted!r}: {self.pending[-2000:]!r}"
                self.pending += data
                self.seen += data
        at = self.pending.index(wanted) + len(wanted)
        got, self.pending = self.pending[:at], self.pending[at:]
        return got

    def type(self, line: str) -> bytes:
        """Type a command line and Enter; what it printed up to the next prompt."""
        os.write(self.fd, line.encode() + b"\r")
        return self.expect(PROMPT)

    def resize(self, rows: int, cols: int) -> None:
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def finish(self) -> int:
        """journal's exit status, once it ended (its last words read)."""
        end = time.monotonic() + WAIT_S
        while time.monotonic() < end:
            ready, _, _ = select.select([self.fd], [], [], 0.5)
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    break
                self.seen += data
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (OSError, ChildProcessError):
            pass


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo of this module's own (its env is changed here): torch is the cu130 build."""
    folder = tmp_path_factory.mktemp("shell-demo") / "demo"
    made = journal("demo", str(folder))
    assert made.returncode == 0, text(made.stderr)
    return folder


def runbook(folder: Path, demo: Path, ssh: str) -> Path:
    env = {
        "UV_CACHE_DIR": str(demo / "uv-cache"),
        "UV_NO_CONFIG": "1",
        "UV_PYTHON_DOWNLOADS": "never",
        "PS1": PROMPT.decode(),
        "NO_COLOR": "1",
    }
    shown = ", ".join(f'{k} = "{v}"' for k, v in env.items())
    path = folder / "runbook.toml"
    path.write_text(
        f'[journal]\nname = "shell"\n\n[hosts.box]\nssh = "{ssh}"\n'
        f'python = "{demo / "ml-env/bin/python3"}"\nenv = {{ {shown} }}\n\n'
        "[probes.torch-env]\nimport_torch = true\n"
    )
    return path


def records(db: Path) -> list:
    store = EventStore(str(db))
    try:
        return list(store.read("shell"))
    finally:
        store.close()


def runs(db: Path) -> list[dict]:
    """Each step run: its start, end, output (bytes), snapshots by phase."""
    found: dict[str, dict] = {}
    for rec in records(db):
        event = rec.event
        if isinstance(event, StepStarted):
            found[event.run] = {"start": event, "out": b"", "snap": {}}
        elif isinstance(event, OutputChunk):
            found[event.run]["out"] += decode(event)
        elif isinstance(event, StepFinished):
            found[event.run]["end"] = event
        elif isinstance(event, PackagesSnapshotted) and event.run in found:
            found[event.run]["snap"][event.phase] = event.packages
    return list(found.values())


def started(db: Path, command: str) -> None:
    """Wait until ``command`` is recorded as started (its start mark came)."""
    end = time.monotonic() + WAIT_S
    while not any(
        isinstance(r.event, StepStarted) and r.event.command == command for r in records(db)
    ):
        assert time.monotonic() < end, f"{command!r} never started"
        time.sleep(0.05)


def running(argv: list[str]) -> None:
    """Wait until a process of exactly ``argv`` runs (the shell has handed the terminal to
    it): a keystroke such as Ctrl-Z sent before then reaches the shell, not the command."""
    wanted = ("\0".join(argv) + "\0").encode()
    end = time.monotonic() + WAIT_S
    while True:
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and (proc / "cmdline").read_bytes() == wanted:
                    return
            except OSError:
                continue
        assert time.monotonic() < end, f"{argv!r} never ran"
        time.sleep(0.05)


def start(tmp_path: Path, rb: Path, env: dict[str, str], *more: str) -> Pty:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {**env, "TERM": "xterm", "NO_COLOR": "1"}
    env.setdefault("HOME", str(home))
    db = tmp_path / "journal.db"
    argv = [*JOURNAL, "--db", str(db), "--runbook", str(rb), "shell", *more]
    return Pty(argv, env, tmp_path)


@pytest.fixture(params=["local", "ssh"])
def session(request: pytest.FixtureRequest, tmp_path: Path, demo: Path):
    """(runbook, env) of a journal whose host `box` is this machine, or the loopback sshd."""
    if request.param == "local":
        return runbook(tmp_path, demo, "local"), dict(os.environ)
    server: SshServer = request.getfixturevalue("sshd")
    home: SshHome = request.getfixturevalue("ssh_home")
    return runbook(tmp_path, demo, server.alias), home.env()


@pytest.fixture
def cu130_after(demo: Path) -> Iterator[Path]:
    """The demo env's python, its cu130 torch put back after the test that changes it, passed
    or failed, for the next test of this module."""
    py = demo / "ml-env/bin/python3"
    yield py
    subprocess.run(
        [UV, "pip", "install", "-q", "--python", str(py), "torch", "--reinstall"]
        + ["--index-url", f"file://{demo}/indexes/cu130/simple"],
        env={**os.environ, "UV_CACHE_DIR": str(demo / "uv-cache"), "UV_NO_CONFIG": "1"},
        check=True,
        capture_output=True,
    )


def test_a_session_is_recorded_command_by_command(
    tmp_path: Path, demo: Path, session, cu130_after: Path
) -> None:
    rb, env = session
    py = cu130_after
    index = f"file://{demo}/indexes/cu128/simple"
    install = f"{UV} pip install --python {py} torch --index-url {index}"
    doc = tmp_path / "notes.txt"
    doc.write_text("".join(f"line {i}\n" for i in range(200)))
    shell = start(tmp_path, rb, env, "--probe", "torch-env", "--note", "by hand")
    try:
        shell.expect(PROMPT)
        assert b"\rhi\r\n" in shell.type("echo hi")
        shell.type("sh -c 'exit 3'")
        said = shell.type(install)  # torch is cu130 here: a no-op, judged before the prompt
        assert b"Checked 1 package" in said
        verdict = said[said.index(b"Checked 1 package") :]
        assert b"\r\njournal: noop-install \xe2\x80\x94 " in verdict
        assert verdict.endswith(PROMPT) and b"\r\njournal: noop-install" in verdict
        said = shell.type(install + " --reinstall")
        assert b"journal: packages on box: torch 2.12.0.dev20260226+cu130 -> 2.10.0+cu128" in said
        os.write(shell.fd, b"sleep 30\r")
        shell.expect(b"sleep 30\r\n")
        started(tmp_path / "journal.db", "sleep 30")  # as fast as no person types
        os.write(shell.fd, b"\x03")  # Ctrl-C, as a byte to the shell's terminal
        said = shell.expect(PROMPT)
        assert b"journal: step-interrupted \xe2\x80\x94 sleep was interrupted (Ctrl-C)" in said
        assert b"type it again" in said  # not a `journal run step` of a step there is not
        shell.resize(33, 101)
        # the new size reaches the session's terminal when journal has read its SIGWINCH
        # (over SSH: when sshd has the window change); a person types after that, a test
        # may not, so it asks until the size is there (readline may redraw its prompt first)
        deadline = time.monotonic() + WAIT_S
        while True:
            os.write(shell.fd, b"stty size\r")
            shell.expect(b"stty size\r\n")  # the line as typed, then what stty printed
            size = shell.expect(b"\r\n")
            shell.expect(PROMPT)
            if size.endswith(b"\r33 101\r\n") or size == b"33 101\r\n":
                break
            assert time.monotonic() < deadline, f"the session's terminal stayed {size!r}"
        os.write(shell.fd, f"less {doc}\r".encode())
        shell.expect(b"line 10")
        os.write(shell.fd, b"q")
        shell.expect(PROMPT)
        os.write(shell.fd, b"exit\r")
        assert shell.finish() == 0
    finally:
        shell.kill()
    assert OSC not in shell.seen  # the marks never reach the terminal
    assert b"by hand" not in shell.seen
    done = runs(tmp_path / "journal.db")
    recorded = len(done)  # every command typed, each `stty size` of the loop above too
    # a `stty size` typed before the new size arrived is recorded too (with the old size, or
    # the new one where readline's redraw hid it from the loop above): the last one stands
    sizes = [i for i, r in enumerate(done) if r["start"].command == "stty size"]
    assert sizes and b"33 101" in done[sizes[-1]]["out"]
    done = [r for i, r in enumerate(done) if i not in sizes[:-1]]
    assert [r["start"].command for r in done] == [
        "echo hi",
        "sh -c 'exit 3'",
        install,
        install + " --reinstall",
        "sleep 30",
        "stty size",
        f"less {doc}",
    ]  # `exit` ends the session: it is no step run
    assert all(r["start"].interactive for r in done)
    assert [(r["end"].status, r["end"].exit_code) for r in done] == [
        ("succeeded", 0),
        ("failed", 3),
        ("succeeded", 0),
        ("succeeded", 0),
        ("interrupted", 130),
        ("succeeded", 0),
        ("succeeded", 0),
    ]
    assert done[0]["out"] == b"hi\r\n"
    assert done[0]["start"].step == "echo-hi"
    local = "local" in rb.read_text()
    assert done[0]["start"].cwd == (str(tmp_path) if local else os.path.expanduser("~"))
    assert done[5]["out"] == b"33 101\r\n"
    assert b"line 10" in done[6]["out"]  # the full-screen program's screen stays with it
    noop, reinstall = done[2], done[3]
    assert noop["snap"]["before"] == noop["snap"]["after"]
    assert reinstall["snap"]["before"]["torch"]["version"] == "2.12.0.dev20260226+cu130"
    assert reinstall["snap"]["after"]["torch"]["version"] == "2.10.0+cu128"
    notes = [r.event for r in records(tmp_path / "journal.db") if isinstance(r.event, NoteAdded)]
    assert [n.text for n in notes] == ["by hand"]
    store = EventStore(str(tmp_path / "journal.db"))
    try:
        from journal.service.findings import run_findings

        found = {f.id for f in run_findings(store, "shell", [noop["start"].run])}
    finally:
        store.close()
    assert "noop-install" in found
    shown = journal(
        "show", noop["start"].run, "--format", "json", db=tmp_path / "journal.db", runbook=rb
    )
    assert shown.returncode == 0, text(shown.stderr)
    assert json.loads(shown.stdout)["interactive"] is True
    logged = text(journal("log", db=tmp_path / "journal.db", runbook=rb).stdout)
    assert re.search(r"\] echo-hi on \S+ in journal shell: succeeded", logged), logged
    client = create_app({"DB": str(tmp_path / "journal.db"), "TESTING": True}).test_client()
    html = client.get("/j/shell").get_data(as_text=True)
    assert html.count('<span class="tag interactive"') == recorded
    only = client.get("/j/shell?kind=interactive").get_data(as_text=True)
    assert only.count('<span class="tag interactive"') == recorded
    assert '<option value="interactive" selected>' in only
    assert "by hand" in html and "by hand" not in only  # the note is no interactive run
    page = client.get(f"/j/shell/run/{noop['start'].run}").get_data(as_text=True)
    assert 'class="tag interactive"' in page and "noop-install" in page


def test_a_note_typed_inside_the_session_goes_to_the_same_journal(
    tmp_path: Path, demo: Path, session
) -> None:
    rb, env = session
    shell = start(tmp_path, rb, env)
    try:
        shell.expect(PROMPT)
        shell.type("journal note 'swapped to cu130' --tag lesson")
        os.write(shell.fd, b"\x04")  # Ctrl-D at the prompt: the shell ends
        assert shell.finish() == 0
    finally:
        shell.kill()
    notes = [r.event for r in records(tmp_path / "journal.db") if isinstance(r.event, NoteAdded)]
    assert [(n.text, n.tags) for n in notes] == [("swapped to cu130", ["lesson"])]
    done = runs(tmp_path / "journal.db")  # Ctrl-D ran no command
    assert [r["start"].command for r in done] == ["journal note 'swapped to cu130' --tag lesson"]


def test_a_shell_killed_mid_command_leaves_it_interrupted(tmp_path: Path, demo: Path) -> None:
    rb = runbook(tmp_path, demo, "local")
    shell = start(tmp_path, rb, dict(os.environ))
    try:
        shell.expect(PROMPT)
        os.write(shell.fd, b"echo $$ > shell.pid; sleep 30\r")
        shell.expect(b"sleep 30\r\n")
        # live in the web UI like a step: running, tagged interactive
        # (the terminal echoes the line before the shell's mark of it reaches the recorder)
        client = create_app({"DB": str(tmp_path / "journal.db"), "TESTING": True}).test_client()
        end = time.monotonic() + WAIT_S
        html = client.get("/j/shell").get_data(as_text=True)
        while 'data-status="running"' not in html and time.monotonic() < end:
            time.sleep(0.05)
            html = client.get("/j/shell").get_data(as_text=True)
        assert 'data-status="running"' in html and 'class="tag interactive"' in html
        pid_file = tmp_path / "shell.pid"
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < end
            time.sleep(0.05)
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        shell.finish()
    finally:
        shell.kill()
    (only,) = runs(tmp_path / "journal.db")
    assert only["start"].command == "echo $$ > shell.pid; sleep 30"
    assert only["end"].status == "interrupted"
    assert only["end"].exit_code is None


def test_marks_are_taken_out_however_the_stream_is_cut() -> None:
    nonce = "0123456789abcdef0123456789abcdef"
    head = b"\x1b]7733;" + nonce.encode() + b";"
    stream = b"a" + head + b"C;ZWNobyBoaQ==;Lw==;0\x07hi\r\n" + head + b"P;0;Lw==\x07$ \x1b[0m"
    for size in (1, 2, 3, 7, len(stream)):
        marks = Marks(nonce)
        pieces: list = []
        for at in range(0, len(stream), size):
            pieces += marks.feed(stream[at : at + size])
        passed = b"".join(p for p in pieces if isinstance(p, bytes))
        assert passed == b"ahi\r\n$ \x1b[0m"
        found = [p for p in pieces if isinstance(p, Mark)]
        assert [(m.kind, m.text(0)) for m in found] == [("C", "echo hi"), ("P", "")]
        assert found[0].text(1) == "/" and found[1].fields[0] == "0"
    assert Marks(nonce).feed(b"\x1b]0;title\x07") == [b"\x1b]0;title\x07"]  # others pass
    marks = Marks(nonce)
    assert marks.feed(b"vi\x1b") == [b"vi"] and marks.idle() == b"\x1b"
    assert marks.feed(b"\x1b]77") == [] and marks.idle() == b"\x1b]77"
    assert marks.feed(head + b"P;0") == [] and marks.idle() == b""  # a mark under way


def test_which_commands_change_packages_and_with_which_python() -> None:
    assert changes_packages("uv pip install torch")
    assert changes_packages("sudo pip3 install -U numpy")
    assert changes_packages("python3 -m pip uninstall -y numpy")
    assert changes_packages("/env/bin/python -m pip install x")
    assert changes_packages("uv pip uninstall torch")
    assert changes_packages("conda remove numpy")
    assert not changes_packages("pip list")
    assert not changes_packages("uv --version")
    assert named_python("uv pip install --python /e/bin/python x") == "/e/bin/python"
    assert named_python("/e/bin/python3 -m pip install x") == "/e/bin/python3"
    assert named_python("/e/bin/pip install x") == "/e/bin/python"
    assert named_python("pip install x") is None
    venv = where_of("/v\n\n/v/bin/python3\n/v/bin/python\n/v/bin/pip\nalias pip3='x'")
    assert venv == {
        "VIRTUAL_ENV": "/v",
        "python3": "/v/bin/python3",
        "python": "/v/bin/python",
        "pip": "/v/bin/pip",
    }
    assert named_python("pip install x", venv) == "/v/bin/python"
    assert named_python("python -m pip install x", venv) == "/v/bin/python"
    assert named_python("uv pip install x", venv) == "/v/bin/python"
    assert named_python("uv pip install -p /e/py x", venv) == "/e/py"
    assert named_python("pip3 install x", venv) is None  # an alias: the host's
    assert outcome_of(0) == ("succeeded", None, None)
    assert outcome_of(2)[0] == "failed"
    assert outcome_of(130)[:2] == ("interrupted", "SIGINT")
    assert "export A='x y'" in bash_rc({"A": "x y"}, remote=False, nonce="0123456789abcdef")


SECRET = "hf_" + "q7Wx2Lp9Zr4Tb6Yk1Nm8Vc3Hd5Jg0Fs"


def test_secrets_and_unechoed_input_are_not_recorded_and_ctrl_z_stops(
    tmp_path: Path, demo: Path
) -> None:
    rb = runbook(tmp_path, demo, "local")
    rb.write_text(rb.read_text().replace("env = { ", f'env = {{ HF_TOKEN = "{SECRET}", '))
    shell = start(tmp_path, rb, dict(os.environ))
    try:
        shell.expect(PROMPT)
        # the terminal shows what the command printed; the record has the secret masked
        assert f"value: {SECRET}".encode() in shell.type('echo "value: $HF_TOKEN"')
        os.write(shell.fd, b'read -r -s -p "$(printf \'P%s: \' w)" pw; echo "got ${#pw}"\r')
        shell.expect(b"Pw: ")
        os.write(shell.fd, b"hunter2-typed\r")  # not echoed: never seen, never recorded
        assert b"got 13" in shell.expect(PROMPT)
        os.write(shell.fd, b"for i in 1 2; do\r")  # a command over lines: one run
        shell.expect(b"> ")
        os.write(shell.fd, b"echo n$i\r")
        shell.expect(b"> ")
        assert b"n1\r\nn2\r\n" in shell.type("done")
        os.write(shell.fd, b"sleep 30\r")
        started(tmp_path / "journal.db", "sleep 30")
        running(["sleep", "30"])
        os.write(shell.fd, b"\x1a")  # Ctrl-Z: a job of the shell now
        shell.expect(PROMPT)
        shell.type("kill -9 %1")
        os.write(shell.fd, b"exit\r")
        shell.finish()
    finally:
        shell.kill()
    assert b"hunter2-typed" not in shell.seen
    done = runs(tmp_path / "journal.db")
    assert [r["start"].command for r in done][:4] == [
        'echo "value: $HF_TOKEN"',
        'read -r -s -p "$(printf \'P%s: \' w)" pw; echo "got ${#pw}"',
        "for i in 1 2; do echo n$i; done",
        "sleep 30",
    ]
    assert SECRET.encode() not in done[0]["out"] and b"value: " in done[0]["out"]
    assert done[1]["out"] == b"Pw: got 13\r\n"
    assert done[2]["out"] == b"n1\r\nn2\r\n"
    stopped = done[3]["end"]
    assert (stopped.status, stopped.exit_code, stopped.signal) == ("interrupted", 148, "SIGTSTP")
    everything = b"".join(str(r.event).encode() for r in records(tmp_path / "journal.db"))
    assert SECRET.encode() not in everything and b"hunter2" not in everything


def test_a_dropped_connection_ends_the_session_with_the_command_cut_off(
    tmp_path: Path, demo: Path, sshd: SshServer, ssh_home: SshHome
) -> None:
    rb = runbook(tmp_path, demo, sshd.alias)
    shell = start(tmp_path, rb, ssh_home.env())
    try:
        shell.expect(PROMPT)
        os.write(shell.fd, b"sleep 30\r")
        started(tmp_path / "journal.db", "sleep 30")
        main = int(sshd.pid_file.read_text())
        found = subprocess.run(["pgrep", "-P", str(main)], capture_output=True, text=True)
        for pid in found.stdout.split():  # the sshd processes of the connections: gone
            os.kill(int(pid), signal.SIGKILL)
        assert shell.finish() == 255
    finally:
        shell.kill()
    assert b"was lost" in shell.seen
    (only,) = runs(tmp_path / "journal.db")
    assert (only["end"].status, only["end"].exit_code) == ("failed", None)
    assert "connection" in only["end"].reason and "lost" in only["end"].reason


def test_a_zsh_session_is_recorded_through_its_own_hooks(tmp_path: Path, demo: Path) -> None:
    rb = runbook(tmp_path, demo, "local")
    home = tmp_path / "home"
    home.mkdir()
    (home / ".zshrc").write_text("setopt NO_PROMPT_SP\nexport FROM_ZSHRC=yes\n")
    env = {**os.environ, "SHELL": shutil.which("zsh"), "HOME": str(home)}
    env.pop("ZDOTDIR", None)
    index = f"file://{demo}/indexes/cu130/simple"
    install = f"{UV} pip install --python {demo / 'ml-env/bin/python3'} torch --index-url {index}"
    shell = start(tmp_path, rb, env)
    try:
        shell.expect(PROMPT)
        assert b"hi yes\r\n" in shell.type("echo hi $FROM_ZSHRC")
        shell.type("sh -c 'exit 3'")
        assert b"Checked 1 package" in shell.type(install)  # the hook waits for journal
        os.write(shell.fd, b"sleep 30\r")
        started(tmp_path / "journal.db", "sleep 30")
        os.write(shell.fd, b"\x03")
        shell.expect(PROMPT)
        os.write(shell.fd, b"exit 0\r")
        assert shell.finish() == 0
    finally:
        shell.kill()
    assert OSC not in shell.seen
    done = runs(tmp_path / "journal.db")
    assert [(r["start"].command, r["end"].status, r["end"].exit_code) for r in done] == [
        ("echo hi $FROM_ZSHRC", "succeeded", 0),
        ("sh -c 'exit 3'", "failed", 3),
        (install, "succeeded", 0),
        ("sleep 30", "interrupted", 130),
    ]  # `exit 0` ends the session: no step run
    assert done[0]["out"] == b"hi yes\r\n"
    assert set(done[2]["snap"]) == {"before", "after"}
    assert not list(Path(tempfile.gettempdir()).glob("journal-shell-*/.zshrc"))


def test_bad_input_records_nothing(tmp_path: Path, demo: Path) -> None:
    rb = runbook(tmp_path, demo, "local")
    db = tmp_path / "journal.db"
    for args, said in (
        (["--host", "nowhere"], "no host named 'nowhere'"),
        (["--probe", "nothing"], "no probe named 'nothing'"),
        (["--note", " "], "the note is empty"),
        ([], "needs a terminal"),  # standard input is no terminal here
    ):
        result = journal("shell", *args, db=db, runbook=rb)
        assert result.returncode == 2 and said in text(result.stderr), text(result.stderr)
    assert not db.exists() or not records(db)


def test_journal_stopped_by_sighup_records_the_running_command_and_ends_the_shell(
    tmp_path: Path, demo: Path, session
) -> None:
    rb, env = session
    shell = start(tmp_path, rb, env)
    pid_file = tmp_path / "shell.pid"
    line = f"echo $$ > {pid_file}; sleep 30"
    try:
        shell.expect(PROMPT)
        os.write(shell.fd, line.encode() + b"\r")
        started(tmp_path / "journal.db", line)
        os.kill(shell.pid, signal.SIGHUP)  # journal's own terminal went away
        assert shell.finish() == 128 + signal.SIGHUP
    finally:
        shell.kill()
    (only,) = runs(tmp_path / "journal.db")
    assert (only["end"].status, only["end"].reason) == (
        "interrupted",
        "interrupted (SIGHUP): journal stopped",
    )
    pid = int(pid_file.read_text())
    end = time.monotonic() + WAIT_S
    while Path(f"/proc/{pid}").exists():  # the shell went with it
        assert time.monotonic() < end, "the shell outlived journal's session"
        time.sleep(0.05)


def test_an_install_in_an_activated_venv_is_snapshotted_there(tmp_path: Path, demo: Path) -> None:
    rb = runbook(tmp_path, demo, "local")
    # the host's python is another one: the session's venv is the one meant
    target = f'python = "{demo / "ml-env/bin/python3"}"'
    rb.write_text(rb.read_text().replace(target, 'python = "python3"'))
    index = f"file://{demo}/indexes/cu130/simple"
    shell = start(tmp_path, rb, dict(os.environ))
    try:
        shell.expect(PROMPT)
        shell.type(f". {demo / 'ml-env/bin/activate'}")
        assert b"Checked 1 package" in shell.type(f"{UV} pip install torch --index-url {index}")
        os.write(shell.fd, b"exit\r")
        shell.finish()
    finally:
        shell.kill()
    install = runs(tmp_path / "journal.db")[1]
    assert install["snap"]["before"]["torch"]["version"] == "2.12.0.dev20260226+cu130"
    snapped = [
        r.event.python
        for r in records(tmp_path / "journal.db")
        if isinstance(r.event, PackagesSnapshotted)
    ]
    assert snapped and all(p.startswith(str(demo / "ml-env")) for p in snapped)
