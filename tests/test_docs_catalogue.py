"""The catalogue page (docs/pitfalls.md) is the detectors' own text, and every pitfall is in it."""

from __future__ import annotations

import re
import socket
from pathlib import Path

from journal.pitfalls import catalogue_markdown, detectors
from tests.helpers import journal, no_traceback, text

CATALOGUE = Path(__file__).resolve().parents[1] / "docs" / "pitfalls.md"


def test_the_catalogue_page_is_the_one_the_detectors_make() -> None:
    page = CATALOGUE.read_text()
    found = re.search(
        r"<!-- catalogue: made by `python -m journal.pitfalls` -->\n(.*?)<!-- /catalogue -->",
        page,
        re.S,
    )
    assert found, "docs/pitfalls.md has no catalogue section"
    assert found.group(1) == catalogue_markdown(), (
        "docs/pitfalls.md's catalogue is stale: paste `python -m journal.pitfalls` between its "
        "markers"
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


def test_the_init_templates_examples_load_once_uncommented(tmp_path: Path) -> None:
    # `journal init` shows a probe, an expectation and a benchmark as comments: each must be a
    # runbook that loads once a user takes the leading "# " away.
    assert journal("init", cwd=tmp_path).returncode == 0
    runbook = tmp_path / "runbook.toml"
    example = re.compile(
        r"^# (\[\[steps\]\]|\[probes\.|\[benchmarks\.|name = \"install"
        r"|run = \"(uv|nvidia|python3 -m)|probes = |expect = |json = |parser = )"
    )
    lines = runbook.read_text().splitlines()
    runbook.write_text("\n".join(line[2:] if example.match(line) else line for line in lines))
    done = journal("status", db=tmp_path / "j.db", runbook=runbook, cwd=tmp_path)
    assert done.returncode == 0, text(done.stderr)
    for shown in ("install-torch", "pending"):
        assert shown in text(done.stdout)
