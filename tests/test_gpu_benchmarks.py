"""The built-in GPU benchmarks' output, as they printed it on real H200 hosts
(tests/data/h200/bench/, captured with its capture.sh through the device tool)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BENCH = Path(__file__).parent / "data" / "h200" / "bench"


def figures(name: str) -> dict[str, dict]:
    found = {}
    for line in (BENCH / name).read_text().splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            found[record["metric"]] = record
    return found


@pytest.mark.parametrize("name", ["h200x1.txt", "h200x2.txt"])
def test_matmul_and_memcpy_printed_plausible_h200_figures(name: str) -> None:
    found = figures(name)
    matmul, memcpy = found["matmul_bf16"], found["memcpy_d2d"]
    assert matmul["unit"] == "TFLOP/s" and 600 < matmul["value"] < 990  # datasheet ceiling
    assert memcpy["unit"] == "GB/s" and 3000 < memcpy["value"] < 9600  # 2 x 4.8 TB/s
    assert matmul["labels"]["gpu"] == "NVIDIA H200"


def test_allreduce_needs_two_gpus_and_says_so_with_one() -> None:
    one = figures("h200x1.txt")["allreduce_busbw"]
    assert one["value"] is None and "needs 2 or more GPUs, found 1" in one["skipped"]
    two = figures("h200x2.txt")["allreduce_busbw"]
    assert two["labels"] == {"mib": "1024", "gpus": "2", "nccl": "2.28.9"}
    assert 50 < two["value"] < 900  # NVLink-class bus bandwidth, GB/s


def test_journal_run_bench_on_an_h200_recorded_the_builtin_figures(tmp_path) -> None:
    # journal-h200.db is the journal that `journal run bench` wrote on a lent H200 host
    # (journal-capture.sh): matmul and memcpy before and after a step, allreduce on one GPU.
    import shutil

    from journal.events import MetricRecorded, StepFinished, StepStarted
    from journal.store import EventStore
    from tests.helpers import journal

    db = tmp_path / "h200.db"
    shutil.copy(BENCH / "journal-h200.db", db)
    store = EventStore(str(db))
    try:
        assert store.verify().ok
        records = list(store.read("h200-bench"))
    finally:
        store.close()
    figures = [
        (r.event.name, r.event.value, r.event.unit, r.event.labels["phase"], r.event.source)
        for r in records
        if isinstance(r.event, MetricRecorded)
    ]
    assert figures == [
        ("matmul_bf16", 795.899, "TFLOP/s", "before", "builtin"),
        ("memcpy_d2d", 4266.705, "GB/s", "before", "builtin"),
        ("matmul_bf16", 787.453, "TFLOP/s", "after", "builtin"),
        ("memcpy_d2d", 4197.747, "GB/s", "after", "builtin"),
    ]
    benches = {r.event.run: r.event.benchmark for r in records if isinstance(r.event, StepStarted)}
    ended = {
        benches[r.event.run]: (r.event.status, r.event.reason)
        for r in records
        if isinstance(r.event, StepFinished)
    }
    assert ended["allreduce"] == ("failed", "allreduce_busbw: needs 2 or more GPUs, found 1")

    # The postmortem made there and the one made here from the same record agree.
    made = journal("--db", str(db), "export", "postmortem", "--format", "json")
    assert made.returncode == 0, made.stderr.decode()
    here = json.loads(made.stdout)
    there = json.loads((BENCH / "journal-h200-postmortem.json").read_text())
    assert here["impact"] == there["impact"]
    changes = {row["metric"]: row["overall"]["percent"] for row in here["impact"]["throughput"]}
    assert changes == {"matmul_bf16": -1.1, "memcpy_d2d": -1.6}
    # The image's system NCCL is 2.28.3 while torch loads its wheel's 2.28.9.
    assert [p["id"] for p in here["pitfalls"]] == ["nccl-skew"]


def test_journal_run_bench_allreduce_on_two_h200s_recorded_the_bus_bandwidth(tmp_path) -> None:
    # The same capture on a host with two H200s (journal-capture.sh journal-h200x2): the
    # built-in allreduce spawns one process per GPU from the script shipped to the host.
    import shutil

    from journal.events import MetricRecorded
    from journal.store import EventStore

    db = tmp_path / "h200x2.db"
    shutil.copy(BENCH / "journal-h200x2.db", db)
    store = EventStore(str(db))
    try:
        assert store.verify().ok
        figures = [r.event for r in store.read("h200-bench") if isinstance(r.event, MetricRecorded)]
    finally:
        store.close()
    [allreduce] = [m for m in figures if m.name == "allreduce_busbw"]
    assert (allreduce.value, allreduce.unit, allreduce.source) == (320.797, "GB/s", "builtin")
    assert allreduce.labels == {
        "benchmark": "allreduce",
        "host": "h200",
        "gpus": "2",
        "mib": "1024",
        "nccl": "2.28.9",
    }
    assert allreduce.text and allreduce.text.startswith('{"metric": "allreduce_busbw"')
