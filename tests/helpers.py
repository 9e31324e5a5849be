"""Running the real `journal` command line as a user would: its `main` with the test's
arguments, environment and folder, its exit status and both streams as bytes.

Most calls run `journal.cli.main` in the test's own process (a new interpreter per call cost
0.3-0.7 s, most of the suite's time); a call whose subject is the process itself runs
``python -m journal`` as a subprocess: ``process=True`` (signals, timeouts, start-up), an
environment that changes how Python starts (``PYTHON*``, locale), or input on stdin.
"""

from __future__ import annotations

import gc
import io
import os
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path

JOURNAL = [sys.executable, "-m", "journal"]

#: Environment variables that change how the interpreter itself starts or encodes: a call that
#: sets one differently from the test's process runs journal as a process.
_PROCESS_ENV = ("PYTHON", "LC_", "LANG")
#: Commands that run until stopped or need a terminal: always a process.
_PROCESS_COMMANDS = frozenset({"serve", "shell"})
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)


def journal(
    *args: str,
    db: Path | str | None = None,
    runbook: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | str | None = None,
    timeout: float = 120,
    process: bool = False,
) -> subprocess.CompletedProcess[bytes]:
    """Run `journal ARGS` with the given database and runbook; output captured as bytes.
    ``process=True`` runs it as its own process (see the module's docstring for when)."""
    cmd = []
    if db is not None:
        cmd += ["--db", str(db)]
    if runbook is not None:
        cmd += ["--runbook", str(runbook)]
    cmd += list(args)
    if process or _needs_process(env) or (args and args[0] in _PROCESS_COMMANDS):
        return subprocess.run(
            [*JOURNAL, *cmd],
            env=dict(env if env is not None else os.environ),
            cwd=cwd,
            capture_output=True,
            timeout=timeout,
        )
    return in_process(cmd, env=env, cwd=cwd)


def _needs_process(env: Mapping[str, str] | None) -> bool:
    if env is None:
        return False
    keys = {k for k in {*env, *os.environ} if k.startswith(_PROCESS_ENV)}
    return any(env.get(k) != os.environ.get(k) for k in keys)


def in_process(
    argv: list[str], env: Mapping[str, str] | None = None, cwd: Path | str | None = None
) -> subprocess.CompletedProcess[bytes]:
    """`journal.cli.main(argv)` in this process, as a process would run it: ``env`` as the
    whole environment, ``cwd`` as the folder, an empty stdin, stdout and stderr captured as
    bytes (UTF-8, no terminal), an uncaught exception printed as a traceback with status 1;
    the signal handlers journal installs and everything else put back after."""
    from journal import cli

    out, err = io.BytesIO(), io.BytesIO()
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_signals = {s: signal.getsignal(s) for s in _SIGNALS}
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
            time.tzset()  # a TZ of the call's
        if cwd is not None:
            os.chdir(cwd)
        sys.stdin = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
        sys.stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
        sys.stderr = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
        gc.freeze()  # what was there before: _exit_like_a_process looks only at the rest
        try:
            code = cli.main(argv)
        except SystemExit as exit_:
            code = _exit_status(exit_.code)
        except BaseException:  # noqa: BLE001 - as the interpreter would: a traceback, 1
            traceback.print_exc()
            code = 1
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
            stream.detach()  # the bytes stay readable once the wrapper goes
        _exit_like_a_process()
    finally:
        gc.unfreeze()
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        for number, handler in saved_signals.items():
            signal.signal(number, handler)
        cli._stopped_by.clear()
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        time.tzset()
    return subprocess.CompletedProcess(["journal", *argv], code, out.getvalue(), err.getvalue())


def _exit_like_a_process() -> None:
    """Collect what the command left behind, as its process's exit would, unheard: a
    connection a failed command dropped unclosed warns at garbage collection, which in a
    process that ended never comes (so it would fall on whichever test runs next). Only what
    was made since the call began is looked at (the rest was frozen): a full collection of a
    test process's heap took 80 ms, a fifth of a short command's time."""
    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: None
    try:
        gc.collect()
    finally:
        sys.unraisablehook = hook


def _exit_status(code: object) -> int:
    """The status a process exits with for ``SystemExit(code)`` (a message goes to stderr)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


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
