"""Which timeline items a request asks for (host, kind, status, severity, text), and how
they line up when hosts are shown side by side.

The text search in the output is the store's (:meth:`journal.store.EventStore.runs_with_text`):
a LIKE over the stored chunk payloads narrows the candidates in the database, and only the
chunks it returns are decoded to confirm the match.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from journal.projections.timeline import (
    HostKeyView,
    MetricView,
    NoteView,
    ProbeView,
    StepRunView,
    TimelineItem,
)
from journal.runs import FAILED, STATUSES, SUCCEEDED
from journal.store import EventStore
from journal.web.state import JournalState

KINDS = ("step", "interactive", "probe", "note", "metric", "host-key")
LAYOUTS = ("list", "hosts")


#: A timeline longer than this shows its newest items, and a link to all of them: a page's
#: cost follows what it shows, not how long the journal has grown.
NEWEST = 500


@dataclass(frozen=True)
class TimelineQuery:
    """The filters of the timeline, as given in the URL (empty means any)."""

    host: str = ""
    kind: str = ""
    status: str = ""
    severity: str = ""
    q: str = ""
    layout: str = "list"
    every: bool = False  # all the items, not only the newest NEWEST

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> TimelineQuery:
        def pick(name: str, allowed: Iterable[str] | None = None) -> str:
            value = (args.get(name) or "").strip()
            return value if allowed is None or value in allowed else ""

        return cls(
            host=pick("host"),
            kind=pick("kind", KINDS),
            status=pick("status", STATUSES),
            severity=pick("severity", ("info", "warning", "error")),
            q=pick("q")[:200],
            layout=pick("layout", LAYOUTS) or "list",
            every=pick("every") == "1",
        )

    @property
    def active(self) -> bool:
        return any((self.host, self.kind, self.status, self.severity, self.q))

    def args(self, **changes: str) -> dict[str, str]:
        """The query as URL arguments (only those set), with ``changes`` applied."""
        values = {
            "host": self.host,
            "kind": self.kind,
            "status": self.status,
            "severity": self.severity,
            "q": self.q,
            "layout": "" if self.layout == "list" else self.layout,
            "every": "1" if self.every else "",
        }
        values.update(changes)
        return {k: v for k, v in values.items() if v}


def kind_of(item: TimelineItem) -> str:
    if isinstance(item, StepRunView):
        return "step"
    if isinstance(item, ProbeView):
        return "probe"
    if isinstance(item, NoteView):
        return "note"
    if isinstance(item, MetricView):
        return "metric"
    return "host-key"


def is_kind(item: TimelineItem, kind: str) -> bool:
    """Whether ``item`` is of ``kind`` (``interactive``: a step run typed in `journal shell`,
    which is a ``step`` too)."""
    if kind == "interactive":
        return isinstance(item, StepRunView) and item.interactive
    return kind_of(item) == kind


def host_of(item: TimelineItem) -> str | None:
    """The host an item is about (None for a note about the whole journal)."""
    return item.host


def status_of(item: TimelineItem) -> str | None:
    """The status the filter reads of an item: a step run's own; a probe succeeded when it
    gave a result, else failed; None for the rest."""
    if isinstance(item, StepRunView):
        return item.status
    if isinstance(item, ProbeView):
        return SUCCEEDED if item.result is not None else FAILED
    return None


def runs_matching(store: EventStore, journal: str, needle: str) -> dict[str, str]:
    """The step runs of a journal whose output holds ``needle`` (case-insensitive), each with
    the first line that holds it (shown under the run in the results)."""
    return store.lines_with_text(journal, needle)


def select_items(
    state: JournalState, query: TimelineQuery, matching: Collection[str] | None = None
) -> list[TimelineItem]:
    """The timeline items that pass every filter of ``query``, in order."""
    open_runs = state.open_by_run()
    needle = query.q.casefold()
    chosen = []
    for item in state.timeline.items:
        if query.host and host_of(item) not in (query.host, None):
            continue
        if query.kind and not is_kind(item, query.kind):
            continue
        if query.status and status_of(item) != query.status:
            continue
        if query.severity:
            found = open_runs.get(item.run_id, []) if isinstance(item, StepRunView) else []
            if not any(f.severity == query.severity for f in found):
                continue
        if needle and not _matches(item, needle, matching or set()):
            continue
        chosen.append(item)
    return chosen


def _matches(item: TimelineItem, needle: str, matching: Collection[str]) -> bool:
    if isinstance(item, StepRunView):
        return item.run_id in matching or needle in item.command.casefold()
    if isinstance(item, NoteView):
        return needle in item.text.casefold()
    if isinstance(item, ProbeView):
        return needle in json.dumps(item.result or item.error or "").casefold()
    if isinstance(item, HostKeyView):
        return needle in f"{item.host} {item.target} {item.fingerprint}".casefold()
    if isinstance(item, MetricView):
        labels = " ".join(f"{k}={v}" for k, v in item.labels.items())
        return needle in f"{item.name} {labels} {item.unit or ''} {item.text or ''}".casefold()
    return False


def changed_since(
    state: JournalState, items: list[TimelineItem], after: int
) -> tuple[list[TimelineItem], list[TimelineItem]]:
    """Of ``items``: those new since event ``after``, and the earlier step runs that gained
    events since (a live view appends the first and replaces the second, by id)."""
    new, updated = [], []
    for item in items:
        if item.seq > after:
            new.append(item)
        elif isinstance(item, StepRunView) and state.touched.get(item.run_id, 0) > after:
            updated.append(item)
    return new, updated


@dataclass
class HostRow:
    """One row of the side-by-side view: a step (or probe) on each host that ran it, or an
    item about the whole journal (a note or a figure of no host) across every column."""

    key: tuple[str, ...]
    cells: dict[str, list[TimelineItem]] = field(default_factory=dict)
    wide: TimelineItem | None = None


def host_rows(items: list[TimelineItem]) -> list[HostRow]:
    """Items lined up per host: consecutive runs of one step (one plan run) share a row."""
    rows: list[HostRow] = []
    for item in items:
        host = host_of(item)
        if host is None:
            rows.append(HostRow(("note", str(item.seq)), wide=item))
            continue
        if isinstance(item, StepRunView):
            key: tuple[str, ...] = ("step", item.step, item.plan_run or "")
        elif isinstance(item, ProbeView):
            key = ("probe", item.probe)
        else:
            key = (kind_of(item), str(item.seq))
        last = rows[-1] if rows else None
        if last is not None and last.key == key and host not in last.cells:
            last.cells[host] = [item]
        else:
            rows.append(HostRow(key, {host: [item]}))
    return rows


def hosts_of(state: JournalState, items: Iterable[TimelineItem]) -> list[str]:
    """The runbook's hosts, then any other host the items name."""
    seen = [h for h in (host_of(i) for i in items) if h is not None]
    return list(dict.fromkeys([*state.timeline.hosts, *seen]))
