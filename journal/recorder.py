"""Turns a step's streamed output into ``OutputChunk`` events: batched, redacted, byte-exact.

Complete lines are flushed at least every ``FLUSH_S`` seconds and whenever a stream holds
``MAX_CHUNK`` bytes, so a recorder killed mid-step loses at most the last fraction of a second,
and a 100 MB log costs a few hundred events, not millions.

A secret is redacted whole however it is printed: a chunk never ends inside one. What is
held back for that is bounded (a line's unfinished tail, at most ``MAX_CHUNK``), and the spool
on the host still has it should journal die (``attach`` records from ``stored``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from journal.events import OutputChunk
from journal.output import encode
from journal.redact import Redactor
from journal.redact.cuts import WINDOW
from journal.redact.keys import open_block

FLUSH_S = 0.2
PARTIAL_HOLD_S = 1.0
MAX_CHUNK = 256 * 1024
#: Of a line longer than ``MAX_CHUNK`` without a blank, this much is kept back at a cut: a
#: secret still being printed there is whole in the next chunk, and one straddling the cut is
#: seen whole (:meth:`Redactor.safe_cut`).
LONG_LINE_SLACK = WINDOW
#: The most output kept as printed for a reader that parses it (a benchmark's parser); past
#: it none is kept and the reader reads the record.
KEEP_LIMIT = 64 * 1024 * 1024


def _utf8_tail(data: bytes) -> int:
    """How many bytes at the end of ``data`` start a UTF-8 character that is not complete."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # a lead byte (or ASCII)
            need = (
                2
                if byte >> 5 == 0b110
                else 3
                if byte >> 4 == 0b1110
                else 4
                if byte >> 3 == 0b11110
                else 1
            )
            return back if need > back else 0
    return 0


class OutputRecorder:
    """Buffers one step run's output per stream and appends it as chunks.

    Complete lines are stored within ``FLUSH_S``. A line still being printed (no newline yet)
    is held up to ``PARTIAL_HOLD_S``; then what of it can no longer become part of a secret
    is stored, and its tail that still can (:meth:`Redactor.tail`: its last word, from a word
    such as ``password`` or ``Authorization`` on, the beginning of a known value) is held until
    the line ends, the run ends, or the line reaches ``MAX_CHUNK``, however long the pieces
    take to come. A line longer than ``MAX_CHUNK`` is cut where no secret straddles the cut
    (:meth:`Redactor.safe_cut`), and a private key block is held until its END line (up to
    ``MAX_CHUNK``). The echo is live whatever is held.
    """

    def __init__(
        self,
        append: Callable[[list[OutputChunk]], None],
        run_id: str,
        host: str,
        redactor: Redactor,
        echo: Callable[[str, bytes], None] | None = None,
        offsets: dict[str, int] | None = None,
        keep: bool = False,
    ) -> None:
        self._append = append
        self.run_id = run_id
        self.host = host
        self.redactor = redactor
        self.echo = echo
        self.start = time.monotonic()
        self._buffers: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self._first: dict[str, float] = {}  # when the buffer's first byte arrived
        self._line: dict[str, float] = {}  # when the buffer's unfinished last line began
        self._last_flush = self.start
        self.bytes = {"stdout": 0, "stderr": 0}
        #: bytes of each stream stored so far, counted from the command's first (an attached
        #: recorder starts where the record stood)
        self.stored = {"stdout": 0, "stderr": 0, **(offsets or {})}
        #: with ``keep``, the chunks as printed (before redaction), in the order stored, for
        #: a parser to read evidence from (then redact what it read); None past KEEP_LIMIT
        self._kept: list[bytes] | None = [] if keep else None
        self._kept_size = 0

    def feed(self, stream: str, data: bytes) -> None:
        if self.echo is not None:
            self.echo(stream, data)
        buf = self._buffers[stream]
        now = time.monotonic() - self.start
        if not buf:
            self._first[stream] = now
        if not buf or buf[-1:] in (b"\n", b"\r") or _line_end(data) >= 0:
            self._line[stream] = now
        buf += data
        self.bytes[stream] += len(data)
        if len(buf) >= MAX_CHUNK:
            self.flush(only=stream)
        else:
            self.tick()

    def tick(self) -> None:
        if time.monotonic() - self._last_flush >= FLUSH_S:
            self.flush()

    def _cut(self, stream: str, buf: bytearray, final: bool) -> int:
        """How many bytes of ``buf`` to store now: never so many that a secret still being
        printed, or straddling the cut, is split."""
        if final:
            return len(buf)
        data = bytes(buf)
        lines = _line_end(data) + 1
        held = len(data) - lines
        if held >= MAX_CHUNK:
            cut = self._long_cut(data, lines)
        elif held and time.monotonic() - self.start - self._line.get(stream, 0.0) >= PARTIAL_HOLD_S:
            # an unfinished line, old: store what of it can no longer become a secret
            cut = _char_start(data, self.redactor.tail(data, lines))
            cut = self.redactor.safe_cut(data, cut, lines)
        else:
            cut = lines
        block = open_block(data, cut)
        if block is not None and len(data) - block < MAX_CHUNK:
            cut = block  # a private key block whose END line is still to come
        return cut

    def _long_cut(self, data: bytes, lines: int) -> int:
        """Where to cut a line longer than ``MAX_CHUNK`` (it begins at ``lines``): after what
        can no longer become a secret, at least ``LONG_LINE_SLACK`` before its end, moved
        back before a secret straddling the cut, unless that secret began with the line (a
        ``MAX_CHUNK`` long one is none): a cut always moves on."""
        cut = max(self.redactor.tail(data, lines), len(data) - LONG_LINE_SLACK)
        cut = _char_start(data, cut)
        safe = self.redactor.safe_cut(data, cut, lines)
        return _char_start(data, safe) if safe > lines else cut

    def flush(self, only: str | None = None, final: bool = False) -> None:
        """Append what is ready (of one stream, or all) as chunk events."""
        chunks = []
        for stream, buf in self._buffers.items():
            if not buf or (only is not None and stream != only):
                continue
            cut = self._cut(stream, buf, final)
            if not cut:
                continue
            data = bytes(buf[:cut])
            t = self._first[stream]
            del buf[:cut]
            self.stored[stream] += len(data)
            if buf:
                self._first[stream] = self._line.get(stream, t)
            if self._kept is not None:
                self._kept_size += len(data)
                self._kept = self._kept if self._kept_size <= KEEP_LIMIT else None
                if self._kept is not None:
                    self._kept.append(data)
            clean, redactions = self.redactor.bytes(data, stream)
            text, encoding = encode(clean)
            chunks.append(
                OutputChunk(
                    run=self.run_id,
                    host_name=self.host,
                    stream=stream,
                    data=text,
                    encoding=encoding,
                    size=len(clean),
                    t=round(t, 6),
                    redactions=redactions,
                    end=self.stored[stream],
                )
            )
        if chunks:
            self._append(chunks)
        if only is None:
            self._last_flush = time.monotonic()

    def close(self) -> None:
        """Flush everything left, unfinished lines and characters included."""
        self.flush(final=True)

    def printed(self) -> str | None:
        """The output as printed, both streams in the order stored, as the record's text
        reads (each chunk's bytes that are not UTF-8 replaced); None unless kept whole."""
        if self._kept is None:
            return None
        return "".join(chunk.decode("utf-8", "replace") for chunk in self._kept)


def _char_start(data: bytes, at: int) -> int:
    """``at`` moved back to the beginning of the UTF-8 character it is inside of (at most 3
    bytes back), so that a chunk of valid UTF-8 is stored as text."""
    if at >= len(data):
        return len(data) - _utf8_tail(data)
    back = at
    while back > max(0, at - 3) and data[back] & 0xC0 == 0x80:
        back -= 1
    return back if data[back] & 0xC0 != 0x80 else at


def _line_end(data: bytes | bytearray) -> int:
    """Index of the last newline or carriage return (progress bars end lines with it), or -1."""
    return max(data.rfind(b"\n"), data.rfind(b"\r"))
