"""The one vocabulary of a step run, low enough that every room imports down to it: how a
command ended (:class:`Outcome`), one step on one host as it ended (:class:`StepRun`), every
status a run is recorded or shown with and the sets of them that decisions read, the exit
status a command line gives for a set of runs, and whether a run's recorder lives
(:data:`Alive`, :func:`in_process_table`).

The transports make outcomes (:mod:`journal.transport.base`), the services record them
(:mod:`journal.service.steps`), the projections fold them back from the events
(:mod:`journal.projections.timeline`), the command line, the web and the notices show them:
each reads the statuses from here, never a string of its own."""

from __future__ import annotations

import os
import re
import signal
import socket
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

# The statuses of a step run, as ``StepFinished.status`` records them or settling names them.

#: The command exited 0 (and met its expectations).
SUCCEEDED = "succeeded"
#: The command exited non-zero, could not be run, or failed its expectations or figures.
FAILED = "failed"
#: Stopped after the step's timeout.
TIMED_OUT = "timed-out"
#: Stopped by Ctrl-C, or by a signal journal itself got (SIGTERM, SIGHUP).
INTERRUPTED = "interrupted"
#: Its recorder went away before the run ended: how the command ended is unknown.
LOST = "lost"
#: Stopped before its command was handed to the host (nothing of it ran there): no failure of
#: the command, and the next `journal run step` runs it.
NOT_STARTED = "not started"
#: Journal stopped it, or did not launch it, because the disk under its database was full
#: (exit status 2, as for any full disk): not the command's failure, nor a kill.
DISK_FULL = "disk full"
#: A benchmark that said why its host cannot run it (see :mod:`journal.service.bench`): no
#: failure.
SKIPPED = "skipped"
#: Imported from a transcript (`journal import`): its exit status may be unknown.
IMPORTED = "imported"
#: Unfinished, its recorder alive.
RUNNING = "running"
#: Folded without its end, not yet settled as running, lost or not started.
UNFINISHED = "unfinished"
#: Shown, not recorded: a run that succeeded but changed nothing it was asked to.
NO_CHANGE = "no change"

# What a transport says of a run that has no end yet (never recorded as a run's end).

#: Left running on its host (``--detach``, or the host could not be reached again): the
#: record stays open for `journal attach`.
DETACHED = "detached"
#: The host has no spool for the run (`journal attach`).
GONE = "gone"

#: Every status a recorded run is shown with, in the order the web's filter lists them.
STATUSES = (
    SUCCEEDED,
    FAILED,
    INTERRUPTED,
    LOST,
    TIMED_OUT,
    DISK_FULL,
    NOT_STARTED,
    SKIPPED,
    RUNNING,
    IMPORTED,
)
#: Not a failure (exit 0, no step-failed notice, no stop of a plan or a rolling batch).
OK = frozenset({SUCCEEDED, SKIPPED})
#: A step run that did not fail: it went through, was skipped (a benchmark its host cannot
#: run, which said why), or was not started (stopped before its command was launched:
#: nothing of it ran).
DONE = frozenset({SUCCEEDED, IMPORTED, SKIPPED, NOT_STARTED})
#: Runs whose command went through (an imported command's exit status is unknown).
WENT_THROUGH = frozenset({SUCCEEDED, IMPORTED, NO_CHANGE})
#: Runs that failed, for `journal log --failed`.
FAILURES = frozenset({FAILED, TIMED_OUT, LOST, INTERRUPTED, DISK_FULL})
#: Run states that make a run of a step a try that the next run of it tries again.
TRIED_AGAIN = FAILURES | {NOT_STARTED}
#: A command that failed by itself (its exit status or its timeout), not stopped nor lost:
#: a plan step's latest run so makes `journal status` exit 1.
OWN_FAILURES = frozenset({FAILED, TIMED_OUT})
#: A command stopped by journal: Ctrl-C, a signal journal got, or the step's timeout.
STOPPED = frozenset({INTERRUPTED, TIMED_OUT})
#: A command that ended by its own exit status (neither stopped nor left running).
EXITED = frozenset({SUCCEEDED, FAILED})
#: Cut off before its end (stopped, or its recorder gone): what it did may go on later.
CUT_OFF = frozenset({INTERRUPTED, LOST, NOT_STARTED})

#: Why a run is lost: its recorder went away before the run ended.
LOST_REASON = (
    "its recorder stopped before the step ended (killed, or its machine went down): the "
    "command may still be running on the host, or may have ended; how is unknown"
)
#: Why a run is not started: its recorder went away before it handed the command to the host.
NOT_STARTED_REASON = (
    "its recorder stopped before it launched the command (killed, or its machine went "
    "down, while it connected or took the before-snapshot): nothing of it ran on the host; "
    "run the step again"
)

#: The cause of a step that failed for its host's full disk (exit status 2, not 255).
CAUSE_DISK_FULL = "disk-full"


@dataclass(frozen=True)
class Outcome:
    """How a command ended: ``status`` succeeded, failed, interrupted or timed-out; or
    skipped (a benchmark that said why its host cannot run it, see :mod:`journal.service.bench`),
    which is no failure."""

    status: str
    exit_code: int | None
    duration: float
    signal: str | None = None
    reason: str | None = None
    #: when the command ended (seconds since the epoch), where its supervisor said
    ended: float | None = None
    #: what made it fail where no exit status says: :data:`CAUSE_DISK_FULL`
    cause: str | None = None

    @property
    def ok(self) -> bool:
        """Not a failure: succeeded, or skipped (exit 0, no step-failed notice, no stop of a
        plan or a rolling batch)."""
        return self.status in OK


@dataclass(frozen=True)
class StepRun:
    """One step on one host, as it ended (its failed expectations, if any, are recorded as
    ``ExpectationChecked`` and named in the outcome's reason)."""

    run_id: str
    step: str
    host: str
    outcome: Outcome


def detached(duration: float, why: str) -> Outcome:
    """The outcome of a run left running on its host: the record stays open for `attach`."""
    return Outcome(DETACHED, None, duration, None, why)


def signal_name(number: int) -> str | None:
    """``SIGKILL`` for 9; None for a number that names no signal."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return None


def outcome_for_exit(
    code: int | None,
    duration: float,
    *,
    cancelled: bool,
    timed_out: bool,
    timeout: float | None,
    why: str = "Ctrl-C",
) -> Outcome:
    """The outcome of a command that ended with ``code`` (negative: killed by that signal);
    ``why`` names what interrupted it."""
    sig = None
    if code is not None and code < 0:
        sig, code = signal_name(-code), 128 - code
    elif code is not None and code > 128:
        sig = signal_name(code - 128)
    if timed_out:
        return Outcome(
            TIMED_OUT, code, duration, sig, f"stopped after the step's timeout of {timeout:g} s"
        )
    if cancelled:
        return Outcome(
            INTERRUPTED, code, duration, sig, f"interrupted ({why}): the command was stopped"
        )
    if code == 0:
        return Outcome(SUCCEEDED, 0, duration)
    reason = f"killed by {sig}" if sig and code is not None and code > 128 else None
    return Outcome(FAILED, code, duration, sig, reason)


def exit_status(runs: list[StepRun]) -> int:
    """0 when every host succeeded (or skipped: a benchmark its host cannot run, which said
    why); else the first failure's own exit status (or 124 for a
    timeout, 130 for Ctrl-C and 128 + the signal when journal got SIGTERM or SIGHUP, also
    for a run so stopped before its command was launched, 255 when the host could not be
    reached, as ssh does, 2 when the host's disk was full for the run's spool or the one
    under the database was, 1 when the command exited 0 but failed its expectations or
    printed no figure)."""
    for run in runs:
        outcome = run.outcome
        if outcome.ok:
            continue
        if outcome.cause == CAUSE_DISK_FULL or outcome.status == DISK_FULL:
            return 2  # the host's disk: no more "unreachable" than the database's
        if outcome.status == NOT_STARTED and not (outcome.reason or "").startswith("interrupted ("):
            continue  # its recorder died before launching it (`journal attach`): no failure
        if outcome.status in (INTERRUPTED, NOT_STARTED):
            # 130 for Ctrl-C; 128 + the signal for one journal itself got (143: SIGTERM)
            asked = re.match(r"interrupted \((SIG[A-Z]+)\)", outcome.reason or "")
            if asked and asked.group(1) in signal.Signals.__members__:
                return 128 + signal.Signals[asked.group(1)]
            return 130
        if outcome.status == TIMED_OUT:
            return 124
        if outcome.status == DETACHED:
            # left running on purpose (--detach): journal was interrupted; else the host
            # could not be reached again: the command goes on there either way
            return 130 if outcome.reason and outcome.reason.startswith("left running") else 255
        if outcome.exit_code == 0:
            return 1  # the command succeeded; its expectations (or figures) did not
        if outcome.exit_code:
            return outcome.exit_code
        return 255
    return 0


#: Whether the recorder of a run lives: ``alive(machine, pid)``, asked of the recorders'
#: heartbeats (:meth:`journal.store.EventStore.liveness`) or of this machine's process table.
Alive = Callable[[str, int], bool]


def in_process_table(machine: str, pid: int) -> bool:
    """Whether the process that recorded a step is still running, asked of this machine's
    process table (so only for a recorder on this machine): the fallback for a run recorded
    without a lease, when no heartbeat says it (:mod:`journal.store.leases`)."""
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


def new_run_id() -> str:
    """A step run's id, unique across machines: 8 random hex digits, then its start time in
    milliseconds (hex). Random first, so that a few of its first characters name it, as a
    commit's do in git (`journal show 3f9a2c`): with the time first, every run of a session
    shared its first nine. Runs are ordered by where they lie in the journal, never by id."""
    return f"{uuid.uuid4().hex[:8]}{int(time.time() * 1000):x}"


#: The fewest characters a run id is shown with: its random digits (:func:`new_run_id`'s).
SHORT_ID = 8


class ShortIds:
    """Run ids as a person types them, as git shows commits: the shortest start, of
    :data:`SHORT_ID` characters at least, that no other run shares (``journal show`` takes
    it). ``neighbours`` gives, for some ids, the ids right before and after each in id order
    (``EventStore.id_neighbours``); ``know`` asks it of many ids at once, a call of one id
    asks of that one. A start unique today may be shared later, as in git: the whole id
    stays in JSON, links and finding keys."""

    def __init__(
        self,
        neighbours: Callable[[list[str]], dict[str, tuple[str | None, str | None]]],
    ) -> None:
        self._neighbours = neighbours
        self._known: dict[str, str] = {}

    def know(self, ids: list[str]) -> None:
        wanted = [run for run in ids if run and run not in self._known]
        for run, near in self._neighbours(wanted).items() if wanted else ():
            length = SHORT_ID
            for other in near:
                if other is not None:
                    length = max(length, len(os.path.commonprefix([run, other])) + 1)
            self._known[run] = run[:length]

    def __call__(self, run: str) -> str:
        if run and run not in self._known:
            self.know([run])
        return self._known.get(run, run)


def along(short: Callable[[str], str], items: Iterable[dict], key: str = "run") -> Iterator[dict]:
    """``items`` as they come, their ids (``item[key]``) made known to ``short`` a hundred
    at a time ahead of them when it is a :class:`ShortIds` (a long list: one query each)."""
    if not isinstance(short, ShortIds):
        yield from items
        return
    batch: list[dict] = []
    for item in items:
        batch.append(item)
        if len(batch) == 100:
            short.know([b[key] for b in batch if b.get(key)])
            yield from batch
            batch = []
    short.know([b[key] for b in batch if b.get(key)])
    yield from batch
