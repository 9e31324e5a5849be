"""Running the real `journal` command line in a subprocess, as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

JOURNAL = [sys.executable, "-m", "journal"]


def journal(
    *args: str,
    db: Path | str | None = None,
    runbook: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[bytes]:
    """Run `journal ARGS` with the given database and runbook; output captured as bytes."""
    cmd = [*JOURNAL]
    if db is not None:
        cmd += ["--db", str(db)]
    if runbook is not None:
        cmd += ["--runbook", str(runbook)]
    return subprocess.run(
        [*cmd, *args],
        env=dict(env if env is not None else os.environ),
        cwd=cwd,
        capture_output=True,
        timeout=timeout,
    )


def write_runbook(folder: Path, text: str, name: str = "runbook.toml") -> Path:
    """Write a runbook into `folder` and return its path."""
    path = folder / name
    path.write_text(text)
    return path


def text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def no_traceback(result: subprocess.CompletedProcess[bytes]) -> bool:
    return b"Traceback" not in result.stderr and b"Traceback" not in result.stdout


def run_all(
    commands: Sequence[Sequence[str]], **kwargs
) -> list[subprocess.CompletedProcess[bytes]]:  # type: ignore[no-untyped-def]
    return [journal(*c, **kwargs) for c in commands]


def drain_pty(master: int, proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    """Everything a process writes to its terminal (``master`` side) until it closes it or
    exits, or ``timeout`` passes; then wait for it and close the terminal."""
    import select
    import time

    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            out += data
        elif proc.poll() is not None:
            break
    proc.wait(timeout=10)
    os.close(master)
    return out


def uv_binary() -> str:
    """Path of the real uv: beside the running interpreter (installed with journal's test
    extra), else on PATH."""
    import shutil

    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert found, "uv is needed for these tests (pip install uv in journal's env)"
    return found


def run_checked(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a command, failing the test with its output if it exits non-zero."""
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{args} failed:\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done


class Clock:
    """A monotonic clock the test moves by hand (the `clock` fixture puts it in the
    recorder's place)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now
