"""The throughput page in a real browser (Debian's chromium through playwright, against a
real `journal serve`): the charts drawn on the server render as SVG with a point per figure,
within the Content-Security-Policy, and the page asks nothing of any other server. A
screenshot goes to test-artifacts/throughput.png."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, Request, expect

from tests.browsing import journal_server
from tests.conftest import copy_demo
from tests.test_browser import ARTIFACTS, DEMO
from tests.test_browser import browser as browser  # noqa: F401  (a fixture)
from tests.test_browser import page as page  # noqa: F401  (a fixture: fails on CSP errors)
from tests.test_chart import SEED, seed_events, write_journal


@pytest.fixture(scope="module")
def served_seed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`journal serve` on a database holding the seed story; its base URL."""
    folder = tmp_path_factory.mktemp("browser-throughput")
    db = folder / "journal.db"
    write_journal(db, seed_events())
    with journal_server(db, folder / "serve.log") as (url, _):
        yield url


def test_the_throughput_page_draws_its_charts_and_asks_no_other_server(
    served_seed: str,
    page: Page,  # noqa: F811
) -> None:
    asked: list[str] = []

    def record(request: Request) -> None:
        asked.append(request.url)

    page.on("request", record)
    page.goto(f"{served_seed}/j/{SEED}")
    page.locator("nav.tabs").get_by_role("link", name="Throughput").click()
    expect(page).to_have_url(f"{served_seed}/j/{SEED}/throughput")
    charts = page.locator("figure.chart-box svg.chart")
    expect(charts).to_have_count(2)
    first = charts.first
    expect(first.locator("g.point")).to_have_count(3)
    assert first.locator("g.point text.value").all_text_contents() == ["90", "54.1", "96.1"]
    marks = first.locator("g.mark text").all_text_contents()
    assert marks == ["install-torch", "reinstall-sgl-kernel"]
    # drawn, not just present: the chart has a size and its points sit inside it
    box = first.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 150
    dot = first.locator("g.point circle").nth(1).bounding_box()
    assert dot is not None and box["x"] < dot["x"] < box["x"] + box["width"]
    line = first.locator("polyline")
    expect(line).to_have_count(1)
    assert line.evaluate("el => el.getTotalLength()") > 100
    expect(page.locator("#before-after td.percent.worse")).to_have_text("−39.9%")
    expect(page.locator("#before-after td.percent.better").first).to_have_text("+6.8%")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "throughput.png"), full_page=True)
    outside = [u for u in asked if not u.startswith((served_seed + "/", "data:"))]
    assert asked and not outside, outside


def test_a_figure_on_the_timeline_links_to_its_row_on_the_throughput_page(
    served_seed: str,
    page: Page,  # noqa: F811
) -> None:
    page.goto(f"{served_seed}/j/{SEED}")
    item = page.locator("#timeline-list > li.item.metric")
    expect(item).to_have_count(1)
    expect(item).to_contain_text("gpu_power = 612.5 W")
    expect(item).to_contain_text("entered by hand")
    item.get_by_role("link", name="gpu_power").click()
    expect(page).to_have_url(re.compile(r"/throughput#figure-\d+$"))
    row = page.locator("#figures tr:target")
    expect(row).to_contain_text("612.5")
    expect(row).to_be_in_viewport()  # its fold opened for it


# -- the demo's page at 1400 px (issue 16): compact, directions, counts, noise ----------------

#: The demo's throughput page was 14,360 px tall at 1400 px, 21 charts one under another.
OLD_HEIGHT = 14_360
#: Where `UPDATE_SCREENSHOTS=1 pytest tests/test_browser_throughput.py` puts the page's picture.
SCREENSHOT = ARTIFACTS.parent / "docs" / "screenshots" / "throughput.png"


@pytest.fixture(scope="module")
def served_demo(
    demo_journal: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """`journal serve` on a copy of the session's demo journal; its base URL."""
    folder = tmp_path_factory.mktemp("browser-throughput-demo")
    db = copy_demo(demo_journal, folder / "demo")
    with journal_server(db, folder / "serve.log") as (url, _):
        yield url


def test_the_demo_throughput_page_is_compact_at_1400_px_and_reads_each_direction(
    served_demo: str,
    page: Page,  # noqa: F811
) -> None:
    page.set_viewport_size({"width": 1400, "height": 900})
    page.goto(f"{served_demo}/j/{DEMO}/throughput")
    boxes = page.locator("figure.chart-box")
    expect(boxes.first).to_be_visible()
    height = page.evaluate("document.documentElement.scrollHeight")
    # the before/after table and the charts; the counts and every figure folded below them
    for fold in ("#counts-fold", "#figures-fold"):
        assert page.locator(fold).evaluate("d => d.open") is False
    expect(page.locator("#figures")).to_be_hidden()
    # each series' first → latest; the changes along the way folded under a button
    along = page.locator("#before-after tr.along")
    changes = along.count()
    assert changes > 10
    expect(along.first).to_be_hidden()
    toggle = page.locator("button[data-toggle-along]")
    expect(toggle).to_have_text(f"show the {changes} changes along the way")
    # 2,806 px when this was written (3,708 with the changes along the way, 7,279 unfolded)
    assert height < OLD_HEIGHT * 0.3, height
    # charts sit side by side: the first row holds several, at one height
    tops = [b["y"] for b in (boxes.nth(i).bounding_box() for i in range(3)) if b]
    lefts = [b["x"] for b in (boxes.nth(i).bounding_box() for i in range(3)) if b]
    assert len(tops) == 3 and max(tops) - min(tops) < 1 and lefts == sorted(set(lefts))
    # counts are listed, not charted
    metrics = boxes.evaluate_all("els => els.map(e => e.dataset.metric)")
    assert "matmul_mflops" in metrics and "accept_length" in metrics
    for count in ("successful_requests", "total_input_tokens", "concurrency"):
        assert count not in metrics
        expect(page.locator("#counts th.metric", has_text=count)).to_have_count(1)
    # accept_length higher is better: 1.42 → 3.02 green; the overall +3.8% is noise (grey)
    rows = page.locator("#before-after tr[data-series^='accept_length-']")
    overall = rows.filter(has=page.locator("th.metric"))
    expect(overall.locator("td.percent")).to_have_text("+3.8%")
    expect(overall.locator("td.verdict")).to_have_text("noise")
    assert "rgb(102, 112, 122)" == overall.locator("td.percent").evaluate(
        "el => getComputedStyle(el).color"
    ) or "noise" in (overall.locator("td.percent").get_attribute("class") or "")
    accept = page.locator("figure.chart-box[data-metric='accept_length'] text.direction")
    expect(accept).to_have_text("↑ higher is better")
    up = rows.filter(has_text="+112.7%")
    expect(up.locator("td.verdict")).to_have_text("better")
    green = up.locator("td.percent").evaluate("el => getComputedStyle(el).color")
    red = page.locator("#before-after td.percent.worse").first.evaluate(
        "el => getComputedStyle(el).color"
    )
    assert green != red
    # every chart has several x ticks and a y axis from 0
    for i in range(boxes.count()):
        svg = boxes.nth(i).locator("svg.chart")
        assert svg.locator("g.x-axis text.tick").count() > 1
        assert svg.locator("g.y-axis text").first.text_content() == "0"
    # the long command line is said once at the top, not on every row
    expect(page.locator("#shared-labels dd")).to_have_count(1)
    expect(page.locator("#shared-labels dd code")).to_contain_text("python -m sglang.bench_serving")
    assert page.locator("#before-after td.labels", has_text="command=").count() == 0
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "throughput-demo.png"), full_page=True)
    if os.environ.get("UPDATE_SCREENSHOTS"):  # the docs' picture, on demand (no churn)
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ARTIFACTS / "throughput-demo.png", SCREENSHOT)
    toggle.click()
    expect(along.first).to_be_visible()
    expect(toggle).to_have_text(f"hide the {changes} changes along the way")
    taller = page.evaluate("document.documentElement.scrollHeight")
    assert taller > height, (taller, height)
    toggle.click()
    expect(along.first).to_be_hidden()
    # on a narrow screen, one chart a row
    page.set_viewport_size({"width": 600, "height": 900})
    first, second = (boxes.nth(i).bounding_box() for i in range(2))
    assert first and second and first["x"] == second["x"] and second["y"] > first["y"]
