"""The throughput page: each series of figures before and after, what lay between, the charts
(the same SVG as the postmortem's), and every figure with where it came from.

A series (one metric of one workload on one host, see :mod:`journal.projections.metrics`) is
a row comparing its first set of figures (the one holding the last figure labelled
``phase=before`` where there is one) with its latest, median against median with each side's
spread (a set: the repeated samples of one benchmark run, or one figure); when more than one
change led there, a row per change of set follows, each saying what lay between (the steps run
on that host, another phase, or a plain repeat). Each row's verdict is the one every surface
shows (:func:`journal.projections.verdict.judge`). Asked by htmx, the page answers with that
table only.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Blueprint, current_app, render_template, url_for

from journal.export.chart import Chart, charts_of, number, rates_first, signed, signed_percent
from journal.projections.metrics import (
    Change,
    Series,
    all_series,
    before_after,
    change_steps,
    direction,
    headline_rank,
    sample_sets,
)
from journal.projections.metrics import changes as changes_of
from journal.projections.timeline import MetricView, Timeline
from journal.projections.verdict import NOISE_PERCENT, summary
from journal.web.output import page_of
from journal.web.state import stored_or_404
from journal.web.templating import wants_fragment

bp = Blueprint("throughput", __name__, url_prefix="/j/<journal>/throughput")

#: How the page (and a timeline item) says where a figure came from.
SOURCES = {
    "manual": "entered by hand",
    "parsed": "benchmark run",
    "builtin": "built-in benchmark",
    "imported": "imported transcript",
}

#: A label value longer than this (a whole command line) is cut short; its title is whole.
LABEL_CHARS = 40

#: The size the page draws its charts at (several side by side at 1400 px, CSS grid).
CHART_SIZE = {"width": 460, "height": 230}

#: Labels that a benchmark's name stands for on this page: its command line is said once, at
#: the top of the page (with the benchmark), not on every row.
SAID_BY_BENCHMARK = ("command",)

#: What each direction is called in a tooltip.
DIRECTIONS = {
    "higher": "higher is better",
    "lower": "lower is better",
    "count": "a count: neither better nor worse",
}


@dataclass(frozen=True)
class ChangeRow:
    """A row of the before/after table: a series from its first figure to its latest
    (``overall``), or one change along the way; ``change`` is None for a series with fewer
    than two trusted figures."""

    series: Series
    change: Change | None
    overall: bool

    @property
    def verdict(self) -> str:
        """``better``, ``worse``, ``noise`` or ``same``: the colour of the change (see
        :func:`journal.projections.verdict.judge`)."""
        return self.change.verdict if self.change else "same"

    @property
    def spread(self) -> tuple[tuple[float, float, int] | None, tuple[float, float, int] | None]:
        """The min, max and count of the repeated samples each side of the change (None for a
        single figure)."""
        if self.change is None:
            return None, None
        v = self.change.judged
        return (
            (v.before_low, v.before_high, v.before_count) if v.before_count > 1 else None,
            (v.after_low, v.after_high, v.after_count) if v.after_count > 1 else None,
        )

    @property
    def only(self) -> tuple[float, float, float, int] | None:
        """For a series of one set of figures (nothing to compare yet): its median, min, max
        and count, as a change's side is shown; None when it has no trusted figure."""
        found = sample_sets(self.series)
        if self.change is not None or not found:
            return None
        return summary(found[-1])

    @property
    def untrusted(self) -> int:
        """How many figures of the series cannot be trusted."""
        return sum(1 for p in self.series.points if p.invalid)


def change_rows(timeline: Timeline) -> list[ChangeRow]:
    """The before/after table: per series (rates first, as the charts) its overall change,
    then each change along the way when there was more than one (or the only one differs
    from the overall)."""
    steps = change_steps(timeline)
    rows = []
    for series in rates_first(all_series(timeline)):
        if series.direction == "count":
            continue
        overall = before_after(series, steps)
        rows.append(ChangeRow(series, overall, True))
        if overall is None:
            continue
        along = changes_of(series, steps)
        same = len(along) == 1 and (along[0].before_set, along[0].after_set) == (
            overall.before_set,
            overall.after_set,
        )
        if not same:
            rows.extend(ChangeRow(series, change, False) for change in along)
    return rows


def count_series(timeline: Timeline) -> list[Series]:
    """The counts (requests done, tokens sent), listed in a table of their own: never charted
    nor compared."""
    return [s for s in all_series(timeline) if s.direction == "count"]


def shared_labels(series: list[Series]) -> list[tuple[str, list[tuple[str, str]]]]:
    """Per benchmark, the labels that a benchmark's name stands for on the page (its command
    line) and that all its series share: said once at the top of the page."""
    found: dict[str, list[dict[str, str]]] = {}
    for one in series:
        bench = one.labels.get("benchmark")
        if bench:
            found.setdefault(bench, []).append(
                {k: v for k, v in one.labels.items() if k in SAID_BY_BENCHMARK}
            )
    out = []
    for bench, label_sets in found.items():
        common = set(label_sets[0].items()).intersection(*(s.items() for s in label_sets[1:]))
        out.append((bench, sorted(common)))
    return out


@bp.app_template_global("series_label_items")
def series_label_items(labels: dict[str, str]) -> list[tuple[str, str]]:
    """A series' labels as :func:`metric_label_items` says them, but with a benchmark the
    long labels it stands for (its command line) left out, said once at the top of the
    page: the benchmark is named alone (``sglang.bench_serving``), every label whole in its
    tooltip."""
    if "benchmark" not in labels:
        return metric_label_items(labels)
    shown = metric_label_items(labels, "host", *SAID_BY_BENCHMARK)
    whole = ", ".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "host")
    return [
        (whole, text.removeprefix("benchmark=")) if text.startswith("benchmark=") else (full, text)
        for full, text in shown
    ]


@bp.app_template_global("metric_source")
def source_text(metric: MetricView) -> str:
    """Where a figure came from, as the pages say it (also on the timeline)."""
    return SOURCES.get(metric.source, metric.source)


def run_href(journal: str, timeline: Timeline, metric: MetricView) -> str | None:
    """The page of the step run a figure was read from (None for one entered by hand)."""
    if not metric.run or metric.run not in timeline.runs:
        return None
    return url_for("runs.page", journal=journal, run_id=metric.run)


def line_href(journal: str, timeline: Timeline, metric: MetricView) -> str | None:
    """The output line a figure was read from, on its run's page."""
    href = run_href(journal, timeline, metric)
    if href is None or metric.line is None:
        return href
    at = page_of(metric.line, current_app.config["LINES_PER_PAGE"])
    return url_for("runs.page", journal=journal, run_id=metric.run, page=at) + f"#L{metric.line}"


@bp.app_template_filter("metric_number")
def metric_number(value: float) -> str:
    """A figure as the pages print it: ``90``, ``54.1``, ``5,689``."""
    return number(value)


@bp.app_template_filter("metric_delta")
def metric_delta(value: float) -> str:
    """A difference of two figures with its sign: ``+42``, ``−35.9``."""
    return signed(value)


@bp.app_template_filter("metric_percent")
def metric_percent(value: float | None) -> str:
    """A change in percent: ``+77.6%``, ``−39.9%``."""
    return signed_percent(value)


@bp.app_template_global("metric_label_items")
def metric_label_items(labels: dict[str, str], *skip: str) -> list[tuple[str, str]]:
    """A figure's labels (but ``skip``, default ``host``) as ``(whole, shown)`` texts: a long
    value (a benchmark's command line) is shown cut short, whole on hover."""
    skip = skip or ("host",)
    out = []
    for key, value in sorted(labels.items()):
        if key in skip:
            continue
        shown = value if len(value) <= LABEL_CHARS else value[: LABEL_CHARS - 1] + "…"
        out.append((f"{key}={value}", f"{key}={shown}"))
    return out


#: A run's figures listed on its timeline item (the rest are on the throughput page).
ITEM_FIGURES = 5


@bp.app_template_global("headline_figures")
def headline_figures(metrics: list[MetricView]) -> tuple[list[MetricView], int]:
    """The figures a run's timeline item lists, rates first, the preferred ones (the
    headline's: output_token_throughput before request_throughput) before the others, counts
    (successful_requests) last: a benchmark prints twenty figures, its throughput is the one
    that matters; and how many it leaves out."""
    place = {"higher": 0, "lower": 1, "count": 2}
    ranked = sorted(
        metrics, key=lambda m: (place[direction(m.name, m.unit)], headline_rank(m.name))
    )
    return ranked[:ITEM_FIGURES], max(0, len(ranked) - ITEM_FIGURES)


@bp.get("")
def page(journal: str) -> str:
    state = stored_or_404(journal)
    timeline = state.figures()
    context = {
        "state": state,
        "journal": journal,
        "rows": change_rows(timeline),
        "directions": DIRECTIONS,
        "noise_percent": NOISE_PERCENT,
        "figures": timeline.metrics,
        "run_href": lambda m: run_href(journal, timeline, m),
        "line_href": lambda m: line_href(journal, timeline, m),
        "runs": timeline.runs,
    }
    if wants_fragment():
        return render_template("throughput/_table.html", **context)
    charts: list[Chart] = charts_of(timeline, **CHART_SIZE)
    return render_template(
        "throughput/page.html",
        charts=charts,
        counts=count_series(timeline),
        shared=[(b, labels) for b, labels in shared_labels(all_series(timeline)) if labels],
        **context,
    )
