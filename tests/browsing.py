"""What the browser tests share: a real `journal serve` started on a free port and stopped after,
and Debian's chromium launched through playwright (never a browser playwright downloads)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, sync_playwright

from tests.helpers import JOURNAL

CHROMIUM = "/usr/bin/chromium"
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def test_env() -> dict[str, str]:
    """This process's environment without the variables that would point `journal` elsewhere."""
    env = dict(os.environ)
    for name in ("JOURNAL_DB", "JOURNAL_RUNBOOK", "JOURNAL_TOKEN"):
        env.pop(name, None)
    return env


test_env.__test__ = False  # type: ignore[attr-defined]  # a helper: pytest must not collect it


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def http_get(url: str, timeout: float = 10) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


@contextmanager
def journal_server(
    db: Path, log_path: Path, *extra_args: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`journal --db DB serve --port P [EXTRA_ARGS]`, its output in ``log_path``: its base URL
    and process once it answers `/`; stopped on the way out."""
    port = free_port()
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [*JOURNAL, "--db", str(db), "serve", "--port", str(port), *extra_args],
            env=test_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                assert proc.poll() is None, log_path.read_text()
                try:
                    http_get(url + "/", timeout=5)
                    break
                except OSError:
                    assert time.monotonic() < deadline, "journal serve did not answer"
                    time.sleep(0.1)
            yield url, proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def chromium() -> Iterator[Browser]:
    """Debian's chromium, launched headless by playwright."""
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        try:
            yield browser
        finally:
            browser.close()
