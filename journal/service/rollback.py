"""`journal rollback`: bring a host's target env back to a package set the journal recorded.

The target is a recorded snapshot: after a run (``--to RUN``), after the latest run of a step
on each host (``--to STEP``), or before the latest attempt of a step there (``--to
before:STEP``, walking back over the failed tries of that step right before it, so that a
retried failure rolls back to before the first try). The plan is the difference between a
fresh snapshot of the host and that set: what to install at the exact version (local label
included: ``torch==2.10.0+cu128``), what to remove (never pip), and, for each package to
install, where to get it: the index options of the recorded install that brought that version
(newest first), the direct URL the snapshot recorded, then the host's default index. Every
source is checked on the host with a dry run before anything runs; a package no source
provides is bad input, named before anything is run or recorded. The rollback itself is an
ordinary recorded step run named ``rollback`` whose ``StepStarted.rollback`` names its target.
"""

from __future__ import annotations

import re
import shlex
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from journal.errors import BadInput
from journal.events import Event
from journal.pitfalls.commands import install_requests
from journal.probes.runner import CaptureSink
from journal.projections.packages import normalize
from journal.projections.stored import current_timeline
from journal.projections.timeline import StepRunView, Timeline
from journal.projections.unread import short
from journal.redact import MASK, Redactor
from journal.runbook import Host, Runbook, Step
from journal.service.checks import HostChecks
from journal.service.fleet import FleetRun, Schedule
from journal.service.runs import find_run, latest_attempt, latest_run, rollback_runs
from journal.service.steps import (
    StepRun,
    StepWatch,
    connect,
    new_run_id,
    on_hosts,
    run_step_fleet,
)
from journal.store import EventStore
from journal.transport import Transport, transport_for
from journal.versions import parse_version

if TYPE_CHECKING:
    from journal.notify import Notifier

#: The step name of every rollback run.
STEP = "rollback"
#: Never removed by a rollback, even when the target set lacks it: it is how pip rolls back.
KEEP = ("pip",)
#: Installers whose packages a rollback replaces as their own.
OWN = frozenset({"pip", "uv"})
#: The first pip with `pip install --dry-run`.
PIP_DRY_RUN = "22.2"
#: Seconds a planning command (uv lookup, a dry run) may take on a host.
PLAN_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Target:
    """The package set a host rolls back to: the snapshot of run ``run`` (step ``step``)
    taken ``phase`` it, named by ``to``."""

    host: str
    to: str
    run: str
    step: str
    phase: str
    started: str
    entries: dict[str, dict[str, Any]]
    #: the event the target run started at (findings of runs after it are undone with it)
    seq: int | None = None

    @property
    def packages(self) -> dict[str, str]:
        """Normalised name -> version."""
        return {name: str(e.get("version") or "") for name, e in sorted(self.entries.items())}

    def describe(self) -> str:
        """``the packages before install-torch (run 19c…, 2026-…)``."""
        return f"the packages {self.phase} {self.step} (run {self.run}, {self.started})"


@dataclass(frozen=True)
class Source:
    """Where a package is installed from: a recorded install's index options (``recorded``,
    ``run`` the run that brought the version), the snapshot's ``direct-url``, or the host's
    ``default`` index (no option: the host's pip or uv configuration decides)."""

    kind: str
    options: tuple[tuple[str, str], ...] = ()
    run: str | None = None
    url: str | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.kind, self.options, self.url)

    def args(self) -> list[str]:
        """The install options: ``--index-url URL``, ``--extra-index-url URL``, …"""
        return [word for kind, value in self.options for word in (f"--{kind}", value)]

    def describe(self) -> str:
        if self.kind == "direct-url":
            return f"its direct URL {self.url}"
        if self.kind == "default":
            return "the host's default index"
        shown = " ".join(shlex.quote(a) for a in self.args())
        return f"{shown} (as run {self.run} installed it)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "options": [[kind, value] for kind, value in self.options],
            "run": self.run,
            "url": self.url,
        }


@dataclass(frozen=True)
class Install:
    """A package to install at the target's exact version, from ``source``."""

    name: str
    display: str
    version: str
    current: str | None
    source: Source
    tried: tuple[Source, ...] = ()

    @property
    def pin(self) -> str:
        if self.source.kind == "direct-url":
            return f"{self.display} @ {self.source.url}"
        return f"{self.display}=={self.version}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": self.version,
            "current": self.current,
            "pin": self.pin,
            "source": self.source.to_dict(),
            "unavailable_from": [s.to_dict() for s in self.tried],
        }


@dataclass(frozen=True)
class HostPlan:
    """What a rollback does on one host: with which installer, what it installs (and from
    where), what it removes, what it keeps though the target lacks it, what stays."""

    host: str
    target: Target
    installer: str  # "uv" or "pip"
    uv: str | None
    python: str
    install: list[Install]
    remove: list[tuple[str, str]]
    kept: list[tuple[str, str]]
    unchanged: list[str]
    #: packages the rollback replaces or removes that another installer put there (conda,
    #: the system's package manager): (name, version, installer)
    foreign: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.install and not self.remove

    def groups(self) -> list[tuple[Source, list[Install]]]:
        """The installs by source, in the order their sources first come."""
        out: dict[tuple[Any, ...], tuple[Source, list[Install]]] = {}
        for item in self.install:
            out.setdefault(item.source.key, (item.source, []))[1].append(item)
        return list(out.values())

    def command(self) -> str:
        """The shell command of the rollback run."""
        py = shell_path(self.python)
        parts = []
        names = [shlex.quote(name) for name, _ in self.remove]
        if self.installer == "uv":
            assert self.uv is not None
            uv = shell_path(self.uv)
            if names:
                parts.append(f"{uv} pip uninstall --python {py} {' '.join(names)}")
            for source, items in self.groups():
                reinstall = [w for i in items for w in ("--reinstall-package", i.display)]
                words = [*reinstall, *(i.pin for i in items), *source.args()]
                quoted = " ".join(shlex.quote(w) for w in words)
                parts.append(f"{uv} pip install --python {py} --no-deps {quoted}")
        else:
            if names:
                parts.append(f"{py} -m pip uninstall -y {' '.join(names)}")
            for source, items in self.groups():
                words = [*(i.pin for i in items), *source.args()]
                quoted = " ".join(shlex.quote(w) for w in words)
                parts.append(f"{py} -m pip install --no-deps --force-reinstall {quoted}")
        if not parts:
            count = len(self.unchanged)
            return (
                f"echo 'journal rollback: the env already holds the target set ({count} "
                "packages): nothing to install or remove'"
            )
        return " && ".join(parts)

    def rollback_field(self) -> dict[str, Any]:
        """``StepStarted.rollback`` of its run."""
        target = self.target
        return {
            "to": target.to,
            "run": target.run,
            "phase": target.phase,
            "event": target.seq,
            "packages": target.packages,
        }

    def step(self, runbook: Runbook) -> Step:
        """The rollback's step: its command, snapshots, and the torch-env probe when the
        target set holds torch."""
        probes = (
            ["torch-env"]
            if "torch" in self.target.entries and "torch-env" in (runbook.probes)
            else []
        )
        return Step(
            STEP,
            self.command(),
            probes=probes,
            description=f"roll back to {self.target.describe()}",
        )

    def to_dict(self) -> dict[str, Any]:
        target = self.target
        return {
            "host": self.host,
            "target": {
                "to": target.to,
                "run": target.run,
                "step": target.step,
                "phase": target.phase,
                "started": target.started,
                "packages": target.packages,
            },
            "installer": self.installer,
            "uv": self.uv,
            "python": self.python,
            "install": [i.to_dict() for i in self.install],
            "remove": [{"name": n, "version": v} for n, v in self.remove],
            "kept": [{"name": n, "version": v, "why": KEPT_WHY} for n, v in self.kept],
            "unchanged": self.unchanged,
            "foreign": [{"name": n, "version": v, "installer": i} for n, v, i in self.foreign],
            "command": self.command(),
        }


KEPT_WHY = "never removed by a rollback: pip is how an env without uv rolls back"


def shell_path(path: str) -> str:
    """A path for the host's shell: as written when it is plain (so that ``~`` expands),
    else quoted."""
    if re.fullmatch(r"[\w./+@:~-]+", path):
        return path
    return shlex.quote(path)


# -- the target ---------------------------------------------------------------------------------


def targets(timeline: Timeline, runbook: Runbook, to: str, hosts: list[str]) -> list[Target]:
    """The target of each host: ``hosts`` (runbook names; empty: the run's host for RUN, the
    hosts where STEP ran for STEP and before:STEP). A host without such a run or snapshot is
    bad input naming it."""
    journal = runbook.name
    to = to.strip()
    if not to:
        raise BadInput("roll back to what? name a run, a step, or before:STEP")
    phase = "after"
    name = to
    if to.startswith("before:"):
        phase, name = "before", to[len("before:") :].strip()
        if not name:
            raise BadInput(f"{to!r} names no step: write before:STEP (before:install-torch)")
    steps = {run.step for run in timeline.step_runs()}
    if name in steps or name in runbook.plan:
        return [
            _step_target(timeline, runbook, to, name, phase, h)
            for h in _step_hosts(timeline, runbook, name, hosts, to)
        ]
    run = timeline.runs[find_run(journal, name, list(timeline.runs))]
    if hosts and run.host not in hosts:
        raise BadInput(
            f"run {run.run_id} ran on {run.host}, not on {', '.join(hosts)}: a run's snapshot "
            "is its own host's; roll another host back to a step (its latest run there)"
        )
    _reachable(runbook, run.host, to)
    return [_target(run, to, phase, runbook)]


def _reachable(runbook: Runbook, host: str, to: str) -> None:
    if host not in runbook.hosts:
        raise BadInput(
            f"{to}: host {host} is not in {runbook.path} (known only from an imported "
            f"transcript, it has no address): add [hosts.{host}] with its ssh and python to "
            "roll it back"
        )


def _step_hosts(
    timeline: Timeline, runbook: Runbook, step: str, hosts: list[str], to: str
) -> list[str]:
    if hosts:
        return hosts
    ran = {run.host for run in timeline.step_runs() if run.step == step and not run.imported}
    found = [name for name in runbook.hosts if name in ran]
    if not found:
        raise BadInput(
            f"{to}: {step} has no recorded run on any host of {runbook.path}, so there is no "
            "package set to roll back to; `journal log --step " + step + "` lists its runs"
        )
    return found


def _step_target(
    timeline: Timeline, runbook: Runbook, to: str, step: str, phase: str, host: str
) -> Target:
    _reachable(runbook, host, to)
    runs = rollback_runs(timeline.step_runs(), host)
    # before:STEP: before the first of the failed tries right before the latest (a retried
    # failure); STEP: its latest run
    index = latest_attempt(runs, step) if phase == "before" else latest_run(runs, step)
    if index is None:
        raise BadInput(
            f"{to}: {step} never ran on {host}, so there is no package set of it to roll {host} "
            "back to; name the hosts it ran on (`journal log --step " + step + "`)"
        )
    return _target(runs[index], to, phase, runbook)


def _target(run: StepRunView, to: str, phase: str, runbook: Runbook) -> Target:
    snapshot = run.snapshots.get(phase)
    if snapshot is None:
        raise BadInput(
            f"{to}: run {run.run_id} ({run.step} on {run.host}) has no package snapshot "
            f"{phase} it: {_no_snapshot(run, phase, runbook)}; roll back to another run or step"
        )
    entries = {normalize(k): dict(v) for k, v in snapshot.items() if isinstance(v, dict)}
    return Target(run.host, to, run.run_id, run.step, phase, run.started, entries, run.seq)


def _no_snapshot(run: StepRunView, phase: str, runbook: Runbook) -> str:
    """Why a run has no package snapshot ``phase`` it: the snapshot failed (the error it
    recorded), the step takes none, or the run ended before it."""
    failed = [p for p in run.probes if p.probe == "packages" and p.result is None]
    mine = [p for p in failed if p.phase == phase] or [p for p in failed if p.phase is None]
    if mine:
        return (
            f"the packages snapshot {phase} run {run.run_id} on {run.host} failed: "
            f"{short(mine[-1].error or 'no reason recorded')}"
        )
    step = next((s for s in runbook.steps if s.name == run.step), None)
    if not run.snapshots and step is not None and not step.snapshots:
        return "it took no snapshots (snapshots = false)"
    if run.imported:
        return "an imported command has no package snapshots"
    ended = f"the run {run.status}" + (f": {run.reason}" if run.reason else "")
    return f"its {phase} snapshot was never recorded ({ended})"


# -- the plan -----------------------------------------------------------------------------------


def _same(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    return a == b or parse_version(a) == parse_version(b)


def recorded_sources(timeline: Timeline, host: str, name: str, version: str) -> list[Source]:
    """The index options of the recorded installs on ``host`` that brought ``name`` at
    ``version``, newest first: a run whose after snapshot has it and whose before snapshot
    did not; an imported run (no snapshots) whose install pins it."""
    found: list[Source] = []
    seen: set[tuple[tuple[str, str], ...]] = set()
    for run in reversed(timeline.step_runs()):
        if run.host != host:
            continue  # an earlier rollback's install counts too: it brought what it installed
        requests = [r for r in install_requests(run.command) if r.tool in ("uv", "pip")]
        if not requests:
            continue
        before, after = run.snapshots.get("before"), run.snapshots.get("after")
        if before is not None and after is not None:
            now = _version_in(after, name)
            if now is None or not _same(now, version) or _same(_version_in(before, name), now):
                continue
            named = [r for r in requests if name in r.names()]
            requests = named or requests
        else:
            requests = [
                r
                for r in requests
                if any(q.key == name and q.pinned and _same(q.pinned, version) for q in r.packages)
            ]
        for request in requests:
            options = request.sources
            if not options or options in seen or any(MASK in value for _, value in options):
                continue
            seen.add(options)
            found.append(Source("recorded", options, run=run.run_id))
    return found


def _version_in(snapshot: Mapping[str, Any], name: str) -> str | None:
    entry = snapshot.get(name)
    if entry is None:
        entry = next((e for k, e in snapshot.items() if normalize(k) == name), None)
    return None if entry is None else str(entry.get("version") or "")


def sources_for(timeline: Timeline, target: Target, name: str) -> list[Source]:
    """Every source to try for one package of the target, in order."""
    entry = target.entries[name]
    version = str(entry.get("version") or "")
    found = recorded_sources(timeline, target.host, name, version)
    direct = entry.get("direct_url")
    if isinstance(direct, dict) and isinstance(direct.get("url"), str):
        found.append(Source("direct-url", url=direct["url"]))
    found.append(Source("default"))
    return found


@dataclass
class _Host:
    """A connected host being planned: runs short commands and reads what they print."""

    host: Host
    transport: Transport
    cancel: threading.Event = field(default_factory=threading.Event)

    def run(self, command: str) -> tuple[bool, str]:
        sink = CaptureSink()
        outcome = self.transport.probe(
            command,
            self.host.env,
            None,
            PLAN_TIMEOUT_S,
            sink,
            self.cancel,
            run_id=f"{new_run_id()}-rollback-plan",
        )
        out = bytes(sink.streams["stdout"]) + bytes(sink.streams["stderr"])
        return outcome.ok, out.decode("utf-8", "replace")


def _installer(side: _Host) -> tuple[str, str | None]:
    """("uv", its path) or ("pip", None): the runbook's ``uv``, else the PATH's, else pip."""
    host = side.host
    if host.uv is not None:
        ok, out = side.run(f"command -v {shell_path(host.uv)}")
        if not ok or not out.strip():
            raise BadInput(
                f"host {host.name}: its uv {host.uv!r} (the runbook's hosts.{host.name}.uv) "
                "is not there; fix the path, or remove the key to use the PATH's uv or pip"
            )
        return "uv", host.uv
    ok, out = side.run("command -v uv")
    lines = out.strip().splitlines()
    if ok and lines and lines[-1].startswith("/"):
        return "uv", lines[-1].strip()
    ok, out = side.run(f"{shell_path(host.python)} -m pip --version")
    if not ok:
        raise BadInput(
            f"host {host.name}: no uv on its PATH and no pip in {host.python} "
            f"({_last(out)}), so nothing can install the target set; give the host's uv "
            f'in the runbook (hosts.{host.name}.uv = "/path/to/uv") or install pip there'
        )
    found = re.search(r"\bpip (\S+) from\b", out)
    if found and parse_version(found.group(1)) < parse_version(PIP_DRY_RUN):
        raise BadInput(
            f"host {host.name}: its pip {found.group(1)} (in {host.python}) has no "
            f"--dry-run (pip {PIP_DRY_RUN} and later do), so the plan's sources cannot be "
            f"checked before anything runs; upgrade pip there or give the host's uv "
            f'(hosts.{host.name}.uv = "/path/to/uv")'
        )
    return "pip", None


def _last(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def _dry_run(side: _Host, installer: str, uv: str | None, items: list[Install]) -> tuple[bool, str]:
    """Whether the host's installer finds ``items`` where their source says, and what it said."""
    py = shell_path(side.host.python)
    source = items[0].source
    words = " ".join(shlex.quote(w) for w in [*(i.pin for i in items), *source.args()])
    if installer == "uv":
        command = f"{shell_path(uv or 'uv')} pip install --dry-run --no-deps --python {py} {words}"
    else:
        command = (
            f"{py} -m pip install --dry-run --no-deps --ignore-installed "
            f"--disable-pip-version-check {words}"
        )
    return side.run(command)


def _choose(
    side: _Host, installer: str, uv: str | None, wanted: list[tuple[Install, list[Source]]]
) -> list[Install]:
    """Each package with the first of its sources a dry run on the host finds it in: one dry
    run per source for its packages together, one per package where that fails."""
    chosen: dict[str, Install] = {}
    at = {item.name: 0 for item, _ in wanted}
    tried: dict[str, list[Source]] = {item.name: [] for item, _ in wanted}
    candidates = {item.name: sources for item, sources in wanted}
    base = {item.name: item for item, _ in wanted}
    said: dict[str, str] = {}  # what the last dry run that lacked each package said
    pending = list(base)
    while pending:
        batches: dict[tuple[Any, ...], list[Install]] = {}
        for name in pending:
            source = candidates[name][at[name]]
            item = Install(
                base[name].name, base[name].display, base[name].version, base[name].current, source
            )
            batches.setdefault(source.key, []).append(item)
        pending = []
        for items in batches.values():
            ok, out = _dry_run(side, installer, uv, items)
            found: list[Install] = []
            missing: list[Install] = []
            if ok:
                found = items
            elif len(items) == 1:
                missing, said[items[0].name] = items, out
            else:
                for item in items:
                    ok, out = _dry_run(side, installer, uv, [item])
                    (found if ok else missing).append(item)
                    said[item.name] = out
            for item in found:
                chosen[item.name] = Install(
                    item.name,
                    item.display,
                    item.version,
                    item.current,
                    item.source,
                    tuple(tried[item.name]),
                )
            for item in missing:
                tried[item.name].append(item.source)
                at[item.name] += 1
                if at[item.name] >= len(candidates[item.name]):
                    sources = "; ".join(s.describe() for s in tried[item.name])
                    raise BadInput(
                        f"host {side.host.name}: {item.display} {item.version} of the target "
                        f"set ({item.name} is {item.current or 'not installed'} now) is "
                        f"available from no source: tried {sources} (the last dry run said: "
                        f"{_last(said.get(item.name, ''))[:300]}). Nothing was run or "
                        "recorded; put its wheel back on one of them (or point the host's "
                        "default index, e.g. UV_INDEX_URL / PIP_INDEX_URL in its env, at one "
                        "that has it) and plan again"
                    )
                pending.append(item.name)
    return [chosen[item.name] for item, _ in wanted]


def plan_host(
    timeline: Timeline,
    runbook: Runbook,
    target: Target,
    host: Host,
    transport: Transport,
    cancel: threading.Event,
) -> HostPlan:
    """Snapshot ``host`` now (recorded nowhere), and plan its rollback to ``target``."""
    side = _Host(host, transport, cancel)
    checks = HostChecks(
        runbook,
        host,
        transport,
        host.env,
        Redactor.for_run(runbook.redact, host.env),
        lambda events: None,
        cancel,
    )
    current = checks.snapshot("probe", None, new_run_id())
    if current is None:
        raise BadInput(
            f"host {host.name}: its packages could not be read with {host.python} (the packages "
            f"probe failed: {checks.failure}), so no rollback can be planned; `journal run "
            f"probe packages --host {host.name}` records the failure to look at"
        )
    now = {normalize(k): v for k, v in current.items() if isinstance(v, dict)}
    installer, uv = _installer(side)
    wanted: list[tuple[Install, list[Source]]] = []
    unchanged: list[str] = []
    for name, entry in sorted(target.entries.items()):
        version = str(entry.get("version") or "")
        have = now.get(name)
        current_version = None if have is None else str(have.get("version") or "")
        if _same(current_version, version):
            unchanged.append(name)
            continue
        display = str(entry.get("name") or name)
        sources = sources_for(timeline, target, name)
        wanted.append((Install(name, display, version, current_version, sources[0]), sources))
    remove, kept = [], []
    for name, entry in sorted(now.items()):
        if name in target.entries:
            continue
        pair = (str(entry.get("name") or name), str(entry.get("version") or ""))
        (kept if name in KEEP else remove).append(pair)
    install = _choose(side, installer, uv, wanted) if wanted else []
    touched = [i.name for i in install] + [normalize(name) for name, _ in remove]
    foreign = [
        (str(now[n].get("name") or n), str(now[n].get("version") or ""), str(by))
        for n in sorted(touched)
        if n in now and (by := now[n].get("installer")) and str(by).lower() not in OWN
    ]
    return HostPlan(
        host.name, target, installer, uv, host.python, install, remove, kept, unchanged, foreign
    )


def target_hosts(store: EventStore, runbook: Runbook, to: str, hosts: list[Host]) -> list[str]:
    """The hosts ``to`` rolls back (bad input as :func:`targets` says), touching none."""
    timeline = current_timeline(store, runbook.name)
    return [t.host for t in targets(timeline, runbook, to, [h.name for h in hosts])]


def plan(
    store: EventStore,
    runbook: Runbook,
    to: str,
    hosts: list[Host],
    *,
    accept_new_host_key: bool = False,
    record: Callable[[list[Event]], None] | None = None,
) -> list[HostPlan]:
    """The rollback plan of every host (planned on all of them at once). Nothing is recorded
    but the host keys accepted on the way, handed to ``record`` (none for a dry run)."""
    timeline = current_timeline(store, runbook.name)
    found = targets(timeline, runbook, to, [h.name for h in hosts])
    by_host = {t.host: t for t in found}
    order = [runbook.hosts[t.host] for t in found]

    def work(host: Host, cancel: threading.Event) -> HostPlan:
        transport = transport_for(host, accept_new_host_key=accept_new_host_key)
        error = connect(transport, host, record or (lambda events: None))
        if error:
            raise BadInput(f"host {host.name}: {error}; no rollback was planned or run")
        try:
            return plan_host(timeline, runbook, by_host[host.name], host, transport, cancel)
        finally:
            transport.close()

    return on_hosts(order, work)


def run_rollback(
    store: EventStore,
    runbook: Runbook,
    plans: list[HostPlan],
    echo: StepWatch,
    *,
    accept_new_host_key: bool = False,
    schedule: Schedule | None = None,
    detach: bool = False,
    notifier: Notifier | None = None,
) -> FleetRun[StepRun]:
    """Run each host's rollback as a recorded step run, as ``schedule`` says; ``notifier``
    hears each run's end (a ``rollback``)."""
    steps = {p.host: (p.step(runbook), p.rollback_field()) for p in plans}
    hosts = [runbook.hosts[p.host] for p in plans]
    return run_step_fleet(
        store,
        runbook,
        steps[plans[0].host][0],
        hosts,
        echo,
        accept_new_host_key=accept_new_host_key,
        schedule=schedule,
        detach=detach,
        per_host=steps,
        notifier=notifier,
    )
