"""Posting notifications without ever holding up a step: a background thread per channel (so
a dead receiver delays no other) takes them from a bounded queue and posts each with a timeout,
trying again after a back-off when the receiver fails (a refused connection, a timeout, a 5xx,
a 429), and records every attempt as a
``NotificationSent`` event: delivered, or failed with the reason.

The process waits for what is still queued when it ends, but at most ``wait_s``
(:meth:`Sender.close`); whatever is left then is recorded as not delivered, saying so.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from journal.events import NotificationSent
from journal.runbook.notify import NotifySpec

#: Seconds one attempt may take (connect, send, answer): env ``JOURNAL_NOTIFY_TIMEOUT_S``.
TIMEOUT_S = 4.0
#: Attempts per notification, and the back-off before the second, doubled each time after.
ATTEMPTS = 3
BACKOFF_S = 0.5
#: The most the process waits at its end for notifications not yet sent: env
#: ``JOURNAL_NOTIFY_WAIT_S``.
WAIT_S = 5.0
#: Notifications queued at most (per channel); more are recorded as dropped, not sent.
QUEUE_SIZE = 100

Record = Callable[[NotificationSent], None]


def _seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value >= 0 and value == value else default


@dataclass(frozen=True)
class Delivery:
    """A body to post to a channel, and what it is about (for the record)."""

    spec: NotifySpec
    trigger: str
    body: bytes
    subject: str | None = None
    run: str | None = None
    host: str | None = None


class Sender:
    """The background thread that posts :class:`Delivery` items and records every attempt."""

    def __init__(
        self,
        record: Record,
        *,
        timeout_s: float | None = None,
        attempts: int = ATTEMPTS,
        backoff_s: float = BACKOFF_S,
    ) -> None:
        self._record = record
        self.timeout_s = (
            _seconds("JOURNAL_NOTIFY_TIMEOUT_S", TIMEOUT_S) if timeout_s is None else timeout_s
        )
        self.attempts = attempts
        self.backoff_s = backoff_s
        self._lanes: dict[str, tuple[queue.Queue[Delivery | None], threading.Thread]] = {}
        self._lock = threading.Lock()
        self._pending: list[Delivery] = []  # queued or being posted, not yet settled
        self._tries: dict[int, int] = {}  # attempts made, by id of a pending delivery
        self._given_up = threading.Event()

    def send(self, delivery: Delivery) -> None:
        """Queue ``delivery``; never blocks (a full queue records it as dropped)."""
        if self._given_up.is_set():
            return
        if delivery.spec.url is None:
            self._note(delivery, 1, 0.0, None, f"${delivery.spec.url_env} is not set")
            return
        with self._lock:
            lane = self._lanes.get(delivery.spec.name)
            if lane is None:
                waiting: queue.Queue[Delivery | None] = queue.Queue(QUEUE_SIZE)
                thread = threading.Thread(
                    target=self._work,
                    args=(waiting,),
                    name=f"journal-notify-{delivery.spec.name}",
                    daemon=True,
                )
                lane = self._lanes[delivery.spec.name] = (waiting, thread)
                thread.start()
            self._pending.append(delivery)
        try:
            lane[0].put_nowait(delivery)
        except queue.Full:
            self._settle(delivery)
            self._note(delivery, 1, 0.0, None, f"not sent: {QUEUE_SIZE} notifications queued")

    def close(self, wait_s: float | None = None) -> None:
        """Wait (at most ``wait_s``) for what is queued to be sent; record the rest as not
        delivered. The sender sends nothing more after this."""
        wait_s = _seconds("JOURNAL_NOTIFY_WAIT_S", WAIT_S) if wait_s is None else wait_s
        with self._lock:
            lanes = list(self._lanes.values())
        for waiting, _ in lanes:
            with contextlib.suppress(queue.Full):
                waiting.put_nowait(None)  # full: its thread is still at work anyway
        deadline = time.monotonic() + wait_s
        try:
            for _, thread in lanes:
                thread.join(max(0.0, deadline - time.monotonic()))
        except KeyboardInterrupt:
            pass  # Ctrl-C (or SIGTERM) while waiting: wait no more, record what is left
        with self._lock:
            self._given_up.set()
            left, self._pending = self._pending, []
        for delivery in left:
            self._note(
                delivery,
                self._tries.get(id(delivery), 0) + 1,
                0.0,
                None,
                f"not delivered: journal ended first (it waits at most {wait_s:g} s for "
                "notifications at its end)",
            )

    def _settle(self, delivery: Delivery) -> bool:
        """Take ``delivery`` off the pending list; False when :meth:`close` already did."""
        with self._lock:
            for i, pending in enumerate(self._pending):
                if pending is delivery:
                    del self._pending[i]
                    self._tries.pop(id(delivery), None)
                    return True
        return False

    def _work(self, waiting: queue.Queue[Delivery | None]) -> None:
        while True:
            delivery = waiting.get()
            if delivery is None or self._given_up.is_set():
                return
            self._deliver(delivery)

    def _deliver(self, delivery: Delivery) -> None:
        for attempt in range(1, self.attempts + 1):
            self._tries[id(delivery)] = attempt - 1
            started = time.monotonic()
            status, reason, again = post(delivery.spec.url or "", delivery.body, self.timeout_s)
            took = time.monotonic() - started
            last = attempt == self.attempts or not again
            if self._given_up.is_set():
                return  # close() recorded it as not delivered
            if last and not self._settle(delivery):
                return
            self._tries[id(delivery)] = attempt
            self._note(delivery, attempt, took, status, reason)
            if last:
                return
            if self._given_up.wait(self.backoff_s * 2 ** (attempt - 1)):
                return

    def _note(
        self,
        delivery: Delivery,
        attempt: int,
        seconds: float,
        status: int | None,
        reason: str | None,
    ) -> None:
        spec = delivery.spec
        try:
            self._record(
                NotificationSent(
                    channel=spec.name,
                    trigger=delivery.trigger,
                    url=spec.where,
                    format=spec.format,
                    delivered=reason is None,
                    attempt=attempt,
                    attempts=self.attempts,
                    seconds=round(seconds, 6),
                    status=status,
                    reason=reason,
                    subject=delivery.subject,
                    run=delivery.run,
                    host_name=delivery.host,
                )
            )
        except Exception:  # noqa: BLE001 - a notification's record never ends the command
            pass


def post(url: str, body: bytes, timeout_s: float) -> tuple[int | None, str | None, bool]:
    """POST ``body`` (JSON) to ``url``: (HTTP status, None) when delivered (2xx), else
    (status or None, the reason, whether trying again may help)."""
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "journal-notify/1"},
    )
    try:
        with _OPENER.open(request, timeout=timeout_s) as answer:
            answer.read(65536)
            return answer.status, None, False
    except urllib.error.HTTPError as exc:
        again = exc.code >= 500 or exc.code in (408, 429)
        return exc.code, f"HTTP {exc.code} {exc.reason}", again
    except TimeoutError:
        return None, f"no answer within {timeout_s:g} s", True
    except urllib.error.URLError as exc:
        why = exc.reason
        if isinstance(why, TimeoutError):
            return None, f"no answer within {timeout_s:g} s", True
        text = getattr(why, "strerror", None) or str(why)
        return None, f"could not connect: {text}", True
    except OSError as exc:
        return None, f"the connection failed: {exc.strerror or type(exc).__name__}", True


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A webhook that redirects is not followed: the body (and the secret path) stay put."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def encode(body: dict[str, object]) -> bytes:
    """The JSON bytes posted."""
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
