"""What a notification costs a step: `journal run step` of a failing step (``exit 3`` on a
``local`` host) with no ``[notify.NAME]``, with two channels to a receiver that answers at
once, and with two channels to one that never answers (it reads the request and holds the
connection open).

For each: the step's duration as journal recorded it (the command's own time; a notification
is sent after the step's end is recorded, so this must not move), the wall time of the whole
command (which waits for pending notifications at its end, at most ``JOURNAL_NOTIFY_WAIT_S``,
5 s by default), and how each notification went (from the ``NotificationSent`` events).

Run: ``.venv/bin/python bench/notify_cost.py [--runs 3]``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

RUNBOOK = """\
[journal]
name = "notify-cost"

[hosts.box]
ssh = "local"

[[steps]]
name = "fail"
run = "exit 3"
snapshots = false
"""
CHANNELS = """
[notify.team]
url = "{url}/hook/a-secret-token-0123456789"
on = ["step-failed"]

[notify.chat]
url = "{url}/services/T0/B0/another-secret-token-0123"
format = "slack"
on = ["step-failed"]
"""


def receiver(answer: bool) -> ThreadingHTTPServer:
    """A receiver on 127.0.0.1 that answers 200 at once, or never."""
    hold = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            self.rfile.read(int(self.headers["Content-Length"]))
            if not answer:
                hold.wait(3600)
                return
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def measure(folder: Path, channels: str) -> tuple[float, float, list[str]]:
    """One `journal run step fail`: (recorded duration, wall seconds, how each went)."""
    folder.mkdir()
    (folder / "runbook.toml").write_text(RUNBOOK + channels)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "journal", "run", "step", "fail"],
        cwd=folder,
        capture_output=True,
        check=False,
    )
    wall = time.perf_counter() - started
    with sqlite3.connect(folder / "journal.db") as conn:
        rows = conn.execute(
            "select type, payload from events where type in ('StepFinished', 'NotificationSent')"
        ).fetchall()
    duration = next(json.loads(p)["duration"] for t, p in rows if t == "StepFinished")
    sent = [json.loads(p) for t, p in rows if t == "NotificationSent"]
    told = [
        f"{s['channel']}#{s['attempt']}: {'delivered' if s['delivered'] else s['reason']}"
        for s in sent
    ]
    return duration, wall, told


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    live, dead = receiver(True), receiver(False)
    cases = {
        "no channel": "",
        "receiver answers": CHANNELS.format(url=f"http://127.0.0.1:{live.server_port}"),
        "receiver never answers": CHANNELS.format(url=f"http://127.0.0.1:{dead.server_port}"),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name, channels in cases.items():
            results = [
                measure(Path(tmp) / f"{name.replace(' ', '-')}-{i}", channels)
                for i in range(args.runs)
            ]
            durations = [r[0] for r in results]
            walls = [r[1] for r in results]
            print(
                f"{name:24} step recorded {min(durations):.3f}-{max(durations):.3f} s, "
                f"command {statistics.median(walls):.2f} s (median of {args.runs})"
            )
            for line in results[-1][2]:
                print(f"{'':26}{line}")


if __name__ == "__main__":
    main()
