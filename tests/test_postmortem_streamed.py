"""`journal export postmortem` reads the stored timeline and the findings projection a batch at
a time and writes its document as it is made (issue 29): what it writes is, byte for byte, the
document held whole (as the web builds it from its timeline and findings in memory), for the
whole journal, a period (`--since`), a plan run (`--plan-run`) and both, in every format.

The journal is the real demo (real uv, stand-in wheels) with a real H200 transcript imported
and the runs a crash leaves (one lost mid-run, one that never launched, a transcript command
placed by its own time among the steps)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journal.export import postmortem as export
from journal.export.changes import failures, read_outputs
from journal.projections.period import Part, cut, find_plan_run
from journal.runs import ShortIds
from journal.service.findings import findings_in, journal_findings
from journal.store import EventStore
from tests.conftest import crashed_demo
from tests.helpers import journal, text

BASE = "http://journal.test"


@pytest.fixture(scope="module")
def db(demo_journal: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return crashed_demo(demo_journal, tmp_path_factory.mktemp("postmortem-streamed"))


def _held(db: Path, part: Part) -> dict | None:
    """The document held whole, as `journal export postmortem` built it before it streamed."""
    store = EventStore(str(db))
    try:
        name = next(iter(store.read())).journal
        findings, timeline = journal_findings(store, name)
        if part:
            timeline = cut(timeline, part)
            findings = findings_in(findings, timeline)
            if export.is_empty(timeline):
                return None
        return export.build(
            findings,
            timeline,
            outputs=read_outputs(store, name, timeline),
            tails=failures(store, timeline),
            base_url=BASE,
            part=part or None,
        )
    finally:
        store.close()


def _parts(db: Path) -> list[tuple[list[str], Part]]:
    store = EventStore(str(db))
    try:
        name = next(iter(store.read())).journal
        _, timeline = journal_findings(store, name)
        opened = [r for r in store.read(name) if r.event.type == "StepStarted"]
    finally:
        store.close()
    since = opened[len(opened) // 3].ts
    plan = find_plan_run(timeline, "latest")
    return [
        ([], Part()),
        (["--since", since], Part(since=since)),
        (["--plan-run", "latest"], Part(plan_run=plan)),
        (["--plan-run", "latest", "--since", since], Part(since=since, plan_run=plan)),
    ]


def _render(db: Path, held: dict, fmt: str) -> str:
    """The held document as the command writes it: run ids as short as the journal allows."""
    store = EventStore(str(db))
    try:
        return export.render(held, fmt, short=ShortIds(store.id_neighbours))
    finally:
        store.close()


@pytest.mark.parametrize("fmt", export.FORMATS)
def test_the_streamed_postmortem_is_the_held_one_byte_for_byte(db: Path, fmt: str) -> None:
    told = 0
    for args, part in _parts(db):
        done = journal("export", "postmortem", "--format", fmt, "--base-url", BASE, *args, db=db)
        held = _held(db, part)
        if held is None:  # a part without items: said so, as before
            assert done.returncode != 0 and "holds nothing" in text(done.stderr), args
            continue
        assert done.returncode == 0, (args, text(done.stderr))
        assert text(done.stdout) == _render(db, held, fmt), args
        if fmt == "json":
            assert json.loads(done.stdout) == json.loads(export.to_json(held)), args
            assert len(held["timeline"]) and held["supporting"]["commands"], args
        told += 1
    assert told >= 3  # the whole journal, a period and a plan run at least


def test_the_written_file_is_the_held_document(db: Path, tmp_path: Path) -> None:
    out = tmp_path / "pm.json"
    done = journal("export", "postmortem", "--base-url", BASE, "-o", str(out), db=db)
    assert done.returncode == 0, text(done.stderr)
    held = _held(db, Part())
    assert held is not None
    assert out.read_text(encoding="utf-8") == export.to_json(held)
    assert f"{len(held['timeline'])} timeline items" in text(done.stdout)
    assert {"crash-lost", "crash-never", "placed"} <= {e.get("run") for e in held["timeline"]}


def test_pitfalls_all_json_lists_every_finding_as_held(db: Path) -> None:
    store = EventStore(str(db))
    try:
        name = next(iter(store.read())).journal
        findings, _ = journal_findings(store, name)
    finally:
        store.close()
    done = journal("pitfalls", "--all", "--format", "json", db=db)
    assert done.returncode == 0, text(done.stderr)
    held = {"journal": name, "findings": [f.to_dict() for f in findings]}
    assert text(done.stdout) == json.dumps(held, indent=2) + "\n"
    assert held["findings"]


def test_a_read_begun_again_prints_the_postmortem_once(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process saves the stored timeline while the postmortem is being written: the
    read begins again, and stdout holds one postmortem, of the journal as it then stands."""
    from journal.events import NoteAdded
    from journal.projections.stored import brought_up

    mine = tmp_path / "journal.db"
    mine.write_bytes(db.read_bytes())
    write, calls = export.write, []

    def meanwhile(doc, fmt, out, *rest):  # type: ignore[no-untyped-def]
        calls.append(fmt)
        if len(calls) == 1:  # another process records a note and brings the timeline up
            other = EventStore(str(mine))
            try:
                name = next(iter(other.read())).journal
                other.append(name, [NoteAdded("written meanwhile", tags=["summary"])])
                brought_up(other, name)
            finally:
                other.close()
        return write(doc, fmt, out, *rest)

    monkeypatch.setattr(export, "write", meanwhile)
    done = journal("export", "postmortem", "--format", "json", db=mine)
    assert done.returncode == 0, text(done.stderr)
    assert len(calls) == 2  # begun again
    doc = json.loads(done.stdout)  # one document, not one and a half
    assert "written meanwhile" in [n["text"] for n in doc["summary"]["notes"]]


def test_a_period_tells_its_runs_findings_and_those_of_no_run_from_within_it(
    db: Path, tmp_path: Path
) -> None:
    """A figure recorded by hand that fell (a finding of no run) within the period, and the
    runs' own findings: the postmortem of the period tells both, as the held one does."""
    mine = tmp_path / "journal.db"
    mine.write_bytes(db.read_bytes())
    for value in ("90", "60"):
        done = journal("record", "metric", "output_token_throughput", value, "--unit", "tok/s",
                       "--label", "host=gpu-box", db=mine)  # fmt: skip
        assert done.returncode == 0, text(done.stderr)
    store = EventStore(str(mine))
    try:
        name = next(iter(store.read())).journal
        opened = [r.ts for r in store.read(name, types=["StepStarted"])]
    finally:
        store.close()
    since = opened[len(opened) // 3]
    held = _held(mine, Part(since=since))
    assert held is not None
    found = {(p["id"], p.get("run") is None) for p in held["pitfalls"]}
    assert ("throughput-regression", True) in found and any(not none for _, none in found)
    done = journal("export", "postmortem", "--format", "json", "--base-url", BASE,
                   "--since", since, db=mine)  # fmt: skip
    assert done.returncode == 0, text(done.stderr)
    assert done.stdout and json.loads(done.stdout) == json.loads(export.to_json(held))
