"""`journal rollback`: bring a host's target env back to a package set the journal recorded.

The target is a recorded snapshot: after a run (``--to RUN``), after the latest run of a step on
each host (``--to STEP``), or before the latest attempt of a step there (``--to before:STEP``,
walking back over the failed tries of that step right before it, so that a retried failure rolls
back to before the first try; :mod:`journal.service.rollback_target`). The plan
(:mod:`journal.service.rollback_plan`) is the difference between a fresh snapshot of the host and
that set: what to install at the exact version (local label included: ``torch==2.10.0+cu128``), what
to remove (never pip), and, for each package to install, where to get it: the index options of the
recorded install that brought that version (newest first), the direct URL the snapshot recorded,
then the host's default index. Every source is checked on the host with a dry run before anything
runs; a package no source provides is bad input, named before anything is run or recorded
(:mod:`journal.service.rollback_sources`). The rollback itself is an ordinary recorded step run
named ``rollback`` whose ``StepStarted.rollback`` names its target.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from journal.errors import BadInput
from journal.events import Event
from journal.projections.timeline import StepRunView, Timeline
from journal.runbook import Host, Runbook
from journal.runs import StepRun
from journal.service.fleet import FleetRun, Schedule
from journal.service.rollback_plan import HostPlan
from journal.service.rollback_sources import Installs, installs, plan_host
from journal.service.rollback_target import Target, targets
from journal.service.runs import LatestOf
from journal.service.steps import StepWatch, connect, on_hosts, run_step_fleet
from journal.store import EventStore
from journal.transport import transport_for

if TYPE_CHECKING:
    from journal.notify import Notifier

#: Install runs read whole at a time while planning (each kept as what it brought).
INSTALLS_PAGE = 200


@dataclass
class Planned:
    """What planning a rollback reads (:func:`_planned`): a timeline of the runs the hosts
    roll back to, every step the journal ran, for STEP and before:STEP the run each host
    rolls back to, and the hosts' recorded installs."""

    timeline: Timeline
    steps: set[str]
    chosen: dict[str, StepRunView | None] | None
    installs: Installs

    def targets(self, runbook: Runbook, to: str, hosts: list[Host]) -> list[Target]:
        names = [h.name for h in hosts]
        return targets(self.timeline, runbook, to, names, self.steps, self.chosen)


def _planned(store: EventStore, runbook: Runbook, to: str, hosts: list[Host]) -> Planned:
    """What planning a rollback reads, from the stored timeline's index, never the whole
    timeline nor every run at once: the runs of the hosts it may roll back (those named, else
    the runbook's; the run's own host where ``to`` names a run), looked through in brief a
    page at a time; read whole only the run each host rolls back to and, a page at a time,
    the installs that may have brought a version (kept as what they brought)."""
    from journal.projections.digest import Digest, digest
    from journal.service.runs import find_stored_run

    names = [h.name for h in hosts] or list(runbook.hosts)
    name = to.strip().removeprefix("before:").strip()
    before = to.strip().startswith("before:")

    def read(found: Digest) -> Planned:
        steps = set(found.steps_known())
        named, planned = None, names
        if name and name not in steps and name not in runbook.plan:
            named = find_stored_run(store, runbook.name, name)[0]  # else bad input naming it
            where = found.step_and_host(named)
            planned = [where[1]] if where else []  # a run's target is its own host's
        folds = {host: LatestOf(name) for host in planned} if named is None else {}
        chosen: dict[str, StepRunView | None] = {}
        recorded, pending = Installs(), []

        def add_installs() -> None:
            for view in found.planning_runs(pending).values():
                recorded.add(view)
            pending.clear()

        for view, key in found.host_runs_in_brief(planned):
            if installs(view):
                pending.append(key)
                if len(pending) >= INSTALLS_PAGE:
                    add_installs()
            if named is None and view.step == name and not view.imported:
                chosen.setdefault(view.host, None)  # the step ran there
            if view.host in folds and not view.imported and view.benchmark is None:
                folds[view.host].add(view)
        add_installs()
        wanted = [named] if named is not None else []
        for host, fold in folds.items():
            run = fold.first_try if before else fold.latest
            if run is not None and host in chosen:
                wanted.append(run.run_id)
        runs = [run for run in map(found.run_of, wanted) if run is not None]
        if named is not None:
            return Planned(found.timeline_of(runs), steps, None, recorded)
        chosen.update((run.host, run) for run in runs)
        return Planned(found.timeline_of(runs), steps, chosen, recorded)

    return digest(store, runbook.name, read)


def target_hosts(store: EventStore, runbook: Runbook, to: str, hosts: list[Host]) -> list[str]:
    """The hosts ``to`` rolls back (bad input as :func:`targets` says), touching none."""
    return [t.host for t in _planned(store, runbook, to, hosts).targets(runbook, to, hosts)]


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
    planned = _planned(store, runbook, to, hosts)
    found = planned.targets(runbook, to, hosts)
    by_host = {t.host: t for t in found}
    order = [runbook.hosts[t.host] for t in found]

    def work(host: Host, cancel: threading.Event) -> HostPlan:
        transport = transport_for(host, accept_new_host_key=accept_new_host_key)
        error = connect(transport, host, record or (lambda events: None))
        if error:
            raise BadInput(f"host {host.name}: {error}; no rollback was planned or run")
        try:
            return plan_host(planned.installs, runbook, by_host[host.name], host, transport, cancel)
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
