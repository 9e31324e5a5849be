"""`journal attach`: take over recording runs whose recorder was lost.

A step's command runs under the supervisor on its host (:mod:`journal.transport.supervisor`),
so it goes on when the journal process recording it dies or its connection drops. Attaching
records a ``StepReattached`` (this process is the run's recorder from then on), reads the
spool from where the record stands (the ``end`` of the last chunk of each stream: nothing
twice, nothing missing), and records the run's real end: its exit status, or what is known
when the host has no spool of it any more.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from journal.errors import BadInput
from journal.events import (
    CommandLaunched,
    OutputChunk,
    StepFinished,
    StepReattached,
    StepStarted,
)
from journal.projections.folder import settle
from journal.projections.stored import current_timeline
from journal.projections.timeline import StepRunView, Timeline, apply
from journal.recorder import OutputRecorder
from journal.redact import Redactor
from journal.runbook import Runbook
from journal.runs import LOST, NOT_STARTED, Outcome, StepRun
from journal.service.heartbeat import heartbeat
from journal.service.steps import (
    StepWatch,
    connect,
    named_own_stop,
    own_stop_marked,
)
from journal.store import EventStore
from journal.transport import transport_for
from journal.transport.base import Cancel, Stopper

if TYPE_CHECKING:
    from journal.notify import Notifier


def _since(started: str, ended: float | None) -> float:
    """Seconds from a recorded UTC time to ``ended`` (when the supervisor said the command
    ended), else to now: the run's duration."""
    try:
        then = datetime.fromisoformat(started.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    end = datetime.fromtimestamp(ended, UTC) if ended is not None else datetime.now(UTC)
    return max(0.0, (end - then).total_seconds())


@dataclass(frozen=True)
class Lost:
    """A run to attach to: its view and where its record stands."""

    view: StepRunView
    offsets: dict[str, int]


def attach_lost(
    store: EventStore,
    runbook: Runbook,
    hosts: list[str],
    echo: StepWatch,
    *,
    accept_new_host_key: bool = False,
    notifier: Notifier | None = None,
) -> list[StepRun]:
    """Before anything runs on ``hosts``: attach to their lost runs (a command that may still
    be running there is waited for and recorded to its end, so that the next step never runs
    beside it)."""
    names = set(hosts)
    lost = [item for item in lost_runs(store, runbook, [], strict=False) if item.view.host in names]
    if not lost:
        return []
    echo.say(
        f"{len(lost)} run(s) on these hosts lost their recorder: recording how they ended "
        "before anything else runs there"
    )
    return attach(
        store, runbook, lost, echo, accept_new_host_key=accept_new_host_key, notifier=notifier
    )


def lost_runs(
    store: EventStore, runbook: Runbook, wanted: list[str], *, strict: bool = True
) -> list[Lost]:
    """The runs named in ``wanted`` (every lost run when it is empty), checked: BadInput for
    a run not in the journal, one that ended, one whose recorder is alive, or (``strict``) one
    on a host the runbook does not have or recorded before runs could be attached to."""
    journal = runbook.name
    if not wanted:
        views = [
            v
            for v in _unfinished(store, journal)
            if v.status in (LOST, NOT_STARTED) and not v.imported
        ]
        return _checked(store, runbook, views, strict)
    timeline = current_timeline(store, journal)
    views = []
    for name in wanted:
        matches = [v for run, v in timeline.runs.items() if run.startswith(name)]
        if len(matches) != 1:
            raise BadInput(
                f"no step run {name!r} in journal {journal!r}"
                if not matches
                else f"{name!r} names {len(matches)} step runs of {journal!r}: give more of it"
            )
        view = matches[0]
        if view.status == "running":
            raise BadInput(
                f"run {view.run_id} ({view.step} on {view.host}) is being recorded by "
                f"pid {view.pid} on {view.machine}: its heartbeat is fresh"
            )
        if view.status not in (LOST, NOT_STARTED):
            raise BadInput(
                f"run {view.run_id} ({view.step} on {view.host}) has ended: {view.status}"
            )
        views.append(view)
    return _checked(store, runbook, views, strict)


def _unfinished(store: EventStore, journal: str) -> list[StepRunView]:
    """The journal's runs without an end, each folded from its own start and reattach events
    and settled (running while its recorder's heartbeat is fresh, else lost): the start and
    end events are all that is read, however long the journal."""
    timeline = Timeline(journal)
    for run in store.unfinished_runs(journal):
        kinds = [StepStarted.type, CommandLaunched.type, StepReattached.type, StepFinished.type]
        for rec in store.read(journal, run_id=run, types=kinds):
            apply(rec.event, rec, timeline)
    return list(settle(timeline, store.liveness()).runs.values())


def _checked(
    store: EventStore, runbook: Runbook, views: list[StepRunView], strict: bool
) -> list[Lost]:
    found = []
    for view in views:
        if view.status == NOT_STARTED:
            found.append(Lost(view, {}))  # nothing ran on its host: nothing to reach there
            continue
        if view.host not in runbook.hosts:
            if not strict:
                continue
            raise BadInput(
                f"run {view.run_id} ran on host {view.host!r}, which the runbook "
                f"{runbook.path} does not list: add it to reach the host again"
            )
        try:
            found.append(Lost(view, _offsets(store, runbook.name, view)))
        except BadInput:
            if strict:
                raise  # a run recorded before journal had a supervisor: nothing to attach to
    return found


def _offsets(store: EventStore, journal: str, view: StepRunView) -> dict[str, int]:
    """Bytes of each stream the record holds (the last chunk's ``end``); BadInput for a run
    recorded by a journal too old to say."""
    ends: dict[str, int] = {}
    for rec in store.read(journal, run_id=view.run_id, types=[OutputChunk.type]):
        chunk = rec.event
        if not isinstance(chunk, OutputChunk):
            continue
        if chunk.end is None:
            raise BadInput(
                f"run {view.run_id} was recorded by an older journal that did not note where "
                "each chunk ends in the command's output, so it cannot be attached to"
            )
        ends[chunk.stream] = chunk.end
    return ends


def attach(
    store: EventStore,
    runbook: Runbook,
    lost: list[Lost],
    echo: StepWatch,
    cancel: threading.Event | None = None,
    *,
    accept_new_host_key: bool = False,
    notifier: Notifier | None = None,
) -> list[StepRun]:
    """Record the rest of each lost run and how it ended, one after the other (``notifier``
    hears each end)."""
    cancel = cancel or Cancel()
    done = []
    with heartbeat(store, runbook.name):
        for item in lost:
            done.append(_attach(store, runbook, item, echo, cancel, accept_new_host_key))
            if notifier is not None:
                notifier.run_ended(done[-1])
            if cancel.is_set():
                break
    return done


def _attach(
    store: EventStore,
    runbook: Runbook,
    item: Lost,
    echo: StepWatch,
    cancel: threading.Event,
    accept_new_host_key: bool,
) -> StepRun:
    journal, view = runbook.name, item.view
    if view.status == NOT_STARTED:
        return _not_started(store, journal, view, echo)
    host = runbook.hosts[view.host]
    step = next((s for s in runbook.steps if s.name == view.step), None)
    env = {**host.env, **(step.env if step else {})}
    redactor = Redactor.for_run(runbook.redact, env)
    transport = transport_for(host, accept_new_host_key=accept_new_host_key)
    error = connect(transport, host, lambda events: store.append(journal, events))
    if error:
        echo.say(f"{view.step} on {view.host}: {error}")
        return StepRun(view.run_id, view.step, view.host, Outcome("detached", None, 0.0))
    store.append(
        journal,
        [
            StepReattached(
                run=view.run_id,
                host_name=view.host,
                pid=os.getpid(),
                machine=socket.gethostname(),
                offsets=dict(item.offsets),
            )
        ],
    )
    echo.say(f"attached to {view.step} on {view.host} (run {view.run_id})")
    # journal stopped it itself for a full disk under its database: the host says so
    own_stop = own_stop_marked(transport, view.run_id)
    recorder = OutputRecorder(
        lambda chunks: store.append(journal, chunks),
        view.run_id,
        view.host,
        redactor,
        echo.for_host(view.host),
        offsets=dict(item.offsets),
    )
    started = time.monotonic()
    try:
        # Ctrl-C here stops the watching, not the command: it stays attachable
        outcome = transport.follow(
            view.run_id, recorder, Stopper(cancel, None), item.offsets, detach=True
        )
    finally:
        recorder.close()
        echo.flush_host(view.host)
        transport.close()
    if outcome.status == "detached":
        echo.say(f"{view.step} on {view.host}: {outcome.reason}")
        return StepRun(view.run_id, view.step, view.host, outcome)
    if outcome.status == "gone":
        outcome = Outcome(
            "failed",
            None,
            time.monotonic() - started,
            None,
            f"its recorder was lost, and {view.host} has no spool of the run any more "
            "(removed, or the host was rebuilt): how the command ended is unknown",
        )
    else:
        outcome = Outcome(
            outcome.status,
            outcome.exit_code,
            _since(view.started, outcome.ended),
            outcome.signal,
            outcome.reason or "recorded to its end by `journal attach` after its recorder was lost",
        )
        if own_stop:
            outcome = named_own_stop(outcome)
    store.append(
        journal,
        [
            StepFinished(
                run=view.run_id,
                host_name=view.host,
                status=outcome.status,
                exit_code=outcome.exit_code,
                duration=round(outcome.duration, 6),
                signal=outcome.signal,
                reason=redactor.text(outcome.reason, "reason")[0] if outcome.reason else None,
            )
        ],
    )
    return StepRun(view.run_id, view.step, view.host, outcome)


def _not_started(store: EventStore, journal: str, view: StepRunView, echo: StepWatch) -> StepRun:
    """Record the end of a run whose recorder died before it launched the command: nothing
    of it ran on the host, so there is nothing to reach there."""
    outcome = Outcome(NOT_STARTED, None, 0.0, None, view.reason)
    store.append(
        journal,
        [
            StepFinished(
                run=view.run_id,
                host_name=view.host,
                status=NOT_STARTED,
                exit_code=None,
                duration=0.0,
                reason=view.reason,
            )
        ],
    )
    echo.say(f"{view.step} on {view.host} (run {view.run_id}): not started: {view.reason}")
    return StepRun(view.run_id, view.step, view.host, outcome)
