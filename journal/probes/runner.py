"""Reading a probe's result from what it printed (a host's checks run it over their transport:
:meth:`journal.service.checks.HostChecks.probe`).

A probe's result is read from its output as printed (the JSON parsed, the captures taken from
the raw bytes), then redacted field by field (:meth:`Redactor.value`): redacting the text
first would mask evidence inside the JSON (a package named ``tiktoken``) and break it. The
output shown when there is no result is redacted as text, whole, before its tail is taken.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from journal.probes import ProbeSpec
from journal.redact import MASK, Redactor
from journal.runs import Outcome
from journal.userregex import RegexTimeout, find_named

#: A probe printing more than this is cut: results are small JSON, not logs.
CAPTURE_LIMIT = 64 * 1024 * 1024


class CaptureSink:
    """Keeps a probe's output in memory (probes print a little JSON)."""

    def __init__(self) -> None:
        self.streams = {"stdout": bytearray(), "stderr": bytearray()}

    def feed(self, stream: str, data: bytes) -> None:
        buf = self.streams[stream]
        if len(buf) < CAPTURE_LIMIT:
            buf += data[: CAPTURE_LIMIT - len(buf)]

    def tick(self) -> None:
        """Nothing to flush."""


@dataclass(frozen=True)
class ProbeOutcome:
    """A probe's result (its JSON as a dict) or why there is none, and how long it took."""

    name: str
    result: dict[str, Any] | None
    error: str | None
    seconds: float


def _tail(data: bytes, lines: int = 6) -> str:
    text = data.decode("utf-8", "replace").strip()
    return "\n".join(text.splitlines()[-lines:]) or "(no output)"


def _json(text: str) -> dict[str, Any]:
    """The JSON object a probe printed: the whole output, or else its last line."""
    text = text.strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        last = text.splitlines()[-1] if text else ""
        value = json.loads(last)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def read_result(spec: ProbeSpec, stdout: bytes, stderr: bytes) -> dict[str, Any]:
    """Turn a successful probe's output (as printed, not yet redacted) into its result."""
    return _read(spec, stdout, stderr)[0]


def _read(
    spec: ProbeSpec, stdout: bytes, stderr: bytes
) -> tuple[dict[str, Any], str, dict[str, int]]:
    """The result, and for captures the text they were read from and where each value is."""
    if spec.builtin or spec.json:
        return _json(stdout.decode("utf-8", "replace")), "", {}
    text = stdout.decode("utf-8", "replace") + "\n" + stderr.decode("utf-8", "replace")
    result: dict[str, Any] = {}
    at: dict[str, int] = {}
    for field, pattern in spec.capture.items():
        try:
            found = find_named(pattern, text, 1, groups={field: 1})
        except RegexTimeout as exc:
            result[field] = {"unavailable": str(exc)}
            continue
        if not found:
            result[field] = {"unavailable": f"the output has no match for /{pattern.pattern}/"}
            continue
        value, start = found[0][1], found[0][2]
        result[field] = value.strip()
        at[field] = start + value.find(result[field])
    return result, text, at


def _standing(
    result: dict[str, Any], text: str, at: dict[str, int], redactor: Redactor, where: str
) -> None:
    """Each value captured from the output as printed (``at``: where in ``text``), or MASK
    when redacting the output does not leave it standing on the lines it was read from (it
    is, or is part of, a secret: ``token: (\\S+)``, a line of a private key); a value still
    shown on the redacted lines tells nothing that they do not. Redaction keeps the lines."""
    if not at:
        return
    shown, found = redactor.text(text, where)
    if not found:
        return
    raw, masked = text.split("\n"), shown.split("\n")
    for field, start in at.items():
        value = result[field]
        first = text.count("\n", 0, start)
        last = first + value.count("\n") + 1
        kept = len(raw) == len(masked) and (
            raw[first:last] == masked[first:last] or value in "\n".join(masked[first:last])
        )
        if not kept:
            result[field] = MASK


def read_outcome(
    spec: ProbeSpec, stdout: bytes, stderr: bytes, redactor: Redactor
) -> tuple[dict[str, Any] | None, str | None]:
    """A probe that exited 0: (its result, None), the result parsed from the output as
    printed, then redacted field by field (a string under a secret-named key whole:
    ``db_password``, a captured ``api_token``, ``env.HF_TOKEN``; the names and versions of
    packages are data); or (None, why) when the output holds none, its tail redacted."""
    where = f"probe {spec.name}"
    try:
        result, text, at = _read(spec, stdout, stderr)
    except ValueError as exc:  # JSONDecodeError is a ValueError
        shown = _tail(redactor.bytes(stdout, where)[0])
        error = redactor.text(f"the probe printed no JSON object ({exc})", where)[0]
        return None, f"{error}: {shown}"
    _standing(result, text, at, redactor, where)
    # masked before anything (an expectation, a summary) reads the result
    return redactor.value(result, where), None


def probe_outcome(
    spec: ProbeSpec, outcome: Outcome, sink: CaptureSink, redactor: Redactor, seconds: float
) -> ProbeOutcome:
    """What the run of ``spec`` that ended with ``outcome``, having printed what ``sink``
    kept, gives: its result, or why there is none (never raises for a failing probe)."""
    stdout, stderr = bytes(sink.streams["stdout"]), bytes(sink.streams["stderr"])
    if not outcome.ok:
        where = f"probe {spec.name}"
        code = "" if outcome.exit_code is None else f" with exit status {outcome.exit_code}"
        why = outcome.reason or _tail(redactor.bytes(stderr or stdout, where)[0])
        error = redactor.text(f"the probe {outcome.status}{code}: {why}", where)[0]
        return ProbeOutcome(spec.name, None, error, seconds)
    result, error = read_outcome(spec, stdout, stderr, redactor)
    return ProbeOutcome(spec.name, result, error, seconds)
