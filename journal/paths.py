"""Folders and files the user names for journal to write (the folder of `journal init` and of
`journal demo`, an export's ``-o FILE``): checked before anything is read or recorded, and
written with a failure said as bad input naming the path (exit status 2), never a traceback."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from journal.errors import BadInput


def make_folder(folder: Path, purpose: str) -> None:
    """Make ``folder`` (with its parents) for ``purpose`` (``"the demo"``); bad input naming
    it when it cannot be: a file is there or on its way, the place is read-only, ..."""
    if folder.exists() and not folder.is_dir():
        raise BadInput(f"{folder} is a file, not a folder: {purpose} needs a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = _why(folder, exc)
        raise BadInput(f"cannot make the folder {folder} for {purpose}: {why}") from None


def output_file(path: Path, what: str) -> Path:
    """``path``, where ``what`` (``"the postmortem"``) is to be written, once it is known to
    be writable there: not a folder, in a folder that exists."""
    if path.is_dir():
        raise BadInput(f"cannot write {what} to {path}: it is a folder; name a file in it")
    if not path.parent.is_dir():
        raise BadInput(f"cannot write {what} to {path}: {_why(path.parent)}")
    return path


def write_file(path: Path, text: str, what: str) -> None:
    """Write ``text`` to ``path`` (UTF-8); bad input naming it when that fails."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"cannot write {what} to {path}: {_why(path, exc)}") from None


def write_lines(path: Path, lines: Iterable[str], what: str) -> int:
    """Write ``lines`` (each ended by a newline) to ``path`` as they come, through a file
    beside it that takes its place at the end: the whole text is never held, and a failure
    leaves whatever was at ``path`` as it was. How many lines; bad input naming it when
    writing fails (an error of ``lines`` itself is raised as it is)."""
    partial = path.with_name(f".{path.name}.partial")
    count = 0
    try:
        with partial.open("w", encoding="utf-8") as out:
            for line in lines:
                out.write(line)
                out.write("\n")
                count += 1
        partial.replace(path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise BadInput(f"cannot write {what} to {path}: {_why(path, exc)}") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return count


def _why(path: Path, exc: OSError | None = None) -> str:
    """Why nothing can be made at ``path``: a file standing where it or a folder on its way
    should be; else the system's reason (``exc``), or that the folder is not there."""
    for above in [path, *path.parents]:
        if above.exists():
            if not above.is_dir():
                return f"{above} is a file, not a folder"
            break
    if exc is None:
        return f"there is no folder {path}"
    return exc.strerror or str(exc)
