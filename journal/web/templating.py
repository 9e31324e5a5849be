"""What templates use besides their context: filters for times and sizes, evidence links,
and whether a request wants a whole page or an htmx fragment."""

from __future__ import annotations

import json
from typing import Any

from flask import Flask, current_app, g, request, url_for
from markupsafe import Markup, escape

from journal.display import first_line, plural, seconds, when
from journal.pitfalls.base import SEVERITIES
from journal.probes.summary import shown, summary
from journal.projections.packages import change_text
from journal.reading.subject import Evidence
from journal.runs import ShortIds
from journal.web.output import page_of
from journal.web.selection import kind_of


def wants_fragment() -> bool:
    """An htmx request for a part of the page (a history restore wants the whole page)."""
    return (
        request.headers.get("HX-Request") == "true"
        and request.headers.get("HX-History-Restore-Request") != "true"
    )


def evidence_href(
    journal: str, ev: Evidence, here: str | None = None, page: int | None = None
) -> str | None:
    """Where an evidence line is shown: its run's page (the page holding the line) at
    ``#L<line>``; just the anchor when that line is on the page being rendered."""
    if not ev.run:
        return None
    if ev.run.startswith("probe-"):
        # a probe run on its own has no run page: its item on the timeline (probe-SEQ)
        return url_for("timeline.page", journal=journal) + f"#item-{ev.run[len('probe-') :]}"
    if ev.line is None:
        # A fact rather than a line (the command, a snapshot, a probe): its run's page.
        return None if ev.run == here else url_for("runs.page", journal=journal, run_id=ev.run)
    at = page_of(ev.line, current_app.config["LINES_PER_PAGE"])
    if ev.run == here and at == page:
        return f"#L{ev.line}"
    return url_for("runs.page", journal=journal, run_id=ev.run, page=at) + f"#L{ev.line}"


def size(n: int | None) -> str:
    """Bytes as people read them: ``812 B``, ``4.1 KiB``, ``50.0 MiB``."""
    value = float(n or 0)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def pretty(value: Any) -> str:
    """A probe result or actual value as indented JSON text."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def actual(value: Any) -> str:
    """An expectation's actual value as its verdict line spells it."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def finding_url(journal: str, key: str) -> str:
    """Where one finding is shown: the findings page that holds it, at its anchor."""
    return url_for("findings.page", journal=journal, finding=key) + f"#f-{key}"


def version(value: Any) -> Markup:
    """A version for a narrow table: it may break before its local part and after a dot
    (``2.12.0.<wbr>dev20260226<wbr>+cu130``), never inside a token (``+cu`` / ``128``)."""
    text = str(escape(str(value)))  # plain text: Markup's replace would escape the tags
    return Markup(text.replace("+", "<wbr>+").replace(".", ".<wbr>"))


def short_id(run: str) -> str:
    """A run id as a person types it (:class:`journal.runs.ShortIds`), worked out once per
    request; links keep the whole id."""
    if "short_ids" not in g:
        from journal.web.state import store

        g.short_ids = ShortIds(store().id_neighbours)
    return g.short_ids(run)


def has_rollouts(journal: str) -> bool:
    """Whether the journal has a gated rollout (its tab is shown): one look at the type
    index, once per request."""
    known = g.setdefault("has_rollouts", {})
    if journal not in known:
        from journal.events import RolloutStarted
        from journal.web.state import store

        found = store().read(journal, types=[RolloutStarted.type])
        known[journal] = next(iter(found), None) is not None
        close = getattr(found, "close", None)
        if close is not None:
            close()
    return known[journal]


def init_app(app: Flask) -> None:
    app.jinja_env.filters.update(
        when=when,
        seconds=seconds,
        first_line=first_line,
        size=size,
        pretty=pretty,
        actual=actual,
        change_text=change_text,
        shown=shown,
        version=version,
        short_id=short_id,
    )
    app.jinja_env.globals.update(
        plural=plural,
        probe_summary=summary,
        evidence_href=evidence_href,
        finding_url=finding_url,
        has_rollouts=has_rollouts,
        kind_of=kind_of,
        SEVERITIES=SEVERITIES,
    )
    app.jinja_env.trim_blocks = True
    app.jinja_env.lstrip_blocks = True
