"""Finding a recorded step run by its id or a unique start of it (`journal show`, `journal
export cast`, `journal rollback --to RUN`)."""

from __future__ import annotations

from journal.errors import BadInput


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
