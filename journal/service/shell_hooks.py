"""The shell integration of a `journal shell` session: the rc files it starts the shell with,
whose hooks print the marks that :mod:`journal.service.shell_marks` takes out of the stream.

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
  (``NAME=value``, NUL separated; the names that :data:`journal.redact.names.SECRET_NAME`
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
"""

from __future__ import annotations

import re
import secrets
import shlex

from journal.redact.names import SECRET_NAME

#: The shell variable that holds the session's nonce (never exported).
NONCE_VAR = "__journal_nonce"


def new_nonce() -> str:
    """A session's secret: what leads every mark of its hooks (128 random bits, hex)."""
    return secrets.token_hex(16)


def names_ere(pattern: re.Pattern[str] = SECRET_NAME) -> str:
    """The secret-name rule (:data:`~journal.redact.names.SECRET_NAME`) as a POSIX extended regex
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
