"""The postmortem tells the story (issue 16, part 6), on real recorded journals.

The demo's upgrade (real uv, package snapshots, torch-env probes, two open downgrade-cascade
findings and seven resolved ones); a runbook on ``local`` whose step fails after printing 30
lines on stderr; and one whose only step goes through and finds nothing. Each point is checked
in the JSON, the Markdown and the HTML export: the story and the stack table first, failed steps
with the tail of their stderr, action items from open findings only (merged, shortened, linked
to the web's run pages with ``--base-url``), Markdown that keeps code spans as code, probe
diffs without noise, and what zero findings says.
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import copy_demo
from tests.helpers import journal, no_traceback, text, write_runbook

BASE = "http://gpu-box.example:8000"


@dataclass
class Exports:
    doc: dict[str, Any]
    md: str
    html: str


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("JOURNAL_DB", "JOURNAL_RUNBOOK", "JOURNAL_TOKEN"):
        env.pop(name, None)
    return env


def _ok(*args: str, db: Path, runbook: Path) -> str:
    result = journal(*args, db=db, runbook=runbook, env=_env())
    assert result.returncode == 0, text(result.stderr)
    return text(result.stdout)


def _exports(db: Path, runbook: Path, *extra: str) -> Exports:
    pm = ("export", "postmortem", *extra)
    return Exports(
        doc=json.loads(_ok(*pm, "--format", "json", db=db, runbook=runbook)),
        md=_ok(*pm, "--format", "md", db=db, runbook=runbook),
        html=_ok(*pm, "--format", "html", db=db, runbook=runbook),
    )


def _section(md: str, title: str) -> str:
    start = md.index(f"## {title}\n")
    end = md.find("\n## ", start + 1)
    return md[start : end if end != -1 else None]


def _html_section(page: str, name: str) -> str:
    start = page.index(f'<section id="{name}">')
    return page[start : page.index("</section>", start)]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, demo_journal: tuple[Path, Path]) -> Exports:
    db = copy_demo(demo_journal, tmp_path_factory.mktemp("story-demo"))
    return _exports(db, demo_journal[1], "--base-url", BASE + "/")


# A step that prints on both streams, 30 lines on stderr with what Markdown and HTML must keep
# as text (backticks, a fence, a tag, colour codes), then fails.
FAIL_SCRIPT = r"""
import sys
print("said on stdout")
for i in range(30):
    print(f"err {i:02d} `x` <b>bold</b> -> here", file=sys.stderr)
sys.stderr.write("\x1b[31mcoloured\x1b[0m and a fence:\n```\n[link](http://127.0.0.1:9/)")
sys.exit(3)
"""


def _runbook(folder: Path, name: str, steps: str) -> Path:
    return write_runbook(
        folder,
        f"""[journal]
name = "{name}"

[hosts.box]
ssh = "local"
python = "{sys.executable}"

{steps}""",
    )


@pytest.fixture(scope="module")
def failing(tmp_path_factory: pytest.TempPathFactory) -> Exports:
    folder = tmp_path_factory.mktemp("story-failing")
    script = folder / "fail.py"
    script.write_text(FAIL_SCRIPT)
    runbook = _runbook(
        folder,
        "failing",
        f"""[[steps]]
name = "fine"
run = "echo fine"

[[steps]]
name = "boom"
run = "{sys.executable} {script}"
""",
    )
    db = folder / "journal.db"
    _ok("run", "step", "fine", db=db, runbook=runbook)
    failed = journal("run", "step", "boom", db=db, runbook=runbook, env=_env())
    assert failed.returncode != 0 and no_traceback(failed)
    return _exports(db, runbook, "--base-url", BASE)


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Exports:
    folder = tmp_path_factory.mktemp("story-quiet")
    runbook = _runbook(folder, "quiet", '[[steps]]\nname = "fine"\nrun = "echo fine"\n')
    db = folder / "journal.db"
    _ok("run", "step", "fine", db=db, runbook=runbook)
    return _exports(db, runbook)


# 1. The story first, with the stack table per host.


def test_story_key_has_the_stack_before_and_after_the_headline_and_the_findings(
    demo: Exports,
) -> None:
    story = demo.doc["story"]
    assert set(story) == {"hosts", "headline", "findings", "lines"}
    (local,) = [h for h in story["hosts"] if h["host"] == "local"]
    stack = {m["what"]: (m["before"], m["after"]) for m in local["stack"]}
    assert stack["torch"] == ("2.10.0+cu128", "2.12.0.dev20260226+cu130")
    assert stack["CUDA"] == ("12.8", "13.0")
    assert stack["NCCL"] == ("2.22.3", "2.28.9")
    packages = {m["what"]: (m["before"], m["after"]) for m in local["packages"]}
    assert packages["numpy"] == ("2.4.2", "2.4.1")
    assert packages["nvidia-nccl-cu13"] == (None, "2.28.9")
    head = story["headline"]
    assert (head["first"], head["worst"], head["last"]) == (90.0, 54.1, 96.1)
    assert head["percent"] == 6.8
    states = [p["state"] for p in demo.doc["pitfalls"]]
    assert sum(story["findings"]["open"].values()) == states.count("open")
    # nccl-changed is not among them: no figure that exercises NCCL was measured before the
    # swap on either host, so none shows it harmless
    assert story["findings"]["resolved"] == states.count("resolved") >= 5
    assert "nccl-changed" not in {p["id"] for p in demo.doc["pitfalls"] if p["state"] == "resolved"}
    assert story["findings"]["open"]["warning"] >= 2  # the demo's two downgrade cascades
    assert any("first → worst → last" in line for line in story["lines"])


def test_markdown_summary_opens_with_the_stack_table(demo: Exports) -> None:
    summary = _section(demo.md, "Summary")
    assert summary.startswith(
        "## Summary\n\n**Stack on `local`**\n\n| | Before | After |".replace("| |", "|  |")
    )
    local = summary.split("**Stack on `gpu-box`**")[0]  # the imported host has its own table
    rows = [line for line in local.splitlines() if line.startswith("| ")]
    assert "**Stack on `gpu-box`**" in summary  # read from its transcript
    assert "| torch | `2.10.0+cu128` | `2.12.0.dev20260226+cu130` | changed |" in rows
    assert "| CUDA | `12.8` | `13.0` | changed |" in rows
    assert "| NCCL | `2.22.3` | `2.28.9` | changed |" in rows
    assert "| nvidia-nccl-cu13 | `-` | `2.28.9` | changed |" in rows
    assert sum(row.startswith("| torch |") for row in rows) == 1  # torch once, not twice
    # the headline and the findings follow the tables, before the generated sentences
    assert summary.index("90.00 → 54.10 → 96.10 tok/s, first → worst → last") < summary.index(
        "step runs of"
    )
    assert re.search(r"findings: open [^;]*\d warning[^;]*; acknowledged 0; resolved \d+", summary)


def test_html_summary_opens_with_the_stack_table(demo: Exports) -> None:
    summary = _html_section(demo.html, "summary")
    assert summary.index('<table class="stack" data-host="local">') < summary.index("step runs of")
    row = re.search(r"<tr class=\"changed\"><th>torch</th>(.*?)</tr>", summary)
    assert row is not None
    assert "<code>2.10.0+cu128</code>" in row.group(1)
    assert "<code>2.12.0.dev20260226+cu130</code>" in row.group(1)
    assert "<th>NCCL</th><td><code>2.22.3</code></td><td><code>2.28.9</code>" in summary


# 2. Failed steps with the tail of their stderr.


def test_json_failed_step_carries_the_last_20_lines_of_its_stderr(failing: Exports) -> None:
    (run,) = failing.doc["failures"]
    assert (run["step"], run["host"], run["status"], run["exit_code"]) == (
        "boom",
        "box",
        "failed",
        3,
    )
    assert run["url"] == f"{BASE}/j/failing/run/{run['run']}"
    lines = run["stderr"]
    assert len(lines) == 20 and run["stderr_before"] == 13  # 33 lines in all
    assert lines[0] == "err 13 `x` <b>bold</b> -> here"
    assert lines[16] == "err 29 `x` <b>bold</b> -> here"
    assert lines[-3:] == ["coloured and a fence:", "```", "[link](http://127.0.0.1:9/)"]
    assert not any("said on stdout" in line for line in lines)
    assert failing.doc["status"] == "open"


def test_markdown_failed_step_is_a_fenced_block_that_holds(failing: Exports) -> None:
    section = _section(failing.md, "Failed steps")
    assert "### `boom` on `box`: failed, exit status 3" in section
    assert f"([run page](<{BASE}/j/failing/run/" in section
    assert "(after 13 earlier lines)" in section
    # the fence is longer than the ``` the step printed, so the block holds to its end
    start = section.index("````text\n")
    end = section.index("\n````", start)
    block = section[start + len("````text\n") : end]
    assert block.splitlines()[0] == "err 13 `x` <b>bold</b> -> here"
    assert block.splitlines()[-1] == "[link](http://127.0.0.1:9/)"
    assert "\x1b" not in failing.md and "err 12 " not in failing.md


def test_html_failed_step_escapes_its_stderr(failing: Exports) -> None:
    section = _html_section(failing.html, "failures")
    pre = re.search(r'<pre class="stderr">(.*?)</pre>', section, re.S)
    assert pre is not None
    assert "<b>" not in pre.group(1) and "&lt;b&gt;bold&lt;/b&gt;" in pre.group(1)
    assert html.unescape(pre.group(1)).splitlines()[0] == "err 13 `x` <b>bold</b> -> here"
    assert f'<a href="{BASE}/j/failing/run/' in section


def test_no_failed_step_says_so(demo: Exports) -> None:
    assert demo.doc["failures"] == []
    assert "_No step run failed._" in _section(demo.md, "Failed steps")
    assert "No step run failed." in _html_section(demo.html, "failures")


# 3. Action items: open findings only, merged, shortened, linked.


def test_action_items_are_the_open_findings_merged_and_linked(demo: Exports) -> None:
    doc = demo.doc
    open_keys = {p["key"] for p in doc["pitfalls"] if p["state"] == "open"}
    items = [i for i in doc["action_items"] if i["kind"] == "finding"]
    covered = [k for i in items for k in i["keys"]]
    assert sorted(covered) == sorted(open_keys)  # each open finding once, nothing resolved
    assert len({(i["id"], i["advice_full"]) for i in items}) == len(items)
    # the demo's CPU benchmark on local is measured for real: a loaded machine may open a
    # throughput-regression there too, so only the cascade is counted on; nccl-changed stays
    # open on both hosts (nothing measured NCCL before the swap)
    (cascade,) = [i for i in items if i["id"] == "downgrade-cascade"]
    allowed = {"downgrade-cascade", "throughput-regression", "nccl-changed"}
    assert {i["id"] for i in items} <= allowed
    assert "nccl-changed" in {i["id"] for i in items}
    assert cascade["id"] == "downgrade-cascade" and cascade["count"] == 2
    assert cascade["hosts"] == ["local", "gpu-box"]
    assert [link["url"] for link in cascade["links"]] == [
        f"{BASE}/j/cuda13-demo/run/{run}" for run in cascade["runs"]
    ]
    assert cascade["advice_full"].startswith(cascade["advice"][:-1])
    assert cascade["advice"].endswith(".") and len(cascade["advice"]) < len(cascade["advice_full"])
    assert "reinstalls only what you name" not in cascade["advice"]

    md = _section(demo.md, "Action items")
    assert md.count("- [ ] ") == len(items) and "reinstalls only what you name" not in md
    assert "(2 findings: `reinstall-torch` on `local` ([run `" in md
    for run in cascade["runs"]:
        assert f"(<{BASE}/j/cuda13-demo/run/{run}>)" in md
    # the full advice stays in the findings
    assert "reinstalls only what you name" in _section(demo.md, "Pitfalls hit")

    page = _html_section(demo.html, "action-items")
    assert page.count('<li class="action">') == len(items)
    for run in cascade["runs"]:
        assert f'<a href="{BASE}/j/cuda13-demo/run/{run}">' in page


def test_without_base_url_there_are_no_links(
    tmp_path: Path, demo_journal: tuple[Path, Path]
) -> None:
    db = copy_demo(demo_journal, tmp_path)
    doc = json.loads(
        _ok("export", "postmortem", "--format", "json", db=db, runbook=demo_journal[1])
    )
    links = [link for i in doc["action_items"] if i["kind"] == "finding" for link in i["links"]]
    assert links and all(link["url"] is None for link in links)
    bad = journal(
        "export", "postmortem", "--base-url", "gpu-box:8000", db=db, runbook=demo_journal[1],
        env=_env(),
    )  # fmt: skip
    assert bad.returncode != 0 and no_traceback(bad) and b"--base-url" in bad.stderr


# 4. Markdown: code spans stay code, no literal escapes.


def test_markdown_keeps_code_spans_and_arrows_unescaped(demo: Exports) -> None:
    md = demo.md
    assert "\\`" not in md and "-\\>" not in md and "\\→" not in md
    assert "`--reinstall`" in _section(md, "Pitfalls hit")
    assert "-> 2.12.0.dev20260226+cu130" in md  # an arrow in prose, as written
    # what is outside code spans is still escaped: nothing a host printed makes markup
    prose = re.sub(r"^(`{3,}).*?^\1$", "", md, flags=re.S | re.M)  # fenced blocks out
    prose = re.sub(r"(`+).+?\1", "", prose.replace("](<", ""))  # code spans out
    assert not re.search(r"(?<!\\)<[a-z/]", prose)
    assert "journal 0\\." not in md  # a version is no numbered list
    page = _html_section(demo.html, "pitfalls")
    assert "<code>--reinstall</code>" in page


def test_markdown_text_escaping() -> None:
    from journal.export.markdown import text

    assert text("add `--reinstall` -> done") == "add `--reinstall` -> done"
    assert text("a `x|y` <b> [l](u) *s*") == "a `x\\|y` \\<b> \\[l\\](u) \\*s\\*"
    assert text("> quoted") == "\\> quoted" and text("1. one") == "1\\. one"
    assert text("0.1.0") == "0.1.0" and text("-0.8%") == "-0.8%" and text("- a") == "\\- a"
    assert text("an `open tick") == "an \\`open tick"


# 5. Probe diffs without noise.


def test_probe_diffs_leave_out_noise(demo: Exports) -> None:
    rows = [
        row
        for entries in demo.doc["changes"].values()
        for entry in entries
        for probe in entry["probes"]
        for row in probe["fields"]
    ]
    fields = {row["field"] for row in rows}
    assert "nccl_library.version" in fields and "torch.version" in fields
    assert "nccl_library.path" not in fields and "nccl_library" not in fields
    nothing = (None, "None", "?", "")
    assert not any(row["before"] in nothing and row["after"] in nothing for row in rows)
    assert "nccl_library.path" not in demo.md and "nccl_library.path" not in demo.html
    assert "`nccl_library.version`: `-` → `2.28.9`" in demo.md


# 6. Zero findings.


def test_zero_findings_say_so(quiet: Exports) -> None:
    doc = quiet.doc
    assert doc["pitfalls"] == [] and doc["action_items"] == [] and doc["failures"] == []
    assert doc["status"] == "resolved"
    assert "No findings: nothing to resolve or acknowledge." in doc["status_reasons"]
    assert not any("acknowledged" in r and "No findings" not in r for r in doc["status_reasons"])
    assert doc["story"]["findings"] == {
        "open": {"error": 0, "warning": 0, "info": 0},
        "acknowledged": 0,
        "resolved": 0,
    }
    assert "_No findings: nothing to resolve or acknowledge._" in _section(quiet.md, "Action items")
    assert "every finding" not in quiet.md and "every finding" not in quiet.html
    assert "No findings: nothing to resolve or acknowledge." in _html_section(
        quiet.html, "action-items"
    )


def _chunk(stream: str, data: str) -> Any:
    from journal.events import OutputChunk

    return OutputChunk(
        run="r1", host_name="box", stream=stream, data=data, encoding="utf-8",
        size=len(data), t=0.0,
    )  # fmt: skip


class _Chunks:
    """A store that hands out a run's chunks one at a time, as EventStore.output_chunks does,
    making each only when asked (so that nothing holds the whole output but the reader)."""

    def __init__(self, count: int, make: Any) -> None:
        self.count, self.make, self.read = count, make, 0

    def output_chunks(self, run_id: str, **_: Any) -> Any:
        assert run_id == "r1"
        for i in range(self.count):
            self.read += 1
            yield i + 1, self.make(i)


def test_stderr_tail_reads_chunk_by_chunk_and_holds_only_the_tail() -> None:
    import tracemalloc

    from journal.export.changes import TAIL_LINE_CHARS, stderr_tail

    # 20 MB of stderr in 20,000 chunks, each line begun in one chunk and ended in the next,
    # stdout between them; then a line of 8 MB with no newline at all, which ends the output
    line = "x" * 1000

    def make(i: int) -> Any:
        if i % 2:
            return _chunk("stdout", "stdout says nothing\n")
        if i == 39_998:
            return _chunk("stderr", "y" * 8_000_000)
        return _chunk("stderr", f"{i // 2:05d}\x1b[1m\n{line}\nstart ")

    store = _Chunks(40_000, make)
    tracemalloc.start()
    try:
        tail = stderr_tail(store, "r1")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert store.read == 40_000
    assert peak < 20_000_000  # one 8 MB chunk at a time at most, never the 28 MB
    lines = tail["lines"]
    assert len(lines) == 20 and tail["before"] == 2 * 19_999 + 1 - 20
    assert lines[-1] == ("start " + "y" * 8_000_000)[:TAIL_LINE_CHARS] + " …"  # cut, and says so
    assert lines[-2] == line[:TAIL_LINE_CHARS] + " …"
    assert lines[-3] == "start 19998"  # its colour code out
    assert lines[1] == "start 19990" and lines[0] == lines[-2]
    assert not any("stdout" in x for x in lines)


def test_a_run_that_printed_nothing_on_stderr_has_an_empty_tail() -> None:
    from journal.export.changes import stderr_tail

    store = _Chunks(3, lambda i: _chunk("stdout", "only stdout\n"))
    assert stderr_tail(store, "r1") == {"lines": [], "before": 0}


def test_the_web_download_links_to_the_same_servers_run_pages(
    tmp_path: Path, demo_journal: tuple[Path, Path]
) -> None:
    from journal.web import create_app

    db = copy_demo(demo_journal, tmp_path)
    client = create_app({"DB": str(db), "TESTING": True}).test_client()
    root = "http://127.0.0.1:8000/journal"  # under a prefix: the script root is in each link
    path = "/j/cuda13-demo/export/postmortem"
    doc = client.get(f"{path}.json", base_url=root).get_json()
    cli = _ok("export", "postmortem", "--format", "json", "--base-url", root, db=db,
              runbook=demo_journal[1])  # fmt: skip
    written = json.loads(cli)  # what `--base-url` of the same URL writes: the same links
    assert (doc["action_items"], doc["failures"]) == (written["action_items"], written["failures"])
    links = [link["url"] for i in doc["action_items"] for link in i.get("links", [])]
    assert links and all(url.startswith(f"{root}/j/cuda13-demo/run/") for url in links)
    for url in links:  # each one is a page of this server
        assert client.get(url.removeprefix(root), base_url=root).status_code == 200
    md = client.get(f"{path}.md", base_url=root).get_data(as_text=True)
    page = client.get(f"{path}.html", base_url=root).get_data(as_text=True)
    for url in links:
        assert f"(<{url}>)" in md and f'<a href="{url}">' in page
    # at the root of a server of its own: links to that server
    plain = client.get(f"{path}.json").get_json()
    urls = [link["url"] for i in plain["action_items"] for link in i.get("links", [])]
    assert urls == [url.replace(root, "http://localhost") for url in links]
