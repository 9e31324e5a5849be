"""Run state `skipped` (issue 25, part 5): a benchmark its host cannot run, which said why, is
recorded `skipped` with the reason, never `failed`, and no view counts it as a failure.

The run is real: journal's built-in `allreduce` run by a real torch 2.13.0+cpu (the target
venv of tests/torch_venv.py) on this machine, which has no GPU: the script says it needs 2 or
more GPUs and found 0. The same run recorded on a real one-GPU H200 is read in
tests/test_gpu_benchmarks.py. Notifications go to a real HTTP receiver on 127.0.0.1, with a
benchmark that does fail beside it, so that the receiver is seen to hear failures.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from journal.events import StepFinished, StepStarted
from journal.store import EventStore
from tests.helpers import journal, no_traceback, text, write_runbook
from tests.torch_venv import torch_venv

WHY = "allreduce_busbw: needs 2 or more GPUs, found 0; torch 2.13.0+cpu sees no CUDA device"


@pytest.fixture
def hook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A webhook receiver on loopback: its URL and the JSON bodies it got."""
    bodies: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    yield f"http://{host}:{port}/hook", bodies
    server.shutdown()
    server.server_close()


def _finished(db: Path) -> dict[str, StepFinished]:
    """Each benchmark's last StepFinished, by benchmark name."""
    store = EventStore(str(db))
    try:
        records = list(store.read("skip-test"))
    finally:
        store.close()
    names = {r.event.run: r.event.step for r in records if isinstance(r.event, StepStarted)}
    return {names[r.event.run]: r.event for r in records if isinstance(r.event, StepFinished)}


def test_allreduce_on_a_host_without_gpus_is_skipped_with_why_and_fails_nothing(
    tmp_path: Path, hook: tuple[str, list[dict[str, Any]]]
) -> None:
    url, bodies = hook
    python = torch_venv()
    rb = write_runbook(
        tmp_path,
        f"""[journal]
name = "skip-test"

[hosts.box]
ssh = "local"
python = "{python}"

[[steps]]
name = "upgrade"
run = "echo upgraded"

[benchmarks.allreduce]
builtin = "allreduce"

[benchmarks.broken]
run = "echo server not reachable"
parser = "sglang"

[notify.team]
url = "{url}"
format = "json"
on = ["step-failed"]
""",
    )
    db = tmp_path / "j.db"

    # A benchmark that does fail, first: the receiver hears it (and will hear nothing more).
    broken = journal("run", "bench", "broken", db=db, runbook=rb)
    assert broken.returncode == 1, text(broken.stderr)
    assert _finished(db)["broken"].status == "failed"
    assert [(b["event"], b["step"], b["status"]) for b in bodies] == [
        ("step-failed", "broken", "failed")
    ]

    # The run: exit 0, its verdict says skipped and why, and a closing line says so once.
    ran = journal("run", "bench", "allreduce", db=db, runbook=rb)
    err = text(ran.stderr)
    assert ran.returncode == 0 and no_traceback(ran), err
    assert "journal: [skip] allreduce on box skipped, exit 0 in " in err
    assert WHY in err and "FAIL" not in err
    assert "allreduce skipped on box: it cannot run there" in err
    assert "nothing was measured, nothing failed" in err
    ended = _finished(db)["allreduce"]
    assert (ended.status, ended.exit_code, ended.reason) == ("skipped", 0, WHY)
    assert len(bodies) == 1, bodies  # no step-failed notice for it

    # journal log: [skip], the reason, and not among --failed.
    log = text(journal("log", db=db, runbook=rb).stdout)
    assert re.search(r"\[skip\] allreduce on box: skipped exit 0 ", log), log
    assert WHY in log
    failed = text(journal("log", "--failed", db=db, runbook=rb).stdout)
    assert "broken on box: failed" in failed and "allreduce" not in failed
    items = json.loads(journal("log", "--format", "json", db=db, runbook=rb).stdout)["items"]
    [run] = [i for i in items if i["kind"] == "run" and i["step"] == "allreduce"]
    assert (run["status"], run["recorded_status"], run["reason"]) == ("skipped", "skipped", WHY)

    # journal show, text and JSON.
    shown = text(journal("show", run["run"], db=db, runbook=rb).stdout)
    assert "status:   skipped (could not run on this host, said why: no failure)" in shown
    assert f"reason:   {WHY}" in shown
    as_json = json.loads(journal("show", run["run"], "--format", "json", db=db, runbook=rb).stdout)
    assert (as_json["status"], as_json["exit_code"], as_json["reason"]) == ("skipped", 0, WHY)

    # journal status: the host's last run is said skipped; nothing failed in the plan.
    status = journal("status", db=db, runbook=rb)
    assert status.returncode == 0, text(status.stderr)
    assert "last: allreduce skipped at " in text(status.stdout)

    # The postmortem: not among the failed steps, said skipped, with why.
    doc = json.loads(journal("export", "postmortem", "--format", "json", db=db, runbook=rb).stdout)
    assert [f["step"] for f in doc["failures"]] == ["broken"]
    assert not any("allreduce" in r for r in doc["status_reasons"]), doc["status_reasons"]
    sentences = " ".join(doc["summary"]["sentences"])
    assert f"1 run skipped, not failed (the host cannot run it): allreduce on box ({WHY})" in (
        sentences
    )
    assert "1 run did not succeed: broken on box (failed)" in sentences
    [entry] = [e for e in doc["timeline"] if e.get("step") == "allreduce"]
    assert entry["status"] == "skipped"

    # The web UI: a class of its own (not failed, not red), the reason under it, a filter.
    from journal.web import create_app

    client = create_app({"DB": str(db), "TESTING": True}).test_client()
    page = client.get("/j/skip-test").get_data(as_text=True)
    item = re.search(
        rf'<li class="item step status-skipped"[^>]*id="run-{run["run"]}".*?</li>', page, re.S
    )
    assert item is not None, page
    assert 'data-status="skipped"' in item.group(0)
    assert "it could not run on this host, and said why: no failure" in item.group(0)
    assert f'<p class="reason">{WHY}</p>' in item.group(0)
    assert 'status-failed"' in page  # the broken one is red, beside it
    other = next(i["run"] for i in items if i["kind"] == "run" and i["step"] == "broken")
    listed = client.get("/j/skip-test?status=skipped").get_data(as_text=True)
    assert f'id="run-{run["run"]}"' in listed and f'id="run-{other}"' not in listed
    run_page = client.get(f"/j/skip-test/run/{run['run']}").get_data(as_text=True)
    assert 'class="run-head status-skipped"' in run_page and WHY in run_page
    response = client.get("/static/journal.css")
    css = response.get_data(as_text=True)
    response.close()
    assert ".status-skipped .reason { color: var(--muted); }" in css  # its reason is not red
