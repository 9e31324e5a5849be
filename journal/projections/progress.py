"""Plan progress: for every host, where each step of the plan stands."""

from __future__ import annotations

from dataclasses import dataclass

from journal.projections.timeline import StepRunView, Timeline


@dataclass(frozen=True)
class StepState:
    """The latest run of one step on one host, or none yet."""

    step: str
    host: str
    last: StepRunView | None

    @property
    def status(self) -> str:
        return self.last.status if self.last else "pending"

    @property
    def done(self) -> bool:
        return self.last is not None and self.last.status == "succeeded"


@dataclass(frozen=True)
class HostState:
    """What the journal knows of one host: its last step run and how far the plan got."""

    host: str
    target: str
    steps: list[StepState]
    last: StepRunView | None

    @property
    def done(self) -> int:
        return sum(1 for s in self.steps if s.done)


def stands(run: StepRunView, before: StepRunView | None) -> bool:
    """Whether ``run`` is where its step stands on its host after ``before`` (the run of the
    step there before it): a run ``not started`` changed nothing, so an earlier run stands."""
    return before is None or run.status != "not started"


def progress(timeline: Timeline, hosts: list[str] | None = None) -> list[HostState]:
    """Each host's state against the latest plan (hosts seen in runs are included too)."""
    latest: dict[tuple[str, str], StepRunView] = {}
    last_of_host: dict[str, StepRunView] = {}
    for run in timeline.step_runs():
        if stands(run, latest.get((run.host, run.step))):
            latest[(run.host, run.step)] = run
        last_of_host[run.host] = run
    names = hosts or list(dict.fromkeys([*timeline.hosts, *last_of_host]))
    states = []
    for host in names:
        steps = [StepState(step, host, latest.get((host, step))) for step in timeline.plan]
        if host not in timeline.hosts and not hosts and not any(s.last for s in steps):
            continue  # not a host of the plan, and no step of it ran there (a rollout's hooks)
        target = timeline.hosts.get(host) or (
            last_of_host[host].target if host in last_of_host else ""
        )
        states.append(HostState(host, target, steps, last_of_host.get(host)))
    return states
