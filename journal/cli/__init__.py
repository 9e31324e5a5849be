"""The ``journal`` command line: argument parsing and the exit-status contract.

0 on success, the step's own exit status for a failed step, 1 when `journal verify` finds
tampering, 2 for bad input with a one-paragraph message and no traceback.
"""

from __future__ import annotations

import journal.cli.startup  # first: a Ctrl-C while the rest loads ends journal cleanly

# isort: split
import importlib
import os
import signal
import sys
from collections.abc import Callable

from journal.cli.parser import build_parser
from journal.errors import BadInput

__all__ = ["build_parser", "handler", "main"]


class Stopped(KeyboardInterrupt):
    """journal itself got SIGTERM or SIGHUP: it stops the steps at work as for Ctrl-C (their
    whole process groups: INT, then TERM, then KILL) and records them interrupted by it."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.why = signal.Signals(signum).name
        super().__init__(self.why)


#: The signal that stopped journal, once one did (its exit status is then 128 + it).
_stopped_by: list[int] = []


def _stop(signum: int, frame: object) -> None:
    _stopped_by.append(signum)
    if signum == signal.SIGHUP:
        # the terminal is gone: what journal still prints goes nowhere instead of failing
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            try:
                os.dup2(devnull, fd)
            except OSError:
                pass
        os.close(devnull)
    raise Stopped(signum)


def _stop_on_signals() -> None:
    """SIGTERM and SIGHUP (the operator's SSH session dropping) stop journal the way Ctrl-C
    does, so that no step's command outlives its record unseen; a signal ignored when journal
    started stays ignored (`nohup journal run plan &`: the logout's SIGHUP goes nowhere).
    Ctrl-C raises KeyboardInterrupt again (:mod:`journal.cli.startup` ended journal on it
    while it started)."""
    try:
        if signal.getsignal(signal.SIGINT) is journal.cli.startup.interrupted:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) != signal.SIG_IGN:
                signal.signal(signum, _stop)
    except (ValueError, OSError):
        pass  # not the main thread (journal called from a program): leave its handlers


def handler(name: str) -> Callable[..., int | None]:
    """The function a command runs, by its parser's name for it (``running.run_step``): its
    family's module is imported only now, once the command line has been parsed, so that
    `journal --help` and a command refused by the parser load none of them."""
    family, function = name.split(".")
    return getattr(importlib.import_module(f"journal.cli.{family}"), function)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run = handler(args.func)  # while journal.cli.startup still ends journal on a Ctrl-C
    from journal.cli.context import Context

    ctx = Context(
        db=args.db or "journal.db",
        runbook_path=args.runbook,
        journal_name=args.journal,
        db_given=args.db is not None,
    )
    try:
        _stop_on_signals()  # in the try: from here a signal ends journal through it
        code = int(run(ctx, args) or 0)
        # the steps were stopped as for Ctrl-C (130); the exit status names the real signal
        return 128 + _stopped_by[0] if _stopped_by and code == 130 else code
    except BadInput as exc:
        print(f"journal: {exc}", file=sys.stderr)
        return 2
    except Stopped as stop:
        print(f"journal: stopped by {stop.why}", file=sys.stderr)
        return 128 + stop.signum
    except KeyboardInterrupt:
        print("journal: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    finally:
        ctx.close()
