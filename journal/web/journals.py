"""The journals page: every journal of the database, how far its plan got, what it found."""

from __future__ import annotations

from dataclasses import dataclass

from flask import Blueprint, render_template

from journal.projections.progress import HostState
from journal.web.state import StoredState, all_states
from journal.web.templating import wants_fragment

bp = Blueprint("journals", __name__)


@dataclass(frozen=True)
class JournalSummary:
    """One row of the journals page."""

    name: str
    hosts: list[HostState]
    planned: int
    runs: int
    last_ts: str | None
    open: dict[str, int]
    resolved: int
    acknowledged: int
    events: int


def summarise(state: StoredState) -> JournalSummary:
    timeline = state.timeline
    return JournalSummary(
        name=state.journal,
        hosts=state.index.progress(),
        planned=len(timeline.plan),
        runs=state.index.count("r:"),
        last_ts=timeline.last_ts,
        open=state.open_counts(),
        resolved=sum(1 for f in state.findings if f.state == "resolved"),
        acknowledged=sum(1 for f in state.findings if f.state == "acknowledged"),
        events=timeline.events,
    )


@bp.get("/")
def index() -> str:
    rows = [summarise(state) for state in all_states()]
    template = "journals/_journal_rows.html" if wants_fragment() else "journals/index.html"
    return render_template(template, rows=rows)
