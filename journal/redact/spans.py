"""What a redaction pattern is, what it masks (a :class:`Span`), and how its matches are
found and masked: the vocabulary that the patterns of :mod:`journal.redact.names`,
:mod:`~journal.redact.keys`, :mod:`~journal.redact.flags` and :mod:`~journal.redact.shapes`
are written in, with the value shapes they share."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple

MASK = "[REDACTED]"
MASK_B = MASK.encode()

# Value shapes. A quoted value keeps its escapes; a bare one ends at a blank or a delimiter.
DQ = rb'"(?:[^"\\\r\n]|\\.)*"'
SQ = rb"'(?:[^'\\\r\n]|\\.)*'"
ESCAPED_DQ = rb'\\"(?:[^"\\\r\n]|\\[^"\r\n])*\\"'  # \"…\" in a JSON string's JSON
ESCAPED_SQ = rb"\\'(?:[^'\\\r\n]|\\[^'\r\n])*\\'"
_BARE = rb"[^\s\"';&|]+"
#: An assignment's or a flag's value.
VALUE = rb"(?P<v>" + DQ + rb"|" + SQ + rb"|" + _BARE + rb")"
#: Not masked again (each pattern's match is looked for in data that earlier ones masked).
FRESH = rb"(?!\\?[\"']?\[redacted\])"
FRESH_CASED = rb"(?!\\?[\"']?\[REDACTED\])"


class Span(NamedTuple):
    """What a pattern masks: ``data[start:end]`` becomes ``replacement``; ``lead`` to
    ``stop`` is all that it was recognised by (a key's name, a flag, a URL's ``@``)."""

    start: int
    end: int
    replacement: bytes
    kind: str
    lead: int
    stop: int = 0


#: What finds a pattern's spans: (the data as matched, lowercased for a case-insensitive
#: pattern; the match; the data as printed; strict), or None to leave the match. ``strict``
#: (where a cut may go, :func:`journal.redact.cuts.safe_cut`) drops the exceptions that hang on what
#: the value is: its end may not have been printed yet.
SpanOf = Callable[[bytes, re.Match[bytes], bytes, bool], "Span | None"]


class Pattern(NamedTuple):
    """A way a secret is recognised: a regular expression led by a literal, what gates it, and
    what of a match it masks; ``kind`` is what the record of a mask says was found."""

    kind: str
    #: led by a literal, with a group ``v`` (the value masked) or masking the whole match
    regex: re.Pattern[bytes]
    #: bytes of which the data must hold at least one to look further (found at memchr speed)
    gates: bytes = b""
    #: matched against the lowercased data (the spans are the same: only A-Z change)
    fold: bool = False
    #: lowercase words of which the data must hold one, for regexes not led by one of them
    needles: tuple[bytes, ...] = ()
    #: what to mask for a match, or None to leave it (default: group ``v``, or the match)
    span: SpanOf | None = None


def spans(pattern: Pattern, data: bytes, lower: bytes | None, strict: bool = False) -> list[Span]:
    """What ``pattern`` masks in ``data``, in order; ``strict``: all that could be a secret
    once the rest of its value is printed (no evidence left out by what the value is)."""
    subject = lower if pattern.fold and lower is not None else data
    if pattern.fold and lower is None:
        subject = data.lower()
    out: list[Span] = []
    for m in pattern.regex.finditer(subject):
        if pattern.span is not None:
            found = pattern.span(subject, m, data, strict)
            if found is None:
                continue
        elif "v" in pattern.regex.groupindex:
            found = Span(*m.span("v"), MASK_B, pattern.kind, m.start())
        else:
            found = Span(*m.span(), MASK_B, pattern.kind, m.start())
        if not out or found.start >= out[-1].end:
            out.append(found._replace(stop=max(found.end, m.end())))
    return out


def masked(data: bytes, found: list[Span], counts: dict[str, int]) -> bytes:
    """``data`` with each span of ``found`` (in order, apart) replaced, counted by its kind in
    ``counts``."""
    pieces = []
    last = 0
    for start, end, replacement, kind, _, _ in found:
        pieces += [data[last:start], replacement]
        last = end
        counts[kind] = counts.get(kind, 0) + 1
    pieces.append(data[last:])
    return b"".join(pieces)

