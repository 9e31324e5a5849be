"""Errors that end a command with a one-paragraph message instead of a traceback."""

from __future__ import annotations

import os


def shown(value: str, width: int = 60) -> str:
    """``value`` quoted for a message: its start and its length when it is long, so that a
    message stays one paragraph whatever was given (a 100 KB name, a pasted log)."""
    if len(value) <= width:
        return repr(value)
    return f"{value[:width]!r}... ({len(value):,} characters)"


class BadInput(Exception):
    """Input the user can fix (a runbook, a flag, a name): exit status 2, nothing recorded."""


class Tampered(Exception):
    """The store's hash chain or schema does not hold: exit status 1."""


class Busy(BadInput):
    """The store's write lock could not be had within its busy timeout: exit status 2, and
    nothing was written by the attempt."""

    @classmethod
    def locked(cls, path: str, waited: float) -> Busy:
        return cls(
            f"{path} is locked by another writer: its lock was not released within the "
            f"{waited:g} s busy timeout, so nothing was written; find the process holding it "
            f"(`fuser {path}`) and try again once it is done"
        )


class DiskFull(BadInput):
    """The filesystem under the database is full: exit status 2; the write that did not fit
    was undone whole, and nothing recorded before is lost."""

    @classmethod
    def database(cls, path: str) -> DiskFull:
        folder = os.path.dirname(path) or "."
        return cls(
            f"{path}: the disk is full (SQLite: database or disk is full), so nothing more "
            "could be recorded there; the write that did not fit was undone whole and what "
            f"was recorded before is kept; free space on its filesystem (`df -h {folder}`) "
            "and try again"
        )
