"""How fast the event store appends, on SQLite and on PostgreSQL: one process batched and one
event at a time, then four and eight processes at once; each database verified after.

Target (../shared/DESIGN.md, "Targets"): 20,000 events/s or more from one process; four
concurrent writers lose nothing. PostgreSQL runs on a server of its own (Debian's, started as
the tests start it: tests/postgres.py) unless ``--pg URL`` names one (a database journal may
fill; each run adds its events). It is measured twice: as the server comes ("durable": each
commit waits for its WAL flush) and with ``synchronous_commit=off``, which is what SQLite in
WAL mode with ``synchronous=NORMAL`` does (a commit is not flushed; a crash of the machine may
lose the last ones, never corrupt). Run: ``.venv/bin/python bench/append.py`` (about 1-2 min).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from journal.events import NoteAdded, OutputChunk  # noqa: E402
from journal.store import EventStore  # noqa: E402

TARGET = 20_000
JOURNAL = "bench"
#: A line of a compile log, as the recorder would store a small chunk of it.
LINE = "[ 42%] Building CUDA object csrc/CMakeFiles/_C.dir/attention/flash_fwd.cu.o  padding\n"

BATCH = 100
BATCHED_EVENTS = 100_000
SINGLE_EVENTS = {"sqlite": 20_000, "postgresql": 5_000}
#: (writers, events each): four as the target says, eight as PostgreSQL is asked to carry.
CONCURRENT = ((4, 5_000), (8, 2_500))
NO_FLUSH = "options=-csynchronous_commit%3Doff"


def chunk(tag: str, i: int) -> OutputChunk:
    data = f"{tag} {i} {LINE}"
    return OutputChunk(
        run=f"run-{tag}",
        host_name="bench-host",
        stream="stdout",
        data=data,
        encoding="utf-8",
        size=len(data),
        t=i / 1000,
    )


def note(tag: str, i: int) -> NoteAdded:
    return NoteAdded(text=f"{tag} {i}", author="bench", tags=["bench"])


def batched(db: str, tag: str, total: int, batch: int) -> float:
    """Seconds to append ``total`` chunk events in appends of ``batch``."""
    store = EventStore(db)
    events = [chunk(tag, i) for i in range(total)]
    started = time.perf_counter()
    for i in range(0, total, batch):
        store.append(JOURNAL, events[i : i + batch])
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def singles(db: str, tag: str, total: int) -> float:
    """Seconds to append ``total`` events one per append (notes and chunks alternating)."""
    store = EventStore(db)
    events = [note(tag, i) if i % 2 else chunk(tag, i) for i in range(total)]
    started = time.perf_counter()
    for ev in events:
        store.append(JOURNAL, [ev])
    elapsed = time.perf_counter() - started
    store.close()
    return elapsed


def writer(db: str, tag: str, total: int, barrier) -> tuple[str, float, float]:  # type: ignore[no-untyped-def]
    """One of the concurrent writers: singles with a small batch every tenth append."""
    store = EventStore(db)
    events = [note(tag, i) if i % 2 else chunk(tag, i) for i in range(total)]
    barrier.wait()
    started = time.perf_counter()
    i = appends = 0
    while i < total:
        size = 5 if appends % 10 == 9 else 1
        store.append(JOURNAL, events[i : i + size])
        i += size
        appends += 1
    ended = time.perf_counter()
    store.close()
    return tag, started, ended


def concurrent(db: str, writers: int, each: int, prefix: str) -> float:
    """Events/s of ``writers`` processes appending ``each`` events at once (first start to
    last end)."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(writers) as pool:
        barrier = manager.Barrier(writers)
        jobs = [
            pool.apply_async(writer, (db, f"{prefix}{n}", each, barrier)) for n in range(writers)
        ]
        results = [job.get(timeout=900) for job in jobs]
    wall = max(r[2] for r in results) - min(r[1] for r in results)
    return writers * each / wall


def rate(events: int, seconds: float) -> str:
    per_s = events / seconds
    return (
        f"{per_s:>10,.0f} events/s  ({events:,} in {seconds:.2f} s; {per_s / TARGET:.2f}x target)"
    )


def measure(name: str, db: str) -> dict[str, float] | None:
    """Every figure for one database, printed as it comes; None when events went missing."""
    print(f"\n== {name}: {db}")
    store = EventStore(db)  # schema created once, outside the timings
    last = store.last()
    start = last.seq if last else 0  # a --pg database may hold events already
    store.close()
    kind = "postgresql" if db.startswith("postgresql") else "sqlite"
    figures: dict[str, float] = {}
    seconds = batched(db, "batched", BATCHED_EVENTS, BATCH)
    figures["batched"] = BATCHED_EVENTS / seconds
    print(f"one process, {BATCH} events per append:  {rate(BATCHED_EVENTS, seconds)}")
    single = SINGLE_EVENTS[kind]
    seconds = singles(db, "single", single)
    figures["single"] = single / seconds
    print(f"one process, 1 event per append:     {rate(single, seconds)}")
    expected = {"batched": BATCHED_EVENTS, "single": single}
    for writers, each in CONCURRENT:
        per_s = concurrent(db, writers, each, f"c{writers}w")
        figures[f"writers{writers}"] = per_s
        print(
            f"{writers} processes at once (1 event per append, every 10th 5): "
            f"{per_s:>10,.0f} events/s"
        )
        expected.update({f"c{writers}w{n}": each for n in range(writers)})

    store = EventStore(db)
    started = time.perf_counter()
    report = store.verify()
    took = time.perf_counter() - started
    seen: dict[str, int] = {}
    for rec in store.read(JOURNAL, after=start):
        ev = rec.event
        text = ev.data if isinstance(ev, OutputChunk) else ev.text  # type: ignore[attr-defined]
        seen[text.split(" ", 1)[0]] = seen.get(text.split(" ", 1)[0], 0) + 1
    store.close()
    state = "chain intact" if report.ok else "BROKEN: " + "; ".join(report.problems)
    print(f"verify: {report.checked:,} events checked in {took:.2f} s, {state}")
    lost = {tag: (seen.get(tag, 0), n) for tag, n in expected.items() if seen.get(tag, 0) != n}
    if lost or not report.ok:
        print(f"FAILED: events lost, duplicated or chain broken: {lost}")
        return None
    print(f"count: every writer's {sum(expected.values()):,} events there once")
    return figures


def table(results: dict[str, dict[str, float]]) -> None:
    """The figures side by side, with each PostgreSQL run's ratio to SQLite's."""
    names = list(results)
    rows = [("one writer, 1 event/append", "single"), ("one writer, 100 events/append", "batched")]
    rows += [(f"{n} writers at once", f"writers{n}") for n, _ in CONCURRENT]
    print("\n" + " " * 32 + "".join(f"{n:>22}" for n in names))
    base = results.get("SQLite")
    for label, key in rows:
        cells = []
        for name in names:
            per_s = results[name][key]
            ratio = f" ({per_s / base[key]:.2f}x)" if base and name != "SQLite" else ""
            cells.append(f"{per_s:,.0f}/s{ratio}".rjust(22))
        print(f"{label:<32}" + "".join(cells))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", metavar="URL", help="a PostgreSQL database to use (default: own)")
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    args = parser.parse_args()
    print(f"target: {TARGET:,} events/s from one process; 4 writers lose nothing")
    results: dict[str, dict[str, float]] = {}
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="journal-bench-"))
        found = measure("SQLite", str(Path(tmp) / "bench.db"))
        if found is None:
            return 1
        results["SQLite"] = found
        if not args.no_pg:
            urls = [args.pg] if args.pg else []
            if not urls:
                from tests.postgres import PostgresServer

                server = stack.enter_context(PostgresServer())
                urls = [server.create_database("bench"), server.create_database("bench")]
            sep = "&" if "?" in urls[-1] else "?"
            runs = {"PG durable": urls[0], "PG no flush": f"{urls[-1]}{sep}{NO_FLUSH}"}
            for name, url in runs.items():
                found = measure(name, url)
                if found is None:
                    return 1
                results[name] = found
    table(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
