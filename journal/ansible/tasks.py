"""What journal reads of an Ansible task and its result, as plain data (no Ansible import):
whether the task changes packages (and of which python), the probe it asks for, the command it
ran, what it printed, and how it ended as a step run's status.

A task changes packages when its module is ``pip`` (``ansible.builtin.pip``), when it is a
``shell``/``command``/``raw`` whose command names pip, uv or conda, or when it is tagged
``journal_snapshot``. The env it changes: the pip module's ``virtualenv`` (its
``bin/python``) or ``executable`` (the python beside that pip), a ``--python PATH`` or
``PATH -m pip`` in the command, else the host's ``journal_python`` (or
``ansible_python_interpreter``). ``journal_probe: torch-env`` (a task var) or the tag
``journal_probe=torch-env`` runs that probe on the host after the task.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

#: Modules that install packages.
PIP_MODULES = frozenset({"pip", "ansible.builtin.pip", "ansible.legacy.pip"})
#: Modules that run a command line.
COMMAND_MODULES = frozenset(
    {
        "shell",
        "command",
        "raw",
        "ansible.builtin.shell",
        "ansible.builtin.command",
        "ansible.builtin.raw",
        "ansible.legacy.shell",
        "ansible.legacy.command",
    }
)
#: A command that changes a python env's packages.
_INSTALLER = re.compile(r"(?:^|[\s/;&|(])(?:pip3?(?:\.\d+)?|uv|conda|mamba|micromamba)\s", re.M)
_PYTHON_FLAG = re.compile(r"--python(?:=|\s+)(\S+)")
_PYTHON_M_PIP = re.compile(r"(\S*python[\d.]*)\s+-m\s+pip\b")
#: The tag that asks for package snapshots around any task, and the probe tag's prefix.
SNAPSHOT_TAG = "journal_snapshot"
PROBE_TAG = "journal_probe="


def command_of(module: str, args: Mapping[str, Any]) -> str:
    """The command line a task asks for, as its args give it (before the result has one)."""
    raw = args.get("_raw_params") or args.get("cmd") or args.get("argv")
    if isinstance(raw, list):
        return shlex.join(str(a) for a in raw)
    if isinstance(raw, str):
        return raw
    if module in PIP_MODULES:
        names = args.get("name") or []
        names = [names] if isinstance(names, str) else list(names)
        extra = f" {args['extra_args']}" if args.get("extra_args") else ""
        return f"pip install {' '.join(str(n) for n in names)}{extra}".strip()
    shown = " ".join(f"{k}={v}" for k, v in args.items() if not str(k).startswith("_"))
    return f"{module} {shown}".strip()


def changes_packages(module: str, args: Mapping[str, Any], tags: list[str]) -> bool:
    if SNAPSHOT_TAG in tags:
        return True
    if module in PIP_MODULES:
        return True  # installs, upgrades and removals alike
    if module in COMMAND_MODULES:
        return bool(_INSTALLER.search(f" {command_of(module, args)} "))
    return False


def _literal(value: Any) -> str | None:
    """A path as written, unless a template still stands in it."""
    if isinstance(value, str) and value.strip() and "{{" not in value and "{%" not in value:
        return value.strip()
    return None


def python_of(module: str, args: Mapping[str, Any], host_vars: Mapping[str, Any]) -> str:
    """The python whose packages the task changes (see the module docstring)."""
    if module in PIP_MODULES:
        venv = _literal(args.get("virtualenv"))
        if venv:
            return f"{venv.rstrip('/')}/bin/python"
        pip = _literal(args.get("executable"))
        if pip and "/" in pip:
            return f"{pip.rsplit('/', 1)[0]}/python"
    if module in COMMAND_MODULES:
        text = command_of(module, args)
        found = _PYTHON_FLAG.search(text) or _PYTHON_M_PIP.search(text)
        if found and _literal(found.group(1)):
            return found.group(1)
    for key in ("journal_python", "ansible_python_interpreter"):
        value = _literal(host_vars.get(key))
        if value and value != "auto" and not value.startswith("auto_"):
            return value
    return "python3"


def probe_of(task_vars: Mapping[str, Any], tags: list[str]) -> str | None:
    """The probe the task asks for after it (``journal_probe``), if any."""
    value = task_vars.get("journal_probe")
    if isinstance(value, str) and value.strip():
        return value.strip()
    for tag in tags:
        if tag.startswith(PROBE_TAG) and tag[len(PROBE_TAG) :].strip():
            return tag[len(PROBE_TAG) :].strip()
    return None


def printed(result: Mapping[str, Any]) -> tuple[str, str]:
    """What a task printed: its stdout, and its stderr with its ``msg`` (a module's own word,
    a failure's reason) after it; a loop's items one after the other."""
    items = result.get("results")
    if isinstance(items, list) and items and all(isinstance(i, Mapping) for i in items):
        parts = [printed(i) for i in items]
        return "".join(p[0] for p in parts), "".join(p[1] for p in parts)
    out = _text(result.get("stdout"))
    err = _text(result.get("stderr"))
    msg = _text(result.get("msg"))
    if msg and msg.strip() not in (out.strip(), err.strip(), "") and msg != "All items completed":
        err += msg
    return out, err


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        value = "\n".join(str(v) for v in value)
    text = str(value)
    return text if not text or text.endswith("\n") else text + "\n"


def command_ran(module: str, args: Mapping[str, Any], result: Mapping[str, Any]) -> str:
    """The command as the result says it ran (the pip module's ``cmd``), else as asked."""
    cmd = result.get("cmd")
    if isinstance(cmd, list):
        return shlex.join(str(c) for c in cmd)
    if isinstance(cmd, str) and cmd.strip():
        return cmd
    return command_of(module, args)


def step_name(task: str, module: str) -> str:
    """A task's step name: its name as a step name (lower case, words joined by ``-``)."""
    words = re.findall(r"[A-Za-z0-9][A-Za-z0-9._]*", task or module)
    name = "-".join(w.lower() for w in words)[:64].strip("-.")
    return name or module.rsplit(".", 1)[-1]
