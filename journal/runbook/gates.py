"""The runbook's ``[gates.NAME]`` tables: what each batch of a rolling plan must prove on each
of its hosts before the next batch starts (`journal run plan --rolling N --gate NAME`), and the
commands that take a batch out of service and back around it.

A gate checks, after the batch ran the plan:

- ``probe`` (default ``torch-env``; ``""``: none): run on every host of the batch, with its
  expectations; the stack it reads (torch and its variant, CUDA, NCCL, the driver) must agree
  across the batch and with the hosts the rollout already passed;
- ``benchmarks``: the runbook's benchmarks run on every host of the batch, each figure named in
  ``tolerance`` judged against that host's own baseline (its latest figures of the same
  benchmark and labels recorded before the rollout began) by the one verdict on figures, the
  tolerance standing for its noise threshold: ``">= -5%"`` (higher is better: a fall of more
  than 5% fails), ``"<= +10%"`` (lower is better: a rise of more than 10% fails); repeated
  samples whose ranges overlap the baseline's never fail;
- ``health``: a command run on every host of the batch (``dcgmi diag -r 1``), recorded; a
  non-zero exit fails, and `nvidia-smi -q`'s output is read (:mod:`journal.reading.health`).

``before_batch`` / ``after_batch`` run on ``hooks_host`` (a host of the runbook; ``local``, the
default: the machine journal runs on) before the batch's plan and after its gate passed, with
``{hosts}`` replaced by the batch's hosts (comma-separated, shell-quoted) and ``{rollout}`` by
the rollout's id; both are recorded step runs (``before-batch``, ``after-batch``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from journal.runbook.checker import _Checker, shown, suggest

GATE_KEYS = {
    "groups",
    "probe",
    "benchmarks",
    "tolerance",
    "health",
    "before_batch",
    "after_batch",
    "hooks_host",
    "description",
}

#: ``>= -5%``, ``<= +10%``, ``>=-3 %``: a floor (higher is better) or a ceiling (lower is better).
_TOLERANCE = re.compile(r"^\s*(>=|<=)\s*([+-]?\d+(?:\.\d+)?)\s*%\s*$")


@dataclass(frozen=True)
class Tolerance:
    """How far a figure may move from its host's baseline the wrong way: ``direction`` is the
    way that is better (``higher`` for a floor ``>=``, ``lower`` for a ceiling ``<=``),
    ``percent`` how far (in percent of the baseline's median) it may move the other way."""

    metric: str
    direction: str
    percent: float

    @property
    def text(self) -> str:
        return f"{'>=' if self.direction == 'higher' else '<='} {self.signed}"

    @property
    def signed(self) -> str:
        sign = "-" if self.direction == "higher" else "+"
        return f"{sign}{self.percent:g}%"


#: The keys of a group's own hooks (``[gates.NAME.groups.GROUP]``).
GROUP_HOOK_KEYS = {"before_batch", "after_batch", "hooks_host"}


@dataclass(frozen=True)
class Hooks:
    """The commands around a batch, and where they run: a gate's own, or a group's."""

    before_batch: str | None = None
    after_batch: str | None = None
    hooks_host: str = "local"


@dataclass(frozen=True)
class GateSpec:
    """A ``[gates.NAME]`` table, checked."""

    name: str
    probe: str | None = "torch-env"
    benchmarks: tuple[str, ...] = ()
    tolerance: dict[str, Tolerance] = field(default_factory=dict)
    health: str | None = None
    before_batch: str | None = None
    after_batch: str | None = None
    hooks_host: str = "local"
    description: str = ""
    #: per ``[groups]`` entry, its own hooks (a site's racks under two schedulers): a batch's
    #: hosts of that group get them, the others the gate's own
    groups: dict[str, Hooks] = field(default_factory=dict)

    def hooks_for(
        self, batch: list[str], members: dict[str, list[str]]
    ) -> list[tuple[Hooks, list[str]]]:
        """The hooks that take ``batch`` out and back, each with the batch's hosts it takes:
        each group's own (in the gate's order), then the gate's for the hosts of no such group."""
        out, covered = [], set()
        for group, hooks in self.groups.items():
            hosts = [h for h in batch if h in members.get(group, []) and h not in covered]
            if hosts:
                out.append((hooks, hosts))
                covered.update(hosts)
        rest = [h for h in batch if h not in covered]
        if rest and (self.before_batch or self.after_batch):
            out.append((Hooks(self.before_batch, self.after_batch, self.hooks_host), rest))
        return out


def gate_specs(
    check: _Checker,
    tables: dict[str, Any],
    hosts: list[str],
    benchmarks: list[str],
    probes: list[str],
    groups: list[str] | None = None,
) -> dict[str, GateSpec]:
    """Every ``[gates.NAME]`` table, checked against the runbook's hosts, benchmarks and
    probes (``torch-env`` and ``packages`` are built in)."""
    found: dict[str, GateSpec] = {}
    for name, key, table in check.named_tables(tables, "gates", GATE_KEYS):
        probe: str | None = check.string(
            table.get("probe", "torch-env"), f"{key}.probe", empty=True
        )
        known_probes = ["torch-env", "packages", *probes]
        if probe and probe not in known_probes:
            raise check.fail(
                f"{key}.probe", f"no probe named {probe!r}{suggest(probe, known_probes)}"
            )
        benches = check.strings(table.get("benchmarks", []), f"{key}.benchmarks")
        for bench in benches:
            if bench not in benchmarks:
                raise check.fail(
                    f"{key}.benchmarks",
                    f"no benchmark named {bench!r}{suggest(bench, benchmarks)}"
                    if benchmarks
                    else f"no benchmark named {bench!r}: the runbook has no [benchmarks.NAME]",
                )
        tolerance = _tolerances(check, table.get("tolerance", {}), f"{key}.tolerance")
        if tolerance and not benches:
            raise check.fail(
                f"{key}.tolerance",
                "a tolerance judges the figures of the gate's benchmarks, and it has none: "
                'name them (benchmarks = ["serving"])',
            )
        if benches and not tolerance:
            raise check.fail(
                f"{key}.benchmarks",
                "the gate runs benchmarks but judges no figure of them: give a tolerance per "
                'figure (tolerance = { output_token_throughput = ">= -3%" })',
            )
        commands = {}
        for what in ("health", "before_batch", "after_batch"):
            value = table.get(what)
            commands[what] = check.string(value, f"{key}.{what}").strip() if value else None
        hooks_host = _hooks_host(check, table, f"{key}.hooks_host", hosts)
        own = {}
        for group, where, sub in check.named_tables(
            check.table(table.get("groups", {}), f"{key}.groups"), f"{key}.groups", GROUP_HOOK_KEYS
        ):
            if group not in (groups or []):
                raise check.fail(
                    where,
                    f"no group named {group!r}{suggest(group, groups or [])}: a group's hooks "
                    "are for a [groups] entry of the runbook",
                )
            said = {w: check.string(sub[w], f"{where}.{w}").strip() if sub.get(w) else None
                    for w in ("before_batch", "after_batch")}  # fmt: skip
            own[group] = Hooks(
                said["before_batch"],
                said["after_batch"],
                _hooks_host(check, sub, f"{where}.hooks_host", hosts),
            )
        description = check.string(table.get("description", ""), f"{key}.description", empty=True)
        found[name] = GateSpec(
            name,
            probe or None,
            tuple(benches),
            tolerance,
            commands["health"],
            commands["before_batch"],
            commands["after_batch"],
            hooks_host,
            description,
            own,
        )
    return found


def _hooks_host(check: _Checker, table: dict[str, Any], key: str, hosts: list[str]) -> str:
    """Where hooks run: a host of the runbook, or ``local`` (the default)."""
    name = check.string(table.get("hooks_host", "local"), key)
    if name != "local" and name not in hosts:
        raise check.fail(
            key,
            f"no host named {name!r}{suggest(name, hosts)} (or local: the machine journal runs on)",
        )
    return name


def _tolerances(check: _Checker, value: Any, key: str) -> dict[str, Tolerance]:
    table = check.table(value, key)
    found = {}
    for metric, text in table.items():
        where = f"{key}.{metric}"
        raw = check.string(text, where)
        match = _TOLERANCE.match(raw)
        if match is None:
            raise check.fail(
                where,
                f'{shown(raw)} is not a tolerance: write ">= -5%" (higher is better: a fall '
                'of more than 5% fails) or "<= +10%" (lower is better: a rise of more than '
                "10% fails)",
            )
        op, number = match.group(1), float(match.group(2))
        if (op == ">=" and number > 0) or (op == "<=" and number < 0):
            raise check.fail(
                where,
                f"{shown(raw)} asks the figure to move {'up' if op == '>=' else 'down'} by "
                f"{abs(number):g}% at least: a gate holds a figure near its baseline; write "
                f'"{op} {"-" if op == ">=" else "+"}{abs(number):g}%"',
            )
        found[metric] = Tolerance(metric, "higher" if op == ">=" else "lower", abs(number))
    return found
