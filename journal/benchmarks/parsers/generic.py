"""The ``regex`` parser (the runbook's own patterns) and ``builtin`` (JSON lines printed by
journal/benchmarks/scripts/gpu.py)."""

from __future__ import annotations

import json
import re

from journal.benchmarks.parsers._text import Group, ParserError, Text, number
from journal.userregex import RegexTimeout, UserRegex, compile_user, find_named

#: Matches of one pattern beyond which the rest of the text is not searched.
MAX_MATCHES = 100_000


def compile_patterns(patterns: list[str]) -> list[UserRegex]:
    """The regex parser's patterns, compiled with ``re.M`` (for RE2 where it takes them: see
    :mod:`journal.userregex`); ParserError saying which pattern is wrong and why: not a
    string, not a valid regex, or without a named group."""
    if isinstance(patterns, str) or not isinstance(patterns, list):
        raise ParserError("expected a list of regex patterns")
    if not patterns:
        raise ParserError(
            "the regex parser needs at least one pattern, e.g. "
            "'Throughput: (?P<tokens_per_s>[0-9.]+) tok/s'"
        )
    compiled = []
    for pattern in patterns:
        if not isinstance(pattern, str):
            raise ParserError(f"pattern {pattern!r} is not a string")
        try:
            regex = compile_user(pattern, re.M)
        except re.error as exc:
            raise ParserError(f"pattern {pattern!r} is not a valid regex: {exc}") from None
        if not regex.groupindex:
            raise ParserError(
                f"pattern {pattern!r} has no named group: each figure is a group named after "
                "its metric, e.g. 'Throughput: (?P<tokens_per_s>[0-9.]+) tok/s'"
            )
        compiled.append(regex)
    return compiled


def regex(doc: Text, patterns: list[str], units: dict[str, str]) -> tuple[list[Group], list[str]]:
    """Every named group of every match of every pattern: a figure named after the group,
    unless what it matched is not a number; and why a pattern read nothing (it ran past its
    time limit: see :mod:`journal.userregex`)."""
    group = Group(0)
    errors: list[str] = []
    for pattern in compile_patterns(patterns):
        try:
            found = find_named(pattern, doc.text, MAX_MATCHES)
        except RegexTimeout as exc:
            errors.append(str(exc))
            continue
        for name, text, pos in found:
            value = number(text.strip())
            if value is not None:
                group.add(name, value, units.get(name), pos, {})
    return [group], errors


def builtin(doc: Text) -> tuple[list[Group], list[str], list[str]]:
    """The figures of gpu.py's JSON lines, the reasons of those it skipped (the host cannot
    run them) and of those it could not measure (``error``: the env is broken)."""
    group = Group(0)
    skipped: list[str] = []
    errors: list[str] = []
    for start, end in doc.spans_with('"metric"'):
        line = doc.line(start, end).strip()
        if not line.startswith("{"):
            continue
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if not isinstance(item, dict) or not isinstance(item.get("metric"), str):
            continue
        value, unit, labels = item.get("value"), item.get("unit"), item.get("labels") or {}
        if value is None and item.get("error"):
            errors.append(f"{item['metric']}: {item['error']}")
            continue
        if value is None and item.get("skipped"):
            skipped.append(f"{item['metric']}: {item['skipped']}")
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if value != value or value in (float("inf"), float("-inf")):
            continue
        group.add(
            item["metric"],
            float(value),
            unit if isinstance(unit, str) else None,
            start,
            {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
        )
    return [group], skipped, errors
