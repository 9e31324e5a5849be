"""Runs a step on this machine, under the supervisor (:mod:`journal.transport.supervisor`):
the command runs detached in its own session, its output spooled to files that journal reads
as they grow, so it outlives a journal that dies and a later `journal attach` records the rest.

The spool is read straight from the files rather than through invoke's ``Local`` runner:
invoke decodes output with replacement characters and keeps all of it in memory, and the
journal needs the exact bytes streamed with flat memory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from journal.transport import supervisor
from journal.transport.base import (
    POLL_S,
    READ_SIZE,
    Outcome,
    OutputSink,
    Stopper,
    Transport,
    detached,
    settle,
)

SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
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

    def _launch(self, run_id: str, script: str) -> None:
        done = self._shell(supervisor.launch(run_id), script.encode())
        if done.returncode != 0:
            raise RuntimeError(
                f"the supervisor did not start: {done.stderr.decode(errors='replace').strip()}"
            )

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
                time.sleep(POLL_S)
        except BaseException:
            # the record cannot go on (the store refused a write): stop the command rather
            # than leave it running unrecorded
            if not detach:
                self._shell(supervisor.signal_group(run_id, "TERM"))
            raise
        finally:
            for fh in handles.values():
                fh.close()
        code = int((folder / "rc").read_text().strip() or -1)
        settle(sink)  # recorded, all of it: then the spool may go
        shutil.rmtree(folder, ignore_errors=True)
        return stopper.outcome(code, time.monotonic() - began)


def _left(run_id: str) -> str:
    return f"left running on the host; `journal attach {run_id}` records the rest"
