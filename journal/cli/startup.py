"""Ctrl-C while journal starts: imported first by :mod:`journal.cli`, before the rest of it
loads (most of a second on a slow machine), when journal is the program being run.

Python's own handler would raise KeyboardInterrupt out of whatever module is loading: a
traceback, and exit status 1 or death by SIGINT depending on the moment. Nothing is recorded
yet at that point, so journal ends at once as an interrupted command does: "journal:
interrupted", exit status 130. :func:`journal.cli._stop_on_signals` puts Python's handler back
once journal's own handling of Ctrl-C is in place. A SIGINT ignored when journal started (a
background job of a script) stays ignored, as Python leaves it.
"""

from __future__ import annotations

import os
import signal
import sys


def interrupted(signum: int, frame: object) -> None:
    """End journal before it does anything: exit status 130, no traceback."""
    os.write(2, b"journal: interrupted\n")  # no print: the handler may cut into one
    raise SystemExit(130)


def _journal_is_the_program() -> bool:
    """Whether this process runs journal (`journal …`, `python -m journal …`), not a
    program that imports it (a test runner, a notebook), whose Ctrl-C is its own."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None:
        return spec.name == "journal.__main__"
    return os.path.basename(getattr(main, "__file__", None) or "") == "journal"


if _journal_is_the_program() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, interrupted)
