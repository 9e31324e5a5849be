"""A part of a journal: what was recorded since a moment, or during one plan run.

`journal export postmortem --since WHEN` and `--plan-run ID` tell a part of a long journal
(a year's journal is megabytes of postmortem): :func:`cut` keeps the timeline's items of the
part, :func:`journal.service.findings.findings_in` the findings about them, and the
postmortem is built from those as from a whole journal (its story, impact and charts then
tell that part alone).

- **since**: every item recorded (a run: started) at or after the moment;
- **plan run**: the step runs of that `journal run plan`, and the items recorded while it
  ran (a standalone probe, a figure, a note); the benchmarks run before and after it are runs
  of their own: cut by ``since`` to keep them.

Times are compared as the store writes them (UTC, ``2026-12-04T13:30:20.123456Z``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from journal.projections.timeline import (
    MetricView,
    ProbeView,
    StepRunView,
    Timeline,
    TimelineItem,
    item_time,
)

_AGO = re.compile(r"(\d+)([mhdw])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def since_moment(text: str, now: datetime | None = None) -> str:
    """The moment ``text`` names, as the store writes times: a date (``2026-11-28``), a UTC
    date and time (``2026-11-28T09:30``, seconds and a ``Z`` optional), or a span before
    ``now`` (``90m``, ``12h``, ``7d``, ``2w``). ValueError saying what it accepts otherwise."""
    text = text.strip()
    ago = _AGO.fullmatch(text)
    if ago:
        now = now or datetime.now(UTC)
        moment = now - timedelta(**{_UNITS[ago.group(2)]: int(ago.group(1))})
    else:
        try:
            moment = datetime.fromisoformat(text.removesuffix("Z").removesuffix("z"))
        except ValueError:
            raise ValueError(
                f"{text!r} is no moment: give a date (2026-11-28), a UTC date and time "
                "(2026-11-28T09:30) or a span before now (90m, 12h, 7d, 2w)"
            ) from None
        if moment.tzinfo is not None:
            moment = moment.astimezone(UTC)
    return moment.replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


@dataclass(frozen=True)
class Part:
    """Which part of a journal: since a moment (as the store writes times), one plan run, or
    both (the plan run's items from that moment)."""

    since: str | None = None
    plan_run: str | None = None

    def __bool__(self) -> bool:
        return self.since is not None or self.plan_run is not None


def plan_runs(timeline: Timeline) -> list[str]:
    """The plan runs of a timeline, oldest first."""
    return list(dict.fromkeys(r.plan_run for r in timeline.step_runs() if r.plan_run))


def find_plan_run(timeline: Timeline, wanted: str, known: list[str] | None = None) -> str:
    """The plan run ``wanted`` names (its id, a unique prefix, or ``latest``; ``known``: the
    timeline's plan runs, where the caller read them); ValueError saying which there are
    otherwise."""
    known = plan_runs(timeline) if known is None else known
    if not known:
        raise ValueError(f"the journal {timeline.journal!r} has no plan run")
    if wanted == "latest":
        return known[-1]
    matches = [p for p in known if p.startswith(wanted)] if wanted else []
    if len(matches) == 1:
        return matches[0]
    if matches:
        said = f"{wanted!r} names {len(matches)} plan runs: give more of it"
    else:
        said = f"the journal {timeline.journal!r} has no plan run {wanted!r}"
    newest = ", ".join(reversed(known[-5:]))
    raise ValueError(f"{said} (the latest first: {newest}; or 'latest')")


def plan_span(runs: Iterable[StepRunView], plan_run: str) -> tuple[str, str]:
    """When the plan run ran: its first run's start and its last run's end."""
    own = [r for r in runs if r.plan_run == plan_run]
    begin = min((r.started for r in own), default="")
    end = max((r.finished or r.started for r in own), default="")
    return begin, end


def within(part: Part, span: tuple[str, str] = ("", "")) -> Callable[[TimelineItem], bool]:
    """Whether an item is of ``part`` (``span``: :func:`plan_span` of its plan run)."""
    begin, end = span

    def keep(item: TimelineItem) -> bool:
        if part.plan_run is not None:
            if isinstance(item, StepRunView):
                if item.plan_run != part.plan_run:
                    return False
            elif not begin <= item_time(item) <= end:
                return False
        return part.since is None or item_time(item) >= part.since

    return keep


class Latest:
    """Each host's latest probe results and package set among the items added (latest by
    the items' seq, whatever order they are added in): a part's as it stood at its end."""

    def __init__(self) -> None:
        self.probes: dict[str, dict[str, ProbeView]] = {}
        self.packages: dict[str, dict] = {}
        self.packages_seq: dict[str, int] = {}
        self._probe_seq: dict[tuple[str, str], int] = {}

    def add(self, item: TimelineItem) -> None:
        if isinstance(item, StepRunView):
            for probe in item.probes:
                self._probe(probe, item.seq)
            for phase in ("before", "after"):
                if phase in item.snapshots and item.seq >= self.packages_seq.get(item.host, -1):
                    self.packages[item.host] = item.snapshots[phase]
                    self.packages_seq[item.host] = item.seq
        elif isinstance(item, ProbeView):
            self._probe(item, item.seq)

    def _probe(self, probe: ProbeView, seq: int) -> None:
        key = (probe.host, probe.probe)
        if probe.result is not None and seq >= self._probe_seq.get(key, -1):
            self.probes.setdefault(probe.host, {})[probe.probe] = probe
            self._probe_seq[key] = seq


def cut(timeline: Timeline, part: Part) -> Timeline:
    """The timeline of ``part`` alone: its items, its runs and figures, and each host's
    latest probe results and packages as they stood at the part's end."""
    span = plan_span(timeline.step_runs(), part.plan_run) if part.plan_run else ("", "")
    items = [item for item in timeline.items if within(part, span)(item)]
    out = Timeline(timeline.journal, plan=list(timeline.plan), hosts=dict(timeline.hosts))
    out.items = list(items)
    out.events, out.last_ts = timeline.events, timeline.last_ts
    latest = Latest()
    for item in out.items:
        latest.add(item)
        if isinstance(item, StepRunView):
            out.runs[item.run_id] = item
            out.metrics.extend(item.metrics)
        elif isinstance(item, MetricView):
            out.metrics.append(item)
    out.metrics.sort(key=lambda m: m.seq)
    out.latest_probes, out.latest_packages = latest.probes, latest.packages
    out.latest_packages_seq = latest.packages_seq
    return out
