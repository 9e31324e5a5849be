"""`journal run plan` in the terminal: the plan's progress as it runs, on stderr.

The orchestration (resuming, stopping at the first failure, ``--from``/``--to``, rolling
batches) is the service's (:mod:`journal.service.plan`); this is the reporter that words it,
and the one that words `journal demo`, whose plan it reports the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from journal.cli.echo import Echo
from journal.cli.live import fleet_report
from journal.cli.pitfalls import one_line
from journal.cli.render import Judged, short_ids, timeline_text, verdict
from journal.cli.rollback import plan_lines
from journal.display import when
from journal.events import RolloutFinished
from journal.pitfalls.base import Finding
from journal.projections.timeline import Timeline
from journal.runbook import Runbook
from journal.runs import StepRun
from journal.service.fleet import FleetRun
from journal.service.plan import run_plan as run_plan_service
from journal.service.rollback_plan import HostPlan
from journal.store import EventStore


def say(text: str) -> None:
    """One line of journal's own on stderr."""
    print(f"journal: {text}", file=sys.stderr, flush=True)


def plain_echo(count: int) -> Echo:
    """The echo of a step on ``count`` hosts without a terminal: host-prefixed lines."""
    return Echo(prefix=count > 1)


class TerminalPlanReport:
    """The plan's progress as `journal run plan` prints it (a :class:`PlanReporter`)."""

    def __init__(
        self, echo_for: Callable[[int], Echo] = plain_echo, short: Callable[[str], str] = str
    ) -> None:
        self._echo_for = echo_for
        self.short = short  # how a run id is shown (short_ids)
        #: the command a stopped rollout is told goes on with it
        self.resume = "journal run plan --rolling N --gate G --resume"

    def verdict(self, run: StepRun) -> str:
        return verdict(run, self.short)

    def echo_for(self, count: int) -> Echo:
        return self._echo_for(count)

    def batch_started(self, number: int, total: int, size: int, hosts: list[str]) -> None:
        say(f"=== batch {number} of {total} (rolling {size} at a time): {', '.join(hosts)}")

    def batch_failed(self, number: int, hosts: list[str], untouched: list[str]) -> None:
        rest = f"; not touched: {', '.join(untouched)}" if untouched else ""
        say(f"the roll stopped at batch {number} ({', '.join(hosts)}){rest}")

    def rolled_out(self, hosts: int, batches: int, size: int) -> None:
        say(
            f"the plan rolled out over {hosts} hosts in {batches} batches of "
            f"at most {size}: every step succeeded on every host"
        )

    def step_skipped(self, step: str, hosts: list[str], finished: str | None) -> None:
        say(f"skip {step}: already succeeded on {', '.join(hosts)} ({when(finished)})")

    def nothing_left(self, batch: list[str] | None, upto: str, plan_steps: int | None) -> None:
        if batch is not None:
            say(f"every step has already succeeded on {', '.join(batch)}")
            return
        if plan_steps is not None:
            done = f"the plan is done: all {plan_steps} of its steps have succeeded"
        else:
            done = f"nothing to run: every step up to {upto} has succeeded"
        say(done + "; `journal run plan --from NAME` runs again from a step")

    def step_started(self, step: str, hosts: list[str]) -> None:
        say(f"==> {step} on {', '.join(hosts)}")

    def step_verdict(self, run: FleetRun[StepRun], echo: Echo, findings: list[Finding]) -> None:
        for line in fleet_report(run, echo, self.verdict, lambda r: not r.outcome.ok):
            say(line.removeprefix("journal: "))
        for found in findings:
            say(one_line(found))

    def rollout_started(
        self, rollout: str, gate: str, batches: list[list[str]], first: int
    ) -> None:
        again = f", going on from batch {first}" if first > 1 else ""
        say(
            f"rollout {self.short(rollout)}: {len(batches)} batches through gate {gate}{again} "
            "(each host against its own baseline)"
        )

    def batch_gated(self, number: int, hosts: list[str], passed: bool, checks: list[dict]) -> None:
        for check in checks:
            if check["check"] == "figure" and "percent" in check and check["percent"] is not None:
                said = (
                    f"{check['name']} {check['baseline']:g} → {check['value']:g} "
                    f"({check['percent']:+.1f}%, {check['verdict']}; gate {check['tolerance']})"
                )
                say(f"  {'ok  ' if check['ok'] else 'FAIL'} {check['host']}: {said}")
            elif not check["ok"]:
                say(f"  FAIL {check['host'] or '-'}: {check['check']}: {check['reason']}")
        verdict = "passed its gate" if passed else "FAILED its gate"
        say(f"=== batch {number} ({', '.join(hosts)}) {verdict}")

    def rollout_finished(self, event: RolloutFinished) -> None:
        drained = (
            f"; left drained (before_batch ran, after_batch did not): {', '.join(event.drained)}"
            if event.drained
            else ""
        )
        untouched = f"; not touched: {', '.join(event.untouched)}" if event.untouched else ""
        resume = f"; `{self.resume}` goes on from this batch" if event.status != "completed" else ""
        say(
            f"rollout {self.short(event.rollout)} {event.status} at batch {event.batch}: "
            f"{event.reason}{drained}{untouched}{resume}"
        )

    def plan_stopped(self, step: str) -> None:
        say(
            f"the plan stopped at {step}; fix it, then `journal run plan` resumes "
            "from the first step not yet done"
        )


class TerminalDemoReport(TerminalPlanReport):
    """`journal demo` in the terminal (a :class:`journal.demo.run.DemoReporter`): the plan's
    progress as `journal run plan` prints it, the benchmark's verdicts, then the timeline and
    the rollback plan as `journal log` and `journal rollback --dry-run` print them."""

    def bench_ran(self, run: StepRun) -> None:
        print(self.verdict(run), file=sys.stderr)

    def timeline(self, timeline: Timeline, findings: list[Finding]) -> None:
        # as `journal log` says them
        print(timeline_text(timeline, Judged(findings, short=self.short)))

    def rollback_planned(self, host_plan: HostPlan) -> None:
        print("\n".join(plan_lines(host_plan)))


def run_plan(
    store: EventStore,
    runbook: Runbook,
    *,
    echo_for: Callable[[int], Echo] = plain_echo,
    resume: str = "journal run plan --rolling N --gate G --resume",
    **options: Any,
) -> int:
    """Run the plan with the ``options`` of :func:`journal.service.plan.run_plan` (``from_step``,
    ``to_step``, the hosts, ``schedule`` ...), reporting in the terminal; the exit status.
    (`journal run plan` has checked ``--from``/``--to`` already, wording any problem in terms of
    the flags.) ``resume``: the command a stopped rollout is told goes on with it."""
    report = TerminalPlanReport(echo_for, short_ids(store))
    report.resume = resume
    return run_plan_service(store, runbook, report, **options)
