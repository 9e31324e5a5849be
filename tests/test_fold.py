"""One fold, three ways of driving it: a journal's events folded all at once
(:func:`journal.projections.timeline.project`), in place batch after batch (the command line's
stored timeline, :func:`journal.projections.stored.current_timeline`) and copy on write batch
after batch (the web's :class:`journal.web.fold.JournalFold`) give the same timeline, across
a restore from the stored projection too, and the web's state the findings a full replay
judges. No browser, no server: the folds themselves."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest

from journal.events import (
    CommandLaunched,
    ExpectationChecked,
    HostKeyAccepted,
    JournalOpened,
    MetricRecorded,
    NoteAdded,
    OutputChunk,
    PackagesSnapshotted,
    PitfallAcknowledged,
    PitfallUnacknowledged,
    ProbeRecorded,
    StepFinished,
    StepReattached,
    StepStarted,
)
from journal.mapper import Recorded
from journal.projections import stored
from journal.projections.folder import Folder, settle
from journal.projections.stored import current_timeline
from journal.projections.timeline import Timeline, project
from journal.service.findings import replayed_findings
from journal.store import EventStore
from journal.store.cache import ProjectionCache
from journal.web.fold import JournalFold
from journal.web.state import JournalStates
from tests.conftest import copy_demo
from tests.test_ledger import Upto

DEMO = "cuda13-demo"
MIXED = "mixed"
TORCH = {"torch": {"name": "torch", "version": "2.9.0"}}
NEWER = {"torch": {"name": "torch", "version": "2.10.0"}}
ERROR = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"


def never_alive(machine: str, pid: int) -> bool:
    return False


def _mixed(store: EventStore) -> None:
    """A journal of every kind of item, in batches: runs with snapshots, probes, expectations
    and figures; a standalone probe and the expectations that attach to it; a dated imported
    run placed among earlier items; notes, host keys, acknowledgements; a run reattached, one
    never launched and one still without an end."""

    def chunk(run: str, text: str) -> OutputChunk:
        return OutputChunk(run, "box", "stdout", text, "utf-8", len(text), 0.0)

    store.append(MIXED, [JournalOpened(MIXED, "runbook.toml", {"box": "local"}, ["a", "b"])])
    store.append(
        MIXED,
        [
            HostKeyAccepted("box", "box.example", "ssh-ed25519", "SHA256:abc", "box ssh-ed25519"),
            StepStarted("r1", "a", "box", "env", "uv pip install torch", pid=1, machine="m"),
            PackagesSnapshotted("box", "before", "python", TORCH, 0.1, run="r1"),
            chunk("r1", "Resolved 3 packages\n"),
            chunk("r1", ERROR),
            PackagesSnapshotted("box", "after", "python", NEWER, 0.1, run="r1"),
            ProbeRecorded("box", "torch-env", {"torch": "2.10.0"}, 0.2, run="r1"),
            ExpectationChecked("box", "torch", "2.10.0", "2.10.0", "pass", run="r1"),
            MetricRecorded("tok_s", 90.0, "tok/s", {}, "manual", host_name="box", run="r1"),
            StepFinished("r1", "box", "failed", 1, 1.0),
        ],
    )
    store.append(
        MIXED,
        [
            NoteAdded("looked at it", tags=["gpu"], host_name="box"),
            ProbeRecorded("box", "torch-env", {"torch": "2.10.0"}, 0.1),
            ExpectationChecked("box", "torch", "2.10.0", "2.10.0", "pass", probe="torch-env"),
            ExpectationChecked("box", "cuda", "13.0", "12.8", "fail", reason="older"),
            MetricRecorded("tok_s", 80.0, "tok/s", {}, "manual", host_name="box"),
            PackagesSnapshotted("box", "probe", "python", NEWER, 0.1),
            PitfallAcknowledged("no-kernel-image", "known", "me"),
        ],
    )
    store.append(
        MIXED,
        [
            StepStarted(
                "r0", "dated", "box", "imported", "ls", imported=True, at="2001-01-01T00:00:00Z"
            ),
            chunk("r0", "one\ntwo\n"),
            StepFinished("r0", "box", "imported", None, 2.0),
            StepStarted("r2", "b", "box", "env", "sleep 9", pid=2, machine="m", launch_marked=True),
            StepStarted("r3", "b", "box", "env", "sleep 9", pid=3, machine="m", launch_marked=True),
            CommandLaunched("r3", "box"),
            chunk("r3", "started\n"),
            StepReattached("r3", "box", 4, "m2"),
            chunk("r3", "still going\n"),
            PitfallUnacknowledged("no-kernel-image", "me"),
            ExpectationChecked("box", "driver", "580", "580", "pass"),
        ],
    )
    store.append(MIXED, [StepFinished("r2", "box", "interrupted", None, 3.0, signal="SIGINT")])


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory, demo_journal: tuple[Path, Path]) -> Path:
    """The demo journal and the mixed one, in one database nobody changes."""
    path = copy_demo(demo_journal, tmp_path_factory.mktemp("fold"))
    store = EventStore(str(path))
    try:
        _mixed(store)
    finally:
        store.close()
    return path


def _all_at_once(name: str, records: list[Recorded]) -> Timeline:
    return settle(project(name, records), never_alive)


def _cuts(n: int) -> list[int]:
    """Batches of 1, 7, up to half and the rest."""
    return sorted({0, 1, min(8, n), max(min(8, n), n // 2), n})


@pytest.fixture
def store(db: Path, tmp_path: Path) -> Iterator[EventStore]:
    """A copy of the database without any stored projection."""
    copied = tmp_path / "journal.db"
    copied.write_bytes(db.read_bytes())
    store = EventStore(str(copied))
    ProjectionCache(store.engine).drop()
    yield store
    store.close()


@pytest.mark.parametrize("name", [DEMO, MIXED])
def test_folded_in_place_copy_on_write_or_at_once_the_timeline_is_one(
    store: EventStore, name: str
) -> None:
    records = list(store.read(name))
    cuts = _cuts(len(records))
    web = JournalFold(name, never_alive)
    cli = Folder(Timeline(name))
    shown = []  # what each web batch gave, as it was given
    for start, end in zip(cuts, cuts[1:], strict=False):
        batch = records[start:end]
        expected = _all_at_once(name, records[:end])
        given = web.extend(batch)
        shown.append((end, copy.deepcopy(given), given))
        assert given == expected
        assert cli.fold(batch, never_alive) == expected
        # both say alike which items the batch made or changed (what is stored again)
        keys = sorted(map(stored.item_key, web.changed))
        assert keys == sorted(map(stored.item_key, cli.changed))
        # the command line's stored timeline, folded on from where the last one stopped
        upto = Upto(store, records[end - 1].seq)
        assert current_timeline(upto, name, never_alive) == expected
    for end, then, given in shown:  # a later batch left an earlier timeline as it was
        assert given == then == _all_at_once(name, records[:end])


@pytest.mark.parametrize("name", [DEMO, MIXED])
def test_restored_from_the_stored_timeline_the_web_folds_on_to_the_same_timeline_and_findings(
    store: EventStore, name: str
) -> None:
    records = list(store.read(name))
    half = records[len(records) // 2].seq
    current_timeline(Upto(store, half), name, never_alive)  # stored up to half
    restored = stored.load(ProjectionCache(store.engine), name)
    assert restored is not None and restored.seq == half
    web = JournalFold.restored(restored, never_alive)
    assert web.timeline == _all_at_once(name, [r for r in records if r.seq <= half])
    whole = web.extend(r for r in records if r.seq > half)
    assert whole == _all_at_once(name, records)
    # a request of the web: restored from the stored timeline, folded on, stored again
    states = JournalStates(store)
    states.alive = never_alive
    state = states.get(name)
    assert state is not None and state.last_seq == records[-1].seq
    assert state.timeline == whole
    found, _ = replayed_findings(store, name)
    assert state.findings == found
    # what it stored is what the command line folds on from
    again = stored.load(ProjectionCache(store.engine), name)
    assert again is not None and again.seq == records[-1].seq
    assert settle(again.timeline, never_alive) == whole
    assert current_timeline(store, name, never_alive) == whole
