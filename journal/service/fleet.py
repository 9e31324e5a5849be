"""Running work on a fleet of hosts: all at once, at most N at once, or rolling N at a time.

One thread per host at work. ``--parallel N`` keeps at most N hosts at work, starting the next
as soon as one ends; ``--rolling N`` runs the hosts in batches of N, in the order they were
named, and after each batch stops the roll if any host of it failed (its command, its
expectations, its probe), so the hosts after it are never touched. Ctrl-C tells every host at
work to stop, waits up to ``STOP_WAIT_S`` for them, and starts no more.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from journal.errors import BadInput
from journal.runbook import Host
from journal.transport.base import Cancel

R = TypeVar("R")

#: How long, after Ctrl-C, the hosts get to stop their commands before journal gives up.
STOP_WAIT_S = 15.0
#: How often the scheduler looks for a host that has finished.
POLL_S = 0.05


@dataclass(frozen=True)
class Schedule:
    """How many hosts work at once: all (the default), at most ``parallel``, or batches of
    ``rolling`` hosts, each batch started only when the one before succeeded everywhere."""

    parallel: int | None = None
    rolling: int | None = None

    def __post_init__(self) -> None:
        for name, value in (("parallel", self.parallel), ("rolling", self.rolling)):
            if value is not None and value < 1:
                raise BadInput(f"a {name} schedule needs 1 host or more at once, not {value}")
        if self.parallel is not None and self.rolling is not None:
            raise BadInput("a schedule is either parallel or rolling, not both")

    def describe(self) -> str:
        """``all at once``, ``at most 2 at once``, ``rolling, 1 at a time``."""
        if self.rolling:
            return f"rolling, {self.rolling} at a time"
        if self.parallel:
            return f"at most {self.parallel} at once"
        return "all at once"


@dataclass(frozen=True)
class HostVerdict:
    """How one host's work ended, as the live table and the summary show it."""

    ok: bool
    status: str
    exit_code: int | None = None
    reason: str | None = None


#: What a host whose work raised instead of returning is judged.
BROKEN = HostVerdict(False, "failed", None, "journal's own work on the host raised an error")


@dataclass
class FleetRun(Generic[R]):
    """A fleet run as it ended: each host's result and verdict, the hosts never started."""

    label: str
    hosts: list[str]
    schedule: Schedule
    results: list[R] = field(default_factory=list)
    verdicts: dict[str, HostVerdict] = field(default_factory=dict)
    elapsed: dict[str, float] = field(default_factory=dict)
    not_run: list[str] = field(default_factory=list)
    stopped_by: list[str] = field(default_factory=list)
    interrupted: bool = False
    wall: float = 0.0

    @property
    def succeeded(self) -> list[str]:
        return [h for h in self.hosts if h in self.verdicts and self.verdicts[h].ok]

    @property
    def failed(self) -> list[str]:
        return [h for h in self.hosts if h in self.verdicts and not self.verdicts[h].ok]

    @property
    def complete(self) -> bool:
        """Every host that was started came back with a result (none cut off by Ctrl-C)."""
        return not self.interrupted and len(self.results) + len(self.not_run) == len(self.hosts)

    def slowest(self) -> tuple[str, float] | None:
        """The host that took longest, and how long."""
        if not self.elapsed:
            return None
        host = max(self.elapsed, key=lambda h: self.elapsed[h])
        return host, self.elapsed[host]


class FleetWatch:
    """Hears how a fleet run goes, host by host; the terminal's live table is one. Called
    from the hosts' threads, so an implementation must be thread-safe. These do nothing."""

    def fleet_started(self, label: str, hosts: list[str], schedule: Schedule) -> None:
        """The fleet run begins; every host waits."""

    def host_started(self, host: str) -> None:
        """A host's work begins."""

    def host_finished(self, host: str, verdict: HostVerdict, elapsed: float) -> None:
        """A host's work ended."""

    def interrupted(self) -> None:
        """Ctrl-C came: every host at work is told to stop, and waited for a while."""

    def fleet_finished(self, run: FleetRun[Any]) -> None:
        """The fleet run ended (also after a second Ctrl-C cut it short)."""


def run_fleet(
    hosts: list[Host],
    work: Callable[[Host, threading.Event], R],
    schedule: Schedule | None = None,
    *,
    label: str = "",
    verdict: Callable[[R], HostVerdict] | None = None,
    watch: FleetWatch | None = None,
) -> FleetRun[R]:
    """Run ``work(host, cancel)`` for every host as ``schedule`` says, each in its own
    thread; ``verdict`` judges a result (for the roll and the table; default: ok)."""
    schedule = schedule or Schedule()
    watch = watch or FleetWatch()
    judge = verdict or (lambda _result: HostVerdict(True, "succeeded"))
    run: FleetRun[R] = FleetRun(label, [h.name for h in hosts], schedule)
    cancel = Cancel()
    results: dict[str, R] = {}
    began: dict[str, float] = {}
    done = threading.Semaphore(0)

    failures: list[BaseException] = []

    def on_host(host: Host) -> None:
        began[host.name] = time.monotonic()
        ended = BROKEN
        try:
            watch.host_started(host.name)
            result = work(host, cancel)
            results[host.name] = result
            ended = judge(result)
        except BaseException as exc:  # noqa: BLE001 - raised again in the calling thread
            failures.append(exc)
            cancel.why = "journal could not go on recording"
            cancel.set()  # the other hosts' commands are stopped, not left unrecorded
        finally:
            run.elapsed[host.name] = time.monotonic() - began[host.name]
            run.verdicts[host.name] = ended
            try:
                watch.host_finished(host.name, ended, run.elapsed[host.name])
            finally:
                done.release()

    pending = list(hosts)
    started: list[threading.Thread] = []
    batch: list[str] = []
    finished = 0

    def start(host: Host) -> None:
        thread = threading.Thread(
            target=on_host, args=(host,), name=f"host-{host.name}", daemon=True
        )
        thread.start()
        started.append(thread)

    # Polling a semaphore with short timed waits, not Thread.join: a join interrupted by Ctrl-C
    # can leave CPython 3.11 believing the thread has ended.
    def reap(deadline: float) -> bool:
        nonlocal finished
        while time.monotonic() < deadline:
            # a short timed wait, not a sleep: a host that ends is reaped at once, and
            # Ctrl-C still lands between two waits
            if done.acquire(timeout=POLL_S):
                finished += 1
                return True
        return False

    limit = schedule.parallel or len(hosts) or 1
    clock = time.monotonic()
    watch.fleet_started(label, run.hosts, schedule)
    try:
        try:
            while True:
                running = len(started) - finished
                if schedule.rolling:
                    if running == 0:
                        run.stopped_by = [h for h in batch if not run.verdicts[h].ok]
                        if run.stopped_by or not pending:
                            break
                        now, pending = pending[: schedule.rolling], pending[schedule.rolling :]
                        batch = [h.name for h in now]
                        for host in now:
                            start(host)
                        continue
                else:
                    while pending and running < limit:
                        start(pending.pop(0))
                        running += 1
                    if running == 0:
                        break
                reap(float("inf"))
        except KeyboardInterrupt as stop:
            run.interrupted = True
            cancel.why = getattr(stop, "why", "Ctrl-C")
            cancel.set()
            watch.interrupted()
            deadline = time.monotonic() + STOP_WAIT_S
            while len(started) > finished and reap(deadline):
                pass
    finally:
        run.not_run = [h.name for h in hosts if h.name not in began]
        run.results = [results[h.name] for h in hosts if h.name in results]
        run.wall = time.monotonic() - clock
        watch.fleet_finished(run)
    if failures:
        raise failures[0]  # in the calling thread: its message, not a thread's traceback
    return run
