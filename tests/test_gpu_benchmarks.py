"""The built-in GPU benchmarks' output, as they printed it on real H200 hosts
(tests/data/h200/bench/, captured with its capture.sh through the device tool)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BENCH = Path(__file__).parent / "data" / "h200" / "bench"

#: Keys the postmortem's impact section gained after the H200 captures were made (issue 26:
#: each set's samples and spread, the verdict's reason, a series' latest set): the captured
#: documents stay as they were written, so these are left out before comparing.
ADDED_SINCE = ("before_samples", "after_samples", "before_spread", "after_spread", "why")


def as_captured(impact: dict) -> dict:
    """The impact section without the keys added since the captures (:data:`ADDED_SINCE`)."""
    for series in [*impact["throughput"], *impact["other"]]:
        series.pop("latest", None)
        for change in [*series["changes"], *([series["overall"]] if series["overall"] else [])]:
            for key in ADDED_SINCE:
                change.pop(key, None)
    for key in ADDED_SINCE:
        (impact["headline"] or {}).pop(key, None)
    return impact


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
    # Recorded before the run state `skipped` existed: a record is never rewritten, so this
    # one stays as it was written (journal-h200-skipped.db is the same run recorded since).
    assert ended["allreduce"] == ("failed", "allreduce_busbw: needs 2 or more GPUs, found 1")

    # The postmortem made there and the one made here from the same record agree (the
    # verdict of each change is said since: both changes are within the noise).
    made = journal("--db", str(db), "export", "postmortem", "--format", "json")
    assert made.returncode == 0, made.stderr.decode()
    here = json.loads(made.stdout)
    there = json.loads((BENCH / "journal-h200-postmortem.json").read_text())
    verdicts = set()
    for series in here["impact"]["throughput"]:
        for change in [*series["changes"], series["overall"]]:
            verdicts.add(change.pop("verdict"))
    here["impact"]["headline"].pop("verdict")
    assert as_captured(here["impact"]) == there["impact"]
    assert verdicts == {"noise"}
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


def test_journal_run_bench_allreduce_on_one_h200_was_recorded_skipped_not_failed(
    tmp_path,
) -> None:
    # journal-h200-skipped.db: journal-capture.sh run again on a lent one-GPU H200 once the
    # run state `skipped` existed (`bash tests/data/h200/bench/journal-capture.sh
    # journal-h200-skipped`); journal-h200-skipped.txt is what it printed, and
    # journal-h200-skipped-postmortem.json the postmortem it exported there.
    import re
    import shutil

    from journal.events import StepFinished, StepStarted
    from journal.store import EventStore
    from tests.helpers import journal

    printed = (BENCH / "journal-h200-skipped.txt").read_text()
    said = printed[printed.index('"metric": "allreduce_busbw"') :]
    why = "allreduce_busbw: needs 2 or more GPUs, found 1"
    verdict = rf"journal: \[skip\] allreduce on h200 skipped, exit 0 in [0-9.]+s: {why} \(run \w+\)"
    assert re.match(verdict, said.splitlines()[1]), said
    assert "nothing was measured, nothing failed\nrc=0\n" in said  # `journal run bench` exit 0

    db = tmp_path / "h200.db"
    shutil.copy(BENCH / "journal-h200-skipped.db", db)
    store = EventStore(str(db))
    try:
        assert store.verify().ok
        records = list(store.read("h200-bench"))
    finally:
        store.close()
    benches = {r.event.run: r.event.benchmark for r in records if isinstance(r.event, StepStarted)}
    [allreduce] = [
        r.event
        for r in records
        if isinstance(r.event, StepFinished) and benches[r.event.run] == "allreduce"
    ]
    assert (allreduce.status, allreduce.exit_code, allreduce.reason) == ("skipped", 0, why)

    # Every view of that record: skipped, with why, and no failure.
    log = journal("--db", str(db), "log").stdout.decode()
    assert re.search(r"\[skip\] allreduce on h200: skipped exit 0 ", log), log
    assert "allreduce" not in journal("--db", str(db), "log", "--failed").stdout.decode()
    doc = json.loads(journal("--db", str(db), "export", "postmortem", "--format", "json").stdout)
    assert doc["failures"] == []
    assert not any("allreduce" in reason for reason in doc["status_reasons"])
    assert any(
        s.startswith("1 run skipped, not failed (the host cannot run it): allreduce on h200")
        for s in doc["summary"]["sentences"]
    )
    # the real before/after figures of that H200: 760.26 -> 785.17 TFLOP/s is +3.3%, noise
    head = doc["story"]["headline"]
    assert (head["metric"], head["percent"], head["verdict"]) == ("matmul_bf16", 3.3, "noise")
    # and the postmortem made there says the same as the one made here
    there = json.loads((BENCH / "journal-h200-skipped-postmortem.json").read_text())
    as_captured(doc["impact"])
    for key in ("status", "status_reasons", "story", "failures", "summary", "impact", "timeline"):
        assert doc[key] == there[key], key
    assert there["status"] == "mitigated"  # nccl-skew, a warning: no failure keeps it open

    from journal.web import create_app

    client = create_app({"DB": str(db), "TESTING": True}).test_client()
    client.get("/j/h200-bench/story")  # the whole journal folded
    page = client.get("/j/h200-bench").get_data(as_text=True)
    item = re.search(r'<li class="item step status-skipped"[^>]*>.*?</li>', page, re.S)
    assert item is not None and "allreduce" in item.group(0) and why in item.group(0)
    assert "status-failed" not in page
