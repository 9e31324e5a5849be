"""The web UI in a real browser: Debian's chromium driven by playwright against a real
`journal serve`, on journals from real runs (the demo, and steps recorded on a `local` host),
with steps started while their pages are open. Screenshots of the main pages go to
test-artifacts/ (kept out of git).

Also here: the live streams over plain HTTP (resuming, ending, not holding up the server),
and the web's incremental fold checked against a full replay.
"""

from __future__ import annotations

import re
import sqlite3
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect

from journal.cli.serve import THREADS
from journal.events import OutputChunk, StepFinished, StepStarted
from journal.pitfalls.subjects import from_journal
from journal.service.findings import replayed_findings
from journal.store import EventStore
from journal.web.fold import JournalFold
from journal.web.state import JournalStates
from tests.browsing import chromium, http_get, journal_server, test_env
from tests.helpers import JOURNAL, journal, text, write_runbook

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
DEMO = "cuda13-demo"
LIVE = "live"
SCRIPT = "<script>window.__pwned=1</script>"
IMG = '<img src=x onerror="window.__pwned=2">'

expect.set_options(timeout=10_000)

RUNBOOK = f"""[journal]
name = "{LIVE}"

[hosts.box]
ssh = "local"

[[steps]]
name = "ticker"
run = "for i in 1 2 3 4 5 6 7 8; do echo line $i; sleep 0.5; done"
snapshots = false

[[steps]]
name = "chunks"
run = "echo one; sleep 0.4; echo two; sleep 0.4; echo three"
snapshots = false

[[steps]]
name = "deep"
run = '''seq 1 300; sleep 0.3
echo 'RuntimeError: CUDA error: no kernel image is available for execution on the device' >&2
sleep 0.3; seq 302 400'''
snapshots = false

[[steps]]
name = "xss"
run = '''sleep 1; echo '{SCRIPT}'; sleep 0.5; echo '{IMG}' >&2; printf wait; sleep 1.6; echo ed'''
snapshots = false
"""


# -- journals from real runs, served by a real `journal serve` ----------------------------------


@dataclass(frozen=True)
class Served:
    db: Path
    runbook: Path
    url: str
    proc: subprocess.Popen[bytes]

    def step(self, name: str) -> subprocess.Popen[bytes]:
        """`journal run step NAME` started in the background (wait for it)."""
        return subprocess.Popen(
            [*JOURNAL, "--db", str(self.db), "--runbook", str(self.runbook), "run", "step", name],
            env=test_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def run_ids(self, step: str, after: int = 0) -> list[str]:
        """Ids of the runs of ``step`` started after event ``after``, oldest first."""
        query = (
            "SELECT run_id FROM events WHERE journal = ? AND type = 'StepStarted' AND seq > ? "
            "AND json_extract(payload, '$.step') = ? ORDER BY seq"
        )
        with closing(sqlite3.connect(self.db)) as conn:
            return [row[0] for row in conn.execute(query, (LIVE, after, step))]

    def last_seq(self) -> int:
        with closing(sqlite3.connect(self.db)) as conn:
            return int(conn.execute("SELECT max(seq) FROM events").fetchone()[0] or 0)

    def chunk_seqs(self, run: str) -> list[int]:
        query = "SELECT seq FROM events WHERE run_id = ? AND type = 'OutputChunk' ORDER BY seq"
        with closing(sqlite3.connect(self.db)) as conn:
            return [row[0] for row in conn.execute(query, (run,))]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One database: the demo's journal, and a `live` journal with steps run on `local`."""
    folder = tmp_path_factory.mktemp("browser")
    demo = journal("demo", str(folder / "demo"), env=test_env())
    assert demo.returncode == 0, text(demo.stderr)
    db = folder / "demo" / "journal.db"
    runbook = write_runbook(folder, RUNBOOK)
    for step in ("deep", "chunks"):
        result = journal("run", "step", step, db=db, runbook=runbook, env=test_env())
        assert result.returncode == 0, text(result.stderr)
    with journal_server(db, folder / "serve.log") as (url, proc):
        yield Served(db, runbook, url, proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page; it fails the test if the page broke the CSP or threw."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    problems: list[str] = []

    def console(msg: ConsoleMessage) -> None:
        if msg.type == "error" and "EventSource" not in msg.text:
            problems.append(msg.text)

    tab.on("console", console)
    tab.on("pageerror", lambda exc: problems.append(str(exc)))
    try:
        yield tab
    finally:
        context.close()
    assert not problems, problems


def _shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def _output_texts(page: Page) -> list[str]:
    return page.locator("#output-lines > .line > .text").all_inner_texts()


# -- pages ----------------------------------------------------------------------------------------


def test_main_pages_render_and_are_saved_as_screenshots(served: Served, page: Page) -> None:
    page.goto(served.url + "/")
    expect(page.locator("table.journals tr.journal")).to_have_count(2)
    _shot(page, "journals")
    page.get_by_role("link", name=DEMO, exact=True).click()
    # the plan's 5 steps, the CPU benchmark before and after, the 8 commands of the GPU session
    expect(page.locator("#timeline-list > li.item.step")).to_have_count(15)
    _shot(page, "timeline")
    # the story names the reinstall as what fixed the no-op install: its link leads to it too
    fix = page.locator("#story .story-fixed a.fix", has_text="reinstall-torch").first
    expect(fix).to_be_visible()
    page.locator("#timeline-list").get_by_role("link", name="reinstall-torch").click()
    expect(page.locator("#packages tr.kind-downgraded")).to_have_count(2)  # numpy, pillow
    expect(page.locator("#output-lines > .line").first).to_be_visible()
    _shot(page, "run")
    page.locator("nav.tabs").get_by_role("link", name=re.compile("^Findings")).click()
    expect(page.locator("article.finding").first).to_be_visible()
    _shot(page, "findings")
    page.locator("nav.tabs").get_by_role("link", name="Hosts").click()
    expect(page.locator("#hosts-matrix tr.stack[data-row=torch]")).to_contain_text("+cu130")
    _shot(page, "hosts")


def test_a_filter_narrows_the_timeline_and_the_url_says_so(served: Served, page: Page) -> None:
    page.goto(f"{served.url}/j/{DEMO}")
    items = page.locator("#timeline-list > li.item")
    every = items.count()
    # The demo's errors were resolved by reinstall-torch: the runs with open warnings are left.
    page.select_option("select[name=severity]", "warning")
    expect(page).to_have_url(re.compile(r"\?severity=warning$"))
    expect(page.locator("#timeline-count")).to_contain_text(f"of {every} match")
    narrowed = items.count()
    assert 0 < narrowed < every
    for index in range(narrowed):
        expect(items.nth(index).locator(".badge.sev-warning.state-open").first).to_be_visible()
    page.reload()  # the URL is the filter: loaded directly, the same items
    expect(items).to_have_count(narrowed)
    expect(page.locator("select[name=severity]")).to_have_value("warning")


def test_a_findings_evidence_link_scrolls_to_and_highlights_its_line(
    served: Served, page: Page
) -> None:
    (deep,) = served.run_ids("deep")
    page.goto(f"{served.url}/j/{LIVE}/findings")
    link = page.get_by_role("link", name="line 301 of deep on box")
    link.click()
    expect(page).to_have_url(re.compile(rf"/run/{deep}\?page=1#L301$"))
    line = page.locator("#L301")
    expect(line).to_be_in_viewport()
    expect(line).to_have_class(re.compile(r"\bevidence\b"))
    expect(line).to_contain_text("no kernel image is available")
    assert line.evaluate("el => el.matches(':target')")
    assert not page.locator("#L1").evaluate("el => el.matches(':target')")
    # on the run's own page the finding links by anchor: back at the top, click it again
    page.evaluate("window.scrollTo(0, 0)")
    expect(line).not_to_be_in_viewport()
    page.locator('#findings a[href="#L301"]').first.click()
    expect(line).to_be_in_viewport()
    assert line.evaluate("el => el.matches(':target')")
    highlight = line.evaluate("el => getComputedStyle(el).backgroundColor")
    plain = page.locator("#L300").evaluate("el => getComputedStyle(el).backgroundColor")
    assert highlight != plain


# -- live -----------------------------------------------------------------------------------------


def _wait_for_run(served: Served, step: str, after: int, proc: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 20
    while not (found := served.run_ids(step, after)):
        assert proc.poll() is None and time.monotonic() < deadline, "the step did not start"
        time.sleep(0.05)
    return found[0]


def _finish(proc: subprocess.Popen[bytes]) -> None:
    assert proc.wait(timeout=30) == 0


def test_a_step_started_with_the_timeline_open_shows_up_and_its_page_streams_its_lines(
    served: Served, page: Page
) -> None:
    page.goto(f"{served.url}/j/{LIVE}")
    items = page.locator("#timeline-list > li.item")
    before = items.count()
    start = int(page.locator("#timeline-items").get_attribute("data-last-seq") or 0)
    proc = served.step("ticker")
    try:
        running = page.locator("#timeline-list > li.item.step.status-running")
        expect(running).to_have_count(1)  # came in live, no reload
        expect(items).to_have_count(before + 1)
        assert int(page.locator("#timeline-items").get_attribute("data-last-seq") or 0) > start
        running.locator("a.step").click()
        expect(page.locator("#output-lines.following")).to_be_visible()
        output = page.locator("#output-lines")
        expect(output).to_contain_text("line 3")
        # a line shows while the step still runs, before its last line is printed
        assert proc.poll() is None and "line 8" not in output.inner_text()
        _shot(page, "run-live")
        expect(page.locator("#run-head .status")).to_have_text("succeeded", timeout=20_000)
    finally:
        _finish(proc)
    assert _output_texts(page) == [f"line {i}" for i in range(1, 9)]  # each once, in order
    ids = page.locator("#output-lines > .line").evaluate_all("els => els.map(e => e.id)")
    assert ids == [f"L{i}" for i in range(1, 9)]
    expect(output).to_have_class(re.compile(r"\bfollowed\b"))  # the stream was closed
    expect(page.locator("#output-legend")).to_contain_text("8 lines")
    expect(page.locator("#output-legend")).not_to_contain_text("so far")
    last = output.get_attribute("data-last-seq")
    (run,) = served.run_ids("ticker", start)
    assert last == str(served.chunk_seqs(run)[-1])
    assert f"after={last}" in (output.get_attribute("sse-connect") or "")
    page.wait_for_timeout(1500)  # no reconnect brings anything twice
    assert _output_texts(page) == [f"line {i}" for i in range(1, 9)]
    page.reload()
    assert _output_texts(page) == [f"line {i}" for i in range(1, 9)]


def test_a_run_page_opened_as_the_step_starts_streams_it_and_the_timeline_follows(
    served: Served, browser: Browser, page: Page
) -> None:
    timeline = page.context.new_page()
    timeline.goto(f"{served.url}/j/{LIVE}")
    after = served.last_seq()
    proc = served.step("ticker")
    try:
        run = _wait_for_run(served, "ticker", after, proc)
        page.goto(f"{served.url}/j/{LIVE}/run/{run}")
        seen = page.locator("#output-lines > .line")
        expect(page.locator("#output-lines")).to_contain_text("line 2")
        assert proc.poll() is None and seen.count() < 8
        expect(timeline.locator(f"#run-{run}.status-running")).to_be_visible()
        expect(page.locator("#run-head .status")).to_have_text("succeeded", timeout=20_000)
    finally:
        _finish(proc)
    assert _output_texts(page) == [f"line {i}" for i in range(1, 9)]
    item = timeline.locator(f"#run-{run}")
    expect(item).to_have_class(re.compile(r"\bstatus-succeeded\b"))  # swapped in place
    expect(item).to_have_count(1)
    expect(item.locator(".size")).to_contain_text("8 lines out")
    timeline.close()


def test_output_with_script_and_img_payloads_shows_as_text_and_runs_nothing_live_or_not(
    served: Served, page: Page
) -> None:
    after = served.last_seq()
    proc = served.step("xss")
    try:
        run = _wait_for_run(served, "xss", after, proc)
        page.goto(f"{served.url}/j/{LIVE}/run/{run}")  # before the payloads are printed
        expect(page.locator("#run-head .status")).to_have_text("succeeded", timeout=20_000)
    finally:
        _finish(proc)
    output = page.locator("#output-lines")
    for shown in (page, None):
        if shown is None:
            page.reload()  # and rendered by the server, not streamed
        expect(output).to_contain_text(SCRIPT)
        expect(output).to_contain_text(IMG)
        # "wait" came alone (held a second, then recorded unfinished), "ed" later: the line
        # shown unfinished was replaced by the whole one, not shown twice
        assert _output_texts(page) == [SCRIPT, IMG, "waited"]
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert output.locator("script, img").count() == 0
        expect(page.locator("#command")).to_contain_text(SCRIPT)
    page.goto(f"{served.url}/j/{LIVE}")
    expect(page.locator(f"#run-{run} .command")).to_contain_text(SCRIPT)
    assert page.evaluate("typeof window.__pwned") == "undefined"


# -- the streams over HTTP ----------------------------------------------------------------------


def _messages(body: str) -> list[dict[str, str]]:
    out = []
    for block in body.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            if line.startswith(":") or ":" not in line:
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            fields[name] = fields[name] + "\n" + value if name in fields else value
        if "event" in fields:
            out.append(fields)
    return out


def test_a_finished_runs_stream_sends_its_lines_then_done_and_resumes_after_last_event_id(
    served: Served,
) -> None:
    (run,) = served.run_ids("chunks")
    chunks = served.chunk_seqs(run)
    assert len(chunks) >= 2  # printed with pauses: one chunk a line
    url = f"{served.url}/j/{LIVE}/run/{run}/live?after=0"
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        assert response.headers["Cache-Control"] == "no-cache"
        body = response.read().decode()  # it ends by itself
    events = _messages(body)
    assert [e["event"] for e in events] == ["lines", "done"]
    assert re.findall(r'id="L(\d)"', events[0]["data"]) == ["1", "2", "3"]
    assert events[0]["id"] == str(chunks[-1])
    assert 'hx-swap-oob="outerHTML"' in events[1]["data"] and "succeeded" in events[1]["data"]
    resumed = urllib.request.Request(url, headers={"Last-Event-ID": str(chunks[0])})
    with urllib.request.urlopen(resumed, timeout=10) as response:
        events = _messages(response.read().decode())
    assert [e["event"] for e in events] == ["lines", "done"]
    assert re.findall(r'id="L(\d)"', events[0]["data"]) == ["2", "3"]  # not L1 again


def test_open_streams_hold_up_no_request_and_end_when_their_browser_goes(served: Served) -> None:
    last = served.last_seq()
    streams = []
    try:
        for _ in range(4):
            stream = urllib.request.urlopen(f"{served.url}/j/{LIVE}/live?after={last}", timeout=10)
            assert stream.readline().startswith(b"retry:")
            streams.append(stream)
        # pages are still answered (a held-up server would time the requests out)
        assert f'href="/j/{DEMO}"' in http_get(served.url + "/")
        assert "timeline-items" in http_get(f"{served.url}/j/{LIVE}")
        # as many streams as the server has threads: each holds one while its browser reads
        for _ in range(THREADS - 4):
            stream = urllib.request.urlopen(f"{served.url}/j/{LIVE}/live?after={last}", timeout=10)
            assert stream.readline().startswith(b"retry:")
            streams.append(stream)
    finally:
        for stream in streams:
            stream.close()
    # gone, their streams end at their next beat and give the threads back: a page is answered
    assert f'href="/j/{DEMO}"' in http_get(served.url + "/")


# -- the web's fold is the full replay ------------------------------------------------------------


def _same(a: object, b: object) -> bool:
    """Equal as shown: dataclass reprs leave out what views cache (fields with repr=False)."""
    return repr(a) == repr(b)


def test_the_incremental_fold_is_the_full_replay_batch_after_batch(served: Served) -> None:
    store = EventStore(str(served.db))
    try:
        for name in (DEMO, LIVE):
            records = list(store.read(name))
            fold = JournalFold(name)
            earlier = []
            # batches of 1, 7, up to half and the rest (however few events the test that
            # ran first left in the live journal: no event is folded twice)
            n = len(records)
            cuts = sorted({0, 1, min(8, n), max(min(8, n), n // 2), n})
            for start, end in zip(cuts, cuts[1:], strict=False):
                earlier.append((end, fold.extend(records[start:end])))
            subject, timeline = from_journal(name, records)
            assert _same(fold.timeline, timeline)
            for end, folded in earlier:  # a later batch left an earlier timeline as it was
                assert _same(folded, from_journal(name, records[:end])[1])
            states = JournalStates(store)
            state = states.get(name)
            assert state is not None
            found, _ = replayed_findings(store, name)
            assert state.findings == found and state.last_seq == records[-1].seq
    finally:
        store.close()


def test_served_pages_name_their_stream_and_last_event(served: Served) -> None:
    html = http_get(f"{served.url}/j/{LIVE}?host=box")
    seq = re.search(r'id="timeline-items" data-last-seq="(\d+)"', html)
    assert seq is not None
    connect = re.search(r'sse-connect="([^"]+)"', html)
    assert connect is not None
    assert connect.group(1).replace("&amp;", "&") == f"/j/{LIVE}/live?after={seq.group(1)}&host=box"
    assert '<ol class="timeline" id="timeline-list" sse-swap="items" hx-swap="beforeend">' in html


def test_findings_judged_in_the_background_catch_up_with_the_journal(
    served: Served, tmp_path: Path
) -> None:
    db = tmp_path / "journal.db"
    with closing(sqlite3.connect(served.db)) as source, closing(sqlite3.connect(db)) as copy:
        source.backup(copy)
    store = EventStore(str(db))
    try:
        # judged in the background whatever it costs, as a big journal is
        states = JournalStates(store, sync_judge_s=0.0, rejudge_every_s=0.0)
        first = states.get(LIVE)
        assert first is not None and first.findings_seq == first.last_seq
        error = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
        error += "\n"
        store.append(
            LIVE,
            [
                StepStarted("late", "late", "box", "local", "python3 serve.py", machine="gone"),
                OutputChunk("late", "box", "stderr", error, "utf-8", len(error), 0.1),
                StepFinished("late", "box", "failed", 1, 0.4),
            ],
        )
        stale = states.get(LIVE)
        assert stale is not None and stale.last_seq > first.last_seq
        assert stale.run("late") is not None and stale.run("late").status == "failed"
        assert stale.findings_seq == first.last_seq  # the last findings, while judging goes on
        deadline = time.monotonic() + 20
        while (fresh := states.get(LIVE)) is not None and fresh.findings_seq != stale.last_seq:
            assert time.monotonic() < deadline, "the findings never caught up"
            time.sleep(0.05)
        expected, _ = replayed_findings(store, LIVE)
        assert fresh is not None and fresh.findings == expected
        assert any(f.run == "late" and f.id == "no-kernel-image" for f in fresh.findings)
    finally:
        store.close()
