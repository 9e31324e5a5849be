"""`journal lint`: findings for pasted terminal sessions, with no database (imports kept light)."""

from __future__ import annotations

from pathlib import Path

from journal.errors import BadInput
from journal.pitfalls import judge
from journal.pitfalls.base import Finding
from journal.pitfalls.subjects import from_transcript

#: A transcript bigger than this is refused (a terminal session, not a log archive).
MAX_TRANSCRIPT = 512 * 1024 * 1024


def read_transcript(path: Path) -> str:
    """A transcript file's text (bad bytes replaced), refused when missing or huge."""
    try:
        size = path.stat().st_size
        if size > MAX_TRANSCRIPT:
            raise BadInput(f"{path}: {size} bytes is too large for a transcript")
        return path.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        raise BadInput(f"{path}: no such transcript file") from None
    except IsADirectoryError:
        raise BadInput(f"{path}: is a folder, not a transcript file") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read it: {exc.strerror}") from None


def lint(paths: list[Path]) -> list[tuple[Path, Finding]]:
    """Findings for each transcript file."""
    found = []
    for path in paths:
        subject = from_transcript(read_transcript(path), str(path))
        found.extend((path, f) for f in judge(subject))
    return found
