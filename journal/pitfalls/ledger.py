"""The findings of a journal as a persisted projection: judged once, as the events come.

Judging a whole journal reads every event and every byte of output; a step that printed one
line should not pay for a year of history. The ledger keeps, in the projection tables (a
cache: :mod:`journal.store.cache`), every finding with its lifecycle (a row per step run) and,
per host, what judging the next run there needs: the last few runs (their output cut to its
tail), the last run with a torch-env probe, the last trusted figure of each series, the
findings still open and the latest resolved one of each pitfall. Bringing it up to date reads
the events after its head, judges the runs they touch with that context, offers them to the
open findings of their hosts (:mod:`journal.pitfalls.lifecycle`) and saves the rows it
changed. A run still running is judged on every read and saved once it ended; a run whose
recorder died is judged as interrupted. Detectors that look ahead (``LOOKS_AHEAD``) may
add or reword a finding about a recent run when a later one shows more.

The version of the state is a digest of the judging code: a better detector makes the next
read judge the whole journal again, once.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from journal.events import PitfallAcknowledged, PitfallUnacknowledged, StepStarted
from journal.mapper import Recorded
from journal.pitfalls import SEVERITIES, judge
from journal.pitfalls._bench import Figure, figure_key, figures
from journal.pitfalls.base import (
    Evidence,
    Finding,
    Resolution,
    Run,
    Segment,
    Subject,
    Tally,
)
from journal.pitfalls.lifecycle import (
    AckBook,
    Lifecycle,
    Stored,
    follow_from,
    plain,
    with_acks,
)
from journal.pitfalls.subjects import from_journal
from journal.pitfalls.window import Window
from journal.projections.packages import diff_packages
from journal.store import EventStore
from journal.store.cache import Head, ProjectionCache

PROJECTION = "findings"
#: The row counting the stored findings by pitfall, severity and open or resolved.
TALLY = "tally"
#: Finished runs of a host kept as context for judging the next ones.
CONTEXT_RUNS = 8
#: The tail of a context run's output kept (detectors reading earlier output see this much).
CONTEXT_TEXT = 16_384
#: Runs whose figures are kept per series: the newest whose run is not judged again is what
#: the next figure is compared with.
FIGURES_KEPT = 3
#: Figures kept of one run of a series: the repeated samples a benchmark printed, compared as
#: a whole (see journal.pitfalls.throughput_regression).
SAMPLES_KEPT = 32
#: Events folded at a time when the whole journal is judged again.
BATCH = 20_000

Alive = Callable[[str, int], bool]


@functools.cache
def version() -> str:
    """A digest of the code that judges: the detectors, the projections they read, parsers."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for folder in ("pitfalls", "projections", "projections/drift", "benchmarks/parsers"):
        for path in sorted((root / folder).glob("*.py")):
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for name in ("versions.py", "transcript.py", "output.py"):
        path = root / name
        if path.exists():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# -- serialising -----------------------------------------------------------------------------


def finding_json(f: Finding) -> dict[str, Any]:
    by = f.resolved_by
    return {
        "id": f.id,
        "severity": f.severity,
        "title": f.title,
        "advice": f.advice,
        "evidence": [_evidence_json(e) for e in f.evidence],
        "run": f.run,
        "host": f.host,
        "step": f.step,
        "seq": f.seq,
        "facts": plain(f.facts),
        "resolved_by": [by.kind, by.run, by.step, by.host, by.event, by.why] if by else None,
        "regression_of": f.regression_of,
    }


def finding_of(d: dict[str, Any]) -> Finding:
    by = d["resolved_by"]
    return Finding(
        d["id"],
        d["severity"],
        d["title"],
        d["advice"],
        tuple(Evidence(*e) for e in d["evidence"]),
        run=d["run"],
        host=d["host"],
        step=d["step"],
        resolved_by=Resolution(*by) if by else None,
        regression_of=d["regression_of"],
        seq=d["seq"],
        facts=d["facts"],
    )


def run_json(run: Run) -> dict[str, Any]:
    text, start = run.text, 0
    if len(text) > CONTEXT_TEXT:
        cut = text.find("\n", len(text) - CONTEXT_TEXT)
        start = cut + 1 if cut >= 0 else len(text) - CONTEXT_TEXT
    return {
        "key": run.key,
        "step": run.step,
        "host": run.host,
        "command": run.command,
        "text": text[start:],
        "segments": _segments_from(run, start),
        "exit_code": run.exit_code,
        "status": run.status,
        "event": run.event,
        "env": run.env,
        "before": run.before,
        "after": run.after,
        "probes": run.probes,
        "probe_events": run.probe_events,
        "expectations": len(run.expectations),
        "imported": run.imported,
        "interactive": run.interactive,
        "reason": run.reason,
        "signal": run.signal,
        "rollback": run.rollback,
        "snapshotted": list(run.snapshotted),
        "unread": run.unread,
    }


def _segments_from(run: Run, start: int) -> list[list[Any]]:
    """The run's output segments for its text from ``start`` on: positions moved, and the
    segment cut in two numbered from its first kept line, so evidence keeps its lines."""
    out: list[list[Any]] = []
    if not run.segments:
        return out
    bounds = [s.start for s in run.segments[1:]] + [len(run.text)]
    for seg, end in zip(run.segments, bounds, strict=True):
        if start and end <= start:
            continue
        if seg.start >= start:
            out.append([seg.start - start, seg.stream, seg.event, seg.first_line])
        else:
            lines = run.text.count("\n", seg.start, start)
            out.append([0, seg.stream, seg.event, seg.first_line + lines])
    return out


def run_of(d: dict[str, Any]) -> Run:
    before, after = d["before"], d["after"]
    return Run(
        key=d["key"],
        step=d["step"],
        host=d["host"],
        command=d["command"],
        text=d["text"],
        segments=[Segment(*s) for s in d.get("segments", [])],
        exit_code=d["exit_code"],
        status=d["status"],
        event=d["event"],
        env=d["env"],
        diff=diff_packages(before, after) if before is not None and after is not None else None,
        before=before,
        after=after,
        probes=d["probes"],
        probe_events=d["probe_events"],
        expectations=[None] * d["expectations"],
        imported=d["imported"],
        reason=d["reason"],
        signal=d["signal"],
        rollback=d.get("rollback"),
        interactive=d.get("interactive", False),
        snapshotted=tuple(d.get("snapshotted", ())),
        unread=d.get("unread", []),
    )


def figure_json(f: Figure) -> dict[str, Any]:
    return {
        "name": f.name,
        "value": f.value,
        "unit": f.unit,
        "labels": f.labels,
        "event": f.event,
        "host": f.host,
        "run": f.run,
        "evidence": _evidence_json(f.evidence) if f.evidence else None,
    }


def _evidence_json(e: Evidence) -> list[Any]:
    return [e.text, e.line, e.event, e.run, e.stream]


# -- the state -------------------------------------------------------------------------------


@dataclass
class HostContext:
    """What judging the next run of a host needs from its past."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    probed: dict[str, Any] | None = None
    #: series -> its last figures (of different runs, newest last)
    figures: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: pitfall ids with open findings here (each id's in a row of its own: see _open_key)
    open: list[str] = field(default_factory=list)
    resolved: dict[str, str] = field(default_factory=dict)  # pitfall id -> finding key

    @classmethod
    def of(cls, d: dict[str, Any] | None) -> HostContext:
        return cls(**d) if d else cls()

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "probed": self.probed,
            "figures": self.figures,
            "open": self.open,
            "resolved": self.resolved,
        }


def _host_key(host: str | None) -> str:
    return f"host:{host or ''}"


def _open_key(host: str | None, id: str) -> str:
    """The row listing the open findings of one pitfall on one host: [run row, key] pairs."""
    return f"open:{host or ''}:{id}"


def _tally_key(id: str, severity: str, resolved: bool) -> str:
    return f"{id}\t{severity}\t{'resolved' if resolved else 'open'}"


def _run_key(found: Finding) -> str:
    return f"run:{found.run}" if found.run else f"run:~{found.seq}"


def _order(found: Finding) -> tuple[float, int, int, str]:
    """Where a finding is listed: as :func:`journal.pitfalls.judge` orders them."""
    if found.run and "run_event" in found.facts:
        at: tuple[float, int] = (found.facts["run_event"] or 0, 0)
    elif found.seq is not None:
        at = (found.seq, -1)
    else:
        at = (float("inf"), 0)
    return (*at, -SEVERITIES.index(found.severity), found.id)


@dataclass
class Folded:
    """What one bringing-up-to-date of the ledger found: the findings of the runs it judged
    (those still running included: they are never saved), and the head it reached."""

    seq: int
    judged: dict[str, list[Finding]] = field(default_factory=dict)  # run row key -> findings
    running: list[Finding] = field(default_factory=list)


class Ledger:
    """The findings projection of one journal."""

    def __init__(self, store: EventStore, journal: str, alive: Alive | None = None) -> None:
        self.store = store
        self.journal = journal
        self.alive = alive or store.liveness()  # the recorders' heartbeats
        self.cache = ProjectionCache(store.engine)

    # -- reading -------------------------------------------------------------------------------

    def findings(self) -> list[Finding]:
        """Every finding of the journal with its lifecycle and acknowledgements, in order."""
        folded = self.advance()
        rows = self.cache.rows(self.journal, PROJECTION)
        found = [
            finding_of(d) for key, body in rows.items() if key.startswith("run:") for d in body
        ]
        found += folded.running
        found.sort(key=_order)
        return with_acks(found, _acks(rows.get("acks")))

    def findings_of(self, runs: Iterable[str]) -> list[Finding]:
        """The findings about these step runs, with their lifecycle and acknowledgements."""
        folded = self.advance()
        keys = [f"run:{run}" for run in runs]
        rows = self.cache.rows(self.journal, PROJECTION, [*keys, "acks"])
        found = [finding_of(d) for key in keys for d in rows.get(key, [])]
        wanted = set(runs)
        found += [f for f in folded.running if f.run in wanted]
        found.sort(key=_order)
        return with_acks(found, _acks(rows.get("acks")))

    def tally(self) -> Tally:
        """How many findings are open (by severity), acknowledged and resolved, from the
        tally row: what it reads follows the acknowledgements, not the journal's length."""
        folded = self.advance()
        rows = self.cache.rows(self.journal, PROJECTION, [TALLY, "acks"])
        acks = _acks(rows.get("acks"))
        open_by = {severity: 0 for severity in reversed(SEVERITIES)}
        resolved = 0
        for key, n in (rows.get(TALLY) or {}).items():
            _, severity, state = key.split("\t")
            if state == "resolved":
                resolved += n
            else:
                open_by[severity] += n
        acknowledged = self._unresolved(acks, lambda f: acks.of(f) is not None)
        for f in acknowledged:
            open_by[f.severity] -= 1
        running = Tally.of(with_acks(folded.running, acks))
        for severity, n in running.open.items():
            open_by[severity] += n
        return Tally(
            open_by,
            len(acknowledged) + running.acknowledged,
            resolved + running.resolved,
        )

    def open_findings(self, severity: str) -> list[Finding]:
        """The open findings of one severity, in order: read from the rows of the pitfalls
        the tally shows open at that severity, not from every finding."""
        folded = self.advance()
        rows = self.cache.rows(self.journal, PROJECTION, [TALLY, "acks"])
        acks = _acks(rows.get("acks"))
        ids = {
            key.split("\t")[0]
            for key, n in (rows.get(TALLY) or {}).items()
            if n and key.endswith(f"\t{severity}\topen")
        }
        found = self._unresolved(
            acks, lambda f: f.severity == severity and acks.of(f) is None, ids=ids
        )
        found += [
            f for f in with_acks(folded.running, acks) if f.severity == severity and f.is_open
        ]
        found.sort(key=_order)
        return found

    def _unresolved(
        self,
        acks: AckBook,
        keep: Callable[[Finding], bool],
        ids: Iterable[str] | None = None,
    ) -> list[Finding]:
        """The stored findings not resolved that ``keep`` keeps, of pitfalls ``ids`` (without
        it, of the pitfalls and findings acknowledged), read through the open rows."""
        refs: dict[str, set[str]] = {}  # run row -> finding keys
        if ids is None:
            ids = set()
            for target in acks.acks:
                if ":" in target:  # id:run names one finding
                    refs.setdefault(f"run:{target.split(':', 1)[1]}", set()).add(target)
                else:
                    ids.add(target)
        wanted = set(ids)
        if wanted:
            lists = self.cache.rows(
                self.journal,
                PROJECTION,
                [
                    key
                    for key in self.cache.keys(self.journal, PROJECTION, "open:")
                    if key.rsplit(":", 1)[1] in wanted
                ],
            )
            for pairs in lists.values():
                for row, key in pairs:
                    refs.setdefault(row, set()).add(key)
        out: dict[str, Finding] = {}
        for row, body in self.cache.rows(self.journal, PROJECTION, refs).items():
            for d in body:
                one = finding_of(d)
                if one.key in refs[row] and one.resolved_by is None:
                    one = replace(one, acknowledged=acks.of(one))
                    if keep(one):
                        out[one.key] = one
        return list(out.values())

    def has(self, id: str) -> bool:
        """Whether the journal has a finding of pitfall ``id`` (none is loaded to tell)."""
        self.advance()
        return self.cache.holds(self.journal, PROJECTION, "run:", '"id":' + json.dumps(id))

    # -- folding -------------------------------------------------------------------------------

    def advance(self) -> Folded:
        """Bring the stored state up to the journal's newest event; what was judged."""
        for _ in range(8):
            head = self.cache.head(self.journal, PROJECTION)
            folded = self._fold(head)
            if folded is not None:
                return folded
        raise RuntimeError(f"the findings of {self.journal} kept changing while being folded")

    def _fold(self, head: Head | None) -> Folded | None:
        fresh = head is None or head.version != version()
        start = 0 if fresh or head is None else head.seq
        state = _State(self, fresh)
        folded = Folded(start)
        # each batch keeps the head and tail of a long output only (journal.pitfalls.window)
        batch = Window()
        for rec in self.store.read(self.journal, after=start):
            batch.add(rec)
            if len(batch.records) >= BATCH:
                state.fold(batch.records, folded, final=False)
                batch = Window()
        state.fold(batch.records, folded, final=True)
        if not state.changed and not fresh:
            return folded
        saved = self.cache.save(
            self.journal,
            PROJECTION,
            Head(version(), folded.seq),
            state.changed,
            since=head,
            replace=fresh,
        )
        return folded if saved else None


def _acks(rows: dict[str, Any] | None) -> AckBook:
    book = AckBook()
    for target, (note, by, at, event) in (rows or {}).items():
        book.acknowledged(target, note, by, at, event)
    return book


class _State:
    """The rows one fold reads and changes."""

    def __init__(self, ledger: Ledger, fresh: bool) -> None:
        self.ledger = ledger
        self.fresh = fresh
        self.rows: dict[str, Any] = {}
        self.changed: dict[str, Any] = {}
        self.loaded: set[str] = set()
        self.tally: dict[str, int] | None = None

    def row(self, key: str) -> Any:
        if key not in self.loaded:
            self.need([key])
        return self.rows.get(key)

    def need(self, keys: Iterable[str]) -> None:
        wanted = [k for k in keys if k not in self.loaded]
        if not wanted:
            return
        self.loaded.update(wanted)
        if self.fresh:
            return
        got = self.ledger.cache.rows(self.ledger.journal, PROJECTION, wanted)
        self.rows.update(got)

    def put(self, key: str, value: Any) -> None:
        if key.startswith("run:"):
            self._count(self.row(key), -1)
            self._count(value, 1)
        self.loaded.add(key)
        self.rows[key] = value
        self.changed[key] = value

    def _count(self, body: list[dict[str, Any]] | None, sign: int) -> None:
        """Move the tally row (findings by pitfall, severity and open or resolved: what
        ``Ledger.tally`` counts from without reading every finding) by a run row's findings."""
        if not body:
            return
        if self.tally is None:
            self.tally = dict(self.row(TALLY) or {})
        for d in body:
            key = _tally_key(d["id"], d["severity"], d["resolved_by"] is not None)
            self.tally[key] = self.tally.get(key, 0) + sign

    def _settle(self) -> None:
        if self.tally is not None and self.tally != (self.rows.get(TALLY) or {}):
            self.put(TALLY, {k: n for k, n in sorted(self.tally.items()) if n} or None)

    # -- one batch ---------------------------------------------------------------------------

    def fold(self, batch: list[Recorded], folded: Folded, final: bool) -> None:
        ledger = self.ledger
        pending: list[str] = list(self.row("pending") or [])
        if batch:
            folded.seq = batch[-1].seq
        upto = folded.seq
        started = {r.event.run for r in batch if isinstance(r.event, StepStarted)}
        late = {r.event.run_id for r in batch if r.event.run_id} - started
        late |= set(pending) if final else set()
        records = [r for r in batch if r.event.run_id not in late]
        for run in sorted(late):
            window = Window().extend(
                r for r in ledger.store.read(ledger.journal, run_id=run) if r.seq <= upto
            )
            records += window.records
        records.sort(key=lambda r: r.seq)
        self._acks(records)
        if not records:
            return
        subject, _ = from_journal(ledger.journal, records, ledger.alive)
        running = {run.key for run in subject.runs if run.status in ("running", "unfinished")}
        if not final:
            running |= {
                run.key
                for run in subject.runs
                if run.status in ("interrupted", "lost", "not started")
            }
        new = {run.key for run in subject.runs}
        hosts = {run.host for run in subject.runs} | {
            f.host for f in subject.metrics if isinstance(f, Figure) and f.host
        }
        self.need(_host_key(h) for h in hosts)
        contexts = {h: HostContext.of(self.row(_host_key(h))) for h in hosts}
        context_runs, carriers = self._context(contexts, new)
        self.need(f"run:{r.key}" for r in context_runs)
        whole = Subject(
            "journal",
            [*carriers, *context_runs, *subject.runs],
            ledger.journal,
            metrics=[f for c in carriers for f in c.figures_] + list(subject.metrics),
        )
        everything = judge(whole)
        ahead = _looks_ahead()
        events = {run.key: run.event for run in whole.runs}
        earlier = {r.key for r in context_runs}
        mine, revised = [], []
        for f in everything:
            if f.run in new or (f.run is None and (f.seq or 0) >= records[0].seq):
                mine.append(_with_event(f, events))
            elif f.run in earlier and f.id in ahead:
                revised.append(_with_event(f, events))
        if final:
            folded.running += [f for f in mine if f.run in running]
        kept = [f for f in mine if f.run not in running]
        life = self._life(contexts, new)
        done_runs = [r for r in subject.runs if r.key not in running]
        trusted = [
            f
            for f, block in figures(subject)
            if (block is None or not block.problems()) and f.run not in running
        ]
        # A finding a look-ahead detector now makes about a recent run opens there, and
        # meets what this batch brings (what came between was offered before it existed).
        known = {finding_of(d).key for r in context_runs for d in self.row(f"run:{r.key}") or []}
        fresh = [f for f in revised if f.key not in known]
        revised = [f for f in revised if f.key in known]
        judged = follow_from(life, done_runs, trusted, [*fresh, *kept])
        rows: dict[str, list[Finding]] = {f"run:{run}": [] for run in new - running}
        for f in judged:
            rows.setdefault(_run_key(f), []).append(f)
        for f in life.done.values():
            rows.setdefault(_run_key(f), [])
        self._revise(revised, rows)
        for key, found in rows.items():
            self._save_run(key, found, life, anew=key[4:] in new)
            folded.judged[key] = found
        self._contexts(contexts, done_runs, trusted, life)
        still = sorted(running | (set(pending) - new))
        if still != pending:
            self.put("pending", still)
        self._settle()

    def _acks(self, records: list[Recorded]) -> None:
        acks = [
            r for r in records if isinstance(r.event, PitfallAcknowledged | PitfallUnacknowledged)
        ]
        if not acks:
            return
        book = dict(self.row("acks") or {})
        for rec in acks:
            if isinstance(rec.event, PitfallAcknowledged):
                book[rec.event.finding] = [rec.event.note, rec.event.author, rec.ts, rec.seq]
            else:
                book.pop(rec.event.finding, None)
        self.put("acks", book)

    def _context(
        self, contexts: dict[str, HostContext], judged: set[str]
    ) -> tuple[list[Run], list[Any]]:
        """The stored past of these hosts as runs to judge beside the new ones (a run judged
        again is left out: its new self is among those), and the figures before them."""
        runs: list[Run] = []
        carriers = []
        for host, context in contexts.items():
            keep = [r for r in context.runs if r["key"] not in judged]
            if context.probed and context.probed["key"] in judged:
                context.probed = None
            if context.probed and all(r["key"] != context.probed["key"] for r in keep):
                keep.insert(0, context.probed)
            mine = [run_of(r) for r in keep]
            first = min((r.event or 0 for r in mine), default=1)
            # A kept run's figures stay its own (as if recorded with it): read again from its
            # output they could carry other labels than those the series were kept under.
            kept = {r.key for r in mine}
            # Per series the figures of the newest run not judged again now (a run judged
            # again brings its own figures back with it): its repeated samples, or one figure.
            stored = [
                f
                for mine_ in (
                    [f for f in series if f.get("run") not in judged]
                    for series in context.figures.values()
                )
                if mine_
                for f in _last_run(mine_)
            ]
            carrier = _Carrier(host, first - 1, [f for f in stored if f.get("run") not in kept])
            carrier.figures_ += [_figure(f, f["run"]) for f in stored if f.get("run") in kept]
            if carrier.figures_:
                carriers.append(carrier)
            runs += mine
        runs.sort(key=lambda r: r.event or 0)
        return runs, carriers

    def _life(self, contexts: dict[str, HostContext], judged: set[str]) -> Lifecycle:
        """The lifecycle as stored for these hosts, its open findings loaded only for a
        pitfall that a new fact could resolve."""
        life = Lifecycle(stored=_OpenRows(self, contexts, {f"run:{run}" for run in judged}))
        for host, context in contexts.items():
            for id, key in context.resolved.items():
                life.resolved[(id, host)] = key
        return life

    def _revise(self, revised: list[Finding], rows: dict[str, list[Finding]]) -> None:
        """Findings about context runs that a detector looking ahead made or reworded."""
        for f in revised:
            key = _run_key(f)
            have = rows.get(key) or [finding_of(d) for d in self.row(key) or []]
            same = [g for g in have if g.key == f.key]
            if same:
                old = same[0]
                new = replace(
                    old, severity=f.severity, title=f.title, advice=f.advice, evidence=f.evidence
                )
                if new == old:
                    continue
                have = [new if g is old else g for g in have]
            else:
                have = [*have, f]
            rows[key] = have

    def _save_run(self, key: str, found: list[Finding], life: Lifecycle, anew: bool) -> None:
        """Store a run's findings: those judged now, over the stored ones (all of them
        replaced when the run itself was judged again)."""
        stored = {} if anew else {finding_of(d).key: d for d in self.row(key) or []}
        out = {f.key: finding_json(f) for f in found}
        for f in life.done.values():
            if _run_key(f) == key:
                out[f.key] = finding_json(f)
        merged = {**stored, **out}
        if not merged:
            self.put(key, None)  # no row for a run without findings
            return
        self.put(key, sorted(merged.values(), key=lambda d: _order(finding_of(d))))

    def _contexts(
        self,
        contexts: dict[str, HostContext],
        runs: list[Run],
        trusted: list[Figure],
        life: Lifecycle,
    ) -> None:
        for host, context in contexts.items():
            mine = [r for r in runs if r.host == host]
            if mine:
                again = {r.key for r in mine}
                earlier = [r for r in context.runs if r["key"] not in again]
                context.runs = [*earlier, *(run_json(r) for r in mine)][-CONTEXT_RUNS:]
                context.runs.sort(key=lambda r: r["event"] or 0)
                probed = [r for r in mine if "torch-env" in r.probes]
                if probed:
                    context.probed = run_json(replace(probed[-1], text=""))
            again = {r.key for r in runs}
            for series in context.figures.values():
                series[:] = [f for f in series if f.get("run") not in again]
            for f in trusted:
                if f.host == host:
                    series = context.figures.setdefault(json.dumps(plain(figure_key(f))), [])
                    stored = figure_json(f)
                    if any(_same(g, stored) for g in series):
                        continue  # one stored before, given back as context
                    series.append(stored)
                    _trim(series)
            for key in [k for k, series in context.figures.items() if not series]:
                del context.figures[key]
            ids = []
            for id in life.ids(host):
                new = life.open.get(host, {}).get(id, [])
                if (host, id) in life.loaded:
                    refs = [[_run_key(f), f.key] for f in new]
                    self.put(_open_key(host, id), refs or None)
                elif new:
                    refs = [
                        *(self.row(_open_key(host, id)) or []),
                        *([_run_key(f), f.key] for f in new),
                    ]
                    self.put(_open_key(host, id), refs)
                else:
                    refs = [None]  # stored, untouched
                if refs:
                    ids.append(id)
            context.open = ids
            for (id, where), key in life.resolved.items():
                if where == host:
                    context.resolved[id] = key
            self.put(_host_key(host), context.to_json())


class _OpenRows(Stored):
    """The open findings of earlier folds, as the ledger stores them."""

    def __init__(self, state: _State, contexts: dict[str, HostContext], again: set[str]) -> None:
        self.state, self.contexts, self.again = state, contexts, again

    def ids(self, host: str | None) -> list[str]:
        context = self.contexts.get(host) if host is not None else None
        return list(context.open) if context else []

    def load(self, host: str | None, id: str) -> list[Finding]:
        refs = [r for r in self.state.row(_open_key(host, id)) or [] if r[0] not in self.again]
        self.state.need(ref for ref, _ in refs)
        found = []
        for ref, key in refs:
            for d in self.state.row(ref) or []:
                one = finding_of(d)
                if one.key == key and one.resolved_by is None:
                    found.append(one)
        return found


def _last_run(series: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The figures of a series' newest run (one figure when it was recorded outside a run)."""
    last = series[-1].get("run")
    if last is None:
        return series[-1:]
    return [f for f in series if f.get("run") == last]


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two stored figures are one (a context figure carries another run key)."""
    return a["event"] is not None and all(a[k] == b[k] for k in ("event", "value", "evidence"))


def _trim(series: list[dict[str, Any]]) -> None:
    """Keep the figures of a series' newest FIGURES_KEPT runs, the last SAMPLES_KEPT of each
    (a figure recorded outside a run counts as a run of its own)."""
    count: dict[Any, int] = {}
    kept: list[dict[str, Any]] = []
    for index in range(len(series) - 1, -1, -1):
        run = series[index].get("run")
        run = ("no run", index) if run is None else run
        if run not in count:
            if len(count) == FIGURES_KEPT:
                break
            count[run] = 0
        if count[run] < SAMPLES_KEPT:
            count[run] += 1
            kept.append(series[index])
    series[:] = kept[::-1]


class _Carrier(Run):
    """A stand-in run holding a host's last figures, so detectors compare new ones with them."""

    def __init__(self, host: str, event: int, stored: list[dict[str, Any]]) -> None:
        super().__init__(key=f"context:{host}", step="(earlier figures)", host=host, command="")
        self.event = event
        self.status = "succeeded"
        self.figures_ = [_figure(d, self.key) for d in stored]


def _figure(d: dict[str, Any], run: str) -> Figure:
    seen = d.get("evidence")
    return Figure(
        d["name"],
        d["value"],
        d["unit"],
        dict(d["labels"]),
        run=run,
        event=d["event"],
        host=d["host"],
        evidence=Evidence(*seen) if seen else None,
    )


def _with_event(found: Finding, events: dict[str, int | None]) -> Finding:
    """The finding with its run's start event in its facts (the order findings are listed)."""
    if not found.run or found.run not in events:
        return found
    return replace(found, facts={**found.facts, "run_event": events[found.run]})


@functools.cache
def _looks_ahead() -> frozenset[str]:
    from journal.pitfalls import detectors

    return frozenset(m.ID for m in detectors() if getattr(m, "LOOKS_AHEAD", False))
