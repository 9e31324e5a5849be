"""The stored timeline read through its index (:mod:`journal.projections.index`): what
`journal status`, the story and a page of `journal log` show, read from a few small rows
however long the journal is.

:func:`digest` brings the stored timeline up to date first, reading only the runs the new
events change (:func:`journal.projections.stored.brought_up`), then hands a :class:`Digest` to
the reader, again when another process saved in between.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from journal.mapper import of_plain, to_plain
from journal.projections.folder import Folder
from journal.projections.imported import ImportedHost, merged_readings
from journal.projections.index import SEP, pos
from journal.projections.progress import HostState, StepState
from journal.projections.stored import (
    TRIES,
    Moved,
    _Stored,
    brought_up,
    item_key,
    item_of,
    latest_probes,
)
from journal.projections.timeline import (
    MetricView,
    ProbeView,
    StepRunView,
    Timeline,
    TimelineItem,
    item_time,
)
from journal.runs import NOT_STARTED, TRIED_AGAIN, UNFINISHED, Alive
from journal.store.cache import ProjectionCache

_T = TypeVar("_T")

#: The story's headline as last worked out, and the figures it was worked out at.
HEADLINE = "h:headline"


class Digest:
    """The stored timeline of one journal at one head, asked by prefix."""

    def __init__(self, store: Any, journal: str, alive: Alive | None = None) -> None:
        self.journal = journal
        self.state = _Stored(ProjectionCache(store.engine), journal)
        self.head = self.state.head()
        self.top: dict[str, Any] = self.state.rows(["head"]).get("head") or {}
        self.alive = alive or store.liveness()
        self.plan: list[str] = list(self.top.get("plan", []))
        self.hosts: dict[str, str] = dict(self.top.get("hosts", {}))
        self.events: int = self.top.get("events", 0)
        self.last_ts: str | None = self.top.get("last_ts")
        self.item_count: int = self.top.get("items", 0)
        self.unfinished: set[str] = set(self.top.get("unfinished", []))
        self.latest_probes: dict[str, dict[str, ProbeView]] = latest_probes(self.top, {})
        self._packages: dict[str, dict[str, Any] | None] = {}
        self._items: dict[str, TimelineItem] = {}
        self._failed: dict[Any, int] = {}  # failed runs a filter kept, by the filter

    # -- the facts (journal.projections.index.Facts) --------------------------------------

    def story_hosts(self) -> list[str]:
        return list(dict.fromkeys([*self.hosts, *self.top.get("seen", [])]))

    def first(self, prefix: str) -> tuple[str, Any] | None:
        keys = self.state.first_keys(prefix, 1)
        return (keys[0], self.state.rows(keys)[keys[0]]) if keys else None

    def last(self, prefix: str) -> tuple[str, Any] | None:
        keys = self.state.last_keys(prefix, 1)
        return (keys[0], self.state.rows(keys)[keys[0]]) if keys else None

    def count(self, prefix: str, start: str = "") -> int:
        if prefix == "i:" and not start:  # every item: the head counts them
            return self.item_count
        return self.state.count(prefix, start)

    def all(self, prefix: str, start: str = "", end: str = "") -> list[tuple[str, Any]]:
        keys = self.state.keys(prefix, start=start, end=end)
        rows = self.state.rows(keys)
        return [(k, rows[k]) for k in keys if k in rows]

    def headline(self, make: Callable[[list[MetricView]], Any]) -> Any:
        """The story's headline, ``make`` of every figure: worked out once for the figures as
        they stand (kept beside the stored timeline until a save changes a figure), so that a
        reader of a long journal whose figures did not change reads none of them."""
        from journal.service.story import Headline

        at = self.top.get("figures_at", 0)
        kept = self.state.rows([HEADLINE]).get(HEADLINE)
        if kept is not None and kept.get("at") == at:
            found = kept.get("headline")
            return None if found is None else of_plain(Headline, found)
        made = make(self.metrics())
        plain = None if made is None else to_plain(made)
        if self.head is not None:  # for the next reader (one saved meanwhile keeps its own)
            self.state.save(self.head.seq, {HEADLINE: {"at": at, "headline": plain}}, self.head)
        return made

    def snapshot(self, key: str) -> dict[str, Any]:
        return self.state.rows([key]).get(key) or {}

    def latest_packages(self, host: str) -> dict[str, Any] | None:
        if host not in self._packages:
            key = self.top.get("latest_packages", {}).get(host)
            self._packages[host] = self.snapshot(key) if key else None
        return self._packages[host]

    def latest_packages_seq(self, host: str) -> int:
        return int(self.top.get("latest_packages_seq", {}).get(host, 0))

    def metrics(self) -> list[MetricView]:
        """Every figure, in the order recorded: read a page at a time, the words they repeat
        (names, units, hosts, labels) held once."""
        keys = self.state.keys("M:")
        found = []
        for start in range(0, len(keys), METRICS_PAGE):
            rows = self.state.rows(keys[start : start + METRICS_PAGE])
            found += [_figure(rows[k]) for k in keys[start : start + METRICS_PAGE] if k in rows]
        return sorted(found, key=lambda m: m.seq)

    def figures(self) -> Timeline:
        """A timeline of the journal's figures alone: every figure, and every step run in brief
        (its id, step, host, seq, start, benchmark and figures; nothing it printed, probed or
        snapshotted), what the throughput page charts and compares."""
        metrics = self.metrics()
        of_run: dict[str, list[MetricView]] = {}
        for metric in metrics:
            if metric.run:
                of_run.setdefault(metric.run, []).append(metric)
        runs = [_brief(row, of_run.get(row["r"], [])) for _, row in self.all("c:")]
        timeline = Timeline(self.journal, plan=self.plan, hosts=self.hosts, items=list(runs))
        timeline.runs = {run.run_id: run for run in runs}
        timeline.metrics = metrics
        timeline.events, timeline.last_ts = self.events, self.last_ts
        return timeline

    # -- runs --------------------------------------------------------------------------------

    def items(self, keys: Iterable[str]) -> list[TimelineItem]:
        """The items stored under ``keys`` (item keys), runs settled as every reader settles
        them (a run not ended: running, not started or lost)."""
        keys = list(dict.fromkeys(keys))
        self._items.update(self._load([k for k in keys if k not in self._items]))
        return [self._items[k] for k in keys if k in self._items]

    def batches(self, size: int) -> Iterator[list[TimelineItem]]:
        """Every item in timeline order, ``size`` at a time, settled as :meth:`items` settles
        them (none is kept here: a reader of the whole timeline holds one batch)."""
        keys = self.state.keys("i:")
        for start in range(0, len(keys), size):
            part = keys[start : start + size]
            loaded = self._load(part)
            yield [loaded[k] for k in part if k in loaded]

    def _load(self, keys: list[str]) -> dict[str, TimelineItem]:
        """The items stored under ``keys``, runs not ended settled."""
        rows = self.state.rows(keys)
        refs = {r for d in rows.values() if d.get("kind") == "run" for r in d["snapshots"].values()}
        snapshots = self.state.rows(refs)
        out: dict[str, TimelineItem] = {}
        runs: dict[str, StepRunView] = {}
        for key, row in rows.items():
            item = out[key] = item_of(row, snapshots)
            if isinstance(item, StepRunView):
                runs[item.run_id] = item
        unfinished = {r for r, v in runs.items() if v.status == UNFINISHED}
        if unfinished:
            timeline = Timeline(self.journal, items=list(runs.values()), runs=runs)
            Folder(timeline, unfinished=unfinished).fold((), self.alive)
        return out

    def runs(self, keys: Iterable[str]) -> list[StepRunView]:
        """The step runs stored under ``keys`` (item keys), settled."""
        return [v for v in self.items(keys) if isinstance(v, StepRunView)]

    def page(self, keep: Any, limit: int, since: int = 0) -> tuple[list[TimelineItem], int]:
        """The newest ``limit`` items (0: all) that ``keep`` (a
        :class:`journal.cli.render.Filter`) keeps, recorded from the event ``since`` on, in
        timeline order; and how many it keeps in all."""
        start = f"{since:012d}" if since else ""
        if keep.failed:
            # the runs not ended are few: each settled, and kept where it failed (lost)
            ended = self.state.rows(f"r:{r}" for r in self.unfinished)
            keys = [k for k in ended.values() if pos(k) >= start]
            unended = [(pos(k), k) for k in keys if any(map(keep.item, self.items([k])))]
            if keep.host is None and keep.step is None:  # every run in f: is kept: paged
                refs = sorted(self._refs("f:", limit, start) + unended)
                found = self.items(k for _, k in (refs[-limit:] if limit else refs))
                total = self.count("f:", start) + len(unended)
            else:  # a host's or a step's failed runs: every failed run read, those kept
                refs = sorted(self._refs("f:", 0, start) + unended)
                found = [i for i in self.items(k for _, k in refs) if keep.item(i)]
                total = len(found)
                found = found[-limit:] if limit else found
            self._failed[keep] = total
            return found, total
        if keep.step:
            lists = [f"p:{keep.host}{SEP}{keep.step}{SEP}" if keep.host else f"t:{keep.step}{SEP}"]
        elif keep.host:
            lists = [f"o:{keep.host}{SEP}", "N:"]  # and the notes of no host
        else:
            lists = ["i:"]
        refs = sorted(ref for prefix in lists for ref in self._refs(prefix, limit, start))
        total = sum(self.count(prefix, start) for prefix in lists)
        found = self.items(k for _, k in (refs[-limit:] if limit else refs))
        return found, total

    def _refs(self, prefix: str, limit: int, start: str) -> list[tuple[str, str]]:
        """The newest ``limit`` (0: all) entries of an index list from ``start`` on: each
        item's place and key."""
        if limit:
            keys = self.state.last_keys(prefix, limit, start)
        else:
            keys = self.state.keys(prefix, start=start)
        if prefix == "i:":
            return [(pos(k), k) for k in keys]
        rows = self.state.rows(keys)
        out = []
        for key in keys:
            ref = rows.get(key)
            out.append((key[len(prefix) :], ref["k"] if isinstance(ref, dict) else ref))
        return out

    def run_count(self, keep: Any) -> int:
        """How many step runs ``keep`` keeps (those of a host, of a step, the failed ones)."""
        if keep.failed:  # counted by the page that read them all, where one did
            return self._failed[keep] if keep in self._failed else self.page(keep, 0)[1]
        if keep.step:
            prefix = f"p:{keep.host}{SEP}{keep.step}{SEP}" if keep.host else f"t:{keep.step}{SEP}"
            return self.count(prefix)
        if keep.host:
            return sum(self.count(f"{kind}:{keep.host}{SEP}") for kind in "HI")
        return self.count("r:")

    def status_counts(self) -> dict[str, int]:
        """How many step runs of the journal stand in each state (those not ended settled)."""
        counts: dict[str, int] = {}
        keys = self.state.keys("p:")
        for start in range(0, len(keys), 1000):
            for row in self.state.rows(keys[start : start + 1000]).values():
                status = row["s"]
                if status == UNFINISHED:
                    view = self.run(row["k"])
                    status = view.status if view is not None else UNFINISHED
                counts[status] = counts.get(status, 0) + 1
        return counts

    def hosts_timeline(self, hosts: Iterable[str]) -> Timeline:
        """A timeline holding only the step runs of ``hosts``, in timeline order
        (:meth:`timeline_of`)."""
        refs = [
            ref
            for host in hosts
            for kind in "HI"
            for ref in self._refs(f"{kind}:{host}{SEP}", 0, "")
        ]
        return self.timeline_of(self.runs(key for _, key in sorted(set(refs))))

    def timeline_of(self, runs: list[StepRunView]) -> Timeline:
        """A timeline holding only ``runs`` (in timeline order), with the head's plan, hosts,
        counts and latest probes and package sets: what planning on some hosts (a rollback)
        reads."""
        timeline = Timeline(self.journal, plan=self.plan, hosts=self.hosts, items=list(runs))
        timeline.runs = {run.run_id: run for run in runs}
        timeline.latest_probes = self.latest_probes
        for host in self.top.get("latest_packages", {}):
            packages = self.latest_packages(host)
            if packages is not None:
                timeline.latest_packages[host] = packages
        timeline.latest_packages_seq = dict(self.top.get("latest_packages_seq", {}))
        timeline.events, timeline.last_ts = self.events, self.last_ts
        return timeline

    def host_runs_in_brief(self, hosts: Iterable[str]) -> Iterator[tuple[StepRunView, str]]:
        """The step runs of ``hosts`` in timeline order, each in brief (its ``c:`` row: step,
        host, command, status, imported; no snapshot, probe or output) with its item key,
        read a page at a time; a run not ended read whole and settled: what rollback
        planning looks through before it reads the few runs it needs whole."""
        places = sorted(
            {
                key[len(prefix) :]
                for host in hosts
                for kind in "HI"
                for prefix in [f"{kind}:{host}{SEP}"]
                for key in self.state.keys(prefix)
            }
        )
        for start in range(0, len(places), BRIEF_PAGE):
            page = places[start : start + BRIEF_PAGE]
            rows = self.state.rows(f"c:{at}" for at in page)
            for at in page:
                row = rows.get(f"c:{at}")
                if row is None:
                    continue
                key = row["k"]
                if row["r"] in self.unfinished:
                    view = self.run(key)
                    if view is not None:
                        yield view, key
                    continue
                view = _brief(row, [])
                view.command, view.status, view.imported = row["x"], row["st"], row["i"]
                yield view, key

    def planning_runs(self, keys: list[str]) -> dict[str, StepRunView]:
        """The step runs stored under ``keys`` by id, read a page at a time and each kept
        with only what rollback planning reads (its command, status, package sets and the
        package snapshots that failed; not its other probes, figures, expectations,
        environment or redactions): a fleet's installs of a year cost their package sets."""
        out: dict[str, StepRunView] = {}
        for start in range(0, len(keys), BRIEF_PAGE):
            for view in self._load(keys[start : start + BRIEF_PAGE]).values():
                if isinstance(view, StepRunView):
                    failed = [p for p in view.probes if p.probe == "packages" and p.result is None]
                    view.probes = failed
                    view.metrics, view.expectations, view.env, view.redactions = [], [], {}, []
                    out[view.run_id] = view
        return out

    def holds_host(self, host: str) -> bool:
        """Whether any item names ``host`` (a note about it, a figure)."""
        return bool(self.state.last_keys(f"o:{host}{SEP}", 1))

    def step_and_host(self, run: str) -> tuple[str, str] | None:
        """The step and host of the run ``run``, where it is stored."""
        key = self.state.rows([f"r:{run}"]).get(f"r:{run}")
        row = self.state.rows([key]).get(key) if key else None
        return (row["step"], row["host"]) if row else None

    def started_of(self, runs: Iterable[str]) -> dict[str, str]:
        """When each of the step runs ``runs`` (ids) started, where the journal holds it."""
        keys = self.state.rows(f"r:{run}" for run in runs)
        rows = self.state.rows(f"c:{pos(key)}" for key in keys.values())
        return {row["r"]: row["t"] for row in rows.values()}

    def run(self, key: str | None) -> StepRunView | None:
        found = self.runs([key]) if key else []
        return found[0] if found else None

    def run_of(self, run_id: str) -> StepRunView | None:
        """The step run ``run_id`` (None when the journal has none such)."""
        return self.run(self.state.rows([f"r:{run_id}"]).get(f"r:{run_id}"))

    def _beside(self, prefixes: Iterable[str], at: str) -> tuple[str | None, str | None]:
        """The item keys of the entries of the index lists ``prefixes`` right before and
        right after the place ``at`` (merged in timeline order)."""
        before: list[tuple[str, str]] = []
        after: list[tuple[str, str]] = []
        for prefix in prefixes:
            for key in self.state.last_keys(prefix, 1, end=at):
                before.append((key[len(prefix) :], key))
            for key in self.state.first_keys(prefix, 2, start=at):
                if key[len(prefix) :] != at:
                    after.append((key[len(prefix) :], key))
        rows = self.state.rows(k for _, k in [*before, *after])

        def ref(found: list[tuple[str, str]], pick: Callable[..., Any]) -> str | None:
            if not found:
                return None
            row = rows.get(pick(found)[1])
            return row["k"] if isinstance(row, dict) else row

        return ref(before, max), ref(after, min)

    def neighbours(self, run: StepRunView) -> tuple[StepRunView | None, ...]:
        """The step runs of ``run``'s host right before and after it, then the runs of its
        step on its host right before and after it (what its page links to)."""
        at = pos(item_key(run))
        host = run.host
        lists = [f"{kind}:{host}{SEP}" for kind in "HI"]
        before, after = self._beside(lists, at)
        earlier, later = self._beside([f"p:{host}{SEP}{run.step}{SEP}"], at)
        return self.run(before), self.run(after), self.run(earlier), self.run(later)

    def rollback_first_try(self, run: StepRunView) -> bool:
        """Whether ``run`` is the first try of its step's latest attempt among its host's
        runs that a rollback can name (:func:`journal.service.runs.latest_attempt`): what
        `rollback --to before:STEP` on its host names."""
        host, step = run.host, run.step
        recorded = f"H:{host}{SEP}"
        latest = None
        for key in reversed(self.state.keys(f"p:{host}{SEP}{step}{SEP}")):  # newest first
            at = key.rsplit(SEP, 1)[1]
            if not self.state.rows([recorded + at]):
                continue  # imported
            view = self.run(self.state.rows([key])[key]["k"])
            if view is not None and view.benchmark is None:
                latest = view
                break
        if latest is None:
            return False
        while True:
            at = pos(item_key(latest))
            keys = self.state.last_keys(recorded, 1, end=at)
            while keys:
                earlier = self.run(self.state.rows(keys)[keys[0]])
                if earlier is None or earlier.benchmark is None:
                    break
                keys = self.state.last_keys(recorded, 1, end=keys[0][len(recorded) :])
            else:
                earlier = None
            if earlier is None or earlier.step != step or earlier.status not in TRIED_AGAIN:
                return latest.run_id == run.run_id
            latest = earlier

    def latest_of_step(self, step: str) -> tuple[str, int] | None:
        """The id and start seq of ``step``'s latest run on any host (None: it never ran)."""
        keys = self.state.last_keys(f"t:{step}{SEP}", 1)
        rows = self.state.rows(self.state.rows(keys).values()) if keys else {}
        for row in rows.values():
            return row["run_id"], row["seq"]
        return None

    def latest(self, host: str, step: str) -> StepRunView | None:
        """Where ``step`` stands on ``host``: its latest run but one not started (that changed
        nothing), or its first run when every one is such (:func:`progress.stands`)."""
        prefix = f"p:{host}{SEP}{step}{SEP}"
        count, checked = 4, 0
        while True:
            keys = self.state.last_keys(prefix, count)[::-1]  # the newest first
            complete = len(keys) < count
            rows = self.state.rows(keys[checked:])
            for i in range(checked, len(keys)):
                row = rows[keys[i]]
                if complete and i == len(keys) - 1:  # the first run stands whatever it is
                    return self.run(row["k"])
                status = row["s"]
                if status == UNFINISHED:
                    view = self.run(row["k"])
                    status = view.status if view is not None else NOT_STARTED
                if status != NOT_STARTED:
                    return self.run(row["k"])
            if complete:
                return None
            checked, count = len(keys), count * 4

    def last_run(self, host: str) -> StepRunView | None:
        """The host's last step run on the timeline."""
        found = [self.state.last_keys(f"{kind}:{host}{SEP}", 1) for kind in "HI"]
        keys = sorted((k[0] for k in found if k), key=lambda k: k.split(SEP, 1)[1])
        return self.run(self.state.rows(keys[-1:]).get(keys[-1])) if keys else None

    def progress(self) -> list[HostState]:
        """Each host's state against the latest plan (:func:`progress.progress`'s)."""
        names = list(dict.fromkeys([*self.hosts, *self.top.get("run_hosts", [])]))
        states = []
        for host in names:
            last = self.last_run(host)
            steps = [StepState(step, host, self.latest(host, step)) for step in self.plan]
            if host not in self.hosts and not any(s.last for s in steps):
                continue  # not a host of the plan, and no step of it ran there (a rollout's hooks)
            target = self.hosts.get(host) or (last.target if last else "")
            states.append(HostState(host, target, steps, last))
        return states

    def imported_hosts(self, known: list[str] | None = None) -> dict[str, ImportedHost]:
        """The hosts every step run of which was imported and that neither the journal's hosts
        nor ``known`` name (:func:`journal.projections.imported.imported_hosts`'s)."""
        named = set(self.hosts) | set(known or ())
        out = {}
        for host in self.top.get("run_hosts", []):
            if host in named or self.state.last_keys(f"H:{host}{SEP}", 1):
                continue
            last = self.last_run(host)
            if last is None:
                continue
            out[host] = ImportedHost(host, self.count(f"I:{host}{SEP}"), last, self._printed(host))
        return out

    def _printed(self, host: str) -> dict[str, Any] | None:
        """What the host's transcripts printed of the stack, each key's latest
        (:func:`merged_readings`): read newest first until every key they ever printed is
        found, not every reading of a year."""
        wanted = set(self.top.get("printed", {}).get(host, ()))
        prefix, end, page = f"x:{host}{SEP}", "", 16
        found: list[Any] = []
        while True:
            keys = self.state.last_keys(prefix, page, end=end)
            rows = self.state.rows(keys)
            newest_first = [rows[k] for k in reversed(keys) if k in rows]
            found += newest_first
            for reading in newest_first:
                wanted -= set((reading or {}).get("evidence") or {})
            if not wanted or len(keys) < page:
                return merged_readings(reversed(found))
            end, page = keys[0][len(prefix) :], page * 4

    def lost(self) -> list[StepRunView]:
        """The recorded runs whose recorder is gone before they ended."""
        keys = [k for k in self.state.rows([f"r:{r}" for r in self.unfinished]).values()]
        found = [v for v in self.runs(keys) if v.status == "lost" and not v.imported]
        return sorted(found, key=lambda v: v.seq)

    # -- plan runs and parts (the postmortem's --plan-run and --since) ---------------------

    def plan_runs_near(self, wanted: str | None) -> list[str]:
        """The plan runs ``wanted`` may name, oldest first: those whose id starts with it and
        the newest five (what :func:`journal.projections.period.find_plan_run` picks from and
        names), not every plan run of the journal."""
        newest: list[str] = []
        end, page = "", 64
        while len(newest) < 5:
            keys = self.state.last_keys("L:", page, end=end)
            rows = self.state.rows(keys)
            for key in reversed(keys):
                if rows.get(key) not in newest:
                    newest.append(rows[key])
            if len(keys) < page:
                break
            end, page = keys[0][2:], page * 4
        plans = set(newest[:5])
        if wanted and wanted != "latest":
            plans |= {key[2:].split(SEP, 1)[0] for key in self.state.keys(f"P:{wanted}")}
        first = {plan: self.state.first_keys(f"P:{plan}{SEP}", 1) for plan in plans}
        return sorted((p for p in plans if first[p]), key=lambda p: first[p][0].rsplit(SEP, 1)[1])

    def plan_runs_of(self, plan: str) -> list[StepRunView]:
        """The step runs of one plan run, in timeline order."""
        keys = self.state.keys(f"P:{plan}{SEP}")
        rows = self.state.rows(keys)
        return self.runs(rows[k] for k in keys if k in rows)

    def part_batches(
        self, start: str, until: str | None, size: int
    ) -> Iterator[list[TimelineItem]]:
        """The items from the item key ``start`` on (``i:`` and its digits), ``size`` at a time,
        up to the first item recorded in place after the time ``until`` (None: to the end):
        what a part of the journal can hold (events are stored in the order of their times)."""
        at, again = start[2:], False
        while True:
            # from the last key of the page before (given again, left out): keys of digits
            keys = self.state.first_keys("i:", size + again, start=at)[again:]
            if not keys:
                return
            loaded = self._load(keys)
            batch = []
            for key in keys:
                item = loaded.get(key)
                if item is None:
                    continue
                placed = getattr(item, "place", None) is not None
                when = item_time(item)
                if until is not None and not placed and when > until:
                    if batch:
                        yield batch
                    return
                batch.append(item)
            if batch:
                yield batch
            if len(keys) < size:
                return
            at, again = keys[-1][2:], True

    def item_before(self, seq: int) -> str:
        """The key of the last item recorded in place before the event ``seq`` (the runs
        placed by their own time after it may be of a part from ``seq`` on); ``i:`` when
        none."""
        end = f"{seq:012d}"
        while True:
            found = self.state.last_keys("i:", 16, end=end)
            in_place = [key for key in found if len(key) == 14]  # i: and a seq alone
            if in_place:
                return in_place[-1]
            if len(found) < 16:
                return "i:"
            end = found[0][2:]

    def steps_known(self) -> list[str]:
        return list(dict.fromkeys([*self.plan, *self.top.get("steps", [])]))

    def unmoved(self) -> None:
        self.state.unmoved(self.head)


#: How many figures are read at a time.
METRICS_PAGE = 2000


def _figure(d: dict[str, Any]) -> MetricView:
    """A stored figure, its repeated words interned (a year's figures share a few dozen)."""
    for field in ("name", "unit", "source", "host", "benchmark", "author"):
        if isinstance(d.get(field), str):
            d[field] = sys.intern(d[field])
    labels = (d.get("labels") or {}).items()
    d["labels"] = {sys.intern(k): sys.intern(v) if isinstance(v, str) else v for k, v in labels}
    return of_plain(MetricView, d)


#: How many runs in brief are read at a time.
BRIEF_PAGE = 1000


def _brief(row: dict[str, Any], metrics: list[MetricView]) -> StepRunView:
    """A step run in brief, as its ``c:`` index row holds it (:meth:`Digest.figures`)."""
    return StepRunView(
        row["r"], row["s"], row["h"], "", "", {}, None, row["q"], row["t"], 0, "", None,
        False, [], benchmark=row["b"], metrics=metrics,
    )  # fmt: skip


def digest(store: Any, journal: str, reader: Callable[[Digest], _T]) -> _T:
    """What ``reader`` reads of the journal's stored timeline brought up to date, read again
    when another process saved it in between."""
    for _ in range(TRIES):
        brought_up(store, journal)
        found = Digest(store, journal)
        try:
            value = reader(found)
            found.unmoved()
            return value
        except Moved:
            continue
    return reader(Digest(store, journal))
