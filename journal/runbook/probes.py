"""The runbook's ``[probes.NAME]`` tables, validated into the :class:`ProbeSpec` each probe runs by.

A table overrides a built-in probe (its ``expect``, ``timeout`` and, for ``torch-env``,
``import_torch``) or adds a custom one: a shell ``run`` and either ``json = true`` or
``capture = { field = "regex with one group" }``.
"""

from __future__ import annotations

import re
from typing import Any

from journal.probes import BUILTIN, DEFAULT_TIMEOUT_S, ProbeSpec
from journal.runbook.checker import NAME, NAME_RULE, _Checker, shown, suggest
from journal.userregex import UserRegex, compile_user

PROBE_KEYS = {"run", "json", "capture", "expect", "timeout", "import_torch", "description"}


def probe_specs(probes: dict[str, Any], check: _Checker) -> dict[str, ProbeSpec]:
    """The built-in probes, overridden or joined by the runbook's ``[probes.NAME]`` tables."""
    fail = check.fail
    specs = {name: ProbeSpec(name, script=script) for name, script in BUILTIN.items()}
    for name, table in probes.items():
        key = f"probes.{name}"
        if not NAME.match(name):
            raise fail(key, f"{shown(name)} is not a usable probe name ({NAME_RULE})")
        if not isinstance(table, dict):
            raise fail(key, 'expected a table with run = "..."')
        for option in table:
            if option not in PROBE_KEYS:
                raise fail(f"{key}.{option}", f"unknown key{suggest(option, sorted(PROBE_KEYS))}")
        timeout = check.seconds(table.get("timeout", DEFAULT_TIMEOUT_S), f"{key}.timeout")
        expect = table.get("expect", {})
        if not isinstance(expect, dict):
            raise fail(f"{key}.expect", 'expected a table of key = "spec"')
        if name in BUILTIN:
            specs[name] = _builtin(check, name, table, expect, timeout)
            continue
        run = table.get("run")
        if not isinstance(run, str) or not run.strip():
            raise fail(f"{key}.run", "a custom probe needs the shell command it runs")
        as_json = table.get("json", False)
        if not isinstance(as_json, bool):
            raise fail(f"{key}.json", "expected true or false")
        capture = table.get("capture", {})
        if not isinstance(capture, dict):
            raise fail(f"{key}.capture", 'expected a table of field = "regex"')
        if as_json == bool(capture):
            raise fail(key, 'give either json = true or capture = { field = "regex" }')
        patterns = {f: _capture(check, f"{key}.capture.{f}", p) for f, p in capture.items()}
        specs[name] = ProbeSpec(
            name, run=run, json=as_json, capture=patterns, expect=expect, timeout=timeout
        )
    return specs


def _builtin(
    check: _Checker, name: str, table: dict[str, Any], expect: dict[str, Any], timeout: float
) -> ProbeSpec:
    """A built-in probe as a table overrides it: its own script, the table's settings."""
    key = f"probes.{name}"
    for option in ("run", "json", "capture"):
        if option in table:
            raise check.fail(
                f"{key}.{option}",
                f"{name} is built in and runs its own script; "
                "only expect, timeout and import_torch apply",
            )
    args: tuple[str, ...] = ()
    if table.get("import_torch", False) is True:
        if name != "torch-env":
            raise check.fail(f"{key}.import_torch", "only torch-env takes it")
        args = ("--import-torch",)
    return ProbeSpec(name, script=BUILTIN[name], expect=expect, timeout=timeout, args=args)


def _capture(check: _Checker, key: str, pattern: Any) -> UserRegex:
    """A ``capture`` regex, compiled (see :mod:`journal.userregex`): valid, with exactly one
    group (the value captured)."""
    if not isinstance(pattern, str):
        raise check.fail(key, "expected a regex string")
    try:
        compiled = compile_user(pattern, re.M)
    except re.error as exc:
        raise check.fail(key, f"not a valid regex: {exc}") from None
    if compiled.groups != 1:
        raise check.fail(
            key,
            f"the regex needs exactly one group (it has {compiled.groups}): "
            "the group is the value captured",
        )
    return compiled
