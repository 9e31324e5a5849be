"""`journal status`, `log` and the story read the stored timeline's index, not the timeline, and
`journal drift` its kept readings (issue 29):
whatever order the events come in, and however many a reader finds new, what the index answers
is what the whole timeline folded from scratch says — the latest run of each step on each host
and each host's last, the story (stack first and latest, packages moved, snapshots and probes
that failed), the hosts known only from imports with their transcript reading, the lost runs.

The journal is the real demo (real uv, stand-in wheels) with a real H200 transcript imported,
plus the runs that only a record of a crash holds: one whose recorder died mid-run (lost), one
whose recorder died before it launched anything (not started, so an earlier run stands), a
transcript command placed by its own time among the steps, a failed probe on its own. Its
events are appended again to a fresh journal in chunks of random size, each reader asked after
each chunk."""

from __future__ import annotations

import dataclasses
import random
import shutil
from pathlib import Path

import pytest

from journal.events import NoteAdded, ProbeRecorded, StepFinished, StepStarted
from journal.projections import stored
from journal.projections.digest import Digest, digest
from journal.projections.drift import EVENT_TYPES, fold
from journal.projections.drift.kept import current_readings
from journal.projections.folder import settle
from journal.projections.imported import imported_hosts
from journal.projections.progress import HostState, progress
from journal.projections.timeline import project
from journal.runs import FAILURES
from journal.service.findings import findings, open_findings, tally
from journal.service.story import story
from journal.store import EventStore
from journal.store.cache import ProjectionCache
from tests.conftest import DEAD_PID, crash_runs, demo_with_transcript
from tests.helpers import journal, text


def _progress(hosts: list[HostState]) -> list[tuple]:
    return [
        (
            h.host,
            h.target,
            h.done,
            [(s.step, s.last.run_id if s.last else None, s.status) for s in h.steps],
            h.last.run_id if h.last else None,
        )
        for h in hosts
    ]


def _whole(store: EventStore, name: str) -> tuple:
    """What the readers say, from every event folded at once."""
    timeline = settle(project(name, store.read(name)), store.liveness())
    imported = imported_hosts(timeline)
    return (
        story(timeline, []).as_dict(),
        _progress([h for h in progress(timeline) if h.host not in imported]),
        {h: (i.commands, i.last.run_id, i.reading) for h, i in imported.items()},
        [v.run_id for v in timeline.runs.values() if v.status == "lost" and not v.imported],
    )


def _indexed(store: EventStore, name: str) -> tuple:
    """What the readers say, from the stored index (brought up to date first)."""

    def read(found: Digest) -> tuple:
        imported = found.imported_hosts()
        return (
            story(found, []).as_dict(),
            _progress([h for h in found.progress() if h.host not in imported]),
            {h: (i.commands, i.last.run_id, i.reading) for h, i in imported.items()},
            [v.run_id for v in found.lost()],
        )

    return digest(store, name, read)


@pytest.fixture(scope="module")
def recorded(demo_journal: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The demo with a transcript imported and a crash's runs: its journal's name and events."""
    db = demo_with_transcript(demo_journal, tmp_path_factory.mktemp("digest"))
    store = EventStore(str(db))
    try:
        name = next(iter(store.read())).journal
        plan = [r.event for r in store.read(name) if r.event.type == "JournalOpened"][-1].plan
        opened = [r for r in store.read(name) if r.event.type == "StepStarted"]
        first = next(r.event for r in opened if r.event.step in plan)
        host, step = first.host_name, first.step
        when = opened[len(opened) // 2].ts
        store.append(
            name,
            [
                *crash_runs(host, step, step, when),
                # a torch-env probe on its own that read nothing
                ProbeRecorded(host, "torch-env", None, 0.1, error="ImportError: no torch"),
            ],
        )
        records = list(store.read(name))
    finally:
        store.close()
    return name, [r.event for r in records]


@pytest.mark.parametrize("seed", [1, 2])
def test_the_index_answers_what_the_whole_timeline_says_whatever_the_chunks(
    recorded, tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    name, events = recorded
    assert len(events) > 100
    store = EventStore(str(tmp_path / "journal.db"))
    chances = random.Random(seed)
    try:
        at = 0
        asked = 0
        while at < len(events):
            size = chances.choice([1, 2, 3, 7, 20, 60])
            store.append(name, events[at : at + size])
            at += size
            if chances.random() < 0.5 or at >= len(events):
                assert _indexed(store, name) == _whole(store, name), f"after {at} events"
                # drift's readings, kept and folded on, are those of every event at once
                kept = dataclasses.asdict(current_readings(store, name))
                assert kept == dataclasses.asdict(fold(name, store.read(name, types=EVENT_TYPES)))
                asked += 1
        assert asked >= len(events) // 60
        told, hosts, imported, lost = _whole(store, name)
        # the journal holds what the comparison is about
        assert lost == ["crash-lost"] and "gpu-box" in imported
        assert imported["gpu-box"][2] is not None  # the transcript's torch, CUDA, driver
        assert any(h["unread"] for h in told["hosts"]) and told["headline"] is not None
        ran = {run for _, _, _, steps, _ in hosts for _, run, _ in steps}
        assert "crash-lost" in ran and "crash-never" not in ran
        # `journal pitfalls` reads the open findings through the pitfalls open: the same
        every = findings(store, name)
        assert [f.key for f in open_findings(store, name)] == [f.key for f in every if f.is_open]
        counted = tally(store, name)
        assert sum(counted.open.values()) + counted.acknowledged + counted.resolved == len(every)
        assert any(f.is_open for f in every) and any(not f.is_open for f in every)
        # folded anew (what a new version of journal does): the same
        ProjectionCache(store.engine).drop(name)
        assert _indexed(store, name) == (told, hosts, imported, lost)
        # and folded anew a batch at a time, as `journal rebuild` does: the same
        monkeypatch.setattr(stored, "BATCH_EVENTS", 7)
        ProjectionCache(store.engine).drop(name)
        stored.brought_up(store, name, anew=True)
        assert _indexed(store, name) == (told, hosts, imported, lost)
    finally:
        store.close()


def test_a_rebuild_places_a_dated_import_among_the_items_it_reads_back(
    recorded, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """`journal rebuild` folds a batch at a time; a pasted session dated among the steps is
    placed as a fold of the whole timeline places it, from the newest items read back down to
    the one before its time, and every stored row is the same as a whole fold's."""
    name, events = recorded
    store = EventStore(str(tmp_path / "journal.db"))
    try:
        store.append(name, events)
        opened = [r.ts for r in store.read(name, types=["StepStarted"])]
        store.append(
            name,
            [
                NoteAdded("pasted a second session of gpu-box"),
                NoteAdded("it ran while the plan did"),
                StepStarted(
                    "placed-again",
                    "nvidia-smi",
                    "gpu-box",
                    "imported",
                    "nvidia-smi -q",
                    imported=True,
                    at=opened[3 * len(opened) // 4],
                ),  # fmt: skip
                StepFinished("placed-again", "gpu-box", "succeeded", 0, 0.4),
            ],
        )
        told = _indexed(store, name)  # none stored yet: folded whole
        whole = _timeline_rows(store, name)
        items = [k for k in whole if k.startswith("i:")]
        again = next(k for k in items if whole[k].get("run_id") == "placed-again")
        assert again != max(items)  # placed among the steps, not at the end

        monkeypatch.setattr(stored, "BATCH_EVENTS", 3)
        looked: list[list[str] | None] = []
        landmarks = stored._landmarks

        def spied(*args: object) -> list[str] | None:
            looked.append(landmarks(*args))  # type: ignore[arg-type]
            return looked[-1]

        monkeypatch.setattr(stored, "_landmarks", spied)
        ProjectionCache(store.engine).drop(name)
        stored.brought_up(store, name, anew=True)
        # the first pasted command, dated before every item here, was placed first without
        # reading any back; the second on the newest items read back down to its time
        assert looked[0] == [] and looked[-1]
        assert _timeline_rows(store, name) == whole
        assert _indexed(store, name) == told
    finally:
        store.close()


def test_log_shows_the_newest_page_first_and_says_how_many_there_are(
    demo_journal: tuple[Path, Path], tmp_path: Path
) -> None:
    db = tmp_path / "journal.db"
    shutil.copy(demo_journal[0], db)
    runbook = demo_journal[1]

    def log(*args: str) -> tuple[int, str, str]:
        done = journal("log", *args, db=db, runbook=runbook)
        return done.returncode, text(done.stdout), text(done.stderr)

    every = json_of(db, runbook, "--limit", "0")["items"]
    assert len(every) > 12
    # the newest first, as many as asked, and the total said
    page = json_of(db, runbook, "--limit", "5")
    assert page["items"] == every[:5] and page["total"] == len(every)
    code, out, _ = log("--limit", "3")
    assert code == 0 and f"the newest 3 of {len(every)} items, newest first" in out
    # since a moment: what came after it, however many
    store = EventStore(str(db))
    try:
        middle = sorted({r.ts for r in store.read()})[len(every) // 2]
    finally:
        store.close()
    since = json_of(db, runbook, "--since", middle.removesuffix("Z"), "--limit", "0")["items"]
    assert 0 < len(since) < len(every) and since == every[: len(since)]
    assert json_of(db, runbook, "--since", "2099-01-01")["items"] == []
    # a host's page keeps the notes of no host; --failed only failed runs
    host = json_of(db, runbook, "--host", "local", "--limit", "0")["items"]
    notes = [i for i in every if i["kind"] == "note" and not i.get("host")]
    assert notes and all(n in host for n in notes)
    assert all(i["host"] == "local" for i in host if i["kind"] != "note")
    # bad input: said, exit 2, nothing shown
    for bad in (["--limit", "-1"], ["--since", "last tuesday"]):
        code, out, err = log(*bad)
        assert code == 2 and out == "" and bad[0] in err and "Traceback" not in err, err


def _timeline_rows(store: EventStore, name: str) -> dict:
    """Every row of the stored timeline but the story's headline as last worked out (and the
    save it marks: the last that changed a figure, one save folded whole, several in batches)."""
    rows = ProjectionCache(store.engine).rows(name, stored.PROJECTION)
    rows.pop("h:headline", None)
    rows["head"].pop("figures_at")
    return rows


def json_of(db: Path, runbook: Path, *args: str) -> dict:
    import json

    done = journal("log", "--format", "json", *args, db=db, runbook=runbook)
    assert done.returncode == 0, text(done.stderr)
    return json.loads(done.stdout)


def test_log_failed_pages_the_failed_runs_and_a_lost_one_among_them(
    demo_journal: tuple[Path, Path], tmp_path: Path
) -> None:
    db = demo_with_transcript(demo_journal, tmp_path)
    runbook = demo_journal[1]
    store = EventStore(str(db))
    try:
        name = next(iter(store.read())).journal
        first = next(r.event for r in store.read(name) if r.event.type == "StepStarted")
        host, step = first.host_name, first.step
        failures = []
        for run, on in (("fail-1", host), ("fail-2", "gpu-box"), ("fail-3", host)):
            failures += [
                StepStarted(run, step, on, "local", "false", pid=DEAD_PID, machine="x"),
                StepFinished(run, on, "failed", 1, 0.1),
            ]
        store.append(name, [*failures, *crash_runs(host, step, "other", first_ts(store))])
    finally:
        store.close()
    every = json_of(db, runbook, "--limit", "0")["items"]
    failed = [i for i in every if i["kind"] == "run" and i["status"] in FAILURES]
    assert [i["run"] for i in failed] == ["crash-lost", "fail-3", "fail-2", "fail-1"]
    whole = json_of(db, runbook, "--failed", "--limit", "0")
    assert whole["items"] == failed and whole["total"] == len(failed)
    page = json_of(db, runbook, "--failed", "--limit", "2")
    assert page["items"] == failed[:2] and page["total"] == len(failed)
    mine = json_of(db, runbook, "--failed", "--host", host, "--limit", "1")
    theirs = [i for i in failed if i["host"] == host]
    assert mine["items"] == theirs[:1] and mine["total"] == len(theirs)


def first_ts(store: EventStore) -> str:
    return next(iter(store.read())).ts
