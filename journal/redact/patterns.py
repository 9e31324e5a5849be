"""Every redaction pattern, in the order they apply, with the gate bytes that let a scan
skip those that cannot match.

Each pattern is led by a literal (a keyword, a token's prefix, a separator), so the regex
engine finds its candidates at memchr speed; case-insensitive ones are matched against the
lowercased bytes, and a pattern none of whose gate bytes the data holds is not run at all."""

from __future__ import annotations

from journal.redact.flags import FLAGS_AND_HEADERS
from journal.redact.keys import BLOCKS
from journal.redact.names import NAMED
from journal.redact.shapes import SHAPES
from journal.redact.spans import Pattern

# Blocks first (their lines hold anything), then names, flags and headers, then shapes.
PATTERNS: list[Pattern] = [*BLOCKS, *NAMED, *FLAGS_AND_HEADERS, *SHAPES]

#: Each pattern with the set of its gate bytes, and all gate bytes (each as a 1-byte string).
GATED = [(p, frozenset(p.gates[i : i + 1] for i in range(len(p.gates)))) for p in PATTERNS]
_GATE_BYTES = sorted(frozenset().union(*(gates for _, gates in GATED)))


def gates_in(data: bytes) -> frozenset[bytes]:
    """The gate bytes that ``data`` holds (a pattern none of whose gates is there cannot
    match)."""
    return frozenset(g for g in _GATE_BYTES if g in data)
