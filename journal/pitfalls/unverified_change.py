"""A step changed packages and nothing checked the env before the next change.

The package snapshots say what a step installed; only a probe says whether the result works:
that torch imports, which CUDA and NCCL it loads, how many GPUs it sees. In the seed upgrade
the five lines that proved the new stack (`torch: 2.12.0.dev20260226+cu130`, `CUDA: 13.0`,
`NCCL: (2, 28, 9)`, …) lived in a terminal scroll-back. A change that no probe looked at before
the next step changed packages again cannot be told apart from the one after it when something
breaks. A step counts as checked when a probe (`probes = ["torch-env"]`) or an expectation
(`expect = {…}`) ran in that step; a probe on the host afterwards (a later step's, or a
`journal run probe`) resolves the finding.

In a transcript (`journal lint`) the output says what
changed (uv's `+`/`-` lines, pip's `Successfully installed`, conda's plan), and what counts as
a check is a later command that exercises the changed stack: a `python -c` / `>>>` import or
version print, a script run by python or torchrun, `python -m torch.utils.collect_env`,
`pip check` / `uv pip check`, a test run (pytest) or a benchmark (`vllm bench`,
`sglang.bench_*`, nccl-tests, llama-bench).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls.base import Finding, finding
from journal.reading.conda import MAMBA_NEEDLES, plan_only
from journal.reading.installs import Change, changes, output_changes, requests, short, unique
from journal.reading.subject import Evidence, Run, Subject

ID = "unverified-change"
ORDER = 90
#: Judges a run by what came after it too (the ledger revisits recent runs).
LOOKS_AHEAD = True
#: Resolved by a probe on the host after the change, in a run that changed nothing itself.
RESOLVED_BY = ("probed",)

#: Packages whose change is what probes exist for.
STACK_PREFIXES = ("torch", "nvidia-", "triton", "flashinfer", "sgl-kernel", "sglang-kernel")


def _checked(run: Run) -> bool:
    """A probe ran after the step (even one that failed: it recorded what it saw), or an
    expectation was checked."""
    return bool(run.probe_events) or bool(run.probes) or bool(run.expectations)


def _changed(run: Run) -> bool:
    return run.diff is not None and not run.diff.empty


def _harmful(change: Change) -> bool:
    return change.key.startswith(STACK_PREFIXES) or change.kind in (
        "downgraded",
        "removed",
        "variant-switched",
    )


#: A command that exercises the installed stack (a transcript's check).
CHECK = re.compile(
    r"(?:^|[\s;&|/])(?:python\d?(?:\.\d+)?|torchrun|pytest|py\.test|accelerate|deepspeed)"
    r"(?=\s|$)(?!\s+-m\s+(?:pip|venv|uv)\b)"
    r"|\bpip3?\s+check\b|\buv\s+pip\s+check\b|\bbench\b|bench_|_perf\b|llama-bench"
    r"|journal\s+run\s+probe"
)


def _output_check(run: Run) -> bool:
    """Whether a transcript command (or a run without snapshots) checks the stack."""
    return bool(CHECK.search(run.command)) and not requests(run.command)


def _output_changes(run: Run) -> list[Change]:
    """What a run without package snapshots changed, as its output says."""
    if run.diff is not None:
        return []
    if not requests(run.command) and not run.has("will be", *MAMBA_NEEDLES):
        return []
    if plan_only(run):
        return []  # conda showed a plan; the output does not say it was carried out
    return [c for c in output_changes(run) if c.after != c.before or c.before is None]


def _transcript(subject: Subject) -> Iterator[Finding]:
    """unverified-change read from output: a change no later command checked."""
    for run in subject.runs:
        found = _output_changes(run)
        if not found:
            continue
        next_change: Run | None = None
        checked = False
        for later in subject.later(run):
            if _output_checks_or_probes(later):
                checked = True
                break
            if _output_changes(later) or _changed(later):
                next_change = later
                break
        if checked:
            continue
        harmful = [c for c in found if _harmful(c)]
        shown = (harmful or found)[:4]
        listed = ", ".join(c.text() for c in shown) + (
            f" and {len(found) - len(shown)} more" if len(found) > len(shown) else ""
        )
        if next_change is not None:
            gap = (
                f"nothing checked the result before `{next_change.command[:60]}` changed "
                "packages again"
            )
        else:
            gap = (
                "no later command checks the result (an import, a version print, pip check, "
                "a test or benchmark)"
            )
        evidence = [run.command_evidence(), *unique(e for c in shown for e in c.evidence[:1])]
        yield finding(
            ID,
            "warning" if harmful else "info",
            f"{short(run)} changed {listed}; {gap}",
            'check the result before anything else: `python -c "import torch; '
            'print(torch.__version__, torch.version.cuda, torch.cuda.is_available())"` (or '
            "an import of what changed) and `pip check`; in a journal, a step with "
            '`probes = ["torch-env"]` and an `expect` table checks every run of it',
            evidence,
            run,
        )


def _output_checks_or_probes(run: Run) -> bool:
    return _checked(run) or _output_check(run)


def detect(subject: Subject) -> Iterator[Finding]:
    if not subject.journal:
        yield from _transcript(subject)
        return
    for run in subject.runs:
        if not _changed(run) or _checked(run):
            continue
        # A probe after the change resolves the finding (journal.pitfalls.lifecycle); the
        # next change before any probe is named, since this change was never checked alone.
        next_change: Run | None = None
        for later in subject.later(run):
            if _changed(later):
                next_change = later
                break
            if _checked(later):
                break
        found = [c for c in changes(run) if c.kind != "reinstalled"] or changes(run)
        harmful = [c for c in found if _harmful(c)]
        shown = (harmful or found)[:4]
        listed = ", ".join(c.text() for c in shown) + (
            f" and {len(found) - len(shown)} more" if len(found) > len(shown) else ""
        )
        if next_change is not None:
            gap = (
                f"no probe ran before {next_change.step} changed packages again (run "
                f"{next_change.key})"
            )
        else:
            gap = f"no probe has run on {run.host} since"
        evidence = [
            run.command_evidence(),
            *(Evidence(f"package snapshots: {c.text()}", None, run.event, run.key) for c in shown),
            Evidence(gap, None, next_change.event if next_change else run.event, run.key),
        ]
        yield finding(
            ID,
            "warning" if harmful else "info",
            f"{run.step} ({short(run)}) changed {listed} on {run.host}; {gap}",
            f"check the result now with `journal run probe torch-env --host {run.host}` (or the "
            f'probe that proves what {run.step} installed), and add `probes = ["torch-env"]` '
            f"with an `expect` table to step {run.step} in the runbook so that every run of it "
            "is checked",
            evidence,
            run,
        )
