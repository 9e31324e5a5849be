"""The event store as its users meet it: several writers at once, append-only, tamper-evident,
byte-exact, its schema owned by Alembic, and `--db` taking a path or a URL."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from journal.events import NoteAdded, OutputChunk, StepFinished, StepStarted
from journal.recorder import decode, encode
from journal.store import EventStore
from tests.helpers import journal, no_traceback, text

ROOT = Path(__file__).resolve().parents[1]
MIGRATION = ROOT / "migrations" / "versions" / "0001_events.py"

WRITERS = 4
PER_WRITER = 5_000

#: One writer: opens the store, says it is ready, waits for the go file, then appends
#: PER_WRITER events, each carrying the marker "TAG:N", in single appends and small batches.
WRITER = r"""
import sys, time
from pathlib import Path
from journal.events import NoteAdded, OutputChunk
from journal.store import EventStore

db, tag, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
ready, go = Path(sys.argv[4]), Path(sys.argv[5])
store = EventStore(db)
ready.touch()
deadline = time.monotonic() + 120
while not go.exists():
    if time.monotonic() > deadline:
        sys.exit("never told to go")
    time.sleep(0.002)
i = appends = 0
while i < total:
    size = min((1, 1, 4, 1, 7, 1, 2)[appends % 7], total - i)
    batch = []
    for n in range(i, i + size):
        marker = f"{tag}:{n}"
        if n % 2:
            batch.append(NoteAdded(text=marker, author=tag))
        else:
            data = marker + "\n"
            batch.append(OutputChunk(run="run-" + tag, host_name=tag, stream="stdout",
                                     data=data, encoding="utf-8", size=len(data), t=n / 1000))
    store.append("concurrent", batch)
    i += size
    appends += 1
store.close()
print(f"{tag}: {total} events in {appends} appends")
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _marker(event: object) -> str:
    if isinstance(event, OutputChunk):
        return event.data.rstrip("\n")
    assert isinstance(event, NoteAdded)
    return event.text


def _notes(db: Path, count: int, journal_name: str = "j") -> None:
    store = EventStore(str(db))
    for n in range(1, count + 1):
        store.append(journal_name, [NoteAdded(text=f"note {n}", author="test")])
    store.close()


def _sql(db: Path, *statements: str) -> None:
    """Statements run straight through the sqlite3 module, behind journal's back."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    finally:
        conn.close()


def _trigger_sql(action: str) -> str:
    """The trigger exactly as the migration creates it, to put it back after tampering."""
    return (
        f"CREATE TRIGGER events_no_{action.lower()} BEFORE {action} ON events "
        f"BEGIN SELECT RAISE(ABORT, 'events are append-only: {action} refused'); END"
    )


def _payload(db: Path, seq: int) -> str | None:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT payload FROM events WHERE seq = ?", (seq,)).fetchone()
    finally:
        conn.close()
    return row[0] if row else None


def _head() -> str:
    text_ = MIGRATION.read_text()
    found = re.search(r'^revision = "([^"]+)"', text_, re.M)
    assert found
    return found.group(1)


# --- several writers -------------------------------------------------------------------------


def test_four_processes_appending_at_once_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    baseline = journal("--journal", "concurrent", "note", "before the writers", db=db, cwd=tmp_path)
    assert baseline.returncode == 0, text(baseline.stderr)
    go = tmp_path / "go"
    procs: list[tuple[Path, subprocess.Popen[bytes]]] = []
    try:
        for n in range(WRITERS):
            ready = tmp_path / f"ready-{n}"
            command = [
                sys.executable,
                "-c",
                WRITER,
                str(db),
                f"w{n}",
                str(PER_WRITER),
                str(ready),
                str(go),
            ]
            procs.append(
                (
                    ready,
                    subprocess.Popen(
                        command,
                        env=_env(),
                        cwd=tmp_path,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                    ),
                )
            )
        deadline = time.monotonic() + 60
        while not all(ready.exists() for ready, _ in procs):
            assert time.monotonic() < deadline, "the writers did not start"
            assert all(p.poll() is None for _, p in procs), "a writer died before starting"
            time.sleep(0.01)
        go.touch()
        for n, (_, proc) in enumerate(procs):
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, f"writer w{n} failed ({proc.returncode}):\n{text(err)}"
            assert err == b"", text(err)
            assert re.fullmatch(rf"w{n}: {PER_WRITER} events in \d+ appends\n", text(out))
    finally:
        for _, proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()

    store = EventStore(str(db))
    try:
        records = list(store.read("concurrent"))
        assert store.count() == 1 + WRITERS * PER_WRITER
    finally:
        store.close()
    assert len(records) == 1 + WRITERS * PER_WRITER
    assert [r.seq for r in records] == sorted({r.seq for r in records})
    markers = [_marker(r.event) for r in records[1:]]
    counts = Counter(markers)
    for n in range(WRITERS):
        mine = [m for m in markers if m.startswith(f"w{n}:")]
        # every marker exactly once, and each writer's events in the order it appended them
        assert mine == [f"w{n}:{i}" for i in range(PER_WRITER)]
    assert max(counts.values()) == 1
    # they really did write at the same time: their events interleave in the global order
    switches = sum(1 for a, b in zip(markers, markers[1:], strict=False) if a[:2] != b[:2])
    assert switches > WRITERS * 10

    verified = journal("verify", db=db, cwd=tmp_path)
    assert verified.returncode == 0, text(verified.stderr)
    assert f"{1 + WRITERS * PER_WRITER} events, hash chain intact" in text(verified.stdout)


# --- append-only ------------------------------------------------------------------------------


def test_raw_update_is_refused_by_the_trigger_and_the_row_stays(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    _notes(db, 3)
    before = _payload(db, 2)
    with pytest.raises(sqlite3.DatabaseError, match="events are append-only: UPDATE refused"):
        _sql(db, """UPDATE events SET payload = '{"text":"rewritten"}' WHERE seq = 2""")
    assert _payload(db, 2) == before
    assert '"note 2"' in (before or "")


def test_raw_delete_is_refused_by_the_trigger_and_the_rows_stay(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    _notes(db, 3)
    with pytest.raises(sqlite3.DatabaseError, match="events are append-only: DELETE refused"):
        _sql(db, "DELETE FROM events")
    with pytest.raises(sqlite3.DatabaseError, match="events are append-only: DELETE refused"):
        _sql(db, "DELETE FROM events WHERE seq = 2")
    assert [_payload(db, seq) is not None for seq in (1, 2, 3)] == [True, True, True]
    assert journal("verify", db=db, cwd=tmp_path).returncode == 0


# --- tamper evidence --------------------------------------------------------------------------


def test_verify_names_an_event_changed_behind_the_triggers_back(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    _notes(db, 5)
    assert journal("verify", db=db, cwd=tmp_path).returncode == 0
    _sql(
        db,
        "DROP TRIGGER events_no_update",
        """UPDATE events SET payload = replace(payload, 'note 3', 'note 3 (edited)')
           WHERE seq = 3""",
        _trigger_sql("UPDATE"),  # the trigger put back, so only the chain can tell
    )
    assert "edited" in (_payload(db, 3) or "")
    result = journal("verify", db=db, cwd=tmp_path)
    assert result.returncode == 1, text(result.stdout + result.stderr)
    err = text(result.stderr)
    assert re.search(r"\bevent 3\b", err), err
    assert not re.search(r"\bevent [1245]\b", err), err
    assert no_traceback(result)


def test_verify_detects_an_event_deleted_from_the_middle(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    _notes(db, 5)
    _sql(
        db,
        "DROP TRIGGER events_no_delete",
        "DELETE FROM events WHERE seq = 3",
        _trigger_sql("DELETE"),
    )
    result = journal("verify", db=db, cwd=tmp_path)
    assert result.returncode == 1, text(result.stdout + result.stderr)
    err = text(result.stderr)
    assert re.search(r"\bevent 3\b.*removed", err), err
    assert no_traceback(result)


def test_verify_detects_the_newest_events_deleted(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    _notes(db, 5)
    _sql(
        db,
        "DROP TRIGGER events_no_delete",
        "DELETE FROM events WHERE seq >= 4",
        _trigger_sql("DELETE"),
    )
    result = journal("verify", db=db, cwd=tmp_path)
    assert result.returncode == 1, text(result.stdout + result.stderr)
    assert re.search(r"\bevents 4 to 5\b", text(result.stderr)), text(result.stderr)


@pytest.mark.parametrize("trigger", ["events_no_update", "events_no_delete"])
def test_verify_fails_when_a_trigger_is_missing(tmp_path: Path, trigger: str) -> None:
    db = tmp_path / "journal.db"
    _notes(db, 2)
    _sql(db, f"DROP TRIGGER {trigger}")
    result = journal("verify", db=db, cwd=tmp_path)
    assert result.returncode == 1, text(result.stdout + result.stderr)
    assert trigger in text(result.stderr)
    assert no_traceback(result)


# --- byte-exact output ------------------------------------------------------------------------


def test_output_bytes_that_are_not_utf8_come_back_byte_exact(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    raw = b"caf\xc3\xa9 \xff\xfe\x00 latin-1: \xe9t\xe9\r\n\x1b[31mred\x1b[0m \x80\n"
    plain = "plain ✓ line\n".encode()
    store = EventStore(str(db))
    try:
        chunks = []
        for data in (raw, plain):
            body, encoding = encode(data)
            chunks.append(
                OutputChunk(
                    run="r1",
                    host_name="h",
                    stream="stdout",
                    data=body,
                    encoding=encoding,
                    size=len(data),
                    t=0.0,
                )
            )
        assert [c.encoding for c in chunks] == ["base64", "utf-8"]
        store.append(
            "j",
            [
                StepStarted(run="r1", step="build", host_name="h", target="local", command="make"),
                *chunks,
                StepFinished(
                    run="r1", host_name="h", status="succeeded", exit_code=0, duration=1.0
                ),
            ],
        )
        back = [r.event for r in store.read("j", types=["OutputChunk"])]
    finally:
        store.close()
    assert [decode(c) for c in back] == [raw, plain]  # type: ignore[arg-type]
    shown = journal("--journal", "j", "log", "--output", db=db, cwd=tmp_path)
    assert shown.returncode == 0, text(shown.stderr)
    assert raw + plain in shown.stdout


# --- schema owned by Alembic ------------------------------------------------------------------


def _schema(db: Path) -> tuple[list[str], set[str]]:
    conn = sqlite3.connect(db)
    try:
        versions = [r[0] for r in conn.execute("SELECT version_num FROM alembic_version")]
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()
    return versions, names


def test_a_new_database_gets_the_schema_from_alembic_at_head(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    result = journal("--journal", "j", "note", "first", db=db, cwd=tmp_path)
    assert result.returncode == 0, text(result.stderr)
    versions, names = _schema(db)
    assert versions == [_head()]
    assert {"events", "events_no_update", "events_no_delete"} <= names


def test_an_empty_sqlite_file_is_given_the_schema_when_opened(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    _sql(db, "PRAGMA user_version = 0", "CREATE TABLE scratch (x)", "DROP TABLE scratch")
    assert "events" not in _schema_names(db)
    noted = journal("--journal", "j", "note", "first", db=db, cwd=tmp_path)
    assert noted.returncode == 0, text(noted.stderr)
    versions, names = _schema(db)
    assert versions == [_head()]
    assert {"events", "events_no_update", "events_no_delete"} <= names
    assert journal("verify", db=db, cwd=tmp_path).returncode == 0


def _schema_names(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    finally:
        conn.close()


@pytest.mark.parametrize("command", [["verify"], ["status"], ["--journal", "j", "status"]])
def test_a_database_from_a_newer_journal_is_refused_clearly(
    tmp_path: Path, command: list[str]
) -> None:
    db = tmp_path / "journal.db"
    _notes(db, 2)
    _sql(db, "UPDATE alembic_version SET version_num = '9999_from_the_future'")
    result = journal(*command, db=db, cwd=tmp_path)
    assert result.returncode == 2, text(result.stdout + result.stderr)
    err = text(result.stderr)
    assert "9999_from_the_future" in err and "upgrade journal" in err, err
    assert no_traceback(result)
    assert _schema(db)[0] == ["9999_from_the_future"]  # left as it was


# --- --db -------------------------------------------------------------------------------------


def test_db_takes_a_path_or_an_sqlalchemy_url_for_the_same_database(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    noted = journal("--journal", "j", "note", "by path", db=db, cwd=tmp_path)
    assert noted.returncode == 0, text(noted.stderr)
    relative = journal("--journal", "j", "note", "by relative path", db="journal.db", cwd=tmp_path)
    assert relative.returncode == 0, text(relative.stderr)
    url = f"sqlite:///{db}"
    by_url = journal("--journal", "j", "note", "by url", db=url, cwd=tmp_path)
    assert by_url.returncode == 0, text(by_url.stderr)
    verified = journal("verify", db=url, cwd=tmp_path)
    assert verified.returncode == 0, text(verified.stderr)
    assert "3 events, hash chain intact" in text(verified.stdout)
    via_env = journal("verify", cwd=tmp_path, env={**os.environ, "JOURNAL_DB": url})
    assert "3 events, hash chain intact" in text(via_env.stdout), text(via_env.stderr)


@pytest.mark.parametrize("url", ["nosuchdb://user@host/journal", "sqlite+nosuchdriver:///x.db"])
def test_db_url_with_an_unknown_driver_is_bad_input(tmp_path: Path, url: str) -> None:
    result = journal("verify", db=url, cwd=tmp_path)
    assert result.returncode == 2, text(result.stdout + result.stderr)
    assert "nosuch" in text(result.stderr)
    assert no_traceback(result)
    assert list(tmp_path.iterdir()) == []


def test_db_in_a_folder_that_does_not_exist_is_bad_input(tmp_path: Path) -> None:
    db = tmp_path / "no-such-folder" / "journal.db"
    for command in (["verify"], ["--journal", "j", "note", "hello"]):
        result = journal(*command, db=db, cwd=tmp_path)
        assert result.returncode == 2, text(result.stdout + result.stderr)
        assert "no-such-folder" in text(result.stderr)
        assert no_traceback(result)
    assert not db.parent.exists()


def test_the_schema_head_journal_assumes_is_alembics_head() -> None:
    from journal.store.engine import SCHEMA_HEAD, head_revision

    assert SCHEMA_HEAD == head_revision()
