"""The package set a rollback brings a host back to: a recorded snapshot, after a run
(``--to RUN``), after the latest run of a step on each host (``--to STEP``), or before the
latest attempt of a step there (``--to before:STEP``, walking back over the failed tries of
that step right before it, so that a retried failure rolls back to before the first try). A
host without such a run or snapshot is bad input naming it, and why the snapshot is missing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from journal.errors import BadInput
from journal.projections.packages import normalize
from journal.projections.timeline import StepRunView, Timeline
from journal.projections.unread import short
from journal.runbook import Runbook
from journal.service.runs import LatestOf, find_run, rollback_runs


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


def targets(
    timeline: Timeline,
    runbook: Runbook,
    to: str,
    hosts: list[str],
    steps: set[str] | None = None,
    chosen: Mapping[str, StepRunView | None] | None = None,
) -> list[Target]:
    """The target of each host: ``hosts`` (runbook names; empty: the run's host for RUN, the
    hosts where STEP ran for STEP and before:STEP). A host without such a run or snapshot is
    bad input naming it. ``steps``: every step the journal ran, where ``timeline`` holds only
    some of its runs; ``chosen``: for STEP and before:STEP, the run each host where STEP ran
    (not imported) rolls back to, where the caller folded the hosts' runs
    (:class:`~journal.service.runs.LatestOf`; None: it ran there only as a benchmark), for
    ``timeline`` to hold only those."""
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
    if steps is None:
        steps = {run.step for run in timeline.step_runs()}
    if name in steps or name in runbook.plan:
        return [
            _step_target(timeline, runbook, to, name, phase, h, chosen)
            for h in _step_hosts(timeline, runbook, name, hosts, to, chosen)
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
    timeline: Timeline,
    runbook: Runbook,
    step: str,
    hosts: list[str],
    to: str,
    chosen: Mapping[str, StepRunView | None] | None,
) -> list[str]:
    if hosts:
        return hosts
    if chosen is not None:
        ran = set(chosen)
    else:
        ran = {r.host for r in timeline.step_runs() if r.step == step and not r.imported}
    found = [name for name in runbook.hosts if name in ran]
    if not found:
        raise BadInput(
            f"{to}: {step} has no recorded run on any host of {runbook.path}, so there is no "
            "package set to roll back to; `journal log --step " + step + "` lists its runs"
        )
    return found


def _step_target(
    timeline: Timeline,
    runbook: Runbook,
    to: str,
    step: str,
    phase: str,
    host: str,
    chosen: Mapping[str, StepRunView | None] | None,
) -> Target:
    _reachable(runbook, host, to)
    if chosen is not None:
        run = chosen.get(host)
    else:
        # before:STEP: before the first of the failed tries right before the latest (a
        # retried failure); STEP: its latest run
        fold = LatestOf(step)
        for each in rollback_runs(timeline.step_runs(), host):
            fold.add(each)
        run = fold.first_try if phase == "before" else fold.latest
    if run is None:
        raise BadInput(
            f"{to}: {step} never ran on {host}, so there is no package set of it to roll {host} "
            "back to; name the hosts it ran on (`journal log --step " + step + "`)"
        )
    return _target(run, to, phase, runbook)


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
