"""A run's recorded output put back together from its ``OutputChunk`` events, in one place.

The recorder stores each chunk as UTF-8 text, or as base64 when its bytes are not UTF-8
(:func:`journal.recorder.encode`; :func:`decode` gives a chunk's exact bytes back). Here a
chunk becomes its text as the detectors, the web and the exports read it (bytes that are not
UTF-8 replaced by U+FFFD, chunk by chunk), and a run's chunks become its whole output, as bytes
or as text, both streams in the order stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from journal.events import Event, OutputChunk
from journal.mapper import Recorded
from journal.recorder import decode

__all__ = ["chunk_text", "chunks_of", "decode", "output_bytes", "output_text"]


def chunk_text(chunk: OutputChunk) -> str:
    """A chunk's text as the detectors read it (bytes that are not UTF-8 replaced)."""
    if chunk.encoding == "utf-8":
        return chunk.data
    return decode(chunk).decode("utf-8", "replace")


def chunks_of(records: Iterable[Recorded | Event]) -> Iterator[OutputChunk]:
    """The output chunks among recorded events (or bare events), in their order."""
    for item in records:
        event = item.event if isinstance(item, Recorded) else item
        if isinstance(event, OutputChunk):
            yield event


def output_bytes(records: Iterable[Recorded | Event]) -> bytes:
    """The exact bytes of the chunks among ``records``, both streams in the order stored."""
    return b"".join(decode(chunk) for chunk in chunks_of(records))


def output_text(records: Iterable[Recorded | Event]) -> str:
    """The text of the chunks among ``records`` (as :func:`chunk_text` reads each), in order."""
    return "".join(chunk_text(chunk) for chunk in chunks_of(records))
