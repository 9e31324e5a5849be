"""``/metrics``: what an on-call dashboard wants of every journal, for Prometheus to scrape.

Each scrape builds a :class:`JournalCollector` over a fresh ``CollectorRegistry`` and writes
it with ``prometheus_client``'s own exposition (OpenMetrics when the ``Accept`` header asks for
``application/openmetrics-text``, else the text format 0.0.4), so every label value a host
sent (a host name, a version, a benchmark's command line) is escaped by the library.

Nothing here reads events: each journal is the state the pages use
(:meth:`journal.web.state.JournalStates.stored`: its stored timeline's index and its judged
findings, reused while the journal gains no event), and what a scrape says of it is worked
out once per state (:class:`Facts`). The figures are read once per change of a figure, not
per event: the stored timeline says at which event a figure last changed (``figures_at``,
what the story's headline is kept by). A scrape of a journal that did not change costs one
indexed query for its newest event; the first after a change costs what its page and its
story cost, plus reading the figures when one of them changed.

The metrics (label ``journal`` on each):

- ``journal_findings_open{severity,host}``: open findings (neither acknowledged nor
  resolved); ``host`` is ``""`` for findings of no host. Every severity of every host that
  has findings is there, 0 where none is open.
- ``journal_findings{state}``: how many findings are ``open``, ``acknowledged``, ``resolved``.
- ``journal_figure{host,metric,benchmark,unit,workload}``: the latest trusted value of each
  series of figures (the median of its latest set of repeated samples, as the throughput page
  and the story's headline take it); ``workload`` holds the series' other labels.
- ``journal_host_stack_info{host,torch,cuda,nccl,driver}``: 1, with each host's stack from
  its latest torch-env reading, as the story (`journal status`) tells it.
- ``journal_events_total``, ``journal_last_event_seq``,
  ``journal_last_event_timestamp_seconds``.
- whatever :func:`rollout_metrics` adds.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flask import Blueprint, Response, current_app, request
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)

from journal.pitfalls.base import SEVERITIES, STATES
from journal.projections.index import STACK
from journal.projections.metrics import all_series, sample_sets
from journal.projections.verdict import summary
from journal.web.state import StoredState, all_states

bp = Blueprint("metrics", __name__)

#: The labels of ``journal_figure``.
FIGURE_LABELS = ("journal", "host", "metric", "benchmark", "unit", "workload")
#: The parts of a host's stack ``journal_host_stack_info`` carries, as its labels name them.
STACK_LABELS = tuple(label.lower() for label, _ in STACK)


def rollout_metrics(state: StoredState) -> list[Metric]:
    """The journal's latest gated rollout (`journal status`'s ``rollout``): its status (1 on
    the label of the one it is in, ``running`` until it finished), its batches by state and
    the hosts it left drained, one sample each. Read from the rollout events alone (the
    store's type index, :func:`journal.projections.rollouts.rollouts`). Every sample carries
    ``journal``; families of the same name from several journals are merged (:func:`merged`)."""
    from journal.projections.rollouts import BATCH_STATES, STATUSES, rollouts
    from journal.web.state import store

    latest = rollouts(store(), state.journal).latest()
    if latest is None:
        return []
    keys = [state.journal, latest.rollout, latest.gate]
    status = GaugeMetricFamily(
        "journal_rollout_status",
        "The latest gated rollout's status: 1 on the one it is in (running, completed, "
        "stopped, rolled-back, interrupted).",
        labels=["journal", "rollout", "gate", "status"],
    )
    for name in STATUSES:
        status.add_metric([*keys, name], 1.0 if latest.status == name else 0.0)
    batches = GaugeMetricFamily(
        "journal_rollout_batches",
        "The latest gated rollout's batches by state: passed, failed, pending.",
        labels=["journal", "rollout", "gate", "state"],
    )
    for name in BATCH_STATES:
        count = sum(1 for b in latest.batches if b.state == name)
        batches.add_metric([*keys, name], float(count))
    drained = GaugeMetricFamily(
        "journal_rollout_host_drained",
        "1 for each host the latest rollout left out of service (its before_batch ran, its "
        "after_batch did not).",
        labels=["journal", "rollout", "gate", "host"],
    )
    for host in latest.drained:
        drained.add_metric([*keys, host], 1.0)
    return [status, batches, drained]


@dataclass(frozen=True)
class Facts:
    """What a scrape says of one journal at one state."""

    journal: str
    #: open findings: (severity, host) -> how many ("" for no host)
    open: dict[tuple[str, str], int]
    #: findings by state: open, acknowledged, resolved
    states: dict[str, int]
    #: the latest trusted value of each series: (host, metric, benchmark, unit, workload)
    figures: dict[tuple[str, str, str, str, str], float]
    #: per host (that has a torch-env reading) its stack as the story tells it last
    stacks: dict[str, dict[str, str]]
    events: int
    last_seq: int
    last_ts: float | None


@dataclass
class FactsCache:
    """Each journal's :class:`Facts` with the state they were worked out at, and its latest
    figures with the stored timeline's ``(version, figures_at)`` they were read at. Shared by
    the requests of one app."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    facts: dict[str, tuple[StoredState, Facts]] = field(default_factory=dict)
    figures: dict[str, tuple[tuple[str, int], dict[Any, float]]] = field(default_factory=dict)

    def of(self, state: StoredState) -> Facts:
        with self.lock:
            known = self.facts.get(state.journal)
        if known is not None and known[0] is state:
            return known[1]
        found = facts(state, self.latest_figures(state))
        with self.lock:
            self.facts[state.journal] = (state, found)
        return found

    def latest_figures(self, state: StoredState) -> dict[Any, float]:
        """The journal's latest figures, read again only when a figure changed."""
        head = state.index.head
        if head is None:
            return latest_figures(state)
        key = (head.version, int(state.index.top.get("figures_at", 0)))
        with self.lock:
            known = self.figures.get(state.journal)
        if known is not None and known[0] == key:
            return known[1]
        found = latest_figures(state)
        with self.lock:
            self.figures[state.journal] = (key, found)
        return found


def _cache() -> FactsCache:
    return current_app.extensions.setdefault("journal_metrics", FactsCache())


def workload(labels: dict[str, str]) -> str:
    """A series' labels but its benchmark, as ``k=v`` joined by commas (sorted): what tells
    two series of one metric, host and benchmark apart (a command line, a concurrency)."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "benchmark")


def latest_figures(state: StoredState) -> dict[tuple[str, str, str, str, str], float]:
    """Per series of figures (:func:`journal.projections.metrics.all_series` of what the
    throughput page reads, :meth:`StoredState.figures`) the median of its latest set of
    trusted figures (:func:`sample_sets`, :func:`summary`: the figure the page, the story's
    headline and the postmortem's impact call its latest); series with none left out."""
    out: dict[tuple[str, str, str, str, str], float] = {}
    for series in all_series(state.figures()):
        found = sample_sets(series)
        if not found:
            continue
        key = (
            series.host or "",
            series.name,
            series.labels.get("benchmark", ""),
            series.unit or "",
            workload(series.labels),
        )
        out.setdefault(key, summary(found[-1])[0])
    return out


def facts(state: StoredState, figures: dict[Any, float]) -> Facts:
    """What a scrape says of the journal at ``state``: its findings as the pages count them,
    its story's stack (:meth:`StoredState.story`, the story `journal status` tells), its
    latest ``figures`` and where its events stand."""
    told = state.story()
    assert told is not None  # a stored state always tells its story
    hosts = {host.host for host in told.hosts} | set(state.index.story_hosts())
    hosts |= {f.host or "" for f in state.findings}
    opened = {(severity, host): 0 for host in sorted(hosts - {""}) for severity in SEVERITIES}
    if "" in hosts:
        opened.update({(severity, ""): 0 for severity in SEVERITIES})
    for found in state.findings:
        if found.is_open:
            opened[(found.severity, found.host or "")] += 1
    stacks = {}
    for host in told.hosts:
        if host.stack:
            latest = {m.what.lower(): m.after or "" for m in host.stack}
            stacks[host.host] = {label: latest.get(label, "") for label in STACK_LABELS}
    last_ts = state.timeline.last_ts
    return Facts(
        journal=state.journal,
        open=opened,
        states={name: told.findings[name] for name in STATES},
        figures=figures,
        stacks=stacks,
        events=state.timeline.events,
        last_seq=state.last_seq,
        last_ts=None if not last_ts else _seconds(last_ts),
    )


def _seconds(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def merged(families: Iterable[Metric]) -> list[Metric]:
    """Families of the same name as one (each journal's own, from :func:`rollout_metrics`),
    the first one's help and type kept."""
    out: dict[str, Metric] = {}
    for family in families:
        known = out.get(family.name)
        if known is None:
            out[family.name] = family
        else:
            known.samples.extend(family.samples)
    return list(out.values())


class JournalCollector:
    """The metrics of the journals ``states`` (see the module's docstring)."""

    def __init__(self, states: Iterable[StoredState], cache: FactsCache) -> None:
        self.states = list(states)
        self.cache = cache

    def collect(self) -> Iterator[Metric]:
        known = [self.cache.of(state) for state in self.states]
        opened = GaugeMetricFamily(
            "journal_findings_open",
            "Open findings (neither acknowledged nor resolved) by severity and host "
            '(host "" for findings of no host).',
            labels=["journal", "severity", "host"],
        )
        by_state = GaugeMetricFamily(
            "journal_findings",
            "Findings by state: open, acknowledged, resolved.",
            labels=["journal", "state"],
        )
        figures = GaugeMetricFamily(
            "journal_figure",
            "The latest trusted value of each series of figures: the median of its latest set "
            "of repeated samples.",
            labels=list(FIGURE_LABELS),
        )
        stacks = InfoMetricFamily(
            "journal_host_stack",
            "Each host's stack (torch, CUDA, NCCL, driver) from its latest torch-env reading.",
            labels=["journal", "host"],
        )
        events = CounterMetricFamily(
            "journal_events", "Events recorded in the journal.", labels=["journal"]
        )
        last_seq = GaugeMetricFamily(
            "journal_last_event_seq",
            "The sequence number of the journal's newest event.",
            labels=["journal"],
        )
        last_ts = GaugeMetricFamily(
            "journal_last_event_timestamp_seconds",
            "When the journal's newest event was recorded (Unix time).",
            labels=["journal"],
        )
        for one in known:
            j = one.journal
            for (severity, host), n in one.open.items():
                opened.add_metric([j, severity, host], n)
            for name, n in one.states.items():
                by_state.add_metric([j, name], n)
            for labels, value in one.figures.items():
                figures.add_metric([j, *labels], value)
            for host, stack in one.stacks.items():
                stacks.add_metric([j, host], stack)
            events.add_metric([j], one.events)
            last_seq.add_metric([j], one.last_seq)
            if one.last_ts is not None:
                last_ts.add_metric([j], one.last_ts)
        yield from (opened, by_state, figures, stacks, events, last_seq, last_ts)
        yield from merged(family for state in self.states for family in rollout_metrics(state))


@bp.get("/metrics")
def metrics() -> Response:
    """Every journal's metrics in the exposition the ``Accept`` header asks for."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(JournalCollector(all_states(), _cache()))
    encode, content_type = choose_encoder(request.headers.get("Accept", ""))
    return Response(encode(registry), content_type=content_type)
