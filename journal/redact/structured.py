"""Redaction of structured results field by field: a probe's parsed JSON, a parser's figures,
a package snapshot, labels and expectations, as events carry them. They are parsed from the
output as printed, then redacted here, never redacted as text first: the names and versions of
packages are data, and a secret-named key masks its value whole (``"password": "…"``, a PIN
under ``pin_password``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from journal.redact.names import NAME_MAPS, secret_value
from journal.redact.spans import MASK

#: How text is redacted: :meth:`journal.redact.Redactor.bytes` (the bytes masked, and what was
#: masked where).
Redact = Callable[[bytes, str], tuple[bytes, list[dict[str, Any]]]]


def redacted(redact: Redact, value: Any, where: str, key: str | None = None) -> Any:
    """A stored value (a string, or a dict or list of them, as events carry: a probe's parsed JSON)
    with secrets masked field by field: strings and keys as ``redact`` masks text, and the string
    under a secret-named key (``password``, ``HF_TOKEN``, ``api_key``) whole, unless it is a version
    under a distribution's name (:func:`~journal.redact.names.secret_value`). The keys of a mapping
    under ``packages`` are distribution names, data: none of them makes its value a secret
    (``tiktoken``).

    The strings are first looked at together, one per line: when that text holds no
    secret, none of them does (each pattern is read within a line, and a line's end
    stands where a string's end does), so a 500-package snapshot costs one pass, not
    thousands; otherwise each string is redacted on its own, each distinct one once."""
    strings: list[str] = []
    _strings(value, strings)
    if isinstance(key, str):
        strings.append(key)
    joined = "\n".join(strings).encode("utf-8", "surrogateescape")
    clean = not redact(joined, where)[1]
    return _value(redact, value, where, key, None if clean else {})


def _value(
    redact: Redact, value: Any, where: str, key: str | None, seen: dict[str, str] | None
) -> Any:
    """:func:`redacted`'s walk; ``seen`` is None when no string holds a secret, else the
    strings redacted so far."""
    if isinstance(value, str):
        if key is not None and value and value != MASK and secret_value(key, value):
            return MASK
        return _text(redact, value, where, seen)
    if isinstance(value, int):
        # a whole number under a secret-named key ("pin_password": 1234), as in the text;
        # True and False are no secrets, nor a float (a measurement)
        is_secret = key is not None and not isinstance(value, bool)
        return MASK if is_secret and secret_value(key, str(value)) else value
    if isinstance(value, dict):
        names = key in NAME_MAPS
        return {
            _text(redact, k, where, seen) if isinstance(k, str) else k: _value(
                redact, v, where, k if isinstance(k, str) and not names else None, seen
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_value(redact, v, where, None, seen) for v in value]
    if isinstance(value, tuple):
        return tuple(_value(redact, v, where, None, seen) for v in value)
    return value


def _text(redact: Redact, value: str, where: str, seen: dict[str, str] | None) -> str:
    if seen is None or not value:
        return value
    if value not in seen:
        masked = redact(value.encode("utf-8", "surrogateescape"), where)[0]
        seen[value] = masked.decode("utf-8", "surrogateescape")
    return seen[value]


def _strings(value: Any, into: list[str]) -> None:
    """Every string in a stored value, its mappings' keys included."""
    if isinstance(value, str):
        into.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str):
                into.append(k)
            _strings(v, into)
    elif isinstance(value, list | tuple):
        for v in value:
            _strings(v, into)

