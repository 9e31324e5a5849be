"""Issue 27's bad input, through the real command line: a non-UTF-8 argument, a name longer
than PostgreSQL's columns hold (on SQLite and the real PostgreSQL alike), a `log` filter naming
nothing, and runbook values that were accepted (a NUL in a command, a blank redact value,
an empty host list, a timeout of 1e300, a file too big to read). Each is exit 2 with one
paragraph naming what is wrong and where, no traceback, and not one event more."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from journal.runbook import MAX_RUNBOOK_BYTES, NAME_LENGTH, load
from journal.store import EventStore
from tests.helpers import journal, no_traceback, text, write_runbook

RUNBOOK = """\
[journal]
name = "bad27"

[hosts.gpu-box]
ssh = "local"

[hosts.login-node]
ssh = "local"

[[steps]]
name = "install-torch"
run = "echo installing"

[[steps]]
name = "check-torch"
run = "echo checking"
"""
#: Bytes no UTF-8 text holds, as a Latin-1 terminal sends "café": Python hands the argument
#: over with a lone surrogate for the byte, which no database encodes.
LATIN1 = os.fsdecode(b"caf\xe9")


def events(db: str | Path) -> int:
    store = EventStore(str(db))
    try:
        return store.count()
    finally:
        store.close()


def refused(done: subprocess.CompletedProcess[bytes], *named: str) -> str:
    """The paragraph of a command refused as bad input, naming each of ``named``."""
    message = text(done.stderr)
    assert done.returncode == 2, message
    assert no_traceback(done), message
    assert message.startswith("journal: ") and message.count("\n") == 1, message
    assert len(message) < 1000, message  # one paragraph, whatever was given
    for what in named:
        assert what in message, message
    return message


@pytest.fixture
def recorded(tmp_path: Path, store_url: str) -> tuple[str, Path]:
    """A database on each backend in turn holding one note of journal bad27, and its runbook."""
    rb = write_runbook(tmp_path, RUNBOOK)
    done = journal("note", "the first note", db=store_url, runbook=rb)
    assert done.returncode == 0, text(done.stderr)
    return store_url, rb


# --- case 8: a non-UTF-8 argument, on both backends ------------------------------------------


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["note", LATIN1], "argument text"),
        (["note", "ok", "--tag", LATIN1], "argument --tag"),
        (["note", "ok", "--author", LATIN1], "argument --author"),
        (["note", "ok", "--host", LATIN1], "argument --host"),
        (["--journal", LATIN1, "note", "ok"], "argument --journal"),
        (["record", "metric", "tok_s", "1", "--unit", LATIN1], "argument --unit"),
        (["record", "metric", "tok_s", "1", "--label", f"phase={LATIN1}"], "argument --label"),
    ],
)
def test_an_argument_that_is_not_utf8_is_refused_naming_it(
    recorded: tuple[str, Path], args: list[str], named: str
) -> None:
    db, rb = recorded
    before = events(db)
    message = refused(journal(*args, db=db, runbook=rb), named, "caf\\xe9", "is not UTF-8 text")
    assert "byte 0xe9 at " in message
    assert events(db) == before


def test_a_path_never_recorded_may_be_in_another_encoding(tmp_path: Path) -> None:
    """The database's path is handed to the OS as it is: one named in Latin-1 is used."""
    rb = write_runbook(tmp_path, RUNBOOK)
    db = tmp_path / os.fsdecode(b"caf\xe9.db")
    done = journal("run", "step", "install-torch", db=db, runbook=rb)
    assert done.returncode == 0, text(done.stderr)
    assert os.fsencode(db.name) in os.listdir(os.fsencode(tmp_path))
    assert events(db) > 0 and _journals(str(db)) == ["bad27"]


@pytest.mark.parametrize("where", ["--runbook", "init"])
def test_a_runbook_path_in_another_encoding_is_refused(tmp_path: Path, where: str) -> None:
    """The journal records its runbook's path (JournalOpened), which must be text: the
    command is refused before a runbook is written or a database created."""
    latin1 = tmp_path / os.fsdecode(b"d\xe9")
    if where == "init":
        done = journal("init", str(latin1), db=tmp_path / "journal.db")
        named = "argument dir"
    else:
        rb = write_runbook(tmp_path, RUNBOOK, name=os.fsdecode(b"r\xe9.toml"))
        done = journal("run", "step", "install-torch", db=tmp_path / "journal.db", runbook=rb)
        named = "argument --runbook"
    refused(done, named, "\\xe9", "is not UTF-8 text", "rename a file so named")
    assert sorted(os.listdir(tmp_path)) == ([] if where == "init" else [os.path.basename(rb)])


# --- case 8: names longer than PostgreSQL holds, refused on SQLite too ------------------------


@pytest.mark.parametrize("length", [NAME_LENGTH + 1, 100_000])
def test_a_journal_name_too_long_is_refused_on_both_backends(
    recorded: tuple[str, Path], length: int
) -> None:
    db, rb = recorded
    before = events(db)
    for args in (["note", "ok"], ["log"], ["status"]):
        done = journal("--journal", "j" * length, *args, db=db, runbook=rb)
        refused(done, "--journal", f"({length:,} characters)", "not a usable journal name")
    assert _journals(db) == ["bad27"]
    assert events(db) == before


def test_the_longest_journal_name_is_kept_whole_on_both_backends(
    recorded: tuple[str, Path],
) -> None:
    db, rb = recorded
    name = "j" * NAME_LENGTH
    done = journal("--journal", name, "note", "a note in the longest name", db=db, runbook=rb)
    assert done.returncode == 0, text(done.stderr)
    assert name in _journals(db)
    shown = journal("--journal", name, "log", db=db, runbook=rb)
    assert shown.returncode == 0 and b"a note in the longest name" in shown.stdout


def test_a_journal_name_a_shell_would_split_is_refused(recorded: tuple[str, Path]) -> None:
    db, rb = recorded
    before = events(db)
    refused(journal("--journal", "my journal", "note", "x", db=db, runbook=rb), "'my journal'")
    assert events(db) == before


def test_a_host_name_too_long_is_refused_on_both_backends(
    tmp_path: Path, recorded: tuple[str, Path]
) -> None:
    """Without a runbook to check it against, a note's host goes to the database as given:
    the store holds every backend to PostgreSQL's 200 characters."""
    db, _ = recorded
    before = events(db)
    done = journal(
        "--journal", "bad27", "note", "x", "--host", "h" * 300, db=db, runbook=tmp_path / "none"
    )
    refused(done, "host name", "(300 characters)", "longer than 200 characters")
    assert events(db) == before


def _journals(db: str) -> list[str]:
    store = EventStore(db)
    try:
        return store.journals()
    finally:
        store.close()


# --- case 9: a log filter naming nothing ------------------------------------------------------


@pytest.fixture
def ran(tmp_path: Path) -> tuple[Path, Path]:
    rb = write_runbook(tmp_path, RUNBOOK)
    db = tmp_path / "journal.db"
    done = journal("run", "step", "install-torch", "--host", "gpu-box", db=db, runbook=rb)
    assert done.returncode == 0, text(done.stderr)
    return db, rb


@pytest.mark.parametrize(
    ("flag", "value", "hint"),
    [
        ("--host", "gpu-bx", "(did you mean 'gpu-box'?)"),
        ("--host", "nope", "known: gpu-box, login-node"),
        ("--step", "install-torh", "(did you mean 'install-torch'?)"),
        ("--step", "nope", "known: install-torch, check-torch"),
    ],
)
def test_an_unknown_log_filter_says_so(
    ran: tuple[Path, Path], flag: str, value: str, hint: str
) -> None:
    db, rb = ran
    before = events(db)
    for extra in ([], ["--format", "json"], ["--output"]):
        done = journal("log", flag, value, *extra, db=db, runbook=rb)
        refused(done, f"log {flag} {value!r}", "journal bad27", hint)
        assert done.stdout == b""
    assert events(db) == before


def test_a_known_host_or_step_with_no_runs_yet_is_no_typo(ran: tuple[Path, Path]) -> None:
    db, rb = ran
    for flag, value in (("--host", "login-node"), ("--step", "check-torch")):
        done = journal("log", flag, value, db=db, runbook=rb)
        assert done.returncode == 0, text(done.stderr)
        assert b"0 step runs" in done.stdout
    done = journal("log", "--host", "gpu-box", "--step", "install-torch", db=db, runbook=rb)
    assert done.returncode == 0 and b"1 step run" in done.stdout


def test_a_filter_is_checked_against_the_record_without_a_runbook(
    tmp_path: Path, ran: tuple[Path, Path]
) -> None:
    db, _ = ran
    done = journal("--journal", "bad27", "log", "--host", "gpu-bo", db=db, runbook=tmp_path / "x")
    refused(done, "(did you mean 'gpu-box'?)")
    done = journal("--journal", "bad27", "log", "--host", "gpu-box", db=db, runbook=tmp_path / "x")
    assert done.returncode == 0, text(done.stderr)


def test_the_known_names_listed_are_a_few(tmp_path: Path) -> None:
    """A plan of many steps lists ten of them and says how many more, in one paragraph."""
    steps = "".join(f'[[steps]]\nname = "s{i:03d}"\nrun = "true"\n' for i in range(300))
    rb = write_runbook(tmp_path, RUNBOOK.split("[[steps]]")[0] + steps)
    db = tmp_path / "journal.db"
    assert journal("note", "opened", db=db, runbook=rb).returncode == 0
    message = refused(journal("log", "--step", "zzzz-nothing-like", db=db, runbook=rb))
    assert "known: s000, s001" in message and "s009 and 290 more" in message


# --- case 9: runbook values that were accepted ------------------------------------------------

HEAD = RUNBOOK.split("[[steps]]")[0]


@pytest.mark.parametrize(
    ("body", "key", "why"),
    [
        (
            '[[steps]]\nname = "s"\nrun = "echo before\\u0000after"\n',
            "steps[0].run",
            "holds a NUL character",
        ),
        (
            '[[steps]]\nname = "s"\nrun = "true"\ncwd = "/tmp\\U00000000/x"\n',
            "steps[0].cwd",
            "holds a NUL character",
        ),
        (
            '[[steps]]\nname = "s"\nrun = "true"\n[steps.expect]\n"torch\\u0000" = "2"\n',
            "steps[0].expect",
            "holds a NUL character",
        ),
        ('[[steps]]\nname = "s"\nrun = "true"\nhosts = []\n', "steps[0].hosts", "names no host"),
        (
            '[[steps]]\nname = "s"\nrun = "true"\ntimeout = 1e300\n',
            "steps[0].timeout",
            "more than the longest timeout, 2,592,000 seconds (30 days)",
        ),
        (
            '[[steps]]\nname = "s"\nrun = "true"\n[probes.p]\nrun = "true"\njson = true\n'
            "timeout = 1e300\n",
            "probes.p.timeout",
            "more than the longest timeout",
        ),
        (
            '[[steps]]\nname = "s"\nrun = "true"\n[benchmarks.b]\nrun = "true"\n'
            "parser = \"regex\"\npattern = '(?P<x>[0-9]+)'\nhosts = []\n",
            "benchmarks.b.hosts",
            "names no host",
        ),
        (
            '[[steps]]\nname = "s"\nrun = "true"\n[probes."two words"]\nrun = "true"\n'
            "json = true\n",
            "probes.two words",
            "is not a usable probe name",
        ),
    ],
)
def test_a_runbook_value_no_step_can_use_is_refused(
    tmp_path: Path, body: str, key: str, why: str
) -> None:
    good = write_runbook(tmp_path, RUNBOOK)
    db = tmp_path / "journal.db"
    assert journal("note", "opened", db=db, runbook=good).returncode == 0
    before = events(db)
    rb = write_runbook(tmp_path, HEAD + body, name="bad.toml")
    line = (HEAD + body).splitlines().index(next(ln for ln in body.splitlines() if _at(ln, key)))
    for args in (["run", "step", "s"], ["run", "plan"], ["status"]):
        done = journal(*args, db=db, runbook=rb)
        refused(done, f"{rb}, line {line + 1}, {key}:", why)
    assert events(db) == before


def _at(line: str, key: str) -> bool:
    """Whether ``line`` of the runbook is where the message for ``key`` points."""
    last = key.rsplit(".", 1)[-1]
    if last == "expect":
        return line == "[steps.expect]"
    if key.count(".") == 1 and not key.startswith("steps"):
        return line.startswith(f"[{key.split('.')[0]}.")
    return line.startswith(f"{last} =")


@pytest.mark.parametrize("value", ['""', '"   "'])
def test_a_blank_redact_value_is_refused(tmp_path: Path, value: str) -> None:
    """An empty value masks nothing (the runbook's author believes a secret is masked)."""
    text_ = RUNBOOK.replace('name = "bad27"\n', f'name = "bad27"\nredact = ["a-secret", {value}]\n')
    rb = write_runbook(tmp_path, text_)
    db = tmp_path / "journal.db"
    done = journal("run", "step", "install-torch", db=db, runbook=rb)
    refused(done, f"{rb}, line 3, journal.redact[1]:", "is blank", "masks nothing")
    assert not db.exists()


def test_a_runbook_too_big_to_read_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    good = write_runbook(tmp_path, RUNBOOK)
    db = tmp_path / "journal.db"
    assert journal("note", "opened", db=db, runbook=good).returncode == 0
    before = events(db)
    rb = tmp_path / "huge.toml"
    with rb.open("w") as f:
        f.write(RUNBOOK)
        comment = "# " + "x" * 1021 + "\n"
        f.write(comment * (MAX_RUNBOOK_BYTES // len(comment) + 1))
    assert rb.stat().st_size > MAX_RUNBOOK_BYTES
    for args in (["run", "step", "install-torch"], ["status"]):
        refused(journal(*args, db=db, runbook=rb), f"{rb}:", "larger than 32 MiB", "split the plan")
    assert events(db) == before


def test_a_runbook_that_never_ends_is_refused(tmp_path: Path) -> None:
    """A runbook named /dev/zero (or a FIFO kept open) is read to the limit, not forever."""
    done = journal("run", "step", "s", db=tmp_path / "journal.db", runbook="/dev/zero")
    refused(done, "/dev/zero:", "larger than 32 MiB")
    assert not (tmp_path / "journal.db").exists()


@pytest.mark.slow
def test_a_plan_of_100000_steps_is_within_the_limit(tmp_path: Path) -> None:
    """The size the limit is chosen for: bench/runbook_size.py's 100,000 steps, each with its
    command, env, probe, expectation and hosts (20 MB), are read and checked whole."""
    from bench.runbook_size import runbook_text

    rb = tmp_path / "plan.toml"
    rb.write_text(runbook_text(100_000))
    assert 0.5 * MAX_RUNBOOK_BYTES < rb.stat().st_size < MAX_RUNBOOK_BYTES
    runbook = load(rb)
    assert len(runbook.steps) == 100_000
    assert runbook.step("step-99998").hosts == ["gpu-3"]
    assert runbook.steps[3].hosts == ["gpu-1", "gpu-2", "gpu-4"]  # a group, expanded


def test_init_in_a_folder_whose_name_is_long_and_not_ascii_names_a_usable_journal(
    tmp_path: Path,
) -> None:
    """A folder name of 245 characters with an accent (a valid folder) gives a journal name
    of ASCII characters cut to the length both backends keep, and the runbook works."""
    folder = tmp_path / ("café-" + "x" * 240)
    done = journal("init", str(folder), db=tmp_path / "journal.db")
    assert done.returncode == 0, text(done.stderr)
    made = load(folder / "runbook.toml")
    assert made.name == ("caf--" + "x" * 240)[:NAME_LENGTH]
    status = journal("status", db=tmp_path / "journal.db", runbook=folder / "runbook.toml")
    assert status.returncode in (0, 1) and no_traceback(status), text(status.stderr)
