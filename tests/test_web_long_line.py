"""A line too long for a page is shown cut, with its length and a link to the raw output."""

from __future__ import annotations

import re
from pathlib import Path

from journal.web import create_app
from tests.helpers import journal, text, write_runbook

RUNBOOK = """\
[journal]
name = "long"

[hosts.here]
ssh = "local"

[[steps]]
name = "wide"
snapshots = false
run = '''printf 'short\\n'; head -c 30000 /dev/zero | tr '\\0' x; printf '\\nend\\n' '''
"""


def test_a_long_line_is_cut_on_the_page_and_whole_in_the_raw_output(tmp_path: Path) -> None:
    rb = write_runbook(tmp_path, RUNBOOK)
    db = tmp_path / "journal.db"
    done = journal("run", "step", "wide", db=db, runbook=rb)
    assert done.returncode == 0, text(done.stderr)
    run = re.search(rb"run (\w+)\)", done.stderr)
    assert run is not None
    short = run.group(1).decode()
    client = create_app({"DB": str(db), "TESTING": True}).test_client()
    sent = client.get(f"/j/long/run/{short}?page=1")  # the id as the verdict shows it
    assert sent.status_code == 302
    assert sent.location.startswith(f"/j/long/run/{short}") and sent.location.endswith("?page=1")
    run_id = sent.location.split("/")[-1].split("?")[0]
    page = client.get(f"/j/long/run/{run_id}").get_data(as_text=True)
    assert "20,000 more characters on this line" in page
    assert f'href="/j/long/run/{run_id}/raw"' in page
    assert "x" * 10_000 in page and "x" * 10_001 not in page
    assert 'id="L3"' in page  # the lines after it are there, numbered as before
    raw = client.get(f"/j/long/run/{run_id}/raw")
    assert raw.status_code == 200
    assert raw.get_data() == b"short\n" + b"x" * 30_000 + b"\nend\n"
