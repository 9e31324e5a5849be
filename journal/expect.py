"""Expectations: what a runbook says a step must leave behind, checked against what it did.

A runbook's ``expect`` table maps a *key* (where to look) to an *expectation* (what must be
there)::

    expect = { "torch.version" = "*+cu130", "torch.cuda" = "13.0", "nccl" = ">=2.28",
               "packages.numpy" = "==2.4.2", gpu_count = 8, "torch.cuda_available" = true }

This module is the pure engine (no I/O): :class:`Spec` parses an expectation, :func:`resolve`
finds a key's value in the :class:`Facts` a step produced (probe results and the package
snapshot taken after it), :func:`check` / :func:`check_all` turn both into :class:`Verdict`
objects, and :func:`validate` lets the runbook loader reject a bad table at load time.

Expectations
------------
- **exact** — a quoted string without operator or glob characters, compared *as text* with the
  value (``"13.0"`` passes for ``13.0``). Values that are not text are compared in their JSON
  spelling: ``"8"`` passes for ``8``, ``"true"`` for ``true``, ``"null"`` for ``null`` (a CPU
  torch's ``torch.cuda``). Text is text: ``"2.4"`` does **not** pass for ``2.4.0``, nor
  ``"2.10.0"`` for ``2.10.0+cu128`` — write ``"==2.4"`` to compare as versions.
- **glob** — a string with any of ``*?[``, matched case-sensitively against the value's text
  (:func:`fnmatch.fnmatchcase`): ``"*+cu130"``, ``"NVIDIA H*"``.
- **comparisons** — ``>=``, ``<=``, ``>``, ``<``, ``==``, ``!=`` followed by a PEP 440 version,
  and ranges joining them with commas (``">=2.28,<2.30"``: every part must hold). They compare
  versions, not text (:mod:`journal.versions`): ``==2.4`` passes for ``2.4.0``, ``>=2.28`` for
  ``2.28.9`` and for NCCL's ``2.28.3-1``. As PEP 440 says, an operand without a local label
  ignores the value's local label (``==2.10.0`` passes for ``2.10.0+cu128``, ``>2.10.0`` does
  not), and a local label (``==2.10.0+cu128``) is allowed only with ``==`` and ``!=``: to require
  a variant, use a glob (``"*+cu130"``). The order is plain PEP 440 order, in which a dev or
  pre-release comes *before* its release: ``2.12.0.dev20260226+cu130`` does **not** satisfy
  ``>=2.12`` — write ``>=2.12.0.dev0`` to admit the 2.12 nightlies (and ``<2.12.0.dev0`` to
  keep them out, since ``<2.12`` lets them in). A value that is not a PEP 440 version
  (``"not installed"``, ``null``, ``true``) fails every comparison, ``!=`` included. The
  operand must itself be a version: ``">=banana"``, ``">>2"``, ``"=>2"`` are bad expectations,
  and ``~=``, ``===`` and ``==2.4.*`` are not supported (a glob ``"2.4.*"`` or a range does it).
- **numbers and booleans** — TOML ``gpu_count = 8`` or ``"torch.cuda_available" = true``:
  compared as values, so ``8`` passes for ``8`` (or ``8.0``) but not for the text ``"8"``,
  and ``true`` passes only for ``true`` (never for ``1``).
- **lists** — ``["13.0", "13.1"]``: one of them (each element is any of the above).

Keys
----
- ``packages.NAME`` — NAME's version in the package snapshot taken after the step (NAME is
  normalized as PEP 503 does: ``Nvidia_NCCL.cu13`` is ``nvidia-nccl-cu13``), or the text
  ``not installed`` (so ``"packages.torchvision" = "not installed"`` checks a removal). With no
  snapshot, a probe's own ``packages`` field (``torch-env`` lists the ``nvidia-*`` wheels) is
  used, and a name it does not list is missing rather than "not installed".
- ``PROBE:path`` — ``path`` in that probe's result only (``torch-env:torch.version``).
- ``path`` — a dotted path looked up in every probe's result, in the order the probes ran; the
  first probe that has a readable value wins (one whose value is unavailable is used only when
  no probe can read it). A number indexes a list (``torch.devices.0.name``); a dict key that
  itself holds dots is found too (``system_nccl.libraries.0.path``).

A probe writes ``{"unavailable": "why"}`` for a field it cannot read (torch missing, NVML not
found); an expectation on that field, or on anything under it, fails with that reason.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any, Literal

from journal.errors import BadInput
from journal.versions import Version, parse_version

__all__ = [
    "Actual",
    "BadSpec",
    "Clause",
    "Facts",
    "NOT_INSTALLED",
    "Spec",
    "Verdict",
    "check",
    "check_all",
    "normalize_name",
    "resolve",
    "validate",
]

#: What ``packages.NAME`` resolves to when the snapshot has no such distribution.
NOT_INSTALLED = "not installed"

_OPERATORS = ("==", "!=", ">=", "<=", ">", "<")
_OPERATOR_CHARS = "<>=!~"
_GLOB_CHARS = "*?["
_CLAUSE = re.compile(r"^(===|~=|==|!=|>=|<=|=>|=<|>|<|=|!)\s*(.*)$", re.DOTALL)
_TYPOS = {"=>": ">=", "=<": "<=", "=": "==", "!": "!="}
_MAX_SHOWN = 120


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
    """One comparison of a range, ``>=2.28``: an operator and the version it compares with."""

    op: str
    version: Version

    @property
    def has_local(self) -> bool:
        """Whether the operand names a local variant (``==2.10.0+cu128``)."""
        return self.version.local is not None

    def holds(self, actual: Version) -> bool:
        """Whether ``actual`` satisfies this clause (local label ignored unless we name one)."""
        if not self.has_local:
            actual = parse_version(actual.public)
        target = self.version
        return {
            "==": actual == target,
            "!=": actual != target,
            ">=": actual >= target,
            "<=": actual <= target,
            ">": actual > target,
            "<": actual < target,
        }[self.op]

    def __str__(self) -> str:
        return f"{self.op}{self.version}"


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
        version = _as_version(value)
        return version is not None and all(clause.holds(version) for clause in self.clauses)

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
    if op in ("~=", "==="):
        raise BadSpec(
            key,
            f"{op!r} in {raw!r} is not supported; use a range such as "
            "'>=2.4,<2.5' or a glob such as '2.4.*'",
        )
    if not operand:
        raise BadSpec(key, f"{raw!r}: {op!r} is not followed by a version")
    if operand.endswith(".*"):
        raise BadSpec(
            key,
            f"{raw!r}: wildcards do not go with {op!r}; a glob without an "
            f"operator does it: {operand!r}",
        )
    if operand[0] in _OPERATOR_CHARS:
        raise BadSpec(key, f"{raw!r}: {op!r} is followed by {operand!r}, which is not a version")
    version = parse_version(operand)
    if not version.release:
        raise BadSpec(
            key, f"{raw!r}: {operand!r} is not a version (PEP 440, like 2.28 or 2.12.0.dev0)"
        )
    if version.local is not None and op not in ("==", "!="):
        raise BadSpec(
            key,
            f"{raw!r}: a local variant (+{version.local}) goes only with == or !=; to require a "
            f"variant use a glob such as '*+{version.local}'",
        )
    return Clause(op, version)


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


# --- facts and keys ----------------------------------------------------------------------


@dataclass(frozen=True)
class Facts:
    """What a step produced on one host, for expectations to look at.

    ``probes`` maps a probe's name to its JSON result, in the order the probes ran;
    ``packages`` is the package snapshot taken after the step (PEP 503 normalized name →
    ``{"name", "version", ...}``), or None when no snapshot was taken.
    """

    probes: Mapping[str, Any] = field(default_factory=dict)
    packages: Mapping[str, Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class Actual:
    """What a key resolved to: a value and where it came from, or why there is none.

    ``problem`` is None when ``value`` was read. Otherwise it says why the key cannot be
    checked, and ``value`` is the probe's ``{"unavailable": why}`` marker or None.
    """

    key: str
    value: Any = None
    source: str | None = None
    problem: str | None = None

    @property
    def found(self) -> bool:
        """Whether a value was read (an expectation can then be checked against it)."""
        return self.problem is None


def normalize_name(name: str) -> str:
    """A distribution name as PEP 503 compares it: lowercase, runs of ``-_.`` as one dash."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _split_key(key: str) -> tuple[str | None, str]:
    """``PROBE:path`` into its probe and path; raises :class:`BadSpec` for a malformed key."""
    if not isinstance(key, str) or not key.strip():
        raise BadSpec(str(key), "an expectation needs a key naming what to check")
    if key != key.strip():
        raise BadSpec(key, "the key has spaces around it")
    probe: str | None = None
    path = key
    if ":" in key:
        probe, path = key.split(":", 1)
        if not probe:
            raise BadSpec(key, "nothing before ':'; write PROBE:path, e.g. torch-env:nccl")
        if not path:
            raise BadSpec(key, f"nothing after '{probe}:'; write PROBE:path, e.g. {probe}:nccl")
    if probe is None and (path == "packages" or path == "packages."):
        raise BadSpec(key, "packages.NAME needs a distribution name, e.g. packages.numpy")
    if probe is None and path.startswith("packages."):
        return None, path
    if any(not part for part in path.split(".")):
        raise BadSpec(key, f"{path!r} has an empty part between its dots")
    return probe, path


def _unavailable(node: Any) -> str | None:
    """The reason when ``node`` is a probe's ``{"unavailable": why}`` marker."""
    if isinstance(node, Mapping) and isinstance(node.get("unavailable"), str):
        return node["unavailable"]
    return None


_MISSING = object()


def _walk(node: Any, parts: list[str]) -> tuple[Any, str | None]:
    """Follow ``parts`` from ``node``: (value, None), (marker, why) or (_MISSING, None)."""
    why = _unavailable(node)
    if why is not None:
        return node, why
    if not parts:
        return node, None
    if isinstance(node, list):
        head = parts[0]
        if head.isdigit() and int(head) < len(node):
            return _walk(node[int(head)], parts[1:])
        return _MISSING, None
    if isinstance(node, Mapping):
        for size in range(len(parts), 0, -1):  # longest first: a key may hold dots
            name = ".".join(parts[:size])
            if name in node:
                found = _walk(node[name], parts[size:])
                if found[0] is not _MISSING:
                    return found
    return _MISSING, None


def _paths(node: Any, prefix: str = "", depth: int = 0) -> Iterator[str]:
    """Every dotted path in a probe result (dicts and lists, a bounded walk), for suggestions."""
    if depth > 8:
        return
    if isinstance(node, Mapping) and _unavailable(node) is None:
        children: Iterator[tuple[str, Any]] = ((str(k), v) for k, v in node.items())
    elif isinstance(node, list):
        children = ((str(i), v) for i, v in enumerate(node[:16]))
    else:
        return
    for name, child in children:
        path = f"{prefix}.{name}" if prefix else name
        yield path
        yield from _paths(child, path, depth + 1)


def _close(key: str, candidates: list[str]) -> str:
    """``; close matches: a, b`` for the candidates that resemble ``key``, or nothing."""
    close = difflib.get_close_matches(key, list(dict.fromkeys(candidates)), n=3, cutoff=0.6)
    return f"; close matches: {', '.join(close)}" if close else ""


def _resolve_package(key: str, name: str, facts: Facts) -> Actual:
    """``packages.NAME``: the snapshot's version, ``not installed``, or a probe's ``packages``."""
    wanted = normalize_name(name)
    if facts.packages is not None:
        entry = facts.packages.get(wanted)
        if entry is None:  # a snapshot whose keys were not normalized
            entry = next(
                (
                    e
                    for e in facts.packages.values()
                    if normalize_name(str(e.get("name"))) == wanted
                ),
                None,
            )
        if entry is None:
            return Actual(key, NOT_INSTALLED, "packages")
        return Actual(key, entry.get("version"), "packages")
    for probe, result in facts.probes.items():
        listed = result.get("packages") if isinstance(result, Mapping) else None
        if isinstance(listed, Mapping):
            for listed_name, entry in listed.items():
                if normalize_name(str(listed_name)) == wanted:
                    version = entry.get("version") if isinstance(entry, Mapping) else entry
                    return Actual(key, version, probe)
    return Actual(key, None, None, f"no package snapshot was taken and no probe reported {key}")


def resolve(key: str, facts: Facts) -> Actual:
    """Find ``key``'s value in ``facts`` (see the module docstring for the key forms).

    Raises :class:`BadSpec` for a malformed key; a key no probe reported, or one a probe
    could not read, gives an :class:`Actual` whose ``problem`` says so.
    """
    probe, path = _split_key(key)
    if probe is None and path.startswith("packages."):
        return _resolve_package(key, path[len("packages.") :], facts)
    parts = path.split(".")
    if probe is not None:
        if probe not in facts.probes:
            ran = ", ".join(facts.probes) or "none"
            return Actual(key, None, None, f"probe {probe} did not run here (probes run: {ran})")
        value, why = _walk(facts.probes[probe], parts)
        if value is _MISSING:
            near = _close(path, list(_paths(facts.probes[probe])))
            return Actual(key, None, probe, f"probe {probe} did not report {path}{near}")
        if why is not None:
            return Actual(key, value, probe, f"{key} cannot be read: {why}")
        return Actual(key, value, probe)
    unreadable: Actual | None = None
    for name, result in facts.probes.items():
        value, why = _walk(result, parts)
        if value is _MISSING:
            continue
        if why is None:
            return Actual(key, value, name)
        if unreadable is None:
            unreadable = Actual(key, value, name, f"{key} cannot be read: {why}")
    if unreadable is not None:
        return unreadable
    if not facts.probes:
        return Actual(key, None, None, f"no probe reported {key} (no probe ran)")
    candidates = [p for result in facts.probes.values() for p in _paths(result)]
    return Actual(key, None, None, f"no probe reported {key}{_close(key, candidates)}")


# --- verdicts ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """The result of one expectation: what was expected, what was found, and whether it held.

    ``expected`` is the expectation as written, ``actual`` the value found (JSON-able; None
    when there is none, the probe's ``{"unavailable": why}`` when it could not be read),
    ``reason`` a plain-language sentence when ``ok`` is false, ``source`` the probe (or
    ``packages``) the value came from.
    """

    key: str
    expected: str
    actual: Any
    ok: bool
    reason: str | None = None
    source: str | None = None


def _shown(value: Any) -> str:
    """A value as a reason sentence shows it (text bare, the rest as JSON, long ones cut)."""
    text = _text(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


def _judge(key: str, spec: Spec, facts: Facts) -> Verdict:
    """The verdict of an already parsed expectation, with the reason a reader needs."""
    actual = resolve(key, facts)
    if not actual.found:
        return Verdict(key, spec.text, actual.value, False, actual.problem, actual.source)
    if spec.matches(actual.value):
        return Verdict(key, spec.text, actual.value, True, None, actual.source)
    reason = f"{key} is {_shown(actual.value)}, expected {spec.describe()}"
    absent = actual.value == NOT_INSTALLED and actual.source == "packages"
    hint = None if absent else spec.hint(actual.value)
    if hint:
        reason += f" ({hint})"
    if absent and facts.packages:
        wanted = normalize_name(key[len("packages.") :])
        similar = difflib.get_close_matches(wanted, list(facts.packages), n=3, cutoff=0.6)
        if similar:
            reason += f" (installed with a similar name: {', '.join(similar)})"
    return Verdict(key, spec.text, actual.value, False, reason, actual.source)


def check(key: str, expected: object, facts: Facts) -> Verdict:
    """Check one expectation of a runbook (``key = expected``) against ``facts``.

    Raises :class:`BadSpec` when the key or expectation cannot be understood (the runbook
    loader's :func:`validate` reports those earlier).
    """
    return _judge(key, Spec.parse(expected, key), facts)


def check_all(expect: Mapping[str, Any], facts: Facts) -> list[Verdict]:
    """Check a whole ``expect`` table, one verdict per key in the table's order."""
    specs = {key: Spec.parse(expected, key) for key, expected in expect.items()}
    for key in specs:
        _split_key(key)
    return [_judge(key, spec, facts) for key, spec in specs.items()]


def validate(
    expect: object,
    where: str,
    fail: Callable[[str, str], Exception] = lambda path, problem: BadInput(f"{path}: {problem}"),
) -> dict[str, Spec]:
    """Parse an ``expect`` table at load time; a bad one raises ``fail("{where}.{key}", why)``
    (a BadInput ``"{where}.{key}: …"`` unless the runbook loader passes its own, with lines).

    ``where`` is the table's place in the runbook (``steps.install-torch.expect``). Returns
    the parsed expectations by key, in the table's order.
    """
    if not isinstance(expect, Mapping):
        raise fail(where, "expect must be a table of key = expectation")
    specs: dict[str, Spec] = {}
    for key, expected in expect.items():
        try:
            _split_key(key)
            specs[key] = Spec.parse(expected, key)
        except BadSpec as exc:
            raise fail(f"{where}.{key}", exc.problem) from None
    return specs
