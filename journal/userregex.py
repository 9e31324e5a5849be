"""Regexes the runbook supplies (a benchmark's ``pattern``, a probe's ``capture``), run on
what a host printed: neither is trusted, and a backtracking engine takes exponential time on
a pattern like ``(a+)+$`` against ``"a" * 40 + "b"`` (minutes, hours: a hang).

A pattern is read with Python's :mod:`re` syntax (its error messages are the ones shown, and
its named groups the figures). It then runs on Google's RE2 (the ``google-re2`` package, module
``re2``), whose time is linear in the text whatever the pattern, when that is installed and the
pattern is one RE2 takes; a pattern RE2 refuses (a backreference, a lookaround, ``\\Z``), or
every pattern where ``re2`` is missing, runs on :mod:`re` in a forked child process that is
killed at :data:`TIME_LIMIT_S`, which :class:`RegexTimeout` then says.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import time
from dataclasses import dataclass, field
from typing import Any

try:
    import re2
except ImportError:  # pragma: no cover - google-re2 is a dependency; kept working without it
    re2 = None

#: Seconds a pattern may run on Python's backtracking engine over one text (env
#: ``JOURNAL_REGEX_LIMIT_S`` sets another).
TIME_LIMIT_S = 5.0


def time_limit() -> float:
    """The limit in force: ``JOURNAL_REGEX_LIMIT_S`` when it is a positive number, else 5 s."""
    try:
        given = float(os.environ.get("JOURNAL_REGEX_LIMIT_S", ""))
    except ValueError:
        return TIME_LIMIT_S
    return given if 0 < given < float("inf") else TIME_LIMIT_S


#: (group name, what it matched, where the match of the group starts) for each named group of
#: each match, in order of the text.
Found = list[tuple[str, str, int]]


class RegexTimeout(Exception):
    """A pattern ran past its time limit on a text: nothing it found is kept."""

    def __init__(self, pattern: str, limit: float) -> None:
        self.pattern = pattern
        self.limit = limit
        super().__init__(
            f"the pattern {pattern!r} ran past its {limit:g} s limit on this output (it "
            "backtracks without end on text like this): nothing was read with it; make it "
            "unambiguous, e.g. no nested repeats like (a+)+"
        )


@dataclass(frozen=True)
class UserRegex:
    """A runbook's pattern, compiled for the engine it runs on (``re2``, else ``re``)."""

    pattern: str
    engine: str
    #: Its named groups and their numbers, and how many groups it has.
    groupindex: dict[str, int] = field(default_factory=dict)
    groups: int = 0
    compiled: Any = None


def compile_user(pattern: str, flags: int = re.M) -> UserRegex:
    """``pattern`` compiled (``re.error`` for bad syntax, as Python's ``re`` says it); with
    flags other than ``re.M`` and ``re.I`` it runs on ``re``."""
    checked = re.compile(pattern, flags)
    if re2 is not None and not flags & ~(re.M | re.I):
        options = re2.Options()
        options.log_errors = False  # a refused pattern falls back to re without a word
        inline = "".join(c for f, c in ((re.M, "m"), (re.I, "i")) if flags & f)
        try:
            fast = re2.compile(f"(?{inline}){pattern}" if inline else pattern, options)
        except re2.error:
            pass
        else:
            if dict(fast.groupindex) == dict(checked.groupindex):
                return UserRegex(pattern, "re2", dict(fast.groupindex), checked.groups, fast)
    return UserRegex(pattern, "re", dict(checked.groupindex), checked.groups, checked)


def find_named(
    regex: UserRegex,
    text: str,
    most: int,
    limit: float | None = None,
    groups: dict[str, int] | None = None,
) -> Found:
    """Each named group (or each of ``groups``: name -> number) of each of the first ``most``
    matches of ``regex`` in ``text``; RegexTimeout once Python's engine has run ``limit``
    seconds on it (RE2 needs no limit)."""
    wanted = regex.groupindex if groups is None else groups
    if regex.engine == "re2" or not hasattr(os, "fork"):
        return _collect(regex, text, most, wanted)
    return _in_child(regex, text, most, time_limit() if limit is None else limit, wanted)


def _collect(regex: UserRegex, text: str, most: int, groups: dict[str, int]) -> Found:
    found: Found = []
    for count, match in enumerate(regex.compiled.finditer(text)):
        if count >= most:
            break
        for name, index in groups.items():
            value = match.group(index)
            if value is not None:
                found.append((name, value, match.start(index)))
    return found


def _in_child(
    regex: UserRegex, text: str, most: int, limit: float, groups: dict[str, int]
) -> Found:
    """:func:`_collect` in a forked child (it has the text already: nothing is copied to it),
    its findings sent back as JSON through a pipe; the child is killed at ``limit``."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: find, write, and leave without running any of the parent's exits
        code = 1
        try:
            os.close(reader)
            data = json.dumps(_collect(regex, text, most, groups)).encode()
            while data:
                data = data[os.write(writer, data) :]
            code = 0
        finally:
            os._exit(code)
    os.close(writer)
    chunks: list[bytes] = []
    deadline = time.monotonic() + limit
    finished = False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RegexTimeout(regex.pattern, limit)
            if select.select([reader], [], [], left)[0]:
                data = os.read(reader, 1 << 20)
                if not data:
                    finished = True
                    break
                chunks.append(data)
    finally:
        os.close(reader)
        if not finished:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"matching {regex.pattern!r} failed in its child process")
    return [(name, value, pos) for name, value, pos in json.loads(b"".join(chunks))]
