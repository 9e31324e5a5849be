"""An expectation as a runbook writes it, parsed: exact text, a glob, or PEP 440 comparisons.

:class:`Spec` parses what follows ``=`` in an ``expect`` table and says whether a value meets
it; comparisons are :mod:`packaging` specifiers (``~=``, ``==2.4.*`` and ``===`` included).
What this module adds are the errors a runbook author can act on (``=>`` is not an operator,
a local label goes only with ``==``) and the hints a failed check prints (a nightly sorts
before its release). What each form means is docs/runbook.md, "Expectations".
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, Specifier

from journal.errors import BadInput
from journal.versions import Version, parse_version

#: What ``packages.NAME`` resolves to when the snapshot has no such distribution.
NOT_INSTALLED = "not installed"

_OPERATORS = ("==", "!=", ">=", "<=", ">", "<", "~=", "===")
_OPERATOR_CHARS = "<>=!~"
_GLOB_CHARS = "*?["
_CLAUSE = re.compile(r"^(===|~=|==|!=|>=|<=|=>|=<|>|<|=|!)\s*(.*)$", re.DOTALL)
_TYPOS = {"=>": ">=", "=<": "<=", "=": "==", "!": "!="}


class BadSpec(BadInput):
    """An expectation or key a runbook holds that cannot be understood (``">>2"``, ``[]``).

    It is bad input (exit status 2); ``key`` names the key and ``problem`` says what is wrong.
    """

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"{key}: {problem}" if key else problem)


# --- expectations ------------------------------------------------------------------------


@dataclass(frozen=True)
class Clause:
    """One comparison of a range, ``>=2.28``: a PEP 440 specifier (:mod:`packaging` judges it)."""

    op: str
    operand: str
    specifier: Specifier = field(compare=False, repr=False)

    @property
    def has_local(self) -> bool:
        """Whether the operand names a local variant (``==2.10.0+cu128``)."""
        return "+" in self.operand

    def holds(self, actual: Version) -> bool:
        """Whether ``actual`` satisfies this clause, as PEP 440 says (a local label is
        ignored unless the operand names one; ``<2.12`` keeps 2.12's pre-releases out)."""
        if self.op == "===":
            return actual.text.lower() == self.operand.lower()
        return actual.parsed is not None and self.specifier.contains(
            actual.parsed, prereleases=True
        )

    def __str__(self) -> str:
        return f"{self.op}{self.operand}"


SpecKind = Literal["exact", "glob", "compare", "value", "one_of"]


@dataclass(frozen=True)
class Spec:
    """A parsed expectation: what a key's value must be for the check to pass.

    ``text`` is the expectation as the runbook wrote it (TOML/JSON spelling for numbers,
    booleans and lists); ``kind`` says how it matches (see the module docstring).
    """

    text: str
    kind: SpecKind
    pattern: str = ""
    clauses: tuple[Clause, ...] = ()
    value: bool | int | float | None = None
    options: tuple[Spec, ...] = field(default=())

    @classmethod
    def parse(cls, raw: object, key: str = "") -> Spec:
        """Parse an expectation as TOML gives it; raises :class:`BadSpec` naming ``key``."""
        if isinstance(raw, list):
            if not raw:
                raise BadSpec(key, "an empty list allows no value at all; give one or more")
            options = []
            for item in raw:
                if isinstance(item, list):
                    raise BadSpec(key, f"a list inside a list ({_spelled(raw)}) means nothing")
                options.append(cls.parse(item, key))
            return cls(_spelled(raw), "one_of", options=tuple(options))
        if isinstance(raw, bool):
            return cls(_spelled(raw), "value", value=raw)
        if isinstance(raw, int | float):
            if isinstance(raw, float) and not math.isfinite(raw):
                raise BadSpec(key, f"{raw} is not a value a probe can report")
            return cls(_spelled(raw), "value", value=raw)
        if isinstance(raw, str):
            return cls._parse_text(raw, key)
        if isinstance(raw, datetime | date | time):
            raise BadSpec(key, f"a date or time ({raw}) is not an expectation; quote it as text")
        if isinstance(raw, dict):
            raise BadSpec(
                key,
                "a table is not an expectation; give text, a number, a boolean or a list of them",
            )
        raise BadSpec(key, f"{raw!r} is not an expectation")

    @classmethod
    def _parse_text(cls, raw: str, key: str) -> Spec:
        stripped = raw.strip()
        parts = [part.strip() for part in stripped.split(",")]
        if any(part[:1] in _OPERATOR_CHARS and part for part in parts):
            clauses = tuple(_parse_clause(part, raw, key) for part in parts)
            return cls(raw, "compare", clauses=clauses)
        if stripped != raw:
            raise BadSpec(
                key,
                f"{raw!r} has spaces around it, which an exact match would "
                f"require; write {stripped!r}",
            )
        if any(char in raw for char in _GLOB_CHARS):
            return cls(raw, "glob", pattern=raw)
        return cls(raw, "exact", pattern=raw)

    def matches(self, value: Any) -> bool:
        """Whether ``value`` (a probe field or package version, JSON-able) meets this."""
        if self.kind == "one_of":
            return any(option.matches(value) for option in self.options)
        if self.kind == "value":
            return _same_value(self.value, value)
        if self.kind == "exact":
            return _text(value) == self.pattern
        if self.kind == "glob":
            return fnmatch.fnmatchcase(_text(value), self.pattern)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            return False
        version = parse_version(str(value))  # '===' compares text PEP 440 may reject
        return all(clause.holds(version) for clause in self.clauses)

    def describe(self) -> str:
        """The expectation in a sentence's words: ``>=2.28``, ``one of 13.0, 13.1``."""
        if self.kind == "one_of":
            return "one of " + ", ".join(option.describe() for option in self.options)
        return self.text

    def hint(self, value: Any) -> str | None:
        """Why a value that failed may surprise a reader, with what to write instead."""
        if self.kind == "one_of":
            hints = (option.hint(value) for option in self.options)
            return next((h for h in hints if h), None)
        if self.kind == "value":
            if isinstance(value, str) and value == self.text:
                return f"it is the text {json.dumps(value)}; quote the expectation to match text"
            return None
        if self.kind == "exact":
            mine, theirs = _as_version(self.pattern), _as_version(value)
            if mine is not None and theirs is not None and mine == theirs:
                return (
                    f"equal as versions but not as text; write =={self.pattern} to compare versions"
                )
            return None
        if self.kind != "compare":
            return None
        version = _as_version(value)
        if version is None:
            return "which is not a version"
        release = parse_version(".".join(str(part) for part in version.release))
        if version.public != release.text and parse_version(version.public) < release:
            below = [c for c in self.clauses if c.op == "<" and not c.holds(version)]
            if below and parse_version(below[0].operand) == release:
                return (
                    f"PEP 440 keeps {release}'s own dev and pre-releases out of "
                    f"<{below[0].operand}; write <{release}a0 to let its nightlies in"
                )
            if all(clause.holds(release) for clause in self.clauses):
                return (
                    f"a dev or pre-release sorts before its release; write "
                    f">={release}.dev0 to admit {release}'s nightlies"
                )
        return None


def _parse_clause(part: str, raw: str, key: str) -> Clause:
    """One comma-separated part of a comparison expectation."""
    if not part:
        raise BadSpec(key, f"{raw!r} has an empty part between its commas")
    match = _CLAUSE.match(part)
    if not match:
        raise BadSpec(
            key,
            f"{part!r} in {raw!r} has no comparison operator; in a range every part needs one "
            f"of {', '.join(_OPERATORS)} (a list gives alternatives)",
        )
    op, operand = match.group(1), match.group(2).strip()
    if op in _TYPOS:
        raise BadSpec(key, f"{op!r} in {raw!r} is not an operator; did you mean {_TYPOS[op]!r}?")
    if not operand:
        raise BadSpec(key, f"{raw!r}: {op!r} is not followed by a version")
    if operand[0] in _OPERATOR_CHARS:
        raise BadSpec(key, f"{raw!r}: {op!r} is followed by {operand!r}, which is not a version")
    if op == "===":
        return Clause(op, operand, Specifier(f"==={operand}"))
    wildcard = operand.endswith(".*")
    if wildcard and op not in ("==", "!="):
        raise BadSpec(
            key,
            f"{raw!r}: a wildcard ({operand!r}) goes only with == or !=; a glob without an "
            f"operator does it too: {operand!r}",
        )
    version = parse_version(operand[:-2] if wildcard else operand)
    if version.parsed is None:
        raise BadSpec(
            key, f"{raw!r}: {operand!r} is not a version (PEP 440, like 2.28 or 2.12.0.dev0)"
        )
    if version.local is not None and (wildcard or op not in ("==", "!=")):
        raise BadSpec(
            key,
            f"{raw!r}: a local variant (+{version.local}) goes only with == or != and a whole "
            f"version; to require a variant use a glob such as '*+{version.local}'",
        )
    if op == "~=" and len(version.release) < 2:
        raise BadSpec(
            key, f"{raw!r}: '~=' needs a version of two parts or more, like ~=2.4 (>=2.4,<3)"
        )
    try:
        specifier = Specifier(f"{op}{operand}")
    except InvalidSpecifier:
        raise BadSpec(key, f"{raw!r}: {part!r} is not a PEP 440 comparison") from None
    return Clause(op, operand, specifier)


def _spelled(raw: object) -> str:
    """An expectation as TOML spells it (JSON's spelling agrees for these values)."""
    return raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)


def _text(value: Any) -> str:
    """A value as exact and glob expectations see it: text as is, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _same_value(expected: bool | int | float | None, value: Any) -> bool:
    """Equality of a TOML number or boolean with a probe's value; ``true`` is never ``1``."""
    if isinstance(expected, bool) or isinstance(value, bool):
        return isinstance(expected, bool) and isinstance(value, bool) and expected is value
    return isinstance(value, int | float) and value == expected


def _as_version(value: Any) -> Version | None:
    """``value`` as a PEP 440 version (text or a number), or None when it is not one."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    version = parse_version(str(value))
    return version if version.release else None
