"""Where output still being printed may be cut without splitting a secret: a recorder
(:mod:`journal.recorder`) writes what is safe and holds the rest until more is printed.

:func:`tail` says where the part of an unended line that could still become (part of) a
secret begins; :func:`safe_cut` moves a cut back before any secret that straddles it, the
patterns matched strictly there (none of the exceptions that hang on the whole of a value,
whose end may not have been printed yet). Both read what a terminal shows, so a cut never
splits an escape sequence either."""

from __future__ import annotations

import re

from journal.redact.patterns import GATED, gates_in
from journal.redact.spans import spans
from journal.redact.terminal import ESCAPE_BYTES, Layout, escaped

#: Words after which the rest of a line may still become (part of) a secret: each pattern
#: whose match may hold a blank is led by one of them, or starts just before one.
_TRIGGERS = (
    b"pass",
    b"token",
    b"secret",
    b"key",
    b"credential",
    b"auth",
    b"_pwd",
    b"bearer",
    b"mysql",
    b"mariadb",
    b"-----begin",
    b"private-lines",
)
#: How far before its trigger word a match may start (``"MY_LONG_NAME_TOKEN"``).
_TRIGGER_REACH = 256
#: A match straddling a cut is looked for this far either side of it: a longer one is no secret.
WINDOW = 16 * 1024


def tail(values: list[bytes], data: bytes, start: int = 0) -> int:
    """Where the part of ``data[start:]`` (a line not ended yet) that could still become
    (part of) a secret as more is printed begins: its last word (a token's shape holds no
    blank), the word of the first trigger word in it (``password``, ``token``, ``key``,
    ``Authorization``, ``mysql``, ``-----BEGIN``: the value after one may hold blanks),
    the word before that too when the trigger's name is followed by ``:`` or ``=`` or
    ends the line so far (a label's words tell evidence from a secret: ``Time to first
    token: 35.2 ms``), or the beginning of a known value that the line ends with. Read on
    what a terminal shows (:func:`~journal.redact.terminal.shown`); the escape sequences
    just before the part held are held with it, so no cut splits one."""
    if not escaped(data, start):
        return start + _hold(values, data[start:])
    layout = Layout(data, start, len(data))
    return layout.before(_hold(values, layout.view(data)))


def _hold(values: list[bytes], line: bytes) -> int:
    """:func:`tail` on a line as a terminal shows it: the offset in ``line``."""
    hold = max(line.rfind(b" "), line.rfind(b"\t")) + 1
    lower = line.lower()
    for word in _TRIGGERS:
        at = lower.find(word, 0, hold + len(word) - 1)
        if at >= 0:
            before = _blank_before(line, at)
            if _NAME_END.match(lower, at + len(word)):
                words = len(line[:before].rstrip(b" \t"))
                if words:
                    before = _blank_before(line, words)
            hold = min(hold, max(before, at - _TRIGGER_REACH))
    for value in values:
        hold = min(hold, len(line) - _prefix_at_end(line, value))
    return hold


def safe_cut(values: list[bytes], data: bytes, cut: int, floor: int) -> int:
    """``cut`` moved back to the start of any secret in ``data`` (a known value, a
    pattern's match) that straddles it, looked for ``WINDOW`` bytes either side; never
    below ``floor`` (``floor`` itself when a secret straddling the cut starts there or
    before). Read on what a terminal shows (:func:`~journal.redact.terminal.shown`): a cut
    is never inside an escape sequence, and one before a secret leaves the sequences before
    it with it."""
    lo = max(floor, cut - WINDOW)
    hi = min(len(data), cut + WINDOW)
    ahead = data.rfind(b"\x1b", floor, lo)
    if ahead >= 0 and ESCAPE_BYTES.match(data, ahead).end() > lo:  # type: ignore[union-attr]
        lo = ahead  # the window begins inside an escape sequence: at its beginning
    if not escaped(data, lo, hi):
        at = cut - lo
        moved = _straddled(values, data[lo:hi], at)
        if moved == at:
            return cut
        return max(floor, lo + moved)
    layout = Layout(data, lo, hi)
    at = layout.shown_before(cut)
    if at >= layout.size or cut != layout.raw_at(at):
        cut = layout.before(at)  # among the escape sequences before a character: before them
    moved = _straddled(values, layout.view(data), at)
    if moved == at:
        return cut
    return max(floor, layout.before(moved))


def _straddled(values: list[bytes], window: bytes, at: int) -> int:
    """Where in ``window`` a cut at ``at`` must move back to so that it splits no
    secret (:func:`safe_cut`); ``at`` itself when none straddles it."""
    lower = window.lower()
    for _ in range(8):  # moving back may land inside another secret
        moved = at
        for value in values:
            first = window.find(value, max(0, at - len(value) + 1), at + len(value) - 1)
            if 0 <= first < moved:
                moved = first
        present = gates_in(window)
        for pattern, gates in GATED:
            if gates and gates.isdisjoint(present):
                continue
            for span in spans(pattern, window, lower, strict=True):
                # from the word of the name or flag the value is recognised by to the
                # value's end: a cut before the name's keyword (``secret_|key=…``) would
                # leave a name that is not recognised (``key=…``, ``token=…``)
                start = _word_start(window, span.lead)
                if start < at < span.stop:
                    moved = min(moved, start)
        if moved == at or moved <= 0:
            return moved
        at = moved
    return at


#: After a trigger word: the rest of its name, then ``:`` or ``=`` (or nothing yet).
_NAME_END = re.compile(rb"[a-z0-9_.-]*(?:\\?[\"'])?[ \t]*(?:[:=]|\Z)")


def _blank_before(line: bytes, at: int) -> int:
    """Where the word holding ``line[at]`` begins (after a blank)."""
    return max(line.rfind(b" ", 0, at), line.rfind(b"\t", 0, at)) + 1


def _word_start(data: bytes, at: int) -> int:
    """Where the word holding byte ``at`` begins (after a blank or a line's end)."""
    return max(data.rfind(sep, 0, at) for sep in (b"\n", b"\r", b" ", b"\t")) + 1


def _prefix_at_end(line: bytes, value: bytes) -> int:
    """The length of the longest beginning of ``value`` (short of all of it) that ``line``
    ends with; 0 for none."""
    first = value[:1]
    at = line.find(first, max(0, len(line) - len(value) + 1))
    while at >= 0:
        if value.startswith(line[at:]):
            return len(line) - at
        at = line.find(first, at + 1)
    return 0
