"""The marks of a `journal shell` session's hooks (:mod:`journal.service.shell_hooks`), taken
out of the shell's output: the bytes to pass on to the terminal and the marks, in order. Only a
sequence led by the session's nonce is a mark; any other, ``ESC ] 7733`` or not, is output like
any other byte, recorded and shown as printed."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

#: The private OSC number of the marks.
OSC = b"\x1b]7733;"
BEL = b"\x07"
#: A mark longer than this is no mark of ours: its bytes are passed on as they came.
MARK_LIMIT = 1 << 20
#: The ack journal types (not echoed) to let a command whose hook waits go on.
ACK = b"\n"
#: A shell variable's name.
NAME = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Mark:
    """A mark taken out of the stream: its kind (``C``, ``P``, ``N``) and fields."""

    kind: str
    fields: tuple[str, ...]

    def text(self, index: int) -> str:
        """Field ``index`` decoded from base64 ('' when absent or not base64)."""
        return self.raw(index).decode("utf-8", "replace")

    def raw(self, index: int) -> bytes:
        """Field ``index`` decoded from base64, as bytes (b'' when absent or not base64)."""
        try:
            return base64.b64decode(self.fields[index], validate=False)
        except (IndexError, ValueError):
            return b""


class Marks:
    """Splits the shell's output into the bytes to pass on and the marks (in order): only a
    sequence led by the session's ``nonce`` is a mark; any other, ``ESC ] 7733`` or not, is
    output."""

    def __init__(self, nonce: str) -> None:
        if not nonce:
            raise ValueError("marks without a nonce could be forged by any output")
        self.head = OSC + nonce.encode("ascii") + b";"
        self._pending = b""

    def feed(self, data: bytes) -> list[bytes | Mark]:
        buf = self._pending + data if self._pending else data
        self._pending = b""
        out: list[bytes | Mark] = []
        head = self.head
        while buf:
            at = buf.find(head)
            if at < 0:
                keep = _partial_prefix(buf, head)
                if keep:
                    self._pending = buf[-keep:]
                    buf = buf[:-keep]
                if buf:
                    out.append(buf)
                break
            if at:
                out.append(buf[:at])
            end = buf.find(BEL, at)
            if end < 0:
                if len(buf) - at > MARK_LIMIT:
                    out.append(buf[at:])
                else:
                    self._pending = buf[at:]
                break
            body = buf[at + len(head) : end].decode("ascii", "replace").split(";")
            out.append(Mark(body[0], tuple(body[1:])))
            buf = buf[end + 1 :]
        return out

    def rest(self) -> bytes:
        """What was held back (a mark that never ended), to pass on at the end."""
        rest, self._pending = self._pending, b""
        return rest

    def idle(self) -> bytes:
        """Held bytes that could only have begun a mark (an ``ESC`` at the end of a read, or
        ``ESC ] 7733 ;`` and part of a nonce), to pass on once nothing more came for a while:
        the rest of a mark of ours comes in the same write."""
        if self._pending and len(self._pending) < len(self.head):
            return self.rest()
        return b""


def _partial_prefix(buf: bytes, head: bytes) -> int:
    """How many bytes at the end of ``buf`` could begin a mark (``head`` holds one ``ESC``,
    its first byte: only the last ``ESC`` can begin one)."""
    start = buf.rfind(b"\x1b", max(0, len(buf) - len(head) + 1))
    if start >= 0 and head.startswith(buf[start:]):
        return len(buf) - start
    return 0


def reported_secrets(blob: bytes) -> dict[str, bytes]:
    """The P mark's report of the secret-named variables: ``NAME=value`` records, each
    ended by a NUL."""
    found: dict[str, bytes] = {}
    for record in blob.split(b"\0"):
        name, eq, value = record.partition(b"=")
        if eq and NAME.fullmatch(name):
            found[name.decode("ascii")] = value
    return found
