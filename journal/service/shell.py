"""`journal shell`: a hand-run session recorded command by command.

The shell on the host is started with an integration of this session only (a temporary rc
file: bash ``--rcfile``, nothing written to the user's dotfiles) whose hooks print private
OSC marks (in the spirit of OSC 133) on the terminal's stream:

- ``ESC ] 7733 ; C ; <base64 command> ; <base64 cwd> ; <wait> BEL`` as a command starts
  (``PS0``: the line as history holds it, where it runs). With ``wait`` 1 (the line names
  pip, uv, conda, mamba or micromamba) the hook then blocks until journal answers with a
  newline on the terminal's input, not echoed: journal takes the package snapshot before the
  command first, when the command changes packages.
- ``ESC ] 7733 ; P ; <exit status> ; <base64 cwd> BEL`` as a prompt is drawn
  (``PROMPT_COMMAND``'s first act): the end of the command that ran, if one did.
- ``ESC ] 7733 ; N ; <base64 arguments> BEL``: ``journal note …`` typed in an SSH session
  (a shell function there; a local session's own ``journal`` finds the same database).

:class:`Marks` takes them out of the byte stream (the user's terminal never sees them);
:class:`ShellSession` records each command as a step run of kind ``interactive``: its exact
command, its output (the terminal's stream between the two marks, through the
:class:`~journal.recorder.OutputRecorder`, so secrets are redacted as everywhere), exit
status, cwd and duration; package snapshots around a command that installs or removes Python
packages (and the probe asked for after it); then the detectors' verdict, as lines to print.
Only the shell's output is recorded, never what is typed: input the terminal does not echo
(a password) is never seen.
"""

from __future__ import annotations

import base64
import getpass
import os
import posixpath
import re
import shlex
import signal
import socket
import threading
import time
from dataclasses import dataclass, replace
from typing import Any

from journal.events import NoteAdded, StepFinished, StepStarted
from journal.pitfalls.base import Finding
from journal.pitfalls.commands import install_requests, shell_pieces
from journal.projections.packages import change_text, diff_packages
from journal.recorder import OutputRecorder
from journal.redact import Redactor
from journal.runbook import Host, Runbook
from journal.service.checks import HostChecks
from journal.store import EventStore
from journal.transcript import step_name
from journal.transport import Transport

#: The private OSC number of the marks.
OSC = b"\x1b]7733;"
BEL = b"\x07"
#: A mark longer than this is no mark of ours: its bytes are passed on as they came.
MARK_LIMIT = 1 << 20
#: The step name of every interactive run that has no better one.
KIND = "interactive"
#: How a command still running when the shell ends is recorded: (status, reason).
GONE = ("interrupted", "interrupted (the shell ended)")
#: The ack journal types (not echoed) to let a command whose hook waits go on.
ACK = b"\n"

#: What the bash and zsh hooks share: base64, which lines wait, which env they act on.
_COMMON = r"""__journal_b64() { builtin printf '%s' "$1" | base64 | tr -d '\n'; }
__journal_wait_re='(^|[^[:alnum:]_.-])(pip[0-9.]*|uv|conda|mamba|micromamba)([[:space:]]|$)'
__journal_where() {  # which env a package command acts on: journal takes its snapshots there
  builtin printf '%s\n' "${VIRTUAL_ENV-}" "${CONDA_PREFIX-}" "$(command -v python3)" \
    "$(command -v python)" "$(command -v pip)" "$(command -v pip3)"
}
"""

_BASH_RC = r"""# journal shell: this session's shell integration (this file removes itself)
command rm -f -- "${BASH_SOURCE[0]}"
if [[ -n ${__JOURNAL_LOGIN-} ]]; then
  unset __JOURNAL_LOGIN
  [[ -r /etc/profile ]] && . /etc/profile
  if [[ -r ~/.bash_profile ]]; then . ~/.bash_profile
  elif [[ -r ~/.bash_login ]]; then . ~/.bash_login
  elif [[ -r ~/.profile ]]; then . ~/.profile
  fi
else
  [[ -r /etc/bash.bashrc ]] && . /etc/bash.bashrc
  [[ -r ~/.bashrc ]] && . ~/.bashrc
fi
__EXPORTS__
# history must hold every line: the command start mark reads it from there
HISTCONTROL=${HISTCONTROL//ignoreboth/ignoredups}
HISTCONTROL=${HISTCONTROL//ignorespace/}
HISTIGNORE=
[[ ${HISTSIZE-} == 0 ]] && HISTSIZE=500
set -o history
__COMMON__
__journal_preexec() {
  local c e w=0
  c=$(HISTTIMEFORMAT= builtin history 1)
  [[ $c =~ ^\ *[0-9]+[*\ ]\  ]] && c=${c:${#BASH_REMATCH[0]}}
  [[ $c =~ $__journal_wait_re ]] && w=1
  (( w )) && e=$(__journal_b64 "$(__journal_where)")
  builtin printf '\033]7733;C;%s;%s;%s;%s\007' "$(__journal_b64 "$c")" \
    "$(__journal_b64 "$PWD")" "$w" "$e" >/dev/tty
  if (( w )); then builtin read -r -s -t 300 __journal_ack </dev/tty; fi
  return 0
}
__journal_precmd() {
  local rc=$?
  builtin printf '\033]7733;P;%s;%s\007' "$rc" "$(__journal_b64 "$PWD")" >/dev/tty
  return $rc
}
PS0='$(__journal_preexec)'"${PS0-}"
PROMPT_COMMAND="__journal_precmd${PROMPT_COMMAND:+;$PROMPT_COMMAND}"
__FUNCTIONS__
"""

#: Over SSH, `journal note …` typed in the session reaches the journal through a mark.
_REMOTE_FUNCTIONS = r"""journal() {
  if [[ ${1-} == note ]]; then
    shift
    local a
    a=$(builtin printf '%s\037' "$@")
    builtin printf '\033]7733;N;%s\007' "$(__journal_b64 "$a")" >/dev/tty
  else
    builtin echo "journal: only \`journal note …\` works inside \`journal shell\` over SSH" >&2
    return 2
  fi
}
"""


def bash_rc(exports: dict[str, str], remote: bool, journal: list[str] | None = None) -> str:
    """The rc file of a session: the user's own rc files, the host's env, the hooks; over
    SSH a `journal` function for notes, here ``journal`` (the command that runs this
    journal, e.g. this python's ``-m journal``) as the session's `journal`."""
    lines = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in exports.items())
    functions = _REMOTE_FUNCTIONS if remote else ""
    if not remote and journal:
        functions = f'journal() {{ {shlex.join(journal)} "$@"; }}\n'
    rc = _BASH_RC.replace("__COMMON__\n", _COMMON).replace("__EXPORTS__", lines)
    return rc.replace("__FUNCTIONS__", functions)


_ZSHENV = r"""# journal shell: this session's shell integration (see .zshrc)
__journal_dir=$ZDOTDIR
if [[ -n ${__JOURNAL_ZDOTDIR+x} ]]; then ZDOTDIR=$__JOURNAL_ZDOTDIR; else unset ZDOTDIR; fi
[[ -r ${ZDOTDIR:-$HOME}/.zshenv ]] && . ${ZDOTDIR:-$HOME}/.zshenv
if [[ -n ${ZDOTDIR+x} ]]; then __JOURNAL_ZDOTDIR=$ZDOTDIR; else unset __JOURNAL_ZDOTDIR; fi
ZDOTDIR=$__journal_dir  # so that zsh reads this session's .zshrc next
"""

_ZSHRC = r"""# journal shell: this session's shell integration (this folder removes itself)
if [[ -n ${__JOURNAL_ZDOTDIR+x} ]]; then ZDOTDIR=$__JOURNAL_ZDOTDIR; else unset ZDOTDIR; fi
unset __JOURNAL_ZDOTDIR
[[ -r ${ZDOTDIR:-$HOME}/.zshrc ]] && . ${ZDOTDIR:-$HOME}/.zshrc
command rm -rf -- "$__journal_dir"
unset __journal_dir
__EXPORTS__
__COMMON__
__journal_preexec() {
  local c=$1 e w=0
  [[ $c =~ $__journal_wait_re ]] && w=1
  (( w )) && e=$(__journal_b64 "$(__journal_where)")
  builtin printf '\033]7733;C;%s;%s;%s;%s\007' "$(__journal_b64 "$c")" \
    "$(__journal_b64 "$PWD")" "$w" "$e" >/dev/tty
  if (( w )); then builtin read -rs -t 300 __journal_ack </dev/tty; fi
  return 0
}
__journal_precmd() {
  local rc=$?
  builtin printf '\033]7733;P;%s;%s\007' "$rc" "$(__journal_b64 "$PWD")" >/dev/tty
  return $rc
}
preexec_functions=(__journal_preexec $preexec_functions)
precmd_functions=(__journal_precmd $precmd_functions)
__FUNCTIONS__
"""


def zsh_files(exports: dict[str, str], journal: list[str] | None = None) -> dict[str, str]:
    """The ZDOTDIR of a local zsh session: a .zshenv and .zshrc that read the user's own
    (from their ZDOTDIR, or HOME), then set the hooks (preexec gets the line as typed)."""
    lines = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in exports.items())
    functions = f'journal() {{ {shlex.join(journal)} "$@"; }}\n' if journal else ""
    rc = _ZSHRC.replace("__COMMON__\n", _COMMON).replace("__EXPORTS__", lines)
    rc = rc.replace("__FUNCTIONS__", functions)
    return {".zshenv": _ZSHENV, ".zshrc": rc}


def remote_command(rc: str) -> str:
    """What an SSH session's channel runs: the rc written to a temporary file on the host
    (removed again as the shell reads it), then bash on it, as a login-like shell."""
    blob = base64.b64encode(rc.encode()).decode()
    return (
        f"f=$(mktemp) && printf '%s' {blob} | base64 -d > \"$f\" && "
        'exec env __JOURNAL_LOGIN=1 bash --rcfile "$f" -i'
    )


@dataclass(frozen=True)
class Mark:
    """A mark taken out of the stream: its kind (``C``, ``P``, ``N``) and fields."""

    kind: str
    fields: tuple[str, ...]

    def text(self, index: int) -> str:
        """Field ``index`` decoded from base64 ('' when absent or not base64)."""
        try:
            raw = base64.b64decode(self.fields[index], validate=False)
        except (IndexError, ValueError):
            return ""
        return raw.decode("utf-8", "replace")


class Marks:
    """Splits the shell's output into the bytes to pass on and the marks (in order)."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[bytes | Mark]:
        buf = self._pending + data if self._pending else data
        self._pending = b""
        out: list[bytes | Mark] = []
        while buf:
            at = buf.find(OSC)
            if at < 0:
                keep = _partial_prefix(buf)
                if keep:
                    self._pending = buf[-keep:]
                    buf = buf[:-keep]
                if buf:
                    out.append(buf)
                break
            if at:
                out.append(buf[:at])
            end = buf.find(BEL, at)
            if end < 0:
                if len(buf) - at > MARK_LIMIT:
                    out.append(buf[at:])
                else:
                    self._pending = buf[at:]
                break
            body = buf[at + len(OSC) : end].decode("ascii", "replace").split(";")
            out.append(Mark(body[0], tuple(body[1:])))
            buf = buf[end + 1 :]
        return out

    def rest(self) -> bytes:
        """What was held back (a mark that never ended), to pass on at the end."""
        rest, self._pending = self._pending, b""
        return rest

    def idle(self) -> bytes:
        """Held bytes that could only have begun a mark (an ``ESC`` at the end of a read),
        to pass on once nothing more came for a while: the rest of a mark of ours comes in
        the same write."""
        if self._pending and len(self._pending) < len(OSC):
            return self.rest()
        return b""


def _partial_prefix(buf: bytes) -> int:
    """How many bytes at the end of ``buf`` could begin a mark."""
    start = buf.rfind(b"\x1b", max(0, len(buf) - len(OSC)))
    if start >= 0 and OSC.startswith(buf[start:]):
        return len(buf) - start
    return 0


_PIP = re.compile(r"pip(?:3(?:\.\d+)?)?")
_PYTHON = re.compile(r"python(?:3(?:\.\d+)?)?")
_CONDAS = {"conda", "mamba", "micromamba"}
_EXIT = re.compile(r"\s*(?:builtin\s+)?(?:exit|logout)(?:\s+\d+)?\s*;?\s*$")


def changes_packages(command: str) -> bool:
    """Whether ``command`` installs or removes Python packages: pip, `python -m pip`,
    `uv pip` (install, uninstall, sync), conda/mamba/micromamba (install, update, remove)."""
    if install_requests(command):
        return True
    for words in shell_pieces(command):
        for i, word in enumerate(words):
            base = word.rsplit("/", 1)[-1]
            rest = words[i + 1 :]
            if base == "uv" and rest[:1] == ["pip"] and rest[1:2] in (["uninstall"], ["sync"]):
                return True
            if _PIP.fullmatch(base) and rest[:1] == ["uninstall"]:
                return True
            if _PYTHON.fullmatch(base) and rest[:2] == ["-m", "pip"] and "uninstall" in rest[2:3]:
                return True
            if base in _CONDAS and rest[:1] in (["remove"], ["uninstall"]):
                return True
    return False


#: What the command start hook says of a package command's session, line by line.
WHERE = ("VIRTUAL_ENV", "CONDA_PREFIX", "python3", "python", "pip", "pip3")


def where_of(text: str) -> dict[str, str]:
    """The hook's lines as a dict (the empty ones, and ``command -v`` aliases, left out)."""
    lines = text.split("\n")
    return {k: v for k, v in zip(WHERE, lines, strict=False) if v.startswith("/")}


def named_python(command: str, where: dict[str, str] | None = None) -> str | None:
    """The python a package command acts on: the one it names (``uv pip … --python X``,
    ``X -m pip``, ``/env/bin/pip``), else the session's (``where``: an activated venv or
    conda env, the PATH's ``pip`` or ``python``); None for the host's."""
    where = where or {}
    env = where.get("VIRTUAL_ENV") or where.get("CONDA_PREFIX")
    for words in shell_pieces(command):
        for i, word in enumerate(words):
            base = word.rsplit("/", 1)[-1]
            rest = words[i + 1 :]
            if base == "uv" and rest[:1] == ["pip"]:
                for j, arg in enumerate(rest):
                    if arg in ("--python", "-p") and j + 1 < len(rest):
                        return rest[j + 1]
                    if arg.startswith("--python="):
                        return arg.split("=", 1)[1]
                return f"{env}/bin/python" if env else None
            if _PYTHON.fullmatch(base) and rest[:2] == ["-m", "pip"]:
                return word if "/" in word else where.get(word) or where.get("python3")
            if _PIP.fullmatch(base):
                pip = word if "/" in word else where.get(word)
                return pip.rsplit("/", 1)[0] + "/python" if pip else None
            if base in _CONDAS and where.get("CONDA_PREFIX"):
                return where["CONDA_PREFIX"] + "/bin/python"
    return None


def outcome_of(code: int) -> tuple[str, str | None, str | None]:
    """(status, signal, reason) of a command by the exit status its shell reported."""
    if code == 0:
        return "succeeded", None, None
    if code > 128 and (code - 128) in signal.Signals._value2member_map_:
        name = signal.Signals(code - 128).name
        if name == "SIGINT":
            return "interrupted", name, "interrupted (Ctrl-C)"
        if name == "SIGTSTP":
            return "interrupted", name, "interrupted (Ctrl-Z): stopped, a job of the shell now"
        return "failed", name, f"ended by {name}"
    return "failed", None, None


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

    def started(self, command: str, cwd: str | None, where: dict[str, str] | None = None) -> str:
        """A command began (its start mark): recorded; the package snapshot before it taken
        first when it changes packages (of the python it acts on: :func:`named_python`,
        ``where`` what the hook said of the session). Its run id."""
        if self.running is not None:  # no end mark came (the shell was replaced): closed
            self.ended(None, None, why=("interrupted", "interrupted (no end mark came)"))
        run_id = _run_id()
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


def finding_line(found: Finding) -> str:
    """The line a finding gets in the terminal: ``noop-install — what; advice``."""
    return f"{found.id} — {found.title}; {found.advice}"


def _run_id() -> str:
    from journal.service.steps import new_run_id

    return new_run_id()
