"""Metrics over the timeline: each figure's series, and its figures paired before and after.

A series is one metric of one workload on one host: the figures of the same ``name``, host
and labels, the ``phase`` label aside (``phase=before`` and ``phase=after`` are the same
workload measured at two times). Consecutive figures of a series are paired; a pair says
what lies between them: another ``phase``, or the step runs done on that host in between
(``steps``), or nothing (``repeat``: the benchmark run again). Figures that cannot be trusted
(``invalid``) are shown but never paired.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from journal.projections.timeline import MetricView, StepRunView, Timeline

#: The figures an upgrade is judged by first, in this order (the seed's: output tokens/s).
HEADLINE = (
    "output_token_throughput",
    "output_tokens_per_s",
    "total_token_throughput",
    "total_tokens_per_s",
    "request_throughput",
    "requests_per_s",
    "input_token_throughput",
    "avg_bus_bandwidth",
)


def headline_rank(name: str) -> int:
    """Where a metric comes in tables and titles: its place in HEADLINE, else after them."""
    return HEADLINE.index(name) if name in HEADLINE else len(HEADLINE)


#: Labels that do not make a workload: when (phase) and where (host, a column of its own).
NOT_IDENTITY = frozenset({"phase", "host"})


def higher_is_better(name: str, unit: str | None) -> bool:
    """Throughputs and bandwidths (a rate, ``…/s``) are better higher; latencies, counts and
    sizes are not. This is the *rate* test the headline figures, the impact report and the
    throughput_regression detector rely on; :func:`direction` is the fuller rule (it also
    knows acceptance is better higher, and that a count is neither)."""
    unit = (unit or "").lower()
    name = name.lower()
    return (
        unit.endswith("/s")
        or "/s " in unit
        or "per s" in unit
        or any(w in name for w in ("throughput", "bandwidth", "busbw", "algbw", "per_s", "flops"))
    )


#: Figures that count things (requests done, tokens sent, the concurrency asked for): neither
#: better higher nor lower, so never charted nor coloured (the page lists them in a table).
COUNT_NAMES = frozenset(
    {
        "successful_requests",
        "failed_requests",
        "completed",
        "num_prompts",
        "concurrency",
        "max_concurrency",
        "total_input_tokens",
        "total_output_tokens",
        "total_generated_tokens",
        "total_generated_tokens_retokenized",
        "count",
        "requests",
        # vLLM's speculative-decoding section: how many drafts and tokens, not how well
        "drafts",
        "draft_tokens",
        "accepted_tokens",
    }
)
#: Words of a name that say it is better higher although it is no rate: acceptance of
#: speculative decoding (``accept_length``, ``accept_rate``, ``acceptance…``), hit rates.
HIGHER_WORDS = ("accept", "hit_rate", "speedup", "goodput")
#: Words of a name, and units, that say it is a time: better lower.
LOWER_WORDS = ("latency", "duration", "ttft", "itl", "tpot", "e2e", "elapsed", "time")
TIME_UNITS = frozenset({"ns", "us", "µs", "ms", "s", "sec", "min", "h"})

#: A change smaller than this (in percent of the earlier figure) between two single figures
#: is called noise: one run of a benchmark is not precise to better than a few percent.
NOISE_PERCENT = 5.0


#: How a line of text says a change's :attr:`Change.verdict` after its percentage (the CLI's
#: figure lines, the story): a change within the noise is neither a gain nor a loss.
VERDICT_WORDS = {"better": ", better", "worse": ", worse", "noise": ", within noise"}


def direction(name: str, unit: str | None) -> str:
    """Which way a figure is better: ``"higher"`` for rates, throughputs, bandwidths and
    acceptance (``accept_length``, ``accept_rate``); ``"lower"`` for latencies and durations
    (TTFT, ITL, TPOT, E2E; units ms, s) and anything else measured (power, memory);
    ``"count"`` for counts (``successful_requests``, ``total_input_tokens``, ``num_prompts``…),
    which are neither: they say how much was measured, not how well."""
    low, u = name.lower(), (unit or "").strip().lower()
    if low in COUNT_NAMES and u in ("", "tok", "tokens", "req", "requests", "count"):
        return "count"  # accepted_tokens is a count, though it says "accept"
    if higher_is_better(name, unit) or any(w in low for w in HIGHER_WORDS):
        return "higher"
    if u in TIME_UNITS or any(w in low for w in LOWER_WORDS) or low.endswith(("_ms", "_s")):
        return "lower"
    if (
        low in COUNT_NAMES
        or low.startswith(("num_", "n_", "total_"))
        or low.endswith(("_count", "_requests", "_prompts", "_tokens"))
    ) and u in ("", "tok", "tokens", "req", "requests", "count"):
        return "count"
    return "lower"


def series_key(point: MetricView) -> tuple[Any, ...]:
    """What makes two figures comparable: the metric, its host, its labels but ``phase``."""
    labels = tuple(sorted((k, v) for k, v in point.labels.items() if k not in NOT_IDENTITY))
    return (point.name, point.host or "", labels)


@dataclass
class Series:
    """One metric of one workload on one host, its figures in order."""

    name: str
    unit: str | None
    host: str | None
    labels: dict[str, str]
    points: list[MetricView] = field(default_factory=list)

    @property
    def higher_is_better(self) -> bool:
        """A rate (see :func:`higher_is_better`)."""
        return higher_is_better(self.name, self.unit)

    @property
    def direction(self) -> str:
        """``higher``, ``lower`` or ``count`` (see :func:`direction`)."""
        return direction(self.name, self.unit)

    @property
    def title(self) -> str:
        """``output_token_throughput (benchmark=eagle3-c1, concurrency=1) on gpu-box``."""
        labels = ", ".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        where = f" on {self.host}" if self.host else ""
        return f"{self.name}{f' ({labels})' if labels else ''}{where}"

    @property
    def slug(self) -> str:
        """A stable id for anchors and file names."""
        import hashlib

        digest = hashlib.sha1(repr(series_key(self.points[0])).encode()).hexdigest()[:8]
        return f"{self.name}-{digest}"


@dataclass(frozen=True)
class Change:
    """Two consecutive trusted figures of a series and what lies between them."""

    before: MetricView
    after: MetricView
    basis: str  # "phase", "steps" or "repeat"
    steps: tuple[str, ...] = ()
    higher_is_better: bool = True
    #: ``higher``, ``lower`` or ``count``: how :attr:`verdict` reads the change.
    direction: str = "higher"
    #: Whether the change is within the noise: within the spread of repeated figures, or
    #: (both figures single) within :data:`NOISE_PERCENT`.
    noise: bool = False
    #: The repeated figures (same phase, no step between) each side belongs to.
    before_group: tuple[MetricView, ...] = ()
    after_group: tuple[MetricView, ...] = ()

    @property
    def delta(self) -> float:
        return self.after.value - self.before.value

    @property
    def percent(self) -> float | None:
        """The change in percent of the earlier figure (None when that is 0)."""
        if self.before.value == 0:
            return None
        return self.delta / abs(self.before.value) * 100.0

    @property
    def better(self) -> bool | None:
        """Whether the later figure is the better one (None when equal), by the metric's
        :func:`direction` (a count, which has none, reads as before: better lower)."""
        if self.delta == 0:
            return None
        higher = self.direction == "higher" if self.direction != "count" else self.higher_is_better
        return (self.delta > 0) == higher

    @property
    def verdict(self) -> str:
        """``better``, ``worse``, ``noise`` (within the spread or the noise threshold),
        ``same`` (equal figures) or ``count`` (a count is neither better nor worse)."""
        if self.direction == "count":
            return "count"
        if self.delta == 0:
            return "same"
        if self.noise:
            return "noise"
        return "better" if (self.delta > 0) == (self.direction == "higher") else "worse"

    @property
    def between(self) -> str:
        """What lies between the two figures, for a table: ``phase before → after``, the steps
        run in between, or ``run again``."""
        if self.basis == "phase":
            return f"phase {self.before.phase or '—'} → {self.after.phase or '—'}"
        if self.basis == "steps":
            shown = ", ".join(self.steps[:4])
            more = len(self.steps) - 4
            return shown + (f" and {more} more" if more > 0 else "")
        return "run again"


def percent_change(before: float, after: float) -> float | None:
    """``(after - before) / before`` in percent: 90 → 54.1 is −39.9, 54.1 → 96.1 is +77.6."""
    if before == 0:
        return None
    return (after - before) / abs(before) * 100.0


def all_series(timeline: Timeline) -> list[Series]:
    """Every series of the journal, in the order of their first figure."""
    found: dict[tuple[Any, ...], Series] = {}
    for point in timeline.metrics:
        key = series_key(point)
        series = found.get(key)
        if series is None:
            labels = {k: v for k, v in point.labels.items() if k not in NOT_IDENTITY}
            series = found[key] = Series(point.name, point.unit, point.host, labels)
        series.points.append(point)
    return list(found.values())


def change_steps(timeline: Timeline) -> list[StepRunView]:
    """The step runs that may change a figure: every run but the benchmarks' own (a run that
    recorded figures, or a `journal run bench`)."""
    return [run for run in timeline.step_runs() if run.benchmark is None and not run.metrics]


def _trusted(series: Series) -> list[MetricView]:
    return [p for p in series.points if p.invalid is None and p.value == p.value]  # not NaN


def _between(
    series: Series, before: MetricView, after: MetricView, steps: list[StepRunView]
) -> tuple[str, tuple[str, ...]]:
    """What lies between two figures: its basis (``phase``, ``steps``, ``repeat``) and the
    steps run on the series' host in between."""
    between = tuple(
        dict.fromkeys(
            run.step
            for run in steps
            if before.seq < run.seq < after.seq and (series.host is None or run.host == series.host)
        )
    )
    if before.phase != after.phase and (before.phase or after.phase):
        return "phase", between
    if between:
        return "steps", between
    return "repeat", between


def repeat_groups(series: Series, steps: list[StepRunView]) -> list[list[MetricView]]:
    """The trusted figures of ``series`` in runs of repeated samples: consecutive figures of
    the same phase with no step run between them (the benchmark run again) form one group,
    whose min–max is the spread of the measurement."""
    groups: list[list[MetricView]] = []
    for point in _trusted(series):
        if groups and _between(series, groups[-1][-1], point, steps)[0] == "repeat":
            groups[-1].append(point)
        else:
            groups.append([point])
    return groups


class Sample(Protocol):
    """A measured figure: a :class:`MetricView` here, a detector's ``Figure``."""

    @property
    def value(self) -> float: ...


def is_noise(before: Sequence[Sample], after: Sequence[Sample]) -> bool:
    """Whether a change from the ``before`` samples to the ``after`` ones is noise: with a
    repeated side, when the two min–max ranges overlap (the change is within the spread);
    with a single figure each side, when it is within :data:`NOISE_PERCENT` of the earlier.
    The throughput page and the throughput_regression detector both decide noise here."""
    if before is after:
        return True
    if len(before) > 1 or len(after) > 1:
        lo_b, hi_b = min(p.value for p in before), max(p.value for p in before)
        lo_a, hi_a = min(p.value for p in after), max(p.value for p in after)
        return lo_a <= hi_b and lo_b <= hi_a
    percent = percent_change(before[0].value, after[0].value)
    if percent is None:
        return before[0].value == after[0].value
    return abs(percent) <= NOISE_PERCENT


def pair(
    series: Series,
    before: MetricView,
    after: MetricView,
    steps: list[StepRunView],
    groups: list[list[MetricView]] | None = None,
) -> Change:
    """Two figures of ``series`` and what lies between them (a phase, steps, or nothing),
    with whether the change is noise (see :func:`is_noise`)."""
    basis, between = _between(series, before, after, steps)
    groups = repeat_groups(series, steps) if groups is None else groups
    side_b = next((g for g in groups if any(p is before for p in g)), [before])
    side_a = next((g for g in groups if any(p is after for p in g)), [after])
    return Change(
        before,
        after,
        basis,
        between,
        series.higher_is_better,
        series.direction,
        is_noise(side_b, side_a),
        tuple(side_b),
        tuple(side_a),
    )


def changes(series: Series, steps: list[StepRunView]) -> list[Change]:
    """The consecutive trusted figures of ``series``, paired."""
    trusted = _trusted(series)
    groups = repeat_groups(series, steps)
    return [pair(series, a, b, steps, groups) for a, b in zip(trusted, trusted[1:], strict=False)]


def before_after(series: Series, steps: list[StepRunView]) -> Change | None:
    """The series' figure before the upgrade against its latest: the first trusted figure (the
    last labelled ``phase=before`` where there are such) against the last one."""
    trusted = _trusted(series)
    if len(trusted) < 2:
        return None
    labelled = [p for p in trusted if p.phase == "before"]
    first = labelled[-1] if labelled else trusted[0]
    last = trusted[-1]
    if last.seq <= first.seq:
        return None
    return pair(series, first, last, steps)
