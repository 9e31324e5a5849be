"""The runbook: what a valid one parses to, and how a broken one is refused.

A broken runbook (or an unknown step or host name) must end `journal` with exit status 2 and
one paragraph that names the file, the line where one can be known and the key path, with no
traceback, and must leave what the database already holds exactly as it was.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from journal.errors import BadInput
from journal.runbook import TEMPLATE, load, parse
from tests.helpers import journal, no_traceback, text, write_runbook

HEAD = """\
[journal]
name = "rb-test"

[hosts.gpu-box]
ssh = "local"
"""
STEP = """
[[steps]]
name = "install-torch"
run = "echo installing"
"""
VALID = HEAD + STEP


@dataclass(frozen=True)
class Broken:
    """A malformed runbook and what the message about it must say."""

    id: str
    body: str | bytes | None  # None: no runbook file at all
    key: str | None  # the key path the message names
    line: int | None  # the line it names, where one can be known
    says: tuple[str, ...] = ()  # further words the message must contain


BROKEN = [
    Broken(
        "toml-syntax",
        HEAD + '\n[[steps]]\nname = "a"\nrun = "echo unterminated\n',
        None,
        9,
        ("column", "TOML"),
    ),
    Broken(
        "no-journal-table",
        '[hosts.gpu-box]\nssh = "local"\n' + STEP,
        "journal",
        None,
        ("[journal]",),
    ),
    Broken(
        "no-journal-name",
        '[journal]\nredact = ["x-secret"]\n\n[hosts.gpu-box]\nssh = "local"\n' + STEP,
        "journal.name",
        1,
        ("name",),
    ),
    Broken(
        "journal-not-a-table",
        'journal = "rb-test"\n\n[hosts.gpu-box]\nssh = "local"\n' + STEP,
        "journal",
        1,
        ("table",),
    ),
    Broken(
        "bad-journal-name",
        '[journal]\nname = "my journal!"\n\n[hosts.gpu-box]\nssh = "local"\n',
        "journal.name",
        2,
        ("'my journal!'",),
    ),
    Broken(
        "unknown-top-key",
        HEAD + '\n[[step]]\nname = "a"\nrun = "true"\n',
        "step",
        7,
        ("did you mean 'steps'",),
    ),
    Broken(
        "unknown-journal-key",
        '[journal]\nname = "rb-test"\nredcat = []\n\n[hosts.h]\nssh = "local"\n',
        "journal.redcat",
        3,
        ("did you mean 'redact'",),
    ),
    Broken(
        "no-hosts",
        '[journal]\nname = "rb-test"\n' + STEP,
        "hosts",
        None,
        ("no hosts",),
    ),
    Broken(
        "host-without-ssh",
        '[journal]\nname = "rb-test"\n\n[hosts.gpu-box]\npython = "python3"\n',
        "hosts.gpu-box.ssh",
        4,
        ("missing",),
    ),
    Broken(
        "ssh-port-out-of-range",
        '[journal]\nname = "rb-test"\n\n[hosts.gpu-box]\nssh = "user@h:99999"\n',
        "hosts.gpu-box.ssh",
        5,
        ("99999",),
    ),
    Broken(
        "ssh-not-a-target",
        '[journal]\nname = "rb-test"\n\n[hosts.gpu-box]\nssh = "user@@h x"\n',
        "hosts.gpu-box.ssh",
        5,
        ("user@@h x",),
    ),
    Broken(
        "host-env-not-string",
        '[journal]\nname = "rb-test"\n\n[hosts.gpu-box]\nssh = "local"\nenv = { N = 3 }\n',
        "hosts.gpu-box.env.N",
        6,
        ("string",),
    ),
    Broken(
        "steps-single-table",
        HEAD + '\n[steps]\nname = "a"\nrun = "true"\n',
        "steps",
        7,
        ("[[steps]]",),
    ),
    Broken(
        "step-without-run",
        VALID + '\n[[steps]]\nname = "verify-torch"\n',
        "steps[1].run",
        11,
        ("verify-torch",),
    ),
    Broken(
        "step-without-name",
        VALID + '\n[[steps]]\nrun = "true"\n',
        "steps[1].name",
        11,
        ("missing",),
    ),
    Broken(
        "duplicate-step",
        VALID + STEP,
        "steps[1].name",
        12,
        ("'install-torch'",),
    ),
    Broken(
        "unknown-step-key",
        HEAD + '\n[[steps]]\nname = "a"\nrnu = "true"\n',
        "steps[0].rnu",
        9,
        ("did you mean 'run'",),
    ),
    Broken(
        "step-env-not-string",
        VALID + "env = { UV_HTTP_TIMEOUT = 120 }\n",
        "steps[0].env.UV_HTTP_TIMEOUT",
        10,
        ("string",),
    ),
    Broken(
        "negative-timeout",
        VALID + "timeout = -5\n",
        "steps[0].timeout",
        10,
        ("-5",),
    ),
    Broken(
        "timeout-not-a-number",
        VALID + 'timeout = "1h"\n',
        "steps[0].timeout",
        10,
        ("'1h'",),
    ),
    Broken(
        "step-unknown-host",
        VALID + 'hosts = ["gpu-bx"]\n',
        "steps[0].hosts",
        10,
        ("did you mean 'gpu-box'",),
    ),
    Broken(
        "probes-not-a-list",
        VALID + 'probes = "torch-env"\n',
        "steps[0].probes",
        10,
        ("list",),
    ),
    Broken(
        "cwd-not-a-string",
        VALID + "cwd = 7\n",
        "steps[0].cwd",
        10,
        ("string",),
    ),
    Broken(
        "host-name-too-long",  # PostgreSQL's host column holds 200 characters
        VALID.replace("[hosts.gpu-box]", "[hosts." + "h" * 201 + "]"),
        "hosts." + "h" * 201,
        4,
        ("at most 200",),
    ),
    Broken("runbook-missing", None, None, None, ("no runbook",)),
    Broken(
        "not-utf8",
        b'[journal]\nname = "rb-test"\n# caf\xe9\n[hosts.gpu-box]\nssh = "local"\n',
        None,
        3,
        ("UTF-8",),
    ),
]


def _events(db: Path) -> list[tuple]:
    """Every stored event row, read straight from the SQLite file."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT * FROM events ORDER BY seq").fetchall()
    conn.close()
    return rows


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """A database in which one step has already been recorded: (folder, db, verify's output)."""
    folder = tmp_path_factory.mktemp("recorded")
    runbook = write_runbook(folder, VALID)
    db = folder / "journal.db"
    done = journal("run", "step", "install-torch", db=db, runbook=runbook, cwd=folder)
    assert done.returncode == 0, text(done.stderr)
    assert b"installing" in done.stdout
    verified = journal("verify", db=db, cwd=folder)
    assert verified.returncode == 0, text(verified.stderr)
    return folder, db, text(verified.stdout)


def _one_paragraph(result) -> str:  # type: ignore[no-untyped-def]
    """The error message, checked to be one paragraph with no traceback."""
    assert no_traceback(result)
    message = text(result.stderr).strip()
    assert message.startswith("journal: "), message
    assert "\n\n" not in message and len(message.splitlines()) <= 3, message
    return message


@pytest.mark.parametrize("case", BROKEN, ids=[c.id for c in BROKEN])
def test_broken_runbook_is_refused_and_records_nothing(
    case: Broken, recorded: tuple[Path, Path, str], tmp_path: Path
) -> None:
    folder, db, _ = recorded
    before = _events(db)
    path = tmp_path / "runbook.toml"
    if isinstance(case.body, bytes):
        path.write_bytes(case.body)
    elif case.body is not None:
        path.write_text(case.body)

    result = journal("run", "step", "install-torch", db=db, runbook=path, cwd=tmp_path)

    assert result.returncode == 2, (result.returncode, text(result.stderr))
    message = _one_paragraph(result)
    assert str(path) in message
    if case.line is not None:
        assert f"line {case.line}" in message, message
    else:
        assert "line " not in message, message
    if case.key is not None:
        assert case.key in message, message
    for words in case.says:
        assert words in message, message
    assert result.stdout == b"", "a refused runbook must not run anything"
    assert _events(db) == before, "a refused runbook changed what was recorded"


def test_status_refuses_a_broken_runbook(recorded: tuple[Path, Path, str], tmp_path: Path) -> None:
    folder, db, _ = recorded
    before = _events(db)
    path = write_runbook(tmp_path, VALID + "timeout = 0\n")
    result = journal("status", db=db, runbook=path, cwd=tmp_path)
    assert result.returncode == 2
    message = _one_paragraph(result)
    assert f"{path}, line 10" in message and "steps[0].timeout" in message
    assert _events(db) == before


def test_syntax_error_names_line_and_column(tmp_path: Path) -> None:
    path = write_runbook(tmp_path, '[journal]\nname = "rb-test"\nredact = ["a" "b"]\n')
    result = journal("status", runbook=path, db=tmp_path / "j.db", cwd=tmp_path)
    assert result.returncode == 2
    message = _one_paragraph(result)
    assert f"{path}, line 3, column 15" in message, message
    assert not (tmp_path / "j.db").exists(), "a bad runbook must not even create the database"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (
            ("run", "step", "instal-torch"),
            "no step named 'instal-torch' (did you mean 'install-torch'?)",
        ),
        (
            ("run", "step", "install-torch", "--host", "gpu-bx"),
            "no host named 'gpu-bx' (did you mean 'gpu-box'?)",
        ),
        (("run", "plan", "--from", "install-troch"), "did you mean 'install-torch'?"),
        (("run", "plan", "--host", "gpubox"), "did you mean 'gpu-box'?"),
    ],
    ids=["step", "host", "plan-from", "plan-host"],
)
def test_unknown_names_suggest_the_closest(
    args: tuple[str, ...], says: str, recorded: tuple[Path, Path, str]
) -> None:
    folder, db, _ = recorded
    before = _events(db)
    result = journal(*args, db=db, runbook=folder / "runbook.toml", cwd=folder)
    assert result.returncode == 2, text(result.stderr)
    message = _one_paragraph(result)
    assert says in message, message
    assert result.stdout == b""
    assert _events(db) == before


def test_bad_inputs_leave_the_journal_verifiable(
    recorded: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """After refused inputs, `journal verify` still passes and counts the same events."""
    folder, db, verified_before = recorded
    for case in BROKEN[:4]:
        assert isinstance(case.body, str)
        path = write_runbook(tmp_path, case.body, f"{case.id}.toml")
        assert journal("run", "plan", db=db, runbook=path, cwd=tmp_path).returncode == 2
    assert journal("run", "step", "nope", db=db, runbook=folder / "runbook.toml").returncode == 2
    after = journal("verify", db=db, cwd=folder)
    assert after.returncode == 0, text(after.stderr)
    assert text(after.stdout) == verified_before
    status = journal("status", db=db, runbook=folder / "runbook.toml", cwd=folder)
    assert status.returncode == 0
    assert "install-torch" in text(status.stdout) and "succeeded" in text(status.stdout)


# --- parse() itself -------------------------------------------------------------------------

FULL = """\
[journal]
name = "cuda13-blackwell"
redact = ["a-literal-secret"]
description = "the cu130 move"

[hosts.gpu-box]
ssh = "ubuntu@10.0.0.5:2222"
python = "~/ml-env/bin/python3"
env = { CUDA_HOME = "/usr/local/cuda-13.0" }
accept_new_host_key = true

[hosts."spare.box"]
ssh = "spare-alias"

[hosts.here]
ssh = "local"

[[steps]]
name = "backup-env"
run = "uv pip freeze > before.txt"

[[steps]]
name = "install-torch"
run = '''
uv pip install torch \\
  --index-url https://download.pytorch.org/whl/nightly/cu130
'''
env = { UV_HTTP_TIMEOUT = "120" }
cwd = "~"
timeout = 3600
probes = ["torch-env"]
expect = { "torch.version" = "*+cu130", "torch.cuda" = "13.0", "nccl" = ">=2.28" }
hosts = ["gpu-box", "spare.box"]
snapshots = false
description = "the nightly"

[[steps]]
name = "verify-torch"
run = "python -c 'import torch'"
timeout = 2.5
"""


def test_parse_full_runbook() -> None:
    book = parse(FULL, Path("/x/runbook.toml"))
    assert book.name == "cuda13-blackwell"
    assert book.path == Path("/x/runbook.toml")
    assert book.redact == ["a-literal-secret"]
    assert book.plan == ["backup-env", "install-torch", "verify-torch"]
    assert list(book.hosts) == ["gpu-box", "spare.box", "here"]

    gpu = book.hosts["gpu-box"]
    assert gpu.ssh == "ubuntu@10.0.0.5:2222"
    assert gpu.python == "~/ml-env/bin/python3"
    assert gpu.env == {"CUDA_HOME": "/usr/local/cuda-13.0"}
    assert gpu.accept_new_host_key is True
    assert not gpu.is_local
    assert gpu.ssh_parts() == ("ubuntu", "10.0.0.5", 2222)
    spare = book.hosts["spare.box"]
    assert spare.ssh_parts() == (None, "spare-alias", None)
    assert spare.python == "python3" and spare.env == {} and spare.accept_new_host_key is False
    assert book.hosts["here"].is_local

    backup = book.step("backup-env")
    assert backup.run == "uv pip freeze > before.txt"
    assert (backup.env, backup.cwd, backup.timeout, backup.probes, backup.expect, backup.hosts) == (
        {},
        None,
        None,
        [],
        {},
        [],
    )
    assert backup.snapshots is True

    install = book.step("install-torch")
    assert install.run.startswith("uv pip install torch")
    assert "cu130" in install.run
    assert install.env == {"UV_HTTP_TIMEOUT": "120"}
    assert install.cwd == "~"
    assert install.timeout == 3600.0 and isinstance(install.timeout, float)
    assert install.probes == ["torch-env"]
    assert install.expect == {"torch.version": "*+cu130", "torch.cuda": "13.0", "nccl": ">=2.28"}
    assert install.hosts == ["gpu-box", "spare.box"]
    assert install.snapshots is False
    assert install.description == "the nightly"
    assert book.step("verify-torch").timeout == 2.5

    # Which hosts a step runs on: --host first, then the step's own, else every host.
    names = lambda hosts: [h.name for h in hosts]  # noqa: E731
    assert names(book.hosts_for(install, [], False)) == ["gpu-box", "spare.box"]
    assert names(book.hosts_for(install, [], True)) == ["gpu-box", "spare.box", "here"]
    assert names(book.hosts_for(install, ["here", "here"], False)) == ["here"]
    assert names(book.hosts_for(backup, [], False)) == ["gpu-box", "spare.box", "here"]


def test_ipv6_ssh_target() -> None:
    book = parse(HEAD.replace('"local"', '"root@[::1]:2200"'), Path("r.toml"))
    assert book.hosts["gpu-box"].ssh_parts() == ("root", "::1", 2200)


def test_unknown_names_raise_bad_input_with_suggestion() -> None:
    book = parse(FULL, Path("r.toml"))
    with pytest.raises(BadInput, match=r"did you mean 'verify-torch'"):
        book.step("verify_torch")
    with pytest.raises(BadInput, match=r"did you mean 'gpu-box'"):
        book.host("gpu_box")
    with pytest.raises(BadInput, match=r"known: gpu-box, spare.box, here"):
        book.host("zzzzzz")


def test_parse_errors_name_the_key_path() -> None:
    with pytest.raises(BadInput) as caught:
        parse(VALID + 'expect = "cu130"\n', Path("/r/runbook.toml"))
    assert str(caught.value).startswith("/r/runbook.toml, line 10, steps[0].expect:")


def test_template_and_load(tmp_path: Path) -> None:
    path = write_runbook(tmp_path, TEMPLATE.replace("{name}", "fresh"))
    book = load(path)
    assert book.name == "fresh"
    assert book.plan == ["backup-env", "show-python"]
    assert book.hosts["this-machine"].is_local
    assert book.text == path.read_text()


@pytest.mark.parametrize(
    "args",
    [
        ("run", "step", "instal-torch"),
        ("run", "step", "install-torch", "--host", "gpu-bx"),
        ("run", "plan", "--from", "install-troch"),
        ("run", "plan", "--to", "instal"),
        ("run", "plan", "--from", "verify-torch", "--to", "install-torch"),
        ("run", "plan", "--host", "gpubox"),
    ],
    ids=["step", "host", "plan-from", "plan-to", "plan-order", "plan-host"],
)
def test_bad_names_record_nothing_in_a_new_database(args: tuple[str, ...], tmp_path: Path) -> None:
    """Refused before anything is opened: not even the journal's opening is recorded."""
    runbook = write_runbook(tmp_path, VALID + '\n[[steps]]\nname = "verify-torch"\nrun = "true"\n')
    db = tmp_path / "journal.db"
    result = journal(*args, db=db, runbook=runbook, cwd=tmp_path)
    assert result.returncode == 2, text(result.stderr)
    _one_paragraph(result)
    assert not db.exists() or _events(db) == []
