"""The throughput page and figures on the timeline, through Flask's test client: the seed
story (90 → 54.1 → 96.1 tok/s around two upgrade steps, written to a real store as the
recorder writes it) with a figure entered by hand through the real `journal record metric`."""

from __future__ import annotations

import json
import re
import statistics
from html.parser import HTMLParser
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from journal.demo.run import SAMPLES
from journal.events import MetricRecorded, NoteAdded
from journal.export.chart import charts_of, number
from journal.store import EventStore
from journal.web import create_app
from journal.web.selection import host_rows
from journal.web.throughput import CHART_SIZE
from tests.conftest import copy_demo
from tests.helpers import journal, text
from tests.test_chart import (
    SEED,
    bench_events,
    seed_events,
    step_events,
    timeline_of,
    write_journal,
)

HX = {"HX-Request": "true"}


class Tables(HTMLParser):
    """The rows of one table of a page: (the row's classes, its cells' text)."""

    def __init__(self, table_id: str) -> None:
        super().__init__()
        self.table_id = table_id
        self.depth = 0  # > 0 inside the table
        self.rows: list[tuple[list[str], list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "table" and (self.depth or found.get("id") == self.table_id):
            self.depth += 1
        elif self.depth and tag == "tr":
            self.rows.append(((found.get("class") or "").split(), []))
        elif self.depth and tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self.depth:
            self.depth -= 1
        elif self._cell is not None and tag in ("td", "th"):
            self.rows[-1][1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def table(html: str, table_id: str) -> list[tuple[list[str], list[str]]]:
    parser = Tables(table_id)
    parser.feed(html)
    return parser.rows[1:]  # the header row aside


def get(client: FlaskClient, url: str, status: int = 200, **kwargs: object) -> str:
    response = client.get(url, **kwargs)
    assert response.status_code == status, response.get_data(as_text=True)[:2000]
    return response.get_data(as_text=True)


def client_of(db: Path) -> FlaskClient:
    return create_app({"DB": str(db), "TESTING": True}).test_client()


@pytest.fixture(scope="module")
def seed_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`journal init seed`, the seed story's runs, then a figure of no host entered by hand
    with `journal record metric`."""
    folder = tmp_path_factory.mktemp("throughput") / SEED
    made = journal("init", str(folder))
    assert made.returncode == 0, text(made.stderr)
    db = folder / "journal.db"
    write_journal(db, seed_events()[1:-1])  # the runs, without the init's or the hand's events
    manual = journal(
        "record", "metric", "gpu_power", "612.5", "--unit", "W", "--label", "phase=after", db=db
    )
    assert manual.returncode == 0, text(manual.stderr)
    return db


@pytest.fixture(scope="module")
def client(seed_db: Path) -> FlaskClient:
    return client_of(seed_db)


# -- the throughput page ----------------------------------------------------------------------


def test_before_after_table_shows_the_seed_story_overall_then_step_by_step(
    client: FlaskClient,
) -> None:
    html = get(client, f"/j/{SEED}/throughput")
    assert '<a href="/j/seed/throughput" class="current">Throughput</a>' in html
    rows = table(html, "before-after")
    throughput = [r for r in rows if r[1][0] in ("output_token_throughput", "↳ along the way")]
    assert [(classes, cells) for classes, cells in throughput] == [
        (
            ["overall", "better"],
            [
                "output_token_throughput",
                "eagle3-c1, concurrency=1",
                "gpu-box",
                "90 tok/s",
                "96.1 tok/s",
                "+6.1",
                "+6.8%",
                "better",
                "first → latest: install-torch, reinstall-sgl-kernel",
            ],
        ),
        (
            ["along", "worse"],
            [
                "↳ along the way",
                "90 tok/s",
                "54.1 tok/s",
                "−35.9",
                "−39.9%",
                "worse",
                "install-torch",
            ],
        ),
        (
            ["along", "better"],
            [
                "↳ along the way",
                "54.1 tok/s",
                "96.1 tok/s",
                "+42",
                "+77.6%",
                "better",
                "reinstall-sgl-kernel",
            ],
        ),
    ]
    # the percent is coloured by whether it is better (throughput: higher)
    assert re.search(r'class="num percent worse"[^>]*>−39\.9%<', html)
    assert re.search(r'class="num percent better"[^>]*>\+77\.6%<', html)
    # a figure alone has nothing to compare with, and says so
    (power,) = [cells for _, cells in rows if cells[0] == "gpu_power"]
    assert power[1:5] == ["—", "—", "612.5 W", "—"]
    assert power[-1] == "one trusted figure so far"


def test_the_page_shows_the_same_charts_as_the_exports(client: FlaskClient, seed_db: Path) -> None:
    html = get(client, f"/j/{SEED}/throughput")
    charts = charts_of(timeline_of(seed_db), **CHART_SIZE)
    assert [c.title for c in charts] == [
        "output_token_throughput (tok/s) · eagle3-c1",
        "gpu_power (W)",
    ]
    for chart in charts:
        assert chart.svg in html  # inline, byte for byte
    assert html.index(charts[0].svg) > html.index('id="before-after"')


def test_all_figures_say_where_each_came_from_and_link_their_line(
    client: FlaskClient,
) -> None:
    html = get(client, f"/j/{SEED}/throughput")
    rows = table(html, "figures")
    assert [(cells[1], cells[2], cells[3]) for _, cells in rows] == [
        ("output_token_throughput", "90", "tok/s"),
        ("output_token_throughput", "54.1", "tok/s"),
        ("output_token_throughput", "96.1", "tok/s"),
        ("gpu_power", "612.5", "W"),
    ]
    first, *_, manual = rows
    assert first[1][6] == "benchmark run eagle3-c1"
    assert first[1][7] == "line 5: Output token throughput (tok/s): 90.00"
    assert manual[1][6].startswith("entered by hand by ")
    assert manual[1][4] == "phase=after" and manual[1][5] == "—"
    # the evidence link opens the run's page at the line the figure was read from
    link = re.search(r'<a href="(/j/seed/run/b1\?page=1#L5)">line 5</a>', html)
    assert link is not None
    assert '<a href="/j/seed/run/b1">eagle3-c1</a>' in html
    run_page = get(client, link.group(1).split("#")[0])
    line = re.search(r'id="L5"[^>]*>.*?</div>', run_page, re.S)
    assert line is not None and "Output token throughput (tok/s):         90.00" in line.group(0)


def test_an_untrusted_figure_is_listed_with_why_and_never_compared(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    write_journal(
        db,
        [
            *bench_events("b1", 90.0),
            *bench_events("b2", 12.0, invalid="3 of 32 requests failed"),
            *bench_events("b3", 91.0),
        ],
    )
    html = get(client_of(db), f"/j/{SEED}/throughput")
    (row,) = table(html, "before-after")
    assert row[1][3:7] == ["90 tok/s", "91 tok/s", "+1", "+1.1%"]
    figures = table(html, "figures")
    assert ["untrusted" in classes for classes, _ in figures] == [False, True, False]
    assert "not trusted: 3 of 32 requests failed" in figures[1][1][6]


def test_hostile_labels_and_hosts_are_shown_as_text(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    hostile = "<script>window.__pwned=1</script>"
    host = "h<img src=x onerror=alert(1)>"
    write_journal(
        db,
        [
            *bench_events("b1", 10.0, host=host, labels={"model": hostile}),
            *bench_events("b2", 20.0, host=host, labels={"model": hostile}),
            MetricRecorded("loss", 1.5, None, {"note": hostile}, "manual", author=hostile),
        ],
    )
    client = client_of(db)
    for url in (f"/j/{SEED}/throughput", f"/j/{SEED}"):
        html = get(client, url)
        assert "<script>window" not in html and "<img src=x" not in html
        assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html


def test_a_journal_without_figures_says_how_to_record_them(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    write_journal(db, [NoteAdded("nothing measured yet")])
    html = get(client_of(db), f"/j/{SEED}/throughput")
    assert 'id="throughput-empty"' in html
    assert "<code>journal run bench NAME</code>" in html
    assert "<code>journal record metric NAME VALUE" in html
    assert "<svg" not in html and 'id="before-after"' not in html


def test_htmx_asks_for_the_before_after_table_alone(client: FlaskClient) -> None:
    fragment = get(client, f"/j/{SEED}/throughput", headers=HX)
    assert "<html" not in fragment and "<svg" not in fragment
    assert fragment.lstrip().startswith('<table class="before-after" id="before-after">')
    assert "+77.6%" in fragment


def test_an_unknown_journal_has_no_throughput_page(client: FlaskClient) -> None:
    get(client, "/j/nope/throughput", status=404)


# -- figures on the timeline ------------------------------------------------------------------


def items_of(html: str) -> list[tuple[str, str]]:
    """(kind, host) of each timeline item, as tests/test_web.py reads them."""
    found = re.findall(
        r'<li class="item ([\w-]+)[^"]*" id="[^"]+" data-seq="\d+"(?: data-host="([^"]*)")?', html
    )
    return [(kind, host) for kind, host in found]


def test_the_timeline_shows_a_figure_entered_by_hand_and_a_benchs_figures_in_its_run(
    client: FlaskClient,
) -> None:
    html = get(client, f"/j/{SEED}")
    assert items_of(html)[-1] == ("metric", "")
    item = html[html.rindex('<li class="item metric"') :]
    item = item[: item.index("</li>")]
    assert re.search(r">gpu_power</a> = <b class=\"value\">612.5</b> <span class=\"unit\">W<", item)
    assert '<span class="tag label" title="phase=after">phase=after</span>' in item
    assert "entered by hand" in item
    # a benchmark's run lists the figure read from it
    bench = html[html.index('id="run-b2"') :]
    bench = bench[: bench.index('<li class="item')]
    assert re.search(r'>output_token_throughput</a> = <b class="value">54.1</b> tok/s', bench)
    assert re.search(r"\(<span[^>]*>concurrency=1</span>\)", bench)


def test_the_kind_filter_and_the_search_find_figures(client: FlaskClient) -> None:
    html = get(client, f"/j/{SEED}?kind=metric")
    assert '<option value="metric" selected>metric</option>' in html
    assert items_of(html) == [("metric", "")]
    assert items_of(get(client, f"/j/{SEED}?q=gpu_pow")) == [("metric", "")]
    assert items_of(get(client, f"/j/{SEED}?q=phase%3Dafter")) == [("metric", "")]
    assert ("metric", "") not in items_of(get(client, f"/j/{SEED}?kind=step"))


def test_hosts_side_by_side_put_a_figure_of_no_host_across_every_column(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    events = [
        *step_events("s1", "install-torch", "true", "ok\n", host="h1"),
        *step_events("s2", "install-torch", "true", "ok\n", host="h2"),
        MetricRecorded("gpu_power", 600.0, "W", {}, "manual"),
        *bench_events("b1", 90.0, host="h2"),
    ]
    write_journal(db, events)
    store = EventStore(str(db))
    try:
        store.append(SEED, [MetricRecorded("fan", 30.0, "%", {"host": "h1"}, "manual", "h1")])
    finally:
        store.close()
    rows = host_rows(timeline_of(db).items)
    assert [(row.wide is not None, sorted(row.cells)) for row in rows] == [
        (False, ["h1", "h2"]),  # one step on both hosts
        (True, []),  # the figure of no host
        (False, ["h2"]),  # the benchmark
        (False, ["h1"]),  # a figure of h1
    ]
    html = get(client_of(db), f"/j/{SEED}?layout=hosts")
    wide = re.search(r'<td colspan="2"><ul class="timeline">\s*<li class="item metric"', html)
    assert wide is not None


# -- a real transcript ------------------------------------------------------------------------

#: The seed session as pasted from the GPU host: the old stack's benchmark, the torch swap,
#: the benchmark again, the kernels reinstalled, the benchmark a third time.
SESSION = Path(__file__).resolve().parents[1] / "journal" / "demo" / "gpu-session.txt"


def test_an_imported_transcript_reads_as_the_seed_story(tmp_path: Path) -> None:
    folder = tmp_path / "imported"
    assert journal("init", str(folder)).returncode == 0
    runbook = folder / "runbook.toml"
    runbook.write_text(runbook.read_text().replace("[hosts.this-machine]", "[hosts.gpu-box]"))
    db = folder / "journal.db"
    done = journal("import", "transcript", str(SESSION), "--host", "gpu-box", db=db, cwd=folder)
    assert done.returncode == 0, text(done.stderr)
    html = get(client_of(db), "/j/imported/throughput")
    rows = table(html, "before-after")
    start = next(i for i, (_, cells) in enumerate(rows) if cells[0] == "output_token_throughput")
    overall, fell, rose = (cells for _, cells in rows[start : start + 3])
    assert overall[3:7] == ["90 tok/s", "96.1 tok/s", "+6.1", "+6.8%"]
    assert fell[1:5] == ["90 tok/s", "54.1 tok/s", "−35.9", "−39.9%"]
    assert rose[1:5] == ["54.1 tok/s", "96.1 tok/s", "+42", "+77.6%"]
    assert fell[5] == "worse" and rose[5] == "better"
    assert "uv-pip-install" in fell[6] and "uv-pip-install" in rose[6]  # what lay between
    # the command line a series was measured with is a label: the benchmark's name stands
    # for it on each row (whole on hover), said once at the top of the page
    assert overall[1] == "sglang.bench_serving"
    assert 'title="benchmark=sglang.bench_serving, command=python -m sglang.bench_serving' in html
    assert html.count("<code>python -m sglang.bench_serving --backend sglang") == 1
    # rates come first: the table and the charts open with throughputs, not token counts
    names = [cells[0] for classes, cells in rows if "overall" in classes]
    assert all(name.endswith("throughput") for name in names[:4]), names
    assert "total_input_tokens" not in names  # a count: listed apart, never compared
    assert "total_input_tokens" in [cells[0] for _, cells in table(html, "counts")]
    # on the timeline a benchmark's run lists its rates, and says how many more there are
    timeline = get(client_of(db), "/j/imported")
    runs = re.split(r'<li class="item step', timeline)[1:]
    bench = next(run for run in runs if ">output_token_throughput</a>" in run)
    assert re.search(r'>output_token_throughput</a> = <b class="value">90</b> tok/s', bench)
    assert ">mean_ttft_ms</a>" not in bench
    assert re.search(r"and \d+ more figures</a> on the throughput page", bench)
    titles = re.findall(r'<figure class="chart-box" id="[^"]+" data-metric="([^"]+)"', html)
    assert "output_token_throughput" in titles[:4]
    assert titles.index("output_token_throughput") < titles.index("mean_ttft_ms")


# -- the demo's page (issue 16): directions, counts, shared labels, noise -----------------------

DEMO = "cuda13-demo"
COUNTS = ("successful_requests", "total_input_tokens", "total_generated_tokens", "concurrency")


def overall_row(html: str, metric: str) -> list[str]:
    (cells,) = [cells for classes, cells in table(html, "before-after") if cells[0] == metric]
    return cells


def test_the_demo_page_charts_no_counts_and_colours_each_change_by_its_direction(
    demo_journal: tuple[Path, Path],
) -> None:
    html = get(client_of(demo_journal[0]), f"/j/{DEMO}/throughput")
    charted = re.findall(r'<figure class="chart-box" id="[^"]+" data-metric="([^"]+)"', html)
    assert "output_token_throughput" in charted and "accept_length" in charted
    assert not set(COUNTS) & set(charted)
    listed = [cells[0] for _, cells in table(html, "counts")]
    assert set(COUNTS) <= set(listed)
    assert not set(COUNTS) & {cells[0] for _, cells in table(html, "before-after")}
    # accept_length is better higher: 2.91 → 3.02 (+3.8%, one figure each side) is noise,
    # 1.42 → 3.02 along the way is better, 2.91 → 1.42 worse
    rows = table(html, "before-after")
    at = next(i for i, (_, cells) in enumerate(rows) if cells[0] == "accept_length")
    rows = rows[at : next(i for i in range(at + 1, len(rows)) if "overall" in rows[i][0])]
    accept = re.search(r'<tr class="overall noise" data-series="accept_length-[^"]+">', html)
    assert accept is not None
    assert overall_row(html, "accept_length")[6:8] == ["+3.8%", "noise"]
    along = [cells for classes, cells in rows if "along" in classes]
    assert ["−51.2%", "worse"] in [c[4:6] for c in along] and ["+112.7%", "better"] in [
        c[4:6] for c in along
    ]
    # a latency is better lower: 5,689 → 5,328 ms is −6.3%, better
    assert overall_row(html, "mean_e2e_latency_ms")[6:8] == ["\u22126.3%", "better"]
    # the benchmark's command line is said once at the top, the rows name the benchmark
    assert html.count("--random-output-len 512</code>") == 1
    labels = overall_row(html, "output_token_throughput")[1]
    assert labels == "sglang.bench_serving"
    assert "command=" not in " ".join(cells[1] for _, cells in table(html, "figures"))


def test_the_demo_cpu_benchmark_shows_medians_and_spreads_and_reads_as_noise(
    demo_journal: tuple[Path, Path], tmp_path: Path
) -> None:
    db = copy_demo(demo_journal, tmp_path / "demo")
    cpu = [m for m in timeline_of(db, DEMO).metrics if m.name == "matmul_mflops"]
    before = [m.value for m in cpu if m.phase == "before"]
    after = [m.value for m in cpu if m.phase == "after"]
    assert len(before) == len(after) == SAMPLES  # repeated samples each side, one run each

    def side(values: list[float]) -> str:
        """A side as the page shows it: the median, and the min–max ×n beneath."""
        spread = f"{number(min(values))}–{number(max(values))} ×{len(values)}"
        return f"{number(statistics.median(values))} MFLOP/s{spread}"

    html = get(client_of(db), f"/j/{DEMO}/throughput")
    cells = overall_row(html, "matmul_mflops")
    assert cells[1] == "cpu-matmul, control=yes"
    assert (cells[3], cells[4]) == (side(before), side(after))
    # a control: the machine's noise whatever the figures (a real measurement on a shared
    # machine), and no throughput-regression finding for it; medians that came out equal
    # are "same", the one verdict before a control's (journal.projections.verdict.judge)
    if statistics.median(before) == statistics.median(after):
        assert cells[7] == "same"
    else:
        assert cells[7] == "noise"
        assert re.search(r'class="verdict noise" title="a control \(control label\)', html)
    # one row for the series: the two runs of samples, never one row per sample
    rows = [c for c in table(html, "before-after") if c[1][0] == "matmul_mflops"]
    assert len(rows) == 1
    report = journal("pitfalls", "--all", "--format", "json", db=db, runbook=demo_journal[1])
    titles = [
        f["title"]
        for f in json.loads(report.stdout)["findings"]
        if f["id"] == "throughput-regression" and f["title"].startswith("matmul_mflops")
    ]
    assert titles == []
    chart = re.search(r'data-metric="matmul_mflops".*?</figure>', html, re.S)
    assert chart is not None and 'class="spread"' in chart.group(0)
    assert f"spread of {SAMPLES} repeated figures" in chart.group(0)

    # figures recorded by hand are sets of their own, never merged into a run's samples: a
    # third of the median entered after the run (a wall-clock figure of a machine busy
    # elsewhere) is a change of -67%, and still noise for a control
    slow = round(statistics.median(after) / 3, 1)
    store = EventStore(str(db))
    try:
        store.append(
            DEMO,
            [
                MetricRecorded(
                    "matmul_mflops",
                    slow,
                    "MFLOP/s",
                    {"benchmark": "cpu-matmul", "control": "yes", "phase": "after"},
                    "manual",
                    host_name="local",
                )
            ],
        )
    finally:
        store.close()
    html = get(client_of(db), f"/j/{DEMO}/throughput")
    cells = overall_row(html, "matmul_mflops")
    assert cells[4] == f"{number(slow)} MFLOP/s" and cells[7] == "noise"
    report = journal("pitfalls", "--all", "--format", "json", db=db, runbook=demo_journal[1])
    assert not [
        f
        for f in json.loads(report.stdout)["findings"]
        if f["id"] == "throughput-regression" and f["title"].startswith("matmul_mflops")
    ]


def test_a_serving_benchmarks_item_lists_its_token_throughput_first() -> None:
    """A real `sglang.bench_serving` summary prints successful_requests and request_throughput
    before output_token_throughput: the timeline item lists the headline rate first, no count."""
    from journal.benchmarks.parsers import parse
    from journal.web.throughput import headline_figures

    printed = (Path(__file__).parent / "data" / "bench" / "sglang-bench-serving.txt").read_text()
    figures = parse("sglang", printed, command="python3 -m sglang.bench_serving").figures
    order = [f.name for f in figures]
    assert order.index("successful_requests") < order.index("request_throughput")
    assert order.index("request_throughput") < order.index("output_token_throughput")
    shown, more = headline_figures(figures)  # type: ignore[arg-type]
    names = [f.name for f in shown]
    assert names[0] == "output_token_throughput" and "request_throughput" in names
    assert "successful_requests" not in names and more == len(figures) - len(shown)
