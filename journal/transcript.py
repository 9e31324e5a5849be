"""Terminal transcripts as people paste them: prompt lines, each followed by its output.

Prompts recognised: ``user@host:~/dir$ cmd``, ``user@host:~# cmd``, ``(venv) user@host:~$ cmd``,
``[user@host dir]$ cmd``, ``$ cmd`` and ``# cmd``. A ``# …`` line is a root prompt only when
what follows reads as a command (a known program, a path, ``VAR=value``); otherwise it is a
comment. ``>>> `` (Python) is not a prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_USER_HOST = re.compile(
    r"^(?:\([^)\n]{1,80}\)\s*)?"  # (venv)
    r"(?:(?P<user>[\w.-]{1,64})@(?P<host>[\w.-]{1,128})[:\s][^\n$#]{0,300}?"  # user@host:~/dir
    r"|\[(?P<user2>[\w.-]{1,64})@(?P<host2>[\w.-]{1,128})[^\]\n]{0,200}\])"  # [user@host dir]
    r"\s?[$#] (?P<cmd>.*)$"
)
_BARE = re.compile(r"^(?:\([^)\n]{1,80}\)\s*)?(?P<mark>[$#]) (?P<cmd>\S.*)$")

#: First words that make a ``# …`` line a command rather than a comment.
COMMANDS = frozenset(
    """
    uv pip pip3 python python3 conda mamba micromamba source export unset cd ls cat echo printf
    nvidia-smi nvcc sudo apt apt-get dpkg git curl wget make cmake ninja docker podman ssh scp
    rsync rm cp mv mkdir ln tail head grep env which ldd ldconfig readelf pkill kill ps top htop
    torchrun sglang vllm huggingface-cli hf bash sh zsh time timeout systemctl journalctl
    tar unzip chmod chown find du df free watch tee sed awk sort uniq wc diff patch nohup
    accelerate deepspeed mpirun srun sbatch all_reduce_perf all_gather_perf llama-bench
    """.split()
)


@dataclass
class Command:
    """A command of a transcript with its output lines and where they are in the file."""

    index: int
    command: str
    line: int  # the prompt's line number (1-based)
    user: str | None = None
    host: str | None = None
    output: list[str] = field(default_factory=list)
    raw: str = ""  # the prompt line as pasted

    @property
    def first_output_line(self) -> int:
        return self.line + 1


def _is_command(text: str) -> bool:
    first = text.split(maxsplit=1)[0] if text.split() else ""
    if not first:
        return False
    if "=" in first and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", first):
        return True  # CUDA_VISIBLE_DEVICES=0 python ...
    return first in COMMANDS or first.startswith(("/", "./", "~/", "../")) or first.endswith(".sh")


def prompt(line: str) -> tuple[str, str | None, str | None] | None:
    """(command, user, host) if ``line`` is a prompt line, else None."""
    if len(line) > 4000 or ("$ " not in line and "# " not in line) or line.startswith(">>>"):
        return None
    match = _USER_HOST.match(line)
    if match:
        return (
            match.group("cmd").strip(),
            match.group("user") or match.group("user2"),
            match.group("host") or match.group("host2"),
        )
    match = _BARE.match(line)
    if match:
        cmd = match.group("cmd").strip()
        if match.group("mark") == "$" or _is_command(cmd):
            return cmd, None, None
    return None


def parse(text: str) -> list[Command]:
    """The commands of a transcript, in order; text before the first prompt is ignored."""
    commands: list[Command] = []
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        found = prompt(line)
        if found is not None:
            cmd, user, host = found
            commands.append(Command(len(commands), cmd, number, user, host, raw=line))
        elif commands:
            commands[-1].output.append(line)
    for command in commands:  # the blank lines before the next prompt are not output
        while command.output and not command.output[-1].strip():
            command.output.pop()
    return commands


_PREFIXES = {"sudo", "time", "nohup", "env", "exec", "command"}


def step_name(command: str) -> str:
    """A short name for a command: ``uv-pip-install``, ``python3``, ``nvidia-smi``."""
    words = command.split()
    while words and (words[0] in _PREFIXES or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])):
        words.pop(0)
    if not words:
        return "command"
    name = [words[0].rsplit("/", 1)[-1]]
    for word in words[1:3]:
        if not re.fullmatch(r"[a-z][a-z0-9_-]*", word):
            break
        name.append(word)
    return "-".join(name)[:60] or "command"
