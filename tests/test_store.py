"""The event store as its users meet it, on SQLite and on PostgreSQL alike (one contract, two
backends, through the `store_url` fixture): several writers at once, append-only,
tamper-evident, byte-exact, its schema owned by Alembic, and `--db` taking a path or a URL."""

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
from journal.output import decode, encode
from journal.store import EventStore
from tests.helpers import journal, no_traceback, text

ROOT = Path(__file__).resolve().parents[1]
VERSIONS = ROOT / "migrations" / "versions"

WRITERS = 8
PER_WRITER = 1_000

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


class Refused(Exception):
    """The database refused a statement run behind journal's back (either backend's error)."""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _pg(db: str) -> bool:
    return db.startswith("postgresql")


def _marker(event: object) -> str:
    if isinstance(event, OutputChunk):
        return event.data.rstrip("\n")
    assert isinstance(event, NoteAdded)
    return event.text


def _notes(db: str | Path, count: int, journal_name: str = "j") -> None:
    store = EventStore(str(db))
    for n in range(1, count + 1):
        store.append(journal_name, [NoteAdded(text=f"note {n}", author="test")])
    store.close()


def _query(db: str | Path, statement: str, *params: object) -> list[tuple]:
    """Rows of a query run straight through the driver, behind journal's back."""
    if _pg(str(db)):
        import psycopg

        with psycopg.connect(str(db).replace("+psycopg", "")) as conn:
            return conn.execute(statement.replace("?", "%s"), params).fetchall()  # type: ignore[arg-type]
    conn = sqlite3.connect(db)
    try:
        return conn.execute(statement, params).fetchall()
    finally:
        conn.close()


def _sql(db: str | Path, *statements: str) -> None:
    """Statements run straight through the driver, behind journal's back, each committed."""
    if _pg(str(db)):
        import psycopg

        try:
            with psycopg.connect(str(db).replace("+psycopg", ""), autocommit=True) as conn:
                for statement in statements:
                    conn.execute(statement)  # type: ignore[arg-type]
        except psycopg.Error as exc:
            raise Refused(str(exc)) from exc
        return
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
    except sqlite3.DatabaseError as exc:
        raise Refused(str(exc)) from exc
    finally:
        conn.close()


def _drop_trigger(db: str | Path, action: str) -> str:
    on = " ON events" if _pg(str(db)) else ""
    return f"DROP TRIGGER events_no_{action.lower()}{on}"


def _trigger_sql(db: str | Path, action: str) -> str:
    """The trigger exactly as the migration creates it, to put it back after tampering."""
    if _pg(str(db)):
        return (
            f"CREATE TRIGGER events_no_{action.lower()} BEFORE {action} ON events "
            "FOR EACH ROW EXECUTE FUNCTION events_append_only()"
        )
    return (
        f"CREATE TRIGGER events_no_{action.lower()} BEFORE {action} ON events "
        f"BEGIN SELECT RAISE(ABORT, 'events are append-only: {action} refused'); END"
    )


def _behind_the_triggers(db: str | Path, action: str, statement: str) -> None:
    """What an attacker with rights on the database does: drop the trigger, change the table,
    put the trigger back, so that only the chain can tell."""
    _sql(db, _drop_trigger(db, action), statement, _trigger_sql(db, action))


def _payload(db: str | Path, seq: int) -> str | None:
    rows = _query(db, "SELECT payload FROM events WHERE seq = ?", seq)
    return rows[0][0] if rows else None


def _head() -> str:
    revisions = {}
    for path in VERSIONS.glob("*.py"):
        source = path.read_text()
        found = re.search(r'^revision = "([^"]+)"', source, re.M)
        down = re.search(r"^down_revision = (?:\"([^\"]+)\"|None)", source, re.M)
        assert found and down
        revisions[found.group(1)] = down.group(1)
    (head,) = set(revisions) - set(revisions.values())
    return head


# --- several writers -------------------------------------------------------------------------


def test_eight_processes_appending_at_once_lose_and_duplicate_nothing(
    store_url: str, tmp_path: Path
) -> None:
    db = store_url
    baseline = journal("--journal", "concurrent", "note", "before the writers", db=db, cwd=tmp_path)
    assert baseline.returncode == 0, text(baseline.stderr)
    go = tmp_path / "go"
    procs: list[tuple[Path, subprocess.Popen[bytes]]] = []
    try:
        for n in range(WRITERS):
            ready = tmp_path / f"ready-{n}"
            command = [sys.executable, "-c", WRITER, db, f"w{n}", str(PER_WRITER), str(ready)]
            procs.append(
                (
                    ready,
                    subprocess.Popen(
                        [*command, str(go)],
                        env=_env(),
                        cwd=tmp_path,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                    ),
                )
            )
        deadline = time.monotonic() + 120
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

    total = 1 + WRITERS * PER_WRITER
    store = EventStore(db)
    try:
        records = list(store.read("concurrent"))
        assert store.count() == total
    finally:
        store.close()
    # every number handed out once, none skipped, in the order the chain seals them
    assert [r.seq for r in records] == list(range(1, total + 1))
    stamps = [r.ts for r in records]
    assert stamps == sorted(stamps)  # stamped under the write lock, so in sequence order
    markers = [_marker(r.event) for r in records[1:]]
    counts = Counter(markers)
    for n in range(WRITERS):
        mine = [m for m in markers if m.split(":")[0] == f"w{n}"]
        # every marker exactly once, and each writer's events in the order it appended them
        assert mine == [f"w{n}:{i}" for i in range(PER_WRITER)]
    assert max(counts.values()) == 1
    # they really did write at the same time: their events interleave in the global order
    switches = sum(
        1 for a, b in zip(markers, markers[1:], strict=False) if a.split(":")[0] != b.split(":")[0]
    )
    assert switches > WRITERS * 10

    verified = journal("verify", db=db, cwd=tmp_path)
    assert verified.returncode == 0, text(verified.stderr)
    assert f"{total} events, hash chain intact" in text(verified.stdout)


# --- append-only ------------------------------------------------------------------------------


def test_raw_update_is_refused_by_the_trigger_and_the_row_stays(store_url: str) -> None:
    _notes(store_url, 3)
    before = _payload(store_url, 2)
    with pytest.raises(Refused, match="events are append-only: UPDATE refused"):
        _sql(store_url, """UPDATE events SET payload = '{"text":"rewritten"}' WHERE seq = 2""")
    assert _payload(store_url, 2) == before
    assert '"note 2"' in (before or "")


def test_raw_delete_is_refused_by_the_trigger_and_the_rows_stay(
    store_url: str, tmp_path: Path
) -> None:
    _notes(store_url, 3)
    with pytest.raises(Refused, match="events are append-only: DELETE refused"):
        _sql(store_url, "DELETE FROM events")
    with pytest.raises(Refused, match="events are append-only: DELETE refused"):
        _sql(store_url, "DELETE FROM events WHERE seq = 2")
    assert [_payload(store_url, seq) is not None for seq in (1, 2, 3)] == [True, True, True]
    assert journal("verify", db=store_url, cwd=tmp_path).returncode == 0


# --- tamper evidence --------------------------------------------------------------------------


def test_verify_names_an_event_changed_behind_the_triggers_back(
    store_url: str, tmp_path: Path
) -> None:
    db = store_url
    _notes(db, 5)
    assert journal("verify", db=db, cwd=tmp_path).returncode == 0
    _behind_the_triggers(
        db,
        "UPDATE",
        "UPDATE events SET payload = replace(payload, 'note 3', 'note 3 (edited)') WHERE seq = 3",
    )
    assert "edited" in (_payload(db, 3) or "")
    result = journal("verify", db=db, cwd=tmp_path)
    assert result.returncode == 1, text(result.stdout + result.stderr)
    err = text(result.stderr)
    assert re.search(r"\bevent 3\b", err), err
    assert not re.search(r"\bevent [1245]\b", err), err
    assert no_traceback(result)


def test_verify_detects_an_event_deleted_from_the_middle(store_url: str, tmp_path: Path) -> None:
    _notes(store_url, 5)
    _behind_the_triggers(store_url, "DELETE", "DELETE FROM events WHERE seq = 3")
    result = journal("verify", db=store_url, cwd=tmp_path)
    assert result.returncode == 1, text(result.stdout + result.stderr)
    err = text(result.stderr)
    assert re.search(r"\bevent 3\b.*removed", err), err
    assert no_traceback(result)


def test_verify_detects_the_newest_events_deleted(store_url: str, tmp_path: Path) -> None:
    _notes(store_url, 5)
    _behind_the_triggers(store_url, "DELETE", "DELETE FROM events WHERE seq >= 4")
    result = journal("verify", db=store_url, cwd=tmp_path)
    assert result.returncode == 1, text(result.stdout + result.stderr)
    assert re.search(r"\bevents 4 to 5\b", text(result.stderr)), text(result.stderr)


def test_verify_detects_the_newest_events_deleted_even_after_more_were_appended(
    store_url: str, tmp_path: Path
) -> None:
    # The chain holds (the new events seal the last one left), but the numbers show the hole.
    _notes(store_url, 5)
    _behind_the_triggers(store_url, "DELETE", "DELETE FROM events WHERE seq >= 4")
    _notes(store_url, 2, "later")
    result = journal("verify", db=store_url, cwd=tmp_path)
    assert result.returncode == 1, text(result.stdout + result.stderr)
    assert re.search(r"\bevents 4 to 5\b.*removed", text(result.stderr)), text(result.stderr)
    assert no_traceback(result)


@pytest.mark.parametrize("action", ["UPDATE", "DELETE"])
def test_verify_fails_when_a_trigger_is_missing(
    store_url: str, tmp_path: Path, action: str
) -> None:
    _notes(store_url, 2)
    _sql(store_url, _drop_trigger(store_url, action))
    result = journal("verify", db=store_url, cwd=tmp_path)
    assert result.returncode == 1, text(result.stdout + result.stderr)
    assert f"events_no_{action.lower()}" in text(result.stderr)
    assert no_traceback(result)


# --- byte-exact output ------------------------------------------------------------------------


def test_output_bytes_that_are_not_utf8_come_back_byte_exact(
    store_url: str, tmp_path: Path
) -> None:
    db = store_url
    raw = b"caf\xc3\xa9 \xff\xfe\x00 latin-1: \xe9t\xe9\r\n\x1b[31mred\x1b[0m \x80\n"
    plain = "plain ✓ line\n".encode()
    store = EventStore(db)
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


def _schema(db: str | Path) -> tuple[list[str], set[str]]:
    """The revisions in alembic_version, and the names of the tables and triggers."""
    versions = [r[0] for r in _query(db, "SELECT version_num FROM alembic_version")]
    if _pg(str(db)):
        names = _query(
            db,
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
            "UNION SELECT tgname FROM pg_trigger WHERE NOT tgisinternal",
        )
    else:
        names = _query(db, "SELECT name FROM sqlite_master")
    return versions, {r[0] for r in names}


def test_a_new_database_gets_the_schema_from_alembic_at_head(
    store_url: str, tmp_path: Path
) -> None:
    result = journal("--journal", "j", "note", "first", db=store_url, cwd=tmp_path)
    assert result.returncode == 0, text(result.stderr)
    versions, names = _schema(store_url)
    assert versions == [_head()]
    assert {"events", "events_no_update", "events_no_delete"} <= names
    if _pg(store_url):
        assert {"events_head", "events_no_truncate", "events_head_forward_only"} <= names


def test_an_empty_sqlite_file_is_given_the_schema_when_opened(tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    _sql(db, "PRAGMA user_version = 0", "CREATE TABLE scratch (x)", "DROP TABLE scratch")
    assert "events" not in {r[0] for r in _query(db, "SELECT name FROM sqlite_master")}
    noted = journal("--journal", "j", "note", "first", db=db, cwd=tmp_path)
    assert noted.returncode == 0, text(noted.stderr)
    versions, names = _schema(db)
    assert versions == [_head()]
    assert {"events", "events_no_update", "events_no_delete"} <= names
    assert journal("verify", db=db, cwd=tmp_path).returncode == 0


@pytest.mark.parametrize("command", [["verify"], ["status"], ["--journal", "j", "status"]])
def test_a_database_from_a_newer_journal_is_refused_clearly(
    store_url: str, tmp_path: Path, command: list[str]
) -> None:
    _notes(store_url, 2)
    _sql(store_url, "UPDATE alembic_version SET version_num = '9999_from_the_future'")
    result = journal(*command, db=store_url, cwd=tmp_path)
    assert result.returncode == 2, text(result.stdout + result.stderr)
    err = text(result.stderr)
    assert "9999_from_the_future" in err and "upgrade journal" in err, err
    assert no_traceback(result)
    assert _schema(store_url)[0] == ["9999_from_the_future"]  # left as it was


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


def test_reading_with_nothing_excluded_reads_everything(store_url: str) -> None:
    _notes(store_url, 3)
    store = EventStore(store_url)
    try:
        assert [r.seq for r in store.read(exclude=[])] == [1, 2, 3]
        assert [r.seq for r in store.read(types=[])] == []
        assert [r.seq for r in store.read("j", after=1, types=["NoteAdded"])] == [2, 3]
    finally:
        store.close()


def _cost_of_reading_one_run(folder: Path, runs: int) -> int:
    """SQLite's virtual-machine steps for the query the store runs to read one run's output
    (journal, type and run asked, as the postmortem and the run page ask), in a journal of
    ``runs`` runs of two chunks each."""
    from journal.store.core import EventFilter

    db = folder / f"runs-{runs}.db"
    store = EventStore(str(db))
    try:
        for first in range(0, runs, 500):
            store.append(
                "j",
                [
                    OutputChunk(
                        run=f"run-{n:05d}",
                        host_name="h",
                        stream="stdout",
                        data="x\n",
                        encoding="utf-8",
                        size=2,
                        t=float(i),
                    )  # fmt: skip
                    for n in range(first, min(first + 500, runs))
                    for i in range(2)
                ],
            )
    finally:
        store.close()
    sql, params = EventFilter("j", 0, [OutputChunk.type], None, f"run-{runs // 2:05d}").sql("?")
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    conn = sqlite3.connect(db)
    try:
        conn.set_progress_handler(count, 10)
        assert len(conn.execute(sql, params).fetchall()) == 2
    finally:
        conn.close()
    return steps


def test_reading_one_runs_output_costs_the_same_in_a_journal_ten_times_longer(
    tmp_path: Path,
) -> None:
    """A postmortem or a run page reads each run's output by the run's index, not through
    every chunk of the journal: with the journal and the type asked too, SQLite took the
    (journal, type, seq) index and a postmortem of 100,000 events read for minutes."""
    small = _cost_of_reading_one_run(tmp_path, 200)
    large = _cost_of_reading_one_run(tmp_path, 2_000)
    assert large < 2 * small + 10, (small, large)
