"""Errors that end a command with a one-paragraph message instead of a traceback."""

from __future__ import annotations


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
