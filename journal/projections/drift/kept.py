"""Drift's readings kept in the projection tables and folded on from where they stood, so that
`journal drift` reads the probes and snapshots recorded since the last reader, not every one of
a year's journal (:class:`journal.projections.stored.StoredProjection`).

One row, ``readings``: the :class:`Readings` of the journal as plain JSON (the stretches of
equal readings per host and thing, and the step runs drift names), made again here field by
field (the mapper makes lists of dataclasses, not maps of them).
"""

from __future__ import annotations

from typing import Any

from journal.projections.drift.readings import (
    EVENT_TYPES,
    HostReadings,
    Readings,
    Segment,
    Source,
    StepRunRef,
    Value,
    fold,
)
from journal.projections.stored import StoredProjection
from journal.store.cache import Head, ProjectionCache

ROW = "readings"


class _Kept(StoredProjection):
    name = "drift"
    sources = (
        "projections/drift/readings.py",
        "projections/drift/kept.py",
        "projections/stored.py",
    )


def _source(d: dict[str, Any] | None) -> Source | None:
    return None if d is None else Source(**d)


def _host(d: dict[str, Any]) -> HostReadings:
    series = {
        key: [
            Segment(Value(**s["value"]), Source(**s["first"]), Source(**s["last"]), s["between"])
            for s in segs
        ]
        for key, segs in d["series"].items()
    }
    return HostReadings(
        d["host"],
        series,
        _source(d["probed"]),
        _source(d["transcript"]),
        _source(d["first_snapshot"]),
        _source(d["snapshot"]),
    )


def readings_of(d: dict[str, Any]) -> Readings:
    """:class:`Readings` made again from its stored row."""
    return Readings(
        d["journal"],
        dict(d["hosts"]),
        d["runbook"],
        {run: StepRunRef(**ref) for run, ref in d["runs"].items()},
        {host: _host(h) for host, h in d["by_host"].items()},
        d["events"],
        d["last_seq"],
        d["run_hosts"],
        {name: list(hosts) for name, hosts in d.get("groups", {}).items()},
    )


def current_readings(store: Any, journal: str) -> Readings:
    """The journal's readings as they stand: the stored ones folded on with the probes,
    snapshots and runs recorded since (and stored again for the next reader)."""
    kept = _Kept(ProjectionCache(store.engine), journal)
    got = kept.read(lambda head: (head, kept.rows([ROW]).get(ROW)))
    head: Head | None = got[0] if got else kept.head()
    found = readings_of(got[1]) if got and got[1] is not None else None
    start = found.last_seq if found is not None else 0
    readings = fold(journal, store.read(journal, types=EVENT_TYPES, after=start), found)
    if found is None or readings.last_seq > start:
        # another process may have saved meanwhile: then its state stands, and this one's
        # readings are as right for this reader
        kept.save(
            readings.last_seq,
            {ROW: readings},  # written field by field, not copied
            since=head,
            anew=found is None,
        )
    return readings
