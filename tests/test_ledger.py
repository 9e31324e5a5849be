"""The findings projection: persisted, brought up to date with only what is new, and always
the same as judging the whole journal again, on SQLite and PostgreSQL.

The reference is :func:`journal.service.findings.replayed_findings` (every event read and
judged from scratch); the ledger must agree with it however the journal grew between reads:
event by event, in batches, while other processes append, after a rebuild, after its code
changed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from journal.events import (
    NoteAdded,
    OutputChunk,
    PitfallAcknowledged,
    PitfallUnacknowledged,
    StepFinished,
    StepStarted,
)
from journal.mapper import Recorded
from journal.pitfalls import ledger as ledger_module
from journal.pitfalls.base import Finding, Tally
from journal.pitfalls.ledger import PROJECTION, Ledger
from journal.projections.drift import EVENT_TYPES
from journal.service.findings import replayed_findings
from journal.store import EventStore
from journal.store.cache import Head, ProjectionCache
from tests.conftest import copy_demo
from tests.helpers import journal, text, write_runbook

DEMO = "cuda13-demo"
TRANSCRIPTS = Path(__file__).parent / "data" / "transcripts"


class Upto:
    """The store as it stood when its newest event was ``limit``: what a command that ran
    then read."""

    def __init__(self, store: EventStore, limit: int) -> None:
        self.store, self.limit, self.engine = store, limit, store.engine

    def read(self, journal: str | None = None, **kw: object) -> Iterator[Recorded]:
        for rec in self.store.read(journal, **kw):  # type: ignore[arg-type]
            if rec.seq <= self.limit:
                yield rec

    def last_seq(self, journal: str) -> int:
        return min(self.store.last_seq(journal), self.limit)

    def liveness(self):  # type: ignore[no-untyped-def]
        return self.store.liveness()


class Counting(Upto):
    """The whole store, saying which events were read."""

    def __init__(self, store: EventStore) -> None:
        super().__init__(store, 10**12)
        self.seen: list[int] = []

    def read(self, journal: str | None = None, **kw: object) -> Iterator[Recorded]:
        for rec in super().read(journal, **kw):
            self.seen.append(rec.seq)
            yield rec


def never_alive(machine: str, pid: int) -> bool:
    return False


def shown(found: list[Finding]) -> list[tuple]:
    """What a reader sees of each finding, in order. What resolved it is compared but for its
    event: a figure seen before its run's figures were recorded points at the output line it
    was read from, afterwards at the recorded figure (the same run, figure and words)."""
    return [
        (
            f.key,
            f.severity,
            f.state,
            f.title,
            f.advice,
            f.evidence,
            replace(f.resolved_by, event=None) if f.resolved_by else None,
            f.regression_of,
        )
        for f in found
    ]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, demo_journal: tuple[Path, Path]) -> Path:
    return copy_demo(demo_journal, tmp_path_factory.mktemp("ledger-demo"))


@pytest.mark.parametrize("step", [1, 4, 25])
def test_folded_as_it_grew_the_ledger_says_what_a_full_replay_says(
    demo: Path, tmp_path: Path, step: int
) -> None:
    db = tmp_path / "journal.db"
    db.write_bytes(demo.read_bytes())
    store = EventStore(str(db))
    try:
        last = store.last_seq(DEMO)
        for limit in [*range(1, last, step), last]:
            Ledger(Upto(store, limit), DEMO, never_alive).advance()  # type: ignore[arg-type]
        expected, _ = replayed_findings(store, DEMO)
        assert shown(Ledger(store, DEMO, never_alive).findings()) == shown(expected)
        assert {f.state for f in expected} == {"open", "resolved"}
    finally:
        store.close()


def test_its_tally_and_open_findings_say_what_every_finding_says(
    demo: Path, tmp_path: Path
) -> None:
    """`journal status` counts findings from the tally row and reads only the open errors:
    both must agree with the whole list however the journal grew and whatever was
    acknowledged (one finding, a pitfall wide, a resolved one, then withdrawn)."""
    db = tmp_path / "journal.db"
    db.write_bytes(demo.read_bytes())
    store = EventStore(str(db))

    def agrees() -> Tally:
        ledger = Ledger(store, DEMO, never_alive)
        every = ledger.findings()
        told = ledger.tally()
        assert told == Tally.of(every)
        for severity in ("error", "warning", "info"):
            assert shown(ledger.open_findings(severity)) == shown(
                [f for f in every if f.is_open and f.severity == severity]
            )
        return told

    def noop() -> None:
        """An imported `uv pip install` that changed nothing: an open noop-install."""
        run = f"noop{store.last_seq(DEMO)}"
        said = "Resolved 3 packages in 512ms\nChecked 3 packages in 29ms\n"
        command = "uv pip install torch --index-url https://download.pytorch.org/whl/cu130"
        store.append(
            DEMO,
            [
                StepStarted(run, "imported", "gpu-box", "imported", command, imported=True),
                OutputChunk(run, "gpu-box", "stdout", said, "utf-8", len(said), 0.0),
                StepFinished(run, "gpu-box", "imported", None, 0.0),
            ],
        )

    try:
        last = store.last_seq(DEMO)
        for limit in [*range(1, last, 7), last]:
            Ledger(Upto(store, limit), DEMO, never_alive).advance()  # type: ignore[arg-type]
        agrees()
        noop()
        noop()
        agrees()
        every = Ledger(store, DEMO, never_alive).findings()
        opened = [f for f in every if f.is_open]
        resolved = [f for f in every if f.state == "resolved"]
        one = next(f for f in opened if f.id != "noop-install")
        assert resolved and sum(1 for f in opened if f.id == "noop-install") == 2
        acks = [
            PitfallAcknowledged(one.key, "looked at"),
            PitfallAcknowledged("noop-install", "all of them so far"),
            PitfallAcknowledged(resolved[0].key, "already fixed"),
        ]
        for ack in acks:
            store.append(DEMO, [ack])
            agrees()
        noop()  # after the pitfall-wide acknowledgement: open
        told = agrees()
        assert told.acknowledged == 3
        assert sum(told.open.values()) == len(opened) - 3 + 1
        assert told.resolved == len(resolved)
        store.append(DEMO, [PitfallUnacknowledged(one.key), PitfallUnacknowledged("noop-install")])
        assert sum(agrees().open.values()) == len(opened) + 1
    finally:
        store.close()


def test_a_command_reads_only_what_came_after_the_stored_head(demo: Path, tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    db.write_bytes(demo.read_bytes())
    store = EventStore(str(db))
    try:
        first = Ledger(store, DEMO).advance()
        head = ProjectionCache(store.engine).head(DEMO, PROJECTION)
        assert head is not None and head.seq == first.seq == store.last_seq(DEMO)
        counting = Counting(store)
        store.append(DEMO, [NoteAdded("checked by hand")])
        Ledger(counting, DEMO).advance()  # type: ignore[arg-type]
        assert counting.seen == [head.seq + 1]  # the note, and nothing before it
    finally:
        store.close()


def test_rebuild_refills_it_and_verify_never_reads_it(demo: Path, tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    db.write_bytes(demo.read_bytes())
    store = EventStore(str(db))
    try:
        right_findings = Ledger(store, DEMO).findings()
        right = shown(right_findings)
        # The stored state is a cache: spoil it, and verify still finds the chain intact.
        cache = ProjectionCache(store.engine)
        rows = cache.rows(DEMO, PROJECTION)
        spoiled = {k: [] for k in rows if k.startswith("run:")}
        head = cache.head(DEMO, PROJECTION)
        assert cache.save(DEMO, PROJECTION, head, spoiled, since=head)
        assert Ledger(store, DEMO).findings() == []
    finally:
        store.close()
    assert journal("verify", db=db).returncode == 0
    rebuilt = journal("rebuild", db=db)
    assert rebuilt.returncode == 0, text(rebuilt.stderr)
    opened = sum(1 for f in right_findings if f.is_open)
    assert f"findings: {len(right)} ({opened} open)".encode() in rebuilt.stdout
    store = EventStore(str(db))
    try:
        assert shown(Ledger(store, DEMO).findings()) == right
        # every stored projection is made again, the drift's readings too: `journal drift`
        # after a rebuild reads no event
        cache = ProjectionCache(store.engine)
        for name in (PROJECTION, "timeline"):
            made = cache.head(DEMO, name)
            assert made is not None and made.seq == store.last_seq(DEMO), name
        made = cache.head(DEMO, "drift")
        assert made is not None and not list(store.read(DEMO, types=EVENT_TYPES, after=made.seq))
    finally:
        store.close()


def test_a_state_made_by_other_detectors_is_judged_again(demo: Path, tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    db.write_bytes(demo.read_bytes())
    store = EventStore(str(db))
    try:
        Ledger(store, DEMO).advance()
        # the stored state as an older journal (other detector code) left it
        cache = ProjectionCache(store.engine)
        head = cache.head(DEMO, PROJECTION)
        assert head is not None
        older = Head("an-older-version", head.seq)
        assert cache.save(DEMO, PROJECTION, older, {}, since=head)
        counting = Counting(store)
        found = Ledger(counting, DEMO).findings()  # type: ignore[arg-type]
        assert counting.seen[0] == 1 and len(counting.seen) >= store.count(DEMO)  # every event
        head = cache.head(DEMO, PROJECTION)
        assert head is not None and head.version == ledger_module.version()
        assert shown(found) == shown(replayed_findings(store, DEMO)[0])
    finally:
        store.close()


def test_a_running_step_is_judged_on_every_read_and_kept_once_it_ended(tmp_path: Path) -> None:
    store = EventStore(str(tmp_path / "journal.db"))
    error = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    try:
        store.append("live", [StepStarted("r1", "serve", "box", "local", "python3 serve.py")])
        store.append("live", [OutputChunk("r1", "box", "stderr", error, "utf-8", len(error), 0.2)])
        alive = Ledger(store, "live", alive=lambda machine, pid: True)
        (running,) = [f for f in alive.findings() if f.id == "no-kernel-image"]
        assert running.run == "r1"
        rows = ProjectionCache(store.engine).rows("live", PROJECTION)
        assert "run:r1" not in rows and rows["pending"] == ["r1"]  # not kept while it runs
        store.append("live", [StepFinished("r1", "box", "failed", 1, 0.4)])
        (ended,) = [f for f in alive.findings() if f.id == "no-kernel-image"]
        assert ended == running
        rows = ProjectionCache(store.engine).rows("live", PROJECTION)
        assert [d["id"] for d in rows["run:r1"]] == ["no-kernel-image"] and rows["pending"] == []
    finally:
        store.close()


RUNBOOK = """\
[journal]
name = "busy"

[hosts.here]
ssh = "local"

[[steps]]
name = "noop"
run = "true"
snapshots = false
"""

WRITER = """
import sys
from journal.events import StepFinished, StepStarted, OutputChunk
from journal.store import EventStore
store = EventStore(sys.argv[1])
name = sys.argv[2]
out = "Resolved 3 packages in 512ms\\nChecked 3 packages in 29ms\\n"
cmd = "uv pip install torch --index-url https://download.pytorch.org/whl/nightly/cu130"
for i in range(int(sys.argv[3])):
    run = f"{name}-{i}"
    store.append("busy", [
        StepStarted(run, "imported", name, "imported", cmd, imported=True),
        OutputChunk(run, name, "stdout", out, "utf-8", len(out), 0.0),
        StepFinished(run, name, "imported", None, 0.0),
    ])
"""


def test_two_writers_and_a_reader_at_once_see_every_event_once(store_url: str) -> None:
    """Two processes append while a third reads the findings over and over: the ledger it
    leaves is the full replay's, each finding once (on SQLite and on PostgreSQL)."""
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, store_url, host, "30"], stderr=subprocess.PIPE
        )
        for host in ("alpha", "beta")
    ]
    reader = """
import sys, time
from journal.pitfalls.ledger import Ledger
from journal.store import EventStore
store = EventStore(sys.argv[1])
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    found = Ledger(store, "busy").findings()
    keys = [f.key for f in found]
    assert len(keys) == len(set(keys)), "a finding twice"
    if len(found) >= 60:
        break
"""
    reading = subprocess.Popen([sys.executable, "-c", reader, store_url], stderr=subprocess.PIPE)
    for proc in (*writers, reading):
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err.decode()
    store = EventStore(store_url)
    try:
        expected, _ = replayed_findings(store, "busy")
        assert len(expected) == 60  # a noop install per command
        assert shown(Ledger(store, "busy").findings()) == shown(expected)
    finally:
        store.close()


def test_a_step_after_an_imported_session_is_judged_with_it(tmp_path: Path) -> None:
    """The seed's session imported, then a step run: `journal pitfalls` (from the ledger the
    step left) says what a full replay says, the session's findings included."""
    rb = write_runbook(tmp_path, RUNBOOK)
    db = tmp_path / "journal.db"
    imported = journal(
        "import",
        "transcript",
        str(TRANSCRIPTS / "seed-session.txt"),
        "--host",
        "gpu-box",
        db=db,
        runbook=rb,
    )
    assert imported.returncode == 0, text(imported.stderr)
    assert journal("pitfalls", db=db, runbook=rb).returncode == 0  # the ledger made
    step = journal("run", "step", "noop", db=db, runbook=rb)
    assert step.returncode == 0, text(step.stderr)
    listed = json.loads(journal("pitfalls", "--all", "--format", "json", db=db, runbook=rb).stdout)
    store = EventStore(str(db))
    try:
        expected, _ = replayed_findings(store, "busy")
        assert [f["key"] for f in listed["findings"]] == [f.key for f in expected]
        assert "noop-install" in {f.id for f in expected}
    finally:
        store.close()


@pytest.mark.parametrize(("batch", "save_rows"), [(7, 20_000), (40, 20_000), (7, 1)])
def test_findings_resolved_across_batches_stay_resolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int, save_rows: int
) -> None:
    """A host whose smoke test failed again and again (no kernel image) and then went through
    on two hosts: a fold in batches (a long journal, a rebuild) resolves every stored finding
    the later runs resolve, as judging the whole journal again does. (Findings loaded from
    the store and resolved were freed, and the next finding made took one's place among the
    resolved ones: some stayed open, others were marked resolved by another's fact.) Saved as
    it goes after every batch (``save_rows`` 1: what a year's journal judged anew does), the
    same, and the tally counts them alike."""
    monkeypatch.setattr(ledger_module, "BATCH", batch)
    monkeypatch.setattr(ledger_module, "SAVE_ROWS", save_rows)
    store = EventStore(str(tmp_path / "journal.db"))
    crash = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    events = []
    for n in range(24):
        host = ("gpu-a", "gpu-b")[n % 2]
        ok = 16 <= n < 22 and n % 3 != 0  # and failing again at the end
        run = f"run-{n:03d}"
        events += [
            StepStarted(run, "smoke", host, "local", "python smoke.py"),
            OutputChunk(
                run,
                host,
                "stdout" if ok else "stderr",
                "ok\n" if ok else crash,
                "utf-8",
                3 if ok else len(crash),
                0.1,
            ),
            StepFinished(run, host, "succeeded" if ok else "failed", 0 if ok else 1, 0.2),
        ]
    try:
        for start in range(0, len(events), 5):
            store.append("smoke", events[start : start + 5])
        expected, _ = replayed_findings(store, "smoke")
        found = Ledger(store, "smoke", never_alive).findings()
        assert shown(found) == shown(expected)
        told = Ledger(store, "smoke", never_alive).tally()
        assert sum(told.open.values()) == sum(f.is_open for f in expected)
        assert told.resolved == sum(f.state == "resolved" for f in expected)
        states = {f.state for f in expected if f.id == "no-kernel-image"}
        assert states == {"resolved", "open"}
    finally:
        store.close()


@pytest.mark.parametrize("group", [1, 64])
def test_a_batch_judged_in_groups_of_hosts_says_what_judging_it_at_once_says(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, group: int
) -> None:
    """A batch whose output is over GROUP_BYTES is judged a few hosts at a time, its output
    read back from the store (a fleet step on 64 hosts): the findings are those of judging
    it at once, and of a full replay. With a group of 1 byte every host is a group of its
    own and every chunk is read back; interleaved runs of a fleet step and of the demo."""
    db = tmp_path / "journal.db"
    db.write_bytes(demo.read_bytes())
    store = EventStore(str(db))
    crash = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    events = []
    for n in range(12):
        host = f"gpu-{n % 4}"
        run = f"fleet-{n:03d}"
        events.append(StepStarted(run, "smoke", host, "local", "python smoke.py"))
    for n in range(12):
        run, host, ok = f"fleet-{n:03d}", f"gpu-{n % 4}", n >= 8 and n % 4 != 1
        body = "ok\n" if ok else "line of the build\n" * 20 + crash
        events.append(OutputChunk(run, host, "stderr", body, "utf-8", len(body), 0.1))
    for n in range(12):
        ok = n >= 8 and n % 4 != 1
        host = f"gpu-{n % 4}"
        events.append(
            StepFinished(
                f"fleet-{n:03d}", host, "succeeded" if ok else "failed", 0 if ok else 1, 0.2
            )
        )
    try:
        store.append(DEMO, events)
        at_once = Ledger(store, DEMO, never_alive).findings()
        store.engine.dispose()
        fresh = EventStore(str(db))
        ProjectionCache(fresh.engine).drop(DEMO, PROJECTION)
        monkeypatch.setattr(ledger_module, "GROUP_BYTES", group)
        grouped = Ledger(fresh, DEMO, never_alive).findings()
        expected, _ = replayed_findings(fresh, DEMO)
        fresh.close()
        assert shown(grouped) == shown(at_once) == shown(expected)
        assert {f.state for f in grouped if f.id == "no-kernel-image"} == {"open", "resolved"}
    finally:
        store.close()
