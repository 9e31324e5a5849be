"""Bad input at the command line: each a one-paragraph message naming the culprit, exit 2, no
traceback, and nothing recorded."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from tests.helpers import journal, no_traceback, text, write_runbook

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
