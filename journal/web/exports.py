"""The postmortem exports of a journal: ``/j/<journal>/export/postmortem.{md,html,json}``.

Markdown and JSON come as downloads (``Content-Disposition: attachment``); the HTML is shown
in the browser and is the very file `journal export postmortem --format html` writes. That
file holds its styles inline, which the app's Content-Security-Policy (styles only from the
app) would refuse, so its response carries the export's own policy, which the app's headers
keep: inline styles and nothing else, no script and no request at all
(:data:`journal.export.html.POLICY`).

Every format links its action items and failed steps to this server's run pages, as
`journal export postmortem --base-url` does: the base is the request's own URL root (with
the prefix the app is mounted under, Flask's script root).
"""

from __future__ import annotations

import re

from flask import Blueprint, Response, abort, request

from journal.export import postmortem as export
from journal.export.html import POLICY
from journal.runs import ShortIds
from journal.web.state import journal_or_404, store

bp = Blueprint("exports", __name__, url_prefix="/j/<journal>/export")

#: Content types of the formats.
TYPES = {
    "md": "text/markdown; charset=utf-8",
    "html": "text/html; charset=utf-8",
    "json": "application/json",
}


@bp.get("/postmortem.<fmt>")
def postmortem(journal: str, fmt: str) -> Response:
    if fmt not in TYPES:
        abort(404, f"there is no postmortem format {fmt!r}: md, html or json")
    state = journal_or_404(journal)
    base_url = request.url_root.rstrip("/")  # this server, under its script root
    doc = export.of_journal(store(), journal, state.findings, state.timeline, base_url)
    text = export.render(doc, fmt, short=ShortIds(store().id_neighbours))
    response = Response(text, content_type=TYPES[fmt])
    if fmt == "html":
        response.headers["Content-Security-Policy"] = f"{POLICY}; frame-ancestors 'none'"
    else:
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", journal) or "journal"
        response.headers["Content-Disposition"] = f'attachment; filename="{name}-postmortem.{fmt}"'
    return response
