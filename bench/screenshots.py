"""The README's screenshots: the demo journal's page (its story header on top) and its findings
page, 1400 px wide, taken by Debian's chromium (playwright) from a real `journal serve`.

Run: ``.venv/bin/python bench/screenshots.py [--out docs/screenshots]`` (a demo journal is made
in a temporary folder first: a few seconds). ``tests/test_browser_story.py`` takes the same
screenshots into a temporary folder, so this keeps working.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import Browser  # noqa: E402

from tests.browsing import chromium, journal_server, test_env  # noqa: E402
from tests.helpers import journal, text  # noqa: E402

DEMO = "cuda13-demo"
WIDTH = 1400


def take(browser: Browser, url: str, out: Path, name: str = DEMO) -> list[Path]:
    """journal.png and findings.png of journal ``name`` served at ``url``, into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": WIDTH, "height": 900}, color_scheme="light")
    context.set_default_timeout(15_000)
    try:
        page = context.new_page()
        page.goto(f"{url}/j/{name}")
        # a first page shown from the stored timeline asks for the story once the fold is done
        page.locator("#story:not(.pending)").wait_for()
        shots = [out / "journal.png", out / "findings.png"]
        page.screenshot(path=str(shots[0]), full_page=False)
        page.goto(f"{url}/j/{name}/findings")
        page.locator("article.finding").first.wait_for()
        page.screenshot(path=str(shots[1]), full_page=False)
        return shots
    finally:
        context.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="journal-shots-") as tmp:
        folder = Path(tmp) / "demo"
        made = journal("demo", str(folder), env=test_env())
        if made.returncode != 0:
            print(text(made.stderr), file=sys.stderr)
            return 1
        with journal_server(folder / "journal.db", Path(tmp) / "serve.log") as (url, _):
            with chromium() as browser:
                for shot in take(browser, url, Path(args.out)):
                    print(f"wrote {shot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
