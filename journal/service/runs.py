"""Finding a recorded step run by its id or a unique start of it (`journal show`, `journal
export cast`, `journal rollback --to RUN`), and the run `before:STEP` names on a host."""

from __future__ import annotations

from collections.abc import Sequence

from journal.errors import BadInput
from journal.projections.timeline import StepRunView

#: Run states that make a run of a step a try that the next run of it tries again.
FAILED = frozenset({"failed", "timed-out", "interrupted", "lost"})


def find_run(journal: str, prefix: str, runs: list[str]) -> str:
    """The run ``prefix`` names (a run id or its unique start); else bad input naming it."""
    matches = [run for run in runs if run.startswith(prefix)] if prefix else []
    if prefix in runs:
        return prefix
    if len(matches) == 1:
        return matches[0]
    from journal.runbook import suggest

    if matches:
        raise BadInput(f"run id {prefix!r} is ambiguous: {', '.join(matches[:5])}")
    hint = suggest(prefix, runs)
    if hint.startswith("; known") and len(runs) > 5:  # not every run of a long journal
        hint = f"; the latest: {', '.join(runs[-5:])}"
    raise BadInput(f"no step run {prefix!r} in {journal}{hint}; `journal log` lists them")


def rollback_runs(runs: Sequence[StepRunView], host: str) -> list[StepRunView]:
    """The runs of ``host`` a rollback target can name: run here (not imported), no benchmark."""
    return [r for r in runs if r.host == host and not r.imported and r.benchmark is None]


def latest_attempt(runs: Sequence[StepRunView], step: str) -> int | None:
    """The index in ``runs`` (one host's, in order: :func:`rollback_runs`) of the first try of
    ``step``'s latest attempt: its latest run, or the first of the failed tries right before
    it, so that a retried failure rolls back to before the first try. None if it never ran."""
    index = next((i for i in range(len(runs) - 1, -1, -1) if runs[i].step == step), None)
    if index is None:
        return None
    while index > 0 and runs[index - 1].step == step and runs[index - 1].status in FAILED:
        index -= 1
    return index


def latest_run(runs: Sequence[StepRunView], step: str) -> int | None:
    """The index in ``runs`` of ``step``'s latest run (what `--to STEP` names)."""
    return next((i for i in range(len(runs) - 1, -1, -1) if runs[i].step == step), None)
