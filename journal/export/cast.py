"""A step run's recorded output as an asciicast v2 file, so it replays with asciinema.

Header: version, width, height, timestamp (the step's start), command and title. Then one
``[seconds, "o", text]`` event per recorded chunk, at the time the chunk's first byte arrived.
Steps run without a terminal, so ``\\n`` is written as ``\\r\\n`` (what a terminal's line
discipline would have sent); bytes that are not UTF-8 are shown as U+FFFD.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from journal.events import OutputChunk, StepStarted
from journal.mapper import Recorded
from journal.output import chunk_text

WIDTH, HEIGHT = 120, 40


def to_cast(records: Iterable[Recorded]) -> list[str]:
    """The lines of the .cast file for one run's events (StepStarted first)."""
    return list(stream_cast(records))


def stream_cast(records: Iterable[Recorded]) -> Iterator[str]:
    """The lines of the .cast file one at a time, as the run's events are read (the web's
    download streams them: a run's output is never held whole)."""
    header: dict[str, Any] | None = None
    waiting: list[str] = []  # events read before the StepStarted (none, as the store reads)
    last = 0.0
    for rec in records:
        event = rec.event
        if isinstance(event, StepStarted):
            started = datetime.fromisoformat(rec.ts.replace("Z", "+00:00"))
            header = {
                "version": 2,
                "width": WIDTH,
                "height": HEIGHT,
                "timestamp": int(started.timestamp()),
                "command": event.command,
                "title": f"{event.step} on {event.host_name}",
                "env": {"TERM": "xterm-256color", "SHELL": "/bin/bash"},
            }
            yield json.dumps(header)
            yield from waiting
            waiting = []
        elif isinstance(event, OutputChunk):
            text = chunk_text(event).replace("\r\n", "\n")
            last = max(last, event.t)  # chunks of two streams may be stored out of time order
            line = json.dumps([round(last, 6), "o", text.replace("\n", "\r\n")])
            if header is None:
                waiting.append(line)
            else:
                yield line
    if header is None:
        raise ValueError("no StepStarted for this run")
