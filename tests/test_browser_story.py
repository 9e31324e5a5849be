"""The story pages in Debian's chromium (playwright) against a real `journal serve` of the demo:
dark mode follows the system's colour scheme, a 400 px wide window keeps the navigation and
the pages within it (tables scroll inside themselves), and the README's screenshots are taken
(into a temporary folder here; bench/screenshots.py writes docs/screenshots)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from bench.screenshots import WIDTH, take
from tests.browsing import chromium, journal_server
from tests.conftest import copy_demo

DEMO = "cuda13-demo"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, demo_journal: tuple[Path, Path]) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("browser-story")
    db = copy_demo(demo_journal, folder)
    with journal_server(db, folder / "serve.log") as (served, _):
        yield served


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


def _page(browser: Browser, **options: object) -> Page:
    context = browser.new_context(**options)  # type: ignore[arg-type]
    context.set_default_timeout(15_000)
    return context.new_page()


def _rgb(css: str) -> tuple[int, int, int]:
    found = re.findall(r"\d+", css)
    return int(found[0]), int(found[1]), int(found[2])


def _lightness(css: str) -> float:
    r, g, b = _rgb(css)
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


def test_dark_mode_follows_the_colour_scheme(browser: Browser, url: str) -> None:
    for scheme, dark in (("dark", True), ("light", False)):
        page = _page(browser, color_scheme=scheme, viewport={"width": 1200, "height": 800})
        try:
            for path in (f"/j/{DEMO}", f"/j/{DEMO}/findings"):
                page.goto(url + path)
                page.locator("#story:not(.pending), .findings-head").first.wait_for()
                body = page.evaluate("getComputedStyle(document.body).backgroundColor")
                fg = page.evaluate("getComputedStyle(document.body).color")
                item = page.evaluate(
                    "getComputedStyle(document.querySelector('.item, .finding')).backgroundColor"
                )
                if dark:
                    assert _lightness(body) < 0.2 and _lightness(fg) > 0.6, (path, body, fg)
                    assert item == "rgba(0, 0, 0, 0)" or _lightness(item) < 0.3, (path, item)
                else:
                    assert _lightness(body) > 0.9 and _lightness(fg) < 0.3, (path, body, fg)
        finally:
            page.context.close()


def test_at_400_px_the_navigation_wraps_and_nothing_overflows(browser: Browser, url: str) -> None:
    page = _page(browser, viewport={"width": 400, "height": 800})
    try:
        page.goto(f"{url}/j/{DEMO}")
        page.locator("#story:not(.pending)").wait_for()
        run = page.locator("#timeline-list a.step").nth(3).get_attribute("href")
        plan = None
        for path in (f"/j/{DEMO}", f"/j/{DEMO}/findings", f"/j/{DEMO}/hosts", run):
            assert path is not None
            page.goto(url + path)
            page.locator("header.top nav.tabs").first.wait_for()
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= 400, (path, width)
            # every link of the navigation is within the window, none cut off
            rights = page.evaluate(
                "[...document.querySelectorAll('header.top a')]"
                ".map(a => a.getBoundingClientRect().right)"
            )
            assert rights and max(rights) <= 400, (path, rights)
            found = page.locator("a.plan-run")
            if found.count():
                plan = found.first.get_attribute("href")
        page.goto(f"{url}/j/{DEMO}")
        page.locator("table.stack").first.wait_for()
        rights = page.evaluate(
            "[...document.querySelectorAll('#story, #story table.stack')]"
            ".map(e => e.getBoundingClientRect().right)"
        )
        assert len(rights) >= 2 and max(rights) <= 400, rights  # the stack fits, cells wrap
        # a version wraps between its parts, never inside one (`2.10.0+cu` / `128`)
        parts = page.evaluate(
            """[...document.querySelectorAll('#story table.stack td code')].flatMap(code => {
                const walk = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
                const out = [];
                for (let n = walk.nextNode(); n; n = walk.nextNode()) {
                    const range = document.createRange();
                    range.selectNodeContents(n);
                    out.push([n.data, range.getClientRects().length]);
                }
                return out;
            })"""
        )
        assert any(text.startswith("+cu") for text, _ in parts), parts
        assert all(lines == 1 for _, lines in parts), parts
        if plan is not None:
            page.goto(url + plan)
            assert page.evaluate("document.documentElement.scrollWidth") <= 400
    finally:
        page.context.close()


def test_readme_screenshots_are_taken_at_1400_px(
    browser: Browser, url: str, tmp_path: Path
) -> None:
    shots = take(browser, url, tmp_path)
    assert [s.name for s in shots] == ["journal.png", "findings.png"]
    for shot in shots:
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert int.from_bytes(data[16:20], "big") == WIDTH


def test_a_run_page_offers_its_way_back_to_copy(browser: Browser, url: str) -> None:
    """The install-torch run's page: a folded offer of the rollback command that puts the host
    back before it; its copy button puts exactly that command on the clipboard."""
    page = _page(browser, viewport={"width": 1200, "height": 800})
    try:
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=url)
        page.goto(f"{url}/j/{DEMO}")
        page.locator("#story:not(.pending)").wait_for()
        page.locator("#timeline-list a.step", has_text="install-torch").first.click()
        offer = page.locator("details.rollback-offer")
        command = page.locator("#rollback-command")
        assert not command.is_visible()  # folded until asked for
        offer.locator("summary").click()
        assert command.inner_text() == "journal rollback --to before:install-torch --host local"
        button = offer.locator("button.copy")
        button.click()
        page.locator("button.copy.copied").wait_for()
        assert button.inner_text() == "copied"
        assert page.evaluate("navigator.clipboard.readText()") == command.inner_text()
    finally:
        page.context.close()


def test_choosing_a_pitfall_on_the_findings_page_shows_its_findings_alone(
    browser: Browser, url: str
) -> None:
    page = _page(browser, viewport={"width": 1200, "height": 800})
    page.goto(f"{url}/j/{DEMO}/findings")
    select = page.locator("select[name=pitfall]")
    ids = [v for v in select.locator("option").evaluate_all("os => os.map(o => o.value)") if v]
    assert len(ids) > 1, ids
    every = page.locator("article.finding").count()
    select.select_option(ids[0])  # no button: the page's script asks for it on change
    page.wait_for_url(re.compile(rf"/findings\?pitfall={re.escape(ids[0])}$"))
    keys = page.locator("article.finding").evaluate_all("fs => fs.map(f => f.dataset.key)")
    assert keys and len(keys) < every and all(k.startswith(f"{ids[0]}:") for k in keys), keys
    assert page.locator("select[name=pitfall]").input_value() == ids[0]
    page.context.close()


#: Where `UPDATE_SCREENSHOTS=1` puts the newcomer's walk (else the test's own folder).
NEWCOMER = Path(__file__).resolve().parents[1] / "docs" / "screenshots" / "newcomer"


@pytest.mark.parametrize("width", [1400, 420])
def test_a_newcomer_walks_from_the_demo_to_the_postmortem(
    browser: Browser, url: str, width: int, tmp_path: Path
) -> None:
    """The demo's journal page, the run that fixed it, the findings, the throughput, the
    postmortem's download, at 1400 and 420 px: at the top of each page (its first screen) what
    a reviewer must see; a screenshot of each (docs/screenshots/newcomer/)."""
    import os

    folder = NEWCOMER if os.environ.get("UPDATE_SCREENSHOTS") else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    height = 900
    page = _page(browser, viewport={"width": width, "height": height}, accept_downloads=True)

    def first_screen(locator: Locator) -> None:
        expect(locator).to_be_visible()
        box = locator.bounding_box()
        assert box is not None and box["y"] < height - 100, (width, box)  # 100 px of it show
        assert page.evaluate("document.documentElement.scrollWidth") <= width

    def shot(name: str) -> None:
        page.screenshot(path=str(folder / f"{name}-{width}.png"))

    try:
        page.goto(url + "/")
        page.get_by_role("link", name=DEMO, exact=True).click()
        page.locator("#story:not(.pending)").wait_for()
        # the journal: its story first, saying what went wrong, what fixed it, what is open
        first_screen(page.locator("#story table.stack").first)
        expect(page.locator("#story .story-fixed")).to_contain_text("noop-install")
        expect(page.locator("#story .story-open")).to_contain_text("downgrade-cascade")
        shot("journal")
        # the run that fixed it, from the story: what it changed, at its top
        page.locator("#story .story-fixed a.fix", has_text="reinstall-torch").first.click()
        first_screen(page.locator("#run-head"))
        expect(page.locator("#run-head h1")).to_contain_text("reinstall-torch")
        expect(page.locator("#packages tr.kind-downgraded")).to_have_count(2)
        shot("run")
        # the findings: what is still open first
        page.locator("nav.tabs").get_by_role("link", name=re.compile("^Findings")).click()
        first = page.locator("article.finding").first
        first_screen(first)
        expect(first).to_have_class(re.compile(r"\bstate-open\b"))
        shot("findings")
        # the throughput: before and after at the top, every figure folded away
        page.locator("nav.tabs").get_by_role("link", name="Throughput").click()
        first_screen(page.locator("#before-after"))
        expect(page.locator("#figures")).to_be_hidden()
        shot("throughput")
        # the postmortem, downloaded as a reviewer files it
        with page.expect_download() as got:
            page.locator("nav.exports a", has_text="Markdown").click()
        written = Path(got.value.path()).read_text()
        assert written.startswith(f"# Postmortem: {DEMO}") and "## What changed" in written
    finally:
        page.context.close()
