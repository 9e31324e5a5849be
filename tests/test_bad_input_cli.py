"""Bad input at the command line: each a one-paragraph message naming the culprit, exit 2, no
traceback, and nothing recorded."""

from __future__ import annotations

import importlib.util
import json
import os
import pty
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path

import pytest

from tests.helpers import JOURNAL, drain_pty, journal, no_traceback, text, write_runbook

HEAD = '[journal]\nname = "bad"\n\n[hosts.here]\nssh = "local"\n\n'
STEP = '[[steps]]\nname = "s"\nrun = "true"\n'


def refused(done, *culprits: str) -> str:  # type: ignore[no-untyped-def]
    """The message of a command refused as bad input, which names every one of ``culprits``."""
    message = text(done.stderr)
    assert done.returncode == 2, message
    assert no_traceback(done), message
    for culprit in culprits:
        assert culprit in message, message
    return message


@pytest.mark.parametrize(
    "nested",
    ["[" * 5000 + "]" * 5000, "{ b = " * 5000 + "1" + " }" * 5000],
    ids=["arrays", "inline-tables"],
)
def test_a_runbook_nesting_too_deeply_is_refused(tmp_path: Path, nested: str) -> None:
    rb = write_runbook(tmp_path, HEAD + STEP + f"a = {nested}\n")
    db = tmp_path / "journal.db"
    done = journal("run", "step", "s", db=db, runbook=rb)
    assert "nests too deeply" in refused(done, str(rb))
    assert not db.exists()


QUICK = '[[steps]]\nname = "s"\nrun = "echo hello"\nsnapshots = false\n'


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[Path, Path, str]:
    """A journal with one step run: (database, runbook, the run's id)."""
    rb = write_runbook(tmp_path, HEAD + QUICK)
    db = tmp_path / "journal.db"
    done = journal("run", "step", "s", db=db, runbook=rb)
    assert done.returncode == 0, text(done.stderr)
    run = text(done.stderr).split("(run ")[1].split(")")[0]
    return db, rb, run


def events(db: Path) -> list[tuple[object, ...]]:
    """Every event row of the database, as stored."""
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("SELECT * FROM events ORDER BY seq").fetchall()


@pytest.mark.parametrize("export", ["cast", "postmortem"])
@pytest.mark.parametrize("where", ["no-such-folder/out.txt", ".", "a-file/out.txt"])
def test_an_export_to_a_path_that_cannot_be_written_is_refused(
    recorded: tuple[Path, Path, str], tmp_path: Path, export: str, where: str
) -> None:
    db, rb, run = recorded
    (tmp_path / "a-file").write_text("x")
    before = events(db)
    target = tmp_path / where
    args = ["export", "cast", run] if export == "cast" else ["export", "postmortem"]
    done = journal(*args, "-o", str(target), db=db, runbook=rb)
    message = refused(done, str(target))
    assert message.count("\n") == 1 and not done.stdout
    if where.startswith("a-file"):
        assert "a-file is a file, not a folder" in message
    assert events(db) == before and (tmp_path / "a-file").read_text() == "x"


@pytest.mark.parametrize("command", ["init", "demo"])
def test_init_and_demo_into_a_folder_that_cannot_be_made_are_refused(
    tmp_path: Path, command: str
) -> None:
    (tmp_path / "a-file").write_text("x")
    for folder in ("a-file/sub", "a-file/sub/deeper", "a-file"):
        done = journal(command, folder, cwd=tmp_path)
        message = refused(done, folder)
        assert "a-file is a file, not a folder" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    assert (tmp_path / "a-file").read_text() == "x"


READERS = [
    ["status"],
    ["log"],
    ["log", "--output"],
    ["pitfalls"],
    ["pitfalls", "--format", "json"],
    ["drift"],
    ["export", "postmortem"],
    ["export", "cast", "0", "-o", "run.cast"],
]


@pytest.mark.parametrize("command", READERS, ids=" ".join)
def test_a_command_that_reads_refuses_a_journal_that_is_not_there(
    recorded: tuple[Path, Path, str], command: list[str]
) -> None:
    db, rb, _ = recorded
    before = events(db)
    done = journal("--journal", "nosuch", *command, db=db, runbook=rb, cwd=db.parent)
    message = refused(done, "'nosuch'", "the journals there: bad")
    assert message.count("\n") == 1 and not done.stdout
    assert events(db) == before and not (db.parent / "run.cast").exists()


def test_the_runbooks_journal_reads_before_anything_is_recorded(tmp_path: Path) -> None:
    rb = write_runbook(tmp_path, HEAD + QUICK)
    db = tmp_path / "journal.db"
    journal("--journal", "other", "note", "elsewhere", db=db, runbook=rb)
    status = journal("status", db=db, runbook=rb)
    assert status.returncode == 0 and "journal bad: plan of 1 step" in text(status.stdout)
    postmortem = journal("export", "postmortem", db=db, runbook=rb)
    refused(postmortem, "holds nothing to write a postmortem about")


def test_commands_that_record_still_open_a_journal_by_naming_it(
    recorded: tuple[Path, Path, str], tmp_path: Path
) -> None:
    db, rb, _ = recorded
    session = tmp_path / "session.txt"
    session.write_text("$ echo hi\nhi\n")
    for command in (
        ["--journal", "noted", "note", "a first note"],
        ["--journal", "pasted", "import", "transcript", str(session), "--host", "gpu-box"],
        ["--journal", "measured", "record", "metric", "tok_s", "9.5"],
    ):
        done = journal(*command, db=db, runbook=rb)
        assert done.returncode == 0, text(done.stderr)
    for name in ("noted", "pasted", "measured"):
        shown = journal("--journal", name, "log", db=db, runbook=rb)
        assert shown.returncode == 0 and f"journal {name}:" in text(shown.stdout)


BAD_ENV_NAMES = ["1BAD", "A-B", "A B", "", "A=B", "A\\u0000B", "PATH\\n"]
ENV_TABLES = {
    "hosts.here.env": HEAD.replace('ssh = "local"\n', 'ssh = "local"\nenv = {{ {env} }}\n') + QUICK,
    "steps[0].env": HEAD + QUICK + "env = {{ {env} }}\n",
    "benchmarks.b.env": HEAD
    + QUICK
    + "[benchmarks.b]\nrun = \"echo 'x: 1'\"\nparser = \"regex\"\npattern = 'x: (?P<x>[0-9]+)'\n"
    + "env = {{ {env} }}\n",
}


@pytest.mark.parametrize("name", BAD_ENV_NAMES)
@pytest.mark.parametrize("table", ENV_TABLES)
def test_an_env_name_a_shell_cannot_export_is_refused(
    tmp_path: Path, table: str, name: str
) -> None:
    rb = write_runbook(tmp_path, ENV_TABLES[table].format(env=f'"{name}" = "v"'))
    db = tmp_path / "journal.db"
    done = journal("run", "step", "s", db=db, runbook=rb)
    message = refused(done, str(rb), f"{table}:", "not a usable environment variable name")
    assert message.count("\n") == 1
    assert not db.exists()


def test_an_env_value_holding_a_nul_is_refused(tmp_path: Path) -> None:
    rb = write_runbook(tmp_path, ENV_TABLES["steps[0].env"].format(env='OK = "a\\u0000b"'))
    done = journal("run", "step", "s", db=tmp_path / "journal.db", runbook=rb)
    refused(done, "steps[0].env.OK", "NUL")
    assert not (tmp_path / "journal.db").exists()


def test_usable_env_names_are_exported(tmp_path: Path) -> None:
    rb = write_runbook(
        tmp_path,
        HEAD + '[[steps]]\nname = "s"\nrun = "echo $_a1-$B_2"\nsnapshots = false\n'
        'env = { _a1 = "one", B_2 = "two" }\n',
    )
    done = journal("run", "step", "s", db=tmp_path / "journal.db", runbook=rb)
    assert done.returncode == 0 and b"one-two" in done.stdout, text(done.stderr)


def bench_runbook(folder: Path, pattern: str) -> Path:
    """A runbook whose benchmark ``b`` prints a figure, then a line no regex should choke on."""
    output = "tok: 42\\n" + "a" * 40 + "b"
    return write_runbook(
        folder,
        HEAD + f'[benchmarks.b]\nrun = "printf \'{output}\\\\n\'"\nparser = "regex"\n'
        f"pattern = '{pattern}'\n",
    )


def test_a_benchmark_pattern_that_is_not_a_regex_is_refused_at_load(tmp_path: Path) -> None:
    rb = bench_runbook(tmp_path, "tok: (?P<tok>[0-9]+")
    db = tmp_path / "journal.db"
    done = journal("run", "bench", "b", db=db, runbook=rb)
    refused(done, str(rb), "benchmarks.b.pattern", "is not a valid regex")
    assert not db.exists()


def test_a_catastrophic_pattern_reads_its_figure_at_once_on_re2(tmp_path: Path) -> None:
    rb = bench_runbook(tmp_path, "^tok: (?P<tok>[0-9]+)$|(a+)+$")
    done = journal("run", "bench", "b", db=tmp_path / "journal.db", runbook=rb)
    assert done.returncode == 0, text(done.stderr)
    assert "tok = 42" in text(done.stderr)


#: A time limit for user regexes shorter than the 5 s default, so the tests wait less.
QUICK_LIMIT = {**os.environ, "JOURNAL_REGEX_LIMIT_S": "1"}


def test_a_pattern_past_its_time_limit_fails_the_run_saying_so(tmp_path: Path) -> None:
    # a lookahead: RE2 refuses it, so it runs on Python's backtracking engine, in a child
    # process stopped at the limit
    pattern = "^tok: (?P<tok>[0-9]+)$|^(?P<a>(a+)+)(?=c)"
    rb = bench_runbook(tmp_path, pattern)
    db = tmp_path / "journal.db"
    done = journal("run", "bench", "b", db=db, runbook=rb, env=QUICK_LIMIT)
    assert done.returncode == 1 and no_traceback(done), text(done.stderr)
    said = f"the pattern {pattern!r} ran past its 1 s limit on this output"
    assert said in text(done.stderr)
    assert said in text(journal("log", db=db, runbook=rb).stdout)  # recorded as the reason


def test_without_re2_every_pattern_runs_within_the_time_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from journal import userregex

    monkeypatch.setattr(userregex, "re2", None)
    regex = userregex.compile_user("^tok: (?P<tok>[0-9]+)$|(a+)+$")
    assert regex.engine == "re"
    assert userregex.find_named(regex, "tok: 42\n", 10) == [("tok", "42", 5)]
    with pytest.raises(userregex.RegexTimeout, match=r"ran past its 0\.5 s limit"):
        userregex.find_named(regex, "tok: 42\n" + "a" * 40 + "b", 10, limit=0.5)


# A CUDA error that the no-kernel-image pitfall quotes as its evidence, holding what would
# set the terminal's title, clear its screen and ring its bell if it were printed as it is.
HOSTILE = (
    "RuntimeError: CUDA error: no kernel image is available for execution on the device "
    "\\\\033]0;pwned\\\\007 \\\\033[2J bell\\\\007 8-bit CSI \\\\302\\\\233"
)
RAW = (b"\x1b", b"\x07", b"\xc2\x9b")


def test_listing_recorded_host_text_shows_its_control_characters_as_escapes(
    tmp_path: Path,
) -> None:
    rb = write_runbook(
        tmp_path,
        HEAD + f'[[steps]]\nname = "s"\nrun = "printf \'{HOSTILE}\\\\n\'; exit 1"\n'
        "snapshots = false\n",
    )
    db = tmp_path / "journal.db"
    ran = journal("run", "step", "s", db=db, runbook=rb)
    assert ran.returncode == 1 and b"\x1b]0;pwned\x07" in ran.stdout  # live, as printed
    assert "pitfall no-kernel-image" in text(ran.stderr)
    note = "swapped \x1b]0;pwned\x07 the \x1b[2J driver"
    assert journal("note", note, db=db, runbook=rb).returncode == 0
    shown = {
        "run step's verdicts": ran.stderr,
        "pitfalls": journal("pitfalls", db=db, runbook=rb).stdout,
        "log": journal("log", db=db, runbook=rb).stdout,
    }
    for what, out in shown.items():
        assert not any(raw in out for raw in RAW), (what, out)
    assert "bell\\x07" in text(shown["pitfalls"]), text(shown["pitfalls"])
    assert "swapped \\x1b]0;pwned\\x07 the \\x1b[2J driver" in text(shown["log"])


def test_log_output_in_a_terminal_keeps_colours_and_shows_other_escapes(tmp_path: Path) -> None:
    rb = write_runbook(
        tmp_path,
        HEAD + '[[steps]]\nname = "s"\nrun = "printf \'\\\\033[31mred\\\\033[0m '
        "\\\\033]0;pwned\\\\007 \\\\033[2J'\"\nsnapshots = false\n",
    )
    db = tmp_path / "journal.db"
    assert journal("run", "step", "s", db=db, runbook=rb).returncode == 0
    piped = journal("log", "--output", db=db, runbook=rb).stdout
    assert b"\x1b[31mred\x1b[0m \x1b]0;pwned\x07 \x1b[2J" in piped  # the bytes, as recorded
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*JOURNAL, "--db", str(db), "--runbook", str(rb), "log", "--output"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
    )
    os.close(slave)
    seen = drain_pty(master, proc, 60)
    assert b"\x1b[31mred\x1b[0m" in seen
    assert b"\\x1b]0;pwned\\x07 \\x1b[2J" in seen and b"\x07" not in seen


def test_a_probe_capture_past_its_time_limit_is_unavailable_saying_so(tmp_path: Path) -> None:
    quick = "driver ([0-9.]+)|(?:a+)+$"  # catastrophic for a backtracking engine, not for RE2
    slow = "^((?:a+)+)(?=c)"  # a lookahead: RE2 refuses it, so re runs it within the limit
    rb = write_runbook(
        tmp_path,
        HEAD + "[probes.smi]\nrun = \"printf 'driver 580.1\\\\n" + "a" * 40 + "b\\\\n'\"\n"
        f"capture = {{ driver = '{quick}', stuck = '{slow}' }}\n",
    )
    db = tmp_path / "journal.db"
    done = journal("run", "probe", "smi", "--json", db=db, runbook=rb, env=QUICK_LIMIT)
    assert done.returncode == 0 and no_traceback(done), text(done.stderr)
    result = json.loads(done.stdout)["here"]
    if importlib.util.find_spec("re2") is not None:
        assert result["driver"] == "580.1"
    assert f"the pattern {slow!r} ran past its 1 s limit" in result["stuck"]["unavailable"]
