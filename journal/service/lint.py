"""`journal lint`: findings for pasted terminal sessions, with no database (imports kept light)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import BinaryIO

from journal.errors import BadInput
from journal.pitfalls import judge
from journal.pitfalls.base import Finding
from journal.pitfalls.subjects import from_transcript
from journal.transcript import TranscriptFile

#: A transcript bigger than this is refused (a terminal session, not a log archive).
MAX_TRANSCRIPT = 512 * 1024 * 1024


def transcript_file(path: Path) -> TranscriptFile:
    """A transcript file, read a line at a time; refused when missing, unreadable or huge."""
    try:
        size = path.stat().st_size
        if size > MAX_TRANSCRIPT:
            raise BadInput(f"{path}: {size} bytes is too large for a transcript")
        with path.open("rb"):
            pass
    except FileNotFoundError:
        raise BadInput(f"{path}: no such transcript file") from None
    except IsADirectoryError:
        raise BadInput(f"{path}: is a folder, not a transcript file") from None
    except OSError as exc:
        raise BadInput(f"{path}: cannot read it: {exc.strerror}") from None
    return TranscriptFile(path)


def lint(paths: list[Path]) -> list[tuple[Path, Finding]]:
    """Findings for each transcript file."""
    found = []
    for path in paths:
        subject = from_transcript(transcript_file(path), str(path))
        found.extend((path, f) for f in judge(subject))
    return found


def lint_stream(stream: BinaryIO, name: str = "<stdin>") -> list[Finding]:
    """Findings for a transcript read from ``stream`` (standard input; ``name`` is how the
    findings name it): spooled to a
    temporary file a block at a time (it is read twice), refused past the size a file
    may have."""
    with tempfile.TemporaryDirectory(prefix="journal-lint-") as folder:
        spool = Path(folder) / "transcript.txt"
        size = 0
        with spool.open("wb") as out:
            while block := stream.read(1 << 20):
                size += len(block)
                if size > MAX_TRANSCRIPT:
                    raise BadInput(
                        f"standard input: more than {MAX_TRANSCRIPT} bytes is too large for a "
                        "transcript"
                    )
                out.write(block)
        return judge(from_transcript(TranscriptFile(spool), name))
