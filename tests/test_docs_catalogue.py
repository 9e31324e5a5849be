"""The README's pitfall catalogue is the detectors' own text, and every pitfall is in it."""

from __future__ import annotations

import re
import socket
from pathlib import Path

from journal.pitfalls import catalogue_markdown, detectors
from tests.helpers import journal, no_traceback, text

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_catalogue_is_the_one_the_detectors_make() -> None:
    readme = README.read_text()
    found = re.search(
        r"<!-- catalogue: made by `python -m journal.pitfalls` -->\n(.*?)<!-- /catalogue -->",
        readme,
        re.S,
    )
    assert found, "the README has no catalogue section"
    assert found.group(1) == catalogue_markdown(), (
        "the README's catalogue is stale: paste `python -m journal.pitfalls` between its markers"
    )
    ids = re.findall(r"^#### `([a-z-]+)`$", found.group(1), re.M)
    assert ids == [m.ID for m in detectors()] and len(ids) >= 20


def test_a_busy_port_says_to_give_another_or_port_0(tmp_path: Path) -> None:
    assert journal("note", "hello", "--journal", "j", db=tmp_path / "j.db").returncode == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = journal("serve", "--port", str(port), db=tmp_path / "j.db", cwd=tmp_path)
    assert done.returncode == 2 and no_traceback(done)
    assert "--port 0" in text(done.stderr)
