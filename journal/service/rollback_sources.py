"""Planning a host's rollback (:func:`plan_host`): a fresh snapshot of the host, its difference
from the target set, and for each package to install where to get it: the index options of the
recorded install that brought that version (newest first), the direct URL the snapshot recorded,
then the host's default index. Every source is checked on the host with a dry run before
anything runs; a package no source provides is bad input, named before anything is run or
recorded."""

from __future__ import annotations

import re
import shlex
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from journal.errors import BadInput
from journal.probes.runner import CaptureSink
from journal.projections.packages import normalize
from journal.projections.timeline import StepRunView, Timeline
from journal.reading.commands import install_requests
from journal.redact import MASK, Redactor
from journal.runbook import Host, Runbook
from journal.runs import new_run_id
from journal.service.checks import HostChecks
from journal.service.rollback_plan import KEEP, HostPlan, Install, Source, shell_path
from journal.service.rollback_target import Target
from journal.transport import Transport
from journal.versions import parse_version

#: Installers whose packages a rollback replaces as their own.
OWN = frozenset({"pip", "uv"})
#: The first pip with `pip install --dry-run`.
PIP_DRY_RUN = "22.2"
#: Seconds a planning command (uv lookup, a dry run) may take on a host.
PLAN_TIMEOUT_S = 300.0


def _same(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a == b
    return a == b or parse_version(a) == parse_version(b)


def installs(run: StepRunView) -> bool:
    """Whether a run's command installs with uv or pip (a source a rollback may reuse)."""
    return any(r.tool in ("uv", "pip") for r in install_requests(run.command))


@dataclass(frozen=True, slots=True)
class Installed:
    """A recorded uv or pip install on a host, as a rollback looks for sources in it: its
    command and, where both package sets were recorded, what it brought (normalised name ->
    version: those whose version its after set changed)."""

    run: str
    command: str
    brought: Mapping[str, str] | None


class Installs:
    """The recorded installs of the hosts planned on, each host's in timeline order, kept
    small (:class:`Installed`, repeated commands held once): a fleet's year of installs is
    added a page at a time and costs what each brought, not its package sets."""

    def __init__(self) -> None:
        self._by_host: dict[str, list[Installed]] = {}
        self._commands: dict[str, str] = {}

    @classmethod
    def of(cls, timeline: Timeline) -> Installs:
        found = cls()
        for run in timeline.step_runs():
            found.add(run)
        return found

    def add(self, run: StepRunView) -> None:
        """``run``, where its command installs with uv or pip (an earlier rollback's too: it
        brought what it installed)."""
        if not installs(run):
            return
        before, after = run.snapshots.get("before"), run.snapshots.get("after")
        brought = None
        if before is not None and after is not None:
            brought = {}
            for key, entry in after.items():
                if not isinstance(entry, dict):
                    continue
                name, now = normalize(key), str(entry.get("version") or "")
                if not _same(_version_in(before, name), now):
                    brought[name] = now
        command = self._commands.setdefault(run.command, run.command)
        self._by_host.setdefault(run.host, []).append(Installed(run.run_id, command, brought))

    def newest_first(self, host: str) -> list[Installed]:
        return self._by_host.get(host, [])[::-1]


def recorded_sources(installs: Installs, host: str, name: str, version: str) -> list[Source]:
    """The index options of the recorded installs on ``host`` that brought ``name`` at
    ``version``, newest first: a run whose after snapshot has it and whose before snapshot
    did not; an imported run (no snapshots) whose install pins it."""
    found: list[Source] = []
    seen: set[tuple[tuple[str, str], ...]] = set()
    for run in installs.newest_first(host):
        requests = [r for r in install_requests(run.command) if r.tool in ("uv", "pip")]
        if run.brought is not None:
            now = run.brought.get(name)
            if now is None or not _same(now, version):
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
            found.append(Source("recorded", options, run=run.run))
    return found


def _version_in(snapshot: Mapping[str, Any], name: str) -> str | None:
    entry = snapshot.get(name)
    if entry is None:
        entry = next((e for k, e in snapshot.items() if normalize(k) == name), None)
    return None if entry is None else str(entry.get("version") or "")


def sources_for(installs: Installs, target: Target, name: str) -> list[Source]:
    """Every source to try for one package of the target, in order."""
    entry = target.entries[name]
    version = str(entry.get("version") or "")
    found = recorded_sources(installs, target.host, name, version)
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
    installs: Installs,
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
        sources = sources_for(installs, target, name)
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
