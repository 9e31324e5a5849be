"""The story at a glance, as the journal page, the CLI and the postmortem tell it: the demo's
upgrade (torch 2.10.0+cu128 → 2.12.0.dev…+cu130 on `local`), its headline throughput and its
findings by state."""

from __future__ import annotations

from pathlib import Path

from journal.service.findings import journal_findings
from journal.service.story import lines, run_status, story
from journal.store import EventStore


def _told(db: Path):  # type: ignore[no-untyped-def]
    store = EventStore(str(db))
    try:
        found, timeline = journal_findings(store, "cuda13-demo")
    finally:
        store.close()
    return story(timeline, found), timeline, found


def test_the_demo_story_names_the_stack_before_and_after(demo_journal: tuple[Path, Path]) -> None:
    told, _, _ = _told(demo_journal[0])
    (local,) = [h for h in told.hosts if h.host == "local"]
    stack = {m.what: (m.before, m.after) for m in local.stack}
    assert stack["torch"] == ("2.10.0+cu128", "2.12.0.dev20260226+cu130")
    assert stack["CUDA"] == ("12.8", "13.0")
    assert stack["NCCL"] == ("2.22.3", "2.28.9")
    assert "driver" not in stack  # no GPU here: nothing read is not a version
    moved = {m.what: (m.before, m.after) for m in local.packages}
    assert moved["nvidia-nccl-cu13"] == (None, "2.28.9")
    head = told.headline
    assert head is not None and (head.first, head.worst, head.last) == (90.0, 54.1, 96.1)
    text = "\n".join(lines(told))
    assert "torch 2.10.0+cu128 → 2.12.0.dev20260226+cu130" in text
    assert "90.00 → 54.10 → 96.10 tok/s" in text
    assert told.as_dict()["findings"]["resolved"] == told.resolved > 0


def test_an_install_that_changed_nothing_is_shown_as_no_change(
    demo_journal: tuple[Path, Path],
) -> None:
    _, timeline, found = _told(demo_journal[0])
    noop = {f.run for f in found if f.id == "noop-install"}
    assert noop
    shown = {r.run_id: run_status(r, found) for r in timeline.step_runs()}
    assert {shown[run] for run in noop} == {"no change"}
    assert "succeeded" in shown.values()  # the others keep their own status


def test_imported_commands_without_times_read_untimed_on_the_timeline(
    demo_journal: tuple[Path, Path], tmp_path: Path
) -> None:
    from journal.web import create_app
    from tests.conftest import copy_demo

    db = copy_demo(demo_journal, tmp_path)
    client = create_app({"DB": str(db), "TESTING": True}).test_client()
    page = client.get("/j/cuda13-demo?every=1").get_data(as_text=True)
    assert "untimed" in page and "0.00s" not in page  # the demo's GPU session has no times
