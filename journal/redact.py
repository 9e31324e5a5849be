"""Removing secrets from commands, env values and output before anything is written.

What was removed is recorded as ``{"kind": ..., "where": ...}``, never the value itself.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

MASK = "[REDACTED]"
MASK_B = MASK.encode()

#: Variable names whose values are secrets: HF_TOKEN, WANDB_API_KEY, DB_PASSWORD, …
SECRET_NAME = re.compile(r"(?i)(TOKEN|PASSWORD|PASSWD|SECRET|_KEY|APIKEY|CREDENTIALS?)$")

# Applied to bytes so output that is not UTF-8 survives unchanged around them. Each pattern
# comes with the lowercase words it cannot match without: a chunk lacking all of them skips it
# (a 14 MB compile log went from 1.4 s of regex to a fraction of that).
_PATTERNS: list[tuple[str, tuple[bytes, ...], re.Pattern[bytes], bytes]] = [
    (
        "env-assignment",
        (b"token", b"password", b"passwd", b"secret", b"_key", b"apikey", b"credential"),
        re.compile(
            rb"(?i)\b([A-Z0-9_]*(?:TOKEN|PASSWORD|PASSWD|SECRET|_KEY|APIKEY|CREDENTIALS?))"
            rb"(\s*[=:]\s*)(?!\[REDACTED\])(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"';&|]+)"
        ),
        rb"\1\2" + MASK_B,
    ),
    (
        "quoted-key",
        (b"token", b"password", b"passwd", b"secret", b"key", b"credential", b"authorization"),
        re.compile(
            rb"(?i)([\"'][A-Za-z0-9_.-]*(?:token|password|passwd|secret|api[_-]?key|_key"
            rb"|credentials?|authorization)[\"']\s*:\s*)([\"'])(?!\[REDACTED\])[^\"'\n]*\2"
        ),
        rb"\1\2" + MASK_B + rb"\2",
    ),
    (
        "cli-flag",
        (b"--",),
        re.compile(
            rb"(?i)(--(?:password|passwd|token|api-key|apikey|secret|access-token|auth-token)"
            rb"(?:=|\s+))(?!\[REDACTED\])(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"';&|]+)"
        ),
        rb"\1" + MASK_B,
    ),
    (
        "api-key-header",
        (b"api-key", b"api_key", b"apikey"),
        re.compile(rb"(?i)\b(x-api-key:\s*|api[-_]?key:\s*)(?!\[REDACTED\])[^\s\r\n\"']+"),
        rb"\1" + MASK_B,
    ),
    (
        "authorization-header",
        (b"authorization",),
        re.compile(rb"(?i)\b((?:proxy-)?authorization:\s*)(?!\[REDACTED\])[^\r\n\"']+"),
        rb"\1" + MASK_B,
    ),
    (
        "url-password",
        (b"://",),
        re.compile(rb"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@\"']+:)(?!\[REDACTED\])[^/\s@\"']+(@)"),
        rb"\1" + MASK_B + rb"\2",
    ),
    (
        "token-shape",
        (
            b"hf_",
            b"ghp_",
            b"gho_",
            b"ghu_",
            b"ghs_",
            b"ghr_",
            b"github_pat_",
            b"sk-",
            b"xox",
            b"akia",
            b"glpat-",
            b"npm_",
            b"pypi-",
            b"sk_live_",
            b"aiza",
            b"eyj",
        ),
        re.compile(
            rb"\b(?:hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}"
            rb"|sk-[A-Za-z0-9_-]{32,}|xox[baprs]-[A-Za-z0-9-]{20,}|AKIA[0-9A-Z]{16}"
            rb"|glpat-[A-Za-z0-9_-]{20,}|npm_[A-Za-z0-9]{36}|pypi-[A-Za-z0-9_-]{50,}"
            rb"|[sr]k_live_[A-Za-z0-9]{20,}|AIza[0-9A-Za-z_-]{35}"
            rb"|eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"
        ),
        MASK_B,
    ),
]

#: Keys of stored dicts (probe results, labels, expectations) whose string value is a secret.
SECRET_KEY = re.compile(
    r"(?i)^[A-Za-z0-9_.-]*(?:token|password|passwd|secret|api[_-]?key|_key|credentials?"
    r"|authorization)$"
)

#: Secret values shorter than this are not searched for in output: too many false hits.
MIN_VALUE_LENGTH = 6


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
        """``data`` with secrets masked, and what was masked where."""
        found: list[dict[str, Any]] = []
        for value in self.values:
            if value in data:
                found.append({"kind": "listed-value", "where": where, "count": data.count(value)})
                data = data.replace(value, MASK_B)
        lower = data.lower()
        for kind, needles, pattern, replacement in _PATTERNS:
            if not any(needle in lower for needle in needles):
                continue
            data, n = pattern.subn(replacement, data)
            if n:
                found.append({"kind": kind, "where": where, "count": n})
        return data, found

    def text(self, value: str, where: str) -> tuple[str, list[dict[str, Any]]]:
        """A string with secrets masked, and what was masked where."""
        data, found = self.bytes(value.encode("utf-8", "surrogateescape"), where)
        return data.decode("utf-8", "surrogateescape"), found

    def value(self, value: Any, where: str, key: str | None = None) -> Any:
        """A stored value (a string, or a dict or list of them, as events carry) with secrets
        masked: strings as :meth:`text` does, and the string under a secret-named key
        (``password``, ``HF_TOKEN``, ``api_key``) whole."""
        if isinstance(value, str):
            if key is not None and SECRET_KEY.match(key) and value and value != MASK:
                return MASK
            return self.text(value, where)[0] if value else value
        if isinstance(value, dict):
            return {
                k: self.value(v, where, k if isinstance(k, str) else None) for k, v in value.items()
            }
        if isinstance(value, list):
            return [self.value(v, where) for v in value]
        if isinstance(value, tuple):
            return tuple(self.value(v, where) for v in value)
        return value

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
