"""The findings page: every finding with its evidence and advice, and acknowledging one
(a POST with a note and the CSRF token, recorded as ``PitfallAcknowledged``) and withdrawing
that (``PitfallUnacknowledged``). Resolved findings stay listed, greyed, with what resolved
them."""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, abort, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from journal.errors import BadInput
from journal.service.findings import acknowledge, unacknowledge
from journal.web.state import journal_or_404, states, store
from journal.web.templating import wants_fragment

bp = Blueprint("findings", __name__, url_prefix="/j/<journal>/findings")

#: A note is a sentence or a paragraph, not a document.
MAX_NOTE = 4000


@bp.get("")
def page(journal: str) -> str:
    state = journal_or_404(journal)
    shown = request.args.get("show", "all")
    findings = [f for f in state.findings if shown != "open" or f.is_open]
    return render_template(
        "findings/page.html",
        state=state,
        journal=journal,
        findings=findings,
        show=shown,
        runs=state.timeline.runs,
    )


@bp.post("/ack")
def ack(journal: str) -> Response | tuple[str, int] | str:
    """Acknowledge a finding (its key in ``finding``) with ``note`` and optionally ``by``."""
    note = (request.form.get("note") or "").strip()
    if len(note) > MAX_NOTE:
        abort(400, f"the note is longer than {MAX_NOTE} characters")
    by = (request.form.get("by") or "").strip()[:200] or None
    return _change(journal, lambda key: acknowledge(store(), journal, key, note, by))


@bp.post("/unack")
def unack(journal: str) -> Response | tuple[str, int] | str:
    """Withdraw the acknowledgement of a finding (its key, or the pitfall id acknowledged)."""
    by = (request.form.get("by") or "").strip()[:200] or None
    return _change(journal, lambda key: unacknowledge(store(), journal, key, by))


def _change(journal: str, record: Callable[[str], object]) -> Response | tuple[str, int] | str:
    """Record an acknowledgement or its withdrawal; the finding anew (htmx) or the page."""
    state = journal_or_404(journal)
    key = (request.form.get("finding") or "").strip()
    shown = (request.form.get("shown") or key).strip()
    try:
        record(key)
    except BadInput as exc:
        found = next((f for f in state.findings if f.key == shown), None)
        if wants_fragment() and found is not None:
            return render_template(
                "findings/_finding.html",
                journal=journal,
                found=found,
                runs=state.timeline.runs,
                error=str(exc),
            )
        abort(400, str(exc))
    fresh = states().get(journal)
    assert fresh is not None
    found = next((f for f in fresh.findings if f.key == shown), None)
    if wants_fragment() and found is not None:
        return render_template(
            "findings/_finding.html", journal=journal, found=found, runs=fresh.timeline.runs
        )
    return redirect(url_for("findings.page", journal=journal) + f"#f-{shown}", 303)
