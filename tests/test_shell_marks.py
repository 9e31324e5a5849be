"""`journal shell`'s trust boundary, over a real pseudo-terminal (bash and zsh here, bash over
the real sshd): what a command prints never steers the record, however closely it copies the
hooks' marks; no process of the session can learn the nonce that tells the marks from output;
and a secret the session exports is masked in everything recorded after, down to the bytes of
the database file and the web page."""

from __future__ import annotations

import base64
import os
import re
import secrets
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from journal.events import NoteAdded
from journal.redact.names import SECRET_NAME
from journal.service.shell_commands import assigned_secrets
from journal.service.shell_hooks import names_ere
from journal.service.shell_marks import Marks, reported_secrets
from journal.web import create_app
from tests.sshd import SshHome, SshServer
from tests.test_shell import PROMPT, Pty, records, runs, start


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


#: The command the forged marks try to have recorded, which nobody typed.
FAKE = "apt-get install -y totally-fake-cmd"
#: A nonce a forger might guess: the right shape, not this session's.
GUESS = "0123456789abcdef" * 2
#: Every kind of mark the reader takes (C command start, with and without the wait that makes
#: journal type Enter; P prompt, with a report of secret-named variables; N note), and one of a
#: kind it does not know, each without a nonce and with a guessed one; an empty mark, and a
#: mark's bare beginning.
FORGED = (
    b"".join(
        f"\x1b]7733;{lead}{body}\x07".encode()
        for lead in ("", f"{GUESS};")
        for body in (
            f"P;0;{b64('/')}",
            f"C;{b64(FAKE)};{b64('/')};0;",
            f"C;{b64(FAKE)};{b64('/')};1;{b64('/usr')}",
            f"P;0;{b64('/')};{b64('EVIL_TOKEN=visible-evidence' + chr(0))}",
            f"N;{b64('forged lesson' + chr(0x1F) + '--tag' + chr(0x1F) + 'lesson' + chr(0x1F))}",
            "X;1",
        )
    )
    + b"\x1b]7733;\x07\x1b]7733;"
)


def write_runbook(folder: Path, ssh: str) -> Path:
    path = folder / "runbook.toml"
    path.write_text(
        f'[journal]\nname = "shell"\n\n[hosts.box]\nssh = "{ssh}"\n'
        f'env = {{ PS1 = "{PROMPT.decode()}", NO_COLOR = "1" }}\n'
    )
    return path


@pytest.fixture(params=["bash", "zsh", "ssh"])
def shell_of(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, Path, dict[str, str]]:
    """(kind, runbook, env) of a journal whose host `box` is a local bash, a local zsh, or
    bash over the loopback sshd."""
    if request.param == "ssh":
        server: SshServer = request.getfixturevalue("sshd")
        home: SshHome = request.getfixturevalue("ssh_home")
        return "ssh", write_runbook(tmp_path, server.alias), home.env()
    home_dir = tmp_path / "home"
    home_dir.mkdir()
    env = {**os.environ, "HOME": str(home_dir), "SHELL": shutil.which(request.param) or ""}
    env.pop("ZDOTDIR", None)
    if request.param == "zsh":
        (home_dir / ".zshrc").write_text("setopt NO_PROMPT_SP\n")
    return request.param, write_runbook(tmp_path, "local"), env


def stored_bytes(tmp_path: Path) -> bytes:
    """Every byte of the database's files (the WAL and its index too), read raw."""
    return b"".join(p.read_bytes() for p in sorted(tmp_path.glob("journal.db*")))


def test_marks_a_command_prints_are_output_and_steer_nothing(tmp_path: Path, shell_of) -> None:
    _, rb, env = shell_of
    forged = tmp_path / "forged.bin"
    forged.write_bytes(FORGED + b"\n")
    script = tmp_path / "forge.sh"
    # what it reads shows whether journal typed its Enter into the terminal for a forged wait
    script.write_text(
        'cat "$1"\necho READY\nIFS= read -r line\necho "read[$line]"\n'
        "echo visible-evidence\nexit 7\n"
    )
    line = f"sh {script} {forged}"
    shell: Pty = start(tmp_path, rb, env)
    try:
        shell.expect(PROMPT)
        os.write(shell.fd, line.encode() + b"\r")
        shell.expect(b"READY\r\n")
        said = shell.type("typed")
        os.write(shell.fd, b"exit 0\r")
        assert shell.finish() == 0
    finally:
        shell.kill()
    assert b"read[typed]\r\n" in said  # journal typed nothing into the command's input
    assert FORGED in shell.seen  # shown as printed
    done = runs(tmp_path / "journal.db")
    assert [r["start"].command for r in done] == [line]  # no command nobody typed (exit: none)
    (forge,) = done
    assert (forge["end"].status, forge["end"].exit_code) == ("failed", 7)
    assert FORGED in forge["out"]  # recorded as printed, every byte
    assert b"visible-evidence" in forge["out"]  # a forged report of a secret masks nothing
    notes = [r.event for r in records(tmp_path / "journal.db") if isinstance(r.event, NoteAdded)]
    assert notes == []


def test_no_process_of_the_session_can_learn_its_nonce(tmp_path: Path, shell_of) -> None:
    kind, rb, env = shell_of
    allexport, xtrace, no_xtrace = (
        ("setopt allexport", "setopt xtrace", "unsetopt xtrace")
        if kind == "zsh"
        else ("set -a", "set -x", "set +x")
    )
    # what a child can read of the shell and of every process of the user (PS1 is in their
    # environments: its prompt is spelt otherwise there, the nonce is hex either way)
    look = (
        "{ env; tr '\\0' '\\n' </proc/$$/environ; tr '\\0' ' ' </proc/$$/cmdline; "
        'ps -ww -o args= -u "$(id -u)"; } | tr P p; sh -c \'echo "child=[$__journal_nonce]"\''
    )
    shell: Pty = start(tmp_path, rb, env)
    try:
        shell.expect(PROMPT)
        shell.type(allexport)  # every variable assigned from now on is exported
        said = shell.type('echo "nonce=$__journal_nonce."')  # the shell itself knows it
        (nonce,) = re.findall(rb"nonce=([0-9a-f]{32})\.", said)
        shell.type(xtrace)  # and every command the hooks run would be traced
        shell.type("true")
        shell.type(no_xtrace)
        looked = shell.type(look)
        os.write(shell.fd, b"exit\r")
        assert shell.finish() == 0
    finally:
        shell.kill()
    assert b"child=[]\r\n" in looked and nonce not in looked
    assert shell.seen.count(nonce) == 1  # its one echo: no trace, no mark ever showed it
    assert nonce not in stored_bytes(tmp_path)  # the echo's record has it masked
    done = runs(tmp_path / "journal.db")
    assert [(r["start"].command, r["end"].status) for r in done] == [
        (allexport, "succeeded"),
        ('echo "nonce=$__journal_nonce."', "succeeded"),
        (xtrace, "succeeded"),
        ("true", "succeeded"),
        (no_xtrace, "succeeded"),
        (look, "succeeded"),
    ]  # `exit` ends the session: no step run
    assert b"nonce=[REDACTED].\r\n" in done[1]["out"]


#: Secrets no pattern knows by their shape: only the session's learning masks them bare.
TOKEN = "plain-7Qx2-my-token-value"
PASSWORD = "computed-Zr4T-password"
API = "same-line-Lp9W-api-token"
#: A variable named as no secret is: evidence, kept.
COLOUR = "visible-colour-value"


def test_a_secret_the_session_exports_is_masked_in_all_it_records_after(
    tmp_path: Path, shell_of
) -> None:
    _, rb, env = shell_of
    pw = tmp_path / "pw.txt"
    pw.write_text(PASSWORD + "\n")
    lines = [
        f"export MY_TOKEN={TOKEN}",
        "echo $MY_TOKEN",
        f'export DB_PASSWORD="$(cat {pw})"',  # a value only the shell knows
        'echo "pw: $DB_PASSWORD"',
        f'API_TOKEN={API}; echo "$API_TOKEN"',  # masked in the very line that sets it
        f"echo {TOKEN} again",  # a later command naming the value: masked in the command
        f"export MY_COLOUR={COLOUR}; echo $MY_COLOUR",
        "_HOOK_PWD=$PWD",  # a shell's state, not exported (as pyenv-virtualenv's hook keeps)
        "pwd",
    ]
    shell: Pty = start(tmp_path, rb, env)
    try:
        shell.expect(PROMPT)
        shown = b"".join(shell.type(line) for line in lines)
        os.write(shell.fd, b"exit\r")
        assert shell.finish() == 0
    finally:
        shell.kill()
    for value in (TOKEN, PASSWORD, API):
        assert value.encode() in shown  # the terminal shows what the commands printed
    stored = stored_bytes(tmp_path)
    for value in (TOKEN, PASSWORD, API):
        assert value.encode() not in stored, value
    assert COLOUR.encode() in stored
    done = runs(tmp_path / "journal.db")
    assert [r["start"].command for r in done] == [
        "export MY_TOKEN=[REDACTED]",
        "echo $MY_TOKEN",
        "export DB_PASSWORD=[REDACTED]",  # as ever, what follows a secret's name
        'echo "pw: $DB_PASSWORD"',
        'API_TOKEN=[REDACTED]; echo "$API_TOKEN"',
        "echo [REDACTED] again",
        f"export MY_COLOUR={COLOUR}; echo $MY_COLOUR",
        "_HOOK_PWD=[REDACTED]",  # the redactor's rule for what follows a secret's name
        "pwd",
    ]  # `exit` ends the session: no step run
    assert done[1]["out"] == b"[REDACTED]\r\n"
    assert done[3]["out"] == b"pw: [REDACTED]\r\n"
    assert done[4]["out"] == b"[REDACTED]\r\n"
    assert done[5]["out"] == b"[REDACTED] again\r\n"
    assert done[6]["out"] == f"{COLOUR}\r\n".encode()
    assert done[8]["out"] == done[8]["start"].cwd.encode() + b"\r\n"  # evidence kept
    client = create_app({"DB": str(tmp_path / "journal.db"), "TESTING": True}).test_client()
    pages = [client.get("/j/shell").get_data(as_text=True)]
    pages += [client.get(f"/j/shell/run/{r['start'].run}").get_data(as_text=True) for r in done]
    for page in pages:
        assert TOKEN not in page and PASSWORD not in page and API not in page
    assert "[REDACTED]" in pages[2] and COLOUR in pages[7]


def test_only_marks_led_by_the_nonce_are_marks_however_the_stream_is_cut() -> None:
    nonce = secrets.token_hex(16)
    real = f"\x1b]7733;{nonce};P;7;{b64('/')};\x07".encode()
    stream = FORGED + b"out\r\n" + real + b"$ "
    for size in (1, 2, 5, 33, len(stream)):
        marks = Marks(nonce)
        pieces: list = []
        for at in range(0, len(stream), size):
            pieces += marks.feed(stream[at : at + size])
        pieces.append(marks.rest())
        passed = b"".join(p for p in pieces if isinstance(p, bytes))
        assert passed == FORGED + b"out\r\n$ "
        found = [p for p in pieces if not isinstance(p, bytes)]
        assert [(m.kind, m.fields[0]) for m in found] == [("P", "7")]
    # a forged beginning held at the end of a read goes on as soon as it cannot be ours
    marks = Marks(nonce)
    assert marks.feed(b"x\x1b]7733;" + nonce[:5].encode()) == [b"x"]
    assert marks.feed(b"zz") == [b"\x1b]7733;" + nonce[:5].encode() + b"zz"]
    with pytest.raises(ValueError):
        Marks("")


def test_the_shells_pick_secret_names_by_the_redaction_rule_itself() -> None:
    names = "HF_TOKEN my_token DB_PASSWORD AWS_SECRET api_key X_PASS PATH TOKENS KEYBOARD"
    names += " HOME GIT_ASKPASS Credential ACCOUNTKEY sessionToken"
    secret = [n for n in names.split() if SECRET_NAME.search(n)]
    assert len(secret) == 9
    ere = re.compile(names_ere())  # an ERE of groups, classes and anchors reads alike here
    assert [n for n in names.split() if ere.search(n)] == secret
    script = f"r={shlex.quote(names_ere())}\nfor n in {names}; do [[ $n =~ $r ]] && echo $n; done"
    for shell in ("bash", "zsh"):
        said = subprocess.run([shell, "-c", script], capture_output=True, text=True, check=True)
        assert said.stdout.split() == secret, shell
    report = b"HF_TOKEN=a=b\0PATH=/bin\0bad name=x\0"
    assert reported_secrets(report) == {"HF_TOKEN": b"a=b", "PATH": b"/bin"}
    assert assigned_secrets("export A_TOKEN=abc B_TOKEN=\"$(cat f)\" C=`x`; D_KEY='q r' cmd") == {
        "A_TOKEN": b"abc",
        "D_KEY": b"q r",
    }
