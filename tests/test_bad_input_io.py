"""Bad input from outside the runbook: a `--db` that is not a journal, a full disk, a huge
script, a bad `Last-Event-ID`, a token in the access log. Each a clear message (exit 2 where
journal exits), no traceback, and nothing recorded before lost or changed."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.helpers import journal, no_traceback, text, write_runbook

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
