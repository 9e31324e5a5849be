"""The findings page: every finding with its evidence and advice, and acknowledging one
(a POST with a note and the CSRF token, recorded as ``PitfallAcknowledged``) and withdrawing
that (``PitfallUnacknowledged``). Resolved findings stay listed, greyed, with what resolved
them. The page shows :data:`PER_PAGE` at a time, of one state or all and of one pitfall or
all; a link to one finding (:func:`finding_url`) opens the page that holds it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from flask import Blueprint, abort, redirect, render_template, request
from werkzeug.wrappers import Response

from journal.errors import BadInput
from journal.pitfalls.base import STATES, Finding
from journal.service.findings import acknowledge, unacknowledge
from journal.web.state import states, store, stored_or_404
from journal.web.templating import finding_url, wants_fragment

bp = Blueprint("findings", __name__, url_prefix="/j/<journal>/findings")

#: A note is a sentence or a paragraph, not a document.
MAX_NOTE = 4000


#: Findings on one page: a long journal holds thousands (the page of every one of them was
#: 29 MB of HTML at 100,000 events).
PER_PAGE = 50

#: What the page can show: every finding, or those of one state.
SHOWS = ("all", *STATES)


@dataclass(frozen=True)
class Shown:
    """One page of the findings: those of the state and pitfall asked (``show``, ``pitfall``),
    ``page`` of ``pages``, with how many each state holds under the pitfall asked."""

    findings: list[Finding]
    show: str
    pitfall: str
    page: int
    pages: int
    matching: int
    by_state: dict[str, int]
    pitfalls: list[str]

    def query(self, **change: object) -> dict[str, object]:
        """The page's query with ``change`` applied (the defaults left out)."""
        query: dict[str, object] = {"show": self.show, "pitfall": self.pitfall, "page": 1}
        query.update(change)
        return {
            k: v
            for k, v in query.items()
            if v and not (k == "show" and v == "all") and not (k == "page" and v == 1)
        }


def shown(findings: list[Finding], args: Mapping[str, str]) -> Shown:
    """The page of ``findings`` that ``args`` ask for: ``show`` (a state, or all: open ones
    first, then acknowledged, then resolved, each in the order found), ``pitfall``
    (an id, or every one), ``page``; ``finding`` (a key) asks for the page that holds it, in
    the state asked if it is one of those, else among all."""
    show = args.get("show", "all")
    if show not in SHOWS:
        abort(400, f"show={show!r} is no state of a finding: one of {', '.join(SHOWS)}")
    pitfall = args.get("pitfall", "")
    ids = sorted({f.id for f in findings})
    if pitfall and pitfall not in ids:
        pitfall = ""  # a pitfall with no finding (any more): all of them
    of_pitfall = [f for f in findings if not pitfall or f.id == pitfall]
    by_state = {state: 0 for state in STATES}
    for found in of_pitfall:
        by_state[found.state] += 1
    key = args.get("finding", "")
    wanted = next((f for f in findings if f.key == key), None) if key else None
    if wanted is not None:
        if pitfall and wanted.id != pitfall:
            pitfall, of_pitfall = "", findings
        if show != "all" and wanted.state != show:
            show = "all"
    matching = [f for f in of_pitfall if show == "all" or f.state == show]
    if show == "all":  # what still needs someone first, then what was dealt with
        rank = {state: i for i, state in enumerate(STATES)}
        matching.sort(key=lambda f: rank[f.state])
    pages = max(1, -(-len(matching) // PER_PAGE))
    if wanted is not None:
        page = next(i for i, f in enumerate(matching) if f is wanted) // PER_PAGE + 1
    else:
        try:
            page = int(args.get("page", "1"))
        except ValueError:
            abort(400, f"page={args.get('page')!r} is no page number")
        page = min(max(page, 1), pages)
    at = (page - 1) * PER_PAGE
    return Shown(
        matching[at : at + PER_PAGE], show, pitfall, page, pages, len(matching), by_state, ids
    )


@bp.get("")
def page(journal: str) -> str:
    state = stored_or_404(journal)
    return render_template(
        "findings/page.html",
        state=state,
        journal=journal,
        shown=shown(state.findings, request.args),
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
    state = stored_or_404(journal)
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
    fresh = states().stored(journal)
    assert fresh is not None
    found = next((f for f in fresh.findings if f.key == shown), None)
    if wants_fragment() and found is not None:
        return render_template(
            "findings/_finding.html", journal=journal, found=found, runs=fresh.timeline.runs
        )
    return redirect(finding_url(journal, shown), 303)
