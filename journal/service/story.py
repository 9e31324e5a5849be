"""The upgrade's story at a glance: per host the stack before and after, the headline throughput
first, worst and last, and the findings by state.

One fold of what the timeline already holds (probe readings, package snapshots, figures) and
the judged findings, shown by the journal page, `journal status`, the top of `journal log` and
the postmortem's summary, so all four tell the same story.

- **Stack**: torch (with its variant: ``2.10.0+cu128``), the CUDA torch was built for, NCCL and
  the driver, from the first and the latest torch-env reading on the host (or what an imported
  transcript printed of them); then the key
  packages (drift's list: torch's family, triton, numpy, the kernels, flashinfer, sglang,
  vllm, nccl) whose
  version differs between the first package snapshot and the latest, with the number of other
  packages that moved.
- **Headline**: the preferred rate series (output tokens/s first) with at least two sets of
  trusted figures (a set: the repeated samples of one benchmark run, or one figure): its
  first, its worst and its last set (each its median), and the change first → last with its
  verdict (``better``, ``worse``, ``noise``, ``same``: :func:`journal.projections.verdict.judge`,
  the one every surface shows), so that +2.6% between two single figures reads as noise.
- **Findings**: how many are open (by severity), acknowledged and resolved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from journal.mapper import of_plain
from journal.pitfalls.base import Finding, Tally
from journal.projections.drift.readings import key_package
from journal.projections.index import READINGS, SEP, STACK, Facts, facts_of
from journal.projections.metrics import (
    all_series,
    before_after,
    changes,
    headline_rank,
)
from journal.projections.packages import normalize
from journal.projections.timeline import MetricView, StepRunView, Timeline
from journal.projections.unread import Unread, texts
from journal.projections.verdict import VERDICT_WORDS, percent_change
from journal.reading.bench import DISPLAY


@dataclass(frozen=True)
class Moved:
    """One part of a host's stack, before and after (None: absent, or not read)."""

    what: str
    before: str | None
    after: str | None

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass
class HostStory:
    """One host: its stack first and last, and the packages that moved."""

    host: str
    stack: list[Moved] = field(default_factory=list)
    packages: list[Moved] = field(default_factory=list)
    other_packages: int = 0  # packages that moved but are not key ones
    readings: int = 0  # torch-env readings the stack comes from
    #: snapshots and torch-env readings that failed outside the span the story compares (before
    #: the host's first good one or after its latest): what it says may not be all that moved
    unread: list[Unread] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(m.changed for m in self.stack) or bool(self.packages or self.other_packages)


@dataclass(frozen=True)
class Headline:
    """The headline series: its first, worst and last set of trusted figures (medians)."""

    title: str
    display: str  # the metric as people say it, with its benchmark: "Output tok/s (bench_serving)"
    metric: str
    host: str | None
    unit: str | None
    first: float
    worst: float
    last: float
    higher_is_better: bool
    #: the change first → last as the throughput page judges it: better, worse, noise, same
    verdict: str = "better"

    @property
    def percent(self) -> float | None:
        return percent_change(self.first, self.last)


@dataclass
class Story:
    hosts: list[HostStory]
    headline: Headline | None
    #: open findings by severity, and how many are acknowledged and resolved
    open: dict[str, int]
    acknowledged: int
    resolved: int

    @property
    def findings(self) -> dict[str, int]:
        return {
            "open": sum(self.open.values()),
            "acknowledged": self.acknowledged,
            "resolved": self.resolved,
        }

    def as_dict(self) -> dict[str, Any]:
        """The story as JSON carries it (``journal status --format json``, the postmortem)."""
        head = self.headline
        return {
            "hosts": [
                {
                    "host": h.host,
                    "stack": [_moved(m) for m in h.stack],
                    "packages": [_moved(m) for m in h.packages],
                    "other_packages": h.other_packages,
                    "unread": [u.to_dict() for u in h.unread],
                }
                for h in self.hosts
            ],
            "headline": None
            if head is None
            else {
                "title": head.title,
                "display": head.display,
                "metric": head.metric,
                "host": head.host,
                "unit": head.unit,
                "first": head.first,
                "worst": head.worst,
                "last": head.last,
                "percent": None if head.percent is None else round(head.percent, 1),
                "higher_is_better": head.higher_is_better,
                "verdict": head.verdict,
            },
            "findings": {
                "open": dict(self.open),
                "acknowledged": self.acknowledged,
                "resolved": self.resolved,
            },
        }


def _moved(m: Moved) -> dict[str, Any]:
    return {"what": m.what, "before": m.before, "after": m.after, "changed": m.changed}


def _versions(snapshot: dict[str, Any]) -> dict[str, str | None]:
    return {
        normalize(name): (entry or {}).get("version") if isinstance(entry, dict) else None
        for name, entry in snapshot.items()
    }


def _after(key: str) -> str:
    """A fact key's place (what follows its host and kind)."""
    return key.rsplit(SEP, 1)[-1]


def _host_stories(facts: Facts) -> list[HostStory]:
    """Each host's story from its facts (:mod:`journal.projections.index`): the first and
    latest stack reading, the first and latest package set, and the snapshots and readings
    that failed before the host's first good one or after its latest (those between two good
    ones change nothing the story compares)."""
    stories = []
    for host in facts.story_hosts():
        of = f"{host}{SEP}"
        story = HostStory(host, readings=facts.count(f"d:{of}"))
        if story.readings:
            first, last = facts.first(f"d:{of}")[1], facts.last(f"d:{of}")[1]  # type: ignore[index]
            story.stack = [
                Moved(label, first[label], last[label])
                for label, _ in STACK
                if first[label] or last[label]
            ]
        latest = facts.latest_packages(host)
        first_snap = facts.first(f"n:{of}")
        if first_snap is not None and latest is not None:
            before, after = _versions(facts.snapshot(first_snap[1])), _versions(latest)
            moved = sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n))
            story.packages = [
                Moved(n, before.get(n), after.get(n)) for n in moved if key_package(n)
            ]
            story.other_packages = len(moved) - len(story.packages)
        for kind in ("packages", *READINGS):
            failed = f"m:{of}{kind}{SEP}"
            if not facts.count(failed):
                continue
            good = facts.first(f"g:{of}{kind}{SEP}"), facts.last(f"g:{of}{kind}{SEP}")
            if good[0] is None:
                misses = facts.all(failed)
            else:  # those between two good reads change nothing: not read
                misses = facts.all(failed, end=_after(good[0][0]))
                misses += facts.all(failed, start=_after(good[1][0]))  # type: ignore[index]
            for key, miss in misses:
                at = _after(key)
                if good[0] is None or at < _after(good[0][0]):
                    story.unread.append(of_plain(Unread, miss))
                elif at > _after(good[1][0]):  # type: ignore[index]
                    if kind != "packages" or miss["seq"] > facts.latest_packages_seq(host):
                        # a snapshot on its own (`journal run probe packages`) is no item,
                        # but the host's latest package set: failures before it are behind
                        story.unread.append(of_plain(Unread, miss))
        story.unread.sort(key=lambda u: u.seq)
        if story.stack or story.packages or story.other_packages or story.unread:
            stories.append(story)
    return stories


def headline(metrics: list[MetricView]) -> Headline | None:
    """The preferred rate series' first, worst and last set (its figures ``metrics``, in the
    order recorded). What lies between two sets (:func:`change_steps`) changes no verdict, so
    none is looked up."""
    found = all_series(metrics)
    order = {id(s): i for i, s in enumerate(found)}
    steps: list[StepRunView] = []
    for series in sorted(
        (s for s in found if s.higher_is_better),
        key=lambda s: (headline_rank(s.name), order[id(s)]),
    ):
        # judged as every surface judges it (journal.projections.verdict.judge): the set
        # before the upgrade against the latest, median against median
        overall = before_after(series, steps)
        if overall is None:
            continue
        # the medians of the sets from the one before the upgrade on
        later = [c.after for c in changes(series, steps) if c.first.seq >= overall.first.seq]
        medians = [overall.before, *later]
        what = series.labels.get("benchmark")
        display = DISPLAY.get(series.name, series.name) + (f" ({what})" if what else "")
        return Headline(
            title=series.title,
            display=display,
            metric=series.name,
            host=series.host,
            unit=series.unit,
            first=overall.before,
            worst=min(medians),
            last=overall.after,
            higher_is_better=True,
            verdict=overall.verdict,
        )
    return None


def story(timeline: Timeline | Facts, findings: list[Finding] | Tally) -> Story:
    """The story of a judged journal (its timeline, or the facts its stored index holds:
    :class:`journal.projections.digest.Digest`): ``findings`` are its findings, or their tally."""
    tally = findings if isinstance(findings, Tally) else Tally.of(findings)
    facts = facts_of(timeline) if isinstance(timeline, Timeline) else timeline
    return Story(
        hosts=_host_stories(facts),
        headline=facts.headline(headline),
        open=dict(tally.open),
        acknowledged=tally.acknowledged,
        resolved=tally.resolved,
    )


def _span(m: Moved) -> str:
    before, after = m.before or "-", m.after or "-"
    return f"{m.what} {after}" if not m.changed else f"{m.what} {before} → {after}"


def lines(told: Story) -> list[str]:
    """The story as a few plain lines (the CLI's header; the postmortem's summary)."""
    from journal.display import figure

    out = []
    for host in told.hosts:
        parts = [_span(m) for m in host.stack if m.changed] + [
            _span(m) for m in host.packages if m.what not in ("torch",) or not host.stack
        ]
        if host.other_packages:
            parts.append(f"{host.other_packages} other package(s) moved")
        unchanged = [_span(m) for m in host.stack if not m.changed and m.after]
        unread = texts(host.unread)
        if not parts and unread:  # nothing seen to move is no "unchanged" when a read failed
            parts = [*unread, *(["last read: " + ", ".join(unchanged)] if unchanged else [])]
        elif not parts:
            parts = ["unchanged: " + ", ".join(unchanged)] if unchanged else ["nothing read"]
        else:
            parts += unread
        out.append(f"{host.host}: " + "; ".join(parts))
    head = told.headline
    if head is not None:
        unit = f" {head.unit}" if head.unit else ""
        path = " → ".join(figure(v, None) for v in (head.first, head.worst, head.last))
        where = f" on {head.host}" if head.host else ""
        said = VERDICT_WORDS.get(head.verdict, "")
        pct = "" if head.percent is None else f" ({head.percent:+.1f}% first to last{said})"
        out.append(f"{head.display}{where}: {path}{unit}, first → worst → last{pct}")
    opened = ", ".join(f"{n} {sev}" for sev, n in told.open.items() if n) or "none"
    out.append(
        f"findings: open {opened}; acknowledged {told.acknowledged}; resolved {told.resolved}"
    )
    return out


#: Findings that say a run changed nothing it was asked to change.
NO_CHANGE = frozenset({"noop-install", "variant-not-switched"})


def run_status(run: StepRunView, findings: list[Finding]) -> str:
    """The status a run is shown with: ``no change`` (amber) for one that succeeded but changed
    nothing it was asked to (an install that did nothing, a variant not switched), else its
    own (``succeeded``, ``failed``, ``running``, ``lost``, ``interrupted``…). ``findings``: the
    run's findings, in any state (a no-op stays a no-op once acknowledged)."""
    if run.status == "succeeded" and any(
        f.id in NO_CHANGE for f in findings if f.run == run.run_id
    ):
        return "no change"
    return run.status


def open_errors(run: StepRunView, findings: list[Finding]) -> int:
    """How many error findings of the run are still open."""
    return sum(1 for f in findings if f.run == run.run_id and f.is_open and f.severity == "error")
