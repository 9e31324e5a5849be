"""The web UI (`journal serve`): a Flask app over one database, a blueprint per page family.

Pages read the store through :mod:`journal.web.state` (projections and findings, cached until
the journal gains an event) and :mod:`journal.web.output` (a step run's output, paged); the
only write is acknowledging a finding, a POST that carries a CSRF token.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from flask import Flask

from journal.resources import folder, vendor_root

#: Output lines per page of a step run (a page is loaded, or appended, at a time).
LINES_PER_PAGE = 2000


def create_app(test_config: dict[str, Any] | None = None) -> Flask:
    """The web app for the database ``DB`` (config, or env JOURNAL_DB, or ./journal.db).

    Config: ``DB``, ``TOKEN`` (every request must carry it when set), ``BIND`` (the address
    served on: without a token, the only Host besides localhost, 127.0.0.1 and ::1 answered),
    ``LINES_PER_PAGE``, ``NODE_MODULES``, and for live pages ``LIVE_POLL_S`` (how often a
    stream asks the store for new events), ``LIVE_RUN_S`` and ``LIVE_TIMELINE_S`` (how long a
    stream lives before the browser reconnects to a fresh one).
    """
    app = Flask(
        __name__,
        template_folder=str(folder("templates")),
        static_folder=str(folder("static")),
    )
    app.config.from_mapping(
        DB=os.environ.get("JOURNAL_DB", "journal.db"),
        TOKEN=None,
        BIND="127.0.0.1",
        SECRET_KEY=secrets.token_hex(32),
        LINES_PER_PAGE=LINES_PER_PAGE,
        NODE_MODULES=str(vendor_root()),
        SESSION_COOKIE_SAMESITE="Strict",
        SESSION_COOKIE_HTTPONLY=True,
        MAX_CONTENT_LENGTH=1024 * 1024,
        LIVE_POLL_S=0.1,
        LIVE_RUN_S=600.0,
        LIVE_TIMELINE_S=300.0,
    )
    if test_config:
        app.config.from_mapping(test_config)

    from journal.web import (
        assets,
        exports,
        findings,
        hosts,
        journals,
        metrics,
        rollouts,
        runs,
        security,
        state,
        templating,
        throughput,
        timeline,
    )

    state.init_app(app)
    security.init_app(app)
    templating.init_app(app)
    for blueprint in (
        assets.bp,
        journals.bp,
        timeline.bp,
        runs.bp,
        findings.bp,
        hosts.bp,
        throughput.bp,
        exports.bp,
        metrics.bp,
        rollouts.bp,
    ):
        app.register_blueprint(blueprint)
    return app
