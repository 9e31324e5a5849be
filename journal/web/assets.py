"""Scripts and styles the app serves besides its own ``static/``: htmx and its SSE extension
from ``node_modules/`` (installed by `npm ci` from package-lock.json, never copied into the
repository), and ansi2html's style sheet for the colour classes it writes."""

from __future__ import annotations

from pathlib import Path

from flask import Blueprint, Response, abort, current_app, send_file

from journal.resources import VENDOR
from journal.web.output import ansi_css

bp = Blueprint("assets", __name__, url_prefix="/static")


@bp.get("/vendor/<name>")
def vendor(name: str) -> Response:
    if name not in VENDOR:
        abort(404)
    path = Path(current_app.config["NODE_MODULES"]) / VENDOR[name]
    if not path.is_file():
        abort(404, f"{VENDOR[name]} is not installed: run `make install` (npm ci)")
    return send_file(path, mimetype="text/javascript", max_age=3600)


@bp.get("/ansi.css")
def ansi() -> Response:
    response = Response(ansi_css(), mimetype="text/css")
    response.cache_control.max_age = 3600
    return response
