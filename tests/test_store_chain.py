"""The hash chain as docs/events.md defines it: each row's hash is ``sha256(prev_hash +
canonical event)``, the canonical event being the JSON list ``[journal, type, version, ts,
host, run_id]`` (no spaces, non-ASCII as it is), a newline and the payload's JSON (sorted keys,
no spaces). Whatever the store does to append fast, a journal it writes holds to that
definition, so an older journal still verifies and a newer one can be checked by hand."""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from journal.events import NoteAdded, OutputChunk, StepStarted
from journal.mapper import GENESIS, canonical, dump_payload
from journal.store import EventStore, utc_now

TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=30)
#: What a lone surrogate in a string gives (json writes it as it is; the bytes keep it).
ODD = st.text(max_size=10)
JSONS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


def reference(journal: str, type_: str, version: int, ts: str, host, run_id, payload: str):  # type: ignore[no-untyped-def]
    head = json.dumps(
        [journal, type_, version, ts, host, run_id], ensure_ascii=False, separators=(",", ":")
    )
    return (head + "\n" + payload).encode("utf-8", "surrogatepass")


@given(ODD, TEXT, st.integers(1, 99), TEXT, st.none() | ODD, st.none() | TEXT, TEXT)
def test_canonical_is_the_documented_json(
    journal, type_, version, ts, host, run_id, payload
) -> None:  # type: ignore[no-untyped-def]
    assert canonical(journal, type_, version, ts, host, run_id, payload) == reference(
        journal, type_, version, ts, host, run_id, payload
    )


@given(st.dictionaries(TEXT, JSONS, max_size=8))
def test_a_payload_is_its_sorted_compact_json(payload: dict) -> None:  # type: ignore[type-arg]
    assert dump_payload(payload) == json.dumps(
        payload, sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )


def test_a_journal_written_in_batches_holds_to_the_documented_chain(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    store = EventStore(str(db))
    try:
        store.append(
            "chain", [NoteAdded(text='naïve café \u2603 "quoted"\n', author="ø", tags=["a", "ü"])]
        )
        store.append(
            "chain",
            [
                StepStarted(run="r1", step="s", host_name="gpu-ø", target="gpu", command="echo hi"),
                *(
                    OutputChunk(
                        run="r1",
                        host_name="gpu-ø",
                        stream="stdout",
                        data=f"line {i}\n",
                        encoding="utf-8",
                        size=7,
                        t=i / 3,
                    )
                    for i in range(50)
                ),
            ],
        )
        assert store.verify().ok
    finally:
        store.close()
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT journal, type, version, ts, host, run_id, payload, hash FROM events "
            "ORDER BY seq"
        ).fetchall()
    conn.close()
    assert len(rows) == 52
    prev = GENESIS
    for journal, type_, version, ts, host, run_id, payload, hash_ in rows:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", ts)
        assert payload == json.dumps(
            json.loads(payload), sort_keys=True, ensure_ascii=False, separators=(",", ":")
        )
        whole = prev.encode("ascii") + reference(journal, type_, version, ts, host, run_id, payload)
        assert hash_ == hashlib.sha256(whole).hexdigest()
        prev = hash_
    stamps = [row[3] for row in rows]
    assert stamps == sorted(stamps) and stamps[-1] <= utc_now()
