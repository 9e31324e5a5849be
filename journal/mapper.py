"""The one place that turns events into stored rows and back, upcasting old versions on read;
and the dataclasses the stored projections keep into JSON rows and back."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from json.encoder import c_make_encoder, encode_basestring
from operator import attrgetter
from typing import Any, TypeVar

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
#: What ``_PAYLOAD_JSON.encode`` runs, made once instead of on every call (a third of the cost
#: of serialising a small payload): the C encoder with the same options, so the same text.
#: Without the check for a circular payload, which no event can hold (they are made of JSON).
_PAYLOAD_C = (
    c_make_encoder(
        None, _PAYLOAD_JSON.default, encode_basestring, None, ":", ",", True, False, True
    )
    if c_make_encoder is not None
    else None
)
#: Each event class's field names and a getter of their values, made once per class.
_FIELDS: dict[type[Event], tuple[tuple[str, ...], Callable[[Event], Any]]] = {}


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
    fields = _FIELDS.get(type(event))
    if fields is None:
        fields = _FIELDS[type(event)] = _fields_of(type(event))
    names, values = fields
    return dict(zip(names, values(event), strict=True))


def _fields_of(cls: type[Event]) -> tuple[tuple[str, ...], Callable[[Event], Any]]:
    names = tuple(f.name for f in dataclasses.fields(cls))
    if len(names) == 1:  # attrgetter of one name gives the value, not a tuple of it
        return names, lambda event: (getattr(event, names[0]),)
    return names, attrgetter(*names) if names else lambda event: ()


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
    """The bytes a row's hash covers: every column but the sequence and the hash itself: the
    JSON list ``[journal, type, version, ts, host, run_id]``, a newline and the payload."""
    # the same text as _HEAD_JSON.encode of the list, a sixth of the time (appending and
    # verifying call this for every event): each string as json writes it, an int as its repr
    number = version if type(version) is int else _HEAD_JSON.encode(version)
    host_json = "null" if host is None else _string(host)
    run_json = "null" if run_id is None else _string(run_id)
    head = f"[{_string(journal)},{_string(type_)},{number},{_string(ts)},{host_json},{run_json}]"
    return (head + "\n" + payload_json).encode("utf-8", "surrogatepass")


def _string(value: str) -> str:
    """A string as JSON text, as the encoders without ensure_ascii write it (a non-string,
    such as a host given as a number, as json writes that)."""
    return encode_basestring(value) if type(value) is str else _HEAD_JSON.encode(value)


def dump_payload(payload: dict[str, Any]) -> str:
    """Canonical JSON text of a payload: sorted keys, no spaces."""
    if _PAYLOAD_C is None:
        return _PAYLOAD_JSON.encode(payload)
    return "".join(_PAYLOAD_C(payload, 0))


def chain_hash(prev_hash: str, canonical_bytes: bytes) -> str:
    """``sha256(prev_hash + canonical event)``: each row seals the whole history before it."""
    return hashlib.sha256(prev_hash.encode("ascii") + canonical_bytes).hexdigest()


# -- the projections' rows ---------------------------------------------------------------------
#
# The stored projections (journal.projections.stored) keep dataclasses (timeline views,
# findings, judged runs) as JSON rows: a dataclass as a dict of its fields, made again from
# it by its field types. A field holding dataclasses (one, an optional one, a list or tuple of
# them) is made plain in turn; a tuple comes back a tuple; any other value is stored as is
# (JSON types only).

Convert = Callable[[Any], Any]
_T = TypeVar("_T")


def to_plain(obj: Any, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    """A dataclass as a stored row holds it: its fields by name (those whose name starts with
    ``_`` left out, and ``skip``)."""
    names, encoders, _ = _codec(type(obj))
    out = {name: getattr(obj, name) for name in names if name not in skip}
    for name, encode in encoders:
        value = out.get(name)
        if value is not None:
            out[name] = encode(value)
    return out


def of_plain(cls: type[_T], data: dict[str, Any]) -> _T:
    """The dataclass ``cls`` made again from :func:`to_plain`'s form (fields it lacks take
    their defaults)."""
    _, _, decoders = _codec(cls)
    if not decoders:
        return cls(**data)
    kwargs = dict(data)
    for name, decode in decoders:
        value = kwargs.get(name)
        if value is not None:
            kwargs[name] = decode(value)
    return cls(**kwargs)


@functools.cache
def _codec(
    cls: type,
) -> tuple[tuple[str, ...], tuple[tuple[str, Convert], ...], tuple[tuple[str, Convert], ...]]:
    """A dataclass's stored fields, and the fields whose values are converted each way."""
    names, encoders, decoders = [], [], []
    space = vars(sys.modules[cls.__module__])
    for f in dataclasses.fields(cls):
        if f.name.startswith("_"):
            continue
        names.append(f.name)
        hint = f.type
        if isinstance(hint, str):
            try:
                hint = eval(hint, space)  # the module's own annotation
            except Exception:  # a name imported for type checkers only: stored as is
                continue
        converted = _convert(hint)
        if converted is not None:
            encoders.append((f.name, converted[0]))
            decoders.append((f.name, converted[1]))
    return tuple(names), tuple(e for e in encoders if e[1] is not _same), tuple(decoders)


def _same(value: Any) -> Any:
    return value


def _convert(hint: Any) -> tuple[Convert, Convert] | None:
    """How a value of type ``hint`` is stored and made again; None: as is."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        cls = hint
        return to_plain, lambda d: of_plain(cls, d)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        kinds = [a for a in args if a is not type(None)]
        return _convert(kinds[0]) if len(kinds) == 1 else None
    if origin in (list, tuple) and args:
        inner = _convert(args[0])
        if inner is None:
            return (_same, tuple) if origin is tuple else None
        enc, dec = inner
        if origin is tuple:
            return (lambda xs: [enc(x) for x in xs]), (lambda xs: tuple(dec(x) for x in xs))
        return (lambda xs: [enc(x) for x in xs]), (lambda xs: [dec(x) for x in xs])
    return None
