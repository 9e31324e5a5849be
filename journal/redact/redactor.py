"""The :class:`Redactor`: what a step's output, commands, env and results pass through before
anything is written, masking the values it knows (the runbook's ``redact`` list, secret-named
variables' values) and every pattern of :mod:`journal.redact.patterns`, and recording what it
masked where, never the value."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from journal.redact.cuts import safe_cut, tail
from journal.redact.names import MIN_VALUE_LENGTH, SECRET_NAME
from journal.redact.patterns import GATED, gates_in
from journal.redact.spans import MASK, MASK_B, masked, spans
from journal.redact.structured import redacted
from journal.redact.terminal import (
    STRING_ESCAPE,
    compose,
    escaped,
    occurrences,
    shown_view,
    unshown,
)


@dataclass
class Redactor:
    """Redacts known secret values (the runbook's ``redact`` list, secret-named env values)
    and anything shaped like a secret."""

    values: list[bytes] = field(default_factory=list)

    @classmethod
    def for_run(
        cls,
        listed: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Redactor:
        """A redactor knowing the listed values and the values of secret-named variables in
        the step's env and in journal's own environment (a command may echo ``$HF_TOKEN``)."""
        found: set[str] = {v for v in listed if v}
        for source in (env or {}, os.environ if environ is None else environ):
            for name, value in source.items():
                if SECRET_NAME.search(name) and len(value) >= MIN_VALUE_LENGTH:
                    found.add(value)
        # Longest first, so a value containing another is masked whole.
        return cls(sorted((v.encode() for v in found), key=len, reverse=True))

    def bytes(self, data: bytes, where: str) -> tuple[bytes, list[dict[str, Any]]]:
        """``data`` with secrets masked, and what was masked where.

        Secrets are looked for in what a terminal shows of ``data``
        (:func:`~journal.redact.terminal.shown`: its colours, cursor moves and other escape
        sequences removed), and masked in ``data`` as printed, however the sequences interleave with
        them: the secret's characters are replaced, the escape sequences kept where they were (after
        the mask for those within the secret), so that colours still render. The text of OSC and DCS
        strings (a window's title, a hyperlink's address), which a terminal does not show but the
        bytes hold, is redacted on its own."""
        if not escaped(data):
            out, listed, counts, _ = self._scan(data, None)
            return out, _found(listed, counts, where)
        view, strings = shown_view(data)
        view_masked, listed, counts, pieces = self._scan(view, [])
        out = unshown(data, view, view_masked, pieces) if pieces else data
        if strings:
            out = self._string_sequences(out, listed, counts)
        return out, _found(listed, counts, where)

    def _scan(
        self, data: bytes, pieces: list[tuple[int, int, int, int]] | None
    ) -> tuple[bytes, dict[bytes, int], dict[str, int], list[tuple[int, int, int, int]]]:
        """``data`` masked; how many times each known value and each kind was masked; and,
        when ``pieces`` is a list (empty), what of ``data`` each mask replaced (see
        :func:`~journal.redact.terminal.compose`)."""
        listed: dict[bytes, int] = {}
        for value in self.values:
            if value in data:
                listed[value] = data.count(value)
                if pieces is not None:
                    pieces = compose(pieces, occurrences(data, value))
                data = data.replace(value, MASK_B)
        counts: dict[str, int] = {}
        lower: bytes | None = None
        present = gates_in(data)  # looked for once: a mask brings none in
        for pattern, gates in GATED:
            if gates and gates.isdisjoint(present):
                continue
            if pattern.fold or pattern.needles:
                lower = data.lower() if lower is None else lower
                if pattern.needles and not any(n in lower for n in pattern.needles):
                    continue
            found = spans(pattern, data, lower)
            if found:
                if pieces is not None:
                    pieces = compose(pieces, [(a, b, len(mask)) for a, b, mask, *_ in found])
                data = masked(data, found, counts)
                lower = None
        return data, listed, counts, pieces or []

    def _string_sequences(
        self, data: bytes, listed: dict[bytes, int], counts: dict[str, int]
    ) -> bytes:
        """``data`` with the text of its OSC, DCS, SOS, PM and APC strings redacted (each on
        its own), the counts added to ``listed`` and ``counts``."""
        out: list[bytes] = []
        last = 0
        for m in STRING_ESCAPE.finditer(data):
            start = m.start() + 2
            text, more, kinds, _ = self._scan(m.group()[2:], None)
            if not more and not kinds:
                continue
            out += [data[last:start], text]
            last = m.end()
            for value, n in more.items():
                listed[value] = listed.get(value, 0) + n
            for kind, n in kinds.items():
                counts[kind] = counts.get(kind, 0) + n
        if not out:
            return data
        out.append(data[last:])
        return b"".join(out)

    def text(self, value: str, where: str) -> tuple[str, list[dict[str, Any]]]:
        """A string with secrets masked, and what was masked where."""
        data, found = self.bytes(value.encode("utf-8", "surrogateescape"), where)
        return data.decode("utf-8", "surrogateescape"), found

    def env(
        self, env: Mapping[str, str], where: str
    ) -> tuple[dict[str, str], list[dict[str, Any]]]:
        """An env mapping with secret-named values replaced whole and other values redacted."""
        out: dict[str, str] = {}
        found: list[dict[str, Any]] = []
        for name, value in env.items():
            if SECRET_NAME.search(name):
                out[name] = MASK
                found.append({"kind": "secret-variable", "where": f"{where}.{name}", "count": 1})
            else:
                out[name], more = self.text(value, f"{where}.{name}")
                found.extend(more)
        return out, found

    def value(self, value: Any, where: str, key: str | None = None) -> Any:
        """A stored value (a string, or a dict or list of them, as events carry: a probe's
        parsed JSON) with secrets masked field by field, the string under a secret-named key
        whole (:func:`journal.redact.structured.redacted`)."""
        return redacted(self.bytes, value, where, key)

    def tail(self, data: bytes, start: int = 0) -> int:
        """Where the part of ``data[start:]`` (a line not ended yet) that could still become
        (part of) a secret as more is printed begins (:func:`journal.redact.cuts.tail`)."""
        return tail(self.values, data, start)

    def safe_cut(self, data: bytes, cut: int, floor: int) -> int:
        """``cut`` moved back to the start of any secret in ``data`` that straddles it, never
        below ``floor`` (:func:`journal.redact.cuts.safe_cut`)."""
        return safe_cut(self.values, data, cut, floor)


def _found(listed: dict[bytes, int], counts: dict[str, int], where: str) -> list[dict[str, Any]]:
    """What was masked where, as events record it: never the value."""
    found = [{"kind": "listed-value", "where": where, "count": n} for n in listed.values()]
    return found + [{"kind": kind, "where": where, "count": n} for kind, n in counts.items()]

