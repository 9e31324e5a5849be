"""`journal run probe`: one probe on one or several hosts, recorded, with its expectations."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from journal.expect import Verdict
from journal.probes.summary import summary
from journal.redact import Redactor
from journal.runbook import Host, Runbook
from journal.runs import new_run_id
from journal.service.checks import HostChecks
from journal.service.fleet import FleetRun, HostVerdict, Schedule, run_fleet
from journal.service.steps import StepWatch, connect
from journal.store import EventStore
from journal.transport import transport_for


@dataclass(frozen=True)
class ProbeRun:
    """One probe on one host: its result, or the error; the expectations it failed."""

    host: str
    result: dict[str, Any] | None
    error: str | None = None
    failed: list[Verdict] = field(default_factory=list)

    def verdict(self) -> HostVerdict:
        """How it ended, for the roll and the live table."""
        if self.error:
            return HostVerdict(False, "failed", None, self.error)
        if self.failed:
            more = f" (and {len(self.failed) - 1} more)" if len(self.failed) > 1 else ""
            return HostVerdict(
                False, "failed", None, f"expectation failed: {self.failed[0].reason}{more}"
            )
        return HostVerdict(True, "succeeded")


def run_probe(
    store: EventStore,
    runbook: Runbook,
    name: str,
    hosts: list[Host],
    echo: StepWatch,
    *,
    accept_new_host_key: bool = False,
    schedule: Schedule | None = None,
) -> FleetRun[ProbeRun]:
    """Run probe ``name`` on the hosts (all at once unless ``schedule`` says otherwise) and
    record what it found; with ``--rolling``, a host whose probe fails stops the roll."""

    def work(host: Host, cancel: threading.Event) -> ProbeRun:
        append = lambda events: store.append(runbook.name, events)  # noqa: E731
        transport = transport_for(host, accept_new_host_key=accept_new_host_key)
        error = connect(transport, host, append)
        if error:
            echo.say(f"probe {name} on {host.name}: {error}")
            return ProbeRun(host.name, None, error)
        try:
            checks = HostChecks(
                runbook,
                host,
                transport,
                host.env,
                Redactor.for_run(runbook.redact, host.env),
                append,
                cancel,
                echo.say,
            )
            result = checks.probe(name, None, new_run_id())
            if result is None:
                return ProbeRun(host.name, None, "the probe failed")
            echo.say(f"{name} on {host.name}: {summary(name, result)}")
            packages = result.get("packages") if name == "packages" else None
            verdicts = checks.probe_expectations([name], packages, None)
            return ProbeRun(host.name, result, None, [v for v in verdicts if not v.ok])
        finally:
            transport.close()

    return run_fleet(
        hosts, work, schedule, label=f"probe {name}", verdict=ProbeRun.verdict, watch=echo
    )
