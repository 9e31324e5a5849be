"""Gated rollouts in the browser: the list of a journal's rollouts, and one rollout's page
(its batches in order, each host's gate checks with its figures against its own baseline,
where it stopped and why, the hosts left out of service). Read from the rollout events alone
(:func:`journal.projections.rollouts.rollouts`)."""

from __future__ import annotations

from flask import Blueprint, abort, render_template

from journal.events import NotificationSent
from journal.projections.notifications import deliveries
from journal.projections.rollouts import rollouts
from journal.web.state import store, stored_or_404

bp = Blueprint("rollouts", __name__, url_prefix="/j/<journal>")


@bp.get("/rollouts")
def index(journal: str) -> str:
    state = stored_or_404(journal)
    found = rollouts(store(), journal).all()
    return render_template(
        "rollouts/index.html", state=state, journal=journal, rollouts=list(reversed(found))
    )


@bp.get("/rollout/<rollout>")
def page(journal: str, rollout: str) -> str:
    state = stored_or_404(journal)
    found = rollouts(store(), journal)
    view = found.by_id.get(rollout)
    if view is None:  # a unique start of its id, as pages show it
        matches = [r for r in found.by_id if r.startswith(rollout)]
        if len(matches) != 1:
            abort(404, f"the journal {journal!r} has no rollout {rollout!r}")
        view = found.by_id[matches[0]]
    told = deliveries(store().read(journal, types=[NotificationSent.type]))
    return render_template(
        "rollouts/page.html",
        state=state,
        journal=journal,
        rollout=view,
        notifications=[s for s in told if s.trigger == "gate-failed" and s.subject == view.rollout],
    )
