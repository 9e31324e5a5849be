"""A plain install: the wheel built from this checkout, installed in a fresh venv outside it,
works on its own (migrations, templates, static files and htmx come with it)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browsing import free_port
from tests.helpers import uv_binary

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        args,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"{' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.read()


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """journal's bin folder in a fresh venv holding only the built wheel (and its deps)."""
    work = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JOURNAL_", "VIRTUAL_ENV"))}
    env.pop("PYTHONPATH", None)
    uv = uv_binary()
    _run([uv, "build", "--wheel", "--out-dir", str(work / "dist"), str(ROOT)], work, env)
    (wheel,) = (work / "dist").glob("journal-*.whl")
    venv = work / "venv"
    _run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], work, env)
    _run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--python",
            str(venv / "bin" / "python"),
            f"{wheel}[demo]",
        ],
        work,
        env,
    )
    yield venv / "bin", env


def test_the_wheel_carries_its_data_and_finds_it_in_the_package(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    bin_, env = installed
    where = _run(
        [str(bin_ / "python"), "-c", "import journal.resources as r; print(r.packaged())"],
        tmp_path,
        env,
    ).stdout.strip()
    assert where.endswith("site-packages/journal/_data") and str(ROOT) not in where
    for name in (
        "migrations/env.py",
        "templates/base.html",
        "static/journal.css",
        "vendor/htmx.org/dist/htmx.min.js",
        "vendor/htmx-ext-sse/dist/sse.js",
    ):
        assert (Path(where) / name).is_file(), name


def test_init_a_local_step_the_demo_and_serve_from_a_plain_install(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    bin_, env = installed
    journal = str(bin_ / "journal")
    _run([journal, "init", "."], tmp_path, env)
    (tmp_path / "runbook.toml").write_text(
        '[journal]\nname = "plain"\n\n[hosts.here]\nssh = "local"\n\n'
        '[[steps]]\nname = "hello"\nrun = "echo hello from a plain install"\n'
    )
    step = _run([journal, "run", "step", "hello"], tmp_path, env)
    assert "hello from a plain install" in step.stdout
    demo = _run([journal, "demo"], tmp_path, env)
    # what it says to run next runs as printed (no path relative to a home far away)
    (status,) = [line.strip() for line in demo.stdout.splitlines() if line.endswith(" status")]
    assert status.split()[0] in ("journal", journal), status
    again = subprocess.run(shlex.split(status), cwd=tmp_path, env=env, capture_output=True)
    assert again.returncode in (0, 1) and b"story:" in again.stdout, again.stderr
    port = free_port()
    db = tmp_path / "demo" / "journal.db"
    server = subprocess.Popen(
        [journal, "--db", str(db), "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                get(base + "/static/journal.css")
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "serve never answered"
                time.sleep(0.1)
        timeline = get(base + "/j/cuda13-demo").decode()
        assert 'id="timeline-items"' in timeline and "reinstall-torch" in timeline
        htmx = get(base + "/static/vendor/htmx.min.js")
        assert b"htmx" in htmx[:2000] and len(htmx) > 20_000
        sse = get(base + "/static/vendor/sse.js")
        assert b"sse" in sse
    finally:
        server.terminate()
        server.wait(timeout=30)
