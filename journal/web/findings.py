"""The findings page: every finding with its evidence and advice, and acknowledging one
(a POST with a note and the CSRF token, recorded as ``PitfallAcknowledged``)."""

from __future__ import annotations

from flask import Blueprint, abort, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from journal.errors import BadInput
from journal.service.findings import acknowledge
from journal.web.state import journal_or_404, states, store
from journal.web.templating import wants_fragment

bp = Blueprint("findings", __name__, url_prefix="/j/<journal>/findings")

#: A note is a sentence or a paragraph, not a document.
MAX_NOTE = 4000


@bp.get("")
def page(journal: str) -> str:
    state = journal_or_404(journal)
    shown = request.args.get("show", "all")
    findings = [f for f in state.findings if shown != "open" or f.acknowledged is None]
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
    state = journal_or_404(journal)
    key = (request.form.get("finding") or "").strip()
    note = (request.form.get("note") or "").strip()
    if len(note) > MAX_NOTE:
        abort(400, f"the note is longer than {MAX_NOTE} characters")
    try:
        acknowledge(store(), journal, key, note)
    except BadInput as exc:
        found = next((f for f in state.findings if f.key == key), None)
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
    found = next((f for f in fresh.findings if f.key == key), None)
    if wants_fragment() and found is not None:
        return render_template(
            "findings/_finding.html", journal=journal, found=found, runs=fresh.timeline.runs
        )
    return redirect(url_for("findings.page", journal=journal) + f"#f-{key}", 303)
