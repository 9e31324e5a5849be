"""`make demo` says what it needs before anything slow, a line each, and refuses a port a
server already holds before it records anything (a second demo under a first one's server
would leave that server showing runs that no longer exist)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_make_demo_says_its_requirements_and_refuses_a_taken_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(
            ["make", "--no-print-directory", "demo", f"PORT={port}", f"PYTHON={sys.executable}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode != 0
    lines = done.stdout.splitlines()
    version = f"python {sys.version_info.major}.{sys.version_info.minor}."
    assert lines[0].startswith(version) and lines[0].endswith(": ok"), lines
    assert lines[1] == "python venv: ok"
    assert lines[2].startswith("npm ") and lines[2].endswith(": ok")
    assert lines[3].startswith("uv: installed into")
    assert lines[4].startswith(f"port {port} is taken") and "nothing recorded" in lines[4]
    assert "recording the demo" not in done.stdout
