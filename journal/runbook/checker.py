"""Checking a runbook's values, with messages that name the file, the line (found for the key
path in the TOML text) and the key path."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from journal.errors import BadInput, shown

#: The longest name (journal, host, step, benchmark, group, probe, channel): what the database
#: columns holding journal and host names take on every backend (PostgreSQL's are
#: ``varchar(200)``, which refuses a longer value where SQLite would keep it).
NAME_LENGTH = 200
#: A usable name: what a shell, a URL and those columns all take as it is (ASCII, so 200
#: characters are 200 bytes).
NAME = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{NAME_LENGTH - 1}}}\Z")
NAME_RULE = (
    f"letters, digits, '.', '_', '-', starting with a letter or digit; at most {NAME_LENGTH} "
    "characters"
)
#: The longest timeout a runbook may give (30 days): longer is no timeout at all, and a
#: number such as 1e300 overflows the clocks and timers it is handed to.
MAX_SECONDS = 30 * 24 * 3600
#: How many known names a message lists when none is close to the one given.
KNOWN_LISTED = 10
#: An environment variable's name as a POSIX shell's ``export`` takes it.
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


def suggest(name: str, known: list[str]) -> str:
    """``" (did you mean 'x'?)"`` for the closest known name, or a list of the known ones
    (the first :data:`KNOWN_LISTED` of them, and how many more)."""
    close = difflib.get_close_matches(name[:NAME_LENGTH], known, n=1, cutoff=0.5)
    if close:
        return f" (did you mean {close[0]!r}?)"
    if len(known) > KNOWN_LISTED:
        more = len(known) - KNOWN_LISTED
        return f"; known: {', '.join(known[:KNOWN_LISTED])} and {more:,} more"
    if known:
        return f"; known: {', '.join(known)}"
    return ""


def usable_name(value: str, what: str) -> str:
    """``value`` when it is a usable name (:data:`NAME`), else BadInput naming ``what`` (an
    option such as ``--journal``) and the rule."""
    if not NAME.match(value):
        raise BadInput(f"{what} {shown(value)} is not a usable name ({NAME_RULE})")
    return value


class _Lines:
    """Finds the line of a key path in the TOML text, for error messages (best effort)."""

    def __init__(self, text: str) -> None:
        self.where: dict[str, int] = {}
        table, counts = "", {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if line.startswith("[["):
                name = _unquote(line.strip("[] "))
                counts[name] = counts.get(name, -1) + 1
                table = f"{name}[{counts[name]}]"
                self.where.setdefault(name, number)
                self.where.setdefault(table, number)
            elif line.startswith("["):
                table = _unquote(line.strip("[] "))
                head, _, rest = table.partition(".")
                if rest and head in counts:  # [steps.expect] belongs to the last [[steps]]
                    table = f"{head}[{counts[head]}].{rest}"
                self.where.setdefault(table, number)
            elif "=" in line and not line.startswith("#"):
                key = _unquote(line.split("=", 1)[0].strip())
                self.where.setdefault(f"{table}.{key}" if table else key, number)

    def line(self, path: str) -> int | None:
        while path:
            if path in self.where:
                return self.where[path]
            if path.endswith("]") and "[" in path:  # journal.redact[1]: the list's line
                path = path[: path.rindex("[")]
                continue
            path = path.rsplit(".", 1)[0] if "." in path else ""
        return None


def _unquote(key: str) -> str:
    return ".".join(part.strip().strip('"').strip("'") for part in key.split("."))


class _Checker:
    """Type checks with messages that name file, line and key path."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text
        self._lines: _Lines | None = None
        #: the (key, value) expectations that parsed, each parsed once
        self.expectations: set[tuple[str, Any]] = set()

    @property
    def lines(self) -> _Lines:
        """The key paths' lines, indexed when a message first needs one: a runbook that
        checks out never pays for the index (a quarter of checking 100,000 steps)."""
        if self._lines is None:
            self._lines = _Lines(self.text)
        return self._lines

    def fail(self, key: str, message: str) -> BadInput:
        line = self.lines.line(key)
        where = f"{self.path}, line {line}" if line else str(self.path)
        return BadInput(f"{where}, {key}: {message}")

    def table(self, value: Any, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected a table, got {_kind(value)}")
        return value

    def string(self, value: Any, key: str, *, empty: bool = False) -> str:
        if not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {_kind(value)}")
        if not empty and not value.strip():
            raise self.fail(key, "must not be empty")
        return value

    def seconds(self, value: Any, key: str) -> float:
        """A timeout: a number of seconds above 0 and at most :data:`MAX_SECONDS` (a boolean,
        nan or inf is not one)."""
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value <= 0
        ):
            raise self.fail(key, f"expected a number of seconds above 0, got {value!r}")
        if value > MAX_SECONDS:
            given = f"{value:,.0f}" if value < 1e15 else f"{value:g}"
            raise self.fail(
                key,
                f"{given} seconds is more than the longest timeout, {MAX_SECONDS:,} seconds "
                "(30 days): give the seconds the command may really take, or leave the "
                "timeout out to let it run as long as it does",
            )
        return float(value)

    def name(self, value: Any, key: str) -> str:
        value = self.string(value, key)
        if not NAME.match(value):
            raise self.fail(key, f"{shown(value)} is not a usable name ({NAME_RULE})")
        return value

    def hosts(self, value: Any, key: str, what: str = "host") -> list[str]:
        """A ``hosts`` (or ``groups``) list that, when given, names at least one: an empty
        one reads as "nowhere", where leaving the key out means every host."""
        names = self.strings(value, key)
        if not names:
            example = '["gpu-1"]' if what == "host" else '["gpu"]'
            raise self.fail(
                key,
                f"the list is empty, which names no {what}: leave the key out for every "
                f"host, or name the {what}s (e.g. {example})",
            )
        return names

    def strings(self, value: Any, key: str) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.fail(key, f"expected a list of strings, got {_kind(value)}")
        return value

    def env(self, value: Any, key: str) -> dict[str, str]:
        """An ``env`` table: names a shell can export (``1BAD``, ``A-B``, ``A B`` or an ``=``
        would make the step's ``export`` fail), each set to a string."""
        table = self.table(value, key)
        for name, item in table.items():
            if not ENV_NAME.match(name):
                raise self.fail(
                    key,
                    f"{name!r} is not a usable environment variable name (letters, digits and "
                    "'_', not starting with a digit)",
                )
            if not isinstance(item, str):
                raise self.fail(
                    f"{key}.{name}", f"environment values are strings, got {_kind(item)}"
                )
            if "\0" in item:
                raise self.fail(f"{key}.{name}", "an environment value cannot hold a NUL character")
        return table

    def named_tables(
        self, tables: dict[str, Any], section: str, allowed: set[str]
    ) -> Iterator[tuple[str, str, dict[str, Any]]]:
        """Each ``[section.NAME]`` table: its name (a usable one), its key path and the
        table, its keys among ``allowed``."""
        for name, table in tables.items():
            key = f"{section}.{name}"
            if not NAME.match(name):
                raise self.fail(key, f"{shown(name)} is not a usable name ({NAME_RULE})")
            table = self.table(table, key)
            self.known_keys(table, allowed, key)
            yield name, key, table

    def known_keys(self, table: dict[str, Any], allowed: set[str], key: str) -> None:
        if allowed.issuperset(table):
            return
        for name in table:
            if name not in allowed:
                where = f"{key}.{name}" if key else name
                raise self.fail(where, f"unknown key {name!r}{suggest(name, sorted(allowed))}")


def _kind(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a table",
    }.get(type(value), type(value).__name__)
