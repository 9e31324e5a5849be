"""The hosts page: per group of hosts, a matrix of hosts × what matters in a GPU stack (from
the drift projection, as `journal drift` shows it): the majority value of each row, the hosts
that differ from it marked, and for each the step run after which it diverged, linked."""

from __future__ import annotations

import threading

from flask import Blueprint, current_app, render_template

from journal.events import NotificationSent
from journal.projections.drift import EVENT_TYPES, Readings, compare, fold, runbook_groups
from journal.projections.drift.kept import current_readings
from journal.projections.notifications import deliveries
from journal.web.state import store, stored_or_404

bp = Blueprint("hosts", __name__, url_prefix="/j/<journal>/hosts")


class ReadingsCache:
    """Each journal's drift readings, read from where they were kept
    (:mod:`journal.projections.drift.kept`) and then extended by the probes, snapshots
    and step runs appended since (output is never read), under a lock: requests share it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.journals: dict[str, Readings] = {}

    def current(self, journal: str) -> Readings:
        with self.lock:
            state = self.journals.get(journal)
            if state is None:  # the kept readings, folded on from where they were stored
                state = current_readings(store(), journal)
            records = store().read(journal, after=state.last_seq, types=EVENT_TYPES)
            self.journals[journal] = fold(journal, records, state)
            return self.journals[journal]


def _cache() -> ReadingsCache:
    return current_app.extensions.setdefault("journal_drift", ReadingsCache())


@bp.get("")
def page(journal: str) -> str:
    state = stored_or_404(journal)
    cache = _cache()
    readings = cache.current(journal)
    with cache.lock:  # a fold extending the same readings must not run meanwhile
        groups = runbook_groups(readings.runbook, journal) or readings.groups
        report = compare(readings, groups)
    told = deliveries(store().read(journal, types=[NotificationSent.type]))
    return render_template(
        "hosts/page.html",
        state=state,
        journal=journal,
        report=report,
        notifications=[sent for sent in told if sent.trigger in ("drift", "test")][-20:],
    )
