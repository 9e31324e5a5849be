"""Gated rollouts: a rolling plan whose every batch proves itself on each of its hosts before
the next batch starts (`journal run plan --rolling N --gate NAME`).

Around each batch: ``before_batch`` (take its hosts out: a scheduler's drain), the plan on the
batch, then the gate (:mod:`journal.runbook.gates`): the probe and its expectations, the stack
agreeing across the rollout, each benchmark figure against that host's own baseline (its latest
figures recorded before the rollout began) by the one verdict on figures
(:func:`journal.projections.verdict.judge`, the gate's tolerance standing for its noise
threshold), the health command; then ``after_batch`` (put them back) only when the gate passed.
A failed gate stops the rollout, leaves the batch's hosts out of service and says so, and with
``on_fail="rollback"`` rolls the batch back to the packages it had before the rollout.

Each batch's checks are one ``BatchGated`` event between a ``RolloutStarted`` and a
``RolloutFinished``; ``resume`` goes on from the batch where the latest rollout of the journal
stopped, against the baselines of its beginning. Nothing here prints: a
:class:`GateReporter` hears how it goes.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from journal.errors import BadInput
from journal.events import (
    BatchGated,
    MetricRecorded,
    RolloutFinished,
    RolloutStarted,
    StepStarted,
)
from journal.projections.rollouts import RolloutView, rollouts
from journal.projections.verdict import judge
from journal.runbook import Host, Runbook, Step
from journal.runbook.gates import GateSpec
from journal.runs import new_run_id
from journal.service.steps import StepWatch, run_step_fleet
from journal.store import EventStore

if TYPE_CHECKING:
    from journal.notify import Notifier

#: Labels that never tell two series apart when a baseline is looked for: the phase (the gate
#: records its figures as ``phase=gated``) and what every figure of a host's benchmark has.
_NOT_COMPARED = frozenset({"phase", "host", "benchmark"})
#: The exit status of a rollout stopped by a gate (as a failed step's).
GATE_FAILED = 1
#: What a failed gate may do.
ON_FAIL = ("stop", "rollback")


class GateReporter(Protocol):
    """Hears a gated rollout: its start, each batch's gate, its end."""

    def rollout_started(
        self, rollout: str, gate: str, batches: list[list[str]], first: int
    ) -> None:
        """The rollout (re)starts at batch ``first`` of ``batches``."""
        ...

    def batch_gated(self, number: int, hosts: list[str], passed: bool, checks: list[dict]) -> None:
        """Batch ``number`` went through its gate."""
        ...

    def rollout_finished(self, event: RolloutFinished) -> None:
        """The rollout ended (completed, stopped, rolled back, interrupted)."""
        ...


@dataclass(frozen=True)
class GateOptions:
    """What `--gate`, `--on-gate-fail` and `--resume` asked for; ``resumed``: the rollout
    `--resume` goes on with, where it was already looked up (:func:`resumable`)."""

    gate: GateSpec
    on_fail: str = "stop"
    resume: bool = False
    resumed: RolloutView | None = None

    def __post_init__(self) -> None:
        if self.on_fail not in ON_FAIL:
            raise BadInput(f"--on-gate-fail {self.on_fail}: give stop or rollback")


@dataclass
class Baselines:
    """Each host's latest set of figures per benchmark, metric and labels recorded before a
    seq (the rollout's beginning): read once, from the journal's figures only."""

    sets: dict[tuple[str, str, str, tuple], tuple[str | None, list[float]]] = field(
        default_factory=dict
    )

    @classmethod
    def read(
        cls,
        store: EventStore,
        journal: str,
        before: int,
        hosts: Iterable[str],
        benchmarks: Iterable[str],
        metrics: Iterable[str],
    ) -> Baselines:
        wanted_hosts, wanted_benches, wanted = set(hosts), set(benchmarks), set(metrics)
        found = cls()
        for rec in store.read(journal, types=[MetricRecorded.type]):
            if rec.seq >= before:
                break
            f = rec.event
            if not isinstance(f, MetricRecorded) or f.invalid is not None:
                continue
            if f.host_name not in wanted_hosts or f.benchmark not in wanted_benches:
                continue
            if f.name not in wanted:
                continue
            key = (f.host_name, f.benchmark, f.name, label_key(f.labels))
            run, values = found.sets.get(key, (None, []))
            if f.run is not None and f.run == run and values:
                values.append(f.value)  # a repeated sample of the same run
            else:
                found.sets[key] = (f.run, [f.value])
        return found

    def of(self, host: str, benchmark: str, metric: str, labels: dict[str, str]):  # type: ignore[no-untyped-def]
        return self.sets.get((host, benchmark, metric, label_key(labels)))


def label_key(labels: dict[str, str]) -> tuple:
    """The labels that tell a series apart, as a key (the phase and host aside)."""
    return tuple(sorted((k, v) for k, v in labels.items() if k not in _NOT_COMPARED))


def stack_of(result: dict[str, Any] | None) -> dict[str, str]:
    """What must agree across a rollout, from a torch-env probe's result."""
    result = result or {}
    torch = result.get("torch") if isinstance(result.get("torch"), dict) else {}
    return {
        "torch": str(torch.get("version")),
        "CUDA": str(torch.get("cuda")),
        "NCCL": str(result.get("nccl")),
        "driver": str(result.get("driver")),
    }


class GatedRollout:
    """One rollout: begun (or resumed), each batch gated, finished; recorded as it goes."""

    def __init__(
        self,
        store: EventStore,
        runbook: Runbook,
        options: GateOptions,
        reporter: GateReporter,
        echo_for: Callable[[int], StepWatch],
        *,
        accept_new_host_key: bool = False,
        notifier: Notifier | None = None,
    ) -> None:
        self.store = store
        self.runbook = runbook
        self.options = options
        self.gate = options.gate
        self.reporter = reporter
        self.echo_for = echo_for
        self.accept_new_host_key = accept_new_host_key
        self.notifier = notifier
        self.rollout = new_run_id()
        self.start_seq = 0
        self.stack: dict[str, str] | None = None  # the stack the rollout's hosts agree on
        self.baselines: Baselines | None = None
        #: going on from a batch that was rolled back: its plan runs again from its start
        self.rolled_back = False

    # -- beginning --------------------------------------------------------------------------

    def begin(self, batches: list[list[str]], size: int, plan_run: str) -> tuple[int, str]:
        """Record the rollout's start (or its going on, with ``resume``); the first batch to
        run (1-based) and the plan run to record the runs under."""
        first = 1
        if self.options.resume:
            batches, first, plan_run = self._resumed(batches)
        event = RolloutStarted(
            self.rollout,
            self.gate.name,
            size,
            batches,
            self.options.on_fail,
            plan_run,
            resumed=self.options.resume,
            first_batch=first,
        )
        self.store.append(self.runbook.name, [event])
        if not self.start_seq:  # baselines are the figures recorded before this
            self.start_seq = self.store.last_seq(self.runbook.name)
        self.reporter.rollout_started(self.rollout, self.gate.name, batches, first)
        self.batches = batches
        return first, plan_run

    def _resumed(self, batches: list[list[str]]) -> tuple[list[list[str]], int, str]:
        """The latest rollout of the journal, which must have stopped (:func:`resumable`):
        its batches, the batch it stopped at and its plan run; its id, first seq and the
        stack its passed batches agreed on are taken on."""
        view = self.options.resumed or resumable(self.store, self.runbook)
        self.rollout, self.start_seq = view.rollout, view.seq
        self.rolled_back = view.status == "rolled-back"
        self.stack = next(
            (
                c["stack"]
                for b in view.batches
                if b.passed
                for c in b.checks
                if c.get("check") == "stack" and c.get("stack")
            ),
            None,
        )
        batches = [list(b.hosts) for b in view.batches]
        return batches, view.batch or 1, view.plan_run or new_run_id()

    # -- around a batch -----------------------------------------------------------------------

    def hooks(self, which: str, number: int, batch: list[str]) -> list[dict[str, Any]]:
        """Run ``before_batch`` or ``after_batch`` for the batch: each group's own for its
        hosts of the batch, the gate's for the rest (:meth:`GateSpec.hooks_for`); a check
        each (none where no such command is set), with the hosts it took."""
        checks = []
        for hooks, hosts in self.gate.hooks_for(batch, self.runbook.groups):
            command = getattr(hooks, which)
            if command:
                checks.append(self._hook(which, number, hosts, command, hooks.hooks_host))
        return checks

    def _hook(
        self, which: str, number: int, batch: list[str], command: str, where: str
    ) -> dict[str, Any]:
        """Run one hook command for ``batch`` (some hosts of the batch) on ``where``."""
        hosts = ",".join(batch)
        text = command.replace("{hosts}", shlex.quote(hosts)).replace(
            "{rollout}", shlex.quote(self.rollout)
        )
        step = Step(
            which.replace("_", "-"),
            text,
            env={
                "JOURNAL_ROLLOUT": self.rollout,
                "JOURNAL_BATCH": str(number),
                "JOURNAL_BATCH_HOSTS": " ".join(batch),
            },
            snapshots=False,
            description=f"{which} of batch {number} of rollout {self.rollout}",
        )
        host = self._hooks_host(where)
        (run,) = run_step_fleet(
            self.store,
            self.runbook,
            step,
            [host],
            self.echo_for(1),
            accept_new_host_key=self.accept_new_host_key,
            notifier=self.notifier,
        ).results
        ok = run.outcome.ok
        reason = (
            ""
            if ok
            else f"{which} {run.outcome.status} on {host.name}"
            + (
                f" (exit status {run.outcome.exit_code})"
                if run.outcome.exit_code is not None
                else ""
            )
        )
        return {
            "host": host.name,
            "check": "hook",
            "name": which,
            "ok": ok,
            "reason": reason,
            "run": run.run_id,
            "hosts": list(batch),
        }

    def _hooks_host(self, name: str) -> Host:
        if name in self.runbook.hosts:
            return self.runbook.hosts[name]
        return Host("local", "local")

    # -- the gate -----------------------------------------------------------------------------

    def check(self, batch: list[str]) -> list[dict[str, Any]]:
        """The gate's checks on every host of ``batch`` (which ran the plan)."""
        hosts = [self.runbook.hosts[h] for h in batch]
        checks: list[dict[str, Any]] = []
        if self.gate.probe:
            checks += self._probe(hosts)
        for name in self.gate.benchmarks:
            checks += self._figures(name, hosts)
        if self.gate.health:
            checks += self._health(hosts)
        return checks

    def _probe(self, hosts: list[Host]) -> list[dict[str, Any]]:
        from journal.service.probe import run_probe

        name = self.gate.probe or ""
        fleet = run_probe(
            self.store,
            self.runbook,
            name,
            hosts,
            self.echo_for(len(hosts)),
            accept_new_host_key=self.accept_new_host_key,
        )
        checks = []
        for probe in fleet.results:
            verdict = probe.verdict()
            checks.append(
                {
                    "host": probe.host,
                    "check": "probe",
                    "name": name,
                    "ok": verdict.ok,
                    "reason": verdict.reason or "",
                }
            )
            if name != "torch-env" or probe.result is None:
                continue
            stack = stack_of(probe.result)
            if self.stack is None:
                self.stack = stack
            same = stack == self.stack
            differs = ", ".join(
                f"{k} {v} where the rollout's hosts have {self.stack[k]}"
                for k, v in stack.items()
                if v != self.stack[k]
            )
            checks.append(
                {
                    "host": probe.host,
                    "check": "stack",
                    "name": "torch-env",
                    "ok": same,
                    "reason": "" if same else differs,
                    "stack": stack,
                }
            )
        return checks

    def _figures(self, name: str, hosts: list[Host]) -> list[dict[str, Any]]:
        from journal.service.bench import run_bench

        spec = self.runbook.benchmark(name)
        if self.baselines is None:
            self.baselines = Baselines.read(
                self.store,
                self.runbook.name,
                self.start_seq,
                self.runbook.hosts,
                self.gate.benchmarks,
                self.gate.tolerance,
            )
        runs = run_bench(
            self.store,
            self.runbook,
            spec,
            hosts,
            self.echo_for(len(hosts)),
            {"phase": "gated"},
            accept_new_host_key=self.accept_new_host_key,
            notifier=self.notifier,
        )
        checks = []
        for bench in runs:
            host = bench.run.host
            if not bench.run.outcome.ok:
                checks.append(
                    {
                        "host": host,
                        "check": "figure",
                        "name": name,
                        "ok": False,
                        "reason": f"the benchmark {bench.run.outcome.status}"
                        + (f": {bench.run.outcome.reason}" if bench.run.outcome.reason else ""),
                        "run": bench.run.run_id,
                    }
                )
                continue
            for metric, tolerance in self.gate.tolerance.items():
                figures = [f for f in bench.figures if f.name == metric and f.invalid is None]
                row: dict[str, Any] = {
                    "host": host,
                    "check": "figure",
                    "name": metric,
                    "benchmark": name,
                    "tolerance": tolerance.text,
                    "run": bench.run.run_id,
                }
                if not figures:
                    checks.append(
                        {**row, "ok": False, "reason": f"{name} printed no {metric} figure"}
                    )
                    continue
                base = self.baselines.of(host, name, metric, figures[0].labels)
                if base is None:
                    checks.append(
                        {
                            **row,
                            "ok": False,
                            "reason": f"no baseline: {host} has no {metric} of {name} with these "
                            "labels recorded before the rollout (`journal run bench "
                            f"{name} --host {host} --label phase=before` records one)",
                        }
                    )
                    continue
                base_run, base_values = base
                verdict = judge(
                    base_values,
                    [f.value for f in figures],
                    tolerance.direction,
                    noise_percent=tolerance.percent,
                )
                ok = verdict.verdict != "worse"
                percent = verdict.percent
                said = "n/a" if percent is None else f"{percent:+.1f}%"
                checks.append(
                    {
                        **row,
                        "ok": ok,
                        "reason": ""
                        if ok
                        else f"{metric} {verdict.before:g} → {verdict.after:g} ({said}), beyond "
                        f"{tolerance.text} of its baseline",
                        "baseline": verdict.before,
                        "value": verdict.after,
                        "percent": percent,
                        "verdict": verdict.verdict,
                        "why": verdict.why,
                        "samples": verdict.after_count,
                        "baseline_run": base_run,
                    }
                )
        return checks

    def _health(self, hosts: list[Host]) -> list[dict[str, Any]]:
        step = Step(
            "gate-health",
            self.gate.health or "",
            snapshots=False,
            description=f"the health command of gate {self.gate.name}",
        )
        fleet = run_step_fleet(
            self.store,
            self.runbook,
            step,
            hosts,
            self.echo_for(len(hosts)),
            accept_new_host_key=self.accept_new_host_key,
            notifier=self.notifier,
        )
        from journal.reading.health import nvidia_smi_q
        from journal.service.bench import recorded_output

        checks = []
        for run in fleet.results:
            # what it printed, read where journal knows the tool (the end of it, bounded)
            parsed = nvidia_smi_q(recorded_output(self.store, self.runbook.name, run.run_id)[0])
            problems = parsed["problems"] if parsed else []
            reason = ""
            if not run.outcome.ok:
                code = run.outcome.exit_code
                reason = f"{self.gate.health} {run.outcome.status}" + (
                    f", exit status {code}" if code else ""
                )
            elif problems:
                reason = "; ".join(problems)
            check = {
                "host": run.host,
                "check": "health",
                "name": "health",
                "ok": run.outcome.ok and not problems,
                "reason": reason,
                "run": run.run_id,
            }
            if parsed is not None:
                check["parsed"] = parsed
            checks.append(check)
        return checks

    def gated(self, number: int, batch: list[str], checks: list[dict[str, Any]]) -> bool:
        """Record batch ``number``'s gate; whether it passed."""
        passed = all(c["ok"] for c in checks)
        self.store.append(
            self.runbook.name, [BatchGated(self.rollout, number, batch, passed, checks)]
        )
        self.reporter.batch_gated(number, batch, passed, checks)
        return passed

    # -- failing ------------------------------------------------------------------------------

    def roll_back(self, batch: list[str], plan_run: str) -> tuple[bool, str]:
        """Roll ``batch`` back to the packages each host had before the rollout (before its
        first run of the rollout's plan run); whether it did, and what was said."""
        from journal.service.rollback import plan, run_rollback

        firsts = self._first_runs(batch, plan_run)
        if not firsts:
            return False, "no run of the rollout on these hosts: nothing to roll back"
        plans = []
        try:
            for host, run in firsts.items():
                plans += plan(
                    self.store,
                    self.runbook,
                    f"before:{run}",
                    [self.runbook.hosts[host]],
                    accept_new_host_key=self.accept_new_host_key,
                    record=lambda events: self.store.append(self.runbook.name, events),
                )
        except BadInput as exc:
            return False, f"the rollback could not be planned: {exc}"
        plans = [p for p in plans if not p.empty]
        if not plans:
            return True, "nothing to roll back: the packages are those before the rollout"
        fleet = run_rollback(
            self.store,
            self.runbook,
            plans,
            self.echo_for(len(plans)),
            accept_new_host_key=self.accept_new_host_key,
            notifier=self.notifier,
        )
        failed = [r.host for r in fleet.results if not r.outcome.ok]
        if failed:
            return False, f"the rollback failed on {', '.join(failed)}"
        return True, f"rolled back {', '.join(p.host for p in plans)} to before the rollout"

    def _first_runs(self, batch: list[str], plan_run: str) -> dict[str, str]:
        """Each host's first step run of the rollout (recorded under ``plan_run``) that had a
        package snapshot before it, from the rollout's first seq on."""
        firsts: dict[str, str] = {}
        for rec in self.store.read(
            self.runbook.name, after=self.start_seq, types=[StepStarted.type]
        ):
            ev = rec.event
            if (
                isinstance(ev, StepStarted)
                and ev.plan_run == plan_run
                and ev.host_name in batch
                and ev.host_name not in firsts
                and ev.rollback is None
            ):
                firsts[ev.host_name] = ev.run
        return firsts

    def finish(
        self,
        status: str,
        batch: int | None = None,
        reason: str = "",
        drained: list[str] | None = None,
        untouched: list[str] | None = None,
    ) -> RolloutFinished:
        event = RolloutFinished(self.rollout, status, batch, reason, drained or [], untouched or [])
        self.store.append(self.runbook.name, [event])
        self.reporter.rollout_finished(event)
        if self.notifier is not None and status != "completed":
            self.notifier.gate_failed(event)
        return event


def resumable(store: EventStore, runbook: Runbook) -> RolloutView:
    """The rollout `--resume` goes on with: the journal's latest, which must not have
    completed and whose hosts the runbook still has; else bad input saying so."""
    journal = runbook.name
    latest = rollouts(store, journal).latest()
    if latest is None:
        raise BadInput(
            f"--resume: the journal {journal!r} has no rollout to go on with; drop --resume "
            "to begin one"
        )
    if latest.status == "completed":
        raise BadInput(
            f"--resume: the latest rollout ({latest.rollout}) completed; drop --resume to "
            "begin another"
        )
    gone = sorted(set(latest.hosts) - set(runbook.hosts))
    if gone:
        raise BadInput(
            f"--resume: the rollout {latest.rollout} has hosts the runbook no longer has "
            f"({', '.join(gone)}); put them back in [hosts], or begin a new rollout "
            "without --resume"
        )
    return latest


def failed_checks(checks: list[dict[str, Any]]) -> list[str]:
    """Each failed check as ``host: reason``."""
    return [f"{c['host']}: {c['reason'] or c['name'] + ' failed'}" for c in checks if not c["ok"]]
