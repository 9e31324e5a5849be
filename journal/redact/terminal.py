"""What a terminal shows of output, where redaction looks for secrets, and the way back: a
mask found in that view put into the bytes as printed.

Secrets are found in what a terminal shows (:func:`shown`: the escape sequences of
:data:`journal.terminal.ESCAPE` removed, as the detectors' clean view removes them; each ``\\r``
redraw read as a line of its own) and masked in the bytes as printed, however the sequences
interleave with them (``\\x1b[32mghp_…\\x1b[0m``, a token split by a colour code, ``jq -C``'s
keys and values, ``grep --color`` splitting ``HF_TOKEN``): the secret's characters are
replaced, the sequences kept, so colours still render (:func:`unshown`). Coloured output's view
costs a few passes at memchr speed (:func:`shown_view`), and a mask is put back among the
escape sequences of its own lines only."""

from __future__ import annotations

import re
from bisect import bisect_right

from journal.redact.spans import MASK_B
from journal.terminal import ESCAPE

#: :data:`journal.terminal.ESCAPE` in bytes (the 8-bit CSI is U+009B's UTF-8, not a byte of
#: another character's): CSI (colours, cursor moves, erase), OSC, DCS/SOS/PM/APC strings and
#: the short escapes. None of them holds a newline.
ESCAPE_BYTES = re.compile(ESCAPE.pattern.replace(r"\x9b", r"\xc2\x9b").encode("ascii"))
#: The text of the string sequences (OSC, DCS, SOS, PM, APC), as :data:`ESCAPE_BYTES` ends it.
STRING_ESCAPE = re.compile(rb"\x1b(?:\][^\x07\x1b\n]*|[PX^_][^\x1b\n]*)")
#: The second byte of the string sequences (OSC, DCS, SOS, PM, APC).
_STRING_KINDS = frozenset(b"]PX^_")
#: Bytes that no escape sequence but a string holds: one absent from the data marks where a
#: sequence was removed, so that what is left of two never joins into a third.
_MARKS = (b"\x00", b"\x01", b"\x02", b"\x03", b"\x04")
#: Distinct sequences removed one kind at a time at most (a 24-bit colour gradient has
#: thousands: the regular expression, once, is faster then).
_KINDS = 48


def shown(data: bytes) -> bytes:
    """``data`` as a terminal shows it, as redaction reads it: every escape sequence of
    :data:`journal.terminal.ESCAPE` removed (colours, cursor moves, titles, hyperlinks),
    everything else kept, ``\\r`` included (each ``\\r`` redraw is read as a line of its
    own, so a secret is found on the line that showed it and on those it overwrote)."""
    return shown_view(data)[0] if escaped(data) else data


def escaped(data: bytes, start: int = 0, end: int | None = None) -> bool:
    """Whether ``data[start:end]`` holds an escape sequence's first byte (ESC, the 8-bit CSI)."""
    end = len(data) if end is None else end
    return data.find(b"\x1b", start, end) >= 0 or _csi8(data, start, end)


def _csi8(data: bytes, start: int = 0, end: int | None = None) -> bool:
    """Whether ``data[start:end]`` holds the 8-bit CSI (U+009B's UTF-8), its last byte looked
    for first (a one-byte search is at memchr speed, a two-byte one much slower)."""
    end = len(data) if end is None else end
    at = data.find(b"\x9b", start, end)
    return at >= 0 and data.find(b"\xc2\x9b", max(start, at - 1), end) >= 0


def shown_view(data: bytes) -> tuple[bytes, bool]:
    """:func:`shown`, and whether ``data`` holds string sequences (OSC, DCS …).

    Exactly ``ESCAPE_BYTES.sub(b"", data)``, but coloured output (a few kinds of sequence
    repeated: uv's and pip's lines) costs a few passes at memchr speed, not a regular
    expression's match per sequence: each kind of self-contained sequence is replaced, all
    its occurrences at once, by as many mark bytes, which no sequence holds (so the rest of
    two never reads as a third), and the marks are deleted at the end. Anything else (a
    string, a lone ESC, the 8-bit CSI, many kinds) is left to the regular expression."""
    mark = next((m for m in _MARKS if m not in data), None)
    if mark is not None and not _csi8(data):
        work, pos = data, 0
        for _ in range(_KINDS):
            at = work.find(b"\x1b", pos)
            if at < 0:
                return work.translate(None, mark), False
            # a sequence that reads the same wherever its bytes are (a CSI with its final
            # byte, a short escape), not a string (it ends where a later ESC is), a lone ESC
            # or an ESC [ whose CSI never ended (both prefixes of others)
            seq = ESCAPE_BYTES.match(work, at).group()  # type: ignore[union-attr]
            if len(seq) < 2 or seq[1] in _STRING_KINDS or seq == b"\x1b[":
                break
            work = work.replace(seq, mark * len(seq))  # in place: the same length
            pos = at + len(seq)
    return ESCAPE_BYTES.sub(b"", data), STRING_ESCAPE.search(data) is not None


class Layout:
    """Where the text of ``raw[lo:hi]`` lies between its escape sequences: its run ``k`` of
    characters is ``raw[r[k] : r[k] + n[k]]``, ``view[v[k] : v[k] + n[k]]`` of what a
    terminal shows of that part (:func:`shown`)."""

    __slots__ = ("lo", "n", "r", "size", "v")

    def __init__(self, raw: bytes, lo: int, hi: int) -> None:
        self.lo = lo
        self.v: list[int] = []
        self.r: list[int] = []
        self.n: list[int] = []
        pos, size = lo, 0
        for m in ESCAPE_BYTES.finditer(raw, lo, hi):
            if m.start() > pos:
                self._run(size, pos, m.start() - pos)
                size += m.start() - pos
            pos = m.end()
        if hi > pos:
            self._run(size, pos, hi - pos)
            size += hi - pos
        self.size = size

    def _run(self, v: int, r: int, n: int) -> None:
        self.v.append(v)
        self.r.append(r)
        self.n.append(n)

    def view(self, raw: bytes) -> bytes:
        return b"".join(raw[r : r + n] for r, n in zip(self.r, self.n, strict=True))

    def raw_at(self, at: int) -> int:
        """Where character ``at`` of the view (``0 <= at < size``) is in the raw bytes."""
        k = bisect_right(self.v, at) - 1
        return self.r[k] + at - self.v[k]

    def before(self, at: int) -> int:
        """Where in the raw bytes a cut before character ``at`` of the view goes: just after
        the character before it, every escape sequence between the two left after the cut."""
        at = min(at, self.size)
        return self.lo if at <= 0 else self.raw_at(at - 1) + 1

    def shown_before(self, pos: int) -> int:
        """How many characters of the view come before raw position ``pos``."""
        k = bisect_right(self.r, pos) - 1
        return 0 if k < 0 else self.v[k] + min(pos - self.r[k], self.n[k])

    def escapes(self, raw: bytes, start: int, end: int) -> bytes:
        """The escape sequences between the characters of ``raw[start:end]`` (both ends
        characters of the view), in their order."""
        first = bisect_right(self.r, start) - 1
        last = bisect_right(self.r, end - 1) - 1
        r, n = self.r, self.n
        return b"".join(raw[r[k] + n[k] : r[k + 1]] for k in range(first, last))


def compose(
    pieces: list[tuple[int, int, int, int]], spans: list[tuple[int, int, int]]
) -> list[tuple[int, int, int, int]]:
    """What each mask of the data replaced, kept through one more pass of masking.

    ``pieces`` are ``(start, end, orig_start, orig_end)``: ``data[start:end]`` (in order,
    apart) replaced ``orig[orig_start:orig_end]`` of the data first masked, the rest of
    ``data`` being ``orig`` as it was; ``spans`` are ``(start, end, size)``: ``data[start:end]``
    replaced by ``size`` bytes now (in order, apart). A span overlapping a piece takes it
    whole. One pass over both."""
    out: list[tuple[int, int, int, int]] = []
    i = 0
    offset = 0  # orig - data, after the pieces passed
    shift = 0  # new data - data, after the spans passed
    for start, end, size in spans:
        while i < len(pieces) and pieces[i][1] <= start:
            cs, ce, os_, oe = pieces[i]
            out.append((cs + shift, ce + shift, os_, oe))
            offset = oe - ce
            i += 1
        first, last, orig_start = start, end, start + offset
        while i < len(pieces) and pieces[i][0] < end:
            cs, ce, os_, oe = pieces[i]
            if cs < first:
                first, orig_start = cs, os_
            last = max(last, ce)
            offset = oe - ce
            i += 1
        new = first + shift
        out.append((new, new + (start - first) + size + (last - end), orig_start, last + offset))
        shift += size - (end - start)
    out += [(cs + shift, ce + shift, os_, oe) for cs, ce, os_, oe in pieces[i:]]
    return out


def occurrences(data: bytes, value: bytes) -> list[tuple[int, int, int]]:
    """Where ``data.replace(value, MASK_B)`` replaces, as spans for :func:`compose`."""
    out = []
    at = data.find(value)
    while at >= 0:
        out.append((at, at + len(value), len(MASK_B)))
        at = data.find(value, at + len(value))
    return out


def unshown(
    raw: bytes, view: bytes, masked: bytes, pieces: list[tuple[int, int, int, int]]
) -> bytes:
    """``raw`` with the masks of its view put in: each piece's characters (``view[os:oe]``,
    found in ``raw`` between its escape sequences) replaced by the mask
    (``masked[cs:ce]``), the sequences among them kept after it, the rest of ``raw`` as it
    was. The view has the raw bytes' newlines (no escape sequence holds one), so each piece
    is looked for on its own lines only: the cost is that of the lines that hold a mask."""
    out: list[bytes] = []
    last = 0
    vline = rline = 0  # where the line of the current piece starts, in the view and the raw
    layout: Layout | None = None
    for cs, ce, start, end in pieces:
        while (nl := view.find(b"\n", vline, start)) >= 0:
            vline, rline = nl + 1, raw.find(b"\n", rline) + 1
        if layout is None or layout.lo != rline or end - vline > layout.size:
            layout = Layout(raw, rline, _line_end_after(raw, view, vline, rline, end - 1))
        first = layout.raw_at(start - vline)
        stop = layout.raw_at(end - 1 - vline) + 1
        out += [raw[last:first], masked[cs:ce], layout.escapes(raw, first, stop)]
        last = stop
    out.append(raw[last:])
    return b"".join(out)


def _line_end_after(raw: bytes, view: bytes, vline: int, rline: int, at: int) -> int:
    """The end (after its newline) in ``raw`` of the line holding character ``at`` of the
    view, counting lines from the one starting at ``vline`` (``rline`` in ``raw``)."""
    end = view.find(b"\n", at)
    lines = view.count(b"\n", vline, len(view) if end < 0 else end)
    for _ in range(lines):
        rline = raw.find(b"\n", rline) + 1
    if end < 0:
        return len(raw)
    return raw.find(b"\n", rline) + 1

