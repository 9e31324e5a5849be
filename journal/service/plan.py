"""Running the plan: the runbook's steps in order, stopping at the first failure, resuming."""

from __future__ import annotations

import sys

from journal.cli.pitfalls import one_line
from journal.cli.render import verdict, when
from journal.errors import BadInput
from journal.projections.timeline import project, settle
from journal.runbook import Runbook
from journal.service.findings import findings_for_runs
from journal.service.steps import Echo, exit_status, new_run_id, run_step
from journal.store import EventStore


def say(text: str) -> None:
    print(f"journal: {text}", file=sys.stderr, flush=True)


def run_plan(
    store: EventStore,
    runbook: Runbook,
    *,
    from_step: str | None = None,
    to_step: str | None = None,
    chosen: list[str] | None = None,
    all_hosts: bool = False,
    accept_new_host_key: bool = False,
) -> int:
    """Run the plan; without ``from_step``, resume after the steps already done everywhere."""
    plan = runbook.plan
    if not plan:
        raise BadInput(f"{runbook.path}: the runbook has no [[steps]]; there is no plan to run")
    first = plan.index(runbook.step(from_step).name) if from_step else 0
    last = plan.index(runbook.step(to_step).name) if to_step else len(plan) - 1
    if last < first:
        raise BadInput(f"--to {to_step} comes before --from {from_step} in the plan")
    for name in chosen or []:
        runbook.host(name)

    if from_step is None:
        timeline = settle(project(runbook.name, store.read(runbook.name, exclude=["OutputChunk"])))
        latest = {(r.host, r.step): r for r in timeline.step_runs()}
        while first <= last:
            step = runbook.steps[first]
            hosts = runbook.hosts_for(step, chosen or [], all_hosts)
            runs = [latest.get((h.name, step.name)) for h in hosts]
            if not all(r is not None and r.status == "succeeded" for r in runs):
                break
            at = max(when(r.finished) for r in runs if r is not None)
            say(f"skip {step.name}: already succeeded on {', '.join(h.name for h in hosts)} ({at})")
            first += 1
        if first > last:
            if last == len(plan) - 1:
                done = f"the plan is done: all {len(plan)} of its steps have succeeded"
            else:
                done = f"nothing to run: every step up to {plan[last]} has succeeded"
            say(f"{done}; `journal run plan --from NAME` runs again from a step")
            return 0

    plan_run = new_run_id()
    for step in runbook.steps[first : last + 1]:
        hosts = runbook.hosts_for(step, chosen or [], all_hosts)
        say(f"==> {step.name} on {', '.join(h.name for h in hosts)}")
        runs = run_step(
            store,
            runbook,
            step,
            hosts,
            Echo(prefix=len(hosts) > 1),
            accept_new_host_key=accept_new_host_key,
            plan_run=plan_run,
        )
        for run in runs:
            say(verdict(run).removeprefix("journal: "))
        for found in findings_for_runs(store, runbook.name, [run.run_id for run in runs]):
            say(one_line(found))
        code = exit_status(runs) if len(runs) == len(hosts) else 130
        if code:
            say(
                f"the plan stopped at {step.name}; fix it, then `journal run plan` resumes from "
                "the first step not yet done"
            )
            return code
    return 0
