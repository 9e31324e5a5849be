"""PostgreSQL's backend: its writer and reader straight through psycopg 3, and the checks
`journal verify` adds there.

Appends are serialised by the one row of ``events_head`` (revision 0002): each append locks it
(``SELECT ... FOR UPDATE``), which also reads the newest sequence number and hash, seals its
events onto that hash, numbers them on from that sequence number, inserts them and moves the
head, all in one transaction. A second writer waits on the row lock and then reads the head
the first one committed (READ COMMITTED re-reads a row it waited for), so eight writers make
one linear chain, numbered in chain order with no gap: a failed append rolls back its numbers
with its rows, which a sequence would not. A reader never sees event N+1 before event N.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from journal.errors import BadInput
from journal.mapper import Recorded
from journal.store.chain import Item, check_continues, seal
from journal.store.core import FETCH_ROWS, Driver, DriverBackend, recorded
from journal.store.schema import COLUMNS, StoredRow, squeezed

_HEAD = "SELECT seq, hash FROM events_head FOR UPDATE"
_MOVE = "UPDATE events_head SET seq = %s, hash = %s"
_INSERT = f"INSERT INTO events ({', '.join(COLUMNS)}) VALUES ({', '.join(['%s'] * 9)})"

_APPEND_ONLY = "BEGIN RAISE EXCEPTION 'events are append-only: % refused', TG_OP; END"
_FORWARD_ONLY = (
    "BEGIN IF TG_OP = 'UPDATE' THEN IF NEW.one AND NEW.seq > OLD.seq THEN RETURN NEW; END IF; "
    "END IF; RAISE EXCEPTION 'the head of the events only moves forward: % refused', TG_OP; END"
)

#: The triggers that keep the tables append-only, as the migrations create them: (table,
#: trigger) -> (its definition as pg_get_triggerdef gives it, its function's source).
TRIGGERS = {
    **{
        ("events", f"events_no_{action.lower()}"): (
            f"CREATE TRIGGER events_no_{action.lower()} BEFORE {action} ON public.events "
            f"FOR EACH {each} EXECUTE FUNCTION events_append_only()",
            _APPEND_ONLY,
        )
        for action, each in (("UPDATE", "ROW"), ("DELETE", "ROW"), ("TRUNCATE", "STATEMENT"))
    },
    ("events_head", "events_head_forward_only"): (
        "CREATE TRIGGER events_head_forward_only BEFORE DELETE OR UPDATE ON public.events_head "
        "FOR EACH ROW EXECUTE FUNCTION events_head_forward_only()",
        _FORWARD_ONLY,
    ),
    ("events_head", "events_head_no_truncate"): (
        "CREATE TRIGGER events_head_no_truncate BEFORE TRUNCATE ON public.events_head "
        "FOR EACH STATEMENT EXECUTE FUNCTION events_head_forward_only()",
        _FORWARD_ONLY,
    ),
}

#: Each trigger's table, name, whether and when it is enabled, its definition and its
#: function's source.
TRIGGER_STATE = """
SELECT t.tgrelid::regclass::text, t.tgname, t.tgenabled, pg_get_triggerdef(t.oid), p.prosrc
FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
WHERE t.tgrelid IN (to_regclass('events'), to_regclass('events_head')) AND NOT t.tgisinternal
"""

#: pg_trigger.tgenabled: fired Always (revision 0005), in the Origin role only, in Replica
#: only, or Disabled.
_ENABLED = {
    "A": "",
    "O": "fires only in the origin replication role",
    "R": "fires only in the replica replication role",
    "D": "is disabled",
}


def _under_head_lock(conn: Any, work: Callable[[Any, int, str], None]) -> None:
    """``work(cursor, head seq, head hash)`` in one transaction holding the head's row lock.

    In pipeline mode: BEGIN goes with the SELECT, and the inserts, the head's move and the
    COMMIT go in one round trip, so the lock every writer waits for is held for one."""
    from psycopg.errors import UndefinedTable

    try:
        with conn.pipeline(), conn.cursor() as cur:
            try:
                cur.execute(_HEAD)
                head = cur.fetchone()
            except UndefinedTable:
                head = None
            if head is None:
                raise BadInput(
                    "the database's events_head row is gone, so nothing can be appended: it "
                    "was changed behind journal's back (`journal verify` says more)"
                )
            work(cur, head[0], head[1])
            conn.commit()
    except BaseException:
        if not conn.closed:
            conn.rollback()
        raise


def append(conn: Any, journal: str, items: Sequence[Item]) -> None:
    """Seal ``items`` onto the head, number them on from it, insert them and move the head."""

    def work(cur: Any, seq: int, prev: str) -> None:
        rows = seal(prev, journal, items)
        cur.executemany(_INSERT, [(seq + n, *row) for n, row in enumerate(rows, 1)])
        cur.execute(_MOVE, (seq + len(rows), rows[-1][-1]))

    _under_head_lock(conn, work)


def import_rows(conn: Any, rows: Sequence[StoredRow]) -> None:
    """Insert rows sealed elsewhere, sequence and hash as they are; ChainBreak unless they
    continue this database's chain."""

    def work(cur: Any, seq: int, prev: str) -> None:
        check_continues(seq, prev, rows)
        cur.executemany(_INSERT, rows)
        cur.execute(_MOVE, (rows[-1].seq, rows[-1].hash))

    if rows:
        _under_head_lock(conn, work)


def read(conn: Any, sql: str, params: list[object]) -> Iterator[Recorded]:
    """The events of an :meth:`EventFilter.sql <journal.store.core.EventFilter.sql>` query
    (``%s`` marks), through a server-side cursor so that a journal of any size is read a few
    thousand rows at a time."""
    with conn.cursor(name="journal_read") as cur:
        cur.itersize = FETCH_ROWS
        cur.execute(sql, params)
        while rows := cur.fetchmany(FETCH_ROWS):
            yield from recorded(rows)


class PostgresBackend(DriverBackend):
    """PostgreSQL through psycopg 3 (its kept connection opened again if the server dropped it;
    a third faster to read than through SQLAlchemy's rows)."""

    driver = Driver(
        append, import_rows, read, mark="%s", lost=lambda conn: bool(conn.broken or conn.closed)
    )


def trigger_problems(conn: Any) -> list[str]:
    """What is wrong with the append-only triggers: missing, on another table, not firing
    always, no longer defined as the migrations made them, or unknown ones added."""
    found = {(row[0], row[1]): row[2:] for row in conn.exec_driver_sql(TRIGGER_STATE)}
    problems = []
    for (table, name), (definition, source) in TRIGGERS.items():
        if (table, name) not in found:
            problems.append(f"the trigger {name} on {table} that refuses changes is missing")
            continue
        enabled, now, now_source = found[(table, name)]
        state = _ENABLED.get(enabled, "is in an unknown state")
        if state:
            problems.append(
                f"the trigger {name} on {table} {state}, so a session can pass it by "
                "(`SET session_replication_role`, or at will when disabled)"
            )
        elif squeezed(now) != definition or squeezed(now_source) != source:
            problems.append(
                f"the trigger {name} on {table} was changed and may no longer refuse changes: "
                f"{now}; its function: {squeezed(now_source)}"
            )
    for (table, name), (_, now, _) in found.items():
        if (table, name) not in TRIGGERS:
            problems.append(f"an unknown trigger {name} is on {table}: {now}")
    return problems


def head_problems(conn: Any, last_seq: int, last_hash: str | None) -> list[str]:
    """Whether ``events_head`` still names the newest event (``last_seq``, ``last_hash``)."""
    if conn.exec_driver_sql("SELECT to_regclass('events_head')").scalar() is None:
        return ["the events_head table, which names the newest event, is missing"]
    heads = conn.exec_driver_sql("SELECT seq, hash FROM events_head").all()
    if len(heads) != 1:
        return [f"the events_head table holds {len(heads)} rows instead of one"]
    seq, digest = heads[0]
    if seq > last_seq:
        gone = f"event {seq} was" if seq == last_seq + 1 else f"events {last_seq + 1} to {seq} were"
        left = f"event {last_seq}" if last_seq else "none"
        return [
            f"{gone} written and removed since: the newest events are missing "
            f"(the last one left is {left})"
        ]
    if seq < last_seq:
        return [
            f"events {seq + 1} to {last_seq} were added behind journal's back "
            f"(the head it keeps names event {seq})"
        ]
    if last_seq and digest != last_hash:
        return [f"the head names event {seq} with another hash than the event holds"]
    return []
