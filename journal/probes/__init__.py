"""Probes: small programs run on a host after a step to record what is really there.

Built-in probes are Python scripts under ``journal/probes/scripts/`` shipped to the host and
run by the host's *target* python (the env being upgraded): ``packages`` and ``torch-env``.
A runbook adds its own as ``[probes.NAME]`` with a shell ``run`` and either ``json = true``
(the command prints one JSON object) or ``capture = { field = "regex with one group" }``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from journal.errors import BadInput

#: name -> (script file, extra arguments)
BUILTIN: dict[str, str] = {"packages": "packages.py", "torch-env": "torch_env.py"}
PROBE_KEYS = {"run", "json", "capture", "expect", "timeout", "import_torch", "description"}
DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class ProbeSpec:
    """How to run one probe and read its result."""

    name: str
    script: str | None = None
    run: str | None = None
    json: bool = False
    capture: dict[str, re.Pattern[str]] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT_S
    args: tuple[str, ...] = ()

    @property
    def builtin(self) -> bool:
        return self.script is not None

    def command(self, python: str) -> str:
        """The shell command that runs this probe on a host whose target python is ``python``."""
        import shlex

        if self.script is None:
            assert self.run is not None
            return self.run
        source = resources.files("journal.probes.scripts").joinpath(self.script).read_text()
        # The python path stays unquoted so that ~ expands on the host.
        return " ".join([python, "-c", shlex.quote(source), *map(shlex.quote, self.args)])


Fail = Callable[[str, str], Exception]


def _plain_fail(key: str, message: str) -> Exception:
    return BadInput(f"{key}: {message}")


def specs_from_runbook(probes: dict[str, Any], fail: Fail = _plain_fail) -> dict[str, ProbeSpec]:
    """The built-in probes, overridden or joined by the runbook's ``[probes.NAME]`` tables.

    ``fail(key_path, message)`` makes the error to raise (the runbook adds file and line).
    """
    specs = {name: ProbeSpec(name, script=script) for name, script in BUILTIN.items()}
    for name, table in probes.items():
        key = f"probes.{name}"
        if not isinstance(table, dict):
            raise fail(key, 'expected a table with run = "..."')
        for option in table:
            if option not in PROBE_KEYS:
                from journal.runbook import suggest

                raise fail(f"{key}.{option}", f"unknown key{suggest(option, sorted(PROBE_KEYS))}")
        timeout = table.get("timeout", DEFAULT_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise fail(f"{key}.timeout", "expected a number of seconds above 0")
        expect = table.get("expect", {})
        if not isinstance(expect, dict):
            raise fail(f"{key}.expect", 'expected a table of key = "spec"')
        if name in BUILTIN:
            for option in ("run", "json", "capture"):
                if option in table:
                    raise fail(
                        f"{key}.{option}",
                        f"{name} is built in and runs its own script; "
                        "only expect, timeout and import_torch apply",
                    )
            args: tuple[str, ...] = ()
            if table.get("import_torch", False) is True:
                if name != "torch-env":
                    raise fail(f"{key}.import_torch", "only torch-env takes it")
                args = ("--import-torch",)
            specs[name] = ProbeSpec(
                name, script=BUILTIN[name], expect=expect, timeout=float(timeout), args=args
            )
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
        patterns = {}
        for field_name, pattern in capture.items():
            if not isinstance(pattern, str):
                raise fail(f"{key}.capture.{field_name}", "expected a regex string")
            try:
                compiled = re.compile(pattern, re.M)
            except re.error as exc:
                raise fail(f"{key}.capture.{field_name}", f"not a valid regex: {exc}") from None
            if compiled.groups != 1:
                raise fail(
                    f"{key}.capture.{field_name}",
                    f"the regex needs exactly one group (it has {compiled.groups}): "
                    "the group is the value captured",
                )
            patterns[field_name] = compiled
        specs[name] = ProbeSpec(
            name, run=run, json=as_json, capture=patterns, expect=expect, timeout=float(timeout)
        )
    return specs
