"""Runs a step on this machine, under the supervisor (:mod:`journal.transport.supervisor`):
the command runs detached in its own session, its output spooled to files that journal reads
as they grow, so it outlives a journal that dies and a later `journal attach` records the rest.

The spool is read straight from the files rather than through invoke's ``Local`` runner:
invoke decodes output with replacement characters and keeps all of it in memory, and the
journal needs the exact bytes streamed with flat memory.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from journal.runs import Outcome, detached
from journal.transport import supervisor
from journal.transport.base import (
    FROM_STDIN,
    INTERRUPT_GRACE_S,
    POLL_S,
    READ_SIZE,
    OutputSink,
    Stopper,
    Transport,
    cut_short,
    not_launched,
    settle,
    shell_script,
)

SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
#: How long a probe's output is still read after its shell exited while a child keeps the
#: pipes open.
DRAIN_S = 1.0
STREAMS = (("stdout", "out"), ("stderr", "err"))


class LocalTransport(Transport):
    """The ``local`` host."""

    target = "local"

    def connect(self) -> None:
        """Nothing to open for this machine."""

    def close(self) -> None:
        """Nothing to close."""

    def _shell(self, script: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [SHELL, "-c", script], input=stdin, capture_output=True, timeout=60, check=False
        )

    def _direct(self, script: str, sink: OutputSink, stopper: Stopper, run_id: str) -> Outcome:
        proc = subprocess.Popen(
            [SHELL, "-c", FROM_STDIN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        try:
            proc.stdin.write(script.encode())  # `cat` reads it all before anything runs
        except BrokenPipeError:
            pass  # the shell is gone already: its exit status says why
        finally:
            proc.stdin.close()
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ, "stdout")
        selector.register(proc.stderr, selectors.EVENT_READ, "stderr")
        open_streams = 2

        def send(name: str) -> None:
            _signal_group(proc.pid, signal.Signals[f"SIG{name}"])

        exited_at: float | None = None
        try:
            while open_streams:
                for key, _ in selector.select(POLL_S):
                    data = os.read(key.fd, READ_SIZE)
                    if data:
                        sink.feed(key.data, data)
                    else:
                        selector.unregister(key.fileobj)
                        open_streams -= 1
                sink.tick()
                now = time.monotonic()
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                elif exited_at is not None and now - exited_at > DRAIN_S:
                    break  # a background child still holds the pipes open; the step is done
                stopper.check(now, send)
        except BaseException:
            # the record cannot go on (the store refused a write): stop the command rather
            # than leave it running unrecorded
            _stop_now(proc)
            raise
        finally:
            selector.close()
        code = proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        return stopper.outcome(code, time.monotonic() - stopper.start)

    def run(
        self,
        command: str,
        env: Mapping[str, str],
        cwd: str | None,
        timeout: float | None,
        sink: OutputSink,
        cancel: threading.Event,
        *,
        run_id: str = "step",
        detach: bool = False,
    ) -> Outcome:
        stopper = Stopper(cancel, timeout)
        started = time.monotonic()
        done = self._shell(supervisor.launch(run_id), shell_script(command, env, cwd).encode())
        if done.returncode != 0:
            said = done.stderr.decode(errors="replace").strip()
            return not_launched(self.target, run_id, said, time.monotonic() - started)
        return self.follow(run_id, sink, stopper, {}, detach=detach, started=started)

    def follow(
        self,
        run_id: str,
        sink: OutputSink,
        stopper: Stopper,
        offsets: Mapping[str, int],
        *,
        detach: bool = False,
        started: float | None = None,
    ) -> Outcome:
        folder = Path(os.path.expanduser(f"~/{supervisor.RUNS}/{run_id}"))
        began = time.monotonic() if started is None else started
        if not (folder / "pid").exists():
            return Outcome("gone", None, 0.0, None, f"no spool of the run in {folder}")
        pos = {stream: int(offsets.get(stream, 0)) for stream, _ in STREAMS}

        def send(name: str) -> None:
            if not detach or stopper.timed_out:  # a timeout stops even a detachable step
                self._shell(supervisor.signal_group(run_id, name))

        handles = {}
        try:
            while True:
                done = (folder / "rc").exists()
                for stream, name in STREAMS:
                    if stream not in handles:
                        try:
                            handles[stream] = open(folder / name, "rb")  # noqa: SIM115
                        except FileNotFoundError:
                            continue
                    fh = handles[stream]
                    fh.seek(pos[stream])
                    while data := fh.read(READ_SIZE):
                        pos[stream] += len(data)
                        sink.feed(stream, data)
                sink.tick()
                if done:
                    break
                stopper.check(time.monotonic(), send)
                if detach and stopper.stopped and not stopper.timed_out:
                    return detached(time.monotonic() - began, _left(run_id))
                time.sleep(POLL_S if time.monotonic() - began > 0.2 else 0.01)
        except BaseException:
            # the record cannot go on (the store refused a write): stop the command rather
            # than leave it running unrecorded
            if not detach:
                self._shell(supervisor.signal_group(run_id, "TERM"))
            raise
        finally:
            for fh in handles.values():
                fh.close()
        words = (folder / "rc").read_text().split()
        code = int(words[0]) if words and words[0].lstrip("-").isdigit() else -1
        settle(sink)  # recorded, all of it: then the spool may go
        shutil.rmtree(folder, ignore_errors=True)
        ended = float(words[1]) if len(words) > 1 and words[1].isdigit() else None
        outcome = replace(stopper.outcome(code, time.monotonic() - began), ended=ended)
        return cut_short(outcome, self.target) if "full" in words[2:] else outcome


def _left(run_id: str) -> str:
    return f"left running on the host; `journal attach {run_id}` records the rest"


def _stop_now(proc: subprocess.Popen[bytes]) -> None:
    """Stop the command's process group: SIGTERM, then SIGKILL after the grace period."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(INTERRUPT_GRACE_S)
    except subprocess.TimeoutExpired:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to a process group that may be gone already."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
