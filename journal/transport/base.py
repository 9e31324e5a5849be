"""What every transport gives back: streamed output and a plain outcome."""

from __future__ import annotations

import shlex
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

#: How long an interrupted command gets after SIGINT before SIGTERM, then SIGKILL.
INTERRUPT_GRACE_S = 3.0
#: How often a transport's loop wakes to flush output and look for Ctrl-C or a timeout.
POLL_S = 0.05
READ_SIZE = 256 * 1024


class OutputSink(Protocol):
    """Receives output as it arrives; ``tick`` lets it flush on time when nothing arrives."""

    def feed(self, stream: str, data: bytes) -> None: ...

    def tick(self) -> None: ...


@dataclass(frozen=True)
class Outcome:
    """How a command ended: ``status`` succeeded, failed, interrupted or timed-out."""

    status: str
    exit_code: int | None
    duration: float
    signal: str | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "succeeded"


class ConnectFailed(Exception):
    """The host could not be reached or refused us; the message says why."""


def signal_name(number: int) -> str | None:
    """``SIGKILL`` for 9; None for a number that names no signal."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def outcome_for_exit(
    code: int | None, duration: float, *, cancelled: bool, timed_out: bool, timeout: float | None
) -> Outcome:
    """The outcome of a command that ended with ``code`` (negative: killed by that signal)."""
    sig = None
    if code is not None and code < 0:
        sig, code = signal_name(-code), 128 - code
    elif code is not None and code > 128:
        sig = signal_name(code - 128)
    if timed_out:
        return Outcome(
            "timed-out", code, duration, sig, f"stopped after the step's timeout of {timeout:g} s"
        )
    if cancelled:
        return Outcome(
            "interrupted", code, duration, sig, "interrupted (Ctrl-C): the command was stopped"
        )
    if code == 0:
        return Outcome("succeeded", 0, duration)
    reason = f"killed by {sig}" if sig and code is not None and code > 128 else None
    return Outcome("failed", code, duration, sig, reason)


def shell_script(command: str, env: Mapping[str, str], cwd: str | None) -> str:
    """The command with its env exported and its folder entered, in POSIX shell."""
    lines = [f"export {name}={shlex.quote(value)}" for name, value in env.items()]
    if cwd:
        if cwd == "~" or cwd.startswith("~/"):
            target = "~" + (("/" + shlex.quote(cwd[2:])) if cwd[2:] else "")
        else:
            target = shlex.quote(cwd)
        lines.append(f"cd {target} || exit 1")
    lines.append(command)
    return "\n".join(lines)
