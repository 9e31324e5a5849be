"""Anchors: `journal verify` prints the head, `journal anchor` writes it to a witness (here or on
another host over SSH), and `journal verify --witness` catches what the chain alone cannot: a
chain sealed again from a changed event on, the newest event rewritten with its one hash, forged
events in place of real ones, an emptied table, PostgreSQL's replica role. The triggers are
checked by their definition, and INSERT OR REPLACE is refused."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from journal.events import NoteAdded
from journal.mapper import GENESIS, canonical, chain_hash
from journal.store import EventStore
from tests.helpers import journal, no_traceback, text, write_runbook
from tests.sshd import SshHome, SshServer
from tests.test_store import Refused, _drop_trigger, _pg, _query, _sql, _trigger_sql


def _notes(db: str, count: int, witness: Path | None = None, first: int = 1) -> None:
    """``count`` notes, each anchored in ``witness`` right after it is written."""
    store = EventStore(db)
    try:
        for n in range(first, first + count):
            store.append("j", [NoteAdded(text=f"note {n}", author="test")])
            if witness is not None:
                head = store.anchor(db)
                assert head is not None
                with witness.open("a") as out:
                    out.write(head.format() + "\n")
    finally:
        store.close()


def _verify(db: str, cwd: Path, *more: str):  # type: ignore[no-untyped-def]
    return journal("verify", *more, db=db, cwd=cwd)


def _rows(db: str) -> list[tuple]:
    return _query(db, "SELECT seq, journal, type, version, ts, host, run_id, payload FROM events")


def _sealed_again(db: str, rows: list[tuple]) -> list[tuple[int, str]]:
    """(seq, hash) for ``rows`` sealed in order from the start, as a forger recomputes them."""
    prev, out = GENESIS, []
    for seq, journal_name, type_, version, ts, host, run_id, payload in sorted(rows):
        prev = chain_hash(prev, canonical(journal_name, type_, version, ts, host, run_id, payload))
        out.append((seq, prev))
    return out


def _quote(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    return "'" + str(value).replace("'", "''") + "'"


def _rewrite(db: str, edit: dict[int, str] | None = None, drop: set[int] | None = None) -> None:
    """Behind journal's back: change payloads (``edit``), remove events (``drop``) and seal the
    whole chain again, the head row and the sequence too, so the chain alone holds."""
    rows = [r for r in _rows(db) if r[0] not in (drop or set())]
    rows = [(*r[:7], (edit or {}).get(r[0], r[7])) for r in rows]
    statements = [_drop_trigger(db, "UPDATE"), _drop_trigger(db, "DELETE")]
    if drop:
        statements.append(f"DELETE FROM events WHERE seq IN ({', '.join(map(str, drop))})")
    for (seq, digest), row in zip(_sealed_again(db, rows), sorted(rows), strict=True):
        statements.append(
            f"UPDATE events SET payload = {_quote(row[7])}, hash = '{digest}' WHERE seq = {seq}"
        )
    last = max((r[0] for r in rows), default=0)
    head = _sealed_again(db, rows)[-1][1] if rows else GENESIS
    if _pg(db):
        statements += [
            "ALTER TABLE events_head DISABLE TRIGGER events_head_forward_only",
            f"UPDATE events_head SET seq = {last}, hash = '{head}'",
            "ALTER TABLE events_head ENABLE ALWAYS TRIGGER events_head_forward_only",
        ]
    else:
        statements.append(f"UPDATE sqlite_sequence SET seq = {last} WHERE name = 'events'")
    statements += [_trigger_sql(db, "UPDATE"), _trigger_sql(db, "DELETE")]
    if _pg(db):
        statements += [
            "ALTER TABLE events ENABLE ALWAYS TRIGGER events_no_update",
            "ALTER TABLE events ENABLE ALWAYS TRIGGER events_no_delete",
        ]
    _sql(db, *statements)


def _caught(db: str, cwd: Path, witness: Path, first_bad: int) -> str:
    """Plain verify says intact; with the witness it exits 1 naming ``first_bad`` first."""
    plain = _verify(db, cwd)
    assert plain.returncode == 0, text(plain.stderr)  # the chain alone holds
    held = _verify(db, cwd, "--witness", str(witness))
    assert held.returncode == 1, text(held.stdout + held.stderr)
    assert no_traceback(held)
    err = text(held.stderr)
    numbers = [int(n) for n in re.findall(r"\bevents? (\d+)", err)]
    assert numbers and numbers[0] == first_bad, err
    return err


# --- the head, the anchor, the witness ---------------------------------------------------------


def test_verify_prints_the_head_and_anchor_appends_it_to_a_witness(tmp_path: Path) -> None:
    db = str(tmp_path / "journal.db")
    _notes(db, 3)
    done = _verify(db, tmp_path)
    assert done.returncode == 0
    (digest,) = re.findall(r"head: event 3, hash ([0-9a-f]{64})", text(done.stdout))
    witness = tmp_path / "witness.txt"
    for _ in range(2):
        anchored = journal("anchor", "--witness", str(witness), db=db, cwd=tmp_path)
        assert anchored.returncode == 0, text(anchored.stderr)
        assert "anchored event 3" in text(anchored.stdout)
    lines = witness.read_text().splitlines()
    assert len(lines) == 2 and all(f"seq=3 hash={digest}" in line for line in lines)
    assert witness.stat().st_mode & 0o077 == 0  # the owner's alone
    printed = journal("anchor", db=db, cwd=tmp_path)  # no witness: the line, to paste elsewhere
    assert text(printed.stdout).startswith(f"journal-anchor seq=3 hash={digest}")
    _notes(db, 2, first=4)  # a witness stays a prefix as the journal grows
    held = _verify(db, tmp_path, "--witness", str(witness))
    assert held.returncode == 0, text(held.stderr)
    assert "2 anchors in" in text(held.stdout) and "hold" in text(held.stdout)


def test_anchor_writes_to_a_witness_on_another_host_over_ssh(
    tmp_path: Path, sshd: SshServer, ssh_home: SshHome
) -> None:
    db = str(tmp_path / "journal.db")
    _notes(db, 4)
    rb = write_runbook(
        tmp_path, f'[journal]\nname = "j"\n\n[hosts.witness-box]\nssh = "{sshd.alias}"\n'
    )
    remote = tmp_path / "remote" / "witness.log"
    remote.parent.mkdir()
    where = f"witness-box:{remote}"
    env = ssh_home.env()
    anchored = journal("anchor", "--witness", where, db=db, runbook=rb, env=env)
    assert anchored.returncode == 0, text(anchored.stderr)
    assert "seq=4 " in remote.read_text()
    assert journal("verify", "--witness", where, db=db, runbook=rb, env=env).returncode == 0
    _rewrite(db, edit={2: '{"author": "test", "tags": [], "text": "note 2 (forged)"}'})
    caught = journal("verify", "--witness", where, db=db, runbook=rb, env=env)
    assert caught.returncode == 1 and "event 4 has hash" in text(caught.stderr)


def test_a_witness_that_is_missing_empty_or_not_a_witness_is_bad_input(tmp_path: Path) -> None:
    db = str(tmp_path / "journal.db")
    _notes(db, 1)
    cases = {
        "missing.txt": "no witness file at",
        "empty.txt": "holds no anchor",
        "junk.txt": "line 2 is not a journal anchor",
    }
    (tmp_path / "empty.txt").write_text("# nothing yet\n")
    (tmp_path / "junk.txt").write_text("# witness\nseq=1 hash=abc\n")
    before = Path(db).read_bytes()
    for name, said in cases.items():
        done = _verify(db, tmp_path, "--witness", str(tmp_path / name))
        assert done.returncode == 2 and no_traceback(done), text(done.stderr)
        assert said in text(done.stderr) and name in text(done.stderr)
    into = journal("anchor", "--witness", str(tmp_path / "no" / "w.txt"), db=db, cwd=tmp_path)
    assert into.returncode == 2 and "there is no folder" in text(into.stderr)
    assert Path(db).read_bytes() == before


# --- tampering the chain alone cannot show -----------------------------------------------------


def test_a_chain_sealed_again_from_a_changed_event_on_is_caught(
    store_url: str, tmp_path: Path
) -> None:
    witness = tmp_path / "witness.txt"
    _notes(store_url, 6, witness)
    _rewrite(store_url, edit={3: '{"author": "test", "tags": [], "text": "note 3 (edited)"}'})
    err = _caught(store_url, tmp_path, witness, 3)
    assert "event 3 was changed or removed" in err and "3 later anchors" in err


def test_the_newest_event_rewritten_with_its_one_hash_is_caught(
    store_url: str, tmp_path: Path
) -> None:
    witness = tmp_path / "witness.txt"
    _notes(store_url, 4, witness)
    _rewrite(store_url, edit={4: '{"author": "test", "tags": [], "text": "nothing happened"}'})
    _caught(store_url, tmp_path, witness, 4)


def test_forged_events_in_place_of_the_newest_are_caught(store_url: str, tmp_path: Path) -> None:
    witness = tmp_path / "witness.txt"
    _notes(store_url, 5, witness)
    _rewrite(store_url, drop={4, 5})  # the real 4 and 5 gone, the numbers given back …
    store = EventStore(store_url)
    try:  # … and two forged ones appended through journal itself
        store.append("j", [NoteAdded(text="all fine", author="test")] * 2)
    finally:
        store.close()
    _caught(store_url, tmp_path, witness, 4)


def test_an_emptied_table_is_caught(store_url: str, tmp_path: Path) -> None:
    witness = tmp_path / "witness.txt"
    _notes(store_url, 3, witness)
    _rewrite(store_url, drop={1, 2, 3})
    assert "0 events, hash chain intact" in text(_verify(store_url, tmp_path).stdout)
    err = _caught(store_url, tmp_path, witness, 1)
    assert "holds no event" in err


def test_a_witness_of_another_database_says_so(tmp_path: Path) -> None:
    witness = tmp_path / "witness.txt"
    _notes(str(tmp_path / "a.db"), 2, witness)
    other = str(tmp_path / "b.db")
    store = EventStore(other)
    try:
        store.append("j", [NoteAdded(text="something else", author="x")] * 3)
    finally:
        store.close()
    done = _verify(other, tmp_path, "--witness", str(witness))
    assert done.returncode == 1 and "belongs to another database" in text(done.stderr)


def test_postgres_replica_role_no_longer_passes_the_triggers_and_is_caught_after(
    postgres_url: str, tmp_path: Path
) -> None:
    db = postgres_url
    witness = tmp_path / "witness.txt"
    _notes(db, 4, witness)
    # The triggers fire ALWAYS now: the replication role no longer passes them by.
    with pytest.raises(Refused, match="append-only"):
        _sql(
            db,
            "SET session_replication_role = replica",
            """UPDATE events SET payload = '{"text": "x"}' WHERE seq = 2""",
        )
    # Put back to firing in the origin role only, the role passes them by; verify says so.
    _sql(db, "ALTER TABLE events ENABLE TRIGGER events_no_update")
    done = _verify(db, tmp_path)
    assert done.returncode == 1 and "fires only in the origin replication role" in text(done.stderr)
    # An attacker who puts it back after rewriting chain and head leaves only the anchor.
    _sql(db, "ALTER TABLE events ENABLE ALWAYS TRIGGER events_no_update")
    _rewrite(db, edit={2: '{"author": "test", "tags": [], "text": "note 2 (edited)"}'})
    _caught(db, tmp_path, witness, 2)


# --- the triggers, by what they are -------------------------------------------------------------


def _sqlite_trigger(db: str, name: str, sql: str) -> None:
    _sql(db, f"DROP TRIGGER {name}", sql)


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TRIGGER events_no_update BEFORE UPDATE ON events WHEN 0 "
        "BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE refused'); END",
        "CREATE TRIGGER events_no_update BEFORE UPDATE ON recorder_leases "
        "BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE refused'); END",
        "CREATE TRIGGER events_no_update BEFORE UPDATE ON events BEGIN SELECT RAISE(IGNORE); END",
    ],
    ids=["when-0", "another-table", "ignore"],
)
def test_a_trigger_of_the_right_name_that_refuses_nothing_is_named(
    tmp_path: Path, sql: str
) -> None:
    db = str(tmp_path / "journal.db")
    _notes(db, 2)
    _sqlite_trigger(db, "events_no_update", sql)
    done = _verify(db, tmp_path)
    assert done.returncode == 1 and no_traceback(done)
    assert "events_no_update" in text(done.stderr)


def test_a_postgres_trigger_whose_function_no_longer_raises_is_named(
    postgres_url: str, tmp_path: Path
) -> None:
    _notes(postgres_url, 2)
    _sql(
        postgres_url,
        "CREATE OR REPLACE FUNCTION events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN IF false THEN RAISE EXCEPTION 'events are append-only: % refused', TG_OP; "
        "END IF; RETURN NEW; END $$",
    )
    done = _verify(postgres_url, tmp_path)
    assert done.returncode == 1 and "events_no_update" in text(done.stderr)


@pytest.mark.parametrize("verb", ["INSERT OR REPLACE", "REPLACE"])
def test_insert_or_replace_is_refused_and_the_row_stays(tmp_path: Path, verb: str) -> None:
    db = str(tmp_path / "journal.db")
    _notes(db, 3)
    before = _rows(db)
    with pytest.raises(Refused, match="at or below the newest"):
        _sql(
            db,
            f"{verb} INTO events (seq, journal, type, version, ts, payload, hash) "
            'SELECT seq, journal, type, version, ts, \'{"text": "forged"}\', hash '
            "FROM events WHERE seq = 2",
        )
    assert _rows(db) == before
    assert _verify(db, tmp_path).returncode == 0


def test_journal_db_copy_still_continues_a_chain_past_the_head(tmp_path: Path) -> None:
    # The new trigger refuses only sequences at or below the head: copying rows on is fine.
    source, target = str(tmp_path / "a.db"), tmp_path / "b.db"
    _notes(source, 3)
    done = journal("db", "copy", "--to", str(target), db=source, cwd=tmp_path)
    assert done.returncode == 0, text(done.stderr)
    conn = sqlite3.connect(target)
    try:
        assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 3
    finally:
        conn.close()


def test_the_journal_page_shows_the_head_that_verify_prints(tmp_path: Path) -> None:
    from journal.web import create_app

    db = str(tmp_path / "journal.db")
    _notes(db, 3)
    (digest,) = re.findall(r"hash ([0-9a-f]{64})", text(_verify(db, tmp_path).stdout))
    page = create_app({"DB": db, "TESTING": True}).test_client().get("/j/j").get_data(True)
    assert "chain head: event 3" in page and digest in page
    # the proof is for whoever checks it: at the foot of the page, after the story and timeline
    assert page.index("chain head") > page.index('id="timeline-list"') > page.index('id="story"')
