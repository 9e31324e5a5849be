"""Interactive shells with a terminal for `journal shell`: a local pseudo-terminal, or a
channel with a pty on the SSH connection the transport opened (the same connection code,
host keys and ``~/.ssh/config`` as every step)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pty
import shlex
import shutil
import signal
import struct
import tempfile
import termios
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from journal.transport.base import ConnectFailed

if TYPE_CHECKING:
    from journal.transport.ssh import SshTransport

READ_SIZE = 64 * 1024
#: How long an SSH shell's exit status may come after its output ended.
EXIT_STATUS_WAIT_S = 10.0


def window_size(fd: int) -> tuple[int, int]:
    """(rows, columns) of the terminal on ``fd``; 24×80 when it says none."""
    try:
        rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    except OSError:
        return 24, 80
    return (rows or 24), (cols or 80)


def set_window_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Terminal(ABC):
    """A shell with a terminal: bytes in, bytes out, a size, an exit status."""

    @abstractmethod
    def fileno(self) -> int: ...

    @abstractmethod
    def read(self) -> bytes:
        """What the shell printed; b'' once it is gone."""

    @abstractmethod
    def write(self, data: bytes) -> None: ...

    @abstractmethod
    def resize(self, rows: int, cols: int) -> None: ...

    @abstractmethod
    def close(self) -> int | None:
        """End it (if it is not over); its exit status where known."""

    def why_gone(self) -> tuple[str, str]:
        """How a command still running when it ended is recorded: (status, reason)."""
        return "interrupted", "interrupted (the shell ended)"


class LocalTerminal(Terminal):
    """A shell on this machine in a pseudo-terminal of its own. ``files`` (the shell's rc
    files of this session) are written to a private temporary folder, ``{dir}`` in ``argv``
    and ``env`` values; the folder goes with the session."""

    def __init__(
        self,
        argv: list[str],
        env: Mapping[str, str],
        size: tuple[int, int],
        files: Mapping[str, str],
    ) -> None:
        self.folder = tempfile.mkdtemp(prefix="journal-shell-")
        for name, text in files.items():
            with open(os.path.join(self.folder, name), "w") as out:
                out.write(text)
        argv = [a.replace("{dir}", self.folder) for a in argv]
        env = {k: v.replace("{dir}", self.folder) for k, v in env.items()}
        packed = struct.pack("HHHH", size[0], size[1], 0, 0)
        pid, self.fd = pty.fork()
        if pid == 0:  # the child: its size first (readline reads it as it starts), then bash
            try:
                fcntl.ioctl(0, termios.TIOCSWINSZ, packed)
                os.execvpe(argv[0], argv, env)
            finally:
                os._exit(127)
        self.pid = pid
        self.status: int | None = None

    def fileno(self) -> int:
        return self.fd

    def read(self) -> bytes:
        try:
            return os.read(self.fd, READ_SIZE)
        except OSError as exc:
            if exc.errno in (errno.EIO, errno.EBADF):
                return b""  # the shell and every process of its terminal are gone
            raise

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except BlockingIOError:
                time.sleep(0.001)
            except OSError:
                return  # gone: reading says so

    def resize(self, rows: int, cols: int) -> None:
        with contextlib.suppress(OSError):
            set_window_size(self.fd, rows, cols)  # the kernel sends SIGWINCH to the shell

    def close(self) -> int | None:
        shutil.rmtree(self.folder, ignore_errors=True)  # the shell removes it as it starts
        if self.status is None:
            self.status = self._wait(0.2)
        if self.status is None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGHUP)  # as a terminal closing does
            self.status = self._wait(2.0)
        if self.status is None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)
            self.status = self._wait(2.0)
        with contextlib.suppress(OSError):
            os.close(self.fd)
        return self.status

    def _wait(self, seconds: float) -> int | None:
        end = time.monotonic() + seconds
        while True:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return -1
            if pid:
                return os.waitstatus_to_exitcode(status)
            if time.monotonic() >= end:
                return None
            time.sleep(0.01)


class SshTerminal(Terminal):
    """A shell on an SSH host: a session channel with a pty on the transport's connection.

    ``rc`` (the shell's rc file of this session, which may hold secrets) is first written
    on the host by ``upload``, a command run on a channel of its own with the text on its
    standard input (never in a command line, which ``ps`` shows to every user of the host)
    that prints the file's path; ``command(path)`` is then what the terminal's channel
    runs."""

    def __init__(
        self,
        transport: SshTransport,
        command: Callable[[str], str],
        term: str,
        size: tuple[int, int],
        *,
        rc: str,
        upload: str,
    ) -> None:
        self.transport = transport
        conn = transport.conn
        conn.transport.set_keepalive(15)
        self.rc_path = self._upload(upload, rc)
        self.chan = conn.create_session()
        self.chan.get_pty(term=term, width=size[1], height=size[0])
        self.chan.exec_command(command(self.rc_path))
        self.lost = False

    def _upload(self, upload: str, text: str) -> str:
        import paramiko

        where = self.transport.target
        try:
            chan = self.transport.conn.create_session()
            chan.exec_command(upload)
            chan.sendall(text.encode("utf-8", "surrogateescape"))
            chan.shutdown_write()
            out = chan.makefile("rb").read()
            err = chan.makefile_stderr("rb").read()
            status = chan.recv_exit_status()
            chan.close()
        except (OSError, EOFError, paramiko.SSHException) as exc:
            raise ConnectFailed(
                f"{where}: the shell's rc file could not be written there: {exc}"
            ) from None
        path = out.decode("utf-8", "replace").strip()
        if status != 0 or not path.startswith("/"):
            said = err.decode("utf-8", "replace").strip() or f"exit status {status}"
            raise ConnectFailed(
                f"{where}: the shell's rc file could not be written in its temporary folder "
                f"(`mktemp`): {said}"
            )
        return path

    def fileno(self) -> int:
        return self.chan.fileno()

    def read(self) -> bytes:
        import paramiko

        try:
            data = self.chan.recv(READ_SIZE)
        except (OSError, EOFError, paramiko.SSHException):
            data = b""
        if not data:
            # the connection went, not (only) the shell
            link = self.transport.conn.transport
            self.lost = link is None or not link.is_active()
        return data

    def write(self, data: bytes) -> None:
        import paramiko

        with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
            self.chan.sendall(data)

    def resize(self, rows: int, cols: int) -> None:
        import paramiko

        with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
            self.chan.resize_pty(width=cols, height=rows)

    def close(self) -> int | None:
        import paramiko

        status = None
        if not self.lost and self.chan.eof_received:
            # the shell ended: sshd sends its exit status after the end of the output
            self.chan.status_event.wait(EXIT_STATUS_WAIT_S)
            status = self.chan.exit_status
        self.chan.close()
        if not self.lost:  # the shell removes its rc as it starts: unless it never did
            with contextlib.suppress(OSError, EOFError, paramiko.SSHException, AttributeError):
                chan = self.transport.conn.create_session()
                chan.exec_command(f"rm -f -- {shlex.quote(self.rc_path)}")
                chan.recv_exit_status()
                chan.close()
        return None if status == -1 else status

    def why_gone(self) -> tuple[str, str]:
        if self.lost:
            return "failed", (
                f"the connection to {self.transport.target} was lost while it ran: the "
                "command may still be running there"
            )
        return super().why_gone()
