"""The one verdict on a change of figures: every surface that says whether a figure got better,
worse, or moved within the noise asks :func:`judge` (the throughput page, the story's headline
in `journal status` / `journal log` and on the journal page, the postmortem in Markdown, HTML
and JSON, the lines of `journal run bench` / `journal record metric`, and the
`throughput-regression` detector, which fires exactly where it answers ``worse``).

A *set* of figures is what one measurement gave: the repeated samples one benchmark run printed
(same run, same ``phase``), or a single figure (one recorded by hand, or one summary). Two sets
of a series are compared median against median (:func:`judge`); which figures form a set is
:func:`same_set`, the same for the page (timeline figures) and the detector (figures read from
output or recorded).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

#: A change smaller than this (in percent of the earlier median) is noise. One run of a
#: benchmark is not precise to better than a few percent, and repeated samples of one run are
#: closer to each other than two runs are: taken seconds apart under the same load they share
#: it, while two runs minutes apart do not (the demo's CPU matmul, five samples within 0.5% of
#: each other, moved 4% between two runs as another process loaded the memory bus).
NOISE_PERCENT = 5.0

#: The label by which a benchmark declares that it measures the machine, not the stack: nothing
#: the steps change touches it (a pure-Python loop: the demo's ``cpu-matmul``). Its figures
#: move only with the machine (load, clocks), so every change of them is noise.
CONTROL = "control"
#: Values of :data:`CONTROL` that do not declare a control.
NOT_CONTROL = frozenset({"", "no", "false", "0", "off"})

#: The verdicts: ``better``, ``worse``, ``noise``, ``same`` (equal medians), ``count`` (a count
#: is neither better nor worse).
VERDICTS = ("better", "worse", "noise", "same", "count")

#: How a line of text says a verdict after its percentage (the CLI's figure lines, the story).
VERDICT_WORDS = {"better": ", better", "worse": ", worse", "noise": ", within noise"}


def is_control(labels: Mapping[str, str]) -> bool:
    """Whether figures labelled so declare a control (``control=yes``, see :data:`CONTROL`)."""
    value = labels.get(CONTROL)
    return value is not None and value.strip().lower() not in NOT_CONTROL


def percent_change(before: float, after: float) -> float | None:
    """``(after - before) / before`` in percent: 90 → 54.1 is −39.9, 54.1 → 96.1 is +77.6."""
    if before == 0:
        return None
    return (after - before) / abs(before) * 100.0


@dataclass(frozen=True)
class Verdict:
    """What :func:`judge` says of a change: the two medians, each side's spread (min–max) and
    count, the ``verdict`` and ``why`` in words (for a tooltip, a JSON reader)."""

    before: float
    after: float
    before_low: float
    before_high: float
    before_count: int
    after_low: float
    after_high: float
    after_count: int
    direction: str
    verdict: str
    why: str

    @property
    def delta(self) -> float:
        return self.after - self.before

    @property
    def percent(self) -> float | None:
        """The change in percent of the earlier median (None when that is 0)."""
        return percent_change(self.before, self.after)

    @property
    def repeated(self) -> bool:
        """Whether either side is repeated samples (more than one figure)."""
        return self.before_count > 1 or self.after_count > 1

    def as_dict(self) -> dict[str, Any]:
        """The keys a document adds for it (the postmortem's changes)."""
        return {
            "before_samples": self.before_count,
            "after_samples": self.after_count,
            "before_spread": [self.before_low, self.before_high],
            "after_spread": [self.after_low, self.after_high],
            "why": self.why,
        }


def judge(
    before: Sequence[float],
    after: Sequence[float],
    direction: str = "higher",
    control: bool = False,
    noise_percent: float = NOISE_PERCENT,
) -> Verdict:
    """The verdict on a change from the ``before`` figures of a series to the ``after`` ones
    (each a set: one figure, or repeated samples of one run), for a figure better ``higher``
    or ``lower`` (or a ``count``, neither); ``control``: the figures declare they measure the
    machine (:data:`CONTROL`).

    Each side stands as its **median** (one slow sample does not move it), and its **spread**
    is its min–max range. The rule, in order:

    1. a count is ``count``; equal medians are ``same``;
    2. a control is ``noise``: nothing the steps change touches it, so its change is the
       machine's, however large (a 2-core machine busy elsewhere slowed the demo's wall-clock
       matmul 3.4 times over, all five samples alike);
    3. with repeated samples on either side, ``noise`` when the two ranges overlap: the change
       is within what one side's own samples reach;
    4. ``noise`` when the medians are within :data:`NOISE_PERCENT` of the earlier one (the
       precision of one figure, and the drift between runs that a tight spread within one run
       does not show); a rollout's gate gives its own tolerance as ``noise_percent``;
    5. else ``better`` or ``worse`` by the direction.

    Why min–max and not MAD or a standard deviation: the noise of a shared machine is one-sided
    and bursty (another process only ever slows a sample, and a burst slows some samples of a
    run and not the others), so a dispersion estimate that treats the slow samples as outliers
    would call the burst a change. With five samples each side, two sets of the same figure
    keep their ranges apart in 2 of the 252 ways to order ten samples (under 1%); the range
    errs towards noise, which is the side a verdict that sends people to roll back an upgrade
    should err on. The range is also what a reader sees: the page prints ``low–high ×n``.
    """
    if not before or not after:
        raise ValueError("a verdict needs a figure on each side")
    b, a = sorted(before), sorted(after)
    mb, ma = statistics.median(b), statistics.median(a)

    def made(verdict: str, why: str) -> Verdict:
        return Verdict(mb, ma, b[0], b[-1], len(b), a[0], a[-1], len(a), direction, verdict, why)

    repeated = len(b) > 1 or len(a) > 1
    what = "median" if repeated else "figure"
    if direction == "count":
        return made("count", "a count: neither better nor worse")
    if ma == mb:
        return made("same", f"the same {what}")
    if control:
        return made(
            "noise",
            f"a control ({CONTROL} label): it measures the machine, which no step changes, "
            "so its change is the machine's (load, clocks)",
        )
    if repeated and a[0] <= b[-1] and b[0] <= a[-1]:
        return made("noise", "within the spread of the repeated figures (their ranges overlap)")
    percent = percent_change(mb, ma)
    if percent is not None and abs(percent) <= noise_percent:
        return made("noise", f"within {noise_percent:g}% of the earlier {what}")
    better = (ma > mb) == (direction == "higher")
    apart = " and outside the spread of the repeated figures" if repeated else ""
    limit = f"more than {noise_percent:g}%" if percent is not None else "from 0"
    return made("better" if better else "worse", f"{limit}{apart}, {direction} is better")


class Point(Protocol):
    """A figure as sets are made of: a timeline's ``MetricView``, a detector's ``Figure``."""

    @property
    def value(self) -> float: ...

    @property
    def run(self) -> str | None: ...

    @property
    def labels(self) -> dict[str, str]: ...


P = TypeVar("P", bound=Point)


def same_set(earlier: Point, later: Point) -> bool:
    """Whether a later figure of a series is a repeated sample of the earlier one: both printed
    by one benchmark run, in one ``phase``. Separate runs are separate sets, however close and
    whatever lies between them: a change between two of them is judged (something outside the
    record, a server restarted with other flags, may lie between), and a figure recorded by hand
    is a set of its own."""
    return (
        earlier.run is not None
        and earlier.run == later.run
        and earlier.labels.get("phase") == later.labels.get("phase")
    )


def sets(points: Iterable[P]) -> list[list[P]]:
    """The consecutive figures of one series (trusted ones, in order) as sets (:func:`same_set`)."""
    found: list[list[P]] = []
    for point in points:
        if found and same_set(found[-1][-1], point):
            found[-1].append(point)
        else:
            found.append([point])
    return found


def summary(points: Sequence[Point]) -> tuple[float, float, float, int]:
    """One set as each side of a verdict shows it: its median, min, max and count."""
    values = sorted(p.value for p in points)
    return statistics.median(values), values[0], values[-1], len(values)


def judge_sets(
    before: Sequence[Point], after: Sequence[Point], direction: str, control: bool = False
) -> Verdict:
    """:func:`judge` of two sets of figures."""
    return judge([p.value for p in before], [p.value for p in after], direction, control)
