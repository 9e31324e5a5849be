"""The one place that turns events into stored rows and back, upcasting old versions on read."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from journal.events import EVENT_TYPES, Event

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

#: (type, stored version) -> function giving the payload of the next version. Stored rows are
#: never rewritten; an old payload is lifted step by step each time it is read.
UPCASTERS: dict[tuple[str, int], Upcaster] = {}

GENESIS = "0" * 64

# Made once: ``json.dumps`` with options builds a new encoder on every call (a noticeable
# part of appending one event). Same options, so the same bytes, so the same hashes.
_HEAD_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_PAYLOAD_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))
_FIELDS: dict[type[Event], tuple[str, ...]] = {}


@dataclass(frozen=True)
class Recorded:
    """An event as read back from the store, with its place in the global order."""

    seq: int
    journal: str
    ts: str
    event: Event
    hash: str


class UnknownEvent(ValueError):
    """A stored row whose type this version of journal does not know."""


def to_payload(event: Event) -> dict[str, Any]:
    """The JSON payload of an event (its dataclass fields)."""
    cls = type(event)
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return {name: getattr(event, name) for name in names}


def from_row(type_: str, version: int, payload: dict[str, Any]) -> Event:
    """Rebuild an event from a stored row, upcasting its payload to the current version."""
    cls = EVENT_TYPES.get(type_)
    if cls is None:
        raise UnknownEvent(f"unknown event type {type_!r}")
    while version < cls.version:
        payload = UPCASTERS[(type_, version)](payload)
        version += 1
    names = _field_names(cls)
    if names.issuperset(payload):
        return cls(**payload)
    return cls(**{k: v for k, v in payload.items() if k in names})


@functools.cache
def _field_names(cls: type[Event]) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def canonical(
    journal: str,
    type_: str,
    version: int,
    ts: str,
    host: str | None,
    run_id: str | None,
    payload_json: str,
) -> bytes:
    """The bytes a row's hash covers: every column but the sequence and the hash itself."""
    head = _HEAD_JSON.encode([journal, type_, version, ts, host, run_id])
    return (head + "\n" + payload_json).encode("utf-8", "surrogatepass")


def dump_payload(payload: dict[str, Any]) -> str:
    """Canonical JSON text of a payload: sorted keys, no spaces."""
    return _PAYLOAD_JSON.encode(payload)


def chain_hash(prev_hash: str, canonical_bytes: bytes) -> str:
    """``sha256(prev_hash + canonical event)``: each row seals the whole history before it."""
    return hashlib.sha256(prev_hash.encode("ascii") + canonical_bytes).hexdigest()
