"""The runbook's ``[notify.NAME]`` tables: where journal tells people when it matters (a step
failed, a finding was made, the plan finished, hosts drifted, a rollback ran), validated into
the :class:`NotifySpec` each channel is sent by.

The webhook's URL holds a secret (Slack's token is its path), so it is given as ``url`` or read
from the environment variable ``url_env`` when the runbook is loaded, and the runbook adds it
to the values every event is redacted of.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from journal.runbook.checker import ENV_NAME, _Checker, _kind, suggest

NOTIFY_KEYS = {"url", "url_env", "format", "on", "hosts", "groups", "description"}
FORMATS = ("slack", "json")
#: What a channel can be told of; ``finding`` takes a minimum severity (``finding:warning``).
TRIGGERS = ("step-failed", "finding", "plan-finished", "drift", "rollback", "gate-failed")
SEVERITIES = ("info", "warning", "error")
#: A URL's path (and query), or a part of its path, this long is masked on its own too: it
#: is (or holds) the token.
SECRET_PART = 16
#: The minimum severity of a bare ``finding``.
DEFAULT_SEVERITY = "warning"


@dataclass(frozen=True)
class NotifySpec:
    """A webhook journal posts to: its name, where (``url``, or None when ``url_env`` is not
    set in journal's environment), in which ``format``, on which triggers, for which hosts."""

    name: str
    url: str | None
    url_env: str | None
    format: str
    on: tuple[str, ...]
    #: the minimum severity of a finding that is sent (when ``finding`` is among ``on``)
    severity: str = DEFAULT_SEVERITY
    #: only these hosts (``hosts`` and the hosts of ``groups``); empty: every host
    hosts: tuple[str, ...] = field(default_factory=tuple)

    def wants(self, trigger: str, host: str | None = None, severity: str | None = None) -> bool:
        """Whether this channel is told of ``trigger`` about ``host`` (None: no one host, as
        a finished plan on several) at ``severity``."""
        if trigger not in self.on:
            return False
        if self.hosts and host is not None and host not in self.hosts:
            return False
        if trigger == "finding" and severity is not None:
            return SEVERITIES.index(severity) >= SEVERITIES.index(self.severity)
        return True

    def secrets(self) -> list[str]:
        """What of the URL must never be stored: all of it, its path and query, and each
        part of the path long enough to be a token (Slack's is the last), should a step print
        one alone."""
        if self.url is None:
            return []
        parts = urlsplit(self.url)
        rest = parts.path + (f"?{parts.query}" if parts.query else "")
        found = [self.url]
        if len(rest.strip("/")) >= SECRET_PART:
            found.append(rest)
        found += [p for p in parts.path.split("/") if len(p) >= SECRET_PART]
        if parts.password:
            found.append(parts.password)
        return list(dict.fromkeys(found))

    @property
    def where(self) -> str:
        """The URL as it may be shown and stored: scheme and host only (its path is the
        secret), or what it is missing."""
        if self.url is None:
            return f"${self.url_env} (not set)"
        return shown_url(self.url)


def shown_url(url: str) -> str:
    """``https://hooks.slack.com``: what of a webhook URL may be shown (never its path, its
    query or a user and password)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}"


def notify_specs(
    tables: dict[str, Any],
    hosts: list[str],
    groups: Mapping[str, list[str]],
    check: _Checker,
    environ: Mapping[str, str] | None = None,
) -> dict[str, NotifySpec]:
    """The runbook's channels, validated; ``url_env`` is read from ``environ`` (journal's
    own environment by default)."""
    environ = os.environ if environ is None else environ
    specs = {}
    for name, key, table in check.named_tables(tables, "notify", NOTIFY_KEYS):
        url, url_env = _url(check, key, table, environ)
        fmt = table.get("format", "json")
        if fmt not in FORMATS:
            hint = suggest(fmt, list(FORMATS)) if isinstance(fmt, str) else ""
            raise check.fail(
                f"{key}.format", f"expected {' or '.join(map(repr, FORMATS))}, got {fmt!r}{hint}"
            )
        on, severity = _triggers(check, key, table)
        chosen = list(check.strings(table.get("hosts", []), f"{key}.hosts"))
        for host in chosen:
            if host not in hosts:
                raise check.fail(f"{key}.hosts", f"no host named {host!r}{suggest(host, hosts)}")
        for group in check.strings(table.get("groups", []), f"{key}.groups"):
            if group not in groups:
                known = list(groups)
                raise check.fail(
                    f"{key}.groups", f"no group named {group!r}{suggest(group, known)}"
                )
            chosen += groups[group]
        given = [k for k in ("hosts", "groups") if k in table]
        if given and not chosen:  # `hosts = []` reads as nowhere; leaving it out is everywhere
            check.hosts([], f"{key}.{given[0]}", given[0][:-1])
        check.string(table.get("description", ""), f"{key}.description", empty=True)
        specs[name] = NotifySpec(
            name, url, url_env, fmt, on, severity, tuple(dict.fromkeys(chosen))
        )
    return specs


def _url(
    check: _Checker, key: str, table: dict[str, Any], environ: Mapping[str, str]
) -> tuple[str | None, str | None]:
    """The webhook URL (``url``, or the value of ``url_env``; None when that is not set) and
    the variable's name."""
    if ("url" in table) == ("url_env" in table):
        raise check.fail(
            key,
            'give the webhook as url = "https://…" or, to keep it out of the runbook, '
            'url_env = "SLACK_WEBHOOK" (an environment variable holding it): one of the two',
        )
    if "url_env" in table:
        name = check.string(table["url_env"], f"{key}.url_env")
        if not ENV_NAME.match(name):
            raise check.fail(
                f"{key}.url_env",
                f"{name!r} is not an environment variable name (letters, digits and '_', "
                "not starting with a digit)",
            )
        value = environ.get(name, "").strip()
        if not value:
            return None, name
        _check_url(check, f"{key}.url_env", value, f"the value of ${name}")
        return value, name
    value = check.string(table["url"], f"{key}.url").strip()
    _check_url(check, f"{key}.url", value, "the url")
    return value, None


def _check_url(check: _Checker, key: str, url: str, what: str) -> None:
    # the URL itself is never quoted in a message: it holds the webhook's secret
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError:
        raise check.fail(key, f"{what} is not a URL (scheme://host/path)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise check.fail(
            key,
            f"{what} is not an http(s) URL with a host (such as "
            "https://hooks.slack.com/services/…); its scheme is "
            f"{parts.scheme or 'missing'}",
        )
    if any(c in url for c in " \n\r\t\0"):
        raise check.fail(key, f"{what} holds a space or a control character")


def _triggers(check: _Checker, key: str, table: dict[str, Any]) -> tuple[tuple[str, ...], str]:
    """``on``: a list of triggers, ``finding`` optionally with its minimum severity
    (``finding:error``); the triggers and that severity."""
    if "on" not in table:
        raise check.fail(
            f"{key}.on",
            f'missing: say what to send, e.g. on = ["step-failed", "finding:warning"] '
            f"(any of {', '.join(TRIGGERS)})",
        )
    raw = table["on"]
    if not isinstance(raw, list) or not raw or not all(isinstance(v, str) for v in raw):
        raise check.fail(f"{key}.on", f"expected a non-empty list of triggers, got {_kind(raw)}")
    on: list[str] = []
    severity = DEFAULT_SEVERITY
    for value in raw:
        trigger, _, level = value.partition(":")
        if trigger not in TRIGGERS:
            raise check.fail(
                f"{key}.on",
                f"{value!r} is no trigger{suggest(trigger, list(TRIGGERS))}; the triggers: "
                f"{', '.join(TRIGGERS)} (finding:info, finding:warning, finding:error for a "
                "minimum severity)",
            )
        if level:
            if trigger != "finding" or level not in SEVERITIES:
                raise check.fail(
                    f"{key}.on",
                    f"{value!r}: only finding takes a minimum severity, one of "
                    f"{', '.join(SEVERITIES)} (finding:error)",
                )
            severity = level
        on.append(trigger)
    return tuple(dict.fromkeys(on)), severity
