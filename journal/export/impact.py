"""The impact section of the postmortem: every series of figures, paired before and after.

Throughput (a rate: tok/s, GB/s, MFLOP/s) is why a stack is upgraded, so rates come first and
the first of them, in the order the throughput detector names them, is the headline. Other
figures (latencies, counts) follow. Percentages are rounded here, once, to one decimal, so
every format prints the same number (90 → 54.1 tok/s is -39.9%, 54.1 → 96.1 is +77.6%).
"""

from __future__ import annotations

from typing import Any

from journal.projections.metrics import (
    Change,
    Series,
    all_series,
    before_after,
    changes,
    headline_rank,
    sample_sets,
)
from journal.projections.timeline import MetricView, StepRunView, Timeline
from journal.projections.verdict import summary
from journal.reading.bench import DISPLAY
from journal.streamed import Lazy


def figure(value: float | None, unit: str | None = None) -> str:
    """``96.10 tok/s``: two decimals below 1,000, none above (as the terminal prints it)."""
    if value is None:
        return "-"
    from journal.display import figure as shown

    return shown(value, unit)


def percent_text(percent: float | None) -> str:
    """``+77.6%``, ``-39.9%``, ``0.0%``; a dash where there is no percentage."""
    if percent is None:
        return "-"
    return f"{percent:+.1f}%" if percent else "0.0%"


def spread_text(samples: int, spread: list[float] | None) -> str:
    """``median of 5: 36.00–36.30`` beside the median of repeated samples; nothing for a
    single figure."""
    if samples < 2 or not spread:
        return ""
    return f"median of {samples}: {figure(spread[0])}–{figure(spread[1])}"


def _point(point: MetricView) -> dict[str, Any]:
    return {
        "value": point.value,
        "time": point.ts,
        "seq": point.seq,
        "phase": point.phase,
        "run": point.run,
        "source": point.source,
        "invalid": point.invalid,
    }


def change_dict(change: Change) -> dict[str, Any]:
    """A change of set as the document carries it: ``before`` and ``after`` are the sets'
    medians, ``before_samples`` / ``after_samples`` how many figures each set holds and
    ``before_spread`` / ``after_spread`` their min and max."""
    percent = change.percent
    return {
        "before": change.before,
        "after": change.after,
        "unit": change.unit,
        "delta": round(change.delta, 6),
        "percent": None if percent is None else round(percent, 1),
        "better": change.better,
        # what the change means, as every surface says it (journal.projections.verdict.judge):
        # better, worse, noise, same, count; ``why`` says why in words
        "verdict": change.verdict,
        "basis": change.basis,
        "between": change.between,
        "steps": list(change.steps),
        "before_time": change.first.ts,
        "after_time": change.last.ts,
        "before_run": change.first.run,
        "after_run": change.last.run,
        **change.judged.as_dict(),
    }


def _rank(series: Series) -> int:
    """Where a series' metric stands in the throughput detector's order of preference."""
    name = series.name
    return headline_rank(name)


def rate_series(timeline: Timeline) -> list[Series]:
    """The series of rates, preferred metrics first, else in the order of their first figure."""
    found = all_series(timeline)
    order = {id(s): i for i, s in enumerate(found)}
    return sorted((s for s in found if s.higher_is_better), key=lambda s: (_rank(s), order[id(s)]))


def series_dict(series: Series, steps: list[StepRunView]) -> dict[str, Any]:
    """One series: its figures, consecutive changes and its first-against-last change."""
    overall = before_after(series, steps)
    found = sample_sets(series)
    latest = None
    if found:
        median, low, high, count = summary(found[-1])
        latest = {
            "median": median,
            "samples": count,
            "spread": [low, high],
            "time": found[-1][-1].ts,
            "run": found[-1][-1].run,
        }
    return {
        "metric": series.name,
        "display": DISPLAY.get(series.name, series.name),
        "title": series.title,
        "host": series.host,
        "labels": dict(series.labels),
        "unit": series.unit,
        "higher_is_better": series.higher_is_better,
        # made as they are written: a year's figures are many, and only the JSON holds them
        "points": Lazy(lambda points=series.points: map(_point, points), len(series.points)),
        # worked out as they are written (a year of nightly figures pairs thousands of sets)
        "changes": Lazy(lambda: map(change_dict, changes(series, steps)), max(0, len(found) - 1)),
        "overall": None if overall is None else change_dict(overall),
        # the latest set of trusted figures (its median and spread), None without one
        "latest": latest,
    }


def impact(timeline: Timeline, steps: list[StepRunView]) -> dict[str, Any]:
    """Rates (``throughput``) first, preferred metrics first, then the other figures."""
    rest = [s for s in all_series(timeline) if not s.higher_is_better]
    throughput = [series_dict(s, steps) for s in rate_series(timeline)]
    headline = next((s for s in throughput if s["overall"] is not None), None)
    return {
        "throughput": throughput,
        "other": [series_dict(s, steps) for s in rest],
        "headline": None
        if headline is None
        else {"title": headline["title"], "display": headline["display"], **headline["overall"]},
    }


def headline_text(effect: dict[str, Any]) -> str | None:
    """``Output token throughput on gpu-box: 90.00 → 54.10 → 96.10 tok/s, +6.8% overall.``
    (each figure the median of its set)."""
    head = effect.get("headline")
    if head is None:
        return None
    series = next(s for s in effect["throughput"] if s["title"] == head["title"])
    # one figure per set (the median of repeated samples), as the changes compare them
    medians: list[float] = []
    for change in series["changes"]:  # made as they are read: read once
        medians.append(change["before"])
        last = change["after"]
    medians.append(last)
    values = medians if len(medians) <= 5 else [medians[0], medians[-1]]
    path = " → ".join(figure(v) for v in values)
    unit = f" {series['unit']}" if series["unit"] else ""
    where = f" on {series['host']}" if series["host"] else ""
    what = series["labels"].get("benchmark")
    named = f" ({what})" if what else ""
    noise = " (within noise)" if head.get("verdict") == "noise" else ""
    return (
        f"{head['display']}{named}{where}: {path}{unit}, "
        f"{percent_text(head['percent'])}{noise} from the first figure to the last."
    )
