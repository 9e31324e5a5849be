"""Running the plan: the runbook's steps in order, stopping at the first failure, resuming after
the steps already done, on all their hosts at once or rolled out over the fleet batch by batch.

With a rolling schedule of N each batch of N hosts runs the whole plan (step by step, each step
on the batch's hosts at once, resuming after what is done) before the next batch starts, and a
batch whose plan fails stops the roll there, so the hosts of the later batches are never
touched. A parallel schedule of N keeps at most N hosts at work in each step. How it goes is
told to a :class:`PlanReporter` (the terminal's prints it); nothing here prints.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from journal.errors import BadInput
from journal.events import RolloutFinished
from journal.pitfalls.base import Finding
from journal.projections.progress import stands
from journal.projections.stored import current_timeline
from journal.projections.timeline import StepRunView
from journal.runbook import Host, Runbook, Step
from journal.runs import StepRun, exit_status, new_run_id
from journal.service.findings import findings_for_runs
from journal.service.fleet import FleetRun, Schedule
from journal.service.steps import StepWatch, run_step_fleet
from journal.store import EventStore

if TYPE_CHECKING:
    from journal.notify import Notifier
    from journal.service.rollout import GateOptions


class PlanReporter(Protocol):
    """Hears how a plan run goes, step by step and batch by batch."""

    def echo_for(self, count: int) -> StepWatch:
        """What shows a step's output and its fleet's progress on ``count`` hosts."""
        ...

    def batch_started(self, number: int, total: int, size: int, hosts: list[str]) -> None:
        """Batch ``number`` of ``total`` (of at most ``size`` hosts) begins the plan."""
        ...

    def batch_failed(self, number: int, hosts: list[str], untouched: list[str]) -> None:
        """The plan failed on batch ``number``: the roll stops, ``untouched`` never ran."""
        ...

    def rolled_out(self, hosts: int, batches: int, size: int) -> None:
        """Every batch ran the whole plan: every step succeeded on every host."""
        ...

    def step_skipped(self, step: str, hosts: list[str], finished: str | None) -> None:
        """A step already succeeded on all its hosts (the last at ``finished``): not run again."""
        ...

    def nothing_left(self, batch: list[str] | None, upto: str, plan_steps: int | None) -> None:
        """Every step up to ``upto`` has succeeded already (on ``batch`` when rolling);
        ``plan_steps`` is the plan's length when ``upto`` ends it, else None."""
        ...

    def step_started(self, step: str, hosts: list[str]) -> None:
        """A step begins on its hosts."""
        ...

    def step_verdict(
        self, run: FleetRun[StepRun], echo: StepWatch, findings: list[Finding]
    ) -> None:
        """A step ended on its hosts (shown through ``echo``), with the findings about it."""
        ...

    def plan_stopped(self, step: str) -> None:
        """The plan stopped at ``step``, which failed somewhere (or was interrupted)."""
        ...

    # a gated rollout (journal.service.rollout.GateReporter)

    def rollout_started(
        self, rollout: str, gate: str, batches: list[list[str]], first: int
    ) -> None: ...

    def batch_gated(
        self, number: int, hosts: list[str], passed: bool, checks: list[dict]
    ) -> None: ...

    def rollout_finished(self, event: RolloutFinished) -> None: ...


def run_plan(
    store: EventStore,
    runbook: Runbook,
    reporter: PlanReporter,
    *,
    from_step: str | None = None,
    to_step: str | None = None,
    chosen: list[str] | None = None,
    groups: list[str] | None = None,
    all_hosts: bool = False,
    accept_new_host_key: bool = False,
    schedule: Schedule | None = None,
    detach: bool = False,
    notifier: Notifier | None = None,
    gate: GateOptions | None = None,
) -> int:
    """Run the plan; without ``from_step``, resume after the steps already done everywhere;
    with ``detach``, an interruption leaves every step's command running on its hosts; with
    ``gate`` (and a rolling ``schedule``), each batch passes the gate before the next starts
    (:mod:`journal.service.rollout`).
    ``notifier`` hears each run's end, the findings, and the plan's end (when it ran a step).
    The exit status: 0, or the first failure's (as :func:`exit_status`; 130 when interrupted)."""
    plan = runbook.plan
    if not plan:
        raise BadInput(f"{runbook.path}: the runbook has no [[steps]]; there is no plan to run")
    first = plan.index(runbook.step(from_step).name) if from_step else 0
    last = plan.index(runbook.step(to_step).name) if to_step else len(plan) - 1
    if last < first:
        raise BadInput(
            f"the last step asked for, {to_step}, comes before the first, {from_step}, in the plan"
        )
    schedule = schedule or Schedule()
    if gate is not None and not schedule.rolling:
        raise BadInput(
            f"--gate {gate.gate.name} checks each batch of a rolling plan: add --rolling N "
            "(N hosts a batch)"
        )
    steps = runbook.steps[first : last + 1]
    if detach:
        steps = [replace(s, detach=True) for s in steps]
    hosts_of: dict[str, list[Host]] = {
        s.name: runbook.hosts_for(s, chosen or [], all_hosts, groups) for s in steps
    }
    roll = PlanRoll(
        store,
        runbook,
        reporter,
        steps,
        hosts_of,
        from_step is not None,
        accept_new_host_key,
        notifier,
    )
    try:
        if gate is not None:
            code = _gated_roll_out(roll, reporter, steps, hosts_of, schedule, gate)
        else:
            code = _roll_out(roll, reporter, steps, hosts_of, schedule)
    except KeyboardInterrupt:
        roll.finished(130)
        raise
    roll.finished(code)
    return code


def _roll_out(
    roll: PlanRoll,
    reporter: PlanReporter,
    steps: list[Step],
    hosts_of: dict[str, list[Host]],
    schedule: Schedule,
) -> int:
    """All the hosts at once, or batch after batch when rolling; the exit status."""
    if not schedule.rolling:
        return roll.run(None, Schedule(parallel=schedule.parallel))

    fleet, batches = _batches(steps, hosts_of, schedule.rolling)
    size = schedule.rolling
    for number, batch in enumerate(batches, 1):
        reporter.batch_started(number, len(batches), size, batch)
        code = roll.run(set(batch), Schedule())
        if code:
            reporter.batch_failed(number, batch, [h for later in batches[number:] for h in later])
            return code
    reporter.rolled_out(len(fleet), len(batches), size)
    return 0


def _batches(
    steps: list[Step], hosts_of: dict[str, list[Host]], size: int
) -> tuple[list[str], list[list[str]]]:
    """The plan's hosts in the order named, and in batches of ``size``."""
    fleet = list({h.name: h for s in steps for h in hosts_of[s.name]})
    return fleet, [fleet[i : i + size] for i in range(0, len(fleet), size)]


def _gated_roll_out(
    roll: PlanRoll,
    reporter: PlanReporter,
    steps: list[Step],
    hosts_of: dict[str, list[Host]],
    schedule: Schedule,
    options: GateOptions,
) -> int:
    """Batch after batch, each through the gate (around it ``before_batch`` and, once it
    passed, ``after_batch``); a batch that fails its plan or its gate stops the rollout there
    (rolled back with ``on_fail="rollback"``), its hosts left out of service."""
    from journal.service.rollout import GATE_FAILED, GatedRollout, failed_checks

    size = schedule.rolling or 1
    fleet, batches = _batches(steps, hosts_of, size)
    rollout = GatedRollout(
        roll.store,
        roll.runbook,
        options,
        reporter,
        reporter.echo_for,
        accept_new_host_key=roll.accept_new_host_key,
        notifier=roll.notifier,
    )
    first, roll.plan_run = rollout.begin(batches, size, roll.plan_run)
    batches = rollout.batches
    drained: list[str] = []
    number = first
    try:
        for number in range(first, len(batches) + 1):
            batch = batches[number - 1]
            later = [h for b in batches[number:] for h in b]
            reporter.batch_started(number, len(batches), size, batch)
            checks = []
            before = rollout.hooks("before_batch", number, batch)
            if before:
                checks += before
                # taken out (or tried to be): put back only by after_batch
                drained = [h for h in batch if any(h in c["hosts"] for c in before)]
                failing = [c for c in before if not c["ok"]]
                if failing:
                    rollout.gated(number, batch, checks)
                    why = "; ".join(c["reason"] for c in failing)
                    rollout.finish("stopped", number, why, drained, later)
                    return GATE_FAILED
            again = number == first and rollout.rolled_back  # its steps were undone
            code = roll.run(set(batch), Schedule(), again=again)
            if code == 130:
                raise KeyboardInterrupt
            if code:
                checks += [
                    {"host": h, "check": "plan", "name": "plan", "ok": False, "reason": f}
                    for f in roll.failed
                    for h in batch
                    if f.endswith(f" on {h}")
                ] or [{"host": "", "check": "plan", "name": "plan", "ok": False, "reason": ""}]
            else:
                checks += rollout.check(batch)
            if not rollout.gated(number, batch, checks):
                why = "; ".join(failed_checks(checks))
                status = "stopped"
                if options.on_fail == "rollback":
                    done, said = rollout.roll_back(batch, roll.plan_run)
                    why += f"; {said}"
                    status = "rolled-back" if done else "stopped"
                rollout.finish(status, number, why, drained, later)
                return code or GATE_FAILED
            after = rollout.hooks("after_batch", number, batch)
            failing = [c for c in after if not c["ok"]]
            if failing:
                back = {h for c in after if c["ok"] for h in c["hosts"]}
                drained = [h for h in drained if h not in back]
                why = "; ".join(c["reason"] for c in failing)
                rollout.finish("stopped", number, why, drained, later)
                return GATE_FAILED
            drained = []
    except KeyboardInterrupt:
        later = [h for b in batches[number:] for h in b]
        rollout.finish("interrupted", number, "interrupted (Ctrl-C)", drained, later)
        raise
    rollout.finish("completed", len(batches), "every batch passed its gate")
    reporter.rolled_out(len(fleet), len(batches), size)
    return 0


class PlanRoll:
    """The plan's steps, run on all their hosts or on one batch of them."""

    def __init__(
        self,
        store: EventStore,
        runbook: Runbook,
        reporter: PlanReporter,
        steps: list[Step],
        hosts_of: dict[str, list[Host]],
        from_given: bool,
        accept_new_host_key: bool,
        notifier: Notifier | None = None,
    ) -> None:
        self.store = store
        self.runbook = runbook
        self.reporter = reporter
        self.steps = steps
        self.hosts_of = hosts_of
        self.from_given = from_given
        self.accept_new_host_key = accept_new_host_key
        self.plan_run = new_run_id()
        self.notifier = notifier
        #: the steps run (in order) and the ``step on host`` runs that failed, so far
        self.ran: list[str] = []
        self.hosts_ran: list[str] = []
        self.failed: list[str] = []

    def hosts(self, step: Step, batch: set[str] | None) -> list[Host]:
        """The hosts ``step`` runs on (those of ``batch`` only, when given)."""
        return [h for h in self.hosts_of[step.name] if batch is None or h.name in batch]

    def run(self, batch: set[str] | None, schedule: Schedule, again: bool = False) -> int:
        """Run the steps on their hosts (those of ``batch`` only, when given), resuming after
        the steps already done unless a first step was named (or ``again``: a batch rolled
        back runs them all again); the exit status."""
        steps = [s for s in self.steps if self.hosts(s, batch)]
        if not self.from_given and not again:
            steps = self._resume(steps, batch)
            if steps is None:
                return 0
        reporter = self.reporter
        for step in steps:
            hosts = self.hosts(step, batch)
            reporter.step_started(step.name, [h.name for h in hosts])
            echo = reporter.echo_for(len(hosts))
            fleet = run_step_fleet(
                self.store,
                self.runbook,
                step,
                hosts,
                echo,
                accept_new_host_key=self.accept_new_host_key,
                plan_run=self.plan_run,
                schedule=schedule,
                notifier=self.notifier,
            )
            runs = fleet.results
            self.ran += [step.name] if step.name not in self.ran else []
            self.hosts_ran += [h for h in fleet.hosts if h not in self.hosts_ran]
            self.failed += [f"{r.step} on {r.host}" for r in runs if not r.outcome.ok]
            found = findings_for_runs(
                self.store, self.runbook.name, [r.run_id for r in runs], self.notifier
            )
            reporter.step_verdict(fleet, echo, found)
            code = exit_status(runs) if fleet.complete else 130
            if code:
                reporter.plan_stopped(step.name)
                return code
        return 0

    def finished(self, code: int) -> None:
        """Tell the notifier the plan ended, when it ran a step."""
        if self.notifier is not None and self.ran:
            self.notifier.plan_finished(code, self.ran, self.hosts_ran, self.failed, self.plan_run)

    def _resume(self, steps: list[Step], batch: set[str] | None) -> list[Step] | None:
        """The steps left after those already succeeded on all their hosts; None (and say
        so) when none is left."""
        store, runbook = self.store, self.runbook
        timeline = current_timeline(store, runbook.name)
        latest: dict[tuple[str, str], StepRunView] = {}
        for r in timeline.step_runs():
            if stands(r, latest.get((r.host, r.step))):  # a run not started changed nothing
                latest[(r.host, r.step)] = r
        skipped = 0
        for step in steps:
            hosts = self.hosts(step, batch)
            runs = [latest.get((h.name, step.name)) for h in hosts]
            done = [r for r in runs if r is not None and r.status == "succeeded"]
            if len(done) < len(runs):
                break
            finished = max((r.finished for r in done), key=lambda at: at or "")
            self.reporter.step_skipped(step.name, [h.name for h in hosts], finished)
            skipped += 1
        if skipped < len(steps):
            return steps[skipped:]
        upto = self.steps[-1].name
        whole = len(runbook.plan) if upto == runbook.plan[-1] else None
        self.reporter.nothing_left(sorted(batch) if batch is not None else None, upto, whole)
        return None
