"""`journal run probe`: one probe on one or several hosts, recorded, with its expectations."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from journal.expect import Verdict
from journal.probes.summary import summary
from journal.redact import Redactor
from journal.runbook import Host, Runbook
from journal.service.checks import HostChecks
from journal.service.steps import Echo, connect, new_run_id, on_hosts
from journal.store import EventStore
from journal.transport import transport_for


@dataclass(frozen=True)
class ProbeRun:
    """One probe on one host: its result, or the error; the expectations it failed."""

    host: str
    result: dict[str, Any] | None
    error: str | None = None
    failed: list[Verdict] = field(default_factory=list)


def run_probe(
    store: EventStore,
    runbook: Runbook,
    name: str,
    hosts: list[Host],
    echo: Echo,
    *,
    accept_new_host_key: bool = False,
) -> list[ProbeRun]:
    """Run probe ``name`` on every host in parallel and record what it found."""

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

    return on_hosts(hosts, work)
