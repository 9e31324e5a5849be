"""Running one step of the runbook on one or several hosts, recording everything as events."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from journal.errors import Busy, DiskFull
from journal.events import (
    CommandLaunched,
    HostKeyAccepted,
    JournalOpened,
    StepFinished,
    StepStarted,
)
from journal.expect import Verdict
from journal.probes.runner import CaptureSink
from journal.projections.packages import change_text, diff_packages
from journal.recorder import OutputRecorder
from journal.redact import Redactor
from journal.runbook import Host, Runbook, Step
from journal.runs import (
    DETACHED,
    DISK_FULL,
    EXITED,
    FAILED,
    INTERRUPTED,
    NOT_STARTED,
    Outcome,
    StepRun,
    new_run_id,
)
from journal.service.checks import Append, HostChecks
from journal.service.fleet import FleetRun, FleetWatch, HostVerdict, Schedule, run_fleet
from journal.service.heartbeat import heartbeat
from journal.store import EventStore
from journal.transport import ConnectFailed, Transport, transport_for
from journal.transport.supervisor import folder

if TYPE_CHECKING:
    from journal.notify import Notifier

R = TypeVar("R")

#: The mark journal leaves in a run's folder on its host (:mod:`journal.transport.supervisor`)
#: when it stopped the command itself because the disk under its database was full: with
#: nothing more fitting in the database, the host is where `journal attach` learns it.
OWN_STOP_MARK = "stopped-disk-full"


@dataclass(frozen=True)
class Measure:
    """What makes a step run a benchmark run (`journal run bench`): the benchmark's name, the
    command sent to a host and the one recorded (a built-in's script is not written out), and
    ``read(run_id, host, outcome, redactor, printed)``, which records the figures of the
    output (``printed``: as printed, before redaction; None when too big to keep) and gives
    the outcome to record (a run whose output holds no figure has failed)."""

    benchmark: str
    command: Callable[[Host], tuple[str, str]]
    read: Callable[[str, Host, Outcome, Redactor, str | None], Outcome]


class StepWatch(FleetWatch):
    """Hears a step run as it goes: the output of each host, journal's own lines, the end of a
    host's step. The command line's terminal echo and live table are such watches; these do
    nothing (a service never prints)."""

    def for_host(self, host: str) -> Callable[[str, bytes], None]:
        """Where a host's output goes, chunk by chunk: ``write(stream, data)``."""
        return lambda stream, data: None

    def say(self, text: str) -> None:
        """A line of journal's own (probe results, verdicts)."""

    def flush_host(self, host: str) -> None:
        """A host's step ended: what is left of its last line may be shown."""


def ensure_opened(store: EventStore, runbook: Runbook) -> None:
    """Record ``JournalOpened`` when the journal is new or its plan or hosts changed."""
    hosts = {name: host.ssh for name, host in runbook.hosts.items()}
    last = None
    for rec in store.read(runbook.name, types=["JournalOpened"]):
        last = rec.event
    if isinstance(last, JournalOpened) and last.plan == runbook.plan and last.hosts == hosts:
        return
    store.append(
        runbook.name,
        [
            JournalOpened(
                name=runbook.name, runbook=str(runbook.path), hosts=hosts, plan=runbook.plan
            )
        ],
    )


def run_step_fleet(
    store: EventStore,
    runbook: Runbook,
    step: Step,
    hosts: list[Host],
    echo: StepWatch,
    *,
    accept_new_host_key: bool = False,
    plan_run: str | None = None,
    measure: Measure | None = None,
    schedule: Schedule | None = None,
    detach: bool = False,
    per_host: Mapping[str, tuple[Step, dict[str, Any] | None]] | None = None,
    notifier: Notifier | None = None,
) -> FleetRun[StepRun]:
    """Run ``step`` on the hosts as ``schedule`` says (all at once by default, at most N at
    once, or rolling N at a time stopping at a failure); ``echo`` hears the fleet's progress.
    With ``detach`` (or the step's own ``detach``), an interruption leaves the commands
    running on their hosts, to be reattached, instead of stopping them. ``per_host`` gives a
    host its own step and the ``rollback`` its ``StepStarted`` records (`journal rollback`:
    each host its own command and target set). ``notifier`` hears each run's end (after it
    is recorded), which it must not wait on."""

    def work(host: Host, cancel: threading.Event) -> StepRun:
        own, rollback = per_host[host.name] if per_host else (step, None)
        if detach and not own.detach:
            own = replace(own, detach=True)
        ended = _run_on_host(
            store,
            runbook,
            own,
            host,
            echo,
            cancel,
            accept_new_host_key,
            plan_run,
            measure,
            rollback,
        )
        if notifier is not None:
            notifier.run_ended(ended, rollback)
        return ended

    return run_fleet(
        hosts,
        work,
        schedule,
        label=step.name,
        verdict=step_verdict,
        watch=echo,
    )


def step_verdict(run: StepRun) -> HostVerdict:
    """How a step run ended, for the roll and the live table."""
    outcome = run.outcome
    return HostVerdict(outcome.ok, outcome.status, outcome.exit_code, outcome.reason)


def on_hosts(hosts: list[Host], work: Callable[[Host, threading.Event], R]) -> list[R]:
    """Run ``work`` for every host in its own thread, all at once; on Ctrl-C, tell them all
    to stop and wait a while (see :mod:`journal.service.fleet`). The results of the hosts
    that finished, in the hosts' order."""
    return run_fleet(hosts, work).results


def _run_on_host(
    store: EventStore,
    runbook: Runbook,
    step: Step,
    host: Host,
    echo: StepWatch,
    cancel: threading.Event,
    accept_new_host_key: bool,
    plan_run: str | None,
    measure: Measure | None = None,
    rollback: dict[str, Any] | None = None,
) -> StepRun:
    """:func:`_record_on_host` under this process's heartbeat, so that readers anywhere see
    the run as running while it is recorded, and as lost if this process dies."""
    with heartbeat(store, runbook.name):
        return _record_on_host(
            store,
            runbook,
            step,
            host,
            echo,
            cancel,
            accept_new_host_key,
            plan_run,
            measure,
            rollback,
        )


def _record_on_host(
    store: EventStore,
    runbook: Runbook,
    step: Step,
    host: Host,
    echo: StepWatch,
    cancel: threading.Event,
    accept_new_host_key: bool,
    plan_run: str | None,
    measure: Measure | None = None,
    rollback: dict[str, Any] | None = None,
) -> StepRun:
    journal = runbook.name
    run_id = new_run_id()
    env = {**host.env, **step.env}
    redactor = Redactor.for_run(runbook.redact, env)
    sent, shown = measure.command(host) if measure else (step.run, step.run)
    command, found = redactor.text(shown, "command")
    shown_env, more = redactor.env(env, "env")
    transport = transport_for(host, accept_new_host_key=accept_new_host_key)
    store.append(
        journal,
        [
            StepStarted(
                run=run_id,
                step=step.name,
                host_name=host.name,
                target=transport.target,
                command=command,
                env=shown_env,
                cwd=step.cwd,
                timeout=step.timeout,
                pid=os.getpid(),
                machine=socket.gethostname(),
                plan_run=plan_run,
                redactions=found + more,
                benchmark=measure.benchmark if measure else None,
                rollback=rollback,
                launch_marked=True,
            )
        ],
    )

    def finish(outcome: Outcome) -> StepRun:
        reason = redactor.text(outcome.reason, "reason")[0] if outcome.reason else None
        if outcome.status == DETACHED:
            # the command goes on on the host: the run stays open until `journal attach`
            echo.say(f"{step.name} on {host.name}: {reason}")
            return StepRun(run_id, step.name, host.name, outcome)
        store.append(
            journal,
            [
                StepFinished(
                    run=run_id,
                    host_name=host.name,
                    status=outcome.status,
                    exit_code=outcome.exit_code,
                    duration=round(outcome.duration, 6),
                    signal=outcome.signal,
                    reason=reason,
                )
            ],
        )
        return StepRun(run_id, step.name, host.name, outcome)

    error = connect(transport, host, lambda events: store.append(journal, events))
    if error:
        return finish(Outcome(FAILED, None, 0.0, None, error))
    checks = HostChecks(
        runbook,
        host,
        transport,
        env,
        redactor,
        lambda events: store.append(journal, events),
        cancel,
        echo.say,
    )
    started = time.monotonic()
    failed: list[Verdict] = []
    recorder: OutputRecorder | None = None
    before: dict[str, Any] | None = None
    refused: Busy | DiskFull | None = None
    spooled = False  # whether the command's output is being recorded from its spool
    ran: Outcome | None = None

    def not_started() -> StepRun:
        """The end of a run stopped before its command was handed to the host."""
        why = getattr(cancel, "why", "Ctrl-C")
        return finish(
            Outcome(
                NOT_STARTED,
                None,
                time.monotonic() - started,
                None,
                f"interrupted ({why}) before its command was launched: nothing of it ran on "
                f"{host.name}",
            )
        )

    try:
        if cancel.is_set():  # while it connected
            return not_started()
        if step.snapshots:
            before = checks.snapshot("before", run_id, run_id)
        if cancel.is_set():  # while it took the before-snapshot
            return not_started()
        # Recorded before the launch: a run whose recorder dies before this was not started.
        store.append(journal, [CommandLaunched(run=run_id, host_name=host.name)])
        # Made now, so that chunk times count from the command's start.
        recorder = OutputRecorder(
            lambda chunks: store.append(journal, chunks),
            run_id,
            host.name,
            redactor,
            echo.for_host(host.name),
            keep=measure is not None,  # a benchmark's parser reads the output as printed
        )
        spooled = True
        outcome = ran = transport.run(
            sent, env, step.cwd, step.timeout, recorder, cancel, run_id=run_id, detach=step.detach
        )
        spooled = False
        recorder.close()
        echo.flush_host(host.name)
        if measure is not None and outcome.status != DETACHED:
            outcome = measure.read(run_id, host, outcome, redactor, recorder.printed())
        if outcome.status in EXITED and outcome.exit_code is not None:
            failed = _after_step(checks, step, outcome, run_id, before)
            if failed and outcome.ok:
                more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
                outcome = replace(
                    outcome,
                    status=FAILED,
                    reason=f"expectation failed: {failed[0].reason}{more}",
                )
    except (Busy, DiskFull) as exc:
        # The store refused a write (its lock held too long, its disk full): the error ends
        # journal's command (exit 2), not as a step's failure (255 once said "unreachable")
        refused = exc
        if spooled and isinstance(exc, DiskFull) and not step.detach:
            # the transport stopped the command: say so on the host, where `journal attach`
            # reads it (nothing more fits in the database)
            mark_own_stop(transport, run_id)
    except Exception as exc:  # noqa: BLE001 - whatever broke, the step run must be closed
        outcome = Outcome(
            FAILED,
            None,
            time.monotonic() - started,
            None,
            f"the transport failed: {type(exc).__name__}: {exc}",
        )
    finally:
        # after a refused write, the recorder (whose offsets have moved past the chunks
        # that were not stored) must store nothing more: a later chunk would leave a gap
        if recorder is not None and refused is None:
            recorder.close()
        echo.flush_host(host.name)
        transport.close()
    if refused is not None and spooled:
        # refused while the output was recorded: the transport stopped the command (or left
        # a detachable one running) and kept its spool. The run stays open, recorded up to
        # its last stored chunk, for `journal attach` to record the rest from the spool.
        left = "left running" if step.detach else "stopped (if it had not ended)"
        raise type(refused)(
            f"{refused}. The command of {step.name} on {host.name} was {left} and is "
            f"recorded up to there; once the database takes writes again, `journal attach "
            f"{run_id}` records the rest of its output from its spool on the host"
        ) from None
    if refused is not None:
        # refused before the command started, or after its output was all recorded: the
        # run's end is recorded if the store takes that much
        full = isinstance(refused, DiskFull)
        if ran is None:
            ran = Outcome(FAILED, None, time.monotonic() - started, None)
            why = f"its command was not launched: journal could not record it: {refused}"
        else:
            why = f"journal could not record all of it: {refused}"
        with contextlib.suppress(Busy, DiskFull):
            finish(replace(ran, status=DISK_FULL if full else FAILED, reason=why))
        raise refused
    return finish(outcome)


def _after_step(
    checks: HostChecks,
    step: Step,
    outcome: Outcome,
    run_id: str,
    before: dict[str, Any] | None,
) -> list[Verdict]:
    """Snapshot, probe and check expectations after the command; the failed expectations."""
    packages = None
    if step.snapshots or "packages" in step.probes:
        packages = checks.snapshot("after", run_id, run_id)
    if before is not None and packages is not None:
        diff = diff_packages(before, packages)
        changes = "no change" if diff.empty else "; ".join(change_text(c) for c in diff.changes)
        checks.say(f"packages on {checks.host.name}: {changes}")
    probes = [name for name in step.probes if name != "packages"]
    for name in probes:
        checks.probe(name, run_id, run_id)
    if not outcome.ok:
        return []  # a failed command says enough; its expectations are moot
    verdicts = checks.expect(step.expect, packages, run_id)
    verdicts += checks.probe_expectations(step.probes, packages, run_id)
    return [v for v in verdicts if not v.ok]


def connect(transport: Transport, host: Host, append: Append) -> str | None:
    """Open the transport, recording any host key accepted; the reason if it failed."""
    try:
        transport.connect()
    except ConnectFailed as exc:
        return f"could not connect: {exc}"
    append(
        [
            HostKeyAccepted(
                host_name=host.name,
                target=key.target,
                key_type=key.key_type,
                fingerprint=key.fingerprint,
                known_hosts=key.known_hosts,
            )
            for key in transport.accepted
        ]
    )
    return None


def mark_own_stop(transport: Transport, run_id: str) -> None:
    """Leave :data:`OWN_STOP_MARK` in the run's folder on its host (an empty file: it fits
    where a byte more does not); nothing when that cannot be done."""
    d = folder(run_id)
    script = f"[ -d {d} ] && : > {d}/{OWN_STOP_MARK}"
    with contextlib.suppress(Exception):
        transport.probe(script, {}, None, 30, CaptureSink(), threading.Event(), run_id=run_id)


def own_stop_marked(transport: Transport, run_id: str) -> bool:
    """Whether journal left :data:`OWN_STOP_MARK` for this run on its host (asked before the
    run's folder goes: `journal attach`)."""
    d = folder(run_id)
    sink = CaptureSink()
    script = f"[ -e {d}/{OWN_STOP_MARK} ] && echo marked"
    try:
        transport.probe(script, {}, None, 30, sink, threading.Event(), run_id=run_id)
    except Exception:  # noqa: BLE001 - unknown: the run's end is named by its exit status
        return False
    return b"marked" in sink.streams["stdout"]


def named_own_stop(outcome: Outcome) -> Outcome:
    """``outcome`` of a command that journal stopped itself for a full disk under its
    database (:func:`mark_own_stop`): ``disk full`` when the signal journal sent ended it;
    as it is when the command had ended by itself first."""
    if outcome.status not in (FAILED, INTERRUPTED) or outcome.signal not in (
        "SIGTERM",
        "SIGINT",
        "SIGKILL",
    ):
        return outcome
    return replace(
        outcome,
        status=DISK_FULL,
        reason=(
            f"journal stopped the command itself ({outcome.signal}): the disk under its "
            "database was full, so no more of its output could be recorded (what it printed "
            "until then is recorded, from its spool); free space on the database's "
            "filesystem (`df -h`), check what the command left, then run the step again"
        ),
    )
