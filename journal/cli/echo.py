"""Output in the terminal: each host's lines as they come (prefixed by the host when there
are several) and journal's own lines, for the commands that run steps."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import BinaryIO

from journal.service.steps import StepWatch


class Echo(StepWatch):
    """Shows live output in the terminal; with several hosts each line gets a host prefix.
    (It ignores the fleet's progress; the live table does not.)"""

    def __init__(
        self,
        prefix: bool,
        out: BinaryIO | None = None,
        err: BinaryIO | None = None,
    ) -> None:
        self.prefix = prefix
        self.out = out or sys.stdout.buffer
        self.err = err or sys.stderr.buffer
        self._lock = threading.Lock()
        self._partial: dict[tuple[str, str], bytes] = {}

    def for_host(self, host: str) -> Callable[[str, bytes], None]:
        def write(stream: str, data: bytes) -> None:
            target = self.out if stream == "stdout" else self.err
            with self._lock:
                if self.prefix:
                    data = self._prefixed(host, stream, data)
                if data:
                    target.write(data)
                    target.flush()

        return write

    def _prefixed(self, host: str, stream: str, data: bytes) -> bytes:
        key = (host, stream)
        lines = (self._partial.pop(key, b"") + data).split(b"\n")
        if lines[-1]:
            self._partial[key] = lines[-1]
        tag = f"[{host}] ".encode()
        return b"".join(tag + line + b"\n" for line in lines[:-1])

    def say(self, text: str) -> None:
        """A line of journal's own (probe results, verdicts) on stderr."""
        with self._lock:
            self.err.write(f"journal: {text}\n".encode())
            self.err.flush()

    def interrupted(self) -> None:
        """Say, past the ``^C`` the terminal echoed, that every host is told to stop."""
        with self._lock:
            self.err.write("\njournal: interrupting every host…\n".encode())
            self.err.flush()

    def flush_host(self, host: str) -> None:
        """Write what is left of a host's last line when its step ends."""
        with self._lock:
            for stream in ("stdout", "stderr"):
                rest = self._partial.pop((host, stream), b"")
                if rest:
                    target = self.out if stream == "stdout" else self.err
                    target.write(f"[{host}] ".encode() + rest + b"\n")
                    target.flush()
