"""What every parser shares: the result types, and a benchmark's output text read by line.

The parsers scan big outputs (a 50 MB log) with ``str.find`` for anchor strings and run their
regexes only on the lines found; :class:`Text` turns a position into a 1-based line number
and the line as printed, counting newlines from the nearest position already counted.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

#: A figure as the tools print it: ``54.10``, ``232.167``, ``1.2e+03`` (never inf or nan).
NUMBER = r"(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)"
#: Lines holding a needle beyond which :meth:`Text.spans_with` stops collecting.
MAX_LINES = 100_000


class ParserError(ValueError):
    """Bad parser options: an unknown parser, a pattern that is not a usable regex."""


@dataclass(frozen=True)
class Parsed:
    """One figure read from a benchmark's output: ``name`` (snake_case, e.g.
    ``output_token_throughput``), ``value``, ``unit`` (``tok/s``, ``GB/s``, ``ms``; None for
    a count), ``labels`` (what tells figures of one run apart, e.g. ``size`` and
    ``placement`` of an nccl-tests row; empty where nothing needs telling apart), and where it
    was read: the 1-based ``line`` and its ``text`` as printed, without the newline."""

    name: str
    value: float
    unit: str | None
    labels: dict[str, str]
    line: int
    text: str


@dataclass(frozen=True)
class Problem:
    """Why a run's figures cannot be trusted (``reason``, a sentence), and the line of the
    output that shows it."""

    reason: str
    line: int
    text: str


@dataclass
class ParseResult:
    """What a parser read: the figures, the problems that make them untrustworthy, and the
    figures a benchmark skipped on purpose (``skipped``: ``"allreduce_busbw: needs 2 or more
    GPUs, found 1"``), which are no problem of trust; and why part of the output could not be
    read (``errors``: a runbook's pattern past its time limit), which fails the run."""

    figures: list[Parsed]
    problems: list[Problem]
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def number(text: str) -> float | None:
    """``text`` as a finite float, or None (``inf``, ``nan``, ``N/A``, words)."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def snake(text: str) -> str:
    """``Mean TTFT`` -> ``mean_ttft``, ``P99.9 ITL`` -> ``p99_9_itl``."""
    out = "".join(c if c.isalnum() else "_" for c in text.strip().lower())
    return "_".join(p for p in out.split("_") if p)


class Text:
    """A benchmark's output, read by line."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._marks: list[tuple[int, int]] = [(0, 1)]  # (position, its line number), sorted

    def line_number(self, pos: int) -> int:
        """The 1-based number of the line holding ``pos``."""
        index = bisect.bisect_right(self._marks, (pos, 1 << 62)) - 1
        start, line = self._marks[index]
        line += self.text.count("\n", start, pos)
        if pos - start > 4096:  # remember it: later look-ups near here stay cheap
            self._marks.insert(index + 1, (pos, line))
        return line

    def span(self, pos: int) -> tuple[int, int]:
        """(start, end) of the line holding ``pos``, end at its newline."""
        start = self.text.rfind("\n", 0, pos) + 1
        end = self.text.find("\n", pos)
        return start, len(self.text) if end == -1 else end

    def next_span(self, end: int) -> tuple[int, int] | None:
        """The line after the one that ends at ``end``, or None at the end of the text."""
        if end >= len(self.text):
            return None
        return self.span(end + 1)

    def line(self, start: int, end: int) -> str:
        """The line from ``start`` to ``end`` as printed (a carriage return at its end aside)."""
        return self.text[start:end].rstrip("\r")

    def spans_with(self, *needles: str, start: int = 0) -> list[tuple[int, int]]:
        """(start, end) of every line holding one of ``needles``, in order, found with
        ``str.find`` (at most MAX_LINES of them)."""
        text = self.text
        spans: set[tuple[int, int]] = set()
        for needle in needles:
            pos = text.find(needle, start)
            while pos != -1 and len(spans) < MAX_LINES:
                span = self.span(pos)
                spans.add(span)
                pos = text.find(needle, span[1])
        return sorted(spans)

    def problem(self, reason: str, pos: int) -> Problem:
        """A problem shown by the line holding ``pos``."""
        start, end = self.span(pos)
        return Problem(reason, self.line_number(start), self.line(start, end))


@dataclass
class Group:
    """The figures of one summary a run printed (one bench_serving result, one nccl-tests
    table): when there is more than one, each figure is labelled with its ``summary``."""

    start: int
    items: list[tuple[str, float, str | None, dict[str, str], int]] = field(default_factory=list)

    def add(
        self, name: str, value: float, unit: str | None, pos: int, labels: dict[str, str]
    ) -> None:
        """A figure read at position ``pos``."""
        self.items.append((name, value, unit, labels, pos))


def assemble(
    doc: Text,
    groups: list[Group],
    problems: list[Problem],
    units: dict[str, str] | None = None,
) -> ParseResult:
    """The figures of ``groups`` in order of the text, labelled ``summary`` = 1, 2, … when
    more than one group has figures; ``units`` (name -> unit) overrides the units read."""
    kept = sorted((g for g in groups if g.items), key=lambda g: g.start)
    numbered = len(kept) > 1
    figures: list[Parsed] = []
    for index, group in enumerate(kept, 1):
        for name, value, unit, labels, pos in group.items:
            if numbered:
                labels = {**labels, "summary": str(index)}
            if units and name in units:
                unit = units[name]
            start, end = doc.span(pos)
            figures.append(
                Parsed(name, value, unit, labels, doc.line_number(start), doc.line(start, end))
            )
    figures.sort(key=lambda f: f.line)
    problems.sort(key=lambda p: p.line)
    return ParseResult(figures, problems)
