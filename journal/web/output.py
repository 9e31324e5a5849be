"""A step run's output as numbered lines, read a page at a time, with ANSI colours as HTML.

Lines are numbered as the pitfall evidence numbers them (:meth:`journal.reading.subject.Run.
line_at`): the run's chunks in stored order, both streams interleaved, split at ``\\n``,
1-based. A line may hold pieces of both streams (a chunk that did not end its line), so a line
is a list of (stream, text) pieces.

A 50 MB log is never read at once: :func:`spans` walks the chunks once, a few at a time, to
learn where each one starts (kept per run until it gains a chunk), and a page reads only the
chunks that hold its lines.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field

from ansi2html import Ansi2HTMLConverter
from markupsafe import Markup, escape

from journal.events import OutputChunk
from journal.output import chunk_text
from journal.store import EventStore


@dataclass(frozen=True)
class ChunkSpan:
    """Where one stored chunk sits: its event, stream, the line its first byte is on and how
    many line ends it holds."""

    seq: int
    stream: str
    first_line: int
    newlines: int

    @property
    def last_line(self) -> int:
        return self.first_line + self.newlines


@dataclass
class OutputSpans:
    """The chunk layout of one run's output: how many lines it has and where each chunk is."""

    chunks: list[ChunkSpan] = field(default_factory=list)
    ends_with_newline: bool = True

    @property
    def last_seq(self) -> int:
        return self.chunks[-1].seq if self.chunks else 0

    @property
    def lines(self) -> int:
        """Number of lines: line ends, plus one for an unfinished last line."""
        if not self.chunks:
            return 0
        last = self.chunks[-1].last_line
        return last - 1 if self.ends_with_newline else last

    def pages(self, per_page: int) -> int:
        return max(1, -(-self.lines // per_page))


@dataclass
class OutputLine:
    """One numbered line of output: its pieces as (stream, html), whether it is whole, and
    whether it continues a line already shown (live appending replaces that one)."""

    number: int
    pieces: list[tuple[str, Markup]] = field(default_factory=list)
    complete: bool = False
    continued: bool = False
    first_seq: int = 0
    shown: int = 0  # characters of the line shown
    hidden: int = 0  # characters past LINE_SHOWN, left out of the page (the raw output has them)

    @property
    def streams(self) -> list[str]:
        return list(dict.fromkeys(stream for stream, _ in self.pieces))


class SpanCache:
    """The chunk layout of recently viewed runs, dropped when a run gains a chunk."""

    def __init__(self, size: int = 64) -> None:
        self._cache: OrderedDict[str, OutputSpans] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, store: EventStore, run_id: str) -> OutputSpans:
        last = store.last_output_seq(run_id)
        with self._lock:
            cached = self._cache.get(run_id)
            if cached is not None and cached.last_seq == last:
                self._cache.move_to_end(run_id)
                return cached
        found = spans(store, run_id, cached)
        with self._lock:
            self._cache[run_id] = found
            while len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return found


def spans(store: EventStore, run_id: str, known: OutputSpans | None = None) -> OutputSpans:
    """Walk the run's chunks (those after ``known``, which is extended) and lay them out."""
    layout = OutputSpans(list(known.chunks), known.ends_with_newline) if known else OutputSpans()
    line = layout.chunks[-1].last_line if layout.chunks else 1
    for seq, chunk in store.output_chunks(run_id, after=layout.last_seq):
        text = chunk_text(chunk)
        newlines = text.count("\n")
        layout.chunks.append(ChunkSpan(seq, chunk.stream, line, newlines))
        line += newlines
        if text:
            layout.ends_with_newline = text.endswith("\n")
    return layout


def read_lines(
    store: EventStore, run_id: str, layout: OutputSpans, first: int, last: int
) -> list[OutputLine]:
    """Lines ``first``..``last`` (inclusive), reading only the chunks that hold them."""
    wanted = [c for c in layout.chunks if c.first_line <= last and c.last_line >= first]
    if not wanted:
        return []
    chunks = store.output_chunks(run_id, after=wanted[0].seq - 1, upto=wanted[-1].seq)
    return [line for line in assemble(chunks, wanted[0].first_line) if first <= line.number <= last]


def lines_after(
    store: EventStore, run_id: str, layout: OutputSpans, after: int
) -> list[OutputLine]:
    """The lines of the chunks stored after event ``after`` (for live appending). A line that
    an earlier chunk began comes whole, with the number (and so the id) it was shown with,
    marked ``continued``: a live view replaces that line rather than appending it."""
    fresh = [c for c in layout.chunks if c.seq > after]
    if not fresh:
        return []
    start = fresh[0].first_line
    earlier = [c for c in layout.chunks if c.seq <= after and c.last_line >= start]
    begin = earlier[0] if earlier else fresh[0]
    lines = assemble(store.output_chunks(run_id, after=begin.seq - 1), begin.first_line)
    lines = [line for line in lines if line.number >= start]
    if lines and lines[0].pieces and lines[0].first_seq <= after:
        lines[0].continued = True
    return lines


#: Characters of one line a page shows; the rest of a longer line is counted and linked to the
#: raw output, so that a 200 MB line makes a page a browser opens.
LINE_SHOWN = 10_000


def assemble(chunks: Iterable[tuple[int, OutputChunk]], first_line: int) -> list[OutputLine]:
    """Split consecutive chunks into lines, the first chunk starting on ``first_line``; a
    line is shown up to :data:`LINE_SHOWN` characters, the rest counted."""
    lines: list[OutputLine] = []
    current = OutputLine(first_line)
    for seq, chunk in chunks:
        parts = chunk_text(chunk).split("\n")
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            room = LINE_SHOWN - current.shown
            if len(part) > room:
                current.hidden += len(part) - max(room, 0)
                part = part[: max(room, 0)]
            if part:
                if not current.pieces:
                    current.first_seq = seq
                current.shown += len(part)
                current.pieces.append((chunk.stream, to_html(part, whole=not last)))
            if not last:
                current.complete = True
                lines.append(current)
                current = OutputLine(current.number + 1)
    if current.pieces:
        lines.append(current)
    return lines


# Terminal controls that ansi2html does not turn into markup: OSC sequences (window titles,
# hyperlinks: links from a host are shown as their text), CSI sequences other than colours,
# other escapes, and C0 controls but tab. Colours (CSI ... m) and VT100 box drawing stay.
_OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?")
_CSI_OTHER = re.compile(r"\x1b\[(?![\d;:]*m)[0-?]*[ -/]*[@-~]?")
_ESC_OTHER = re.compile(r"\x1b(?![\[(])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f]")

_CONVERTER = threading.local()


def _converter() -> Ansi2HTMLConverter:
    conv = getattr(_CONVERTER, "conv", None)
    if conv is None:
        conv = _CONVERTER.conv = Ansi2HTMLConverter(inline=False, dark_bg=True, linkify=False)
    return conv


def to_html(text: str, whole: bool = True) -> Markup:
    """One piece of a line as safe HTML: escaped, colours as ansi2html's classes.

    A carriage return inside a whole line (a progress bar redrawn) keeps what a terminal
    shows last; a trailing one is dropped, as the evidence text drops it.
    """
    if whole:
        text = text.rstrip("\r")
        if "\r" in text:
            text = text.rsplit("\r", 1)[1]
    if "\x1b" not in text:
        return escape(_CONTROL.sub("", text.replace("\r", "")))
    text = _OSC.sub("", text)
    text = _CSI_OTHER.sub("", text)
    text = _ESC_OTHER.sub("", text)
    text = _CONTROL.sub("", text.replace("\r", ""))
    # ansi2html escapes &, < and > before it adds its spans (see tests/test_web.py).
    return Markup(_converter().convert(text, full=False))


def ansi_css() -> str:
    """ansi2html's style sheet for its classes (dark background, as the output panel)."""
    from ansi2html.style import get_styles

    return "\n".join(str(rule) for rule in get_styles(True, True, "ansi2html")) + "\n"


def page_of(line: int, per_page: int) -> int:
    """The page (1-based) that holds line ``line``."""
    return (max(line, 1) - 1) // per_page + 1
