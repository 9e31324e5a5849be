"""Witness files: where `journal anchor` writes the chain's head and `journal verify --witness`
reads it back, on this machine or on another host over SSH.

A witness is only worth something where the database's owner cannot rewrite it, so a remote
one is the point: ``HOST:PATH`` names a file on a runbook host (or on any SSH target, ``user@
host``), reached through the same Fabric connection as steps and written through SFTP (no
shell, no quoting), appended to and never rewritten. A path with no ``HOST:`` is local.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from journal.errors import BadInput
from journal.runbook import Host, Runbook
from journal.runbook.hosts import SSH_TARGET
from journal.store.anchor import Anchor, parse

#: A witness bigger than this is not a witness (a line is ~250 bytes).
MAX_WITNESS_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Witness:
    """A witness file: ``path`` on ``host`` (None: this machine)."""

    path: str
    host: Host | None = None

    def __str__(self) -> str:
        return f"{self.host.name}:{self.path}" if self.host else self.path


def witness_at(location: str, runbook: Runbook | None) -> Witness:
    """Where ``--witness`` points: ``HOST:PATH`` (a runbook host or an SSH target), else a
    local path."""
    head, colon, path = location.partition(":")
    if not colon or not head or "/" in head or Path(location).exists():
        return Witness(location)
    hosts = runbook.hosts if runbook else {}
    host = hosts.get(head)
    if host is None:
        if not SSH_TARGET.match(head):
            raise BadInput(
                f"--witness {location}: {head!r} is neither a host of the runbook nor an SSH "
                "target (user@host); write ./PATH for a local file whose name has a colon"
            )
        host = Host(name=head, ssh=head)
    if not path:
        raise BadInput(f"--witness {location} names no file on {head}")
    return Witness(path, None if host.is_local else host)


def _sftp_path(path: str) -> str:
    # SFTP paths are relative to the login's home; it does not expand ~.
    return path[2:] if path.startswith("~/") else path


def _remote(witness: Witness, work):  # type: ignore[no-untyped-def]
    """``work(sftp)`` on the witness's host; BadInput when it cannot be reached or written."""
    from journal.transport import ConnectFailed, transport_for

    assert witness.host is not None
    transport = transport_for(witness.host)
    try:
        transport.connect()
    except ConnectFailed as exc:
        raise BadInput(f"the witness {witness} cannot be reached: {exc}") from None
    try:
        with transport.conn.sftp() as sftp:  # type: ignore[attr-defined]
            return work(sftp)
    except OSError as exc:
        raise BadInput(f"the witness {witness}: {exc.strerror or exc}") from None
    finally:
        transport.close()


def read(witness: Witness) -> list[Anchor]:
    """The anchors the witness holds; BadInput when it is missing, too big or not a witness."""

    def text(size: int, data: bytes) -> str:
        if size > MAX_WITNESS_BYTES:
            raise BadInput(f"the witness {witness} is {size} bytes: not a witness file")
        return data.decode("utf-8", "replace")

    if witness.host is None:
        path = Path(witness.path).expanduser()
        if not path.is_file():
            raise BadInput(
                f"there is no witness file at {witness}; `journal anchor --witness "
                f"{witness}` writes one"
            )
        return parse(text(path.stat().st_size, path.read_bytes()), str(witness))

    def fetch(sftp):  # type: ignore[no-untyped-def]
        where = _sftp_path(witness.path)
        try:
            size = sftp.stat(where).st_size or 0
        except FileNotFoundError:
            raise BadInput(
                f"there is no witness file at {witness}; `journal anchor --witness "
                f"{witness}` writes one"
            ) from None
        if size > MAX_WITNESS_BYTES:
            return text(size, b"")
        with sftp.open(where, "rb") as handle:
            return text(size, handle.read())

    return parse(_remote(witness, fetch), str(witness))


def append(witness: Witness, anchor: Anchor) -> None:
    """Add ``anchor`` at the end of the witness (created, owner-only, when new)."""
    line = (anchor.format() + "\n").encode()
    if witness.host is None:
        path = Path(witness.path).expanduser()
        if not path.parent.is_dir():
            raise BadInput(f"cannot write the witness {witness}: there is no folder {path.parent}")
        if path.is_dir():
            raise BadInput(f"cannot write the witness {witness}: it is a folder")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "ab") as out:
                out.write(line)
        except OSError as exc:
            raise BadInput(f"cannot write the witness {witness}: {exc.strerror}") from None
        return

    def write(sftp):  # type: ignore[no-untyped-def]
        with sftp.open(_sftp_path(witness.path), "ab") as out:
            out.write(line)

    _remote(witness, write)
