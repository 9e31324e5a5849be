"""Expectations: what a runbook says a step must leave behind, checked against what it did.

A runbook's ``expect`` table maps a *key* (where to look) to an *expectation* (what must be
there)::

    expect = { "torch.version" = "*+cu130", "torch.cuda" = "13.0", "nccl" = ">=2.28",
               "packages.numpy" = "==2.4.2", gpu_count = 8, "torch.cuda_available" = true }

The engine is pure (no I/O): :class:`Spec` (``spec``) parses an expectation, :func:`resolve`
(``keys``) finds a key's value in the :class:`Facts` a step produced (probe results and the
package snapshot taken after it), :func:`check` / :func:`check_all` here turn both into
:class:`Verdict` objects, and :func:`validate` lets the runbook loader reject a bad table at
load time. What each expectation and key means, as users read it, is the runbook's reference
(docs/runbook.md, "Expectations").
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from journal.errors import BadInput
from journal.expect.keys import Actual, Facts, _split_key, normalize_name, resolve
from journal.expect.spec import NOT_INSTALLED, BadSpec, Clause, Spec, _text

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

_MAX_SHOWN = 120


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
