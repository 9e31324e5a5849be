"""Notifications as they went: the ``NotificationSent`` attempts folded into one delivery per
channel and thing told (a run, a finding, a plan), with its attempts and how it ended."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from journal.events import NotificationSent
from journal.mapper import Recorded


@dataclass(frozen=True)
class Attempt:
    """One try: when, how it went, how long it took."""

    seq: int
    ts: str
    attempt: int
    delivered: bool
    status: int | None
    reason: str | None
    seconds: float


@dataclass
class DeliveryView:
    """A notification to one channel about one thing, and every attempt to deliver it."""

    channel: str
    trigger: str
    url: str
    format: str
    subject: str | None
    run: str | None
    host: str | None
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def delivered(self) -> bool:
        return any(a.delivered for a in self.attempts)

    @property
    def last(self) -> Attempt:
        return self.attempts[-1]


def deliveries(records: Iterable[Recorded]) -> list[DeliveryView]:
    """Fold ``NotificationSent`` events (others are passed over) into deliveries, in the
    order each was first tried."""
    every: list[DeliveryView] = []
    current: dict[tuple[str, str, str | None, str | None], DeliveryView] = {}
    for rec in records:
        event = rec.event
        if not isinstance(event, NotificationSent):
            continue
        key = (event.channel, event.trigger, event.subject, event.run)
        view = current.get(key)
        if view is None or view.delivered or view.last.attempt >= event.attempt:
            # first told, or told anew (after a delivery, or counting from 1 again)
            view = current[key] = DeliveryView(
                event.channel,
                event.trigger,
                event.url,
                event.format,
                event.subject,
                event.run,
                event.host_name,
            )
            every.append(view)
        view.attempts.append(
            Attempt(
                rec.seq,
                rec.ts,
                event.attempt,
                event.delivered,
                event.status,
                event.reason,
                event.seconds,
            )
        )
    return every
