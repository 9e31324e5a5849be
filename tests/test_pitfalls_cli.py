"""`journal pitfalls`, `pitfalls ack`, `lint` and `import transcript` through the real CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from journal.events import PitfallAcknowledged, StepStarted, TranscriptImported
from journal.pitfalls import catalogue
from journal.store import EventStore
from tests.conftest import copy_demo
from tests.helpers import journal, no_traceback, text

SEED = Path(__file__).parent / "data" / "transcripts" / "seed-session.txt"


@pytest.fixture(scope="module")
def demo(
    tmp_path_factory: pytest.TempPathFactory, demo_journal: tuple[Path, Path]
) -> tuple[Path, Path]:
    return copy_demo(demo_journal, tmp_path_factory.mktemp("demo")), demo_journal[1]


def findings_of(db: Path, rb: Path) -> list[dict]:
    result = journal("pitfalls", "--all", "--format", "json", db=db, runbook=rb)
    assert result.returncode == 0, text(result.stderr)
    return json.loads(result.stdout)["findings"]


def test_the_demo_journal_is_judged_with_evidence_from_its_events(demo) -> None:
    db, rb = demo
    found = {(f["step"], f["id"]): f for f in findings_of(db, rb)}
    noop = found[("install-torch", "noop-install")]
    assert noop["severity"] == "error"
    assert "--reinstall" in noop["advice"]
    assert any(e["text"].startswith("Checked 3 packages") for e in noop["evidence"])
    for ev in noop["evidence"]:
        assert set(ev) >= {"line", "text", "event"} and isinstance(ev["event"], int)
    assert ("install-torch", "variant-not-switched") in found
    # verify-torch-again passed its expectations: nothing about it
    assert not [k for k in found if k[0] == "verify-torch-again"]
    # reinstall-torch resolved it: `journal pitfalls` lists it only with --all
    assert noop["state"] == "resolved" and noop["resolved_by"]["step"] == "reinstall-torch"
    assert b"ERROR   noop-install" not in journal("pitfalls", db=db, runbook=rb).stdout
    listing = journal("pitfalls", "--all", db=db, runbook=rb)
    assert b"ERROR   noop-install  install-torch on local (run " in listing.stdout
    assert (
        b"[RESOLVED]\n" in listing.stdout
        and b"resolved: reinstall-torch on local" in listing.stdout
    )


def test_acknowledging_a_finding_records_it_and_marks_it(demo, tmp_path: Path) -> None:
    db, rb = demo
    copy = tmp_path / "journal.db"
    shutil.copy(db, copy)
    key = next(f["key"] for f in findings_of(copy, rb) if f["id"] == "downgrade-cascade")
    bad = journal("pitfalls", "ack", "downgrade-cascad", "--note", "x", db=copy, runbook=rb)
    assert bad.returncode == 2 and b"did you mean 'downgrade-cascade'" in bad.stderr
    assert no_traceback(bad)
    missing_note = journal("pitfalls", "ack", key, db=copy, runbook=rb)
    assert missing_note.returncode == 2
    ok = journal("pitfalls", "ack", key, "--note", "fixed by reinstall-torch", db=copy, runbook=rb)
    assert ok.returncode == 0, text(ok.stderr)
    after = {f["key"]: f for f in findings_of(copy, rb)}
    assert after[key]["acknowledged"]["note"] == "fixed by reinstall-torch"
    assert after[key]["state"] == "acknowledged"
    assert all(f["acknowledged"] is None for k, f in after.items() if k != key)
    store = EventStore(str(copy))
    try:
        acks = [
            r.event for r in store.read("cuda13-demo") if isinstance(r.event, PitfallAcknowledged)
        ]
    finally:
        store.close()
    assert [(a.finding, a.note) for a in acks] == [(key, "fixed by reinstall-torch")]
    listing = journal("pitfalls", "--all", db=copy, runbook=rb).stdout
    assert b"[ACKNOWLEDGED]" in listing and b": fixed by reinstall-torch\n" in listing
    assert key.encode() not in journal("pitfalls", db=copy, runbook=rb).stdout


def test_lint_judges_a_pasted_session_without_a_database(tmp_path: Path) -> None:
    result = journal("lint", str(SEED), "--format", "json", cwd=tmp_path)
    assert result.returncode == 1, text(result.stderr)  # warnings found
    found = json.loads(result.stdout)["findings"]
    ids = [f["id"] for f in found]
    assert "noop-install" in ids and "variant-not-switched" in ids
    noop = found[ids.index("noop-install")]
    assert noop["file"] == str(SEED)
    assert {"line": 5, "text": "Audited 3 packages in 29ms"} in noop["evidence"]
    assert all(set(e) == {"line", "text"} for f in found for e in f["evidence"])
    variant = found[ids.index("variant-not-switched")]
    assert {"line": 7, "text": "torch: 2.10.0+cu128"} in variant["evidence"]
    assert not list(tmp_path.iterdir())  # no database made
    plain = journal("lint", str(SEED), cwd=tmp_path)
    assert b"WARNING noop-install" in plain.stdout and b"line 5: Audited 3 packages" in plain.stdout


def test_lint_of_a_clean_session_finds_nothing_and_bad_files_are_refused(tmp_path: Path) -> None:
    clean = tmp_path / "clean.txt"
    clean.write_text("$ echo hello\nhello\n$ python3 -c 'print(1)'\n1\n")
    result = journal("lint", str(clean), "--format", "json")
    assert (result.returncode, json.loads(result.stdout)) == (0, {"findings": []})
    missing = journal("lint", str(tmp_path / "nope.txt"))
    assert missing.returncode == 2 and b"no such transcript file" in missing.stderr
    assert no_traceback(missing)


def test_import_transcript_records_each_command_as_an_imported_step_run(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    result = journal(
        "--journal", "by-hand", "import", "transcript", str(SEED), "--host", "gpu-box", db=db
    )
    assert result.returncode == 0, text(result.stderr)
    assert b"imported 4 commands" in result.stdout
    store = EventStore(str(db))
    try:
        records = list(store.read("by-hand"))
    finally:
        store.close()
    imported = [r.event for r in records if isinstance(r.event, TranscriptImported)]
    assert [(i.host_name, i.commands) for i in imported] == [("gpu-box", 4)]
    starts = [r.event for r in records if isinstance(r.event, StepStarted)]
    assert [s.imported for s in starts] == [True] * 4
    assert starts[1].command.startswith("~/ml-env/bin/python3 -c")
    listed = journal("--journal", "by-hand", "pitfalls", "--all", "--format", "json", db=db)
    found = json.loads(listed.stdout)["findings"]
    assert {f["id"] for f in found} >= {"noop-install", "variant-not-switched"}
    assert all(f["host"] == "gpu-box" for f in found)
    log = journal("--journal", "by-hand", "log", db=db)
    assert b"imported" in log.stdout
    bad = journal("--journal", "by-hand", "import", "transcript", str(SEED), "--host", "a b", db=db)
    assert bad.returncode == 2 and no_traceback(bad)


def test_every_catalogue_id_has_a_detector_with_its_explanation() -> None:
    design = Path(__file__).resolve().parents[2] / "shared" / "DESIGN.md"
    ids = {
        "noop-install",
        "variant-not-switched",
        "downgrade-cascade",
        "torch-replaced",
        "dependency-conflict",
        "masked-exit",
        "cpu-torch",
        "arch-unsupported",
        "no-kernel-image",
        "driver-too-old",
        "toolkit-mismatch",
        "abi-mismatch",
        "numpy-abi",
        "nccl-changed",
        "nccl-skew",
        "version-guard",
        "throughput-regression",
        "bench-invalid",
        "step-interrupted",
        "unverified-change",
        "rollback-incomplete",
        "snapshot-failed",
    }
    if design.exists():
        assert ids <= set(design.read_text().split("`"))
    assert set(catalogue()) == ids
    for module in catalogue().values():
        assert module.__doc__ and len(module.__doc__.split()) >= 20, module.ID
