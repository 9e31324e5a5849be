"""`journal run plan`: the runbook's steps in order, stopping at the first failure, resuming; it
reports as it goes (in the terminal: this is the command's orchestration over the services).

With ``--rolling N`` the plan is rolled out over the fleet N hosts at a time: each batch runs
the whole plan (step by step, each step on the batch's hosts at once, resuming after what is
done) before the next batch starts, and a batch whose plan fails stops the roll there, so the
hosts of the later batches are never touched. ``--parallel N`` keeps at most N hosts at work
in each step.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from journal.cli.live import fleet_report
from journal.cli.pitfalls import one_line
from journal.cli.render import verdict, when
from journal.errors import BadInput
from journal.projections.timeline import project, settle
from journal.runbook import Host, Runbook, Step
from journal.service.findings import findings_for_runs
from journal.service.fleet import Schedule
from journal.service.steps import Echo, exit_status, new_run_id, run_step_fleet
from journal.store import EventStore


def say(text: str) -> None:
    print(f"journal: {text}", file=sys.stderr, flush=True)


def plain_echo(count: int) -> Echo:
    """The echo of a step on ``count`` hosts without a terminal: host-prefixed lines."""
    return Echo(prefix=count > 1)


def run_plan(
    store: EventStore,
    runbook: Runbook,
    *,
    from_step: str | None = None,
    to_step: str | None = None,
    chosen: list[str] | None = None,
    groups: list[str] | None = None,
    all_hosts: bool = False,
    accept_new_host_key: bool = False,
    schedule: Schedule | None = None,
    echo_for: Callable[[int], Echo] = plain_echo,
) -> int:
    """Run the plan; without ``from_step``, resume after the steps already done everywhere."""
    plan = runbook.plan
    if not plan:
        raise BadInput(f"{runbook.path}: the runbook has no [[steps]]; there is no plan to run")
    first = plan.index(runbook.step(from_step).name) if from_step else 0
    last = plan.index(runbook.step(to_step).name) if to_step else len(plan) - 1
    if last < first:
        raise BadInput(f"--to {to_step} comes before --from {from_step} in the plan")
    schedule = schedule or Schedule()
    steps = runbook.steps[first : last + 1]
    hosts_of: dict[str, list[Host]] = {
        s.name: runbook.hosts_for(s, chosen or [], all_hosts, groups) for s in steps
    }
    roll = PlanRoll(
        store, runbook, steps, hosts_of, from_step is not None, accept_new_host_key, echo_for
    )
    if not schedule.rolling:
        return roll.run(None, Schedule(parallel=schedule.parallel))

    fleet = list({h.name: h for s in steps for h in hosts_of[s.name]})
    size = schedule.rolling
    batches = [fleet[i : i + size] for i in range(0, len(fleet), size)]
    for number, batch in enumerate(batches, 1):
        say(f"=== batch {number} of {len(batches)} (rolling {size} at a time): {', '.join(batch)}")
        code = roll.run(set(batch), Schedule())
        if code:
            rest = [h for later in batches[number:] for h in later]
            untouched = f"; not touched: {', '.join(rest)}" if rest else ""
            say(f"the roll stopped at batch {number} ({', '.join(batch)}){untouched}")
            return code
    say(
        f"the plan rolled out over {len(fleet)} hosts in {len(batches)} batches of "
        f"at most {size}: every step succeeded on every host"
    )
    return 0


class PlanRoll:
    """The plan's steps, run on all their hosts or on one batch of them."""

    def __init__(
        self,
        store: EventStore,
        runbook: Runbook,
        steps: list[Step],
        hosts_of: dict[str, list[Host]],
        from_given: bool,
        accept_new_host_key: bool,
        echo_for: Callable[[int], Echo],
    ) -> None:
        self.store = store
        self.runbook = runbook
        self.steps = steps
        self.hosts_of = hosts_of
        self.from_given = from_given
        self.accept_new_host_key = accept_new_host_key
        self.echo_for = echo_for
        self.plan_run = new_run_id()

    def hosts(self, step: Step, batch: set[str] | None) -> list[Host]:
        return [h for h in self.hosts_of[step.name] if batch is None or h.name in batch]

    def run(self, batch: set[str] | None, schedule: Schedule) -> int:
        """Run the steps on their hosts (those of ``batch`` only, when given), resuming after
        the steps already done unless --from was given; the exit status."""
        steps = [s for s in self.steps if self.hosts(s, batch)]
        if not self.from_given:
            steps = self._resume(steps, batch)
            if steps is None:
                return 0
        runbook = self.runbook
        for step in steps:
            hosts = self.hosts(step, batch)
            say(f"==> {step.name} on {', '.join(h.name for h in hosts)}")
            echo = self.echo_for(len(hosts))
            fleet = run_step_fleet(
                self.store,
                runbook,
                step,
                hosts,
                echo,
                accept_new_host_key=self.accept_new_host_key,
                plan_run=self.plan_run,
                schedule=schedule,
            )
            runs = fleet.results
            for line in fleet_report(fleet, echo, verdict, lambda run: not run.outcome.ok):
                say(line.removeprefix("journal: "))
            for found in findings_for_runs(self.store, runbook.name, [r.run_id for r in runs]):
                say(one_line(found))
            code = exit_status(runs) if fleet.complete else 130
            if code:
                say(
                    f"the plan stopped at {step.name}; fix it, then `journal run plan` resumes "
                    "from the first step not yet done"
                )
                return code
        return 0

    def _resume(self, steps: list[Step], batch: set[str] | None) -> list[Step] | None:
        """The steps left after those already succeeded on all their hosts; None (and say
        so) when none is left."""
        store, runbook = self.store, self.runbook
        timeline = settle(project(runbook.name, store.read(runbook.name, exclude=["OutputChunk"])))
        latest = {(r.host, r.step): r for r in timeline.step_runs()}
        skipped = 0
        for step in steps:
            hosts = self.hosts(step, batch)
            runs = [latest.get((h.name, step.name)) for h in hosts]
            if not all(r is not None and r.status == "succeeded" for r in runs):
                break
            at = max(when(r.finished) for r in runs if r is not None)
            say(f"skip {step.name}: already succeeded on {', '.join(h.name for h in hosts)} ({at})")
            skipped += 1
        if skipped < len(steps):
            return steps[skipped:]
        plan = runbook.plan
        if batch is not None:
            done = f"every step has already succeeded on {', '.join(sorted(batch))}"
        elif self.steps[-1].name == plan[-1]:
            done = f"the plan is done: all {len(plan)} of its steps have succeeded"
        else:
            done = f"nothing to run: every step up to {self.steps[-1].name} has succeeded"
        if batch is None:
            done += "; `journal run plan --from NAME` runs again from a step"
        say(done)
        return None
