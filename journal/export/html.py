"""The postmortem as one self-contained HTML file: styles inline, charts as inline SVG, no
script, no font, no image and no link to anything outside the file.

The template is ``templates/export/postmortem.html``, rendered with Jinja's autoescaping on
(everything from hosts is text, never markup); only the charts' SVG, which
:mod:`journal.export.chart` makes with every text in it escaped, goes in as markup. The page
carries its own Content-Security-Policy (:data:`POLICY`, also sent as a header when the web UI
serves it): no request of any kind may leave it, whatever a host printed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from journal.export import wording
from journal.resources import folder
from journal.runs import along

#: ``templates/`` at the repository root.
TEMPLATES = folder("templates")

#: Nothing may be fetched; only the page's own inline styles apply (there is no script at
#: all, so inline styles cannot be steered by one, and no request can carry anything away).
POLICY = "; ".join(
    [
        "default-src 'none'",
        "style-src 'unsafe-inline'",
        "img-src data:",
        "base-uri 'none'",
        "form-action 'none'",
    ]
)


@cache
def environment() -> Environment:
    """The Jinja environment of the exports (the web app's is not needed, nor its URLs)."""
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        when=wording.when,
        seconds=wording.seconds,
        elapsed=wording.elapsed,
        figure=wording.figure,
        percent=wording.percent_text,
        spread=wording.spread_text,
        first_line=wording.first_line,
        prose=wording.code_spans,
    )
    env.globals.update(
        outcome=wording.outcome,
        what=wording.what,
        took=wording.took,
        period=wording.period,
        series_name=wording.series_name,
        stack_rows=wording.stack_rows,
        EMPTY=wording.EMPTY,
        told_changes=wording.told_changes,
        quiet_text=wording.quiet_text,
    )
    return env


def render(doc: dict[str, Any]) -> str:
    """The HTML document."""
    parts: list[str] = []
    write(doc, parts.append)
    return "".join(parts)


class _Svg:
    """A chart's SVG as markup (:mod:`journal.export.chart` escapes every text in it), not
    copied as :class:`Markup` would copy it: a long journal's charts are megabytes."""

    def __init__(self, svg: str) -> None:
        self.svg = svg

    def __html__(self) -> str:
        return self.svg


def write(
    doc: dict[str, Any], out: Callable[[str], Any], short: Callable[[str], str] = str
) -> None:
    """Write the HTML document to ``out`` as the template makes it (its long lists an item
    at a time, where they are :class:`~journal.streamed.Lazy`), run ids as ``short`` shows
    them."""
    charts = [{**chart, "svg": _Svg(chart["svg"])} for chart in doc["charts"]]
    template = environment().get_template("export/postmortem.html")
    commands = along(short, doc["supporting"]["commands"])
    pitfalls = along(short, doc["pitfalls"])
    parts = template.generate(
        doc=doc, charts=charts, policy=POLICY, short=short, commands=commands, pitfalls=pitfalls
    )
    for part in parts:
        out(part)
