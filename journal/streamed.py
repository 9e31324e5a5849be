"""Documents written as they are made: a long list read a batch at a time and written an item at
a time, never held whole (the postmortem of a year's journal, `journal pitfalls --all`).

A document is plain JSON-like data in which a long list may be a :class:`Lazy`: its length is
known up front, its items are made again each time it is iterated. :func:`write_json` writes
such a document byte for byte as ``json.dumps(doc, indent=2)`` writes the same document held
whole (:func:`held`); :class:`Lines` writes lines as ``"\\n".join(lines).rstrip("\\n") + "\\n"``
does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

#: What a document is written to: a text file's ``write``.
Write = Callable[[str], Any]


class Lazy:
    """A list made again whenever it is iterated (read from the store a batch at a time), of a
    length known up front: what a document holds in place of a long list."""

    def __init__(self, make: Callable[[], Iterable[Any]], length: int) -> None:
        self.make = make
        self.length = length

    @classmethod
    def of(cls, items: list[Any], each: Callable[[Any], Any] | None = None) -> Lazy:
        """``items`` as a lazy list, each made by ``each`` (kept as they are without it)."""
        if each is None:
            return cls(lambda: items, len(items))
        return cls(lambda: map(each, items), len(items))

    def __iter__(self) -> Iterator[Any]:
        return iter(self.make())

    def __len__(self) -> int:
        return self.length

    def __bool__(self) -> bool:
        return self.length > 0


def held(value: Any) -> Any:
    """``value`` with every :class:`Lazy` in it made into a list (the document held whole)."""
    if isinstance(value, Lazy):
        return [held(v) for v in value]
    if isinstance(value, dict):
        return {k: held(v) for k, v in value.items()}
    if isinstance(value, list):
        return [held(v) for v in value]
    return value


def _lazy_inside(value: Any) -> bool:
    if isinstance(value, Lazy):
        return True
    if isinstance(value, list):
        return any(_lazy_inside(v) for v in value)
    return isinstance(value, dict) and any(_lazy_inside(v) for v in value.values())


def write_json(
    write: Write,
    value: Any,
    *,
    ensure_ascii: bool = True,
    allow_nan: bool = True,
    plain: Callable[[Any], Any] = lambda value: value,
    level: int = 0,
) -> None:
    """Write ``value`` as ``json.dumps(value, indent=2, ensure_ascii=ensure_ascii,
    allow_nan=allow_nan)`` writes it held whole (no newline after it), each lazy list an item
    at a time; ``plain`` is applied to each part dumped (the postmortem's NaN as None)."""
    if not _lazy_inside(value):
        text = json.dumps(plain(value), indent=2, ensure_ascii=ensure_ascii, allow_nan=allow_nan)
        write(text.replace("\n", "\n" + "  " * level) if level and "\n" in text else text)
        return
    inner = "\n" + "  " * (level + 1)
    if isinstance(value, dict):
        if not value:
            write("{}")
            return
        write("{")
        for i, (key, item) in enumerate(value.items()):
            write(("," if i else "") + inner + json.dumps(key, ensure_ascii=ensure_ascii) + ": ")
            write_json(
                write,
                item,
                ensure_ascii=ensure_ascii,
                allow_nan=allow_nan,
                plain=plain,
                level=level + 1,
            )
        write("\n" + "  " * level + "}")
        return
    first = True
    for item in value:
        write(("[" if first else ",") + inner)
        write_json(
            write,
            item,
            ensure_ascii=ensure_ascii,
            allow_nan=allow_nan,
            plain=plain,
            level=level + 1,
        )
        first = False
    write("[]" if first else "\n" + "  " * level + "]")


class Lines:
    """Lines written as ``"\\n".join(lines).rstrip("\\n") + "\\n"`` is, as they come: the
    newlines that may end the text are held until a line follows them."""

    def __init__(self, write: Write) -> None:
        self.write = write
        self.started = False
        self.held = ""

    def add(self, lines: Iterable[str]) -> None:
        for line in lines:
            if self.started:
                self.held += "\n"
            self.started = True
            text = line.rstrip("\n")
            if text:
                self.write(self.held + text)
                self.held = ""
            self.held += line[len(text) :]

    def end(self) -> None:
        self.write("\n")
