"""`journal shell`: a hand-run session recorded command by command.

The shell on the host is started with an integration of this session only
(:mod:`journal.service.shell_hooks`: a temporary rc file, nothing written to the user's
dotfiles) whose hooks print private OSC marks, each led by the session's nonce, on the
terminal's stream; :mod:`journal.service.shell_marks` takes them out of the byte stream (the
user's terminal never sees them) and :mod:`journal.service.shell_commands` reads what a command
line does.

:class:`ShellSession` records each command as a step run of kind ``interactive``: its exact
command, its output (the terminal's stream between the two marks, through the
:class:`~journal.recorder.OutputRecorder`, so secrets are redacted as everywhere), exit
status, cwd and duration; package snapshots around a command that installs or removes Python
packages (and the probe asked for after it); then the detectors' verdict, as lines to print.
Only the shell's output is recorded, never what is typed: input the terminal does not echo
(a password) is never seen.
"""

from __future__ import annotations

import getpass
import os
import posixpath
import re
import socket
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from journal.events import NoteAdded, StepFinished, StepStarted
from journal.pitfalls.base import Finding
from journal.projections.packages import change_text, diff_packages
from journal.recorder import OutputRecorder
from journal.redact import Redactor
from journal.redact.names import MIN_VALUE_LENGTH, SECRET_NAME
from journal.runbook import Host, Runbook
from journal.service.checks import HostChecks
from journal.service.shell_commands import (
    assigned_secrets,
    changes_packages,
    named_python,
    outcome_of,
)
from journal.service.shell_hooks import new_nonce
from journal.store import EventStore
from journal.transcript import step_name
from journal.transport import Transport

#: The step name of every interactive run that has no better one.
KIND = "interactive"
#: How a command still running when the shell ends is recorded: (status, reason).
GONE = ("interrupted", "interrupted (the shell ended)")
#: A command line that ends the shell itself (``exit``, ``logout``).
_EXIT = re.compile(r"\s*(?:builtin\s+)?(?:exit|logout)(?:\s+\d+)?\s*;?\s*$")


@dataclass
class _Running:
    run_id: str
    command: str
    started: float
    recorder: OutputRecorder
    checks: HostChecks | None
    before: dict[str, Any] | None


class ShellSession:
    """Records the commands of one `journal shell` session on one host."""

    def __init__(
        self,
        store: EventStore,
        runbook: Runbook,
        host: Host,
        transport: Transport,
        *,
        probe: str | None = None,
    ) -> None:
        self.store = store
        self.runbook = runbook
        self.journal = runbook.name
        self.host = host
        self.transport = transport
        self.probe = probe
        self.env = dict(host.env)
        self.redactor = Redactor.for_run(runbook.redact, self.env)
        #: What leads every mark of this session's hooks: output that does not know it
        #: cannot steer the record (it is masked wherever it might be printed).
        self.nonce = new_nonce()
        #: The names of the secret-named variables learned so far (their values masked).
        self.learned: set[str] = set()
        _mask_also(self.redactor, [self.nonce.encode()])
        self.running: _Running | None = None
        self.runs: list[str] = []
        self._checks: dict[str, HostChecks] = {}
        self._said: list[str] = []
        self.cancel = threading.Event()

    def append(self, events: list[Any]) -> None:
        self.store.append(self.journal, events)

    def _checks_for(self, python: str | None) -> HostChecks:
        key = python or self.host.python
        checks = self._checks.get(key)
        if checks is None:
            host = replace(self.host, python=key)
            checks = HostChecks(
                self.runbook,
                host,
                self.transport,
                self.env,
                self.redactor,
                self.append,
                self.cancel,
                self._said.append,
            )
            self._checks[key] = checks
        return checks

    def started(
        self, command: str, cwd: str | None, where: dict[str, str] | None = None
    ) -> str | None:
        """A command began (its start mark): recorded; the package snapshot before it taken
        first when it changes packages (of the python it acts on: :func:`named_python`,
        ``where`` what the hook said of the session). Its run id; None for ``exit`` or
        ``logout``, which end the session rather than run a step (not recorded)."""
        if self.running is not None:  # no end mark came (the shell was replaced): closed
            self.ended(None, None, why=("interrupted", "interrupted (no end mark came)"))
        if leaves(command):
            return None
        run_id = _run_id()
        self.learn(assigned_secrets(command))  # so `export T=…; echo $T` is masked at once
        shown, found = self.redactor.text(command, "command")
        self.append(
            [
                StepStarted(
                    run=run_id,
                    step=step_name(command) if command.strip() else KIND,
                    host_name=self.host.name,
                    target=self.transport.target,
                    command=shown,
                    cwd=cwd or None,
                    pid=os.getpid(),
                    machine=socket.gethostname(),
                    redactions=found,
                    interactive=True,
                )
            ]
        )
        checks = before = None
        if changes_packages(command):
            python = named_python(command, where)
            if python and "/" in python and not python.startswith(("/", "~")) and cwd:
                python = posixpath.join(cwd, python)  # relative to where it ran
            checks = self._checks_for(python)
            before = checks.snapshot("before", run_id, run_id)
        recorder = OutputRecorder(self.append, run_id, self.host.name, self.redactor)
        self.running = _Running(run_id, command, time.monotonic(), recorder, checks, before)
        self.runs.append(run_id)
        return run_id

    def learn(self, variables: dict[str, bytes]) -> None:
        """Secret-named variables of the session (``NAME`` → value; the shell's report, or
        a command's literal assignments): their values are masked in everything recorded
        from now on (output, commands, snapshots), as the runbook's secrets are. Only names
        the secret-name rule (:data:`~journal.redact.names.SECRET_NAME`) matches count, and only
        values of :data:`~journal.redact.names.MIN_VALUE_LENGTH` or more, as for a runbook's env."""
        secret = {
            name: value
            for name, value in variables.items()
            if SECRET_NAME.search(name) and len(value) >= MIN_VALUE_LENGTH
        }
        if secret:
            self.learned.update(secret)
            _mask_also(self.redactor, list(secret.values()))

    def output(self, data: bytes) -> None:
        """Bytes the shell printed; the running command's output, if one runs."""
        if self.running is not None and data:
            self.running.recorder.feed("stdout", data)

    def tick(self) -> None:
        if self.running is not None:
            self.running.recorder.tick()

    def ended(
        self, code: int | None, cwd: str | None, *, why: tuple[str, str] | None = None
    ) -> list[tuple[str, str]]:
        """The running command ended (the prompt mark, with its exit status; ``code`` None:
        it did not end, the session did: ``why`` is then its status and reason). Records its
        end, the snapshot and probe after a package change, and gives the lines to show:
        (severity, text)."""
        run = self.running
        if run is None:
            return []
        self.running = None
        run.recorder.close()
        duration = round(time.monotonic() - run.started, 6)
        if code is None:
            status, reason = why or GONE
            sig = None
        else:
            status, sig, reason = outcome_of(code)
        self.append(
            [
                StepFinished(
                    run=run.run_id,
                    host_name=self.host.name,
                    status=status,
                    exit_code=code,
                    duration=duration,
                    signal=sig,
                    reason=reason,
                )
            ]
        )
        lines: list[tuple[str, str]] = []
        if code is None:
            return lines
        if run.checks is not None:
            after = run.checks.snapshot("after", run.run_id, run.run_id)
            if run.before is not None and after is not None:
                diff = diff_packages(run.before, after)
                if not diff.empty:
                    changes = "; ".join(change_text(c) for c in diff.changes)
                    lines.append(("info", f"packages on {self.host.name}: {changes}"))
            if self.probe:
                run.checks.probe(self.probe, run.run_id, run.run_id)
        lines += [("info", text) for text in self._said]
        self._said.clear()
        lines += [(f.severity, finding_line(f)) for f in self.findings(run.run_id)]
        return lines

    def findings(self, run_id: str) -> list[Finding]:
        from journal.service.findings import findings_for_runs

        return findings_for_runs(self.store, self.journal, [run_id])

    def note(self, args: list[str]) -> str:
        """`journal note TEXT [--tag T]…` typed in an SSH session: recorded; what to say."""
        text, tags = "", []
        it = iter(args)
        for arg in it:
            if arg in ("--tag", "-t"):
                tags.append(next(it, ""))
            elif arg.startswith("--tag="):
                tags.append(arg.split("=", 1)[1])
            elif arg in ("--host", "--author"):
                next(it, None)
            elif not text:
                text = arg
        if not text.strip():
            return 'the note is empty: journal note "TEXT" [--tag TAG]'
        self.add_note(text, [t for t in tags if t])
        return f"noted in {self.journal}"

    def add_note(self, text: str, tags: list[str] | None = None) -> None:
        author = f"{getpass.getuser()}@{socket.gethostname()}"
        self.append(
            [NoteAdded(text=text, author=author, tags=tags or [], host_name=self.host.name)]
        )

    def close(self, why: tuple[str, str] = GONE, status: int | None = None) -> None:
        """The session ended: a command still running is recorded as ``why`` says (status,
        reason), but for an ``exit`` (or ``logout``) of the shell that ended by itself
        (``status``, its exit status), recorded with that status."""
        if self.running is not None:
            if status is not None and status >= 0 and _EXIT.match(self.running.command):
                self.ended(status, None)
            else:
                self.ended(None, None, why=why)
        self.cancel.set()


def leaves(command: str) -> bool:
    """Whether a command typed is the shell's own way out (``exit``, ``exit 0``, ``logout``)."""
    words = command.split()
    return (
        bool(words)
        and words[0] in ("exit", "logout")
        and len(words) <= 2
        and not any(c in command for c in ";&|<>()`$")
    )


def _mask_also(redactor: Redactor, values: list[bytes]) -> None:
    """Teach ``redactor`` more values to mask, longest first as :meth:`Redactor.for_run`
    orders them (a value holding another is masked whole). Every recorder of the session
    holds this same redactor, so the running command's output not yet stored is masked
    too."""
    known = set(redactor.values)
    fresh = [v for v in values if v and v not in known]
    if fresh:
        redactor.values[:] = sorted([*redactor.values, *fresh], key=len, reverse=True)


def finding_line(found: Finding) -> str:
    """The line a finding gets in the terminal: ``noop-install — what; advice``."""
    return f"{found.id} — {found.title}; {found.advice}"


def _run_id() -> str:
    from journal.runs import new_run_id

    return new_run_id()
