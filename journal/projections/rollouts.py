"""Gated rollouts as they went: ``RolloutStarted``, ``BatchGated`` and ``RolloutFinished``
folded into one :class:`RolloutView` per rollout (its batches, each batch's gate, where it
stopped and why). A pure fold; :func:`rollouts` feeds it those three types only (the store's
type index: a journal's other events are never read)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from journal.events import BatchGated, RolloutFinished, RolloutStarted
from journal.mapper import Recorded

if TYPE_CHECKING:
    from journal.store import EventStore

#: The event types a rollout is made of.
TYPES = (RolloutStarted.type, BatchGated.type, RolloutFinished.type)
#: A rollout not finished (its recorder may still be at work, or died).
RUNNING = "running"
#: Every status a rollout is in (``RolloutFinished.status``'s, and running before it).
STATUSES = (RUNNING, "completed", "stopped", "rolled-back", "interrupted")
#: Every state a batch is in (:attr:`BatchView.state`).
BATCH_STATES = ("passed", "failed", "pending")


@dataclass
class BatchView:
    """One batch: its hosts and, once gated, whether it passed and each check."""

    number: int
    hosts: list[str]
    passed: bool | None = None
    checks: list[dict[str, Any]] = field(default_factory=list)
    ts: str | None = None
    #: the gates it went through before a `--resume` ran it again: ``{"ts", "passed",
    #: "checks"}`` each, oldest first
    earlier: list[dict[str, Any]] = field(default_factory=list)

    @property
    def state(self) -> str:
        return "pending" if self.passed is None else "passed" if self.passed else "failed"

    def figures(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if c.get("check") == "figure"]

    def failed(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if not c.get("ok")]


@dataclass
class RolloutView:
    """A rollout: its gate, batches, state (``running`` until it finished) and end."""

    rollout: str
    gate: str
    size: int
    on_fail: str
    plan_run: str | None
    started: str
    seq: int
    batches: list[BatchView]
    status: str = RUNNING
    finished: str | None = None
    batch: int | None = None
    reason: str = ""
    drained: list[str] = field(default_factory=list)
    untouched: list[str] = field(default_factory=list)
    resumed: int = 0
    #: how it ended each time before a `--resume`: ``{"ts", "status", "batch", "reason",
    #: "drained"}``, oldest first
    stops: list[dict[str, Any]] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        return [h for b in self.batches for h in b.hosts]

    @property
    def passed_hosts(self) -> list[str]:
        return [h for b in self.batches if b.passed for h in b.hosts]

    @property
    def stopped(self) -> bool:
        return self.status not in (RUNNING, "completed")

    def as_dict(self) -> dict[str, Any]:
        return {
            "rollout": self.rollout,
            "gate": self.gate,
            "size": self.size,
            "on_gate_fail": self.on_fail,
            "plan_run": self.plan_run,
            "started": self.started,
            "finished": self.finished,
            "status": self.status,
            "batch": self.batch,
            "batches": len(self.batches),
            "batches_passed": sum(1 for b in self.batches if b.passed),
            "hosts": len(self.hosts),
            "hosts_passed": len(self.passed_hosts),
            "reason": self.reason,
            "drained": self.drained,
            "untouched": self.untouched,
            "stops": self.stops,
        }


class Rollouts:
    """The fold: every rollout of a journal, in the order begun."""

    def __init__(self) -> None:
        self.by_id: dict[str, RolloutView] = {}

    def apply(self, rec: Recorded) -> None:
        ev = rec.event
        if isinstance(ev, RolloutStarted):
            known = self.by_id.get(ev.rollout)
            if known is not None:  # going on (--resume): running again from first_batch
                if known.finished is not None:
                    known.stops.append(
                        {
                            "ts": known.finished,
                            "status": known.status,
                            "batch": known.batch,
                            "reason": known.reason,
                            "drained": list(known.drained),
                        }
                    )
                known.status, known.finished, known.reason = RUNNING, None, ""
                known.drained, known.untouched = [], []
                known.resumed += 1
                for batch in known.batches[ev.first_batch - 1 :]:
                    if batch.passed is not None:
                        batch.earlier.append(
                            {"ts": batch.ts, "passed": batch.passed, "checks": batch.checks}
                        )
                    batch.passed, batch.checks, batch.ts = None, [], None
                return
            self.by_id[ev.rollout] = RolloutView(
                ev.rollout,
                ev.gate,
                ev.size,
                ev.on_fail,
                ev.plan_run,
                rec.ts,
                rec.seq,
                [BatchView(i, list(hosts)) for i, hosts in enumerate(ev.batches, 1)],
            )
        elif isinstance(ev, BatchGated):
            view = self.by_id.get(ev.rollout)
            if view is not None and 0 < ev.batch <= len(view.batches):
                batch = view.batches[ev.batch - 1]
                batch.passed, batch.checks, batch.ts = ev.passed, list(ev.checks), rec.ts
        elif isinstance(ev, RolloutFinished):
            view = self.by_id.get(ev.rollout)
            if view is not None:
                view.status, view.finished, view.batch = ev.status, rec.ts, ev.batch
                view.reason, view.drained, view.untouched = ev.reason, ev.drained, ev.untouched

    def all(self) -> list[RolloutView]:
        return list(self.by_id.values())

    def latest(self) -> RolloutView | None:
        return next(reversed(self.by_id.values()), None)


def fold(records: Iterable[Recorded]) -> Rollouts:
    found = Rollouts()
    for rec in records:
        found.apply(rec)
    return found


def rollouts(store: EventStore, journal: str) -> Rollouts:
    """Every rollout of ``journal``, read from its rollout events alone."""
    return fold(store.read(journal, types=TYPES))
