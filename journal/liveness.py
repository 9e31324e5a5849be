"""Whether a step's recorder lives, asked of this machine's process table: the fallback when no
heartbeat says it (:mod:`journal.store.leases`). Kept apart from the store so that what only
folds events (the projections) does not import the database layer."""

from __future__ import annotations

import os
import socket


def in_process_table(machine: str, pid: int) -> bool:
    """Whether the process that recorded a step is still running, asked of this machine's
    process table (so only for a recorder on this machine): the fallback for a run recorded
    without a lease."""
    if machine != socket.gethostname() or pid <= 0:
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return b"journal" in fh.read()
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
