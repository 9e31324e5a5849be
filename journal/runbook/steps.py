"""The runbook's plan: the ``[[steps]]`` array, validated into the ordered :class:`Step` list
(each name once, each host or group it names known), and the check that every expectation
(a step's or a probe's ``expect``) parses now, not halfway through an upgrade."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from journal.runbook.checker import _Checker, _kind, suggest
from journal.runbook.hosts import Host, expand

STEP_KEYS = {
    "name",
    "run",
    "env",
    "cwd",
    "timeout",
    "probes",
    "expect",
    "hosts",
    "description",
    "snapshots",
    "detach",
}


@dataclass(frozen=True)
class Step:
    """One step of the plan: a shell command run on each of its hosts."""

    name: str
    run: str
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout: float | None = None
    probes: list[str] = field(default_factory=list)
    expect: dict[str, Any] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    snapshots: bool = True
    description: str = ""
    #: Ctrl-C, SIGTERM or SIGHUP leave the command running on its host (to be reattached)
    #: instead of stopping it
    detach: bool = False


def step_specs(
    check: _Checker, value: Any, hosts: dict[str, Host], groups: dict[str, list[str]]
) -> list[Step]:
    """The ``[[steps]]`` array, in order: each step named once."""
    if not isinstance(value, list):
        raise check.fail("steps", "steps are an array of tables: write [[steps]], not [steps]")
    steps: list[Step] = []
    step_names: set[str] = set()  # looked up, not scanned: the check stays linear in steps
    for index, spec in enumerate(value):
        step = _step(check, f"steps[{index}]", spec, hosts, groups)
        if step.name in step_names:
            raise check.fail(f"steps[{index}].name", f"a step named {step.name!r} comes earlier")
        step_names.add(step.name)
        steps.append(step)
    return steps


def expect_specs(check: _Checker, expect: dict[str, Any], key: str) -> None:
    """Every expectation must parse now, not fail halfway through an upgrade. An expectation
    is parsed from its key and text alone, so one that parsed is not parsed again when
    another step gives it too (a plan's steps repeat theirs)."""
    from journal.expect import validate

    fresh = {
        k: v
        for k, v in expect.items()
        if not isinstance(v, str | int | float) or (k, v) not in check.expectations
    }
    validate(fresh, key, check.fail)
    check.expectations.update((k, v) for k, v in fresh.items() if isinstance(v, str | int | float))


def _step(
    check: _Checker, key: str, spec: Any, hosts: dict[str, Host], groups: dict[str, list[str]]
) -> Step:
    spec = check.table(spec, key)
    check.known_keys(spec, STEP_KEYS, key)
    if "name" not in spec:
        raise check.fail(f"{key}.name", 'missing: every step needs name = "..."')
    name = check.name(spec["name"], f"{key}.name")
    if "run" not in spec:
        raise check.fail(f"{key}.run", f"missing: step {name!r} needs the shell command it runs")
    run = check.string(spec["run"], f"{key}.run")
    env = check.env(spec.get("env", {}), f"{key}.env")
    cwd = spec.get("cwd")
    if cwd is not None:
        cwd = check.string(cwd, f"{key}.cwd")
    timeout = spec.get("timeout")
    if timeout is not None:
        timeout = check.seconds(timeout, f"{key}.timeout")
    probes = check.strings(spec.get("probes", []), f"{key}.probes")
    expect = check.table(spec.get("expect", {}), f"{key}.expect")
    expect_specs(check, expect, f"{key}.expect")
    step_hosts = check.hosts(spec["hosts"], f"{key}.hosts") if "hosts" in spec else []
    for host in step_hosts:
        if host not in hosts and host not in groups:
            known = [*hosts, *groups]
            raise check.fail(
                f"{key}.hosts", f"no host or group named {host!r}{suggest(host, known)}"
            )
    step_hosts = expand(step_hosts, groups)
    snapshots = spec.get("snapshots", True)
    if not isinstance(snapshots, bool):
        raise check.fail(f"{key}.snapshots", f"expected true or false, got {_kind(snapshots)}")
    description = check.string(spec.get("description", ""), f"{key}.description", empty=True)
    detach = spec.get("detach", False)
    if not isinstance(detach, bool):
        raise check.fail(f"{key}.detach", f"expected true or false, got {_kind(detach)}")
    return Step(
        name, run, env, cwd, timeout, probes, expect, step_hosts, snapshots, description, detach
    )
