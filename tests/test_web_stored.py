"""The web's pages that show a few items read the stored timeline's index, never the whole
timeline (issue 29): a run's page links the same runs before and after it, offers the same
rollback, and the timeline's newest page, the story, the findings and the journals page say
what the whole timeline says; none of them makes the server hold the whole journal, and a
whole timeline a page did hold is let go once no page asks for it.

The journal is the real demo (real uv, stand-in wheels) with a real H200 transcript imported,
and the runs a crash and a retry leave: a failed try retried on the same host (rollback names
the first try), one whose recorder died mid-run (lost), one that never launched, a transcript
command placed by its own time among the steps."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from journal.export.chart import charts_of
from journal.projections.metrics import change_steps
from journal.projections.timeline import StepRunView
from journal.web import create_app, state
from journal.web.throughput import change_rows, count_series
from tests.conftest import crashed_demo


@pytest.fixture(scope="module")
def db(demo_journal: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    return crashed_demo(demo_journal, tmp_path_factory.mktemp("web-stored"), retried=True)


def _ids(runs: tuple[StepRunView | None, ...]) -> list[str | None]:
    return [None if r is None else r.run_id for r in runs]


def test_a_run_page_links_and_offers_what_the_whole_timeline_says(db: Path) -> None:
    app = create_app({"DB": str(db)})
    states = app.extensions["journal"]
    name = states.journals()[0]
    whole = states.get(name)
    kept = states.stored(name)
    assert whole is not None and kept is not None
    runs = list(whole.timeline.runs.values())
    assert {"try-1", "try-2", "crash-lost", "placed"} <= {r.run_id for r in runs}
    firsts = 0
    for run in runs:
        mine = kept.run(run.run_id)
        assert mine is not None and mine.status == run.status, run.run_id
        assert _ids(kept.neighbours(mine)) == _ids(whole.neighbours(run)), run.run_id
        assert kept.rollback_first_try(mine) == whole.rollback_first_try(run), run.run_id
        firsts += whole.rollback_first_try(run)
    assert firsts  # some run is what before:STEP names, and try-1 is not (try-2 ran later)
    assert kept.run("no-such-run") is None and "no-such-run" not in kept.timeline.runs


def test_pages_of_a_few_items_never_hold_the_whole_journal(db: Path) -> None:
    app = create_app({"DB": str(db)})
    states = app.extensions["journal"]
    client = app.test_client()
    name = states.journals()[0]
    index = client.get("/")
    assert index.status_code == 200 and name in index.text
    page = client.get(f"/j/{name}")
    assert page.status_code == 200
    runs = list(dict.fromkeys(re.findall(rf'href="/j/{name}/run/([\w-]+)"', page.text)))
    assert "try-2" in runs and "placed" in runs
    for run in runs:
        shown = client.get(f"/j/{name}/run/{run}")
        assert shown.status_code == 200, run
    retry = client.get(f"/j/{name}/run/try-1").text
    assert "try-2" in retry  # its retry is linked
    for path in ("findings", "hosts", "story", "throughput"):
        assert client.get(f"/j/{name}/{path}").status_code == 200, path
    assert client.get(f"/j/{name}/run/nothing").status_code == 404
    assert states._folds == {}  # no page above folded the whole journal

    whole = client.get(f"/j/{name}?every=1")  # every item: the whole journal is held
    assert whole.status_code == 200 and name in states._folds
    # the newest page says what the whole timeline's says, item for item
    newest, every = _items(page.text), _items(whole.text)
    assert len(newest) > 10 and newest == every[-len(newest) :]
    states.fold_idle_s = 0.0
    client.get(f"/j/{name}/findings")
    assert name not in states._folds  # let go once no page asked for it


def test_the_throughput_page_charts_and_compares_what_the_whole_timeline_does(db: Path) -> None:
    app = create_app({"DB": str(db)})
    states = app.extensions["journal"]
    name = states.journals()[0]
    whole, kept = states.get(name), states.stored(name)
    assert whole is not None and kept is not None
    briefs = kept.figures()
    assert briefs.metrics == whole.timeline.metrics and len(briefs.metrics) > 2
    rows = change_rows(briefs)
    assert rows == change_rows(whole.timeline) and any(r.change is not None for r in rows)
    # the steps between two figures, named on the page: the same runs, in the same order
    assert [(r.run_id, r.step, r.host, r.seq) for r in change_steps(briefs)] == [
        (r.run_id, r.step, r.host, r.seq) for r in change_steps(whole.timeline)
    ]
    assert [c.svg for c in charts_of(briefs)] == [c.svg for c in charts_of(whole.timeline)]
    assert count_series(briefs) == count_series(whole.timeline)


def _items(html: str) -> list[str]:
    return re.findall(r'<li class="item[^"]*" id="((?:run|item)-[^"]+)"', html)


def test_a_long_journals_story_comes_after_its_page(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = create_app({"DB": str(db)})
    client = app.test_client()
    name = app.extensions["journal"].journals()[0]
    told = client.get(f"/j/{name}").text
    assert 'class="story"' in told and "story pending" not in told
    monkeypatch.setattr(state, "STORY_AT_ONCE", 1)
    app = create_app({"DB": str(db)})
    client = app.test_client()
    page = client.get(f"/j/{name}").text
    assert "story pending" in page and 'hx-get="/j/' in page
    later = client.get(f"/j/{name}/story").text
    section = re.search(r'<section class="story".*?</section>', told, re.S)
    assert section is not None and section.group(0) in later
