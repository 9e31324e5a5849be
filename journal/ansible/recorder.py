"""An Ansible playbook recorded into a journal, task by task and host by host (journal's
callback plugin, :mod:`journal.ansible.callback.journal`, hands Ansible's callbacks here).

Each task on each host is a step run (``StepStarted.ansible`` holds the playbook, play, task
path, module, serial batch, and Ansible's changed / failed / skipped / unreachable), its
stdout, stderr and ``msg`` recorded byte-exact through the output recorder (redacted), its
``rc`` as the exit status. A task that changes packages (:func:`journal.ansible.tasks.
changes_packages`) gets package snapshots of the env it names on each host, before (taken
when the task starts, before Ansible's workers run it) and after (taken before the next task
starts, or at the playbook's end); ``journal_probe`` runs a probe after it. The detectors judge
these runs like any other when the journal is read.

Nothing here slows Ansible's workers: the events of each run go into a bounded queue that one
writer thread appends to the store; the snapshots, which must come before and after the task,
run on every host of the batch at once over journal's own connections. A journal that cannot
be written never fails the playbook: what could not be recorded is counted and said at the end.
"""

from __future__ import annotations

import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from journal.ansible.tasks import (
    changes_packages,
    command_of,
    command_ran,
    printed,
    probe_of,
    python_of,
    step_name,
)
from journal.events import Event, JournalOpened, OutputChunk, StepFinished, StepStarted
from journal.recorder import OutputRecorder
from journal.redact import Redactor
from journal.runbook import Host, Runbook, load, parse
from journal.runs import new_run_id

#: Batches of events the writer may lag behind by before a put waits (then gives up).
QUEUE_BATCHES = 10_000
#: How long a put waits for room before the batch is counted as lost.
PUT_WAIT_S = 30.0
#: Runs' events appended in one transaction at most.
WRITE_BATCH = 64
#: Hosts snapshotted at once.
SNAPSHOT_THREADS = 32


class Writer:
    """One thread appending queued batches of events to the store, in order; what could not
    be written is counted (the playbook never fails for it)."""

    def __init__(self, append: Callable[[list[Event]], None]) -> None:
        self._append = append
        self._queue: queue.Queue[list[Event] | None] = queue.Queue(QUEUE_BATCHES)
        self.lost_events = 0
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._run, name="journal-writer", daemon=True)
        self._thread.start()

    def put(self, events: list[Event]) -> None:
        if not events:
            return
        try:
            self._queue.put(events, timeout=PUT_WAIT_S)
        except queue.Full:
            self.lost_events += len(events)
            self._error("the journal's writer fell behind (its queue stayed full)")

    def _error(self, text: str) -> None:
        if len(self.errors) < 5 and text not in self.errors:
            self.errors.append(text)

    def _run(self) -> None:
        done = False
        while not done:
            first = self._queue.get()
            batch: list[Event] = []
            items = [first]
            while len(items) < WRITE_BATCH:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            for item in items:
                if item is None:
                    done = True
                else:
                    batch.extend(item)
            if batch:
                try:
                    self._append(batch)
                except Exception as exc:  # noqa: BLE001 - the playbook must go on
                    self.lost_events += len(batch)
                    self._error(f"{type(exc).__name__}: {exc}")

    def close(self, wait_s: float = 120.0) -> None:
        try:
            self._queue.put(None, timeout=wait_s)
        except queue.Full:
            return
        self._thread.join(wait_s)


@dataclass
class HostSide:
    """What the recorder keeps of one host during the playbook."""

    host: Host
    checks: Any = None  # a connected HostChecks, once a snapshot or probe needed one
    transport: Any = None
    failed: str | None = None  # why journal could not connect to it


@dataclass
class Pending:
    """A task's run on one host, from its start to its after-snapshot."""

    run: str
    python: str
    started: float = 0.0
    before: list[Event] = field(default_factory=list)
    done: bool = False
    probe: str | None = None


def _open_runbook(journal: str | None, runbook: str | None, playbook: str) -> Runbook:
    """The runbook ``JOURNAL_RUNBOOK`` names (or ``./runbook.toml``), else one made of the
    journal's name alone (``JOURNAL_NAME``, or the playbook's file name)."""
    path = Path(runbook) if runbook else Path("runbook.toml")
    if runbook or path.is_file():
        loaded = load(path)
        return replace(loaded, name=journal) if journal else loaded
    name = journal or Path(playbook).stem or "ansible"
    made = parse(f'[journal]\nname = "{name}"\n\n[hosts.placeholder]\nssh = "local"\n', path)
    return replace(made, hosts={}, path=Path(""))


class PlaybookRecorder:
    """The journal's side of a playbook run (see the module docstring)."""

    def __init__(self, playbook: str, env: Mapping[str, str] | None = None) -> None:
        from journal.store import EventStore

        env = os.environ if env is None else env
        self.runbook = _open_runbook(env.get("JOURNAL_NAME"), env.get("JOURNAL_RUNBOOK"), playbook)
        db = env.get("JOURNAL_DB") or str(
            (self.runbook.path.parent if str(self.runbook.path) else Path(".")) / "journal.db"
        )
        self.db = db
        self.store = EventStore(db)
        self.store.know_secrets(self.runbook.redact)
        self.journal = self.runbook.name
        self.playbook = playbook
        self.plan_run = new_run_id()
        self.writer = Writer(lambda events: self.store.append(self.journal, events))
        self.hosts: dict[str, HostSide] = {}
        self.pending: dict[str, Pending] = {}  # host -> the current task's run there
        self.task: dict[str, Any] | None = None
        self.play: str | None = None
        self.batch = 0
        self.runs = 0
        self._machine = socket.gethostname()
        #: the journal's latest JournalOpened (read once, kept as written): a play start
        #: compares its hosts and groups with it
        self._opened: JournalOpened | None = None
        self._opened_read = False

    # -- the journal --------------------------------------------------------------------------

    def open(self, hosts: Mapping[str, str], groups: Mapping[str, list[str]]) -> None:
        """Record ``JournalOpened`` when the journal is new or its hosts or the inventory's
        groups changed (a runbook's own groups, where it has some, stay the ones compared)."""
        if not self._opened_read:
            for rec in self.store.read(self.journal, types=[JournalOpened.type]):
                if isinstance(rec.event, JournalOpened):
                    self._opened = rec.event
            self._opened_read = True
        last = self._opened
        known = dict(last.hosts) if isinstance(last, JournalOpened) else {}
        merged = {**known, **{h: t for h, t in hosts.items() if h not in known}}
        grouped = {g: list(h) for g, h in groups.items()}
        if self.runbook.groups:
            grouped = {}
        was = dict(last.groups) if isinstance(last, JournalOpened) else {}
        if isinstance(last, JournalOpened) and merged == known and grouped == was:
            return
        plan = list(last.plan) if isinstance(last, JournalOpened) else self.runbook.plan
        book = str(self.runbook.path) if str(self.runbook.path) else ""
        self._opened = JournalOpened(self.journal, book, merged, plan, grouped)
        self.writer.put([self._opened])

    # -- plays and tasks ----------------------------------------------------------------------

    def play_started(
        self,
        name: str,
        hosts: Mapping[str, Mapping[str, Any]],
        groups: Mapping[str, list[str]] | None = None,
    ) -> None:
        """A play (or its next ``serial`` batch) starts on ``hosts`` (name -> host vars);
        ``groups``: the inventory's groups (name -> hosts)."""
        self.finish_task()
        self.batch = self.batch + 1 if name == self.play else 1
        self.play = name
        for host, hv in hosts.items():
            if host not in self.hosts:
                self.hosts[host] = HostSide(self._host(host, hv))
        self.open({h: self.hosts[h].host.ssh for h in hosts}, groups or {})

    def _host(self, name: str, hv: Mapping[str, Any]) -> Host:
        """The host as journal connects to it: the runbook's, else from the inventory."""
        if name in self.runbook.hosts:
            return self.runbook.hosts[name]
        if hv.get("ansible_connection") == "local":
            return Host(name, "local", str(hv.get("journal_python") or "python3"))
        address = str(hv.get("ansible_host") or name)
        user = hv.get("ansible_user") or hv.get("ansible_ssh_user")
        port = hv.get("ansible_port") or hv.get("ansible_ssh_port")
        target = (f"{user}@" if user else "") + address + (f":{port}" if port else "")
        return Host(name, target, str(hv.get("journal_python") or "python3"))

    def task_started(
        self,
        task: Mapping[str, Any],
        hosts: Mapping[str, Mapping[str, Any]],
        rendered: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """A task starts on ``hosts`` (name -> host vars): the previous task's after-work
        is done first, then (a task that changes packages) each host's before-snapshot.
        ``rendered``: per host, the task's arguments with their templates rendered."""
        self.finish_task()
        self.task = dict(task)
        module, args, tags = task["module"], task["args"], task["tags"]
        snap = changes_packages(module, args, tags)
        probe = probe_of(task.get("vars") or {}, tags)
        for host, hv in hosts.items():
            if host not in self.hosts:
                self.hosts[host] = HostSide(self._host(host, hv))
            own = (rendered or {}).get(host, args)
            python = python_of(module, own, hv) if snap else ""
            self.pending[host] = Pending(new_run_id(), python, probe=probe)
        if snap:
            self._on_hosts(list(hosts), lambda host: self._snapshot(host, "before"))

    def runner_started(self, host: str) -> None:
        run = self.pending.get(host)
        if run is not None:
            run.started = time.monotonic()

    def result(
        self, host: str, status: str, result: Mapping[str, Any], ignore_errors: bool = False
    ) -> None:
        """A task's result on ``host``: ``ok``, ``failed``, ``skipped`` or ``unreachable``."""
        task = self.task or {}
        run = self.pending.get(host)
        if run is None or run.done:  # a result for a host not announced (a handler, ...)
            run = Pending(new_run_id(), "")
            self.pending[host] = run
        run.done = True
        side = self.hosts.get(host) or HostSide(Host(host, host))
        module, args = task.get("module", "?"), task.get("args", {})
        command = (
            command_ran(module, args, result) if status != "skipped" else command_of(module, args)
        )
        ansible = {
            "playbook": self.playbook,
            "play": self.play,
            "task": task.get("name") or module,
            "path": task.get("path"),
            "module": module,
            "batch": self.batch,
            "changed": bool(result.get("changed")),
            "failed": status == "failed",
            "skipped": status == "skipped",
            "unreachable": status == "unreachable",
        }
        if ignore_errors:
            ansible["ignore_errors"] = True
        started = StepStarted(
            run.run,
            step_name(task.get("name") or "", module),
            host,
            side.host.ssh,
            command,
            pid=os.getpid(),
            machine=self._machine,
            plan_run=self.plan_run,
            ansible=ansible,
        )
        events: list[Event] = [started, *run.before]
        run.before = []
        out, err = printed(result)
        chunks: list[OutputChunk] = []
        recorder = OutputRecorder(
            chunks.extend, run.run, host, Redactor.for_run(self.runbook.redact)
        )
        for stream, text in (("stdout", out), ("stderr", err)):
            if text:
                recorder.feed(stream, text.encode("utf-8", "surrogateescape"))
        recorder.close()
        events += chunks
        rc = result.get("rc")
        code = rc if isinstance(rc, int) and not isinstance(rc, bool) else None
        if status == "ok":
            outcome, reason = "succeeded", None
            code = 0 if code is None else code
        elif status == "skipped":
            outcome, reason = "skipped", str(result.get("skip_reason") or "skipped by Ansible")
        elif status == "unreachable":
            outcome = "failed"
            reason = f"unreachable: {str(result.get('msg') or '').strip()}"[:2000]
        else:
            outcome = "failed"
            reason = str(result.get("msg") or "failed").strip().splitlines()[0][:2000]
        duration = round(time.monotonic() - run.started, 3) if run.started else 0.0
        events.append(StepFinished(run.run, host, outcome, code, duration, None, reason))
        self.writer.put(events)
        self.runs += 1
        if status in ("skipped", "unreachable"):
            run.python, run.probe = "", None  # nothing ran there: nothing to take after it

    def finish_task(self) -> None:
        """The after-work of the task that ran: each host's after-snapshot and probe."""
        wanted = [h for h, r in self.pending.items() if r.done and (r.python or r.probe)]
        if wanted:
            self._on_hosts(wanted, self._after)
        for run in self.pending.values():  # a host with no result (a failure before) skips
            if run.before:
                self.writer.put(run.before)  # recorded, if orphaned
        self.pending = {}

    def _after(self, host: str) -> None:
        run = self.pending[host]
        if run.python:
            self._snapshot(host, "after")
        if run.probe:
            checks = self._checks(host, run.python)
            if checks is not None and run.probe in self.runbook.probes:
                events: list[Event] = []
                checks.append = events.extend
                checks.probe(run.probe, run.run, run.run)
                self.writer.put(events)

    # -- snapshots over journal's own connection ----------------------------------------------

    def _on_hosts(self, hosts: list[str], work: Callable[[str], None]) -> None:
        with ThreadPoolExecutor(min(SNAPSHOT_THREADS, len(hosts))) as pool:
            for future in [pool.submit(work, h) for h in hosts]:
                try:
                    future.result()
                except Exception as exc:  # noqa: BLE001 - a snapshot never fails the playbook
                    self.writer._error(f"a snapshot failed: {type(exc).__name__}: {exc}")

    def _checks(self, host: str, python: str):  # type: ignore[no-untyped-def]
        from journal.service.checks import HostChecks
        from journal.service.steps import connect
        from journal.transport import transport_for

        side = self.hosts[host]
        if side.failed is not None:
            return None
        if side.checks is None:
            transport = transport_for(side.host)
            error = connect(transport, side.host, self.writer.put)
            if error:
                side.failed = error
                return None
            side.transport = transport
            side.checks = HostChecks(
                self.runbook,
                side.host,
                transport,
                side.host.env,
                Redactor.for_run(self.runbook.redact, side.host.env),
                self.writer.put,
                threading.Event(),
            )
        if python and side.checks.host.python != python:
            side.checks.host = replace(side.checks.host, python=python)
            side.checks.last_snapshot = None
        return side.checks

    def _snapshot(self, host: str, phase: str) -> None:
        run = self.pending[host]
        checks = self._checks(host, run.python)
        events: list[Event] = []
        if checks is None:
            from journal.events import ProbeRecorded

            why = self.hosts[host].failed or "no connection"
            events.append(ProbeRecorded(host, "packages", None, 0.0, why, run.run, phase))
        else:
            checks.append = events.extend
            checks.snapshot(phase, run.run, run.run)
        if phase == "before":
            run.before = events  # written after the run's StepStarted
        else:
            self.writer.put(events)

    # -- the end ------------------------------------------------------------------------------

    def close(self) -> tuple[int, int, list[str]]:
        """Finish the last task, write everything, close the connections; the runs recorded,
        the events that could not be, and why."""
        self.finish_task()
        self.writer.close()
        for side in self.hosts.values():
            if side.transport is not None:
                try:
                    side.transport.close()
                except Exception:  # noqa: BLE001, S110 - closing is best effort
                    pass
        self.store.close()
        return self.runs, self.writer.lost_events, list(self.writer.errors)
