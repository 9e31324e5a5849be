"""The notices journal sends, made from what the services hear: a failed step run, a finding,
a finished plan, drift, a rollback run, and the sample `journal notify test` sends. Each
carries facts and a link, never a step's output."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from journal.display import plural
from journal.notify.payload import Notice
from journal.runs import FAILED, INTERRUPTED, SUCCEEDED, StepRun

if TYPE_CHECKING:
    from journal.pitfalls.base import Finding


def page_url(base_url: str | None, journal: str, path: str = "") -> str | None:
    """A page of the web UI under ``base_url`` (``/j/JOURNAL`` and ``path``), when given."""
    if not base_url:
        return None
    return f"{base_url.rstrip('/')}/j/{quote(journal, safe='')}{path}"


def run_page(base_url: str | None, journal: str, run: str | None) -> str | None:
    """The web UI's page of a step run."""
    return page_url(base_url, journal, f"/run/{quote(run, safe='')}") if run else None


def _run_facts(journal: str, run: StepRun, base_url: str | None) -> dict[str, Any]:
    """What a notice says of a step run as it ended."""
    outcome = run.outcome
    return {
        "host": run.host,
        "step": run.step,
        "run": run.run_id,
        "status": outcome.status,
        "exit_code": outcome.exit_code,
        "duration": round(outcome.duration, 3),
        "reason": outcome.reason,
        "url": run_page(base_url, journal, run.run_id),
        "subject": run.run_id,
    }


def step_failed(journal: str, run: StepRun, base_url: str | None) -> Notice:
    outcome = run.outcome
    how = outcome.status
    if outcome.exit_code is not None and outcome.status == FAILED:
        how = f"failed (exit status {outcome.exit_code})"
    why = f": {outcome.reason}" if outcome.reason else ""
    text = f"{run.step} on {run.host} {how}{why}"
    return Notice("step-failed", journal, text, **_run_facts(journal, run, base_url))


def rollback_notice(
    journal: str, run: StepRun, target: dict[str, Any], base_url: str | None
) -> Notice:
    packages = len(target.get("packages") or {})
    done = "done" if run.outcome.ok else run.outcome.status
    return Notice(
        "rollback",
        journal,
        f"rollback of {run.host} to {target.get('to')} ({plural(packages, 'package')}, "
        f"{target.get('phase')} run {target.get('run')}): {done}",
        rollback={
            "to": target.get("to"),
            "run": target.get("run"),
            "phase": target.get("phase"),
            "packages": packages,
        },
        fields=(("to", str(target.get("to"))),),
        **_run_facts(journal, run, base_url),
    )


def finding_notice(journal: str, found: Finding, base_url: str | None) -> Notice:
    finding: dict[str, Any] = {
        "id": found.id,
        "key": found.key,
        "severity": found.severity,
        "title": found.title,
        "advice": found.advice,
    }
    facts = found.facts
    if isinstance(facts.get("reference"), int | float) and isinstance(
        facts.get("fallen"), int | float
    ):
        before, after = facts["reference"], facts["fallen"]
        change = round((after - before) / before * 100, 1) if before else None
        finding["figure"] = {"before": before, "after": after, "change_percent": change}
    where = " on ".join(x for x in (found.step, found.host) if x)
    return Notice(
        "finding",
        journal,
        f"{found.severity} {found.id}{f' ({where})' if where else ''}: {found.title}",
        host=found.host,
        step=found.step,
        run=found.run,
        finding=finding,
        url=run_page(base_url, journal, found.run) or page_url(base_url, journal, "/findings"),
        subject=found.key,
        severity=found.severity,
        fields=(("finding", f"{found.severity} `{found.id}`"),),
    )


def plan_notice(
    journal: str,
    code: int,
    steps: list[str],
    hosts: list[str],
    failed: list[str],
    plan_run: str,
    base_url: str | None,
) -> Notice:
    status = SUCCEEDED if code == 0 else (INTERRUPTED if code in (130, 143, 129) else FAILED)
    where = f"{plural(len(steps), 'step')} on {', '.join(hosts) or '-'}"
    stopped = f"; failed: {', '.join(failed)}" if failed else ""
    return Notice(
        "plan-finished",
        journal,
        f"the plan of {journal} {status} ({where}){stopped}",
        status=status,
        exit_code=code,
        plan={
            "run": plan_run,
            "status": status,
            "exit_status": code,
            "steps": steps,
            "hosts": hosts,
            "failed": failed,
        },
        url=page_url(base_url, journal, f"/plan/{quote(plan_run, safe='')}"),
        subject=plan_run,
        fields=(("plan", status),),
    )


def drift_notice(journal: str, groups: list[str], lines: list[str], base_url: str | None) -> Notice:
    return Notice(
        "drift",
        journal,
        f"{plural(len(lines), 'value')} drift from their group's majority in "
        f"{journal} ({', '.join(groups)})",
        drift={"groups": groups, "lines": lines},
        url=page_url(base_url, journal, "/hosts"),
        # which drift: the same divergences give the same subject, told once
        subject=hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:16],
    )


def gate_notice(journal: str, finished: Any, base_url: str | None) -> Notice:
    """A gated rollout stopped: at which batch, why, the hosts left drained."""
    drained = f"; left drained: {', '.join(finished.drained)}" if finished.drained else ""
    return Notice(
        "gate-failed",
        journal,
        f"the rollout {finished.rollout} of {journal} {finished.status} at batch "
        f"{finished.batch}: {finished.reason}{drained}",
        status=finished.status,
        reason=finished.reason,
        gate={
            "rollout": finished.rollout,
            "status": finished.status,
            "batch": finished.batch,
            "reason": finished.reason,
            "drained": finished.drained,
            "untouched": finished.untouched,
        },
        url=page_url(base_url, journal, f"/rollout/{quote(finished.rollout, safe='')}"),
        subject=finished.rollout,
        fields=(("rollout", finished.status),),
    )


def sample_notice(journal: str, channel: str, base_url: str | None) -> Notice:
    return Notice(
        "test",
        journal,
        f"a test notification from journal {journal} to [notify.{channel}]: the set-up works",
        url=page_url(base_url, journal),
        subject=channel,
    )
