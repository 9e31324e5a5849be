"""PostgreSQL as a user meets it, beyond the store contract `test_store.py` runs on both
backends: its own triggers (TRUNCATE too), the head row that replaces SQLite's
``sqlite_sequence``, a server that is not there, the command line and the web UI on a
``postgresql+psycopg://`` URL, and `journal db copy` between the backends."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psycopg
import pytest

from journal.events import NoteAdded, OutputChunk
from journal.store import EventStore, StoredRow
from journal.web import create_app
from tests.helpers import JOURNAL, journal, no_traceback, text, write_runbook
from tests.postgres import PostgresServer
from tests.test_store import Refused, _notes, _query, _sql

RUNBOOK = """\
[journal]
name = "pg-cli"

[hosts.here]
ssh = "local"

[[steps]]
name = "say"
run = 'printf "hello from the step\\n"; printf "\\377\\376 not utf-8\\n"; echo Warned-Loudly >&2'
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("JOURNAL_DB", "JOURNAL_RUNBOOK"):
        env.pop(name, None)
    return env


def _rows(db: str | Path) -> list[StoredRow]:
    store = EventStore(str(db))
    try:
        return [row for batch in store.rows() for row in batch]
    finally:
        store.close()


# --- PostgreSQL's own triggers and head -------------------------------------------------------


def test_truncate_and_moving_the_head_back_are_refused(postgres_url: str) -> None:
    _notes(postgres_url, 3)
    with pytest.raises(Refused, match="events are append-only: TRUNCATE refused"):
        _sql(postgres_url, "TRUNCATE events")
    for statement in (
        "UPDATE events_head SET seq = 1",
        "DELETE FROM events_head",
        "TRUNCATE events_head",
    ):
        with pytest.raises(Refused, match="the head of the events only moves forward"):
            _sql(postgres_url, statement)
    assert _query(postgres_url, "SELECT count(*) FROM events") == [(3,)]
    assert _query(postgres_url, "SELECT seq FROM events_head") == [(3,)]


@pytest.mark.parametrize(
    ("tampering", "named"),
    [
        (
            "ALTER TABLE events DISABLE TRIGGER events_no_update",
            "events_no_update on events is disabled",
        ),
        ("ALTER TABLE events DISABLE TRIGGER ALL", "events_no_delete on events is disabled"),
        ("DROP TRIGGER events_no_truncate ON events", "events_no_truncate on events that refuses"),
        (
            "CREATE OR REPLACE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql "
            "AS $$ BEGIN RETURN NEW; END $$",
            "events_no_update on events was changed",
        ),
        ("DROP TRIGGER events_head_forward_only ON events_head", "events_head_forward_only"),
    ],
)
def test_verify_fails_when_a_trigger_is_missing_disabled_or_defused(
    postgres_url: str, tmp_path: Path, tampering: str, named: str
) -> None:
    _notes(postgres_url, 2)
    _sql(postgres_url, tampering)
    result = journal("verify", db=postgres_url, cwd=tmp_path)
    assert result.returncode == 1, text(result.stdout + result.stderr)
    assert named in text(result.stderr)
    assert no_traceback(result)


def test_verify_detects_events_added_behind_the_heads_back(
    postgres_url: str, tmp_path: Path
) -> None:
    _notes(postgres_url, 2)
    _sql(
        postgres_url,
        "INSERT INTO events (seq, journal, type, version, ts, host, run_id, payload, hash) "
        "SELECT 3, journal, type, version, ts, host, run_id, payload, hash FROM events "
        "WHERE seq = 2",
    )
    result = journal("verify", db=postgres_url, cwd=tmp_path)
    assert result.returncode == 1, text(result.stdout + result.stderr)
    assert "event 3" in text(result.stderr)


@pytest.mark.parametrize(
    ("removal", "named"),
    [
        ("DELETE FROM events_head", "holds 0 rows instead of one"),
        ("DROP TABLE events_head", "the events_head table, which names the newest event, is"),
    ],
)
def test_without_its_head_row_a_database_refuses_appends_and_fails_verify(
    postgres_url: str, tmp_path: Path, removal: str, named: str
) -> None:
    _notes(postgres_url, 2)
    _sql(postgres_url, "DROP TRIGGER events_head_forward_only ON events_head", removal)
    noted = journal("--journal", "j", "note", "one more", db=postgres_url, cwd=tmp_path)
    assert noted.returncode == 2, text(noted.stdout + noted.stderr)
    assert "events_head row is gone" in text(noted.stderr) and no_traceback(noted)
    result = journal("verify", db=postgres_url, cwd=tmp_path)
    assert result.returncode == 1, text(result.stdout + result.stderr)
    assert named in text(result.stderr), text(result.stderr)
    assert no_traceback(result)
    assert len(_rows(postgres_url)) == 2


def test_a_failed_append_leaves_no_gap_and_no_false_alarm(postgres_url: str) -> None:
    # The reason for the head row: a sequence would have handed out numbers to this append
    # for good, and "the sequence went past the newest row" would then read as removed events.
    store = EventStore(postgres_url)
    try:
        store.append("j", [NoteAdded(text="one")])
        # a run id longer than its column (64): only the database refuses it, mid-batch
        chunk = OutputChunk(
            run="r" * 100, host_name="h", stream="stdout", data="x", encoding="utf-8", size=1, t=0
        )
        with pytest.raises(psycopg.errors.StringDataRightTruncation):
            store.append("j", [NoteAdded(text="two"), chunk])
        store.append("j", [NoteAdded(text="three")])
        assert [(r.seq, r.event.text) for r in store.read()] == [(1, "one"), (2, "three")]  # type: ignore[attr-defined]
        report = store.verify()
        assert report.ok, report.problems
    finally:
        store.close()


def test_new_database_opened_by_four_processes_at_once_gets_one_schema(
    postgres_url: str, tmp_path: Path
) -> None:
    procs = [
        subprocess.Popen(
            [*JOURNAL, "--db", postgres_url, "--journal", "j", "note", f"note {n}"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for n in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, text(err)
    assert len(_rows(postgres_url)) == 4
    verified = journal("verify", db=postgres_url, cwd=tmp_path)
    assert "4 events, hash chain intact" in text(verified.stdout), text(verified.stderr)


def test_a_server_that_is_not_there_or_an_unknown_database_is_bad_input(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        nobody = f"postgresql+psycopg://journal:secret-pw@127.0.0.1:{sock.getsockname()[1]}/x"
    for url in (nobody, postgres.url("no_such_database")):
        result = journal("verify", db=url, cwd=tmp_path)
        assert result.returncode == 2, text(result.stdout + result.stderr)
        err = text(result.stderr)
        assert "cannot open the database" in err, err
        assert "secret-pw" not in err
        assert no_traceback(result)


# --- the command line and the web UI on PostgreSQL --------------------------------------------


@pytest.fixture
def recorded_pg(postgres_url: str, tmp_path: Path) -> str:
    """A PostgreSQL journal made by the command line: a step run on the local host, a note."""
    rb = write_runbook(tmp_path, RUNBOOK)
    env = _env()
    for args in (("run", "step", "say"), ("note", "kept on PostgreSQL", "--tag", "lesson")):
        result = journal(*args, db=postgres_url, runbook=rb, env=env, cwd=tmp_path)
        assert result.returncode == 0, text(result.stderr)
        assert no_traceback(result)
    return postgres_url


def test_the_command_line_records_logs_and_verifies_on_postgresql(
    recorded_pg: str, tmp_path: Path
) -> None:
    env = _env()
    rb = tmp_path / "runbook.toml"
    shown = journal("log", "--output", db=recorded_pg, runbook=rb, env=env, cwd=tmp_path)
    assert shown.returncode == 0, text(shown.stderr)
    assert b"hello from the step\n" in shown.stdout
    assert b"\xff\xfe not utf-8\n" in shown.stdout  # byte-exact through PostgreSQL's text
    timeline = journal("log", db=recorded_pg, runbook=rb, env=env, cwd=tmp_path)
    assert b"note [lesson]: kept on PostgreSQL" in timeline.stdout, text(timeline.stderr)
    status = journal("status", db=recorded_pg, runbook=rb, env=env, cwd=tmp_path)
    assert status.returncode == 0 and b"say" in status.stdout, text(status.stderr)
    verified = journal("verify", db=recorded_pg, env=env, cwd=tmp_path)
    assert verified.returncode == 0, text(verified.stderr)
    assert "hash chain intact, schema at head" in text(verified.stdout)


def test_the_web_timeline_and_its_search_read_postgresql(recorded_pg: str) -> None:
    app = create_app({"DB": recorded_pg, "TESTING": True})
    client = app.test_client()
    try:
        home = client.get("/")
        assert home.status_code == 200 and 'href="/j/pg-cli"' in home.get_data(as_text=True)
        timeline = client.get("/j/pg-cli")
        html = timeline.get_data(as_text=True)
        assert timeline.status_code == 200, html[:2000]
        assert ">say</a>" in html and "kept on PostgreSQL" in html
        # the search goes through PostgreSQL's ILIKE: stderr, another case
        found = client.get("/j/pg-cli?q=warned-loudly").get_data(as_text=True)
        assert ">say</a>" in found
        nowhere = client.get("/j/pg-cli?q=nowhere+at+all").get_data(as_text=True)
        assert "0 items of" in nowhere
    finally:
        app.extensions["journal"].store.close()


# --- journal db copy --------------------------------------------------------------------------


def _copy(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    result = journal("db", "copy", *args, env=_env(), cwd=cwd)
    assert no_traceback(result), text(result.stderr)
    return result


def test_db_copy_sqlite_to_postgresql_and_back_keeps_every_hash(
    recorded_pg: str, postgres: PostgresServer, tmp_path: Path
) -> None:
    first = tmp_path / "first.db"
    there = _copy("--from", recorded_pg, "--to", str(first), cwd=tmp_path)
    assert there.returncode == 0, text(there.stderr)
    _notes(first, 3, "second-journal")  # a second journal, so the chain spans two
    onto_pg = postgres.create_database("copy")
    back = tmp_path / "back.db"
    try:
        to_pg = _copy("--from", str(first), "--to", onto_pg, cwd=tmp_path)
        assert to_pg.returncode == 0, text(to_pg.stderr)
        out = text(to_pg.stdout)
        assert "journals: pg-cli, second-journal" in out and "hashes as they were" in out, out
        to_sqlite = _copy("--from", onto_pg, "--to", str(back), cwd=tmp_path)
        assert to_sqlite.returncode == 0, text(to_sqlite.stderr)
        rows = _rows(first)
        assert len(rows) > 10
        assert _rows(onto_pg) == rows == _rows(back)
        assert _rows(recorded_pg) == rows[:-3]
        for db in (recorded_pg, first, onto_pg, back):
            verified = journal("verify", db=db, env=_env(), cwd=tmp_path)
            assert verified.returncode == 0, text(verified.stderr)
            assert f"{len(_rows(db))} events, hash chain intact" in text(verified.stdout)
        shown = journal("log", "--output", db=back, runbook=tmp_path / "runbook.toml", cwd=tmp_path)
        assert b"\xff\xfe not utf-8\n" in shown.stdout
    finally:
        postgres.drop_database(onto_pg)


def test_db_copy_continues_an_earlier_copy_and_refuses_another_chain(
    postgres_url: str, tmp_path: Path
) -> None:
    source = tmp_path / "source.db"
    _notes(source, 4)
    assert _copy("--from", str(source), "--to", postgres_url, cwd=tmp_path).returncode == 0
    _notes(source, 2, "later")
    again = _copy("--from", str(source), "--to", postgres_url, cwd=tmp_path)
    assert again.returncode == 0, text(again.stderr)
    assert "copied 2 events" in text(again.stdout) and "4 were there already" in text(again.stdout)
    assert _rows(postgres_url) == _rows(source)

    other = tmp_path / "other.db"
    _notes(other, 3)  # same notes, other timestamps: another chain
    before = _rows(postgres_url)
    refused = _copy("--from", str(other), "--to", postgres_url, cwd=tmp_path)
    assert refused.returncode == 2, text(refused.stdout + refused.stderr)
    assert "not the start of the source's chain" in text(refused.stderr)
    assert _rows(postgres_url) == before


def test_db_copy_of_one_journal_of_several_is_sealed_anew_with_a_note(
    postgres_url: str, tmp_path: Path
) -> None:
    _notes(postgres_url, 2, "a")
    _notes(postgres_url, 3, "b")
    _notes(postgres_url, 1, "a")
    target = tmp_path / "b.db"
    copied = _copy("--from", postgres_url, "--to", str(target), "--journal", "b", cwd=tmp_path)
    assert copied.returncode == 0, text(copied.stderr)
    assert "sealed anew" in text(copied.stdout)
    source_b = [r for r in _rows(postgres_url) if r.journal == "b"]
    rows = _rows(target)
    assert [(r.seq, r.ts, r.payload) for r in rows[:3]] == [
        (n, r.ts, r.payload) for n, r in enumerate(source_b, 1)
    ]
    assert {r.hash for r in rows}.isdisjoint(r.hash for r in source_b)
    note = rows[3]
    assert note.journal == "b" and "events 3 to 5 there" in note.payload
    assert _rows(postgres_url)[-1].hash in note.payload
    assert journal("verify", db=target, cwd=tmp_path).returncode == 0

    whole = tmp_path / "a-only.db"
    _copy("--from", str(target), "--to", str(whole), "--journal", "b", cwd=tmp_path)
    assert _rows(whole) == rows  # the source's only journal: copied whole, hashes kept


def test_db_copy_refuses_a_tampered_source_a_missing_one_and_itself(
    postgres_url: str, tmp_path: Path
) -> None:
    _notes(postgres_url, 3)
    _sql(postgres_url, "ALTER TABLE events DISABLE TRIGGER ALL")
    _sql(postgres_url, "UPDATE events SET payload = replace(payload, 'note 2', 'note 9')")
    target = tmp_path / "copy.db"
    tampered = _copy("--from", postgres_url, "--to", str(target), cwd=tmp_path)
    assert tampered.returncode == 1, text(tampered.stdout + tampered.stderr)
    assert "nothing copied" in text(tampered.stderr)
    assert not target.exists()
    missing = _copy("--from", str(tmp_path / "nope.db"), "--to", str(target), cwd=tmp_path)
    assert missing.returncode == 2 and "nope.db" in text(missing.stderr)
    same = _copy("--from", str(target), "--to", f"sqlite:///{target}", cwd=tmp_path)
    assert same.returncode == 2 and "same database" in text(same.stderr)
    good = tmp_path / "good.db"
    _notes(good, 1)
    unknown = _copy("--from", str(good), "--to", str(target), "--journal", "zz", cwd=tmp_path)
    assert unknown.returncode == 2 and "no journal 'zz'" in text(unknown.stderr)
    assert not target.exists()
