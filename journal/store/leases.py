"""Recorder leases: which recording processes are alive, by their heartbeat, on any machine.

A process that records steps keeps a row (its machine and pid) with a ``beat`` it moves
forward every :data:`BEAT_S` seconds (:class:`journal.service.heartbeat.Heartbeat`), and
removes the row when it is done. A reader takes the rows once (:meth:`Leases.alive`) and
asks of each unfinished run whether its recorder's beat is fresh: within :data:`STALE_S`. A
recorder on this machine is also looked for in the process table (a killed one is gone at
once), and so is one without a row (a journal recorded before leases existed).
"""

from __future__ import annotations

import socket
import time

from sqlalchemy import Engine, delete, insert, select, update

from journal.runs import Alive, in_process_table
from journal.store.schema import recorder_leases

#: How often a recording process moves its beat forward.
BEAT_S = 2.0
#: How old a beat may be before its recorder counts as gone (a few missed beats: a loaded
#: machine or a busy database delays one, never five).
STALE_S = 12.0

#: How long a reader keeps the rows it read before reading them again.
READ_AGAIN_S = 1.0


class Leases:
    """The lease rows of one database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def beat(self, machine: str, pid: int, journal: str, now: float | None = None) -> None:
        """Move this recorder's beat to now (its row made on the first beat)."""
        now = time.time() if now is None else now
        key = (recorder_leases.c.machine == machine) & (recorder_leases.c.pid == pid)
        with self.engine.begin() as conn:
            moved = conn.execute(update(recorder_leases).where(key).values(beat=now))
            if not moved.rowcount:
                conn.execute(
                    insert(recorder_leases).values(
                        machine=machine, pid=pid, journal=journal, beat=now
                    )
                )

    def end(self, machine: str, pid: int) -> None:
        """This recorder is done: its row goes."""
        key = (recorder_leases.c.machine == machine) & (recorder_leases.c.pid == pid)
        with self.engine.begin() as conn:
            conn.execute(delete(recorder_leases).where(key))

    def beats(self) -> dict[tuple[str, int], float]:
        """(machine, pid) -> last beat, of every recorder with a row."""
        query = select(recorder_leases.c.machine, recorder_leases.c.pid, recorder_leases.c.beat)
        with self.engine.connect() as conn:
            return {(m, p): b for m, p, b in conn.execute(query)}

    def alive(self, fallback: Alive = in_process_table) -> Alive:
        """Whether a run's recorder (its machine and pid) is alive: a fresh beat; a stale one
        is a recorder gone; without a row, ``fallback`` decides. The rows are read again when
        the last reading is more than a second old (a page that stays open sees runs end)."""
        read: list[tuple[float, dict[tuple[str, int], float]]] = []

        def alive(machine: str, pid: int) -> bool:
            now = time.time()
            if not read or now - read[0][0] > READ_AGAIN_S:
                try:
                    rows = self.beats()
                except Exception:  # noqa: BLE001 - an older database has no lease table
                    rows = {}
                read[:] = [(now, rows)]
            beat = read[0][1].get((machine, pid))
            if beat is None or machine == socket.gethostname():
                # this machine's process table says at once what a beat says in seconds
                return (beat is None or now - beat <= STALE_S) and fallback(machine, pid)
            return now - beat <= STALE_S

        return alive
