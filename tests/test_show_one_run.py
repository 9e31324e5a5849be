"""`journal show RUN` reads one run: its row of the stored timeline and the snapshots it names
when the timeline is up to date, the timeline brought up to date when not; the run is found
by the store's run index, with the messages of :func:`journal.service.runs.find_run`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text as sql

from journal.errors import BadInput
from journal.events import (
    JournalOpened,
    OutputChunk,
    PackagesSnapshotted,
    StepFinished,
    StepStarted,
)
from journal.projections import stored
from journal.projections.stored import PROJECTION, current_timeline, one_run
from journal.service.runs import find_run, find_stored_run
from journal.store import EventStore
from journal.store.cache import ProjectionCache
from tests.helpers import journal, text, write_runbook

NAME = "one"
PACKAGES = {
    "before": {"torch": {"name": "torch", "version": "2.9.0"}},
    "after": {"torch": {"name": "torch", "version": "2.10.0"}},
}


def _run(store: EventStore, run: str, step: str, output: str, **started: Any) -> None:
    events: list[Any] = [StepStarted(run, step, "box", "env", f"do {step}", **started)]
    if not started.get("imported"):
        events += [
            PackagesSnapshotted("box", phase, "python", packages, 0.1, run=run)
            for phase, packages in PACKAGES.items()
        ]
    events += [
        OutputChunk(run, "box", "stdout", output, "utf-8", len(output), 0.0),
        StepFinished(run, "box", "succeeded", 0, 1.0),
    ]
    store.append(NAME, events)


@pytest.fixture
def db(store_url: str) -> str:
    """A journal of eight runs (one imported and placed by its own time, before them all) and
    one still running, its timeline stored up to date; on each backend."""
    path = store_url
    store = EventStore(path)
    try:
        store.append(NAME, [JournalOpened(NAME, "runbook.toml", {"box": "local"}, ["s"])])
        for i in range(7):
            _run(store, f"a{i:03d}", f"step-{i}", f"line of run {i}\n")
        _run(store, "b000", "dated", "imported line\n", imported=True, at="2001-01-01T00:00:00Z")
        store.append(
            NAME, [StepStarted("c000", "slow", "box", "env", "sleep 9", pid=7, machine="m")]
        )
        current_timeline(store, NAME, lambda machine, pid: True)
    finally:
        store.close()
    return path


class _Counting(ProjectionCache):
    """The projection cache, keeping the keys of every row read (None: all of them)."""

    read: list[str | None] = []

    def rows(self, journal: str, projection: str, keys: Any = None) -> dict[str, Any]:
        keys = None if keys is None else list(keys)
        if projection == PROJECTION:
            _Counting.read.extend([None] if keys is None else keys)
        return super().rows(journal, projection, keys)


def _start(store: EventStore, run: str) -> int:
    return dict(store.step_runs(NAME, run))[run]


def _key_of(store: EventStore, seq: int) -> str:
    """The row key of the item of ``seq``, found the long way."""
    with store.engine.connect() as conn:
        keys = conn.execute(sql("SELECT key FROM projection_rows WHERE key LIKE 'i:%'"))
        return next(k for (k,) in keys if k.endswith(f"{seq:012d}"))


@pytest.mark.parametrize("run", ["a003", "b000", "c000"])
def test_an_up_to_date_timeline_gives_one_run_from_its_own_row(
    db: str, run: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stored, "ProjectionCache", _Counting)
    monkeypatch.setattr(_Counting, "read", [])
    store = EventStore(db)
    try:
        alive = lambda machine, pid: True  # noqa: E731
        whole = current_timeline(store, NAME, alive).runs[run]
        _Counting.read.clear()
        seq = _start(store, run)
        view = one_run(store, NAME, run, seq, alive)
        assert view == whole and view.snapshots == whole.snapshots
        # its row and the snapshots it names: no other run's row, never every row
        assert None not in _Counting.read
        runs = [k for k in _Counting.read if k and k.startswith("i:")]
        assert _key_of(store, seq) in runs and all(k.endswith(f"{seq:012d}") for k in runs)
        snapshots = [k for k in _Counting.read if k and k.startswith("s:")]
        assert len(snapshots) == (2 if run == "a003" else 0)
        assert len(_Counting.read) == len(runs) + len(snapshots)
        if run == "c000":  # settled as the whole timeline settles it
            assert view.status == "running"
            lost = one_run(store, NAME, run, seq, lambda machine, pid: False)
            assert lost.status == "lost" and lost.reason
            assert lost == current_timeline(store, NAME, lambda machine, pid: False).runs[run]
        if run == "b000":  # placed by its own time: a longer key, found by its end
            assert len(_key_of(store, seq)) > len(f"i:{seq:012d}")
    finally:
        store.close()


def test_a_stale_timeline_is_brought_up_to_date_and_gives_the_run(db: str) -> None:
    store = EventStore(db)
    try:
        store.append(NAME, [StepFinished("c000", "box", "failed", 3, 9.0)])
        _run(store, "d000", "later", "late line\n")
        assert one_run(store, NAME, "c000", _start(store, "c000")).status == "failed"
        assert ProjectionCache(store.engine).head(NAME, PROJECTION).seq == store.last_seq(NAME)
        assert one_run(store, NAME, "d000", _start(store, "d000")).status == "succeeded"
        # code of another version stored it: folded anew, and stored for the next reader
        cache = ProjectionCache(store.engine)
        head = cache.head(NAME, PROJECTION)
        cache.save(NAME, PROJECTION, type(head)("older", head.seq), {}, since=head)
        assert one_run(store, NAME, "a001", _start(store, "a001")).command == "do step-1"
        assert cache.head(NAME, PROJECTION).version == stored.version()
    finally:
        store.close()


def test_show_reads_no_other_run(db: str, tmp_path: Path) -> None:
    rb = write_runbook(tmp_path, f'[journal]\nname = "{NAME}"\n[hosts.box]\nssh = "local"\n')
    store = EventStore(db)
    try:
        kept = [_key_of(store, _start(store, run)) for run in ("a002", "b000")]
        with store.engine.begin() as conn:  # every other row spoilt: show never decodes one
            conn.execute(
                sql(
                    "UPDATE projection_rows SET body = '{' WHERE key LIKE 'i:%' AND key <> :a "
                    "AND key <> :b"
                ),
                {"a": kept[0], "b": kept[1]},
            )
    finally:
        store.close()
    shown = journal("show", "a002", db=db, runbook=rb)
    assert shown.returncode == 0, text(shown.stderr)
    out = text(shown.stdout)
    assert "run a002: step-2 on box" in out and "torch 2.9.0 -> 2.10.0" in out
    assert "line of run 2" in out
    dated = journal("show", "b00", "--format", "json", db=db, runbook=rb)
    assert dated.returncode == 0, text(dated.stderr)
    doc = json.loads(dated.stdout)
    assert doc["run"] == "b000" and doc["output_tail"] == ["imported line"]
    cast = journal("export", "cast", "a004", "-o", str(tmp_path / "a.cast"), db=db, runbook=rb)
    assert cast.returncode == 0, text(cast.stderr)


def test_a_run_is_named_as_find_run_names_it(db: str) -> None:
    store = EventStore(db)
    try:
        runs = list(current_timeline(store, NAME, lambda machine, pid: True).runs)
        for name in ("a003", "b", "c0", "a000"):
            assert find_stored_run(store, NAME, name)[0] == find_run(NAME, name, runs)
        assert find_stored_run(store, NAME, "b000")[1] == _start(store, "b000")
        for name in ("a00", "a", "zzz", "a00x", "", "c001"):
            with pytest.raises(BadInput) as whole:
                find_run(NAME, name, sorted(runs))
            with pytest.raises(BadInput) as indexed:
                find_stored_run(store, NAME, name)
            assert str(indexed.value) == str(whole.value)
    finally:
        store.close()
