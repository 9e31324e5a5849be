"""The findings of a journal as a persisted projection: judged once, as the events come.

Judging a whole journal reads every event and every byte of output; a step that printed one
line should not pay for a year of history. The ledger keeps, in the projection tables (a
stored projection: :mod:`journal.projections.stored`), every finding with its lifecycle (a
row per step run) and, per host, what judging the next run there needs: the last few runs
(their output cut to its tail), the last run with a torch-env probe, the last trusted figure
of each series, the findings still open and the latest resolved one of each pitfall (the
rows: :mod:`journal.pitfalls.ledger_rows`). Bringing it up to date reads the events after its
head, judges the runs they touch with that context, offers them to the open findings of their
hosts (:mod:`journal.pitfalls.lifecycle`) and saves the rows it changed. A run still running
is judged on every read and saved once it ended; a run whose recorder died is judged as
interrupted. Detectors that look ahead (``LOOKS_AHEAD``) may add or reword a finding about a
recent run when a later one shows more.

The version of the state is a digest of the judging code: a better detector makes the next
read judge the whole journal again, once.
"""

from __future__ import annotations

import functools
import json
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from journal.columns import Texts
from journal.events import OutputChunk, StepStarted
from journal.mapper import Recorded
from journal.pitfalls import SEVERITIES, judge
from journal.pitfalls.acks import TYPES as ACK_TYPES
from journal.pitfalls.acks import book_json, book_of, fold_ack
from journal.pitfalls.base import Finding, Tally
from journal.pitfalls.ledger_rows import (
    TALLY,
    Carrier,
    HostContext,
    OpenRows,
    finding_json,
    finding_of,
    host_key,
    open_key,
    order,
    run_key,
    stored_order,
    tally_key,
)
from journal.pitfalls.lifecycle import AckBook, Lifecycle, follow_from, with_acks
from journal.pitfalls.subjects import from_journal
from journal.projections.stored import Moved, StoredProjection
from journal.reading.bench import Figure, figures
from journal.reading.subject import Run, Subject
from journal.reading.window import Skipped, Window
from journal.runs import CUT_OFF, RUNNING, UNFINISHED, Alive
from journal.store import EventStore
from journal.store.cache import Head, ProjectionCache

PROJECTION = "findings"
#: Events folded at a time when the whole journal is judged again.
BATCH = 5_000
#: The most output a batch holds before its chunks are dropped as read (kept as
#: :class:`_Held` marks) and its runs judged in groups of hosts, each group's output read
#: back from the store: a fleet step of 64 hosts printing 20,000 lines each is judged a few
#: hosts at a time, not holding every host's output (and its text, and its line index) at once.
GROUP_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class _Held:
    """An output chunk of a batch not held (the batch's output was over GROUP_BYTES): read
    back from the store when its run's group is judged."""

    run: str
    host_name: str | None
    size: int
    type = "Held"

    @property
    def run_id(self) -> str:
        return self.run

    @property
    def host(self) -> str | None:
        return self.host_name


class _Batch(Window):
    """A batch's records as :class:`Window` keeps them, its output chunks dropped for
    :class:`_Held` marks once it holds more than GROUP_BYTES of output."""

    def __init__(self) -> None:
        super().__init__()
        self.output = 0
        self.light = False

    def add(self, rec: Recorded) -> None:
        event = rec.event
        if not isinstance(event, OutputChunk):
            self.records.append(rec)
            return
        if not self.light:
            self.output += event.size
            if self.output <= GROUP_BYTES:
                super().add(rec)
                return
            self.light = True
            self.records = [_held(r) for r in self.records]
        self.records.append(_held(rec))


def _held(rec: Recorded) -> Recorded:
    event = rec.event
    if isinstance(event, OutputChunk):
        mark = _Held(event.run, event.host_name, event.size)
        return Recorded(rec.seq, rec.journal, rec.ts, mark, rec.hash)  # type: ignore[arg-type]
    if isinstance(event, Skipped):
        mark = _Held(event.run, None, 0)
        return Recorded(rec.seq, rec.journal, rec.ts, mark, rec.hash)  # type: ignore[arg-type]
    return rec


#: Findings read at a time when every one is listed in order (:class:`Listing`).
BATCH_FINDINGS = 200


def version() -> str:
    """A digest of the code that judges: the detectors, what they read, parsers."""
    return Ledger.version()


#: How many rows a fold holds before it saves what it folded so far (and lets them go): the
#: findings of the 1M-event bench journal folded anew peak at 124 MB at 20,000, 106 MB at
#: 8,000, in the same time.
SAVE_ROWS = 8_000


@dataclass
class Folded:
    """What one bringing-up-to-date of the ledger found: the findings of the runs still
    running (they are never saved), and the head it reached."""

    seq: int
    running: list[Finding] = field(default_factory=list)


class Ledger(StoredProjection):
    """The findings projection of one journal."""

    name = PROJECTION
    sources = (
        "pitfalls",
        "reading",
        "projections",
        "projections/drift",
        "benchmarks/parsers",
        "versions.py",
        "transcript.py",
        "output.py",
        "runs.py",
        "mapper.py",
    )

    def __init__(self, store: EventStore, journal: str, alive: Alive | None = None) -> None:
        super().__init__(ProjectionCache(store.engine), journal)
        self.store = store
        self.alive = alive or store.liveness()  # the recorders' heartbeats
        self._folded: Folded | None = None  # as last brought up to date

    # -- reading -------------------------------------------------------------------------------

    def findings(self) -> list[Finding]:
        """Every finding of the journal with its lifecycle and acknowledgements, in order."""
        folded = self.advance()
        rows = self.rows()
        found = [
            finding_of(d) for key, body in rows.items() if key.startswith("run:") for d in body
        ]
        found += folded.running
        found.sort(key=order)
        return with_acks(found, book_of(rows.get("acks")))

    def listing(self) -> Listing:
        """Every finding of the journal in order, as :meth:`findings` lists them, read from
        the rows a batch at a time (:class:`Listing`: none of them is held)."""
        return self._listed(lambda: self.keys("run:"), lambda f: True)

    def part_listing(self, runs: Iterable[str], first: int | None, last: int | None) -> Listing:
        """The findings about a part of the journal in order, as :meth:`listing` lists them
        (those of its runs, and those of no run held from an event ``first``..``last``: see
        :func:`journal.service.findings.findings_in`), reading only those rows."""
        runs = set(runs)

        def within(seq: Any) -> bool:
            return first is not None and seq is not None and first <= seq <= last  # type: ignore[operator]

        def keys() -> list[str]:
            mine = sorted(f"run:{run}" for run in runs)
            return mine + [k for k in self.keys("run:~") if k[5:].isdigit() and within(int(k[5:]))]

        return self._listed(keys, lambda f: f.run in runs if f.run is not None else within(f.seq))

    def _listed(
        self, rows_of: Callable[[], list[str]], running: Callable[[Finding], bool]
    ) -> Listing:
        """The findings of the rows ``rows_of`` names (once the ledger is up to date) and
        those of the runs still running that ``running`` keeps, in order, by where each lies."""
        folded = self.advance()
        acks = book_of(self.rows(["acks"]).get("acks"))
        keys = rows_of()
        places: list[tuple[Any, ...]] = []
        for start in range(0, len(keys), BATCH_FINDINGS):
            for row, body in self.rows(keys[start : start + BATCH_FINDINGS]).items():
                places += [(stored_order(d), 0, row, i) for i, d in enumerate(body)]
        still = with_acks(folded.running, acks)
        places += [(order(f), 1, "", i) for i, f in enumerate(still) if running(f)]
        places.sort()
        return Listing(self, acks, ((row, i) for *_, row, i in places), still)

    def findings_of(self, runs: Iterable[str], *, again: bool = True) -> list[Finding]:
        """The findings about these step runs, with their lifecycle and acknowledgements
        (``again`` false: as this ledger last brought them up to date, where it did: a
        reader looking up a page at a time of what it listed)."""
        folded = self._folded if not again and self._folded is not None else self.advance()
        keys = [f"run:{run}" for run in runs]
        rows = self.rows([*keys, "acks"])
        found = [finding_of(d) for key in keys for d in rows.get(key, [])]
        wanted = set(runs)
        found += [f for f in folded.running if f.run in wanted]
        found.sort(key=order)
        return with_acks(found, book_of(rows.get("acks")))

    def tally(self) -> Tally:
        """How many findings are open (by severity), acknowledged and resolved, from the
        tally row: what it reads follows the acknowledgements, not the journal's length."""
        folded = self.advance()
        rows = self.rows([TALLY, "acks"])
        acks = book_of(rows.get("acks"))
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

    def open_findings(self, severity: str | None = None) -> list[Finding]:
        """The open findings of one severity (None: of every one), in order: read from the
        rows of the pitfalls the tally shows open at that severity, not from every finding."""
        folded = self.advance()
        rows = self.rows([TALLY, "acks"])
        acks = book_of(rows.get("acks"))
        ids = {
            key.split("\t")[0]
            for key, n in (rows.get(TALLY) or {}).items()
            if n and key.endswith(f"\t{severity}\topen" if severity else "\topen")
        }

        def wanted(f: Finding) -> bool:
            return severity in (None, f.severity)

        found = self._unresolved(acks, lambda f: wanted(f) and acks.of(f) is None, ids=ids)
        found += [f for f in with_acks(folded.running, acks) if wanted(f) and f.is_open]
        found.sort(key=order)
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
            lists = self.rows(key for key in self.keys("open:") if key.rsplit(":", 1)[1] in wanted)
            for pairs in lists.values():
                for row, key in pairs:
                    refs.setdefault(row, set()).add(key)
        out: dict[str, Finding] = {}
        for row, body in self.rows(refs).items():
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
        return self.holds("run:", '"id":' + json.dumps(id))

    # -- folding -------------------------------------------------------------------------------

    def advance(self) -> Folded:
        """Bring the stored state up to the journal's newest event; what was judged."""
        folded = self.retried(self._fold)
        if folded is None:
            raise RuntimeError(f"the findings of {self.journal} kept changing while being folded")
        self._folded = folded
        return folded

    def _fold(self, head: Head | None) -> Folded:
        fresh = not self.usable(head)
        start = 0 if fresh or head is None else head.seq
        state = _State(self, fresh)
        folded = Folded(start)
        # each batch keeps the head and tail of a long output only (journal.reading.window)
        batch = _Batch()
        for rec in self.store.read(self.journal, after=start):
            batch.add(rec)
            if len(batch.records) >= BATCH:
                state.fold(batch.records, folded, final=False, light=batch.light)
                batch = _Batch()
                if len(state.rows) >= SAVE_ROWS:
                    # a long fold (a year's journal judged anew) saved as it goes, so that
                    # what it holds is a few batches' rows, not every finding
                    if not self.save(folded.seq, state.changed, since=head, anew=fresh):
                        raise Moved
                    head, fresh = self.head(), False
                    state = _State(self, fresh)
        state.fold(batch.records, folded, final=True, light=batch.light)
        if not state.changed and not fresh:
            return folded
        if not self.save(folded.seq, state.changed, since=head, anew=fresh):
            raise Moved
        return folded


class Listing:
    """Every finding of a journal in order (:meth:`Ledger.listing`): ``places`` says where
    each is (its run row and index there; a running one's index in ``running`` after an
    empty row), nothing more, held in columns, so that a year's findings cost a few bytes
    each; iterating reads them whole from the ledger's rows, :data:`BATCH_FINDINGS` at a
    time, with their acknowledgements (again on each iteration)."""

    def __init__(
        self,
        ledger: Ledger,
        acks: AckBook,
        places: Iterable[tuple[str, int]],
        running: list[Finding],
    ) -> None:
        self.ledger, self.acks, self.running = ledger, acks, running
        self._rows, self._at = Texts(), array("q")
        for row, i in places:
            self._rows.append(row)
            self._at.append(i)

    def _pages(self) -> Iterator[tuple[list[tuple[str, int]], dict[str, Any]]]:
        for start in range(0, len(self), BATCH_FINDINGS):
            ends = range(start, min(start + BATCH_FINDINGS, len(self)))
            part = [(self._rows[i], self._at[i]) for i in ends]
            yield part, self.ledger.rows({row for row, _ in part if row})

    def __len__(self) -> int:
        return len(self._at)

    def __iter__(self) -> Iterator[Finding]:
        for part, rows in self._pages():
            found = [finding_of(rows[row][i]) if row else None for row, i in part]
            stored = with_acks([f for f in found if f is not None], self.acks)
            told = iter(stored)
            for (_, i), f in zip(part, found, strict=True):
                yield next(told) if f is not None else self.running[i]


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
        self.rows.update(self.ledger.rows(wanted))

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
            key = tally_key(d["id"], d["severity"], d["resolved_by"] is not None)
            self.tally[key] = self.tally.get(key, 0) + sign

    def _settle(self) -> None:
        if self.tally is not None and self.tally != (self.rows.get(TALLY) or {}):
            self.put(TALLY, {k: n for k, n in sorted(self.tally.items()) if n} or None)

    # -- one batch ---------------------------------------------------------------------------

    def fold(self, batch: list[Recorded], folded: Folded, final: bool, light: bool = False) -> None:
        """Judge a batch of records: at once, or (``light``: its output was not held) in
        groups of hosts, each group's output read back from the store."""
        pending: list[str] = list(self.row("pending") or [])
        if batch:
            folded.seq = batch[-1].seq
        upto = folded.seq
        started = {r.event.run for r in batch if isinstance(r.event, StepStarted)}
        late = {r.event.run_id for r in batch if r.event.run_id} - started
        late |= set(pending) if final else set()
        new: set[str] = set()
        running: set[str] = set()
        groups = _groups(batch, late, self.ledger.store, self.ledger.journal) if light else None
        for records, group_late in groups or [(batch, late)]:
            if light:
                records = self._read_back(records, group_late, batch[0].seq if batch else 0, upto)
            judged, still = self._judge(records, group_late, folded, final, upto)
            new |= judged
            running |= still
        still_pending = sorted(running | (set(pending) - new))
        if still_pending != pending:
            self.put("pending", still_pending)
        self._settle()

    def _read_back(
        self, records: list[Recorded], late: set[str], first: int, upto: int
    ) -> list[Recorded]:
        """A group's records with its runs' output chunks in the batch read back (through a
        window) where they were held as marks (those of runs read whole later left out)."""
        marks: dict[str, dict[int, Recorded]] = {}
        out = []
        for rec in records:
            if not isinstance(rec.event, _Held):
                out.append(rec)
            elif rec.event.run not in late:
                marks.setdefault(rec.event.run, {})[rec.seq] = rec
        for run, held in marks.items():
            window = Window()
            for seq, chunk in self.ledger.store.output_chunks(run, after=first - 1, upto=upto):
                mark = held.get(seq)
                if mark is not None:
                    window.add(Recorded(seq, mark.journal, mark.ts, chunk, mark.hash))
            out += window.records
        out.sort(key=lambda r: r.seq)
        return out

    def _judge(
        self, batch: list[Recorded], late: set[str], folded: Folded, final: bool, upto: int
    ) -> tuple[set[str], set[str]]:
        """Judge these records (the runs in ``late`` read whole from the store); the runs
        judged, and those of them still running."""
        ledger = self.ledger
        records = [r for r in batch if r.event.run_id not in late]
        for run in sorted(late):
            window = Window().extend(
                r for r in ledger.store.read(ledger.journal, run_id=run) if r.seq <= upto
            )
            records += window.records
        records.sort(key=lambda r: r.seq)
        self._acks(records)
        if not records:
            return set(), set()
        subject, _ = from_journal(ledger.journal, records, ledger.alive)
        running = {run.key for run in subject.runs if run.status in (RUNNING, UNFINISHED)}
        if not final:
            running |= {run.key for run in subject.runs if run.status in CUT_OFF}
        new = {run.key for run in subject.runs}
        hosts = {run.host for run in subject.runs} | {
            f.host for f in subject.metrics if isinstance(f, Figure) and f.host
        }
        self.need(host_key(h) for h in hosts)
        contexts = {h: HostContext.of(self.row(host_key(h))) for h in hosts}
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
            rows.setdefault(run_key(f), []).append(f)
        for f in life.done.values():
            rows.setdefault(run_key(f), [])
        self._revise(revised, rows)
        for key, found in rows.items():
            self._save_run(key, found, life, anew=key[4:] in new)
        self._contexts(contexts, done_runs, trusted, life)
        return new, running

    def _acks(self, records: list[Recorded]) -> None:
        """Fold the acknowledgements among ``records`` into the stored book."""
        acks = [rec for rec in records if rec.event.type in ACK_TYPES]
        if not acks:
            return
        book = book_of(self.row("acks"))
        for rec in acks:
            fold_ack(book, rec)
        self.put("acks", book_json(book))

    def _context(
        self, contexts: dict[str, HostContext], judged: set[str]
    ) -> tuple[list[Run], list[Carrier]]:
        """The stored past of these hosts as runs to judge beside the new ones (a run judged
        again is left out: its new self is among those), and the figures before them."""
        runs: list[Run] = []
        carriers = []
        for host, context in contexts.items():
            mine, carrier = context.past(host, judged)
            if carrier is not None:
                carriers.append(carrier)
            runs += mine
        runs.sort(key=lambda r: r.event or 0)
        return runs, carriers

    def _life(self, contexts: dict[str, HostContext], judged: set[str]) -> Lifecycle:
        """The lifecycle as stored for these hosts, its open findings loaded only for a
        pitfall that a new fact could resolve."""
        life = Lifecycle(stored=OpenRows(self, contexts, {f"run:{run}" for run in judged}))
        for host, context in contexts.items():
            for id, key in context.resolved.items():
                life.resolved[(id, host)] = key
        return life

    def _revise(self, revised: list[Finding], rows: dict[str, list[Finding]]) -> None:
        """Findings about context runs that a detector looking ahead made or reworded."""
        for f in revised:
            key = run_key(f)
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
            if run_key(f) == key:
                out[f.key] = finding_json(f)
        merged = {**stored, **out}
        if not merged:
            self.put(key, None)  # no row for a run without findings
            return
        self.put(key, sorted(merged.values(), key=lambda d: order(finding_of(d))))

    def _contexts(
        self,
        contexts: dict[str, HostContext],
        runs: list[Run],
        trusted: list[Figure],
        life: Lifecycle,
    ) -> None:
        again = {r.key for r in runs}
        for host, context in contexts.items():
            context.remember([r for r in runs if r.host == host])
            context.keep_figures(again, [f for f in trusted if f.host == host])
            ids = []
            for id in life.ids(host):
                new = life.open.get(host, {}).get(id, [])
                if (host, id) in life.loaded:
                    refs = [[run_key(f), f.key] for f in new]
                    self.put(open_key(host, id), refs or None)
                elif new:
                    refs = [
                        *(self.row(open_key(host, id)) or []),
                        *([run_key(f), f.key] for f in new),
                    ]
                    self.put(open_key(host, id), refs)
                else:
                    refs = [None]  # stored, untouched
                if refs:
                    ids.append(id)
            context.open = ids
            for (id, where), key in life.resolved.items():
                if where == host:
                    context.resolved[id] = key
            self.put(host_key(host), context.to_json())


def _groups(
    batch: list[Recorded], late: set[str], store: EventStore, journal: str
) -> list[tuple[list[Recorded], set[str]]]:
    """A batch's records (and its runs to read whole) in groups of hosts, in the order the
    hosts first come, each group of at most GROUP_BYTES of output (a host over it alone):
    detectors judge a host's runs with its own past only (its context row), so the groups
    are judged one after the other as the batch would be at once."""
    hosts: dict[str, str | None] = {}
    for rec in batch:
        run, host = rec.event.run_id, rec.event.host
        if run and host is not None:
            hosts.setdefault(run, host)
    for run in sorted(late - hosts.keys()):  # a run still running, none of it in the batch
        for rec in store.read(journal, run_id=run, types=[StepStarted.type]):
            hosts[run] = rec.event.host
    by_host: dict[str | None, list[Recorded]] = {}
    size: dict[str | None, int] = {}
    runs_of: dict[str | None, set[str]] = {}
    for run in late:
        by_host.setdefault(hosts.get(run), [])
        runs_of.setdefault(hosts.get(run), set()).add(run)
    for rec in batch:
        event = rec.event
        run = event.run_id
        host = hosts.get(run, event.host) if run else event.host
        by_host.setdefault(host, []).append(rec)
        if isinstance(event, _Held):
            size[host] = size.get(host, 0) + event.size
    groups: list[tuple[list[Recorded], set[str]]] = []
    held = GROUP_BYTES + 1
    for host, records in by_host.items():
        if held + size.get(host, 0) > GROUP_BYTES:
            groups.append(([], set()))
            held = 0
        held += size.get(host, 0)
        groups[-1][0].extend(records)
        groups[-1][1].update(runs_of.get(host, set()))
    for records, _ in groups:
        records.sort(key=lambda r: r.seq)
    return groups


def _with_event(found: Finding, events: dict[str, int | None]) -> Finding:
    """The finding with its run's start event in its facts (the order findings are listed)."""
    if not found.run or found.run not in events:
        return found
    return replace(found, facts={**found.facts, "run_event": events[found.run]})


@functools.cache
def _looks_ahead() -> frozenset[str]:
    from journal.pitfalls import detectors

    return frozenset(m.ID for m in detectors() if getattr(m, "LOOKS_AHEAD", False))
