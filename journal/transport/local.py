"""Runs a step on this machine, in its own process group so Ctrl-C and timeouts stop it all.

The command runs through ``subprocess`` rather than invoke's ``Local`` runner: invoke decodes
output with replacement characters and keeps all of it in memory, and the journal needs the
exact bytes streamed with flat memory.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Mapping

from journal.transport.base import (
    INTERRUPT_GRACE_S,
    POLL_S,
    READ_SIZE,
    Outcome,
    OutputSink,
    outcome_for_exit,
    shell_script,
)

#: How long output is still read after the shell exited while a child keeps the pipes open.
DRAIN_S = 1.0

SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


class LocalTransport:
    """The ``local`` host."""

    target = "local"

    def connect(self) -> None:
        """Nothing to open for this machine."""

    def close(self) -> None:
        """Nothing to close."""

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
    ) -> Outcome:
        start = time.monotonic()
        script = shell_script(command, env, cwd)
        proc = subprocess.Popen(
            [SHELL, "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        assert proc.stdout is not None and proc.stderr is not None
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ, "stdout")
        selector.register(proc.stderr, selectors.EVENT_READ, "stderr")
        open_streams = 2
        stopping_since: float | None = None
        timed_out = False
        escalated = 0
        exited_at: float | None = None
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
                break  # a background child still holds the pipes open; the step itself is done
            if stopping_since is None:
                if cancel.is_set() or (timeout is not None and now - start > timeout):
                    timed_out = not cancel.is_set()
                    stopping_since = now
                    _signal_group(proc.pid, signal.SIGINT)
            elif escalated < 2 and now - stopping_since > INTERRUPT_GRACE_S * (escalated + 1):
                escalated += 1
                _signal_group(proc.pid, signal.SIGTERM if escalated == 1 else signal.SIGKILL)
        selector.close()
        code = proc.wait()
        proc.stdout.close()
        proc.stderr.close()
        return outcome_for_exit(
            code,
            time.monotonic() - start,
            cancelled=stopping_since is not None and not timed_out,
            timed_out=timed_out,
            timeout=timeout,
        )


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
