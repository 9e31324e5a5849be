"""Server-Sent Events for live pages: a poll loop per connection that sends HTML fragments.

A live stream (a running step's output, the timeline's new items) asks the store every
``LIVE_POLL_S`` for the events after the last one it sent and sends what they change as
htmx-ext-sse swaps it. Each message's ``id`` is the newest event it shows: the page keeps it
in ``data-last-seq`` (static/journal.js), and a browser reconnecting sends it back as
``Last-Event-ID``, so a reconnect resumes after it and never shows a line twice.

A stream lives at most its lifetime, then ends (the browser reconnects after ``retry``); a
comment every ``HEARTBEAT_S`` finds a browser that went away, since only a write can fail:
the server (waitress) then closes the generator. Each stream holds one thread of the
server's pool (:data:`journal.cli.serve.THREADS`) and no database connection between polls,
so other requests go on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from flask import Response, current_app, request, stream_with_context

#: Seconds between two keep-alive comments when nothing happened.
HEARTBEAT_S = 1.0
#: Milliseconds a browser waits before it reconnects to a stream that ended.
RETRY_MS = 1000

#: What one poll found: the messages to send, and whether the stream is over.
Poll = Callable[[], tuple[list[str], bool]]


def message(event: str, data: str, id: int | None = None) -> str:
    """One SSE message; ``data`` may hold line ends (each line goes on a ``data:`` line)."""
    lines = data.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    head = f"id: {id}\n" if id is not None else ""
    return head + f"event: {event}\n" + "".join(f"data: {line}\n" for line in lines) + "\n"


#: The largest sequence number there can be (a signed 64-bit integer, as the databases keep it).
MAX_SEQ = 2**63 - 1


def after_seq() -> int:
    """Where a stream starts: after ``?after=SEQ``, or after the ``Last-Event-ID`` a
    reconnecting browser sends, whichever is newer.

    Either is only ever an id this server sent; one that is not a sequence number (junk, a
    negative, a number of 10,000 digits or past any sequence) is ignored rather than refused:
    a 400 would make the browser's EventSource give up for good, and the page's own
    ``?after`` still says where it stands, so the stream goes on without a line twice."""
    return max(_seq(request.args.get("after")), _seq(request.headers.get("Last-Event-ID")))


def _seq(text: str | None) -> int:
    """A sequence number as a client sent it (ASCII digits, at most :data:`MAX_SEQ`); 0, the
    start, for anything else."""
    text = (text or "").strip()
    if not text.isascii() or not text.isdigit() or len(text) > len(str(MAX_SEQ)):
        return 0
    value = int(text)
    return value if value <= MAX_SEQ else 0


def event_stream(poll: Poll, lifetime_s: float) -> Response:
    """A ``text/event-stream`` response that calls ``poll`` every ``LIVE_POLL_S`` until it
    says the stream is over, or ``lifetime_s`` passed."""
    every = float(current_app.config["LIVE_POLL_S"])

    def generate() -> Iterator[str]:
        yield f"retry: {RETRY_MS}\n: live\n\n"
        ends = time.monotonic() + lifetime_s
        beat = time.monotonic()
        while True:
            messages, over = poll()
            yield from messages
            now = time.monotonic()
            if messages:
                beat = now
            if over or now >= ends:
                return
            if now - beat >= HEARTBEAT_S:
                yield ": keep-alive\n\n"
                beat = now
            time.sleep(every)

    response = Response(stream_with_context(generate()), mimetype="text/event-stream")
    response.headers["Cache-Control"] = "no-cache"
    response.headers["X-Accel-Buffering"] = "no"  # a proxy in front must not hold it back
    return response
