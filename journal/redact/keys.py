"""Private keys: the patterns that mask a PEM block (each line between ``-----BEGIN …
PRIVATE KEY-----`` and its END line, to the end when there is none) and a PuTTY key file's
private lines, each line masked so that lines keep their numbers; and :func:`open_block`,
which tells a recorder that a block is open (its END line not printed yet), so that output
still being printed is held until it ends."""

from __future__ import annotations

import re

from journal.redact.spans import MASK_B, Pattern, Span
from journal.redact.terminal import escaped, shown


def _lines(data: bytes, m: re.Match[bytes], printed: bytes, strict: bool) -> Span | None:
    start, end = m.span("v")
    body = re.sub(rb"[^\r\n]+", MASK_B, data[start:end])
    return Span(start, end, body, "private-key", m.start())


_PEM = rb"[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = re.compile(rb"-----END " + _PEM)
#: The private key patterns: applied first, since their lines may hold anything.
BLOCKS = [
    Pattern(
        "private-key",
        re.compile(rb"-----BEGIN " + _PEM + rb"(?P<v>[\s\S]*?)(?:-----END " + _PEM + rb"|\Z)"),
        span=_lines,
    ),
    Pattern(
        "private-key",
        re.compile(rb"Private-Lines:[ \t]*\d+\r?\n(?P<v>(?:[A-Za-z0-9+/=]+(?:\r?\n|\Z))+)"),
        span=_lines,
    ),
]


def open_block(data: bytes, end: int) -> int | None:
    """Where the line begins of a private key block that ``data[:end]`` opens and does not
    end (its END line not printed yet); None when there is none. Read on what a terminal
    shows (:func:`~journal.redact.terminal.shown`): a block printed in colour is held too."""
    if escaped(data, 0, end):
        begin = data.rfind(b"BEGIN", 0, end)
        if begin < 0:
            return None
        line = max(data.rfind(b"\n", 0, begin), data.rfind(b"\r", 0, begin)) + 1
        view = shown(data[line:end])
        return None if _open_block(view, len(view)) is None else line
    return _open_block(data, end)


def _open_block(data: bytes, end: int) -> int | None:
    begin = data.rfind(b"-----BEGIN ", 0, end)
    if begin < 0:
        return None
    line_end = data.find(b"\n", begin, end)
    if data.find(b"PRIVATE KEY", begin, line_end if line_end >= 0 else end) < 0:
        return None
    if _PEM_END.search(data, begin, end):
        return None
    return max(data.rfind(b"\n", 0, begin), data.rfind(b"\r", 0, begin)) + 1

