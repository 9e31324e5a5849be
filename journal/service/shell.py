"""`journal shell`: a hand-run session recorded command by command.

The shell on the host is started with an integration of this session only (a temporary rc
file: bash ``--rcfile``, nothing written to the user's dotfiles) whose hooks print private
OSC marks (in the spirit of OSC 133) on the terminal's stream, each led by the session's
nonce (:func:`new_nonce`, see below):

- ``ESC ] 7733 ; <nonce> ; C ; <base64 command> ; <base64 cwd> ; <wait> ; <base64 where>
  BEL`` as a command starts (``PS0``: the line as history holds it, where it runs). With
  ``wait`` 1 (the line names pip, uv, conda, mamba or micromamba) the hook then blocks until
  journal answers with a newline on the terminal's input, not echoed: journal takes the
  package snapshot before the command first, when the command changes packages.
- ``ESC ] 7733 ; <nonce> ; P ; <exit status> ; <base64 cwd> ; <base64 secrets> BEL`` as a
  prompt is drawn (``PROMPT_COMMAND``'s first act): the end of the command that ran, if one
  did; and, when they changed, the shell's secret-named environment variables
  (``NAME=value``, NUL separated; the names that :data:`journal.redact.SECRET_NAME`
  matches, as for a runbook's env), whose values are redacted from then on in everything
  the session records, as the runbook's secrets are. Exported ones only: the environment is
  what the rule was made for, and shells' own hooks keep unexported state under such names
  (pyenv-virtualenv's ``_PYENV_VH_PWD`` holds the working directory). A value a command
  line assigns literally (``API_TOKEN=… cmd``, exported or not) is learnt as the command
  starts, before its output (:func:`assigned_secrets`).
- ``ESC ] 7733 ; <nonce> ; N ; <base64 arguments> BEL``: ``journal note …`` typed in an SSH
  session (a shell function there; a local session's own ``journal`` finds the same
  database).

Host output is untrusted: a command may print these very sequences. The nonce is what tells
the hooks' marks from output: 128 random bits made for each session, written into the rc file
as a shell variable that is never exported (a child process's environment, and the shell's
own ``/proc/PID/environ``, never hold it), never on a command line (the rc reaches an SSH
host on a channel's standard input, not in the command sshd runs), and never printed (the
rc file removes itself as the shell reads it; the hooks turn ``xtrace`` off while they
run). A command's output cannot learn it, so it cannot forge a mark: a sequence that is not
led by it is output like any other byte, recorded and shown as printed. Should the nonce
be printed after all (``echo $__journal_nonce``, ``set``), the record has it masked.

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
import secrets
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
from journal.redact import MIN_VALUE_LENGTH, SECRET_NAME, Redactor
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
#: The shell variable that holds the session's nonce (never exported).
NONCE_VAR = "__journal_nonce"


def new_nonce() -> str:
    """A session's secret: what leads every mark of its hooks (128 random bits, hex)."""
    return secrets.token_hex(16)


def names_ere(pattern: re.Pattern[str] = SECRET_NAME) -> str:
    """The secret-name rule (:data:`~journal.redact.SECRET_NAME`) as a POSIX extended regex
    that bash's and zsh's ``=~`` read alike (case folded into ``[Tt]`` classes): the hooks
    pick the variables to report by it, journal judges each again by the rule itself. A
    form the shells might read otherwise (an escape, a class, an inline flag) gives ``.``:
    every variable is reported, and only the rule decides."""
    source = pattern.pattern.replace("(?i)", "", 1).replace("(?:", "(")
    if re.search(r"\\|\[|\(\?|\{", source):
        return "."
    if pattern.flags & re.IGNORECASE:
        source = re.sub(r"[A-Za-z]", lambda m: f"[{m[0].upper()}{m[0].lower()}]", source)
    return source


#: What the bash and zsh hooks share: base64, which lines wait, which env they act on, the
#: nonce (set, then never exported, even under ``set -a``) and the secret-name rule.
_COMMON = r"""__journal_b64() { builtin printf '%s' "$1" | base64 | tr -d '\n'; }
__journal_wait_re='(^|[^[:alnum:]_.-])(pip[0-9.]*|uv|conda|mamba|micromamba)([[:space:]]|$)'
__journal_where() {  # which env a package command acts on: journal takes its snapshots there
  builtin printf '%s\n' "${VIRTUAL_ENV-}" "${CONDA_PREFIX-}" "$(command -v python3)" \
    "$(command -v python)" "$(command -v pip)" "$(command -v pip3)"
}
__journal_nonce=__NONCE__
__journal_names=__NAMES__
__journal_sent=
__journal_said=
__UNEXPORT__ __journal_nonce __journal_names __journal_sent __journal_said
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
__journal_secrets() {  # $__journal_said: the secret-named exported variables, if they changed
  local n IFS=$' \t\n' s=()
  __journal_said=
  for n in $(compgen -e); do
    [[ $n =~ $__journal_names ]] && s+=("$n=${!n-}")
  done
  IFS=$'\037'
  [[ ${s[*]-} == "$__journal_sent" ]] && return 0
  __journal_sent=${s[*]-}
  (( ${#s[@]} )) && __journal_said=$(builtin printf '%s\0' "${s[@]}" | base64 | tr -d '\n')
  return 0
}
__journal_preexec() {
  { set +x; } 2>/dev/null  # PS0's subshell: the nonce is never traced
  local c e w=0
  c=$(HISTTIMEFORMAT= builtin history 1)
  [[ $c =~ ^\ *[0-9]+[*\ ]\  ]] && c=${c:${#BASH_REMATCH[0]}}
  [[ $c =~ $__journal_wait_re ]] && w=1
  (( w )) && e=$(__journal_b64 "$(__journal_where)")
  builtin printf '\033]7733;%s;C;%s;%s;%s;%s\007' "$__journal_nonce" "$(__journal_b64 "$c")" \
    "$(__journal_b64 "$PWD")" "$w" "$e" >/dev/tty
  if (( w )); then builtin read -r -s -t 300 __journal_ack </dev/tty; fi
  return 0
}
__journal_precmd() {
  local rc=$? x=
  [[ $- == *x* ]] && { x=1; set +x; } 2>/dev/null
  __journal_secrets
  builtin export -n __journal_sent __journal_said  # `set -a` exports what is assigned
  builtin printf '\033]7733;%s;P;%s;%s;%s\007' "$__journal_nonce" "$rc" \
    "$(__journal_b64 "$PWD")" "$__journal_said" >/dev/tty
  [[ -n $x ]] && set -x
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
    local a x=
    [[ $- == *x* ]] && { x=1; set +x; } 2>/dev/null
    a=$(builtin printf '%s\037' "$@")
    builtin printf '\033]7733;%s;N;%s\007' "$__journal_nonce" "$(__journal_b64 "$a")" >/dev/tty
    [[ -n $x ]] && set -x
    return 0
  else
    builtin echo "journal: only \`journal note …\` works inside \`journal shell\` over SSH" >&2
    return 2
  fi
}
"""


def _hooks(rc: str, exports: dict[str, str], nonce: str, unexport: str) -> str:
    if not re.fullmatch(r"[0-9a-f]{16,}", nonce):
        raise ValueError("a session's nonce is hex (new_nonce())")
    common = _COMMON.replace("__NONCE__", nonce).replace("__NAMES__", shlex.quote(names_ere()))
    lines = "\n".join(f"export {k}={shlex.quote(v)}" for k, v in exports.items())
    rc = rc.replace("__COMMON__\n", common.replace("__UNEXPORT__", unexport))
    return rc.replace("__EXPORTS__", lines)


def bash_rc(
    exports: dict[str, str], remote: bool, journal: list[str] | None = None, *, nonce: str
) -> str:
    """The rc file of a session: the user's own rc files, the host's env, the hooks (their
    marks led by ``nonce``); over SSH a `journal` function for notes, here ``journal`` (the
    command that runs this journal, e.g. this python's ``-m journal``) as the session's
    `journal`."""
    functions = _REMOTE_FUNCTIONS if remote else ""
    if not remote and journal:
        functions = f'journal() {{ {shlex.join(journal)} "$@"; }}\n'
    rc = _hooks(_BASH_RC, exports, nonce, "builtin export -n")
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
__journal_secrets() {  # $__journal_said: the secret-named exported variables, if they changed
  emulate -L zsh -o noxtrace
  local n IFS=$' \t\n'
  local -a s
  __journal_said=
  for n in ${(k)parameters}; do
    [[ ${parameters[$n]} == scalar*-export* && $n =~ $__journal_names ]] && s+=("$n=${(P)n}")
  done
  IFS=$'\037'
  [[ "${s[*]}" == "$__journal_sent" ]] && return 0
  __journal_sent="${s[*]}"
  (( ${#s} )) && __journal_said=$(builtin printf '%s\0' "${s[@]}" | base64 | tr -d '\n')
  return 0
}
__journal_preexec() {
  emulate -L zsh -o noxtrace  # the nonce is never traced
  local c=$1 e w=0
  [[ $c =~ $__journal_wait_re ]] && w=1
  (( w )) && e=$(__journal_b64 "$(__journal_where)")
  builtin printf '\033]7733;%s;C;%s;%s;%s;%s\007' "$__journal_nonce" "$(__journal_b64 "$c")" \
    "$(__journal_b64 "$PWD")" "$w" "$e" >/dev/tty
  if (( w )); then builtin read -rs -t 300 __journal_ack </dev/tty; fi
  return 0
}
__journal_precmd() {
  local rc=$?
  emulate -L zsh -o noxtrace
  __journal_secrets
  typeset -g +x __journal_sent __journal_said  # `setopt allexport` exports what is assigned
  builtin printf '\033]7733;%s;P;%s;%s;%s\007' "$__journal_nonce" "$rc" \
    "$(__journal_b64 "$PWD")" "$__journal_said" >/dev/tty
  return $rc
}
preexec_functions=(__journal_preexec $preexec_functions)
precmd_functions=(__journal_precmd $precmd_functions)
__FUNCTIONS__
"""


def zsh_files(
    exports: dict[str, str], journal: list[str] | None = None, *, nonce: str
) -> dict[str, str]:
    """The ZDOTDIR of a local zsh session: a .zshenv and .zshrc that read the user's own
    (from their ZDOTDIR, or HOME), then set the hooks (preexec gets the line as typed; their
    marks led by ``nonce``)."""
    functions = f'journal() {{ {shlex.join(journal)} "$@"; }}\n' if journal else ""
    rc = _hooks(_ZSHRC, exports, nonce, "typeset -g +x")
    return {".zshenv": _ZSHENV, ".zshrc": rc.replace("__FUNCTIONS__", functions)}


#: What an SSH session's first channel runs: the rc file (on its standard input, never on a
#: command line that ``ps`` shows) written to a private temporary file; it says the path.
RC_UPLOAD = 'umask 077 && f=$(mktemp) && cat > "$f" && printf "%s" "$f"'


def remote_command(rc_path: str) -> str:
    """What an SSH session's terminal channel runs: bash on the rc file :data:`RC_UPLOAD`
    wrote (the rc removes itself as the shell reads it), as a login-like shell."""
    return f"exec env __JOURNAL_LOGIN=1 bash --rcfile {shlex.quote(rc_path)} -i"


@dataclass(frozen=True)
class Mark:
    """A mark taken out of the stream: its kind (``C``, ``P``, ``N``) and fields."""

    kind: str
    fields: tuple[str, ...]

    def text(self, index: int) -> str:
        """Field ``index`` decoded from base64 ('' when absent or not base64)."""
        return self.raw(index).decode("utf-8", "replace")

    def raw(self, index: int) -> bytes:
        """Field ``index`` decoded from base64, as bytes (b'' when absent or not base64)."""
        try:
            return base64.b64decode(self.fields[index], validate=False)
        except (IndexError, ValueError):
            return b""


class Marks:
    """Splits the shell's output into the bytes to pass on and the marks (in order): only a
    sequence led by the session's ``nonce`` is a mark; any other, ``ESC ] 7733`` or not, is
    output."""

    def __init__(self, nonce: str) -> None:
        if not nonce:
            raise ValueError("marks without a nonce could be forged by any output")
        self.head = OSC + nonce.encode("ascii") + b";"
        self._pending = b""

    def feed(self, data: bytes) -> list[bytes | Mark]:
        buf = self._pending + data if self._pending else data
        self._pending = b""
        out: list[bytes | Mark] = []
        head = self.head
        while buf:
            at = buf.find(head)
            if at < 0:
                keep = _partial_prefix(buf, head)
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
            body = buf[at + len(head) : end].decode("ascii", "replace").split(";")
            out.append(Mark(body[0], tuple(body[1:])))
            buf = buf[end + 1 :]
        return out

    def rest(self) -> bytes:
        """What was held back (a mark that never ended), to pass on at the end."""
        rest, self._pending = self._pending, b""
        return rest

    def idle(self) -> bytes:
        """Held bytes that could only have begun a mark (an ``ESC`` at the end of a read, or
        ``ESC ] 7733 ;`` and part of a nonce), to pass on once nothing more came for a while:
        the rest of a mark of ours comes in the same write."""
        if self._pending and len(self._pending) < len(self.head):
            return self.rest()
        return b""


def _partial_prefix(buf: bytes, head: bytes) -> int:
    """How many bytes at the end of ``buf`` could begin a mark (``head`` holds one ``ESC``,
    its first byte: only the last ``ESC`` can begin one)."""
    start = buf.rfind(b"\x1b", max(0, len(buf) - len(head) + 1))
    if start >= 0 and head.startswith(buf[start:]):
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

    def started(self, command: str, cwd: str | None, where: dict[str, str] | None = None) -> str:
        """A command began (its start mark): recorded; the package snapshot before it taken
        first when it changes packages (of the python it acts on: :func:`named_python`,
        ``where`` what the hook said of the session). Its run id."""
        if self.running is not None:  # no end mark came (the shell was replaced): closed
            self.ended(None, None, why=("interrupted", "interrupted (no end mark came)"))
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
        the secret-name rule (:data:`~journal.redact.SECRET_NAME`) matches count, and only
        values of :data:`~journal.redact.MIN_VALUE_LENGTH` or more, as for a runbook's env."""
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


def reported_secrets(blob: bytes) -> dict[str, bytes]:
    """The P mark's report of the secret-named variables: ``NAME=value`` records, each
    ended by a NUL."""
    found: dict[str, bytes] = {}
    for record in blob.split(b"\0"):
        name, eq, value = record.partition(b"=")
        if eq and _NAME.fullmatch(name):
            found[name.decode("ascii")] = value
    return found


_NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def assigned_secrets(command: str) -> dict[str, bytes]:
    """The literal values a command line gives variables (``export HF_TOKEN=…``, ``T=… cmd``,
    ``docker run -e T=…``): known before its output is. A value the shell would expand
    (``$(cat f)``, ``$X``, a backquote) is left to the shell's report at the next prompt."""
    found: dict[str, bytes] = {}
    if "=" not in command:
        return found
    for words in shell_pieces(command):
        for word in words:
            name, eq, value = word.partition("=")
            if eq and _NAME.fullmatch(name.encode()) and not set(value) & set("$`"):
                found[name] = value.encode("utf-8", "surrogateescape")
    return found


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
    from journal.service.steps import new_run_id

    return new_run_id()
