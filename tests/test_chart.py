"""The SVG charts of figures (journal/export/chart.py), on journals written to a real store:
the seed story (90 → 54.1 → 96.1 tok/s around two upgrade steps), hostile labels, untrusted
figures, and several hosts on one chart. The SVG is parsed as XML, as a browser or an
export would read it."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

import pytest

from journal.events import (
    Event,
    JournalOpened,
    MetricRecorded,
    OutputChunk,
    StepFinished,
    StepStarted,
)
from journal.export.chart import (
    BINS,
    MAX_FIGURES,
    MAX_SERIES,
    charts_of,
    marks_of,
    number,
    signed_percent,
    svg_chart,
    y_scale,
)
from journal.projections.metrics import (
    all_series,
    change_steps,
    changes,
    direction,
    higher_is_better,
)
from journal.projections.timeline import Timeline, project
from journal.projections.verdict import NOISE_PERCENT, judge, percent_change
from journal.store import EventStore

SEED = "seed"
HOST = "gpu-box"
#: Every event of an imported transcript has the import's time.
IMPORTED_AT = "2026-02-26T10:00:00.000000Z"
BENCH = (
    "python3 -m sglang.bench_serving --backend sglang --dataset-name random "
    "--random-input-len 1024 --random-output-len 512 --num-prompts 32 --max-concurrency 1"
)
SVG = "{http://www.w3.org/2000/svg}"


def bench_output(value: float) -> str:
    """The tail of sglang's bench_serving result block, as printed on the GPU host."""
    return (
        "============ Serving Benchmark Result ============\n"
        "Backend:                                 sglang    \n"
        "Max request concurrency:                 1         \n"
        "Successful requests:                     32        \n"
        f"Output token throughput (tok/s):         {value:.2f}     \n"
        "==================================================\n"
    )


def step_events(
    run: str, step: str, command: str, output: str, host: str = HOST, benchmark: str | None = None
) -> list[Event]:
    """A step run as the recorder writes it: started, its output, finished."""
    return [
        StepStarted(run, step, host, f"ubuntu@{host}", command, benchmark=benchmark),
        OutputChunk(run, host, "stdout", output, "utf-8", len(output.encode()), 0.1),
        StepFinished(run, host, "succeeded", 0, 1.0),
    ]


def bench_events(
    run: str,
    value: float,
    *,
    host: str = HOST,
    benchmark: str = "eagle3-c1",
    labels: dict[str, str] | None = None,
    invalid: str | None = None,
) -> list[Event]:
    """A benchmark run on ``host`` and the figure its parser read from line 5."""
    output = bench_output(value)
    events = step_events(run, benchmark, BENCH, output, host, benchmark)
    figure = MetricRecorded(
        name="output_token_throughput",
        value=value,
        unit="tok/s",
        labels={"benchmark": benchmark, "host": host, "concurrency": "1", **(labels or {})},
        source="parsed",
        host_name=host,
        run=run,
        benchmark=benchmark,
        line=5,
        text=output.splitlines()[4],
        invalid=invalid,
    )
    return [*events[:2], figure, events[2]]


def seed_events() -> list[Event]:
    """The product's story on one host: 90 tok/s on the old stack, the torch swap, 54.1,
    the kernels reinstalled, 96.1; and a figure entered by hand, about no host."""
    return [
        JournalOpened(SEED, "runbook.toml", {HOST: "ubuntu@gpu-box"}, ["install-torch"]),
        *bench_events("b1", 90.0),
        *step_events(
            "s1",
            "install-torch",
            "uv pip install torch --index-url https://download.pytorch.org/whl/nightly/cu130",
            " - torch==2.10.0+cu128\n + torch==2.12.0.dev20260226+cu130\n",
        ),
        *bench_events("b2", 54.1),
        *step_events(
            "s2",
            "reinstall-sgl-kernel",
            "uv pip install sgl-kernel --index-url https://docs.sglang.ai/whl/cu130 --reinstall",
            " - sgl-kernel==0.3.21\n + sgl-kernel==0.3.21\n",
        ),
        *bench_events("b3", 96.1),
        MetricRecorded(
            name="gpu_power",
            value=612.5,
            unit="W",
            labels={},
            source="manual",
            author="ana@laptop",
        ),
    ]


def write_journal(db: Path, events: Sequence[Event], name: str = SEED) -> None:
    store = EventStore(str(db))
    try:
        store.append(name, list(events), ts=IMPORTED_AT)
    finally:
        store.close()


def timeline_of(db: Path, name: str = SEED) -> Timeline:
    store = EventStore(str(db))
    try:
        return project(name, store.read(name))
    finally:
        store.close()


@pytest.fixture
def seed(tmp_path: Path) -> Timeline:
    write_journal(tmp_path / "journal.db", seed_events())
    return timeline_of(tmp_path / "journal.db")


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # also proves the SVG is well-formed XML


def groups(root: ET.Element, cls: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if cls in (g.get("class") or "").split()]


def circle_x(group: ET.Element) -> float:
    circle = group.find(f"{SVG}circle")
    assert circle is not None
    return float(circle.get("cx") or 0)


def circle_y(group: ET.Element) -> float:
    circle = group.find(f"{SVG}circle")
    assert circle is not None
    return float(circle.get("cy") or 0)


def line_x(group: ET.Element) -> float:
    line = group.find(f"{SVG}line")
    assert line is not None
    return float(line.get("x1") or 0)


def value_text(group: ET.Element) -> str:
    text = group.find(f"{SVG}text")
    assert text is not None
    return text.text or ""


# -- the seed story ---------------------------------------------------------------------------


def test_the_seed_chart_has_a_point_per_figure_with_its_value_and_the_steps_between(
    seed: Timeline,
) -> None:
    charts = charts_of(seed)
    assert [c.title for c in charts] == [
        "output_token_throughput (tok/s) · eagle3-c1",
        "gpu_power (W)",
    ]
    root = parse(charts[0].svg)
    points = sorted(groups(root, "point"), key=circle_x)
    assert [value_text(p) for p in points] == ["90", "54.1", "96.1"]
    # higher figures are drawn higher: 96.1 above 90 above 54.1
    assert circle_y(points[2]) < circle_y(points[0]) < circle_y(points[1])
    marks = sorted(groups(root, "mark"), key=line_x)
    assert [m.findtext(f"{SVG}text") for m in marks] == ["install-torch", "reinstall-sgl-kernel"]
    # each step sits between the figures it came between, never on the benchmarks' own runs
    assert circle_x(points[0]) < line_x(marks[0]) < circle_x(points[1])
    assert circle_x(points[1]) < line_x(marks[1]) < circle_x(points[2])
    assert [m.step for m in marks_of(seed)] == ["install-torch", "reinstall-sgl-kernel"]
    # one line through the three trusted figures
    (polyline,) = root.iter(f"{SVG}polyline")
    assert len((polyline.get("points") or "").split()) == 3
    # a y axis of round ticks, with the unit
    ticks = [t.text for t in groups(root, "y-axis")[0].iter(f"{SVG}text")]
    assert "tok/s" in ticks
    assert [t for t in ticks if t != "tok/s"] == ["0", "20", "40", "60", "80", "100"]
    # times are the import's, once: the axis is the order of events, not the clock
    times = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "time"]
    assert times == ["02-26 10:00"]


def test_charts_are_the_same_markup_on_every_fold(tmp_path: Path) -> None:
    write_journal(tmp_path / "journal.db", seed_events())
    first = [c.svg for c in charts_of(timeline_of(tmp_path / "journal.db"))]
    again = [c.svg for c in charts_of(timeline_of(tmp_path / "journal.db"))]
    assert first == again
    # nothing that loads or runs anything: no link, script, image or stylesheet reference
    assert not re.search(r"href|url\(|<script|<image|<use|<style|<foreignObject", "".join(first))


def test_figures_and_changes_read_as_the_seed_story_prints_them() -> None:
    assert [number(v) for v in (90.0, 54.1, 96.1, 0.18, 5688.89, 0.0)] == [
        "90",
        "54.1",
        "96.1",
        "0.18",
        "5,689",
        "0",
    ]
    assert signed_percent(percent_change(90, 54.1)) == "\u221239.9%"
    assert signed_percent(percent_change(54.1, 96.1)) == "+77.6%"
    assert signed_percent(percent_change(90, 96.1)) == "+6.8%"
    assert signed_percent(None) == "—"


def test_every_y_axis_starts_at_zero_with_round_ticks() -> None:
    lo, hi, ticks = y_scale([5632.0, 5688.89, 5701.0])  # close figures: still from 0
    assert lo == 0 and 5701.0 <= hi < 8000 and 4 <= len(ticks) <= 10
    steps = {round(b - a, 6) for a, b in zip(ticks, ticks[1:], strict=False)}
    assert len(steps) == 1 and re.fullmatch(r"[125]0*\.0", str(steps.pop()))
    assert y_scale([7.0])[0] == 0 < 7.0 <= y_scale([7.0])[1]  # one figure is not a flat axis
    assert y_scale([65.3, 74.0])[0] == 0  # the demo's CPU figures: not from 28
    assert y_scale([-3.0, -1.0])[1] == 0  # negative figures end at 0
    assert y_scale([0.0])[:2] == (0, 1.0)


@pytest.mark.parametrize(
    ("name", "unit", "way"),
    [
        ("output_token_throughput", "tok/s", "higher"),
        ("request_throughput", "req/s", "higher"),
        ("avg_bus_bandwidth", "GB/s", "higher"),
        ("matmul_mflops", "MFLOP/s", "higher"),
        ("accept_length", None, "higher"),
        ("accept_rate", None, "higher"),
        ("spec_acceptance", "%", "higher"),
        ("mean_e2e_latency_ms", "ms", "lower"),
        ("median_ttft_ms", "ms", "lower"),
        ("p99_itl_ms", "ms", "lower"),
        ("mean_tpot_ms", "ms", "lower"),
        ("benchmark_duration_s", "s", "lower"),
        ("step_time", "s", "lower"),
        ("gpu_power", "W", "lower"),
        ("successful_requests", None, "count"),
        ("completed", None, "count"),
        ("total_input_tokens", None, "count"),
        ("total_output_tokens", None, "count"),
        ("total_generated_tokens_retokenized", None, "count"),
        ("num_prompts", None, "count"),
        ("concurrency", None, "count"),
        ("drafts", None, "count"),  # vLLM's speculative decoding: how many, not how well
        ("accepted_tokens", None, "count"),
        ("acceptance_length", None, "higher"),
        ("acceptance_rate", "%", "higher"),
    ],
)
def test_a_metric_knows_which_way_is_better(name: str, unit: str | None, way: str) -> None:
    assert direction(name, unit) == way
    # the rate test the headline, impact report and regression detector use is unchanged:
    # throughputs and bandwidths only
    rate = name in ("output_token_throughput", "request_throughput", "avg_bus_bandwidth")
    assert higher_is_better(name, unit) == (rate or name == "matmul_mflops")


def test_counts_are_not_charted_and_repeats_draw_their_spread(tmp_path: Path) -> None:
    done = MetricRecorded(
        name="successful_requests",
        value=32.0,
        unit=None,
        labels={"host": HOST},
        source="manual",
        host_name=HOST,
    )

    def samples(run: str, values: list[float]) -> list[Event]:
        """One benchmark run printing repeated samples (as the demo's cpu-matmul does)."""
        first, *rest = [bench_events(run, v) for v in values]
        return [*first[:3], *(events[2] for events in rest), first[3]]

    events = [
        *samples("a", [90.0, 86.0, 92.0]),
        *step_events("s1", "install-torch", "true", "", HOST),
        *samples("b", [89.0, 60.0]),
        done,
    ]
    write_journal(tmp_path / "journal.db", events)
    timeline = timeline_of(tmp_path / "journal.db")
    charts = charts_of(timeline)
    assert [c.name for c in charts] == ["output_token_throughput"]
    root = parse(charts[0].svg)
    spreads = [g.findtext(f"{SVG}title") for g in groups(root, "spread")]
    assert spreads == [
        "spread of 3 repeated figures: 86 to 92 tok/s",
        "spread of 2 repeated figures: 60 to 89 tok/s",
    ]
    ticks = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "tick"]
    assert ticks == ["1", "2", "3", "4", "5"]
    said = [t.text for t in root.iter(f"{SVG}text") if t.get("class") == "direction"]
    assert said == ["↑ higher is better"]
    (series,) = [s for s in all_series(timeline) if s.name == "output_token_throughput"]
    found = changes(series, change_steps(timeline))
    # one change per run of samples, never one per sample: medians 90 → 74.5 (-17.2%), but
    # the ranges 86–92 and 60–89 overlap, so it is within the spread
    assert [(c.basis, c.before, c.after, c.verdict) for c in found] == [
        ("steps", 90.0, 74.5, "noise")
    ]


def test_a_change_between_single_figures_within_5_percent_is_noise() -> None:
    assert NOISE_PERCENT == 5.0
    said = [judge([100.0], [after]).verdict for after in (104.9, 95.0, 106.0)]
    assert said == ["noise", "noise", "better"]
    assert judge([65.3], [74.0]).verdict == "better"
    # with repeats, a change within 5% is noise even when the samples are tight (samples of
    # one run agree more closely than two runs do), and overlapping ranges are noise
    assert judge([100.0, 100.5], [103.0]).verdict == "noise"
    assert judge([90.0, 110.0], [108.0]).verdict == "noise"
    # a change is better or worse by the metric's direction: acceptance up is better
    assert judge([1.42], [3.02], "higher").verdict == "better"
    assert judge([5.0], [9.0], "lower").verdict == "worse"
    assert judge([32.0], [16.0], "count").verdict == "count"


# -- untrusted and hostile input --------------------------------------------------------------


def test_an_untrusted_figure_is_hollow_red_says_why_and_is_not_on_the_line(
    tmp_path: Path,
) -> None:
    events = [
        *bench_events("b1", 90.0),
        *bench_events("b2", 12.0, invalid="3 of 32 requests failed"),
        *bench_events("b3", 91.0),
    ]
    write_journal(tmp_path / "journal.db", events)
    (chart,) = charts_of(timeline_of(tmp_path / "journal.db"))
    root = parse(chart.svg)
    (bad,) = groups(root, "untrusted")
    assert value_text(bad) == "12"
    circle = bad.find(f"{SVG}circle")
    assert circle is not None
    assert circle.get("fill") == "#ffffff" and circle.get("stroke") == "#c62828"
    assert "not trusted: 3 of 32 requests failed" in (bad.findtext(f"{SVG}title") or "")
    trusted = [g for g in groups(root, "point") if g is not bad]
    assert [value_text(g) for g in sorted(trusted, key=circle_x)] == ["90", "91"]
    (polyline,) = root.iter(f"{SVG}polyline")
    assert len((polyline.get("points") or "").split()) == 2
    legend = [t.text for t in groups(root, "legend")[0].iter(f"{SVG}text")]
    assert any("not trusted" in (t or "") for t in legend)


def test_hostile_labels_hosts_and_step_names_are_text_not_markup(tmp_path: Path) -> None:
    hostile = '<script>alert("x")</script>'
    host = "box&<img src=x onerror=alert(1)>"
    events = [
        *bench_events("b1", 10.0, host=host, labels={"model": hostile}),
        *step_events("s1", "<script>x()</script>", "true", "", host=host),
        *bench_events("b2", 20.0, host=host, labels={"model": hostile}),
    ]
    write_journal(tmp_path / "journal.db", events)
    (chart,) = charts_of(timeline_of(tmp_path / "journal.db"))
    assert "<script" not in chart.svg and "<img" not in chart.svg
    root = parse(chart.svg)
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    assert "<script>x()</script>" in texts  # the step's name, shown as it was
    assert any(hostile in t and host in t for t in texts)  # the legend
    # nothing but the chart's own elements
    assert {el.tag.removeprefix(SVG) for el in root.iter()} <= {
        "svg",
        "title",
        "g",
        "line",
        "text",
        "circle",
        "polyline",
    }
    # and the same input drawn directly
    assert "<script" not in svg_chart(all_series(timeline_of(tmp_path / "journal.db")), [])


# -- several hosts and benchmarks ---------------------------------------------------------------


def test_hosts_share_a_chart_benchmarks_do_not_and_marks_are_of_the_charts_hosts(
    tmp_path: Path,
) -> None:
    events = [
        *bench_events("a1", 90.0, host="h1"),
        *bench_events("b1", 88.0, host="h2"),
        *bench_events("c1", 40.0, host="h1", benchmark="eagle3-c8"),
        *step_events("s1", "swap-torch-h2", "true", "", host="h2"),
        *step_events("s2", "swap-torch-h3", "true", "", host="h3"),
        *bench_events("a2", 95.0, host="h1"),
        *bench_events("b2", 60.0, host="h2"),
        *bench_events("c2", 45.0, host="h1", benchmark="eagle3-c8"),
    ]
    write_journal(tmp_path / "journal.db", events)
    charts = charts_of(timeline_of(tmp_path / "journal.db"))
    assert [(c.benchmark, [s.host for s in c.series]) for c in charts] == [
        ("eagle3-c1", ["h1", "h2"]),
        ("eagle3-c8", ["h1"]),
    ]
    both = parse(charts[0].svg)
    assert len(list(both.iter(f"{SVG}polyline"))) == 2
    legend = [t.text or "" for t in groups(both, "legend")[0].iter(f"{SVG}text")]
    assert [t.split(",")[0] for t in legend] == ["h1", "h2"]
    # h2's step is on the chart h2 is on; h3's is on none; h1-only chart has no mark
    assert [m.findtext(f"{SVG}text") for m in groups(both, "mark")] == ["swap-torch-h2"]
    assert groups(parse(charts[1].svg), "mark") == []


def test_a_metric_with_many_label_sets_is_split_into_readable_charts(tmp_path: Path) -> None:
    sizes = [f"{2**i}M" for i in range(MAX_SERIES + 2)]
    events = [
        ev
        for n, size in enumerate(sizes)
        for ev in bench_events(f"r{n}", 100.0 + n, labels={"size": size})
    ]
    write_journal(tmp_path / "journal.db", events)
    charts = charts_of(timeline_of(tmp_path / "journal.db"))
    assert [len(c.series) for c in charts] == [MAX_SERIES, 2]
    assert charts[0].title.endswith("(1 of 2)") and charts[1].title.endswith("(2 of 2)")
    assert len({c.slug for c in charts}) == 2


def test_no_figure_draws_an_empty_chart_that_says_so() -> None:
    svg = svg_chart([], [], title="output_token_throughput")
    assert "no figures to draw" in svg
    parse(svg)


# -- a year of figures --------------------------------------------------------------------------


def test_a_chart_of_many_figures_is_summarised_in_runs_with_medians_spreads_and_step_counts(
    tmp_path: Path,
) -> None:
    """A year of nightly benchmarks on one chart: 600 figures, then the torch swap, then 600
    more at half the speed. The chart draws runs of consecutive figures (a median and its
    lowest-to-highest bar each), not 1,200 points; every figure is counted in one run; the
    step run between the two halves is a tick whose tooltip names it; the fall shows."""
    events: list[Event] = [JournalOpened(SEED, "runbook.toml", {HOST: "ubuntu@gpu-box"}, [])]
    for n in range(600):
        events += bench_events(f"a{n}", 90.0 + n % 3)  # 90, 91, 92, 90, ...
    events += step_events("swap", "install-torch", "uv pip install torch", " + torch==2.12.0\n")
    for n in range(600):
        events += bench_events(f"b{n}", 45.0 + n % 5, invalid="truncated" if n == 7 else None)
    write_journal(tmp_path / "journal.db", events)
    (chart,) = charts_of(timeline_of(tmp_path / "journal.db"))
    root = parse(chart.svg)

    summaries = groups(root, "summary")
    points = [g for g in summaries if "point" in (g.get("class") or "").split()]
    trusted = [g for g in points if "untrusted" not in (g.get("class") or "")]
    assert not [g for g in groups(root, "point") if "summary" not in (g.get("class") or "")]
    assert len(trusted) == BINS
    assert sum(int(g.get("data-count") or 0) for g in points) == 1200
    # each run: its median, and a bar from its lowest figure to its highest
    first = trusted[0].find(f"{SVG}title")
    assert first is not None and first.text is not None
    assert first.text.startswith("20 figures of output_token_throughput (gpu-box, concurrency=1)")
    assert "median 91, 90 to 92 tok/s" in first.text
    # the fall from about 91 to about 47 tok/s: later medians are drawn lower (larger y)
    assert circle_y(trusted[-1]) > circle_y(trusted[0]) + 50
    (bad,) = [g for g in points if "untrusted" in (g.get("class") or "")]
    assert "not trusted: truncated" in "".join(bad.itertext())
    # the swap between the halves: one tick, its tooltip names the step
    (tick,) = groups(root, "mark")
    assert "1 step run among figures" in "".join(tick.itertext())
    assert "install-torch ×1" in "".join(tick.itertext())
    assert "1,200 figures in 60 runs of about 20" in "".join(root.itertext())
    # its size follows the runs drawn, not the figures
    assert len(chart.svg) < 60_000


def test_a_chart_at_the_limit_still_draws_every_figure(tmp_path: Path) -> None:
    events: list[Event] = [JournalOpened(SEED, "runbook.toml", {HOST: "ubuntu@gpu-box"}, [])]
    for n in range(MAX_FIGURES):
        events += bench_events(f"a{n}", 90.0 + n % 3)
    write_journal(tmp_path / "journal.db", events)
    (chart,) = charts_of(timeline_of(tmp_path / "journal.db"))
    root = parse(chart.svg)
    assert len(groups(root, "point")) == MAX_FIGURES
    assert not groups(root, "summary")
