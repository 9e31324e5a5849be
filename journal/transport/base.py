"""What every transport is and gives back: the :class:`Transport` interface, streamed output,
the outcomes of a run's spool on its host (the outcome itself is :class:`journal.runs.Outcome`),
and the stopping of a command (SIGINT, then SIGTERM, then SIGKILL)."""

from __future__ import annotations

import shlex
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from journal.runs import CAUSE_DISK_FULL, EXITED, FAILED, Outcome, outcome_for_exit
from journal.transport.supervisor import RUNS

#: How long an interrupted command gets after SIGINT before SIGTERM, then SIGKILL.
INTERRUPT_GRACE_S = 3.0
#: How often a transport's loop wakes to flush output and look for Ctrl-C or a timeout.
POLL_S = 0.05
READ_SIZE = 256 * 1024


class OutputSink(Protocol):
    """Receives output as it arrives; ``tick`` lets it flush on time when nothing arrives."""

    def feed(self, stream: str, data: bytes) -> None: ...

    def tick(self) -> None: ...


#: What a host's tools say (in C's words) when a disk, or the user's quota on it, is full.
_FULL_SAID = ("No space left on device", "Disk quota exceeded")


def not_launched(target: str, run_id: str, said: str, duration: float) -> Outcome:
    """The outcome of a step whose supervisor did not start on ``target``, its launch having
    said ``said``: failed for a full disk where the run's spool could not be written; any
    other reason is raised (a RuntimeError saying it)."""
    full = [line for line in said.splitlines() if any(f in line for f in _FULL_SAID)]
    if not full:
        raise RuntimeError(f"the supervisor did not start on {target}: {said}")
    return Outcome(
        FAILED,
        None,
        duration,
        None,
        f"the disk of {target} is full: the run's spool (~/{RUNS}/{run_id}) could not be "
        f"written ({full[-1].strip()}), so its command was not run; free space there and run "
        "the step again",
        cause=CAUSE_DISK_FULL,
    )


def cut_short(outcome: Outcome, target: str) -> Outcome:
    """``outcome`` of a command that ended with the disk of its host full: its output, as
    spooled there, may be cut short (and its own writes may have failed), so it failed."""
    if outcome.status not in EXITED:
        return outcome
    why = (
        f"the disk of {target} was full when the command ended: its output, spooled in "
        f"~/{RUNS}, may be cut short, and its own writes may have failed for it; free space "
        "there and run the step again"
    )
    reason = f"{why} ({outcome.reason})" if outcome.reason else why
    return replace(outcome, status=FAILED, reason=reason, cause=CAUSE_DISK_FULL)


def settle(sink: OutputSink) -> None:
    """Have ``sink`` store everything it was fed (a recorder's last chunks), before the run's
    spool on its host is removed."""
    close = getattr(sink, "close", None)
    if callable(close):
        close()


class Cancel(threading.Event):
    """Set when the steps at work must stop; ``why`` names what asked (``Ctrl-C``, or the
    signal journal itself got: ``SIGTERM``, ``SIGHUP``), for the record."""

    why = "Ctrl-C"


class ConnectFailed(Exception):
    """The host could not be reached or refused us; the message says why."""


@dataclass(frozen=True)
class AcceptedKey:
    """A host key accepted on first contact, to be recorded as ``HostKeyAccepted``."""

    target: str
    key_type: str
    fingerprint: str
    known_hosts: str


class Transport(ABC):
    """Runs commands on one host and streams their output: this machine, or one over SSH."""

    def __init__(self) -> None:
        #: The host keys accepted on first contact while connecting, for the journal to record.
        self.accepted: list[AcceptedKey] = []

    @property
    @abstractmethod
    def target(self) -> str:
        """Where commands run, as recorded: ``local``, or ``user@host:port``."""

    @abstractmethod
    def connect(self) -> None:
        """Open the way to the host; ConnectFailed, saying why, when it cannot be."""

    @abstractmethod
    def close(self) -> None:
        """Close what :meth:`connect` opened."""

    @abstractmethod
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
        """Run ``command`` (with ``env``, in ``cwd``) under the supervisor on the host
        (:mod:`journal.transport.supervisor`), feeding its output to ``sink``; stop it when
        ``cancel`` is set (or, with ``detach``, leave it running) or after ``timeout``
        seconds; how it ended."""

    def probe(
        self,
        command: str,
        env: Mapping[str, str],
        cwd: str | None,
        timeout: float | None,
        sink: OutputSink,
        cancel: threading.Event,
        *,
        run_id: str = "probe",
    ) -> Outcome:
        """Run a short read-only command (a probe) straight on its channel, without the
        supervisor: nothing is left to reattach if journal dies, and it costs nothing more.
        The script (which carries the env) goes on the shell's standard input
        (:data:`FROM_STDIN`), never on a command line."""
        return self._direct(shell_script(command, env, cwd), sink, Stopper(cancel, timeout), run_id)

    @abstractmethod
    def _direct(self, script: str, sink: OutputSink, stopper: Stopper, run_id: str) -> Outcome:
        """Run the shell ``script`` feeding ``sink``, letting ``stopper`` check as it polls:
        the script is written to the standard input of a shell running :data:`FROM_STDIN`."""

    @abstractmethod
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
        """Stream the run's spool from ``offsets`` (bytes already recorded per stream) into
        ``sink`` until the command ends; its outcome, then the run's folder removed. Status
        ``detached`` when the command was left running (``detach``, or the host could not be
        reached again), ``gone`` when the host has no spool for the run."""


#: The signals a command is stopped with, in turn, each ``INTERRUPT_GRACE_S`` after the last.
STOP_SIGNALS = ("INT", "TERM", "KILL")


class Stopper:
    """Stops a command cancelled (Ctrl-C) or past its timeout, escalating SIGINT -> SIGTERM ->
    SIGKILL, and judges how it ended."""

    def __init__(self, cancel: threading.Event, timeout: float | None) -> None:
        self.cancel = cancel
        self.timeout = timeout
        self.start = time.monotonic()
        self.since: float | None = None
        self.timed_out = False
        self._sent = 0

    @property
    def stopped(self) -> bool:
        """Whether the command was told to stop."""
        return self.since is not None

    def check(self, now: float, send: Callable[[str], None]) -> None:
        """Send the signal due at ``now`` with ``send(name)`` (``INT``, ``TERM``, ``KILL``) to
        the command's process group; a transport's loop calls this as it polls."""
        if self.since is None:
            if self.cancel.is_set() or (
                self.timeout is not None and now - self.start > self.timeout
            ):
                self.timed_out = not self.cancel.is_set()
                self.since = now
                send(STOP_SIGNALS[0])
        elif self._sent < 2 and now - self.since > INTERRUPT_GRACE_S * (self._sent + 1):
            self._sent += 1
            send(STOP_SIGNALS[self._sent])

    def outcome(self, code: int | None, duration: float) -> Outcome:
        """The outcome of the command that ended with ``code``, told whether it was stopped."""
        return outcome_for_exit(
            code,
            duration,
            cancelled=self.stopped and not self.timed_out,
            timed_out=self.timed_out,
            timeout=self.timeout,
            why=getattr(self.cancel, "why", "Ctrl-C"),
        )


#: The shell that runs the script which is the whole of its standard input: read into the
#: shell's memory (a variable not exported, unset as the script starts), then run there, so
#: that no value of its env is in any process's argv (``ps`` shows ``cat``) nor on disk; the
#: command's own standard input is then at its end.
FROM_STDIN = '_journal_script=$(cat) && eval "unset _journal_script; $_journal_script"'


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
