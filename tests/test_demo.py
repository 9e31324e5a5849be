"""`journal demo`: the seed's upgrade re-enacted with real uv against stand-in wheels."""

from __future__ import annotations

from pathlib import Path

from journal.demo.run import SAMPLES
from journal.events import MetricRecorded, NoteAdded, OutputChunk, StepFinished, StepStarted
from journal.output import decode
from journal.store import EventStore
from tests.helpers import journal, text


def test_the_demo_runs_its_plan_with_real_uv_and_records_the_story(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    result = journal("demo", str(folder))
    assert result.returncode == 0, text(result.stderr)
    assert b"install-torch" in result.stdout and b"verify-torch-again" in result.stdout
    # it ends with the way back, planned and not taken: the old stack from the host's default
    # index (the cu128 one it came from), the new NCCL removed
    said = text(result.stdout)
    plan = said[said.index("$ journal rollback --to before:install-torch --dry-run") :]
    assert "torch==2.10.0+cu128  (now 2.12.0.dev20260226+cu130) from the host's default" in plan
    assert "  remove 1:\n    nvidia-nccl-cu13 2.28.9" in plan
    assert said.index("rollback of local") > said.index("verify-torch-again")
    # its closing timeline says what `journal log` says: the no-op install changed nothing
    closing = said[: said.index("$ journal rollback")]
    assert "[NOOP] install-torch on local: no change" in closing, closing
    assert "] install-torch on local: succeeded" not in closing

    store = EventStore(str(folder / "journal.db"))
    try:
        records = list(store.read("cuda13-demo"))
        assert store.verify().ok
    finally:
        store.close()
    started = [r.event for r in records if isinstance(r.event, StepStarted)]
    runs = {e.run: e.step for e in started if e.benchmark is None and not e.imported}
    assert list(runs.values()) == [
        "backup-env",
        "install-torch",
        "verify-torch",
        "reinstall-torch",
        "verify-torch-again",
    ]
    out: dict[str, bytes] = dict.fromkeys(runs.values(), b"")
    for rec in records:
        if isinstance(rec.event, OutputChunk) and rec.event.run in runs:
            out[runs[rec.event.run]] += decode(rec.event)
    statuses = [
        r.event.status for r in records if isinstance(r.event, StepFinished) and r.event.run in runs
    ]
    assert statuses == ["succeeded"] * 5

    # uv said it had nothing to do, and torch stayed on the old variant...
    assert b"Checked 3 packages" in out["install-torch"] or b"Audited 3" in out["install-torch"]
    assert b"torch: 2.10.0+cu128" in out["verify-torch"]
    assert b"NCCL: (2, 22, 3)" in out["verify-torch"]
    # ...until --reinstall swapped it and quietly downgraded numpy and pillow.
    assert b"+ torch==2.12.0.dev20260226+cu130" in out["reinstall-torch"]
    assert (
        b"- numpy==2.4.2" in out["reinstall-torch"] and b"+ numpy==2.4.1" in out["reinstall-torch"]
    )
    assert b"+ nvidia-nccl-cu13==2.28.9" in out["reinstall-torch"]
    assert b"torch: 2.12.0.dev20260226+cu130" in out["verify-torch-again"]
    assert b"CUDA: 13.0" in out["verify-torch-again"]
    assert b"NCCL: (2, 28, 9)" in out["verify-torch-again"]
    assert b"torch==2.10.0+cu128" in out["backup-env"]

    # Throughput before and after: the CPU benchmark measured for real around the plan, and
    # the seed's GPU figures from the imported session.
    benches = [e for e in started if e.benchmark == "cpu-matmul"]
    assert [e.host_name for e in benches] == ["local", "local"]
    figures = [r for r in records if isinstance(r.event, MetricRecorded)]
    cpu = [r.event for r in figures if r.event.name == "matmul_mflops"]
    # repeated samples each side (one run printing SAMPLES), so their spread shows
    assert [m.labels["phase"] for m in cpu] == ["before"] * SAMPLES + ["after"] * SAMPLES
    assert [m.run for m in cpu] == [benches[0].run] * SAMPLES + [benches[1].run] * SAMPLES
    assert all(m.value > 0 and m.unit == "MFLOP/s" and m.source == "parsed" for m in cpu)
    plan_seqs = [r.seq for r in records if isinstance(r.event, StepStarted) and r.event.run in runs]
    cpu_seqs = [r.seq for r in figures if r.event.name == "matmul_mflops"]
    assert cpu_seqs[SAMPLES - 1] < min(plan_seqs) and cpu_seqs[SAMPLES] > max(plan_seqs)
    gpu = [r.event for r in figures if r.event.name == "output_token_throughput"]
    assert [(m.value, m.host_name, m.source) for m in gpu] == [
        (90.0, "gpu-box", "imported"),
        (54.1, "gpu-box", "imported"),
        (96.1, "gpu-box", "imported"),
    ]
    tags = {tag for r in records if isinstance(r.event, NoteAdded) for tag in r.event.tags}
    assert {"trigger", "root-cause", "lesson"} <= tags

    # A second run starts afresh in the same folder.
    again = journal("demo", str(folder))
    assert again.returncode == 0, text(again.stderr)
    status = journal("status", db=folder / "journal.db", runbook=folder / "runbook.toml")
    assert b"5/5 steps done" in status.stdout, text(status.stdout)


def test_the_demo_refuses_a_folder_that_is_not_its_own(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    result = journal("demo", str(tmp_path))
    assert result.returncode == 2
    assert b"not a journal demo folder" in result.stderr
    assert (tmp_path / "precious.txt").read_text() == "keep me"
