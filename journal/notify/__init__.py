"""Telling people when it matters: the runbook's ``[notify.NAME]`` webhooks, told when a step
fails, a finding is made, the plan finishes, hosts drift or a rollback runs.

The services tell a :class:`Notifier` what happened (it does nothing by default);
:class:`Webhooks` is the one that posts, through a background :class:`~journal.notify.sender.
Sender`, so that a step never waits for a receiver, and records every attempt.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from journal.notify.payload import Notice, body
from journal.notify.sender import Delivery, Sender, encode
from journal.redact import Redactor
from journal.runs import DETACHED, StepRun

if TYPE_CHECKING:
    from journal.pitfalls.base import Finding
    from journal.runbook import Runbook
    from journal.store import EventStore

__all__ = ["Notice", "Notifier", "Webhooks"]


class Notifier:
    """Hears what may be worth telling people. Called from the hosts' threads, so an
    implementation must be thread-safe and must not block. These do nothing."""

    def run_ended(self, run: StepRun, rollback: dict[str, Any] | None = None) -> None:
        """A step run ended (``rollback``: the target of a rollback run)."""

    def findings(self, found: list[Finding]) -> None:
        """The verdict at a step's end: the open findings about the runs that just ended."""

    def plan_finished(
        self, code: int, steps: list[str], hosts: list[str], failed: list[str], plan_run: str
    ) -> None:
        """`journal run plan` ended with exit status ``code``; ``failed``: ``step on host``."""

    def drifted(self, groups: list[str], lines: list[str]) -> None:
        """`journal drift` found hosts that differ from their group's majority."""

    def gate_failed(self, finished: Any) -> None:
        """A gated rollout stopped (a ``RolloutFinished`` other than completed)."""

    def close(self) -> None:
        """The command ends: wait a bounded time for what is still being sent."""


class Webhooks(Notifier):
    """Posts to the runbook's ``[notify.NAME]`` channels whatever each asks for, and records
    every attempt in the journal (``NotificationSent``)."""

    def __init__(
        self,
        store: EventStore,
        runbook: Runbook,
        base_url: str | None = None,
        sender: Sender | None = None,
    ) -> None:
        self.journal = runbook.name
        self.store = store
        self.specs = list(runbook.notify.values())
        self.base_url = base_url or runbook.base_url
        self.sender = sender or Sender(lambda event: store.append(self.journal, [event]))
        # what a body says went through the runbook's redaction when recorded (a reason,
        # a title), but a run's outcome is told as it ended: masked here the same way
        self.redactor = Redactor.for_run(runbook.redact)

    def tell(self, notice: Notice) -> int:
        """Send ``notice`` to every channel that wants it; how many do."""
        at = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        count = 0
        for spec in self.specs:
            trigger = notice.trigger
            if trigger != "test" and not spec.wants(trigger, notice.host, notice.severity):
                continue
            self.sender.send(
                Delivery(
                    spec,
                    trigger,
                    encode(self.redactor.value(body(notice, spec.format, at), "notification")),
                    notice.subject,
                    notice.run,
                    notice.host,
                )
            )
            count += 1
        return count

    def run_ended(self, run: StepRun, rollback: dict[str, Any] | None = None) -> None:
        from journal.notify.notices import rollback_notice, step_failed

        if not self.specs:
            return
        if rollback is not None:
            self.tell(rollback_notice(self.journal, run, rollback, self.base_url))
        if not run.outcome.ok and run.outcome.status != DETACHED:
            self.tell(step_failed(self.journal, run, self.base_url))

    def findings(self, found: list[Finding]) -> None:
        from journal.notify.notices import finding_notice

        for one in found if self.specs else []:
            self.tell(finding_notice(self.journal, one, self.base_url))

    def plan_finished(
        self, code: int, steps: list[str], hosts: list[str], failed: list[str], plan_run: str
    ) -> None:
        from journal.notify.notices import plan_notice

        if self.specs:
            self.tell(
                plan_notice(self.journal, code, steps, hosts, failed, plan_run, self.base_url)
            )

    def drifted(self, groups: list[str], lines: list[str]) -> None:
        from journal.notify.notices import drift_notice

        if not self.specs:
            return
        notice = drift_notice(self.journal, groups, lines, self.base_url)
        if notice.subject != self._last_drift():  # the same drift is told once
            self.tell(notice)

    def gate_failed(self, finished: Any) -> None:
        from journal.notify.notices import gate_notice

        if self.specs:
            self.tell(gate_notice(self.journal, finished, self.base_url))

    def _last_drift(self) -> str | None:
        """The subject of the latest drift notification delivered."""
        from journal.events import NotificationSent

        last = None
        for rec in self.store.read(self.journal, types=[NotificationSent.type]):
            event = rec.event
            if isinstance(event, NotificationSent) and event.trigger == "drift":
                last = event.subject if event.delivered else last
        return last

    def close(self, wait_s: float | None = None) -> None:
        self.sender.close(wait_s)
