"""What runs around a step on a host: package snapshots, probes and expectations, recorded."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from journal.events import Event, ExpectationChecked, PackagesSnapshotted, ProbeRecorded
from journal.expect import Facts, Verdict, check_all
from journal.probes import ProbeSpec
from journal.probes.runner import CaptureSink, ProbeOutcome, probe_outcome
from journal.probes.summary import summary
from journal.redact import MASK, Redactor, secret_value
from journal.runbook import Host, Runbook
from journal.transport import Transport

Append = Callable[[list[Event]], None]


@dataclass
class HostChecks:
    """Runs and records snapshots, probes and expectations on one connected host."""

    runbook: Runbook
    host: Host
    transport: Transport
    env: Mapping[str, str]
    redactor: Redactor
    append: Append
    cancel: threading.Event
    say: Callable[[str], None] = lambda text: None
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the target python's own path, as the last package snapshot reported it
    executable: str | None = None
    #: the env's fingerprint and packages at the last snapshot taken here (reused while the
    #: fingerprint holds)
    last_snapshot: tuple[str, dict[str, Any]] | None = None
    #: why the last package snapshot taken here failed (None once one succeeds)
    failure: str | None = None

    def _probe(self, spec: ProbeSpec, run_id: str) -> ProbeOutcome:
        """Run ``spec`` with the host's target python, straight on the transport's channel
        (no supervisor); its result or why there is none, never raising for a failing probe."""
        sink = CaptureSink()
        started = time.monotonic()
        command = spec.command(self.host.python)
        outcome = self.transport.probe(
            command, self.env, None, spec.timeout, sink, self.cancel, run_id=f"{run_id}-probe"
        )
        seconds = round(time.monotonic() - started, 4)
        return probe_outcome(spec, outcome, sink, self.redactor, seconds)

    def snapshot(self, phase: str, run: str | None, run_id: str) -> dict[str, Any] | None:
        """Record every package of the target python (``PackagesSnapshotted``); None if the
        packages probe failed (recorded as a failed ``ProbeRecorded`` of that ``phase``, which
        every view shows and `snapshot-failed` judges). When the
        env's fingerprint is the one of this host's previous snapshot, the probe reads no
        distribution and that snapshot's packages are recorded again."""
        spec = self.runbook.probes["packages"]
        if self.last_snapshot is not None and spec.builtin:
            spec = replace(spec, args=(self.last_snapshot[0],))
        outcome = self._probe(spec, run_id)
        if outcome.result is not None and outcome.result.get("unchanged") and self.last_snapshot:
            outcome.result["packages"] = self.last_snapshot[1]
        if outcome.result is None or not isinstance(outcome.result.get("packages"), dict):
            error = outcome.error or "the packages probe returned no packages"
            self.failure = error
            self.append(
                [
                    ProbeRecorded(
                        self.host.name, "packages", None, outcome.seconds, error, run, phase
                    )
                ]
            )
            self.say(f"packages snapshot ({phase}) on {self.host.name} failed: {error}")
            return None
        self.failure = None
        result = outcome.result
        if isinstance(result.get("fingerprint"), str):
            self.last_snapshot = (result["fingerprint"], result["packages"])
        self.executable = str(result.get("executable") or self.host.python)
        self.append(
            [
                PackagesSnapshotted(
                    host_name=self.host.name,
                    phase=phase,
                    python=self.executable,
                    packages=result["packages"],
                    seconds=outcome.seconds,
                    run=run,
                )
            ]
        )
        return result["packages"]

    def probe(self, name: str, run: str | None, run_id: str) -> dict[str, Any] | None:
        """Run and record one probe; its result, or None when it failed."""
        spec = self.runbook.probes[name]
        if name == "packages":
            packages = self.snapshot("probe" if run is None else "after", run, run_id)
            if packages is None:
                return None
            return {"executable": self.executable, "packages": packages}
        outcome = self._probe(spec, run_id)
        self.append(
            [
                ProbeRecorded(
                    self.host.name,
                    name,
                    outcome.result,
                    outcome.seconds,
                    outcome.error,
                    run,
                    "probe" if run is None else "after",
                )
            ]
        )
        if outcome.result is not None:
            self.results[name] = outcome.result
            if run is not None:
                self.say(f"{name} on {self.host.name}: {summary(name, outcome.result)}")
        else:
            self.say(f"probe {name} on {self.host.name} failed: {outcome.error}")
        return outcome.result

    def expect(
        self,
        expect: Mapping[str, Any],
        packages: Mapping[str, Any] | None,
        run: str | None,
        probe: str | None = None,
    ) -> list[Verdict]:
        """Check and record an ``expect`` table against this host's probe results."""
        if not expect:
            return []
        facts = Facts(
            probes=dict(self.results), packages=None if packages is None else dict(packages)
        )
        verdicts = [_hidden(v) for v in check_all(dict(expect), facts)]
        self.append(
            [
                ExpectationChecked(
                    host_name=self.host.name,
                    key=v.key,
                    expected=v.expected,
                    actual=v.actual,
                    verdict="pass" if v.ok else "fail",
                    reason=v.reason,
                    probe=probe,
                    run=run,
                )
                for v in verdicts
            ]
        )
        for v in verdicts:
            mark = "ok  " if v.ok else "FAIL"
            actual = v.actual if isinstance(v.actual, str) else json.dumps(v.actual)
            detail = f"({actual})" if v.ok else f"- {v.reason}"
            self.say(f"[{mark}] expect {v.key} = {v.expected!r} on {self.host.name} {detail}")
        return verdicts

    def probe_expectations(
        self, names: list[str], packages: Mapping[str, Any] | None, run: str | None
    ) -> list[Verdict]:
        """The ``expect`` tables of the probes that ran (``[probes.NAME] expect``)."""
        verdicts: list[Verdict] = []
        for name in names:
            spec = self.runbook.probes[name]
            if spec.expect and (name in self.results or name == "packages"):
                verdicts += self.expect(spec.expect, packages, run, probe=name)
        return verdicts


def _hidden(verdict: Verdict) -> Verdict:
    """``verdict`` with what it expected and found masked when its key names a secret
    (``env.HF_TOKEN``, ``db.password``): neither the runbook's expected value nor the value
    found is recorded, nor said in the reason (which is kept when nothing was found). A
    distribution's version (``packages.tiktoken``) is data, whatever the name."""
    path = verdict.key.rsplit(":", 1)[-1]
    actual = verdict.actual if isinstance(verdict.actual, str) else ""
    if path.startswith("packages.") or not secret_value(path.rsplit(".", 1)[-1], actual):
        return verdict
    if not isinstance(verdict.actual, str):
        return replace(verdict, expected=MASK)  # not found, unavailable: no value in the reason
    reason = (
        None if verdict.ok else f"{verdict.key} is not the value expected (a secret: not shown)"
    )
    return replace(verdict, expected=MASK, actual=MASK, reason=reason)
