"""The web UI through Flask's test client, on journals made by real runs: the demo (real uv,
stand-in wheels) and a journal recorded over the real sshd (two hosts) and on `local`;
`journal serve` as a real process."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from flask.testing import FlaskClient

from journal.events import NoteAdded, OutputChunk, PitfallAcknowledged, StepFinished, StepStarted
from journal.pitfalls import counts
from journal.pitfalls.subjects import from_journal
from journal.service.findings import journal_findings
from journal.store import EventStore
from journal.web import create_app
from journal.web.findings import PER_PAGE
from journal.web.output import to_html
from journal.web.selection import NEWEST
from tests.conftest import copy_demo
from tests.helpers import JOURNAL, journal, no_traceback, text, write_runbook
from tests.sshd import SshHome, SshServer

DEMO = "cuda13-demo"
SSH = "web-ssh"
HX = {"HX-Request": "true"}
COLOUR = re.compile(r"\x1b\[[\d;]*m")


# -- journals made by real runs ---------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory, demo_journal: tuple[Path, Path]) -> Path:
    """The demo's database (five step runs on `local` with real uv), this module's copy."""
    return copy_demo(demo_journal, tmp_path_factory.mktemp("web-demo"))


@pytest.fixture(scope="module")
def recorded(
    tmp_path_factory: pytest.TempPathFactory,
    demo_journal: tuple[Path, Path],
    sshd_fleet: list[SshServer],
    _ssh_home_session: SshHome,
) -> Path:
    """A journal recorded over two real sshds (h1: journal's own python; h2: the demo's env
    with the stand-in torch 2.12.0.dev…+cu130) and on `local` (box)."""
    folder = tmp_path_factory.mktemp("web-ssh")
    h2_python = demo_journal[0].parent / "ml-env" / "bin" / "python3"  # read only
    assert h2_python.exists()
    rb = write_runbook(
        folder,
        f"""[journal]
name = "{SSH}"

[hosts.h1]
ssh = "{sshd_fleet[0].alias}"
python = {json.dumps(sys.executable)}

[hosts.h2]
ssh = "{sshd_fleet[1].alias}"
python = "{h2_python}"

[hosts.box]
ssh = "local"
python = {json.dumps(sys.executable)}

[probes.torch-env]
import_torch = true

[[steps]]
name = "colours"
run = '''printf '\\033[31mred\\033[0m plain\\n'; printf 'to-err\\n' >&2
sleep 1; echo out-again'''
hosts = ["h1", "h2"]

[[steps]]
name = "many-lines"
run = "seq 1 2500"
hosts = ["h1"]
snapshots = false

[[steps]]
name = "fails"
run = "echo about to fail; echo failing here >&2; exit 3"
hosts = ["h2"]
snapshots = false

[[steps]]
name = "xss"
run = '''echo '<script>alert(1)</script>'; echo '<img src=x onerror=alert(1)>' >&2
printf '\\033[1;31m<script>alert(2)</script>\\033[0m '
printf '\\033]8;;javascript:alert(3)\\007link\\033]8;;\\007\\n'
printf 'a"b&c\\n''''
hosts = ["box"]
snapshots = false
""",
    )
    db = folder / "journal.db"
    env = _ssh_home_session.env()
    for args, code in (
        (["run", "step", "colours"], 0),
        (["run", "step", "many-lines"], 0),
        (["run", "step", "fails"], 3),
        (["run", "step", "xss"], 0),
        (["run", "probe", "torch-env"], None),
        (["note", "swapped to cu130 on h1 <b>first</b>", "--tag", "lesson", "--host", "h1"], 0),
    ):
        result = journal(*args, db=db, runbook=rb, env=env)
        assert no_traceback(result), text(result.stderr)
        if code is not None:
            assert result.returncode == code, text(result.stderr)
    return db


def make_client(db: Path, **config: object) -> FlaskClient:
    app: Flask = create_app({"DB": str(db), "TESTING": True, **config})
    return app.test_client()


@pytest.fixture(scope="module")
def demo_client(demo: Path) -> FlaskClient:
    return make_client(demo)


@pytest.fixture(scope="module")
def ssh_client(recorded: Path) -> FlaskClient:
    return make_client(recorded)


def records(db: Path, name: str) -> list:
    store = EventStore(str(db))
    try:
        return list(store.read(name))
    finally:
        store.close()


def run_ids(db: Path, name: str) -> dict[tuple[str, str], str]:
    """(step, host) -> run id of the latest run."""
    return {
        (r.event.step, r.event.host_name): r.event.run
        for r in records(db, name)
        if isinstance(r.event, StepStarted)
    }


def page(client: FlaskClient, url: str, status: int = 200, **kwargs: object) -> str:
    response = client.get(url, **kwargs)
    assert response.status_code == status, response.get_data(as_text=True)[:2000]
    return response.get_data(as_text=True)


def items_of(html: str) -> list[tuple[str, str]]:
    """(kind, host) of each timeline item in the HTML."""
    found = re.findall(
        r'<li class="item ([\w-]+)[^"]*" id="[^"]+" data-seq="\d+"(?: data-host="([^"]*)")?', html
    )
    return [(kind, host) for kind, host in found]


# -- pages ------------------------------------------------------------------------------------


def test_journals_page_lists_each_journal_with_progress_and_open_findings(
    demo: Path, demo_client: FlaskClient
) -> None:
    html = page(demo_client, "/")
    assert f'href="/j/{DEMO}"' in html
    assert "local <b>5/5</b>" in html  # the demo's five steps done on its one host
    # reinstall-torch fixed the errors: the numpy downgrades are open, as warnings (and the
    # demo's CPU benchmark, measured for real, may have fallen on a loaded machine)
    store = EventStore(str(demo))
    try:
        findings, _ = journal_findings(store, DEMO)
    finally:
        store.close()
    tally = counts(findings)
    assert tally["warning"] >= 2
    assert re.search(rf'class="badge sev-warning"[^>]*>{tally["warning"]} warning<', html)
    assert ('class="badge sev-error"' in html) == bool(tally["error"])
    resolved = sum(1 for f in findings if f.state == "resolved")
    # nccl-changed stays open on both hosts: nothing measured NCCL before the swap
    assert resolved >= 5 and f"{resolved} resolved)</a>" in html
    assert "2026" in html or re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ", html)
    fragment = page(demo_client, "/", headers=HX)
    assert "<html" not in fragment and fragment.lstrip().startswith('<table class="journals"')


def test_timeline_shows_runs_in_order_with_status_duration_exit_and_finding_badges(
    demo: Path, demo_client: FlaskClient
) -> None:
    html = page(demo_client, f"/j/{DEMO}?host=local")
    steps = re.findall(r'<a class="step" href="/j/[^"]+/run/(\w+)">([\w-]+)</a>', html)
    assert [s for _, s in steps] == [
        "cpu-matmul",  # the demo's CPU benchmark, before the plan and after it
        "backup-env",
        "install-torch",
        "verify-torch",
        "reinstall-torch",
        "verify-torch-again",
        "cpu-matmul",
    ]
    install = run_ids(demo, DEMO)[("install-torch", "local")]
    item = html[html.index(f'id="run-{install}"') :].split("</li>\n<li", 1)[0]
    assert "succeeded" in item and "exit 0" in item and 'class="duration"' in item
    key = f"noop-install:{install}"  # the badge opens the findings page that holds it
    href = f"/j/{DEMO}/findings?finding={key}#f-{key}"
    assert f'href="{href}">noop-install (resolved)</a>' in item
    assert "numpy 2.4.2 -&gt; 2.4.1 (downgraded)" in html  # reinstall-torch's diff
    assert "ok expect torch.version = *+cu130 (2.12.0.dev20260226+cu130)" in html
    assert 'id="timeline-items" data-last-seq="' in html


def test_filters_narrow_the_timeline_by_host_kind_status_and_search(
    recorded: Path, ssh_client: FlaskClient
) -> None:
    url = f"/j/{SSH}"
    every = items_of(page(ssh_client, url))
    assert {h for _, h in every} >= {"h1", "h2", "box"}
    by_host = items_of(page(ssh_client, url + "?host=h1"))
    assert by_host and {h for _, h in by_host} == {"h1"}  # the note is about h1 too
    assert len(by_host) < len(every)
    failed = page(ssh_client, url + "?status=failed")
    assert [k for k, _ in items_of(failed)] == ["step"]
    assert ">fails</a>" in failed and "exit 3" in failed
    notes = page(ssh_client, url + "?kind=note")
    assert items_of(notes) == [("note", "h1")]
    assert "swapped to cu130 on h1 &lt;b&gt;first&lt;/b&gt;" in notes
    probes = items_of(page(ssh_client, url + "?kind=probe"))
    assert probes and {k for k, _ in probes} == {"probe"} and len(probes) == 3
    found = page(ssh_client, url + "?q=FAILING+HERE")  # stderr, any case
    assert re.findall(r">([\w-]+)</a>\n\s*<span class=\"on\">", found) == ["fails"]
    again = page(ssh_client, url + "?q=out-again&host=h2")
    assert re.findall(r">([\w-]+)</a>\n\s*<span class=\"on\">", again) == ["colours"]
    assert "0 items of" in page(ssh_client, url + "?q=no+such+text+anywhere")
    side = page(ssh_client, url + "?layout=hosts")
    assert '<table class="side-by-side"' in side
    assert re.findall(r"<th>([\w-]+)</th>", side)[:3] == ["box", "h1", "h2"]


def test_severity_filter_keeps_runs_with_open_findings_of_that_severity(
    demo: Path, demo_client: FlaskClient
) -> None:
    store = EventStore(str(demo))
    try:
        findings, _ = journal_findings(store, DEMO)
    finally:
        store.close()
    for severity in ("error", "warning"):
        expected = {f.run for f in findings if f.severity == severity and f.run and f.is_open}
        html = page(demo_client, f"/j/{DEMO}?severity={severity}")
        shown = re.findall(r'<a class="step" href="/j/[^"]+/run/(\w+)">', html)
        assert set(shown) == expected and len(shown) == len(expected)
    run = run_ids(demo, DEMO)[("reinstall-torch", "local")]
    assert run in re.findall(r'/run/(\w+)">', page(demo_client, f"/j/{DEMO}?severity=warning"))
    # the errors were resolved by reinstall-torch: no step run of the plan keeps an open one
    install = run_ids(demo, DEMO)[("install-torch", "local")]
    assert install not in re.findall(
        r'/run/(\w+)">', page(demo_client, f"/j/{DEMO}?severity=error")
    )


def test_a_filtered_url_loaded_directly_renders_the_same_items_in_the_whole_page(
    ssh_client: FlaskClient,
) -> None:
    url = f"/j/{SSH}?host=h2&status=failed"
    fragment = page(ssh_client, url, headers=HX)
    assert "<html" not in fragment and "<form" not in fragment
    assert fragment.lstrip().startswith('<div id="timeline-items"')
    full = page(ssh_client, url)
    assert full.startswith("<!doctype html>") and 'id="timeline-filters"' in full
    assert '<option value="h2" selected>' in full and '<option value="failed" selected>' in full
    assert items_of(full) == items_of(fragment) == [("step", "h2")]
    restore = page(ssh_client, url, headers={**HX, "HX-History-Restore-Request": "true"})
    assert restore.startswith("<!doctype html>")
    response = ssh_client.get(url, headers=HX)
    assert "HX-Request" in response.headers.get("Vary", "")


def test_items_after_a_sequence_number_are_only_what_changed_since(
    recorded: Path, ssh_client: FlaskClient
) -> None:
    recs = records(recorded, SSH)
    note_seq = next(r.seq for r in recs if r.event.type == "NoteAdded")
    html = page(ssh_client, f"/j/{SSH}/items?after={note_seq - 1}")
    assert items_of(html) == [("note", "h1")] and "<html" not in html
    assert page(ssh_client, f"/j/{SSH}/items?after={recs[-1].seq}").strip() == ""


def test_install_torch_page_links_the_noop_finding_to_its_highlighted_evidence_line(
    demo: Path, demo_client: FlaskClient
) -> None:
    run = run_ids(demo, DEMO)[("install-torch", "local")]
    html = page(demo_client, f"/j/{DEMO}/run/{run}")
    assert "uv pip install --python" in html and "--index-url file://" in html
    assert "UV_CACHE_DIR" in html  # the step's env
    finding = html[html.index(f'id="f-noop-install:{run}"') :].split("</article>")[0]
    assert '<a href="#L2">line 2</a>: <code>Checked 3 packages' in finding
    assert "--reinstall" in finding  # the advice
    line = re.search(r'<div class="line([^"]*)" id="L2"[^>]*>(.*?)</div>', html)
    assert line is not None
    assert "evidence" in line.group(1)
    assert '<span class="stream-stderr">Checked 3 packages' in line.group(2)
    # variant-not-switched's evidence lines are in verify-torch's output, on its page 1
    verify = run_ids(demo, DEMO)[("verify-torch", "local")]
    assert f'href="/j/{DEMO}/run/{verify}?page=1#L1"' in html


def test_reinstall_torch_page_shows_the_package_diff_by_kind(
    demo: Path, demo_client: FlaskClient
) -> None:
    run = run_ids(demo, DEMO)[("reinstall-torch", "local")]
    html = page(demo_client, f"/j/{DEMO}/run/{run}")
    kinds = {
        pkg: kind for kind, pkg in re.findall(r'data-kind="([\w-]+)" data-package="([\w-]+)"', html)
    }
    assert kinds["numpy"] == "downgraded" and kinds["pillow"] == "downgraded"
    assert kinds["torch"] == "upgraded" and kinds["nvidia-nccl-cu13"] == "added"
    assert 'title="numpy 2.4.2 -&gt; 2.4.1 (downgraded)"' in html
    torch_row = re.search(
        r'<tr class="change kind-upgraded variant-switched"[^>]*data-package="torch".*?</tr>',
        html,
        re.S,
    )
    assert torch_row is not None
    assert "2.10.0+cu128" in torch_row.group(0) and "2.12.0.dev20260226+cu130" in torch_row.group(0)
    assert "upgraded, variant switched (cu128 → cu130)" in torch_row.group(0)


def test_verify_page_shows_probe_results_and_expectation_verdicts(
    demo: Path, demo_client: FlaskClient
) -> None:
    run = run_ids(demo, DEMO)[("verify-torch-again", "local")]
    html = page(demo_client, f"/j/{DEMO}/run/{run}")
    assert "torch 2.12.0.dev20260226+cu130 (CUDA 13.0), NCCL 2.28.9" in html
    assert (
        "the probe's JSON" in html
        and "&#34;version&#34;: &#34;2.12.0.dev20260226+cu130&#34;" in html
    )
    verdicts = re.findall(
        r'<tr class="expectation (pass|fail)">\s*<td>\w+</td><td><code>([\w.]+)</code>', html
    )
    assert verdicts == [
        ("pass", "torch.version"),
        ("pass", "torch.cuda"),
        ("pass", "nccl"),
        ("pass", "packages.numpy"),
    ]
    assert 'id="L1"' in html and "torch: 2.12.0.dev20260226+cu130" in html


def test_output_lines_are_numbered_as_the_pitfall_evidence_numbers_them(
    recorded: Path, ssh_client: FlaskClient
) -> None:
    subject, _ = from_journal(SSH, records(recorded, SSH))
    run = next(r for r in subject.runs if r.step == "colours" and r.host == "h1")
    html = page(ssh_client, f"/j/{SSH}/run/{run.key}")
    expected = run.text.split("\n")[:-1]
    assert len(expected) == 3
    for number, line in enumerate(expected, 1):
        evidence = run.line_at(run.text.index(line))
        assert evidence.line == number
        div = re.search(rf'<div class="line[^"]*" id="L{number}"[^>]*>(.*?)</div>', html)
        assert div is not None, number
        shown = re.sub(r"<[^>]+>", "", div.group(1))
        assert shown == f"{number}{COLOUR.sub('', line)}"
    assert '<span class="stream-stdout"><span class="ansi31">red</span> plain</span>' in html
    assert '<span class="stream-stderr">to-err</span>' in html


def test_huge_output_is_paged_and_more_lines_load_as_a_fragment(
    recorded: Path, ssh_client: FlaskClient
) -> None:
    run = run_ids(recorded, SSH)[("many-lines", "h1")]
    html = page(ssh_client, f"/j/{SSH}/run/{run}")
    assert 'id="L2000"' in html and 'id="L2001"' not in html
    assert "page 1 of 2 (2000 lines a page)" in html
    more = f'hx-get="/j/{SSH}/run/{run}/output?page=2"'
    assert more in html and f'href="/j/{SSH}/run/{run}?page=2"' in html
    fragment = page(ssh_client, f"/j/{SSH}/run/{run}/output?page=2", headers=HX)
    assert "<html" not in fragment and 'id="L1"' not in fragment
    assert re.search(
        r'id="L2001"[^>]*><a class="ln" href="#L2001">2001</a>'
        r'<span class="text"><span class="stream-stdout">2001</span>',
        fragment,
    )
    assert 'id="L2500"' in fragment and "load lines" not in fragment
    second = page(ssh_client, f"/j/{SSH}/run/{run}?page=2")
    assert 'id="L2001"' in second and 'id="L1"' not in second
    assert f'href="/j/{SSH}/run/{run}?page=1">1–2000</a>' in second
    # a smaller page holds fewer lines; the same numbering
    small = make_client(recorded, LINES_PER_PAGE=100)
    assert 'id="L301"' in page(small, f"/j/{SSH}/run/{run}?page=4")


def test_output_after_a_sequence_number_is_only_the_newer_chunks(
    recorded: Path, ssh_client: FlaskClient
) -> None:
    run = run_ids(recorded, SSH)[("colours", "h2")]
    chunks = [
        r for r in records(recorded, SSH) if isinstance(r.event, OutputChunk) and r.event.run == run
    ]
    assert len(chunks) >= 2  # stdout before the sleep, stderr, stdout after it
    everything = page(ssh_client, f"/j/{SSH}/run/{run}/output?after=0")
    assert re.findall(r'id="L(\d+)"', everything) == ["1", "2", "3"]
    last = page(ssh_client, f"/j/{SSH}/run/{run}/output?after={chunks[-2].seq}")
    assert re.findall(r'id="L(\d+)"', last) == ["3"] and "out-again" in last
    assert page(ssh_client, f"/j/{SSH}/run/{run}/output?after={chunks[-1].seq}").strip() == ""


def test_hosts_page_shows_the_stack_and_marks_what_differs(
    demo_client: FlaskClient, ssh_client: FlaskClient
) -> None:
    html = page(demo_client, f"/j/{DEMO}/hosts")
    assert "2.12.0.dev20260226+cu130" in html and "nvidia-nccl-cu13" in html
    fleet = page(ssh_client, f"/j/{SSH}/hosts")
    torch_row = re.search(r'<tr class="stack( differs)?" data-row="torch">(.*?)</tr>', fleet, re.S)
    assert torch_row is not None and torch_row.group(1) == " differs"
    assert "2.12.0.dev20260226+cu130" in torch_row.group(2)
    numpy_row = re.search(
        r'<tr class="packages( differs)?" data-row="numpy">(.*?)</tr>', fleet, re.S
    )
    assert numpy_row is not None and numpy_row.group(1) == " differs"
    assert "2.4.1" in numpy_row.group(2) and "not installed" in numpy_row.group(2)
    # h2 (the stand-in torch) is the odd one where h1 and box (journal's own python) agree;
    # for numpy h1 and h2 tie, so there is no majority and both are marked, while box, never
    # snapshotted, is unread rather than different
    odd = r'<td class="odd" data-host="([\w-]+)"'
    assert re.findall(odd, torch_row.group(2)) == ["h2"]
    assert re.findall(odd, numpy_row.group(2)) == ["h1", "h2"]
    assert "no majority" in numpy_row.group(2)
    assert re.search(r'<td title="no package snapshot yet"><span class="muted">unread<', fleet)
    assert 'data-row="vllm"' not in fleet  # installed on no host: no row


# -- findings and acknowledging -----------------------------------------------------------------


def test_findings_page_lists_findings_with_evidence_links_and_advice(
    demo: Path, demo_client: FlaskClient
) -> None:
    html = page(demo_client, f"/j/{DEMO}/findings")
    ids = run_ids(demo, DEMO)
    install, fix = ids[("install-torch", "local")], ids[("reinstall-torch", "local")]
    noop = html[html.index(f'id="f-noop-install:{install}"') :].split("</article>")[0]
    assert f'href="/j/{DEMO}/run/{install}?page=1#L2">line 2 of install-torch on local</a>' in noop
    assert "advice:" in noop
    # resolved by reinstall-torch: read plainly, said so and linked to it (state-resolved)
    assert f'class="finding sev-error state-resolved" id="f-noop-install:{install}"' in html
    with demo_client.get("/static/journal.css") as response:
        css = response.get_data(as_text=True)
    resolved = "".join(line for line in css.splitlines() if "state-resolved" in line)
    assert "line-through" not in resolved and "opacity" not in resolved
    assert f'Resolved by <a href="/j/{DEMO}/run/{fix}">reinstall-torch</a> on local' in noop
    assert 'name="csrf_token"' not in noop  # nothing to acknowledge
    cascade = html[html.index(f'id="f-downgrade-cascade:{fix}"') :].split("</article>")[0]
    assert "state-open" in cascade and 'name="csrf_token"' in cascade and 'hx-post="' in cascade
    # all states shown: what still needs someone first, then what was dealt with
    states = re.findall(r'<article class="finding sev-\w+ state-(\w+)"', html)
    assert "open" in states and "resolved" in states
    rank = ("open", "acknowledged", "resolved")
    assert states == sorted(states, key=rank.index), states
    timeline = page(demo_client, f"/j/{DEMO}")
    assert "noop-install (resolved)</a>" in timeline


def test_acknowledging_needs_the_csrf_token_and_records_the_acknowledgement(
    demo: Path, tmp_path: Path
) -> None:
    db = tmp_path / "journal.db"
    shutil.copy(demo, db)
    # Findings judged again in the background after the first time, as on a big journal (or a
    # loaded machine): an acknowledgement shows at once all the same.
    client = make_client(db, SYNC_JUDGE_S=0.0)
    ids = run_ids(db, DEMO)
    key = f"downgrade-cascade:{ids[('reinstall-torch', 'local')]}"
    url = f"/j/{DEMO}/findings/ack"
    form = {"finding": key, "note": "numpy 2.4.1 is fine", "by": "ana"}
    assert client.post(url, data=form).status_code == 400  # no token, no session
    html = page(client, f"/j/{DEMO}/findings")
    token = re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)  # type: ignore[union-attr]
    assert client.post(url, data={**form, "csrf_token": "x" + token}).status_code == 400
    assert client.post(url, data=form).status_code == 400
    assert not [r for r in records(db, DEMO) if isinstance(r.event, PitfallAcknowledged)]
    empty = client.post(url, data={**form, "note": " ", "csrf_token": token})
    assert empty.status_code == 400 and b"Traceback" not in empty.data
    assert b"--note" not in empty.data  # the service words it, not as a command-line flag
    done = client.post(url, data={**form, "csrf_token": token})
    assert done.status_code == 303 and done.headers["Location"].endswith(f"#f-{key}")
    acks = [r.event for r in records(db, DEMO) if isinstance(r.event, PitfallAcknowledged)]
    assert [(a.finding, a.note, a.author) for a in acks] == [(key, "numpy 2.4.1 is fine", "ana")]
    after = page(client, f"/j/{DEMO}/findings")
    cascade = after[after.index(f'id="f-{key}"') :].split("</article>")[0]
    assert "Acknowledged by ana at " in cascade and ": numpy 2.4.1 is fine" in cascade
    assert 'class="ack-form"' not in cascade and "Withdraw acknowledgement" in cascade
    assert f'<article class="finding sev-warning state-acknowledged" id="f-{key}"' in after
    # by htmx (the header carries the token): the finding comes back as a fragment
    store = EventStore(str(db))
    try:
        found, _ = journal_findings(store, DEMO)
    finally:
        store.close()
    (other,) = [f.key for f in found if f.id == "downgrade-cascade" and f.host == "gpu-box"]
    fragment = client.post(
        url, data={"finding": other, "note": "same fix"}, headers={**HX, "X-CSRF-Token": token}
    )
    assert fragment.status_code == 200
    body = fragment.get_data(as_text=True)
    assert body.lstrip().startswith("<article") and ": same fix</p>" in body
    open_only = page(client, f"/j/{DEMO}/findings?show=open")
    assert f'id="f-{key}"' not in open_only and f'id="f-{other}"' not in open_only
    # withdrawn through the page: open again, with its form back
    back = client.post(
        f"/j/{DEMO}/findings/unack", data={"finding": other}, headers={**HX, "X-CSRF-Token": token}
    )
    assert back.status_code == 200
    body = back.get_data(as_text=True)
    assert "state-open" in body and 'class="ack-form"' in body
    assert f'id="f-{other}"' in page(client, f"/j/{DEMO}/findings?show=open")
    twice = client.post(f"/j/{DEMO}/findings/unack", data={"finding": other, "csrf_token": token})
    assert twice.status_code == 400 and b"is not acknowledged" in twice.data


def test_no_get_changes_the_store(recorded: Path, ssh_client: FlaskClient) -> None:
    before = EventStore(str(recorded)).count()
    ids = run_ids(recorded, SSH)
    urls = ["/", f"/j/{SSH}", f"/j/{SSH}?q=x&layout=hosts", f"/j/{SSH}/items?after=1"]
    urls += [f"/j/{SSH}/findings", f"/j/{SSH}/hosts", f"/j/{SSH}/findings/ack?finding=x&note=y"]
    for run in ids.values():
        urls += [f"/j/{SSH}/run/{run}", f"/j/{SSH}/run/{run}/output?page=2&after=0"]
    for url in urls:
        for headers in ({}, HX):
            # a page that failed (500) would change nothing either: each must answer
            answered = ssh_client.get(url, headers=headers)
            assert answered.status_code < 500, (url, headers, answered.status_code)
    assert ssh_client.get(f"/j/{SSH}/findings/ack").status_code == 405
    assert EventStore(str(recorded)).count() == before


# -- safety -------------------------------------------------------------------------------------


def test_output_from_hosts_is_escaped_and_runs_nothing(
    recorded: Path, ssh_client: FlaskClient
) -> None:
    run = run_ids(recorded, SSH)[("xss", "box")]
    html = page(ssh_client, f"/j/{SSH}/run/{run}")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert '<span class="ansi1 ansi31">&lt;script&gt;alert(2)&lt;/script&gt;</span>' in html
    assert "a&#34;b&amp;c" in html or 'a"b&amp;c' in html
    assert "<script>alert" not in html and "<img src=x" not in html
    output = html[html.index('id="output-lines"') :]
    assert "javascript:" not in output and " link</span>" in output  # a host's link: its text
    assert '<a href="javascript' not in html
    assert "onerror=alert" not in html.replace("onerror=alert(1)&gt;", "")
    timeline = page(ssh_client, f"/j/{SSH}?q=%3Cscript%3E")
    assert re.findall(r'<a class="step" href="[^"]+">([\w-]+)</a>', timeline) == ["xss"]
    assert 'value="&lt;script&gt;"' in timeline


def test_ansi_conversion_escapes_markup_in_every_path() -> None:
    for raw in (
        "<script>alert(1)</script>",
        "\x1b[31m<img src=x onerror=alert(1)>\x1b[0m",
        "\x1b]8;;javascript:alert(1)\x07<b>x</b>\x1b]8;;\x07",
        "\x1b]0;<script>title\x07\x1b[?25l<i>",
    ):
        html = str(to_html(raw))
        assert "<script" not in html and "<img" not in html and "<b>" not in html
        assert "<i>" not in html and "javascript" not in html and "\x1b" not in html


def test_pages_carry_a_csp_and_have_no_inline_script_handler_or_style(
    recorded: Path, ssh_client: FlaskClient
) -> None:
    run = run_ids(recorded, SSH)[("colours", "h1")]
    for url in ("/", f"/j/{SSH}", f"/j/{SSH}/run/{run}", f"/j/{SSH}/findings", f"/j/{SSH}/hosts"):
        response = ssh_client.get(url)
        csp = response.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "default-src 'self'" in csp
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        html = response.get_data(as_text=True)
        scripts = re.findall(r"<script\b[^>]*>", html)
        assert scripts and all(re.search(r'\bsrc="/static/', s) for s in scripts), scripts
        assert not re.search(r"<[^>]+\s(on\w+|style)=", html)
        assert '"includeIndicatorStyles": false' in html and '"allowEval": false' in html


def test_vendor_scripts_come_from_node_modules(demo_client: FlaskClient) -> None:
    with demo_client.get("/static/vendor/htmx.min.js") as htmx:
        assert htmx.status_code == 200 and b'version:"2.' in htmx.data
        assert htmx.mimetype == "text/javascript"
    with demo_client.get("/static/vendor/sse.js") as sse:
        assert sse.status_code == 200 and b"htmx.defineExtension('sse'" in sse.data
    assert demo_client.get("/static/vendor/../../package.json").status_code == 404
    assert b".ansi31" in demo_client.get("/static/ansi.css").data
    repo = Path(__file__).resolve().parents[1]
    assert not list(repo.glob("static/**/htmx*"))  # never copied into the repository


def test_unknown_journal_run_or_page_is_a_plain_404(ssh_client: FlaskClient) -> None:
    for url in ("/j/nope", f"/j/{SSH}/run/nope", "/j/nope/findings", "/nothing-here"):
        html = page(ssh_client, url, 404)
        assert "404 Not Found" in html and "Traceback" not in html


def test_an_internal_error_shows_a_plain_500_page(demo: Path, tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    shutil.copy(demo, db)
    with sqlite3.connect(db) as conn:  # an event this version cannot read: the replay fails
        conn.execute(
            "INSERT INTO events (journal, type, version, ts, host, run_id, payload, hash) "
            "VALUES (?, 'FromTheFuture', 1, '2026-12-01T00:00:00.000000Z', NULL, NULL, '{}', ?)",
            (DEMO, "0" * 64),
        )
    client = create_app({"DB": str(db), "TESTING": False}).test_client()
    response = client.get(f"/j/{DEMO}")
    assert response.status_code == 500
    html = response.get_data(as_text=True)
    assert "500 Internal Server Error" in html and "Something went wrong" in html
    assert "Traceback" not in html and "FromTheFuture" not in html and "UnknownEvent" not in html


def test_with_a_token_every_request_needs_it(demo: Path) -> None:
    client = make_client(demo, TOKEN="s3cret-token")
    for url in ("/", f"/j/{DEMO}", "/static/journal.css", "/?token=wrong"):
        response = client.get(url)
        assert response.status_code == 401 and b"Traceback" not in response.data
    bearer = client.get(f"/j/{DEMO}", headers={"Authorization": "Bearer s3cret-token"})
    assert bearer.status_code == 200
    first = client.get(f"/j/{DEMO}?token=s3cret-token&host=local")
    assert first.status_code == 303 and first.headers["Location"] == f"/j/{DEMO}?host=local"
    assert "journal_token=s3cret-token" in first.headers["Set-Cookie"]
    assert "HttpOnly" in first.headers["Set-Cookie"]
    assert client.get(f"/j/{DEMO}?host=local").status_code == 200  # the cookie carries it
    assert make_client(demo).get("/", headers={"Host": "evil.example"}).status_code == 400


# -- journal serve ------------------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("JOURNAL_DB", "JOURNAL_RUNBOOK", "JOURNAL_TOKEN"):
        env.pop(name, None)
    return env


def test_serve_refuses_to_bind_beyond_loopback_without_a_token(demo: Path) -> None:
    result = journal("serve", "--bind", "0.0.0.0", db=demo, env=_env(), timeout=20)
    assert result.returncode == 2 and no_traceback(result)
    assert b"--token" in result.stderr and b"JOURNAL_TOKEN" in result.stderr
    missing = journal("serve", db=demo.parent / "nope.db", env=_env(), timeout=20)
    assert missing.returncode == 2 and b"no database" in missing.stderr


@pytest.fixture
def served(demo: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [*JOURNAL, "--db", str(demo), "serve", "--bind", "127.0.0.1", "--port", str(port)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        yield proc, port
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_serve_listens_on_loopback_and_answers(
    demo: Path, served: tuple[subprocess.Popen[bytes], int]
) -> None:
    proc, port = served
    deadline = time.monotonic() + 30
    body = b""
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as response:
                assert response.status == 200
                body = response.read()
                break
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.1)
    assert f'href="/j/{DEMO}"'.encode() in body
    assert proc.stdout is not None
    assert proc.stdout.readline().decode().strip().endswith(f"at http://127.0.0.1:{port}/")
    evil = urllib.request.Request(f"http://127.0.0.1:{port}/", headers={"Host": "evil.example"})
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(evil, timeout=5)
    assert refused.value.code == 400
    refused.value.close()
    taken = journal("serve", "--port", str(port), db=demo, env=_env(), timeout=20)
    assert taken.returncode == 2 and b"cannot listen on 127.0.0.1" in taken.stderr


def test_a_long_timeline_shows_its_newest_items_and_links_to_all(tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    store = EventStore(str(db))
    try:
        store.append("long", [NoteAdded(f"note {i}") for i in range(NEWEST + 40)])
    finally:
        store.close()
    for stored in (False, True):
        if stored:  # the timeline stored: a fresh server reads only its newest items first
            assert journal("rebuild", db=db).returncode == 0
        client = make_client(db)
        html = page(client, "/j/long")
        shown = re.findall(r"<li class=\"item note\"", html)
        assert len(shown) == NEWEST
        assert f"note {NEWEST + 39}" in html and "note 39<" not in html and "note 40<" in html
        assert f"{NEWEST + 40} items" in html and "show the 40 earlier items too" in html
        every = page(client, "/j/long?every=1")
        assert len(re.findall(r"<li class=\"item note\"", every)) == NEWEST + 40
        assert "note 0<" in every and "earlier item" not in every


def test_the_findings_page_is_paged_filtered_and_opens_on_the_finding_a_link_names(
    tmp_path: Path,
) -> None:
    db = tmp_path / "journal.db"
    store = EventStore(str(db))
    events: list = []
    for i in range(130):  # 130 no-op installs on three hosts: a finding each
        run, host, out = f"r{i:04d}", f"gpu-{i % 3}", "Audited 1 package in 3ms\n"
        events += [
            StepStarted(run, "install-torch", host, "local", "uv pip install torch"),
            OutputChunk(run, host, "stderr", out, "utf-8", len(out), 0.1),
            StepFinished(run, host, "succeeded", 0, 1.0),
        ]
    events.append(PitfallAcknowledged("noop-install:r0007", "known", "ana"))
    try:
        store.append("many", events)
        found, _ = journal_findings(store, "many")
    finally:
        store.close()
    keys = [f.key for f in found]
    assert len(keys) == 130
    client = make_client(db)

    def shown(url: str) -> list[str]:
        return re.findall(r'<article class="finding [^"]*" id="f-([^"]+)"', page(client, url))

    # all states: the open ones first, then the one acknowledged
    acked_key = "noop-install:r0007"
    keys = [k for k in keys if k != acked_key] + [acked_key]
    first = page(client, "/j/many/findings")
    assert shown("/j/many/findings") == keys[:PER_PAGE]
    assert "page 1 of 3 (130 findings)" in first and 'rel="prev"' not in first
    assert 'rel="next" href="/j/many/findings?page=2"' in first
    assert ">open only (129)</a>" in first and ">acknowledged (1)</a>" in first
    assert shown("/j/many/findings?page=3") == keys[2 * PER_PAGE :]
    assert shown("/j/many/findings?page=99") == keys[2 * PER_PAGE :]  # the last page
    acked = shown("/j/many/findings?show=acknowledged")
    assert acked == ["noop-install:r0007"]
    assert "noop-install:r0007" not in shown("/j/many/findings?show=open")
    assert shown("/j/many/findings?show=resolved") == []
    # a link to one finding opens the page that holds it, in the state asked if it is there
    late = keys[120]
    assert late in shown(f"/j/many/findings?finding={late}")
    resolved = shown("/j/many/findings?show=resolved&finding=noop-install:r0007")
    assert "noop-install:r0007" in resolved
    # bad input is a plain 400 naming it
    for bad in ("show=gone", "page=x"):
        answer = client.get(f"/j/many/findings?{bad}")
        assert answer.status_code == 400 and b"Traceback" not in answer.data
        assert bad.split("=")[1].encode() in answer.data
    # an acknowledgement made on page 3 comes back to the page that holds that finding
    token = re.search(r'name="csrf_token" value="([^"]+)"', first).group(1)  # type: ignore[union-attr]
    done = client.post(
        "/j/many/findings/ack", data={"finding": late, "note": "fine", "csrf_token": token}
    )
    target = done.headers["Location"]
    assert done.status_code == 303 and target.endswith(f"#f-{late}")
    assert late in shown(target.split("#")[0])
