"""Metrics over the timeline: each figure's series, and its figures paired before and after.

A series is one metric of one workload on one host: the figures of the same ``name``, host
and labels, the ``phase`` label aside (``phase=before`` and ``phase=after`` are the same
workload measured at two times). Its trusted figures form sets (the repeated samples one
benchmark run printed, or one figure: :func:`journal.projections.verdict.sets`); consecutive
sets are paired and judged by the one verdict (:func:`journal.projections.verdict.judge`,
median against median). A pair says what lies between them: another ``phase``, or the step
runs done on that host in between (``steps``), or nothing (``repeat``: the benchmark run
again). Figures that cannot be trusted (``invalid``) are shown but never paired.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from journal.projections.timeline import MetricView, StepRunView, Timeline
from journal.projections.verdict import Verdict, is_control, judge_sets, sets

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


#: Labels that do not make a workload: when (phase), where (host, a column of its own) and
#: what it ran on (`nccl`, the version the built-in allreduce reports: the upgrade changes it).
NOT_IDENTITY = frozenset({"phase", "host", "nccl"})


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
    """Two consecutive sets of trusted figures of a series (:func:`sample_sets`: the repeated
    samples of one benchmark run, or one figure) and what lies between them, with the one
    verdict on the change (:func:`journal.projections.verdict.judge`): ``before`` and
    ``after`` are the sets' medians."""

    before_set: tuple[MetricView, ...]
    after_set: tuple[MetricView, ...]
    basis: str  # "phase", "steps" or "repeat"
    steps: tuple[str, ...]
    higher_is_better: bool
    judged: Verdict

    @property
    def before(self) -> float:
        """The median of the earlier set."""
        return self.judged.before

    @property
    def after(self) -> float:
        """The median of the later set."""
        return self.judged.after

    @property
    def first(self) -> MetricView:
        """The earlier set's last figure: its time, run and phase stand for the set."""
        return self.before_set[-1]

    @property
    def last(self) -> MetricView:
        """The later set's last figure."""
        return self.after_set[-1]

    @property
    def unit(self) -> str | None:
        return self.last.unit

    @property
    def direction(self) -> str:
        """``higher``, ``lower`` or ``count``: how :attr:`verdict` reads the change."""
        return self.judged.direction

    @property
    def delta(self) -> float:
        return self.judged.delta

    @property
    def percent(self) -> float | None:
        """The change in percent of the earlier median (None when that is 0)."""
        return self.judged.percent

    @property
    def better(self) -> bool | None:
        """Whether the later median is the better one (None when equal), by the metric's
        :func:`direction` alone (a count, which has none, reads as before: better lower)."""
        if self.delta == 0:
            return None
        higher = self.direction == "higher" if self.direction != "count" else self.higher_is_better
        return (self.delta > 0) == higher

    @property
    def verdict(self) -> str:
        """``better``, ``worse``, ``noise``, ``same`` or ``count``: :func:`judge`'s answer."""
        return self.judged.verdict

    @property
    def between(self) -> str:
        """What lies between the two sets, for a table: ``phase before → after``, the steps
        run in between, or ``run again``."""
        if self.basis == "phase":
            return f"phase {self.first.phase or '—'} → {self.after_set[0].phase or '—'}"
        if self.basis == "steps":
            shown = ", ".join(self.steps[:4])
            more = len(self.steps) - 4
            return shown + (f" and {more} more" if more > 0 else "")
        return "run again"


def all_series(timeline: Timeline | list[MetricView]) -> list[Series]:
    """Every series of the journal (or of its figures, in the order recorded), in the order
    of their first figure."""
    found: dict[tuple[Any, ...], Series] = {}
    for point in timeline.metrics if isinstance(timeline, Timeline) else timeline:
        key = series_key(point)
        series = found.get(key)
        if series is None:
            labels = {k: v for k, v in point.labels.items() if k not in NOT_IDENTITY}
            series = found[key] = Series(point.name, point.unit, point.host, labels)
        series.points.append(point)
    return list(found.values())


def change_steps(timeline: Timeline) -> list[StepRunView]:
    """The step runs that may change a figure: every run but the benchmarks' own (a run that
    recorded figures, or a `journal run bench`), in the order they started (:func:`_between`
    looks a pair's steps up by that order)."""
    found = [run for run in timeline.step_runs() if run.benchmark is None and not run.metrics]
    return sorted(found, key=_seq)


def _seq(run: StepRunView) -> int:
    return run.seq


def _trusted(series: Series) -> list[MetricView]:
    return [p for p in series.points if p.invalid is None and p.value == p.value]  # not NaN


def _between(
    series: Series, before: MetricView, after: MetricView, steps: list[StepRunView]
) -> tuple[str, tuple[str, ...]]:
    """What lies between two figures: its basis (``phase``, ``steps``, ``repeat``) and the
    steps run on the series' host in between (``steps`` as :func:`change_steps` gives them:
    found by bisection, so a journal's pairs cost their steps, not pairs × steps)."""
    found: dict[str, None] = {}
    for at in range(bisect.bisect_right(steps, before.seq, key=_seq), len(steps)):
        run = steps[at]  # read by place: ``steps`` may be columns (a postmortem's marks)
        if run.seq >= after.seq:
            break
        if series.host is None or run.host == series.host:
            found[run.step] = None
    between = tuple(found)
    if before.phase != after.phase and (before.phase or after.phase):
        return "phase", between
    if between:
        return "steps", between
    return "repeat", between


def sample_sets(series: Series) -> list[list[MetricView]]:
    """The trusted figures of ``series`` as sets: the repeated samples one benchmark run
    printed (same run, same phase), or a figure on its own (:func:`verdict.sets`, the
    detector's sets too); the min–max of a set is the spread of the measurement."""
    return sets(_trusted(series))


def pair(
    series: Series,
    before: Sequence[MetricView],
    after: Sequence[MetricView],
    steps: list[StepRunView],
) -> Change:
    """Two sets of figures of ``series``, what lies between them (a phase, steps, or nothing)
    and the verdict on the change (:func:`journal.projections.verdict.judge`)."""
    basis, between = _between(series, before[-1], after[0], steps)
    judged = judge_sets(before, after, series.direction, is_control(series.labels))
    return Change(tuple(before), tuple(after), basis, between, series.higher_is_better, judged)


def changes(series: Series, steps: list[StepRunView]) -> list[Change]:
    """The consecutive sets of ``series``, paired: one change per set, never one per sample."""
    found = sample_sets(series)
    return [pair(series, a, b, steps) for a, b in zip(found, found[1:], strict=False)]


def before_after(series: Series, steps: list[StepRunView]) -> Change | None:
    """The series' set before the upgrade against its latest: the first set (the one holding
    the last figure labelled ``phase=before`` where there are such) against the last one."""
    found = sample_sets(series)
    if len(found) < 2:
        return None
    labelled = [i for i, s in enumerate(found) if any(p.phase == "before" for p in s)]
    first = labelled[-1] if labelled else 0
    if first == len(found) - 1:
        return None
    return pair(series, found[first], found[-1], steps)
