"""`journal export postmortem` on real journals: a step run on `local`, the seed's GPU session
imported as a transcript (bench_serving at 90 → 54.1 → 96.1 tok/s around a torch and an
sgl-kernel reinstall), notes tagged as a postmortem needs them and a finding acknowledged; and
the demo's upgrade with real uv, package snapshots and probes.

Every section must be there and filled from the record, the figures right, Markdown, HTML and
JSON must say the same, the HTML must request nothing but itself in a real browser (opened from
a file and served by `journal serve`), and what hosts printed must stay text.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page

from tests.browsing import chromium, journal_server, test_env
from tests.helpers import journal, no_traceback, text, write_runbook

ROOT = Path(__file__).resolve().parents[1]
SESSION = ROOT / "journal" / "demo" / "gpu-session.txt"
NAME = "seed-upgrade"

RUNBOOK = f"""[journal]
name = "{NAME}"

[hosts.local-box]
ssh = "local"
python = "{sys.executable}"

[[steps]]
name = "check-env"
run = '''{sys.executable} -c "import sys, time; time.sleep(0.2); print(sys.version)"'''
"""

NOTES = {
    "trigger": "EAGLE-3 needed sgl-kernel for CUDA 13, so torch had to move to the cu130 nightly",
    "root-cause": "the old sgl-kernel built for cu128 ran against the cu130 torch: 54.1 tok/s",
    "lesson": "benchmark after every kernel change, not only at the end",
    "summary": "The cu130 upgrade of gpu-box is done and EAGLE-3 is faster than before",
    "action": "re-tune NCCL variables on the multi-GPU hosts",
}
HOSTILE = (
    '<script>window.__pwned=1</script><img src="http://127.0.0.1:9/x.png"> '
    "[click](http://127.0.0.1:9/) | `tick` *bold* #hash"
)
ACK = "reinstalled sgl-kernel built for cu130; throughput back above the baseline"
SECTIONS = [
    "Summary",
    "Impact",
    "Timeline",
    "Failed steps",
    "What changed",
    "Pitfalls hit",
    "Root causes",
    "Trigger",
    "Action items",
    "Lessons learned",
    "Supporting information",
]
KEYS = {
    "title",
    "date",
    "journal",
    "hosts",
    "status",
    "story",
    "summary",
    "impact",
    "charts",
    "timeline",
    "changes",
    "pitfalls",
    "root_causes",
    "trigger",
    "action_items",
    "lessons",
    "supporting",
}


def _ok(*args: str, db: Path, runbook: Path | None = None) -> str:
    result = journal(*args, db=db, runbook=runbook, env=test_env())
    assert result.returncode == 0, text(result.stderr)
    return text(result.stdout)


@dataclass
class Seed:
    """The seed journal and its three exports, made once."""

    folder: Path
    db: Path
    runbook: Path
    md: str
    html: Path
    doc: dict[str, Any]
    findings: list[dict[str, Any]]


@pytest.fixture(scope="module")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Seed:
    folder = tmp_path_factory.mktemp("postmortem")
    db, runbook = folder / "journal.db", write_runbook(folder, RUNBOOK)
    _ok("run", "step", "check-env", db=db, runbook=runbook)
    _ok("import", "transcript", str(SESSION), "--host", "gpu-box", db=db, runbook=runbook)
    for tag, note in NOTES.items():
        _ok("note", note, "--tag", tag, "--author", "ana", db=db, runbook=runbook)
    _ok("note", HOSTILE, "--tag", "lesson", "--host", "local-box", db=db, runbook=runbook)
    findings = json.loads(_ok("pitfalls", "--all", "--format", "json", db=db, runbook=runbook))[
        "findings"
    ]
    (fell,) = [f for f in findings if f["id"] == "throughput-regression"]
    _ok("pitfalls", "ack", fell["key"], "--note", ACK, db=db, runbook=runbook)
    findings = json.loads(_ok("pitfalls", "--all", "--format", "json", db=db, runbook=runbook))[
        "findings"
    ]
    md = _ok("export", "postmortem", db=db, runbook=runbook)
    html, out_json = folder / "pm.html", folder / "pm.json"
    assert "wrote" in _ok("export", "postmortem", "-o", str(html), db=db, runbook=runbook)
    _ok("export", "postmortem", "--format", "json", "-o", str(out_json), db=db, runbook=runbook)
    doc = json.loads(out_json.read_text())
    return Seed(folder, db, runbook, md, html, doc, findings)


def _series(doc: dict[str, Any], metric: str, host: str) -> dict[str, Any]:
    (found,) = [
        s for s in doc["impact"]["throughput"] if s["metric"] == metric and s["host"] == host
    ]
    return found


def test_json_has_every_section_filled_from_the_record_and_the_figures_right(seed: Seed) -> None:
    doc = seed.doc
    assert KEYS <= set(doc)
    for key in KEYS - {"status"}:
        assert doc[key], f"{key} is empty"
    assert doc["journal"] == NAME and doc["title"] == f"Postmortem: {NAME}"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", doc["date"])
    assert [(h["name"], h["target"]) for h in doc["hosts"]] == [
        ("local-box", "local"),
        ("gpu-box", "imported"),
    ]

    # The throughput table: 90 -> 54.1 is -39.9%, 54.1 -> 96.1 is +77.6%, +6.8% overall.
    tokens = _series(doc, "output_token_throughput", "gpu-box")
    assert [p["value"] for p in tokens["points"]] == [90.0, 54.1, 96.1]
    assert [(c["before"], c["after"], c["percent"]) for c in tokens["changes"]] == [
        (90.0, 54.1, -39.9),
        (54.1, 96.1, 77.6),
    ]
    assert [c["better"] for c in tokens["changes"]] == [False, True]
    assert tokens["overall"]["percent"] == 6.8 and tokens["unit"] == "tok/s"
    assert doc["impact"]["throughput"][0] is tokens or doc["impact"]["throughput"][0] == tokens
    assert doc["impact"]["headline"]["percent"] == 6.8
    assert any("90.00 → 54.10 → 96.10 tok/s" in s for s in doc["story"]["lines"])
    assert [n["text"] for n in doc["summary"]["notes"]] == [NOTES["summary"]]
    assert any(c["throughput"] and "<svg" in c["svg"] for c in doc["charts"])

    # The timeline: the real step with its duration, the imported commands marked so.
    check = next(e for e in doc["timeline"] if e.get("step") == "check-env")
    assert check["status"] == "succeeded" and check["exit_code"] == 0
    assert check["duration"] >= 0.2 and check["packages_changed"] == 0
    benches = [e for e in doc["timeline"] if e["kind"] == "benchmark"]
    assert len(benches) == 3 and all(e["imported"] for e in benches)
    notes = [e["text"] for e in doc["timeline"] if e["kind"] == "note"]
    assert notes == [*NOTES.values(), HOSTILE]

    # What changed: from the snapshots on local-box, from uv's output on gpu-box.
    (local,) = doc["changes"]["local-box"]
    assert local["source"] == "snapshots" and local["packages"] == []
    texts = [p["text"] for e in doc["changes"]["gpu-box"] for p in e["packages"]]
    assert "numpy 2.4.2 -> 2.4.1 (downgraded)" in texts
    assert "torch 2.10.0+cu128 -> 2.12.0.dev20260226+cu130 (upgraded, variant switched)" in texts
    assert "sgl-kernel 0.3.21+cu128 -> 0.3.21+cu130 (variant-switched)" in texts

    # Pitfalls: evidence lines, the acknowledgement and the figure that came back.
    assert {p["key"] for p in doc["pitfalls"]} == {f["key"] for f in seed.findings}
    (fell,) = [p for p in doc["pitfalls"] if p["id"] == "throughput-regression"]
    assert any("54.10" in e["text"] for e in fell["evidence"])
    assert fell["resolution"]["acknowledged"].startswith(ACK + " (") and not fell["open"]
    assert fell["state"] == "resolved" and fell["acknowledged"]["note"] == ACK
    (back,) = fell["resolution"]["later"]
    assert "96.10 tok/s" in back["text"] and "+77.6%" in back["text"]

    assert [n["text"] for n in doc["root_causes"]] == [NOTES["root-cause"]]
    assert [n["text"] for n in doc["trigger"]] == [NOTES["trigger"]]
    assert [n["text"] for n in doc["lessons"]] == [NOTES["lesson"], HOSTILE]
    open_keys = [f["key"] for f in seed.findings if f["state"] == "open"]
    items = doc["action_items"]
    covered = [k for i in items if i["kind"] == "finding" for k in i["keys"]]
    assert sorted(covered) == sorted(open_keys)  # each open finding once, merged per pitfall
    assert len({i["id"] for i in items if i["kind"] == "finding"}) == len(items) - 1
    assert [i["text"] for i in items if i["kind"] == "note"] == [NOTES["action"]]

    commands = [c["command"] for c in doc["supporting"]["commands"]]
    assert any("sgl-kernel --index-url https://docs.sglang.ai/whl/cu130" in c for c in commands)
    gpu = doc["supporting"]["versions"]["gpu-box"]
    assert gpu["source"] == "installer output"
    assert gpu["packages"]["sgl-kernel"] == "0.3.21+cu130" and gpu["packages"]["numpy"] == "2.4.1"

    assert doc["status"] == "mitigated"  # warnings open (numpy downgraded), no error
    assert any("downgrade-cascade" in r for r in doc["status_reasons"])


def _md_sections(md: str) -> dict[str, str]:
    parts = re.split(r"^## (.+)$", md, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_markdown_has_every_section_in_order_and_says_what_the_json_says(seed: Seed) -> None:
    doc, md = seed.doc, seed.md
    assert md.startswith(f"# Postmortem: {NAME}\n")
    sections = _md_sections(md)
    assert list(sections) == SECTIONS
    for name, body in sections.items():
        assert body.strip() and "_No note tagged" not in body, name
    assert "| **Status** | **mitigated**:" in md

    rows = [line for line in sections["Impact"].splitlines() if "Output token throughput" in line]
    assert any("`90.00 tok/s`" in r and "`54.10 tok/s`" in r and "**-39.9%**" in r for r in rows)
    assert any("`54.10 tok/s`" in r and "`96.10 tok/s`" in r and "**+77.6%**" in r for r in rows)
    assert any("**+6.8%**" in r and "overall" in r for r in rows)

    timeline_rows = [r for r in sections["Timeline"].splitlines() if r.startswith("| 20")]
    assert len(timeline_rows) == len(doc["timeline"])
    pitfalls = re.findall(r"^### \d+\. (\w+) `([a-z-]+)`", sections["Pitfalls hit"], re.M)
    assert pitfalls == [(p["severity"], p["id"]) for p in doc["pitfalls"]]
    assert "54.10" in sections["Pitfalls hit"] and ACK.split(";")[0] in sections["Pitfalls hit"]
    assert "was back to 96.10 tok/s" in sections["Pitfalls hit"]
    for key in ("Root causes", "Trigger", "Lessons learned"):
        tag = {"Root causes": "root-cause", "Trigger": "trigger", "Lessons learned": "lesson"}
        assert NOTES[tag[key]] in sections[key]
    open_ids = re.findall(r"^- \[ \] \*\*\w+\*\* `([^`]+)`", sections["Action items"], re.M)
    assert open_ids == [i["id"] for i in doc["action_items"] if i["kind"] == "finding"]
    assert "- [ ] " + NOTES["action"] in sections["Action items"]
    assert "`numpy 2.4.2 -> 2.4.1 (downgraded)`" in sections["What changed"]
    assert (
        "sgl-kernel --index-url https://docs.sglang.ai/whl/cu130"
        in sections["Supporting information"]
    )


def test_what_hosts_and_people_wrote_stays_text_in_markdown_and_html(seed: Seed) -> None:
    md, html = seed.md, seed.html.read_text()
    # Every `<` and `[` of the note is escaped, so no renderer makes a tag or a link of it.
    assert not re.search(r"(?<!\\)(<script|<img|\[click)", md)
    assert "\\<script>" in md and "\\[click\\]" in md and "\\| `tick` \\*bold\\*" in md
    assert "<script" not in html.lower() and "<img" not in html.lower()
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in html
    # Nothing in the page refers to anything outside it but the SVG namespace.
    assert not re.search(r"""(src|href)=["']?(https?:|//|file:)""", html)
    assert "@import" not in html and "url(" not in html


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as launched:
        yield launched


def _watched(browser: Browser) -> tuple[Page, list[str], list[str]]:
    """A page that records every request it makes (and answers none but its own origin's)
    and every console message."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    requests: list[str] = []
    messages: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.on("console", lambda msg: messages.append(f"{msg.type}: {msg.text}"))
    page.on("pageerror", lambda exc: messages.append(str(exc)))
    return page, requests, messages


def _check_rendered(page: Page, doc: dict[str, Any]) -> None:
    """What a reader sees: every section, the figures, the charts, styles applied."""
    headings = page.locator("section > h2").all_inner_texts()
    assert headings == SECTIONS
    throughput = page.locator("table.throughput").inner_text()
    assert "-39.9%" in throughput and "+77.6%" in throughput and "96.10 tok/s" in throughput
    assert page.locator("figure.chart svg").count() == len(doc["charts"]) > 0
    assert page.locator("#timeline tbody tr").count() == len(doc["timeline"])
    assert page.locator("article.pitfall").count() == len(doc["pitfalls"])
    assert HOSTILE in page.locator("#lessons").inner_text()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("script, img, link, iframe, object, embed").count() == 0
    # The inline <style> applies: the status is shown in capitals, in amber while mitigated.
    status = page.locator("#status")
    assert status.inner_text() == "MITIGATED"
    assert status.evaluate("e => getComputedStyle(e).color") == "rgb(154, 103, 0)"  # a warning's


def test_the_html_opened_from_a_file_requests_nothing_but_itself(
    seed: Seed, browser: Browser
) -> None:
    page, requests, messages = _watched(browser)
    url = seed.html.as_uri()
    page.route(
        "**/*", lambda route: route.continue_() if route.request.url == url else route.abort()
    )
    page.goto(url)
    page.wait_for_load_state("networkidle")
    _check_rendered(page, seed.doc)
    assert requests == [url]
    assert messages == []  # a blocked load would have been reported here
    page.context.close()


def test_markdown_to_a_file_writes_the_throughput_charts_beside_it(
    seed: Seed, tmp_path: Path
) -> None:
    out = tmp_path / "report" / "pm.md"
    out.parent.mkdir()
    said = _ok("export", "postmortem", "-o", str(out), db=seed.db, runbook=seed.runbook)
    rates = [c for c in seed.doc["charts"] if c["throughput"]]
    assert f"{len(rates)} charts in pm-charts/" in said
    links = re.findall(r"^!\[.*\]\(<(pm-charts/[^>]+\.svg)>\)$", out.read_text(), re.M)
    assert len(links) == len(rates) >= 4
    for link in links:
        root = ET.parse(out.parent / link).getroot()
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert sorted(p.name for p in (out.parent / "pm-charts").iterdir()) == sorted(
        Path(link).name for link in links
    )


def test_status_is_resolved_once_every_finding_is_acknowledged(seed: Seed, tmp_path: Path) -> None:
    db = tmp_path / "copy.db"
    with sqlite3.connect(seed.db) as src, sqlite3.connect(db) as dst:
        src.backup(dst)
    for pitfall in sorted({f["id"] for f in seed.findings if f["acknowledged"] is None}):
        _ok("pitfalls", "ack", pitfall, "--note", "looked at it", db=db, runbook=seed.runbook)
    doc = json.loads(_ok("export", "postmortem", "--format", "json", db=db, runbook=seed.runbook))
    assert doc["status"] == "resolved"
    assert [i["kind"] for i in doc["action_items"]] == ["note"]
    assert all(p["resolution"]["acknowledged"] for p in doc["pitfalls"])
    md = _ok("export", "postmortem", db=db, runbook=seed.runbook)
    assert "| **Status** | **resolved**:" in md


def test_bad_input_is_refused_in_one_paragraph_with_exit_status_2(
    seed: Seed, tmp_path: Path
) -> None:
    cases = [
        (["--format", "pdf"], "invalid choice"),
        (["-o", str(tmp_path / "missing" / "pm.md")], "cannot write the postmortem"),
        (["-o", str(tmp_path)], "is a folder"),
        (["--journal", "nothing-yet"], "no journal named 'nothing-yet'"),
    ]
    for args, said in cases:
        result = journal("export", "postmortem", *args, db=seed.db, runbook=seed.runbook)
        err = text(result.stderr)
        assert result.returncode == 2, (args, err)
        assert said in err and no_traceback(result), (args, err)
        assert err.count("\n") == 1 and not result.stdout, (args, err)
    missing = journal("export", "postmortem", db=tmp_path / "none.db", env=test_env(), cwd=tmp_path)
    assert missing.returncode == 2 and "no database" in text(missing.stderr)
    assert not (tmp_path / "none.db").exists()


@pytest.fixture(scope="module")
def served(seed: Seed) -> Iterator[str]:
    """`journal serve` on the seed's database; its base URL."""
    with journal_server(seed.db, seed.folder / "serve.log") as (url, _):
        yield url


def test_the_web_ui_links_and_serves_all_three(seed: Seed, served: str, browser: Browser) -> None:
    base = f"{served}/j/{NAME}/export/postmortem"
    # the very documents the CLI writes with --base-url of this server: linked to its run pages
    linked = ("export", "postmortem", "--base-url", served)
    doc = json.loads(_ok(*linked, "--format", "json", db=seed.db, runbook=seed.runbook))
    md = _ok(*linked, db=seed.db, runbook=seed.runbook)
    html = _ok(*linked, "--format", "html", db=seed.db, runbook=seed.runbook)
    with urllib.request.urlopen(base + ".json") as response:
        assert response.headers["Content-Type"] == "application/json"
        assert response.headers["Content-Disposition"] == (
            f'attachment; filename="{NAME}-postmortem.json"'
        )
        assert json.loads(response.read()) == doc
    with urllib.request.urlopen(base + ".md") as response:
        assert response.headers["Content-Type"] == "text/markdown; charset=utf-8"
        assert response.headers["Content-Disposition"].startswith("attachment;")
        assert response.read().decode() == md
    with urllib.request.urlopen(f"{served}/j/{NAME}") as response:
        assert "style-src 'self'" in response.headers["Content-Security-Policy"]
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(base + ".pdf")
    assert missing.value.code == 404

    page, requests, messages = _watched(browser)
    page.goto(f"{served}/j/{NAME}")
    links = page.locator("nav.exports a")
    assert links.all_inner_texts() == ["HTML", "Markdown", "JSON"]
    requests.clear()
    links.first.click()
    page.wait_for_url(base + ".html")
    page.wait_for_load_state("networkidle")
    _check_rendered(page, doc)
    assert requests == [base + ".html"]
    assert messages == []
    with urllib.request.urlopen(base + ".html") as response:
        assert "Content-Disposition" not in response.headers
        policy = response.headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "style-src 'unsafe-inline'" in policy
        assert response.read().decode() == html
    page.context.close()


def test_the_demo_upgrade_tells_what_changed_and_what_fixed_it(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    made = journal("demo", str(folder), env=test_env())
    assert made.returncode == 0, text(made.stderr)
    db, runbook = folder / "journal.db", folder / "runbook.toml"
    doc = json.loads(_ok("export", "postmortem", "--format", "json", db=db, runbook=runbook))
    steps = {e["step"]: e for e in doc["changes"]["local"] if e["kind"] == "step"}
    assert steps["install-torch"]["source"] == "snapshots"
    assert steps["install-torch"]["packages"] == []  # uv said "Checked 3 packages"
    moved = {p["name"]: (p["before"], p["after"]) for p in steps["reinstall-torch"]["packages"]}
    assert moved["torch"] == ("2.10.0+cu128", "2.12.0.dev20260226+cu130")
    assert moved["numpy"] == ("2.4.2", "2.4.1")
    (probe,) = steps["verify-torch-again"]["probes"]
    fields = {row["field"]: (row["before"], row["after"]) for row in probe["fields"]}
    assert fields["torch.version"] == ("2.10.0+cu128", "2.12.0.dev20260226+cu130")
    assert fields["torch.cuda"] == ("12.8", "13.0")

    (noop,) = [p for p in doc["pitfalls"] if p["id"] == "noop-install"]
    assert any("packages in" in e["text"] for e in noop["evidence"])
    (fix,) = noop["resolution"]["later"]
    assert fix["step"] == "reinstall-torch"
    assert "torch 2.10.0+cu128 -> 2.12.0.dev20260226+cu130" in fix["text"]
    verify = next(e for e in doc["timeline"] if e.get("step") == "verify-torch-again")
    assert [c["ok"] for c in verify["expectations"]] == [True] * len(verify["expectations"]) != []
    assert verify["duration"] is not None and verify["exit_code"] == 0

    md = _ok("export", "postmortem", db=db, runbook=runbook)
    assert list(_md_sections(md)) == SECTIONS
    assert "`torch 2.10.0+cu128 -> 2.12.0.dev20260226+cu130 (upgraded, variant switched)`" in md
    assert "- `install-torch` at " in md and "  - no package changed" in md
    # runs that install nothing and changed nothing are counted in one line, not listed
    entries = [e for e in doc["changes"]["local"] if e["kind"] == "step"]
    quiet = Counter(
        e["step"]
        for e in entries
        if e["source"] == "snapshots"
        and not (e["packages"] or e["probes"] or e["unread"] or e["install"])
    )
    assert quiet and not quiet["install-torch"]  # a no-op install is evidence: listed
    section = md.split("## What changed")[1].split("\n## ")[0]
    (counted,) = [line for line in section.splitlines() if "changed no package" in line]
    assert counted.startswith(f"- {sum(quiet.values())} other step runs changed no package")
    for step, n in quiet.items():
        assert f"`{step}` ×{n}" in counted
        listed = sum(1 for e in entries if e["step"] == step) - n
        assert section.count(f"- `{step}` at ") == listed


PARTS = f"""[journal]
name = "parts"

[hosts.here]
ssh = "local"
python = "{sys.executable}"

[[steps]]
name = "first"
run = "echo one"

[[steps]]
name = "second"
run = "echo two"
"""


def test_a_postmortem_can_tell_one_plan_run_or_what_came_since_a_moment(tmp_path: Path) -> None:
    db, runbook = tmp_path / "journal.db", write_runbook(tmp_path, PARTS)
    _ok("run", "plan", db=db, runbook=runbook)
    _ok("note", "between the two plan runs", "--tag", "lesson", db=db, runbook=runbook)
    _ok("run", "plan", "--from", "first", db=db, runbook=runbook)

    def doc(*args: str) -> dict[str, Any]:
        return json.loads(_ok("export", "postmortem", "--format", "json", *args, db=db))

    whole = doc()
    assert whole["part"] is None and whole["title"] == "Postmortem: parts"
    kinds = [(e["kind"], e.get("step")) for e in whole["timeline"]]
    assert kinds.count(("step", "first")) == 2 and len(whole["timeline"]) == 5
    runs = [e for e in whole["timeline"] if e["kind"] == "step"]
    note = next(e for e in whole["timeline"] if e["kind"] != "step")

    latest = doc("--plan-run", "latest")
    plan = latest["part"]["plan_run"]
    assert latest["title"] == f"Postmortem: parts (plan run {plan})"
    assert [e["time"] for e in latest["timeline"]] == [e["time"] for e in runs[2:]]
    assert latest["lessons"] == []  # the note came before that plan run
    # a unique prefix names the same plan run; the markdown says which part it tells
    assert doc("--plan-run", plan[:14])["timeline"] == latest["timeline"]
    md = _ok("export", "postmortem", "--plan-run", plan, db=db)
    assert md.startswith(f"# Postmortem: parts (plan run {plan})")

    since = doc("--since", note["time"])
    assert since["part"] == {"since": note["time"], "plan_run": None}
    assert [e["time"] for e in since["timeline"]] == [note["time"]] + [e["time"] for e in runs[2:]]
    assert [n["text"] for n in since["lessons"]] == ["between the two plan runs"]
    assert len(doc("--since", "2w")["timeline"]) == 5

    # what cannot name a part is refused in one paragraph, and nothing is written
    before = db.read_bytes()
    cases = [
        (["--since", "yesterday"], "--since: 'yesterday' is no moment: give a date"),
        (
            ["--plan-run", "zzz"],
            f"--plan-run: the journal 'parts' has no plan run 'zzz' (the latest first: {plan}",
        ),
        (
            ["--since", "2999-01-01"],
            "the journal 'parts' holds nothing (since 2999-01-01 00:00 UTC)",
        ),
    ]
    for args, said in cases:
        result = journal("export", "postmortem", *args, "-o", str(tmp_path / "pm.md"), db=db)
        err = text(result.stderr)
        assert result.returncode == 2 and said in err and no_traceback(result), (args, err)
        assert err.count("\n") == 1 and not (tmp_path / "pm.md").exists()
    assert db.read_bytes() == before
