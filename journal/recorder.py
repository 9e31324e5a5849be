"""Turns a step's streamed output into ``OutputChunk`` events: batched, redacted, byte-exact.

Output is flushed at least every ``FLUSH_S`` seconds and whenever a stream holds
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
            need = 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else 4 if byte >> 3 == 0b11110 else 1
            return back if need > back else 0
    return 0


class OutputRecorder:
    """Buffers one step run's output per stream and appends it as chunks."""

    def __init__(
        self,
        append: Callable[[list[OutputChunk]], None],
        run_id: str,
        host: str,
        redactor: Redactor,
        echo: Callable[[str, bytes], None] | None = None,
    ) -> None:
        self._append = append
        self.run_id = run_id
        self.host = host
        self.redactor = redactor
        self.echo = echo
        self.start = time.monotonic()
        self._buffers: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self._first: dict[str, float] = {}
        self._last_flush = self.start
        self.bytes = {"stdout": 0, "stderr": 0}

    def feed(self, stream: str, data: bytes) -> None:
        if self.echo is not None:
            self.echo(stream, data)
        buf = self._buffers[stream]
        if not buf:
            self._first[stream] = time.monotonic() - self.start
        buf += data
        self.bytes[stream] += len(data)
        if len(buf) >= MAX_CHUNK:
            self.flush(only=stream)
        else:
            self.tick()

    def tick(self) -> None:
        if time.monotonic() - self._last_flush >= FLUSH_S:
            self.flush()

    def flush(self, only: str | None = None, final: bool = False) -> None:
        """Append what is buffered (of one stream, or all) as chunk events."""
        chunks = []
        for stream, buf in self._buffers.items():
            if not buf or (only is not None and stream != only):
                continue
            keep = 0 if final else _utf8_tail(buf)
            data = bytes(buf[: len(buf) - keep])
            t = self._first[stream]
            del buf[: len(data)]
            if buf:
                self._first[stream] = time.monotonic() - self.start
            if not data:
                continue
            clean, redactions = self.redactor.bytes(data, stream)
            text, encoding = encode(clean)
            chunks.append(
                OutputChunk(
                    run=self.run_id, host_name=self.host, stream=stream, data=text,
                    encoding=encoding, size=len(clean), t=round(t, 6), redactions=redactions,
                )
            )
        if chunks:
            self._append(chunks)
        if only is None:
            self._last_flush = time.monotonic()

    def close(self) -> None:
        """Flush everything left, incomplete characters included."""
        self.flush(final=True)
