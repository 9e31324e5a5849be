"""The timeline page: steps, probes and notes in order, filtered through the URL.

The filter form sends htmx GETs to the page's own URL and pushes it, so the URL always says
what is shown: loaded directly it renders the same filtered page; asked by htmx it answers
with the ``_timeline_items.html`` fragment only. ``/j/<journal>/items?after=SEQ`` answers
with what changed since event SEQ; ``/j/<journal>/live?after=SEQ`` streams it as it happens
(Server-Sent Events, one ``items`` message per change), which the page follows.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from typing import Any

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    make_response,
    render_template,
    request,
    url_for,
)
from markupsafe import Markup, escape

from journal.events import NotificationSent
from journal.pitfalls.base import Finding
from journal.projections.notifications import deliveries
from journal.projections.timeline import StepRunView
from journal.runs import STATUSES
from journal.service.story import open_errors, run_status
from journal.web.selection import (
    KINDS,
    NEWEST,
    TimelineQuery,
    changed_since,
    host_rows,
    hosts_of,
    runs_matching,
    select_items,
)
from journal.web.sse import after_seq, event_stream, message
from journal.web.state import JournalState, journal_or_404, states, store, stored_or_404
from journal.web.templating import wants_fragment

bp = Blueprint("timeline", __name__, url_prefix="/j/<journal>")


def _context(state: JournalState, query: TimelineQuery) -> dict[str, Any]:
    matching = runs_matching(store(), state.journal, query.q) if query.q else None
    items = select_items(state, query, matching)
    count = state.partial or len(items)
    if not query.every and count > NEWEST:
        items = items[-NEWEST:]
    hosts = hosts_of(state, state.timeline.items)
    shown_hosts = [query.host] if query.host in hosts else hosts
    return {
        "state": state,
        "journal": state.journal,
        "query": query,
        "items": items,
        "count": count,
        "earlier": count - len(items),
        "rows": host_rows(items) if query.layout == "hosts" else [],
        "hosts": hosts,
        "columns": shown_hosts,
        "open_by_run": state.open_by_run(),
        "findings_by_run": state.findings_by_run(),
        "kinds": KINDS,
        "statuses": STATUSES,
        "updated": [],
        "head": store().last(),
        "matching": matching or {},
    }


def _plain(query: TimelineQuery) -> bool:
    """Whether the query asks for the newest items unfiltered (read from the stored index,
    not from the whole journal held)."""
    return not (query.active or query.every or query.layout != "list")


def _state_for(journal: str, query: TimelineQuery, after: int | None = None) -> JournalState:
    """The journal as the query needs it: the newest items only for the plain page (with
    the runs changed since event ``after``, where given), else the whole journal."""
    if not _plain(query):
        return journal_or_404(journal)
    state = states().newest(journal, NEWEST)
    if state is None:
        abort(404, f"there is no journal {journal!r} in this database")
    if after is not None:
        state = replace(state, touched=store().runs_touched(journal, after))
    return state


@bp.get("")
def page(journal: str) -> str | Response:
    query = TimelineQuery.from_args(request.args)
    state = _state_for(journal, query)
    context = _context(state, query)
    if wants_fragment():
        response = make_response(render_template("timeline/_timeline_items.html", **context))
        # The address bar gets the filters that are set, not every empty field of the form.
        response.headers["HX-Push-Url"] = url_for("timeline.page", journal=journal, **query.args())
        return response
    return render_template("timeline/page.html", **context)


@bp.get("/story")
def story_part(journal: str) -> str:
    """The story header alone, for a first page shown before the whole journal was restored
    (it waits for the fold under way in the background, and reuses it)."""
    state = stored_or_404(journal)
    return render_template("timeline/_story.html", journal=journal, told=state.story(), state=state)


@bp.get("/plan/<plan_run>")
def plan(journal: str, plan_run: str) -> str:
    """One plan run: its step runs on every host, in order, with how each ended."""
    state = journal_or_404(journal)
    runs = [r for r in state.timeline.runs.values() if r.plan_run == plan_run]
    if not runs:
        abort(404, f"the journal {journal!r} has no plan run {plan_run!r}")
    return render_template(
        "runs/plan.html",
        state=state,
        journal=journal,
        plan_run=plan_run,
        runs=runs,
        findings_by_run=state.findings_by_run(),
        notifications=[
            sent
            for sent in deliveries(store().read(journal, types=[NotificationSent.type]))
            if sent.trigger == "plan-finished" and sent.subject == plan_run
        ],
    )


@bp.app_template_global("run_status")
def shown_status(run: StepRunView, findings: list[Finding]) -> str:
    """The status a run is shown with (``no change`` for a succeeded no-op)."""
    return run_status(run, findings)


@bp.app_template_global("open_errors")
def shown_open_errors(run: StepRunView, findings: list[Finding]) -> int:
    return open_errors(run, findings)


#: A backticked part of a finding's advice: `journal run probe torch-env`.
_TICKED = re.compile(r"`([^`\n]+)`")


@bp.app_template_filter("code_spans")
def code_spans(text: str | None) -> Markup:
    """Text with its backticked parts as <code>: escaped first, then marked up."""
    return Markup(_TICKED.sub(r"<code>\1</code>", str(escape(text or ""))))


@bp.get("/items")
def items(journal: str) -> str:
    """The items fragment; with ``after=SEQ`` only what is new or changed since event SEQ."""
    after = request.args.get("after", type=int)
    state = _state_for(journal, TimelineQuery.from_args(request.args), after)
    context = _context(state, TimelineQuery.from_args(request.args))
    if after is not None:
        context["items"], context["updated"] = changed_since(state, context["items"], after)
        context["rows"] = host_rows(context["items"]) if context["query"].layout == "hosts" else []
        return render_template("timeline/_timeline_new.html", **context)
    return render_template("timeline/_timeline_items.html", **context)


#: A stream filtered by text reads the output for each change: at most once a second.
SEARCH_EVERY_S = 1.0


@bp.get("/live")
def live(journal: str) -> Response:
    """The timeline's changes as they happen, filtered as the page is: an ``items`` message
    with the new items and the runs shown that gained events since the last one sent."""
    stored_or_404(journal)
    query = TimelineQuery.from_args(request.args)
    cursor = after_seq()
    every = SEARCH_EVERY_S if query.q else 0.0
    tried = 0.0

    def poll() -> tuple[list[str], bool]:
        nonlocal cursor, tried
        now = time.monotonic()
        if now - tried < every:
            return [], False
        tried = now
        if states().last_seq(journal) <= cursor:
            return [], False
        state = _state_for(journal, query, cursor)
        context = _context(state, query)
        shown = context["items"]
        new, updated = changed_since(state, shown, cursor)
        cursor = state.last_seq
        if not new and not updated:
            return [], False
        if query.layout != "hosts":
            context["items"], context["updated"] = new, updated
        html = render_template("timeline/_live.html", **context)
        return [message("items", html, cursor)], False

    return event_stream(poll, current_app.config["LIVE_TIMELINE_S"])
