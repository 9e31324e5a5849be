"""Turns a step's streamed output into ``OutputChunk`` events: batched, redacted, byte-exact.

Complete lines are flushed at least every ``FLUSH_S`` seconds and whenever a stream holds
``MAX_CHUNK`` bytes, so a recorder killed mid-step loses at most the last fraction of a second,
and a 100 MB log costs a few hundred events, not millions.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable

from journal.events import OutputChunk
from journal.redact import Redactor

FLUSH_S = 0.2
PARTIAL_HOLD_S = 1.0
MAX_CHUNK = 256 * 1024


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
    is held up to ``PARTIAL_HOLD_S``, so that a secret printed in pieces is redacted whole;
    a line longer than ``MAX_CHUNK`` is cut at its last blank, where secrets do not straddle.
    """

    def __init__(
        self,
        append: Callable[[list[OutputChunk]], None],
        run_id: str,
        host: str,
        redactor: Redactor,
        echo: Callable[[str, bytes], None] | None = None,
        offsets: dict[str, int] | None = None,
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
        """How many bytes of ``buf`` to store now."""
        if final:
            return len(buf)
        lines = _line_end(buf) + 1
        held = len(buf) - lines
        age = time.monotonic() - self.start - self._line.get(stream, 0.0)
        if held and age >= PARTIAL_HOLD_S:
            return len(buf) - _utf8_tail(buf)
        if lines == 0 and len(buf) >= MAX_CHUNK:
            blank = max(buf.rfind(b" "), buf.rfind(b"\t"))
            return blank + 1 if blank > 0 else len(buf) - _utf8_tail(buf)
        return lines

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


def _line_end(data: bytes | bytearray) -> int:
    """Index of the last newline or carriage return (progress bars end lines with it), or -1."""
    return max(data.rfind(b"\n"), data.rfind(b"\r"))
