"""`/metrics` of `journal serve` as Prometheus reads it, on the demo journal (real uv, stand-in
wheels): open findings by severity and host, findings by state, the latest figure of each
series, each host's stack, where the events stand; each equal to what `journal status`,
`journal pitfalls` and the postmortem's JSON say of the same journal. Behind the token like
every page; label values from hosts escaped by prometheus_client."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from journal.web import create_app
from tests.conftest import copy_demo
from tests.helpers import journal, text

DEMO = "cuda13-demo"
TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, demo_journal: tuple[Path, Path]) -> Path:
    """The demo's database, this module's copy (nobody records in it)."""
    return copy_demo(demo_journal, tmp_path_factory.mktemp("metrics-demo"))


def client_of(db: Path, **config: Any) -> FlaskClient:
    return create_app({"DB": str(db), "TESTING": True, **config}).test_client()


def scrape(client: FlaskClient, **headers: str) -> dict[str, list[Sample]]:
    """The samples of each family of one scrape (text format 0.0.4), by family name."""
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.content_type.startswith("text/plain; version=0.0.4")
    families = text_string_to_metric_families(response.get_data(as_text=True))
    return {family.name: family.samples for family in families}


def of_journal(samples: list[Sample], name: str = DEMO) -> list[Sample]:
    return [s for s in samples if s.labels["journal"] == name]


def json_of(*args: str, db: Path) -> dict[str, Any]:
    done = journal(*args, "--format", "json", db=db)
    assert done.returncode in (0, 1), text(done.stderr)  # status: 1 while an error is open
    return json.loads(done.stdout)


def figures_of(samples: list[Sample], name: str = DEMO) -> dict[tuple[str, ...], float]:
    keys = ("host", "metric", "benchmark", "unit", "workload")
    return {tuple(s.labels[k] for k in keys): s.value for s in of_journal(samples, name)}


def postmortem_latest(db: Path) -> dict[tuple[str, ...], float]:
    """Each series' latest figure as the postmortem's impact section gives it."""
    impact = json_of("export", "postmortem", db=db)["impact"]
    out = {}
    for series in impact["throughput"] + impact["other"]:
        if series["latest"] is None:
            continue
        labels = dict(series["labels"])
        workload = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "benchmark")
        key = (
            series["host"] or "",
            series["metric"],
            labels.get("benchmark", ""),
            series["unit"] or "",
            workload,
        )
        out[key] = series["latest"]["median"]
    return out


def test_metrics_say_what_status_pitfalls_and_the_postmortem_say(demo: Path) -> None:
    found = scrape(client_of(demo))
    status = json_of("status", db=demo)
    told = status["story"]
    pitfalls = json_of("pitfalls", db=demo)["findings"]

    # open findings by severity and host: what `journal pitfalls` lists, none more
    listed = Counter((f["severity"], f["host"] or "") for f in pitfalls if f["state"] == "open")
    opened = {
        (s.labels["severity"], s.labels["host"]): s.value
        for s in of_journal(found["journal_findings_open"])
    }
    assert listed and {k: v for k, v in opened.items() if v} == listed
    assert {host for _, host in opened} == {"local", "gpu-box"}
    assert {sev for sev, _ in opened} == {"error", "warning", "info"}  # 0 where none is open
    by_severity = Counter()
    for (severity, _), n in opened.items():
        by_severity[severity] += n
    assert dict(by_severity) == told["findings"]["open"]

    # findings by state: the story's counts
    states = {s.labels["state"]: s.value for s in of_journal(found["journal_findings"])}
    assert states == {
        "open": sum(told["findings"]["open"].values()),
        "acknowledged": told["findings"]["acknowledged"],
        "resolved": told["findings"]["resolved"],
    }

    # the latest figure of each series: the story's headline last, the postmortem's latest
    figures = figures_of(found["journal_figure"])
    head = told["headline"]
    headline = [
        value
        for (host, metric, bench, unit, _), value in figures.items()
        if (host, metric, unit) == (head["host"], head["metric"], head["unit"])
        and bench == "sglang.bench_serving"
    ]
    assert headline == [head["last"]] == [96.1]
    assert figures == postmortem_latest(demo)
    # the CPU matmul's latest figure is the median of the five samples its run printed
    impact = json_of("export", "postmortem", db=demo)["impact"]["throughput"]
    matmul = next(s for s in impact if s["metric"] == "matmul_mflops")
    assert matmul["latest"]["samples"] == 5
    assert (
        figures[("local", "matmul_mflops", "cpu-matmul", "MFLOP/s", "control=yes")]
        == (matmul["latest"]["median"])
    )

    # each host's stack: the story's latest torch, CUDA, NCCL (the demo reads no driver)
    stacks = {
        s.labels["host"]: {k: s.labels[k] for k in ("torch", "cuda", "nccl", "driver")}
        for s in of_journal(found["journal_host_stack_info"])
    }
    assert all(s.value == 1 for s in found["journal_host_stack_info"])
    said = {
        host["host"]: {m["what"].lower(): m["after"] for m in host["stack"]}
        for host in told["hosts"]
        if host["stack"]
    }
    assert stacks == {host: {"driver": "", **stack} for host, stack in said.items()}
    assert stacks["gpu-box"]["torch"] == "2.12.0.dev20260226+cu130"
    assert stacks["gpu-box"]["cuda"] == "13.0" and stacks["gpu-box"]["nccl"] == "2.28.9"

    # where the events stand
    with sqlite3.connect(demo) as conn:
        count, last = conn.execute(
            "SELECT count(*), max(seq) FROM events WHERE journal = ?", (DEMO,)
        ).fetchone()
        (ts,) = conn.execute("SELECT ts FROM events WHERE seq = ?", (last,)).fetchone()
    assert [s.value for s in of_journal(found["journal_events"])] == [count]
    assert [s.name for s in found["journal_events"]] == ["journal_events_total"]
    assert [s.value for s in of_journal(found["journal_last_event_seq"])] == [last]
    when = datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    stamped = of_journal(found["journal_last_event_timestamp_seconds"])
    assert [s.value for s in stamped] == [pytest.approx(when, abs=1e-3)]


def test_openmetrics_when_the_scraper_asks_for_it(demo: Path) -> None:
    client = client_of(demo)
    response = client.get("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert response.status_code == 200
    assert response.content_type.startswith("application/openmetrics-text")
    body = response.get_data(as_text=True)
    assert body.endswith("# EOF\n")
    families = {f.name: f for f in openmetrics_families(body)}
    assert families["journal_host_stack"].type == "info"
    assert families["journal_events"].type == "counter"
    plain = scrape(client)
    assert figures_of(families["journal_figure"].samples) == figures_of(plain["journal_figure"])


def test_an_acknowledgement_and_a_new_figure_show_on_the_next_scrape(
    demo_journal: tuple[Path, Path], tmp_path: Path
) -> None:
    db = copy_demo(demo_journal, tmp_path)
    client = client_of(db)
    before = scrape(client)
    states = {s.labels["state"]: s.value for s in before["journal_findings"]}
    target = next(
        f
        for f in json_of("pitfalls", db=db)["findings"]
        if (f["severity"], f["host"]) == ("warning", "gpu-box")
    )
    done = journal("pitfalls", "ack", target["key"], "--note", "expected", db=db)
    assert done.returncode == 0, text(done.stderr)

    acked = scrape(client)
    now = {s.labels["state"]: s.value for s in acked["journal_findings"]}
    assert now == {**states, "open": states["open"] - 1, "acknowledged": 1}
    warn = [
        s.value
        for s in acked["journal_findings_open"]
        if (s.labels["severity"], s.labels["host"]) == ("warning", "gpu-box")
    ]
    assert warn == [1]
    assert figures_of(acked["journal_figure"]) == figures_of(before["journal_figure"])

    # a figure recorded by hand joins its series: the latest is the new one, as status says
    command = next(
        k[4].removeprefix("command=")
        for k in figures_of(before["journal_figure"])
        if k[1] == "output_token_throughput"
    )
    done = journal(
        "record", "metric", "output_token_throughput", "101.5", "--host", "gpu-box",
        "--unit", "tok/s", "--label", "benchmark=sglang.bench_serving",
        "--label", f"command={command}", db=db,
    )  # fmt: skip
    assert done.returncode == 0, text(done.stderr)
    recorded = scrape(client)
    head = json_of("status", db=db)["story"]["headline"]
    latest = [
        v
        for (host, metric, *_), v in figures_of(recorded["journal_figure"]).items()
        if (host, metric) == ("gpu-box", "output_token_throughput")
    ]
    assert latest == [head["last"]] == [101.5]
    assert figures_of(recorded["journal_figure"]) == postmortem_latest(db)


def test_each_journal_apart_and_label_values_from_hosts_escaped(
    demo_journal: tuple[Path, Path], tmp_path: Path
) -> None:
    db = copy_demo(demo_journal, tmp_path)
    nasty = 'x\\y"z}\n evil_metric 1'
    for value in ("5", "7", "6"):
        done = journal(
            "record", "metric", "tput", value, "--journal", "other", "--host", "gpu-9",
            "--unit", "tok/s", "--label", f"benchmark={nasty}", db=db,
        )  # fmt: skip
        assert done.returncode == 0, text(done.stderr)
    client = client_of(db)
    body = client.get("/metrics").get_data(as_text=True)
    assert "\nevil_metric" not in body and "\n evil_metric" not in body
    found = scrape(client)
    assert figures_of(found["journal_figure"], "other") == {
        ("gpu-9", "tput", nasty, "tok/s", ""): 6.0
    }
    # three events of its own, though numbered after the demo's
    assert [s.value for s in of_journal(found["journal_events"], "other")] == [3]
    assert of_journal(found["journal_last_event_seq"], "other")[0].value > 3
    demo_alone = scrape(client_of(copy_demo(demo_journal, tmp_path / "alone")))
    assert figures_of(found["journal_figure"]) == figures_of(demo_alone["journal_figure"])


def test_metrics_need_the_token_like_every_page(demo: Path) -> None:
    client = client_of(demo, TOKEN=TOKEN)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        refused = client.get("/metrics", headers=headers)
        assert refused.status_code == 401 and b"journal_" not in refused.data
    assert client.get("/metrics?token=wrong").status_code == 401
    found = scrape(client, Authorization=f"Bearer {TOKEN}")
    assert figures_of(found["journal_figure"]) == figures_of(
        scrape(client_of(demo))["journal_figure"]
    )
    # without a token, only loopback names are answered (a rebinding web page reads nothing)
    assert client_of(demo).get("/metrics", headers={"Host": "evil.example"}).status_code == 400
