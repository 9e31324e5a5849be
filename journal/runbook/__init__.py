"""The runbook (``runbook.toml``): the hosts and their groups, the ordered steps of the plan,
what to redact. This package is the runbook's schema, all of it: this module reads the file
and its ``[journal]`` table into a :class:`Runbook`; each other table is read by a module of
its own: :mod:`journal.runbook.hosts` (``[hosts]``, ``[groups]``),
:mod:`journal.runbook.steps` (``[[steps]]``), :mod:`journal.runbook.probes`,
:mod:`journal.runbook.benchmarks` and :mod:`journal.runbook.notify`.

Every error names the file, the line where one can be found, and the key path, and is raised
as :class:`BadInput` (exit status 2). A runbook file is at most :data:`MAX_RUNBOOK_BYTES`.
"""

from __future__ import annotations

import gc
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from journal.benchmarks import BenchmarkSpec
from journal.errors import BadInput
from journal.probes import ProbeSpec
from journal.runbook.benchmarks import benchmark_specs
from journal.runbook.checker import (
    NAME,
    NAME_LENGTH,
    NAME_RULE,
    _Checker,
    shown,
    suggest,
    usable_name,
)
from journal.runbook.gates import GateSpec, gate_specs
from journal.runbook.hosts import Host, expand, group_specs, host_specs
from journal.runbook.notify import NotifySpec, notify_specs
from journal.runbook.probes import probe_specs
from journal.runbook.steps import Step, expect_specs, step_specs
from journal.runbook.template import TEMPLATE

__all__ = [
    "MAX_RUNBOOK_BYTES",
    "NAME",
    "NAME_LENGTH",
    "NAME_RULE",
    "TEMPLATE",
    "Host",
    "Runbook",
    "Step",
    "load",
    "parse",
    "suggest",
    "usable_name",
]

#: The largest runbook file read (32 MiB): a plan of 100,000 steps, each with its command,
#: env, probes, expectations and hosts, is 20 MB and is checked in seconds; a file past it is
#: refused before it is parsed, not found out by a command that hangs reading it.
MAX_RUNBOOK_BYTES = 32 * 1024 * 1024

TOP_KEYS = {"journal", "hosts", "steps", "probes", "benchmarks", "groups", "notify", "gates"}
JOURNAL_KEYS = {"name", "redact", "description", "base_url", "gate"}


@dataclass(frozen=True)
class Runbook:
    """A parsed, validated runbook."""

    path: Path
    name: str
    hosts: dict[str, Host]
    steps: list[Step]
    redact: list[str] = field(default_factory=list)
    probes: dict[str, ProbeSpec] = field(default_factory=dict)
    benchmarks: dict[str, BenchmarkSpec] = field(default_factory=dict)
    text: str = ""
    groups: dict[str, list[str]] = field(default_factory=dict)
    #: the ``[notify.NAME]`` webhooks (their URLs are among ``redact``)
    notify: dict[str, NotifySpec] = field(default_factory=dict)
    #: ``[journal] base_url``: where `journal serve` answers, for links to its run pages
    base_url: str | None = None
    #: the ``[gates.NAME]`` tables (:mod:`journal.runbook.gates`)
    gates: dict[str, GateSpec] = field(default_factory=dict)
    #: ``[journal] gate``: the gate a rolling plan passes each batch through unless told
    gate: str | None = None

    @property
    def plan(self) -> list[str]:
        return [s.name for s in self.steps]

    def step(self, name: str) -> Step:
        """The step called ``name``; an unknown name suggests the closest."""
        for step in self.steps:
            if step.name == name:
                return step
        raise BadInput(f"{self.path}: no step named {name!r}{suggest(name, self.plan)}")

    def benchmark(self, name: str) -> BenchmarkSpec:
        """The benchmark called ``name``; an unknown name suggests the closest."""
        if name in self.benchmarks:
            return self.benchmarks[name]
        known = list(self.benchmarks)
        if not known:
            raise BadInput(
                f"{self.path}: no benchmark named {name!r}: the runbook has no [benchmarks.NAME] "
                'table (run = "..." with parser = "sglang", or builtin = "matmul")'
            )
        raise BadInput(f"{self.path}: no benchmark named {name!r}{suggest(name, known)}")

    def gate_named(self, name: str) -> GateSpec:
        """The gate called ``name``; an unknown name suggests the closest."""
        if name in self.gates:
            return self.gates[name]
        if not self.gates:
            raise BadInput(
                f"{self.path}: no gate named {name!r}: the runbook has no [gates.NAME] table "
                '(e.g. [gates.fleet] with benchmarks = ["serving"] and tolerance = '
                '{ output_token_throughput = ">= -3%" })'
            )
        raise BadInput(f"{self.path}: no gate named {name!r}{suggest(name, list(self.gates))}")

    def host(self, name: str) -> Host:
        """The host called ``name``; an unknown name suggests the closest."""
        if name in self.hosts:
            return self.hosts[name]
        if name in self.groups:
            raise BadInput(
                f"{self.path}: {name!r} is a group of hosts, not a host: use --group {name}"
            )
        raise BadInput(f"{self.path}: no host named {name!r}{suggest(name, list(self.hosts))}")

    def group(self, name: str) -> list[Host]:
        """The hosts of group ``name``, in the group's order; an unknown name suggests one."""
        if name in self.groups:
            return [self.hosts[h] for h in self.groups[name]]
        if name in self.hosts:
            raise BadInput(f"{self.path}: {name!r} is a host, not a group: use --host {name}")
        if not self.groups:
            raise BadInput(
                f"{self.path}: no group named {name!r}: the runbook has no [groups] table "
                f'(e.g. [groups] with gpu = ["gpu-1", "gpu-2"])'
            )
        raise BadInput(f"{self.path}: no group named {name!r}{suggest(name, list(self.groups))}")

    def chosen(self, hosts: list[str], groups: list[str], all_hosts: bool = False) -> list[Host]:
        """The hosts named with ``--group`` (each group in its order) then ``--host``, each
        once; empty when neither was given. ``--all-hosts`` with either is bad input."""
        if all_hosts and (hosts or groups):
            given = " and ".join(o for o, v in (("--host", hosts), ("--group", groups)) if v)
            raise BadInput(
                f"--all-hosts runs on every host of the runbook; it cannot be combined with "
                f"{given}: drop one"
            )
        found = [h for g in dict.fromkeys(groups) for h in self.group(g)]
        found += [self.host(h) for h in dict.fromkeys(hosts)]
        return list({h.name: h for h in found}.values())

    def hosts_for(
        self,
        step: Step,
        chosen: list[str],
        all_hosts: bool,
        groups: list[str] | None = None,
    ) -> list[Host]:
        """The hosts a step runs on: those named with --group and --host, else the step's
        (its groups expanded), else all."""
        named = self.chosen(chosen, groups or [], all_hosts)
        if named:
            return named
        if step.hosts and not all_hosts:
            return [self.hosts[h] for h in step.hosts]
        return list(self.hosts.values())


def load(path: str | Path) -> Runbook:
    """Read and validate a runbook file."""
    path = Path(path)
    try:
        with path.open("rb") as file:
            # one byte past the limit tells a file too big (a FIFO or /dev/zero too)
            raw = file.read(MAX_RUNBOOK_BYTES + 1)
    except FileNotFoundError:
        raise BadInput(
            f"{path}: no runbook there; write one with `journal init` or name one with --runbook"
        ) from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read the runbook: {exc.strerror}") from None
    if len(raw) > MAX_RUNBOOK_BYTES:
        raise BadInput(
            f"{path}: the runbook is larger than {MAX_RUNBOOK_BYTES // 2**20} MiB, the most "
            "journal reads (a plan of 100,000 steps is about 20 MB): nothing was read from "
            "it; split the plan into runbooks of their own (--runbook FILE, each with its "
            "journal name), or move long scripts into files the steps run"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise BadInput(
            f"{path}, line {line}: the runbook is not UTF-8 text (byte {exc.start})"
        ) from None
    return parse(text, path)


def parse(text: str, path: Path) -> Runbook:
    """Validate runbook text; ``path`` is only used in messages."""
    # Reading makes a tree of small dicts, lists and strings and no cycles: the collector's
    # passes over the growing heap find nothing and cost a sixth of the time of a big plan.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _parse(text, path)
    except RecursionError:
        # tomllib (and the checks after it) recurse once per level of arrays or tables
        # inside each other: a few hundred levels exhaust Python's stack
        raise BadInput(
            f"{path}: the runbook nests too deeply (arrays or tables inside each other, "
            "hundreds of levels down) to be read; no runbook needs that: flatten it"
        ) from None
    finally:
        if collecting:
            gc.enable()


def _parse(text: str, path: Path) -> Runbook:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = re.search(r"\(at line (\d+), column (\d+)\)", message)
        if found:
            message = message[: found.start()].strip()
            raise BadInput(
                f"{path}, line {found.group(1)}, column {found.group(2)}: not valid TOML: {message}"
            ) from None
        raise BadInput(f"{path}: not valid TOML: {message}") from None
    check = _Checker(path, text)
    check.known_keys(data, TOP_KEYS, "")

    if "journal" not in data:
        raise check.fail("journal", "missing: the runbook needs a [journal] table with a name")
    journal = check.table(data["journal"], "journal")
    check.known_keys(journal, JOURNAL_KEYS, "journal")
    if "name" not in journal:
        raise check.fail("journal.name", 'missing: give the journal a name (name = "...")')
    name = check.name(journal["name"], "journal.name")
    redact = check.strings(journal.get("redact", []), "journal.redact")
    for index, value in enumerate(redact):
        if not value.strip():
            raise check.fail(
                f"journal.redact[{index}]",
                f"{value!r} is blank: an empty value masks nothing (and blanks would mask "
                'every space): list each secret itself, e.g. redact = ["a-literal-secret"]',
            )

    hosts = host_specs(check, check.table(data.get("hosts", {}), "hosts"))
    groups = group_specs(check, check.table(data.get("groups", {}), "groups"), hosts)
    steps = step_specs(check, data.get("steps", []), hosts, groups)
    step_names = {step.name for step in steps}

    probes = probe_specs(check.table(data.get("probes", {}), "probes"), check)
    for probe_name, spec in probes.items():
        expect_specs(check, spec.expect, f"probes.{probe_name}.expect")
    for index, step in enumerate(steps):
        for probe in step.probes:
            if probe not in probes:
                raise check.fail(
                    f"steps[{index}].probes",
                    f"no probe named {probe!r}{suggest(probe, list(probes))}",
                )
    benchmarks = benchmark_specs(
        check.table(data.get("benchmarks", {}), "benchmarks"), [*hosts, *groups], check
    )
    benchmarks = {
        n: replace(b, hosts=expand(b.hosts, groups)) if b.hosts else b
        for n, b in benchmarks.items()
    }
    for bench in benchmarks:
        if bench in step_names:
            raise check.fail(
                f"benchmarks.{bench}",
                f"a step is also named {bench!r}: give the benchmark its own name, so the "
                "timeline and `journal status` can tell them apart",
            )
    notify = notify_specs(check.table(data.get("notify", {}), "notify"), list(hosts), groups, check)
    # a webhook's URL is a secret: masked in every event, as the values of `redact` are
    redact = [*redact, *(secret for spec in notify.values() for secret in spec.secrets())]
    base_url = journal.get("base_url")
    if base_url is not None:
        base_url = _base_url(check, base_url)
    gates = gate_specs(
        check,
        check.table(data.get("gates", {}), "gates"),
        list(hosts),
        list(benchmarks),
        list(probes),
        list(groups),
    )
    gate = journal.get("gate")
    if gate is not None:
        gate = check.string(gate, "journal.gate")
        if gate not in gates:
            raise check.fail(
                "journal.gate",
                f"no gate named {gate!r}{suggest(gate, list(gates))}"
                if gates
                else f"no gate named {gate!r}: the runbook has no [gates.NAME] table",
            )
    # Last, so that a check that knows the key says why first (an env value, a name). TOML's
    # text holds no NUL byte: a NUL comes from an escape, so without one none is there.
    if "\\u0000" in text or "\\U00000000" in text:
        _no_nul(check, data, "")
    return Runbook(
        path,
        name,
        hosts,
        steps,
        redact,
        probes,
        benchmarks,
        text,
        groups,
        notify,
        base_url,
        gates,
        gate,
    )


def _no_nul(check: _Checker, value: Any, key: str) -> None:
    """BadInput naming the first key or string holding a NUL character (``\\u0000``): a shell
    ends a command, an argument or a path at it, so what ran would not be what was written."""
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for name, item in items:
        where = f"{key}[{name}]" if isinstance(name, int) else f"{key}.{name}" if key else name
        if isinstance(name, str) and "\0" in name:
            raise check.fail(
                key or where, f"the key {name!r} holds a NUL character (\\u0000): drop it"
            )
        if isinstance(item, str):
            if "\0" in item:
                raise check.fail(
                    where,
                    f"{shown(item)} holds a NUL character (\\u0000), which no command, "
                    "argument or path can hold (a shell stops reading at it): drop it",
                )
        elif isinstance(item, dict | list):
            _no_nul(check, item, where)


def _base_url(check: _Checker, value: Any) -> str:
    """``[journal] base_url``: an http(s) URL of the web UI, without its trailing slash."""
    from urllib.parse import urlsplit

    url = check.string(value, "journal.base_url").strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise check.fail(
            "journal.base_url",
            f"{url!r} is not an http(s) URL of the web UI (such as http://gpu-box:8000, where "
            "`journal serve` answers)",
        )
    return url.rstrip("/")
