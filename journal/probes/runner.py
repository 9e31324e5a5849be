"""Running a probe over a connected transport and reading its result."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from journal.probes import ProbeSpec
from journal.redact import Redactor
from journal.transport.base import Transport
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
    """Turn a successful probe's output into its result."""
    if spec.builtin or spec.json:
        return _json(stdout.decode("utf-8", "replace"))
    text = stdout.decode("utf-8", "replace") + "\n" + stderr.decode("utf-8", "replace")
    result: dict[str, Any] = {}
    for field, pattern in spec.capture.items():
        try:
            found = find_named(pattern, text, 1, groups={field: 1})
        except RegexTimeout as exc:
            result[field] = {"unavailable": str(exc)}
            continue
        result[field] = (
            found[0][1].strip()
            if found
            else {"unavailable": f"the output has no match for /{pattern.pattern}/"}
        )
    return result


def run_probe(
    transport: Transport,
    spec: ProbeSpec,
    python: str,
    env: Mapping[str, str],
    redactor: Redactor,
    cancel: threading.Event,
    run_id: str,
) -> ProbeOutcome:
    """Run ``spec`` with the host's target ``python``; never raises for a failing probe."""
    sink = CaptureSink()
    started = time.monotonic()
    outcome = transport.probe(
        spec.command(python), env, None, spec.timeout, sink, cancel, run_id=f"{run_id}-probe"
    )
    seconds = round(time.monotonic() - started, 4)
    stdout, _ = redactor.bytes(bytes(sink.streams["stdout"]), f"probe {spec.name}")
    stderr, _ = redactor.bytes(bytes(sink.streams["stderr"]), f"probe {spec.name}")
    if not outcome.ok:
        code = "" if outcome.exit_code is None else f" with exit status {outcome.exit_code}"
        why = outcome.reason or _tail(stderr or stdout)
        return ProbeOutcome(spec.name, None, f"the probe {outcome.status}{code}: {why}", seconds)
    try:
        result = read_result(spec, stdout, stderr)
    except ValueError as exc:  # JSONDecodeError is a ValueError
        return ProbeOutcome(
            spec.name, None, f"the probe printed no JSON object ({exc}): {_tail(stdout)}", seconds
        )
    # a string under a secret-named key masked whole before anything (an expectation, a
    # summary) reads the result: "db_password", a captured api_token, env.HF_TOKEN
    return ProbeOutcome(spec.name, redactor.value(result, f"probe {spec.name}"), None, seconds)
