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
import time

from journal.transport.base import (
    INTERRUPT_GRACE_S,
    POLL_S,
    READ_SIZE,
    Outcome,
    OutputSink,
    Stopper,
    Transport,
)

#: How long output is still read after the shell exited while a child keeps the pipes open.
DRAIN_S = 1.0

SHELL = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"


class LocalTransport(Transport):
    """The ``local`` host."""

    target = "local"

    def connect(self) -> None:
        """Nothing to open for this machine."""

    def close(self) -> None:
        """Nothing to close."""

    def _stream(self, script: str, sink: OutputSink, stopper: Stopper, run_id: str) -> Outcome:
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
