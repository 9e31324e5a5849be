"""Charts of the journal's figures, drawn on the server as self-contained SVG.

No script, no stylesheet, no external resource: the same markup is put inline in the web
throughput page and in the postmortem export, and reads the same in both. Colours are
presentation attributes (``fill=``, ``stroke=``), which the Content-Security-Policy allows
where a ``style=`` attribute is refused.

The x axis is the order of events (their sequence numbers, evenly spaced), not wall time: an
imported transcript records all its commands at one time, and a benchmark an hour after the
upgrade should sit next to it, not across the chart. Tick labels still say when a figure was
recorded. A step run that lies between two figures of the chart is a dashed vertical line
with the step's name, so the chart says what happened between 54.1 and 96.1 tok/s.
Everything taken from the record (names, labels, hosts, steps) is escaped: hosts are not
trusted.

A chart of more than :data:`MAX_FIGURES` figures is summarised: the figures, in order, are cut
into :data:`BINS` runs of about as many each; a series draws each run as its median (the
line goes through the medians) and a bar from its lowest figure to its highest, and the step
runs between two runs are one tick above the plot whose tooltip counts them by step. Its
size follows :data:`BINS`, not the journal.
"""

from __future__ import annotations

import bisect
import hashlib
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from journal.export.marks import Mark, of_hosts
from journal.projections.metrics import Series, all_series, change_steps, headline_rank
from journal.projections.timeline import MetricView, Timeline
from journal.projections.verdict import sets

#: Series colours, in the order series appear (the UI's own palette).
PALETTE = ("#3465a4", "#1a7f37", "#b26a00", "#6f42c1", "#0e7c86", "#9a3412")
UNTRUSTED = "#c62828"
MUTED = "#66707a"
GRID = "#e3e7eb"
#: A white outline under text drawn over lines, so it stays readable.
HALO = 'stroke="#ffffff" stroke-width="3" paint-order="stroke"'
#: More series than this on one chart are split over several charts.
MAX_SERIES = 6
FONT = "system-ui, -apple-system, 'Segoe UI', sans-serif"
LEFT, RIGHT, BOTTOM, LEGEND_ROW = 64, 20, 54, 18
#: Labels closer than this (px) on the x axis are not all printed.
TICK_GAP = 26
#: A chart of more places (figures) than this draws them summarised, in :data:`BINS` runs of
#: consecutive figures: a year of nightly benchmarks is 20,000 figures, and a point each is
#: neither readable nor small.
MAX_FIGURES = 160
BINS = 60


@dataclass(frozen=True)
class Chart:
    """One metric (one unit, one benchmark) of the journal as inline SVG, with its series."""

    title: str
    name: str
    unit: str | None
    benchmark: str | None
    svg: str
    series: list[Series]
    slug: str


def number(value: float) -> str:
    """A figure as a chart or table prints it: ``90``, ``54.1``, ``0.18``, ``5,689``."""
    if not math.isfinite(value):
        return str(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    text = f"{value:.2f}" if abs(value) >= 1 or value == 0 else f"{value:.3g}"
    if "." in text and "e" not in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def signed(value: float) -> str:
    """A difference with its sign: ``+42``, ``−35.9`` (a true minus sign)."""
    text = number(abs(value))
    return text if text == "0" else ("+" if value > 0 else "\u2212") + text


def signed_percent(percent: float | None) -> str:
    """A change in percent: ``+77.6%``, ``−39.9%``; ``—`` when there is none (from 0)."""
    if percent is None:
        return "—"
    text = f"{abs(percent):.1f}"
    if text == "0.0":
        return "0.0%"
    return ("+" if percent > 0 else "\u2212") + text + "%"


def marks_of(timeline: Timeline, steps: Sequence[Any] | None = None) -> Sequence[Mark]:
    """The step runs that may change a figure, in seq order (not the benchmarks' own runs:
    ``steps``, where the caller has them as :func:`change_steps` gives them, or as
    :class:`~journal.export.marks.Marks`), each with its ``seq``, ``started``, ``step`` and
    ``host``."""
    return change_steps(timeline) if steps is None else steps


def benchmark_of(series: Series) -> str | None:
    """The benchmark a series was measured by (None for figures entered without one)."""
    return series.labels.get("benchmark") or series.points[0].benchmark


#: Labels a chart's title already says (the benchmark), or that only repeat it at length (the
#: benchmark's whole command line): left out of the legend, whole in its tooltip.
SAID_BY_TITLE = ("benchmark", "command")


def legend_label(series: Series) -> str:
    """What tells a series apart on its chart: host and labels (the benchmark is the
    chart's; its command line, when there is a benchmark, is in the tooltip)."""
    skip = SAID_BY_TITLE if benchmark_of(series) else ("benchmark",)
    labels = [f"{k}={v}" for k, v in sorted(series.labels.items()) if k not in skip]
    parts = [series.host or "no host", *labels]
    return ", ".join(parts)


def full_label(series: Series) -> str:
    """Host and every label of a series, for a tooltip."""
    labels = [f"{k}={v}" for k, v in sorted(series.labels.items())]
    return ", ".join([series.host or "no host", *labels])


def rates_first(series: list[Series]) -> list[Series]:
    """Throughputs and bandwidths (what an upgrade is judged by, the headline figures first)
    before latencies, counts and sizes; otherwise in the order given."""
    return sorted(series, key=lambda s: (not s.higher_is_better, headline_rank(s.name)))


def _clip(text: str, chars: int) -> str:
    """``text`` cut to ``chars`` characters (SVG text does not wrap)."""
    return text if len(text) <= chars else text[: chars - 1] + "…"


def _chart_title(name: str, unit: str | None, benchmark: str | None) -> str:
    return f"{name}{f' ({unit})' if unit else ''}{f' · {benchmark}' if benchmark else ''}"


def charts_of(
    timeline: Timeline | list[MetricView],
    *,
    width: int = 720,
    height: int = 260,
    steps: list[Any] | None = None,
) -> list[Chart]:
    """A chart per metric, unit and benchmark: rates (throughputs, bandwidths) first, then the
    rest, each in the order of its first figure; a group of more than :data:`MAX_SERIES`
    series (hosts or label sets) is split so each stays readable. Each chart shows the step
    runs of its own hosts. Counts (``successful_requests``, ``total_input_tokens``: see
    :func:`~journal.projections.metrics.direction`) are not charted: they are not a
    measure of how well anything ran. ``timeline`` may be its figures alone, with ``steps``
    the runs that may change them (:func:`change_steps`)."""
    marks = marks_of(timeline, steps)  # type: ignore[arg-type]
    groups: dict[tuple[str, str, str], list[Series]] = {}
    for series in rates_first(all_series(timeline)):
        if series.direction == "count":
            continue
        key = (series.name, series.unit or "", benchmark_of(series) or "")
        groups.setdefault(key, []).append(series)
    charts = []
    for (name, unit, bench), members in groups.items():
        parts = [members[i : i + MAX_SERIES] for i in range(0, len(members), MAX_SERIES)]
        for n, part in enumerate(parts, 1):
            hosts = {s.host for s in part}
            shown = marks if None in hosts else of_hosts(marks, hosts)
            title = _chart_title(name, unit or None, bench or None)
            if len(parts) > 1:
                title += f" ({n} of {len(parts)})"
            digest = hashlib.sha1(repr((name, unit, bench, n)).encode()).hexdigest()[:8]
            svg = svg_chart(part, shown, title=title, width=width, height=height)
            charts.append(
                Chart(title, name, unit or None, bench or None, svg, part, f"chart-{digest}")
            )
    return charts


def _nice(step: float) -> float:
    """The round step (1, 2 or 5 times a power of ten) nearest ``step``."""
    power = 10.0 ** math.floor(math.log10(step))
    fraction = step / power
    factor = 1.0 if fraction < 1.5 else 2.0 if fraction < 3 else 5.0 if fraction < 7 else 10.0
    return factor * power


def y_scale(values: Iterable[float]) -> tuple[float, float, list[float]]:
    """The y axis for ``values``: its low and high ends and a few round ticks. Every chart
    starts at 0 (ends at 0 for negative figures), so a change looks its size on each of
    them and they read alike: a fall from 90 to 54 is a fall by 40%, and 5,632 against
    5,701 is the 1% it is. The top figure's label may stand above the axis, in the chart's
    top margin."""
    values = list(values)
    lo, hi = min(values), max(values)
    if lo >= 0:
        lo = 0.0
    elif hi <= 0:
        hi = 0.0
    if hi == lo:  # all zero
        hi = 1.0
    step = _nice((hi - lo) / 5)
    start = math.floor(lo / step + 1e-9) * step
    end = math.ceil(hi / step - 1e-9) * step
    count = round((end - start) / step)
    return start, end, [start + i * step for i in range(count + 1)]


def _f(value: float) -> str:
    return f"{value:.1f}"


def _ts_label(ts: str) -> str:
    """``11-30 09:41`` from a stored timestamp."""
    return f"{ts[5:10]} {ts[11:16]}" if len(ts) >= 16 else ts


def _point_title(series: Series, point: MetricView) -> str:
    text = f"{point.name} = {number(point.value)}{f' {point.unit}' if point.unit else ''}"
    text += f" ({legend_label(series)}) at {point.ts[:19].replace('T', ' ')}, event {point.seq}"
    if point.phase:
        text += f", phase {point.phase}"
    if point.invalid:
        text += f" — not trusted: {point.invalid}"
    return text


def repeats(trusted: list[MetricView]) -> list[list[MetricView]]:
    """The sets of two or more repeated samples among a series' ``trusted`` figures: what one
    benchmark run printed in one phase (:func:`journal.projections.verdict.sets`, the sets
    every verdict compares)."""
    found = sets(sorted(trusted, key=lambda p: p.seq))
    return [group for group in found if len(group) > 1]


def _shown_marks(marks: Sequence[Mark], seqs: set[int]) -> list[Mark]:
    """The marks (in seq order) strictly between the first and last figure; a step run on
    several hosts with no figure in between is drawn once."""
    ordered = sorted(seqs)
    first, last = ordered[0], ordered[-1]
    kept: list[Mark] = []
    for at in range(bisect.bisect_right(marks, first, key=_seq), len(marks)):
        mark = marks[at]
        if mark.seq >= last:
            break
        if kept and kept[-1].step == mark.step:
            # a figure between the two marks? (found by bisection: marks × figures is slow)
            after = bisect.bisect_right(ordered, kept[-1].seq)
            if not (after < len(ordered) and ordered[after] < mark.seq):
                continue
        kept.append(mark)
    return kept


def _seq(mark: Mark) -> int:
    return mark.seq


def svg_chart(
    series: list[Series],
    marks: Sequence[Mark],
    *,
    title: str = "",
    width: int = 720,
    height: int = 260,
) -> str:
    """One metric drawn as SVG: a polyline per series over the order of events, each figure
    a point with its value printed (an untrusted one hollow and red, its ``<title>`` saying
    why), a dashed line per step run between figures, round y ticks with the unit, and a
    legend below (the SVG is ``height`` plus a row per legend entry)."""
    drawn = [(s, [p for p in s.points if math.isfinite(p.value)]) for s in series]
    points = [p for _, ps in drawn for p in ps]
    untrusted = any(p.invalid for p in points)
    rows = len(series) + (1 if untrusted else 0)
    total = height + (LEGEND_ROW * rows + 6 if rows else 0)
    top = 40 if title else 22
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {total}" '
        f'width="{width}" height="{total}" role="img" font-family="{escape(FONT)}" '
        f'font-size="11">',
        f"<title>{escape(title or 'figures')}</title>",
    ]
    if title:
        out.append(
            f'<text class="chart-title" x="12" y="18" font-size="13" font-weight="600" '
            f'fill="#1d2329">{escape(_clip(title, (width - 24) // 8))}</text>'
        )
    if not points:
        out.append(f'<text x="{LEFT}" y="{top + 20}" fill="{MUTED}">no figures to draw</text>')
        out.append("</svg>")
        return "\n".join(out)

    plot_w, bottom = width - LEFT - RIGHT, height - BOTTOM
    plot_h = bottom - top
    seqs = {p.seq for p in points}
    if len(seqs) > MAX_FIGURES:
        lo, hi, ticks = y_scale(p.value for p in points)
        out += _y_axis(series, ticks, lo, hi, top, bottom, width)
        out += _summary(drawn, marks, sorted(seqs), lo, hi, top, bottom, width)
        out += _legend(series, untrusted, height, width)
        out.append("</svg>")
        return "\n".join(out)
    shown = _shown_marks(marks, seqs)
    slots = sorted(seqs | {m.seq for m in shown})
    x_of = {seq: LEFT + (i + 0.5) * plot_w / len(slots) for i, seq in enumerate(slots)}
    lo, hi, ticks = y_scale(p.value for p in points)

    def y(value: float) -> float:
        return bottom - (value - lo) / (hi - lo) * plot_h

    out += _y_axis(series, ticks, lo, hi, top, bottom, width)
    # x axis: the order of events; times under the figures where they change
    figure_seqs = sorted({p.seq for p in points})
    phases = {p.seq: p.phase for p in points}
    times = {p.seq: p.ts for p in points}
    out += _x_axis(
        # a tick per figure: its place in the order (and its phase), where there is room
        [
            (x_of[seq], f"{n}{f' {phases[seq]}' if phases[seq] else ''}", times[seq])
            for n, seq in enumerate(figure_seqs, 1)
        ],
        bottom,
        width,
        "figures in the order of events (not to time scale) →",
        lambda text: TICK_GAP,
    )
    # step runs between figures
    for mark in shown:
        mx = _f(x_of[mark.seq])
        where = f" on {mark.host}" if mark.host else ""
        name = _clip(mark.step, max(8, min(30, int(plot_h / 6.5))))  # within the plot
        about = f"step {mark.step}{where}, started {mark.started[:19].replace('T', ' ')}"
        out.append(
            f'<g class="mark" data-seq="{mark.seq}"><title>{escape(about)}'
            f'</title><line x1="{mx}" x2="{mx}" y1="{top}" y2="{bottom}" stroke="{MUTED}" '
            f'stroke-dasharray="4 3"/><text x="{_f(x_of[mark.seq] - 4)}" y="{top + 2}" '
            f'transform="rotate(-90 {_f(x_of[mark.seq] - 4)} {top + 2})" text-anchor="end" '
            f'fill="{MUTED}" {HALO}>{escape(name)}</text></g>'
        )
    # the series
    for index, (one, pts) in enumerate(drawn):
        colour = PALETTE[index % len(PALETTE)]
        out.append(f'<g class="series" data-series="{escape(one.slug)}">')
        trusted = [p for p in pts if not p.invalid]
        for group in repeats(trusted):
            low, high = min(p.value for p in group), max(p.value for p in group)
            x0, x1 = x_of[group[0].seq] - 8, x_of[group[-1].seq] + 8
            about = (
                f"spread of {len(group)} repeated figures: {number(low)} to {number(high)}"
                f"{f' {one.unit}' if one.unit else ''}"
            )
            out.append(
                f'<g class="spread"><title>{escape(about)}</title>'
                f'<rect x="{_f(x0)}" y="{_f(y(high) - 2)}" width="{_f(x1 - x0)}" '
                f'height="{_f(y(low) - y(high) + 4)}" rx="3" fill="{colour}" '
                'fill-opacity="0.15"/></g>'
            )
        if len(trusted) > 1:
            line = " ".join(f"{_f(x_of[p.seq])},{_f(y(p.value))}" for p in trusted)
            out.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{line}"/>'
            )
        for point in pts:
            px, py = _f(x_of[point.seq]), _f(y(point.value))
            if point.invalid:
                dot = (
                    f'<circle cx="{px}" cy="{py}" r="4.5" fill="#ffffff" stroke="{UNTRUSTED}" '
                    'stroke-width="2"/>'
                )
                ink, cls = UNTRUSTED, "point untrusted"
            else:
                dot = f'<circle cx="{px}" cy="{py}" r="4" fill="{colour}"/>'
                ink, cls = "#1d2329", "point"
            out.append(
                f'<g class="{cls}" data-seq="{point.seq}">'
                f"<title>{escape(_point_title(one, point))}</title>{dot}"
                f'<text class="value" x="{px}" y="{_f(y(point.value) - 8)}" '
                f'text-anchor="middle" fill="{ink}" {HALO}>{escape(number(point.value))}</text></g>'
            )
        out.append("</g>")
    out += _legend(series, untrusted, height, width)
    out.append("</svg>")
    return "\n".join(out)


def _y_axis(
    series: list[Series],
    ticks: list[float],
    lo: float,
    hi: float,
    top: int,
    bottom: int,
    width: int,
) -> list[str]:
    """Grid lines, round ticks and the unit."""
    plot_h = bottom - top
    unit = series[0].unit if series else None
    out = ['<g class="y-axis">']
    for tick in ticks:
        ty = _f(bottom - (tick - lo) / (hi - lo) * plot_h)
        out.append(
            f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{ty}" y2="{ty}" stroke="{GRID}"/>'
            f'<text x="{LEFT - 6}" y="{ty}" dy="4" text-anchor="end" fill="{MUTED}">'
            f"{escape(number(tick))}</text>"
        )
    if unit:
        mid = _f(top + plot_h / 2)
        out.append(
            f'<text class="unit" x="14" y="{mid}" transform="rotate(-90 14 {mid})" '
            f'text-anchor="middle" fill="{MUTED}">{escape(unit)}</text>'
        )
    out.append("</g>")
    return out


def _legend(series: list[Series], untrusted: bool, height: int, width: int) -> list[str]:
    """Which way is better, beside the legend's first row; a row per series (and one for
    untrusted figures)."""
    out: list[str] = []
    # which way is better, beside the legend's first row
    way = {"higher": "↑ higher is better", "lower": "↓ lower is better"}.get(
        series[0].direction if series else ""
    )
    if way:
        out.append(
            f'<text class="direction" x="{width - RIGHT}" y="{_f(height + 6 + LEGEND_ROW / 2)}" '
            f'dy="4" text-anchor="end" fill="{MUTED}">{way}</text>'
        )
    out.append('<g class="legend">')
    entries = [(PALETTE[i % len(PALETTE)], legend_label(s), False) for i, s in enumerate(series)]
    if untrusted:
        entries.append((UNTRUSTED, "not trusted (hover a point for why)", True))
    for row, (colour, text, hollow) in enumerate(entries):
        ly = height + 6 + row * LEGEND_ROW + LEGEND_ROW / 2
        paint = (
            f'fill="#ffffff" stroke="{colour}" stroke-width="2"' if hollow else f'fill="{colour}"'
        )
        shown_text = _clip(text, (width - LEFT - 16 - RIGHT) // 6)
        out.append(
            f"<g><title>{escape(full_label(series[row]) if row < len(series) else text)}</title>"
            f'<circle cx="{LEFT + 5}" cy="{_f(ly)}" r="4.5" {paint}/>'
            f'<text x="{LEFT + 16}" y="{_f(ly)}" dy="4" fill="#1d2329">{escape(shown_text)}</text>'
            "</g>"
        )
    out.append("</g>")
    return out


def _summary(
    drawn: list[tuple[Series, list[MetricView]]],
    marks: Sequence[Mark],
    seqs: list[int],
    lo: float,
    hi: float,
    top: int,
    bottom: int,
    width: int,
) -> list[str]:
    """The x axis, step runs and series of a chart of many figures (``seqs``, in order), in
    :data:`BINS` runs of consecutive figures (see the module docstring)."""
    plot_w, plot_h = width - LEFT - RIGHT, bottom - top
    bins = min(BINS, len(seqs))
    starts = [len(seqs) * i // bins for i in range(bins)]  # each run's first figure
    firsts = [seqs[i] for i in starts]
    slot = plot_w / bins

    def place(seq: int) -> int:
        return bisect.bisect_right(firsts, seq) - 1

    def x(index: int) -> float:
        return LEFT + (index + 0.5) * slot

    def y(value: float) -> float:
        return bottom - (value - lo) / (hi - lo) * plot_h

    # what each run holds: per series its trusted and untrusted figures
    held: list[list[list[MetricView]]] = []
    untrusted: list[list[list[MetricView]]] = []
    times = [["", ""] for _ in range(bins)]
    for _, pts in drawn:
        mine: list[list[MetricView]] = [[] for _ in range(bins)]
        bad: list[list[MetricView]] = [[] for _ in range(bins)]
        for point in pts:
            at = place(point.seq)
            (bad if point.invalid else mine)[at].append(point)
            span = times[at]
            if not span[0] or point.ts < span[0]:
                span[0] = point.ts
            if point.ts > span[1]:
                span[1] = point.ts
        held.append(mine)
        untrusted.append(bad)

    per = len(seqs) / bins
    out = _x_axis(
        # a tick per run: the place of its first figure in the order, where there is room
        [(x(index), f"{first + 1:,}", times[index][0]) for index, first in enumerate(starts)],
        bottom,
        width,
        f"{len(seqs):,} figures in {bins} runs of about {per:,.0f}: median and lowest to "
        "highest (not to time scale) →",
        lambda text: max(TICK_GAP, 7 * len(text) + 10),
    )

    # step runs: counted by step between two runs of figures (or within one)
    steps: list[dict[str, int]] = [{} for _ in range(bins)]
    for mark in marks:
        if not seqs[0] < mark.seq < seqs[-1]:
            continue
        counted = steps[place(mark.seq)]
        counted[mark.step] = counted.get(mark.step, 0) + 1
    for index, counted in enumerate(steps):
        if not counted:
            continue
        total = sum(counted.values())
        named = ", ".join(f"{step} ×{n}" for step, n in sorted(counted.items(), key=_most))
        span = times[index]
        about = (
            f"{total:,} step run{'' if total == 1 else 's'} among figures "
            f"{starts[index] + 1}–{(starts[index + 1] if index + 1 < bins else len(seqs)):,}"
            f" ({span[0][:16].replace('T', ' ')} to {span[1][:16].replace('T', ' ')}): {named}"
        )
        mx = _f(x(index))
        out.append(
            f'<g class="mark summary"><title>{escape(about)}</title><line x1="{mx}" x2="{mx}" '
            f'y1="{top - 6}" y2="{top}" stroke="{MUTED}" stroke-width="2"/></g>'
        )

    for index, (one, _) in enumerate(drawn):
        colour = PALETTE[index % len(PALETTE)]
        out.append(f'<g class="series" data-series="{escape(one.slug)}">')
        medians: list[tuple[float, float]] = []
        for at, group in enumerate(held[index]):
            if not group:
                continue
            values = sorted(p.value for p in group)
            middle = statistics.median(values)
            medians.append((x(at), middle))
            about = (
                f"{_summary_title(one, group)}: median {number(middle)}, "
                f"{number(values[0])} to {number(values[-1])}{f' {one.unit}' if one.unit else ''}"
            )
            px = _f(x(at))
            out.append(
                f'<g class="point summary" data-count="{len(group)}"><title>{escape(about)}</title>'
                f'<rect x="{_f(x(at) - 2.5)}" y="{_f(y(values[-1]))}" width="5" '
                f'height="{_f(max(y(values[0]) - y(values[-1]), 1))}" fill="{colour}" '
                f'fill-opacity="0.3"/><circle cx="{px}" cy="{_f(y(middle))}" r="2.5" '
                f'fill="{colour}"/></g>'
            )
        if len(medians) > 1:
            line = " ".join(f"{_f(px)},{_f(y(value))}" for px, value in medians)
            out.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{line}"/>'
            )
        ends = medians[:1] + medians[-1:] if len(drawn) <= 2 else []  # more would overlap
        for end in ends:
            out.append(
                f'<text class="value" x="{_f(end[0])}" y="{_f(y(end[1]) - 8)}" '
                f'text-anchor="middle" fill="#1d2329" {HALO}>{escape(number(end[1]))}</text>'
            )
        for at, group in enumerate(untrusted[index]):
            if not group:
                continue
            middle = statistics.median(p.value for p in group)
            why = dict.fromkeys(p.invalid for p in group)
            about = f"{_summary_title(one, group)} not trusted: {'; '.join(map(str, why))}"
            out.append(
                f'<g class="point untrusted summary" data-count="{len(group)}">'
                f"<title>{escape(about)}</title>"
                f'<circle cx="{_f(x(at))}" cy="{_f(y(middle))}" r="4" fill="#ffffff" '
                f'stroke="{UNTRUSTED}" stroke-width="2"/></g>'
            )
        out.append("</g>")
    return out


def _most(item: tuple[str, int]) -> tuple[int, str]:
    return -item[1], item[0]


def _summary_title(series: Series, group: list[MetricView]) -> str:
    """``412 figures of output_throughput (gpu-01) from 11-30 09:41 to 12-02 10:00``."""
    first, last = group[0], group[-1]
    when = f"{first.ts[:16].replace('T', ' ')} to {last.ts[:16].replace('T', ' ')}"
    return (
        f"{len(group):,} figure{'' if len(group) == 1 else 's'} of {first.name} "
        f"({legend_label(series)}) from {when}, events {first.seq} to {last.seq}"
    )


def _x_axis(
    places: list[tuple[float, str, str]],
    bottom: int,
    width: int,
    caption: str,
    room: Callable[[str], float],
) -> list[str]:
    """The x axis: a tick at each place (x, its label where ``room`` px are left since the
    last label, the time it stands for), the time under it where it changes (80 px apart),
    and ``caption``."""
    out = ['<g class="x-axis">']
    out.append(
        f'<line x1="{LEFT}" x2="{width - RIGHT}" y1="{bottom}" y2="{bottom}" stroke="{MUTED}"/>'
    )
    tick_x = -1e9
    for px, text, _ in places:
        out.append(
            f'<line x1="{_f(px)}" x2="{_f(px)}" y1="{bottom}" y2="{bottom + 4}" stroke="{MUTED}"/>'
        )
        if px - tick_x >= room(text):
            out.append(
                f'<text class="tick" x="{_f(px)}" y="{bottom + 15}" text-anchor="middle" '
                f'fill="{MUTED}">{escape(text)}</text>'
            )
            tick_x = px
    last_label, last_x = "", -1e9
    for px, _, ts in places:
        label = _ts_label(ts)
        if ts and label != last_label and px - last_x >= 80:
            out.append(
                f'<text class="time" x="{_f(px)}" y="{bottom + 29}" text-anchor="middle" '
                f'fill="{MUTED}">{escape(label)}</text>'
            )
            last_label, last_x = label, px
    out.append(
        f'<text x="{width - RIGHT}" y="{bottom + 45}" text-anchor="end" fill="{MUTED}">'
        f"{escape(caption)}</text>"
    )
    out.append("</g>")
    return out
