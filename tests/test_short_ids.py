"""Run ids a person can type: the CLI, the web and the postmortem show each run by the
shortest start of its id (eight characters at least) that no other run shares, as git shows
commits, and `journal show` takes that start back. JSON, links and finding keys keep the
whole id."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from journal.events import JournalOpened, OutputChunk, StepFinished, StepStarted
from journal.runs import ShortIds
from journal.store import EventStore
from journal.web import create_app
from tests.helpers import journal, text, write_runbook

NAME = "ids"
#: Two runs sharing their first eight characters, and one alone.
TWINS = ("3f9a2c01aaaa1a2520d6dba", "3f9a2c01bbbb1a2520d6dbb")
ALONE = "77777777cccc1a2520d6dbc"


def _run(store: EventStore, run: str, step: str, status: str = "succeeded") -> None:
    store.append(
        NAME,
        [
            StepStarted(run, step, "box", "local", f"do {step}"),
            OutputChunk(run, "box", "stdout", f"{step} done\n", "utf-8", 10, 0.0),
            StepFinished(run, "box", status, 0 if status == "succeeded" else 1, 1.0),
        ],
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "journal.db"
    store = EventStore(str(path))
    try:
        store.append(NAME, [JournalOpened(NAME, "runbook.toml", {"box": "local"}, ["s"])])
        _run(store, TWINS[0], "install-torch")
        _run(store, ALONE, "verify-torch", status="failed")
        _run(store, TWINS[1], "reinstall-torch")
    finally:
        store.close()
    return path


def test_the_shortest_unique_start_of_eight_characters_at_least(db: Path) -> None:
    store = EventStore(str(db))
    try:
        short = ShortIds(store.id_neighbours)
        short.know([*TWINS, ALONE])
        assert short(TWINS[0]) == "3f9a2c01a"  # its twin shares eight: one more tells them apart
        assert short(TWINS[1]) == "3f9a2c01b"
        assert short(ALONE) == "77777777"
        assert short("nothing-like-it") == "nothing-"  # an id not (yet) recorded
    finally:
        store.close()


def test_log_status_and_pitfalls_show_short_ids_that_show_takes_back(db: Path) -> None:
    log = journal("log", db=db)
    assert log.returncode == 0, text(log.stderr)
    out = text(log.stdout)
    assert re.search(r"run 3f9a2c01a$", out, re.M) and re.search(r"run 77777777\b", out)
    assert ALONE not in out and TWINS[0] not in out

    status = text(journal("status", db=db).stdout)
    assert ALONE not in status

    for start, step in (("3f9a2c01a", "install-torch"), ("77777777", "verify-torch")):
        shown = journal("show", start, db=db)
        assert shown.returncode == 0, text(shown.stderr)
        assert f"{step} on box" in text(shown.stdout).splitlines()[0]

    both = journal("show", "3f9a2c01", db=db)
    assert both.returncode == 2
    assert "ambiguous" in text(both.stderr) and TWINS[0] in text(both.stderr)

    as_json = json.loads(journal("log", "--format", "json", db=db).stdout)
    runs = {item["run"] for item in as_json["items"] if item.get("run")}
    assert {*TWINS, ALONE} <= runs  # JSON keeps the whole id


def test_a_recorded_run_is_told_by_eight_characters(tmp_path: Path) -> None:
    book = write_runbook(
        tmp_path,
        """
[journal]
name = "short"
[hosts.this-machine]
ssh = "local"
[[steps]]
name = "hello"
run = "echo hello"
""",
    )
    db = tmp_path / "journal.db"
    ran = journal("run", "step", "hello", db=db, runbook=book, cwd=tmp_path)
    assert ran.returncode == 0, text(ran.stderr)
    told = re.search(r"\(run ([0-9a-f]+)\)", text(ran.stderr))
    assert told and len(told.group(1)) == 8
    shown = journal("show", told.group(1), db=db, runbook=book, cwd=tmp_path)
    assert shown.returncode == 0, text(shown.stderr)
    assert "echo hello" in text(shown.stdout)


def test_the_postmortem_shows_short_ids_and_its_json_whole_ones(db: Path, tmp_path: Path) -> None:
    md, as_json = tmp_path / "pm.md", tmp_path / "pm.json"
    for out in (md, as_json):
        made = journal("export", "postmortem", "-o", str(out), db=db)
        assert made.returncode == 0, text(made.stderr)
    markdown = md.read_text()
    assert "`77777777`" in markdown and ALONE not in markdown
    assert "(run 3f9a2c01a)" in markdown or "`3f9a2c01a`" in markdown
    doc: Any = json.loads(as_json.read_text())
    assert ALONE in json.dumps(doc)


def test_the_run_page_shows_the_short_id_and_links_the_whole_one(db: Path) -> None:
    app = create_app({"DB": str(db), "TESTING": True})
    page = app.test_client().get(f"/j/{NAME}/run/{ALONE}")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert f'<code title="{ALONE}">77777777</code>' in html
