"""What a one-GPU host says, in a real browser (Debian's chromium through playwright, against
a real `journal serve` on the journals recorded on H200 hosts): the `allreduce` a one-GPU H200
could not run is drawn skipped, its reason beside it, in no red; a +3.2% matmul change between
two single figures is drawn as noise in the story, neither green nor red."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browsing import journal_server
from tests.test_browser import browser as browser  # noqa: F401  (a fixture)
from tests.test_browser import page as page  # noqa: F401  (a fixture: fails on CSP errors)

BENCH = Path(__file__).parent / "data" / "h200" / "bench"
COLOUR = "el => getComputedStyle(el).color"


def _var(page: Page, name: str) -> str:
    """A colour of the stylesheet's :root (``#3465a4``) as computed styles give it."""
    value = page.evaluate(
        f"() => getComputedStyle(document.documentElement).getPropertyValue('{name}').trim()"
    )
    red, green, blue = (int(value[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgb({red}, {green}, {blue})"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """`journal serve` on a copy of each H200 journal: which -> base URL."""
    folder = tmp_path_factory.mktemp("browser-skipped")
    with ExitStack() as servers:
        urls = {}
        for which, name in (("skipped", "journal-h200-skipped"), ("x2", "journal-h200x2")):
            db = folder / f"{name}.db"
            shutil.copy(BENCH / f"{name}.db", db)
            urls[which] = servers.enter_context(journal_server(db, folder / f"{name}.log"))[0]
        yield urls


def test_a_skipped_allreduce_is_drawn_skipped_with_its_reason_in_no_red(
    served: dict[str, str],
    page: Page,  # noqa: F811
) -> None:
    page.goto(f"{served['skipped']}/j/h200-bench")
    item = page.locator("li.item.step.status-skipped")
    expect(item).to_have_count(1)
    expect(item.locator(".head .status")).to_have_text("skipped")
    expect(item.locator("a.step")).to_have_text("allreduce")
    reason = item.locator("p.reason")
    expect(reason).to_have_text("allreduce_busbw: needs 2 or more GPUs, found 1")
    fail, info, muted = (_var(page, name) for name in ("--fail", "--info", "--muted"))
    assert item.locator(".head .status").evaluate(COLOUR) == info != fail
    assert reason.evaluate(COLOUR) == muted != fail
    assert item.evaluate("el => getComputedStyle(el).borderLeftColor") == info
    page.locator("li.item.step.status-skipped a.step").click()
    head = page.locator("section.run-head.status-skipped")
    expect(head.locator("h1 .status")).to_have_text("skipped")
    # the run page is a new document: its stylesheet may still be loading when the heading is
    # there, so the colours are awaited, not read once
    expect(head.locator("h1 .status")).to_have_css("color", info)
    expect(head.locator("p.reason")).to_have_css("color", muted)


def test_a_3_percent_matmul_change_is_noise_in_the_story(
    served: dict[str, str],
    page: Page,  # noqa: F811
) -> None:
    page.goto(f"{served['x2']}/j/h200-bench")
    percent = page.locator("#story .headline .percent")
    expect(percent).to_have_text("+3.2% within noise")
    expect(percent).to_have_class("percent noise")
    assert percent.evaluate(COLOUR) == _var(page, "--muted")
