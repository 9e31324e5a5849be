"""How fast the event store appends: one process batched and one event at a time, then four.

Target (../shared/DESIGN.md, "Targets"): 20,000 events/s or more from one process; four
concurrent writers lose nothing. Run: ``.venv/bin/python bench/append.py`` (about 20-40 s).
"""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
import time
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
SINGLE_EVENTS = 20_000
WRITERS = 4
PER_WRITER = 5_000


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


def writer(db: str, tag: str, total: int, barrier) -> tuple[str, float, float, float]:  # type: ignore[no-untyped-def]
    """One of the concurrent writers: singles with a small batch every tenth append."""
    store = EventStore(db)
    events = [note(tag, i) if i % 2 else chunk(tag, i) for i in range(total)]
    barrier.wait()
    started = time.perf_counter()
    i = 0
    appends = 0
    while i < total:
        size = 5 if appends % 10 == 9 else 1
        store.append(JOURNAL, events[i : i + size])
        i += size
        appends += 1
    ended = time.perf_counter()
    store.close()
    return tag, started, ended, ended - started


def rate(events: int, seconds: float) -> str:
    per_s = events / seconds
    ratio = per_s / TARGET
    return f"{per_s:>10,.0f} events/s  ({events:,} in {seconds:.2f} s; {ratio:.2f}x target)"


def main() -> int:
    print(f"target: {TARGET:,} events/s from one process; {WRITERS} writers lose nothing")
    with tempfile.TemporaryDirectory(prefix="journal-bench-") as tmp:
        db = str(Path(tmp) / "bench.db")
        EventStore(db).close()  # schema created once, outside the timings

        seconds = batched(db, "batched", BATCHED_EVENTS, BATCH)
        print(f"one process, {BATCH} events per append:  {rate(BATCHED_EVENTS, seconds)}")
        seconds = singles(db, "single", SINGLE_EVENTS)
        print(f"one process, 1 event per append:     {rate(SINGLE_EVENTS, seconds)}")
        baseline = BATCHED_EVENTS + SINGLE_EVENTS

        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Manager().Barrier(WRITERS)
        with ctx.Pool(WRITERS) as pool:
            jobs = [
                pool.apply_async(writer, (db, f"w{n}", PER_WRITER, barrier)) for n in range(WRITERS)
            ]
            results = [job.get(timeout=600) for job in jobs]
        wall = max(r[2] for r in results) - min(r[1] for r in results)
        total = WRITERS * PER_WRITER
        print(f"{WRITERS} processes at once (mostly 1 per append, every 10th append 5):")
        print(f"  total                              {rate(total, wall)}")
        for tag, _start, _end, took in results:
            print(f"  {tag}                                 {rate(PER_WRITER, took)}")

        store = EventStore(db)
        started = time.perf_counter()
        report = store.verify()
        took = time.perf_counter() - started
        count = store.count()
        seen: dict[str, int] = {}
        for rec in store.read(JOURNAL, types=["OutputChunk", "NoteAdded"]):
            ev = rec.event
            text = ev.data if isinstance(ev, OutputChunk) else ev.text  # type: ignore[attr-defined]
            tag = text.split(" ", 1)[0]
            if tag.startswith("w"):
                seen[tag] = seen.get(tag, 0) + 1
        store.close()
        expected = baseline + total
        print(
            f"verify: {report.checked:,} events checked in {took:.2f} s, "
            f"{'chain intact' if report.ok else 'BROKEN: ' + '; '.join(report.problems)}"
        )
        print(
            f"count: {count:,} (expected {expected:,}); per writer: "
            + ", ".join(f"{t}={n:,}" for t, n in sorted(seen.items()))
        )
        lost = count != expected or any(seen.get(f"w{n}") != PER_WRITER for n in range(WRITERS))
        if lost or not report.ok:
            print("FAILED: events lost, duplicated or chain broken")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
