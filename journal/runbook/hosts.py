"""The runbook's hosts and their groups: the ``[hosts.NAME]`` tables, validated into the
:class:`Host` each step runs on, and ``[groups]``, named and ordered lists of hosts that
``--group`` and a step's or a benchmark's ``hosts`` name (:func:`expand` puts the hosts in)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from journal.runbook.checker import NAME, NAME_RULE, _Checker, _kind, shown, suggest

SSH_TARGET = re.compile(
    r"^(?:(?P<user>[^@\s:]+)@)?(?P<host>[^@\s:\[\]]+|\[[0-9a-fA-F:]+\])(?::(?P<port>\d+))?$"
)

HOST_KEYS = {"ssh", "python", "env", "accept_new_host_key", "description", "uv"}


@dataclass(frozen=True)
class Host:
    """A machine the plan runs on: ``local``, or an SSH target or ``~/.ssh/config`` alias."""

    name: str
    ssh: str
    python: str = "python3"
    env: dict[str, str] = field(default_factory=dict)
    accept_new_host_key: bool = False
    #: the host's uv (an absolute path, or a name the host's PATH finds), for `journal
    #: rollback`; None: uv if the host's PATH has one, else pip
    uv: str | None = None

    @property
    def is_local(self) -> bool:
        return self.ssh == "local"

    def ssh_parts(self) -> tuple[str | None, str, int | None]:
        """(user, host, port) of the SSH target; None where ``~/.ssh/config`` decides."""
        match = SSH_TARGET.match(self.ssh)
        assert match is not None  # checked when the runbook was read
        port = match.group("port")
        return match.group("user"), match.group("host").strip("[]"), int(port) if port else None


def host_specs(check: _Checker, table: dict[str, Any]) -> dict[str, Host]:
    """The ``[hosts.NAME]`` tables: at least one."""
    if not table:
        raise check.fail(
            "hosts", 'no hosts: add one, e.g. [hosts.gpu-box] with ssh = "user@host" or "local"'
        )
    return {h: _host(check, h, spec) for h, spec in table.items()}


def _host(check: _Checker, name: str, spec: Any) -> Host:
    key = f"hosts.{name}"
    if not NAME.match(name):
        raise check.fail(key, f"{shown(name)} is not a usable host name ({NAME_RULE})")
    spec = check.table(spec, key)
    check.known_keys(spec, HOST_KEYS, key)
    if "ssh" not in spec:
        raise check.fail(
            f"{key}.ssh", 'missing: give "user@host", "user@host:port", an alias or "local"'
        )
    ssh = check.string(spec["ssh"], f"{key}.ssh")
    if ssh != "local":
        match = SSH_TARGET.match(ssh)
        if not match:
            raise check.fail(f"{key}.ssh", f"{ssh!r} is not user@host[:port], an alias or local")
        port = match.group("port")
        if port is not None and not 0 < int(port) < 65536:
            raise check.fail(f"{key}.ssh", f"port {port} is out of range (1-65535)")
    python = check.string(spec.get("python", "python3"), f"{key}.python")
    env = check.env(spec.get("env", {}), f"{key}.env")
    accept = spec.get("accept_new_host_key", False)
    if not isinstance(accept, bool):
        raise check.fail(
            f"{key}.accept_new_host_key", f"expected true or false, got {_kind(accept)}"
        )
    uv = spec.get("uv")
    if uv is not None:
        uv = check.string(uv, f"{key}.uv")
        if uv != uv.strip() or any(c in uv for c in "\n\r\0"):
            raise check.fail(f"{key}.uv", f"{uv!r} is not a path: no spaces around it, one line")
        if "/" in uv and not uv.startswith(("/", "~/")):
            raise check.fail(
                f"{key}.uv",
                f"{uv!r} is relative to no folder the host knows: give an absolute path "
                '(uv = "/usr/local/bin/uv", "~/.local/bin/uv") or a name its PATH finds ("uv")',
            )
    return Host(name, ssh, python, env, accept, uv)


def group_specs(
    check: _Checker, table: dict[str, Any], hosts: dict[str, Host]
) -> dict[str, list[str]]:
    """``[groups] gpu = ["gpu-1", "gpu-2"]``: named, ordered lists of hosts (hosts only, no
    groups of groups), each host once, no group named like a host (--host/--group and a
    step's ``hosts`` would be ambiguous)."""
    groups: dict[str, list[str]] = {}
    for name, members in table.items():
        key = f"groups.{name}"
        if not NAME.match(name):
            raise check.fail(key, f"{shown(name)} is not a usable group name ({NAME_RULE})")
        if name in hosts:
            raise check.fail(
                key,
                f"{name!r} is also a host's name: give the group its own name, so that "
                "--host, --group and a step's hosts cannot mean both",
            )
        members = check.strings(members, key)
        if not members:
            raise check.fail(key, 'the group is empty: list its hosts, e.g. ["gpu-1"]')
        for member in members:
            if member not in hosts:
                hint = (
                    " (a group lists hosts, not other groups)"
                    if member in table
                    else suggest(member, list(hosts))
                )
                raise check.fail(key, f"no host named {member!r}{hint}")
        twice = sorted(m for m, n in Counter(members).items() if n > 1)
        if twice:
            raise check.fail(key, f"{', '.join(map(repr, twice))} listed more than once")
        groups[name] = members
    return groups


def expand(names: list[str], groups: dict[str, list[str]]) -> list[str]:
    """Host names with each group's name replaced by its hosts, in place, each host once."""
    if groups.keys().isdisjoint(names):
        return list(dict.fromkeys(names))
    return list(dict.fromkeys(h for n in names for h in groups.get(n, [n])))
