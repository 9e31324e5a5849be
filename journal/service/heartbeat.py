"""The heartbeat of a recording process: while it records any step, its lease row's beat moves
forward every few seconds, so that a reader on any machine (a shared PostgreSQL journal, the
web page of a colleague) sees the steps as running, and sees them lost once the beat stops.

One beat per process and database, however many hosts it records at once: the first step
that starts begins it (with a beat before its ``StepStarted``), the last one to end removes the
row. A beat that fails (the database busy for a while) is tried again at the next one; the
steps never wait for it.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from journal.store import EventStore
from journal.store.leases import BEAT_S

_guard = threading.Lock()
_beating: dict[int, _Beat] = {}


class _Beat:
    def __init__(self, store: EventStore, journal: str) -> None:
        self.store = store
        self.journal = journal
        self.users = 0
        self.stop = threading.Event()
        self.machine = socket.gethostname()
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self._loop, name="journal-heartbeat", daemon=True)

    def beat(self) -> None:
        try:
            self.store.leases.beat(self.machine, self.pid, self.journal)
        except Exception:  # noqa: BLE001 - a missed beat is tried again; steps never wait
            pass

    def _loop(self) -> None:
        while not self.stop.wait(BEAT_S):
            self.beat()

    def end(self) -> None:
        self.stop.set()
        self.thread.join(BEAT_S * 2)
        try:
            self.store.leases.end(self.machine, self.pid)
        except Exception:  # noqa: BLE001 - a row left behind goes stale, as a dead one would
            pass


@contextmanager
def heartbeat(store: EventStore, journal: str) -> Iterator[None]:
    """Keep this process's lease fresh while the block runs (nested and threaded uses share
    one beat)."""
    with _guard:
        beat = _beating.get(id(store))
        if beat is None:
            beat = _beating[id(store)] = _Beat(store, journal)
            beat.beat()  # before the first StepStarted: a reader never sees the run unleased
            beat.thread.start()
        beat.users += 1
    try:
        yield
    finally:
        with _guard:
            beat.users -= 1
            last = beat.users == 0
            if last:
                del _beating[id(store)]
        if last:
            beat.end()
