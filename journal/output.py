"""A run's recorded output put back together from its ``OutputChunk`` events, in one place.

The recorder (:class:`journal.recorder.OutputRecorder`) stores each chunk as UTF-8 text, or
as base64 when its bytes are not UTF-8 (:func:`encode`; :func:`decode` gives a chunk's exact
bytes back). Here a chunk becomes its text as the detectors, the web and the exports read it
(bytes that are not UTF-8 replaced by U+FFFD, chunk by chunk).

A run's output is read chunk by chunk, never joined whole (it may be 200 MB, or one line that
long): :func:`tail` is the one reader of its last lines (`journal show`, the postmortem's
stderr), :func:`last_text` the end of it as one text for a reader that needs a text (a
benchmark's parser), bounded in size.
"""

from __future__ import annotations

import base64
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, AnyStr, Generic, Literal

from journal.events import Event, OutputChunk
from journal.mapper import Recorded

__all__ = [
    "Tail",
    "TailLine",
    "chunk_text",
    "chunks_of",
    "decode",
    "encode",
    "last_text",
    "output_text",
    "tail",
]


def encode(data: bytes) -> tuple[str, str]:
    """Bytes as stored: (text, "utf-8") when valid UTF-8, else (base64, "base64")."""
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def decode(chunk: OutputChunk) -> bytes:
    """The exact bytes of a stored chunk."""
    if chunk.encoding == "base64":
        return base64.b64decode(chunk.data)
    return chunk.data.encode("utf-8")


def chunk_text(chunk: OutputChunk) -> str:
    """A chunk's text as the detectors read it (bytes that are not UTF-8 replaced)."""
    if chunk.encoding == "utf-8":
        return chunk.data
    return decode(chunk).decode("utf-8", "replace")


def chunks_of(records: Iterable[Recorded | Event]) -> Iterator[OutputChunk]:
    """The output chunks among recorded events (or bare events), in their order."""
    for item in records:
        event = item.event if isinstance(item, Recorded) else item
        if isinstance(event, OutputChunk):
            yield event


def output_text(records: Iterable[Recorded | Event]) -> str:
    """The text of the chunks among ``records`` (as :func:`chunk_text` reads each), in order:
    for records already bounded (a window of a run's output), never a whole run's."""
    return "".join(chunk_text(chunk) for chunk in chunks_of(records))


@dataclass(frozen=True)
class TailLine(Generic[AnyStr]):
    """One line of an output's tail: what is kept of it (at most the reader's ``limit``, its
    start or its end) and how many characters (or bytes) of it were left out (``cut``)."""

    text: AnyStr
    cut: int = 0


@dataclass(frozen=True)
class Tail(Generic[AnyStr]):
    """The last lines of a run's output (or of one stream of it), and how many it has in all."""

    lines: list[TailLine[AnyStr]]
    total: int

    @property
    def before(self) -> int:
        """How many lines came before the tail."""
        return self.total - len(self.lines)


def tail(
    records: Iterable[Recorded | Event],
    count: int,
    *,
    limit: int,
    keep: Literal["start", "end"] = "end",
    stream: str | None = None,
    text: bool = False,
) -> Tail[Any]:
    """The last ``count`` lines of the output among ``records`` (of ``stream`` only, when
    given: its lines run on across the other stream's chunks), as exact bytes or, with
    ``text``, as :func:`chunk_text` reads each chunk; and how many lines it has in all (an
    unended last line counts).

    Read chunk by chunk: only ``count`` lines, the line being read and one chunk are ever held,
    however long the output. Of a line longer than ``limit``, its first (``keep="start"``) or
    last (``keep="end"``) ``limit`` characters are kept and the rest counted (``cut``), so a
    200 MB line is never held whole."""
    chunks = (c for c in chunks_of(records) if stream is None or c.stream == stream)
    if text:
        return _tail((chunk_text(c) for c in chunks), "\n", "", count, limit, keep == "end")
    return _tail((decode(c) for c in chunks), b"\n", b"", count, limit, keep == "end")


def _tail(
    pieces: Iterable[AnyStr],
    newline: AnyStr,
    empty: AnyStr,
    count: int,
    limit: int,
    keep_end: bool,
) -> Tail[AnyStr]:
    kept: deque[TailLine[AnyStr]] = deque(maxlen=count)
    total = 0
    held: list[AnyStr] = []  # of the line being read, at most its first or last ``limit``
    held_size = 0
    size = 0  # of the line being read, all of it

    def add(part: AnyStr) -> None:
        nonlocal held_size, size
        size += len(part)
        if keep_end:
            held.append(part[-limit:])
            held_size += len(held[-1])
            if held_size > 2 * limit:  # trimmed now and then, not at every piece
                joined = empty.join(held)[-limit:]
                held[:] = [joined]
                held_size = len(joined)
        elif held_size < limit:
            held.append(part[: limit - held_size])
            held_size += len(held[-1])

    def line(whole: AnyStr, length: int) -> TailLine[AnyStr]:
        text = whole[-limit:] if keep_end else whole[:limit]
        return TailLine(text, length - len(text))

    for piece in pieces:
        parts = piece.split(newline)
        if len(parts) > 1:  # the line being read ends here
            add(parts[0])
            kept.append(line(empty.join(held), size))
            held.clear()
            held_size = size = 0
            # the lines begun and ended in this piece: only the last ``count`` can be kept
            total += len(parts) - 1
            whole = parts[max(1, len(parts) - 1 - count) : -1]
            kept.extend(line(part, len(part)) for part in whole)
        add(parts[-1])
    if size:
        kept.append(line(empty.join(held), size))
        total += 1
    return Tail(list(kept), total)


def last_text(records: Iterable[Recorded | Event], size: int) -> tuple[str, int]:
    """The end of the output among ``records`` as :func:`output_text` reads it, at most about
    ``size`` characters from its last whole lines (all of it when it is no longer), and the
    number (1-based) of the first line given: a window for a reader that looks for what an
    output ended with, held in memory as one text however long the output.

    Chunks are held until what follows them reaches ``size``; the text then starts at the
    first line that begins within the last ``size`` characters (or, inside one line longer
    than that, ``size`` characters before the end)."""
    kept: deque[str] = deque()
    held = 0
    newlines = 0  # in the chunks let go
    for chunk in chunks_of(records):
        piece = chunk_text(chunk)
        kept.append(piece)
        held += len(piece)
        while held - len(kept[0]) > size:  # what remains is still more than ``size``
            old = kept.popleft()
            held -= len(old)
            newlines += old.count("\n")
    whole = "".join(kept)
    kept.clear()
    if len(whole) <= size:  # nothing let go
        return whole, 1
    start = len(whole) - size
    if whole[start - 1] != "\n":
        found = whole.find("\n", start)
        start = found + 1 if found != -1 and found + 1 < len(whole) else start
    return whole[start:], 1 + newlines + whole.count("\n", 0, start)
