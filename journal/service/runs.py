"""Finding a recorded step run by its id or a unique start of it (`journal show`, `journal
export cast`, `journal rollback --to RUN`), and the run `before:STEP` names on a host."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from journal.errors import BadInput
from journal.projections.timeline import StepRunView
from journal.runs import TRIED_AGAIN

if TYPE_CHECKING:
    from journal.store import EventStore


def find_run(journal: str, prefix: str, runs: list[str]) -> str:
    """The run ``prefix`` names (a run id or its unique start) among ``runs`` (every run of
    the journal, in order); else bad input naming it."""
    matches = [run for run in runs if run.startswith(prefix)] if prefix else []
    return _named(journal, prefix, matches, lambda: (runs, runs[-6:]))


def find_stored_run(store: EventStore, journal: str, prefix: str) -> tuple[str, int]:
    """The run ``prefix`` names (a run id or its unique start, else a step's name: its latest
    run on any host) and the seq of its start, asked of the store's run index and the stored
    timeline's (the journal is not read); else bad input, as :func:`find_run`."""
    found = dict(store.step_runs(journal, prefix)) if prefix else {}
    if prefix and not found:
        from journal.projections.digest import digest

        latest = digest(store, journal, lambda d: d.latest_of_step(prefix))
        if latest is not None:
            return latest

    def known() -> tuple[list[str], list[str]]:
        # a close match is looked for among the ids that sort next to the one given (those
        # sharing the longest start with it) and the latest runs
        latest = store.step_runs(journal)
        near = dict(latest)
        near.update(store.step_runs(journal, before=prefix, limit=3))
        near.update(store.step_runs(journal, after=prefix, limit=3))
        in_order = sorted(near, key=near.__getitem__)
        return in_order, sorted(dict(latest), key=near.__getitem__)

    run = _named(journal, prefix, list(found), known)
    return run, found[run]


def _named(
    journal: str,
    prefix: str,
    matches: list[str],
    known: Callable[[], tuple[list[str], list[str]]],
) -> str:
    """The run of ``matches`` (the runs whose id starts with ``prefix``, in order: at least
    five, and the run named exactly when there is one) ``prefix`` names; else bad input saying
    so, with a hint from ``known()``: the runs a close match is looked for among (all of them
    when the journal has six runs or fewer) and the latest six, in order."""
    if prefix in matches:
        return prefix
    if len(matches) == 1:
        return matches[0]
    from journal.runbook import suggest

    if matches:
        raise BadInput(f"run id {prefix!r} is ambiguous: {', '.join(matches[:5])}")
    runs, latest = known()
    hint = suggest(prefix, runs)
    if hint.startswith("; known") and len(latest) > 5:  # not every run of a long journal
        hint = f"; the latest: {', '.join(latest[-5:])}"
    raise BadInput(f"no step run {prefix!r} in {journal}{hint}; `journal log` lists them")


def rollback_runs(runs: Sequence[StepRunView], host: str) -> list[StepRunView]:
    """The runs of ``host`` a rollback target can name: run here (not imported), no benchmark."""
    return [r for r in runs if r.host == host and not r.imported and r.benchmark is None]


class LatestOf:
    """The runs ``--to STEP`` and ``--to before:STEP`` name, folded over one host's runs in
    order (:func:`rollback_runs`) one at a time, so a year of runs is never held:
    ``latest``, the step's latest run; ``first_try``, the first try of its latest attempt (the
    first of the failed tries right before it, so that a retried failure rolls back to
    before the first try). Both None while the step has not run."""

    def __init__(self, step: str) -> None:
        self.step = step
        self.latest: StepRunView | None = None
        self.first_try: StepRunView | None = None
        self._tried: StepRunView | None = None  # the first of the tries right before

    def add(self, run: StepRunView) -> None:
        if run.step != self.step:
            self._tried = None
            return
        self.latest = run
        self.first_try = self._tried or run
        self._tried = (self._tried or run) if run.status in TRIED_AGAIN else None


def latest_attempt(runs: Sequence[StepRunView], step: str) -> int | None:
    """The index in ``runs`` (one host's, in order: :func:`rollback_runs`) of the first try of
    ``step``'s latest attempt (:class:`LatestOf`). None if it never ran."""
    fold = LatestOf(step)
    for run in runs:
        fold.add(run)
    return next((i for i, run in enumerate(runs) if run is fold.first_try), None)
