"""Where an expectation's key points: a probe's result, a path in it, or a package snapshot."""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from journal.expect.spec import NOT_INSTALLED, BadSpec
from journal.versions import canonical_name


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


#: A distribution name as PEP 503 compares it (``Nvidia_NCCL.cu13`` is ``nvidia-nccl-cu13``).
normalize_name = canonical_name


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
