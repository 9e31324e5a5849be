"""What a `journal shell` session reads from a command line and its end: whether it changes
Python packages and which python it acts on (so that snapshots are taken there), the
secrets it assigns literally, and the outcome its exit status tells."""

from __future__ import annotations

import re
import signal

from journal.reading.commands import install_requests, shell_pieces
from journal.service.shell_marks import NAME

_PIP = re.compile(r"pip(?:3(?:\.\d+)?)?")
_PYTHON = re.compile(r"python(?:3(?:\.\d+)?)?")
_CONDAS = {"conda", "mamba", "micromamba"}


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
            if eq and NAME.fullmatch(name.encode()) and not set(value) & set("$`"):
                found[name] = value.encode("utf-8", "surrogateescape")
    return found
