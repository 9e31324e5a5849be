"""`journal shell [--host H] [--probe torch-env] [--note TEXT]`: an interactive shell on a
runbook host, passed through untouched (raw mode, window resizes, Ctrl-C/Ctrl-Z/Ctrl-D as
bytes to the shell, full-screen programs), and recorded command by command
(:mod:`journal.service.shell`)."""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import shutil
import signal
import sys
import termios
import tty
from pathlib import Path
from typing import Any

from journal.cli.context import Context
from journal.errors import BadInput
from journal.runbook import Host, Runbook

#: How often the loop wakes with nothing to read, to store a quiet command's output on time.
TICK_S = 0.2
COLOURS = {"error": "\x1b[1;31m", "warning": "\x1b[1;33m", "info": "\x1b[36m"}
RESET = "\x1b[0m"


def pick_host(runbook: Runbook, name: str | None) -> Host:
    if name:
        return runbook.host(name)
    if len(runbook.hosts) == 1:
        return next(iter(runbook.hosts.values()))
    if not runbook.hosts:
        raise BadInput(f"{runbook.path} names no host: add one under [hosts.NAME]")
    raise BadInput(f"name the host with --host: one of {', '.join(sorted(runbook.hosts))}")


def shell(ctx: Context, args: argparse.Namespace) -> int:
    runbook = ctx.runbook
    host = pick_host(runbook, args.host)
    if args.probe and args.probe not in runbook.probes:
        raise BadInput(f"no probe named {args.probe!r}: one of {', '.join(sorted(runbook.probes))}")
    if args.note is not None and not args.note.strip():
        raise BadInput("the note is empty")
    if not os.isatty(0):
        raise BadInput("journal shell needs a terminal on its standard input")
    from journal.service.shell import ShellSession
    from journal.service.steps import connect, ensure_opened
    from journal.transport import ConnectFailed, transport_for

    store = ctx.store
    ensure_opened(store, runbook)
    transport = transport_for(host, accept_new_host_key=args.accept_new_host_key)
    error = connect(transport, host, lambda events: store.append(runbook.name, events))
    if error:
        print(f"journal: {host.name}: {error}", file=sys.stderr)
        return 255
    session = ShellSession(store, runbook, host, transport, probe=args.probe)
    try:
        term = None
        try:
            term = open_terminal(ctx, runbook, host, transport, session.nonce)
        except ConnectFailed as exc:
            print(f"journal: {host.name}: {exc}", file=sys.stderr)
            return 255
        if args.note:
            session.add_note(args.note)
        print(
            f"journal: recording a shell on {host.name} in {runbook.name} "
            "(each command a step run; exit to end)",
            file=sys.stderr,
        )
        from journal.service.heartbeat import heartbeat

        with heartbeat(store, runbook.name):
            status = relay(term, session)
    finally:
        transport.close()
    n = len(session.runs)
    print(
        f"journal: shell on {host.name} ended; {n} command{'s' if n != 1 else ''} recorded",
        file=sys.stderr,
    )
    if getattr(term, "lost", False):
        print(f"journal: the connection to {host.name} was lost", file=sys.stderr)
        return 255  # as ssh says it
    return status if status is not None and status >= 0 else 0


def open_terminal(ctx: Context, runbook: Runbook, host: Host, transport: Any, nonce: str) -> Any:
    """The session's shell, its hooks' marks led by ``nonce`` (written into its rc file
    only: no command line, environment or terminal ever holds it)."""
    from journal.service.shell_hooks import RC_UPLOAD, bash_rc, remote_command, zsh_files
    from journal.transport.interactive import LocalTerminal, SshTerminal, window_size

    size = window_size(0)
    term = os.environ.get("TERM") or "xterm-256color"
    exports = dict(host.env)
    exports["JOURNAL_SHELL"] = host.name
    if host.is_local:
        # the inner `journal` (journal note …) finds the same database and runbook
        db = ctx.db
        if "://" not in db:
            db = str(Path(db).resolve())
        exports["JOURNAL_DB"] = db
        exports["JOURNAL_RUNBOOK"] = str(Path(runbook.path).resolve())
        env = {**os.environ, "TERM": term}
        journal = [sys.executable, "-m", "journal"]
        zsh = shutil.which("zsh")
        if os.path.basename(os.environ.get("SHELL", "")) == "zsh" and zsh:
            if "ZDOTDIR" in os.environ:
                env["__JOURNAL_ZDOTDIR"] = os.environ["ZDOTDIR"]
            env["ZDOTDIR"] = "{dir}"
            files = zsh_files(exports, journal, nonce=nonce)
            return LocalTerminal([zsh, "-i"], env, size, files)
        bash = shutil.which("bash") or "/bin/bash"
        rc = bash_rc(exports, remote=False, journal=journal, nonce=nonce)
        return LocalTerminal([bash, "--rcfile", "{dir}/bashrc", "-i"], env, size, {"bashrc": rc})
    rc = bash_rc(exports, remote=True, nonce=nonce)
    return SshTerminal(transport, remote_command, term, size, rc=rc, upload=RC_UPLOAD)


class _Screen:
    """Our terminal's output: what the shell printed, and journal's own lines between."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.last = b"\n"
        self.colour = os.environ.get("NO_COLOR") is None

    def write(self, data: bytes) -> None:
        if not data:
            return
        self.last = data[-1:]
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except BlockingIOError:
                select.select([], [self.fd], [], 1.0)

    def lines(self, lines: list[tuple[str, str]]) -> None:
        """journal's lines, each on a line of its own, before the next prompt."""
        if not lines:
            return
        out = "" if self.last in (b"\n",) else "\r\n"
        for severity, text in lines:
            text = " ".join(text.split())
            if self.colour:
                out += f"{COLOURS.get(severity, '')}journal: {text}{RESET}\r\n"
            else:
                out += f"journal: {text}\r\n"
        self.write(out.encode("utf-8", "replace"))


def relay(term: Any, session: Any) -> int | None:
    """Pass the terminal through until the shell ends; record as the marks say."""
    from journal.service.shell_marks import ACK, Mark, Marks

    marks = Marks(session.nonce)  # output that does not carry the nonce is output
    screen = _Screen(1)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)

    def on_winch(signum: int, frame: object) -> None:
        """Nothing here: the signal's byte on ``wake_w`` wakes the loop, whichever thread
        the signal came to (a Python handler runs only once the main thread's select ends)."""

    old_winch = signal.signal(signal.SIGWINCH, on_winch)
    old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    saved = None
    with contextlib.suppress(termios.error):
        saved = termios.tcgetattr(0)
        tty.setraw(0)
    why = ("interrupted", "interrupted (the session ended)")
    by_itself = False  # the shell ended (exit, Ctrl-D), not journal nor the connection
    try:
        shell_fd = term.fileno()
        while True:
            ready, _, _ = select.select([0, shell_fd, wake_r], [], [], TICK_S)
            if wake_r in ready:
                with contextlib.suppress(OSError):
                    os.read(wake_r, 1024)
                from journal.transport.interactive import window_size

                term.resize(*window_size(0))
            if 0 in ready:
                data = os.read(0, 65536)
                if not data:
                    why = ("interrupted", "interrupted (journal's terminal closed)")
                    break
                term.write(data)
            if not ready:  # quiet a while: an ESC held at the end of a read began no mark
                held = marks.idle()
                if held:
                    session.output(held)
                    screen.write(held)
            if shell_fd in ready:
                data = term.read()
                if not data:
                    why = term.why_gone()
                    by_itself = not getattr(term, "lost", False)
                    break
                for piece in marks.feed(data):
                    if isinstance(piece, Mark):
                        _on_mark(piece, term, session, screen, ACK)
                    else:
                        session.output(piece)
                        screen.write(piece)
            session.tick()
    except BaseException as exc:  # SIGHUP, SIGTERM (journal's own stop), a store error
        said = getattr(exc, "why", None) or type(exc).__name__
        why = ("interrupted", f"interrupted ({said}): journal stopped")
        raise
    finally:
        if saved is not None:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(0, termios.TCSAFLUSH, saved)
        signal.set_wakeup_fd(old_wakeup)
        signal.signal(signal.SIGWINCH, old_winch)
        with contextlib.suppress(OSError):
            screen.write(marks.rest())
        status = None
        try:
            status = term.close()
        finally:
            os.close(wake_r)
            os.close(wake_w)
            session.close(why, status if by_itself else None)
    return status


def _on_mark(mark: Any, term: Any, session: Any, screen: _Screen, ack: bytes) -> None:
    if mark.kind == "C":
        from journal.service.shell_commands import where_of

        command, cwd = mark.text(0), mark.text(1)
        try:
            session.started(command, cwd, where_of(mark.text(3)))
        finally:
            if mark.fields[2:3] == ("1",):
                term.write(ack)  # the hook waits for it: the command goes on now
    elif mark.kind == "P":
        from journal.service.shell_marks import reported_secrets

        # learnt before the command's end is recorded: its output not stored yet is masked
        session.learn(reported_secrets(mark.raw(2)))
        try:
            code = int(mark.fields[0])
        except (IndexError, ValueError):
            code = None
        if session.running is not None:
            lines = session.ended(code, mark.text(1)) if code is not None else []
            if code is None:
                session.close(("interrupted", "interrupted (its end mark was unreadable)"))
            screen.lines(lines)
    elif mark.kind == "N":
        said = session.note(mark.text(0).split("\x1f")[:-1] or [mark.text(0)])
        screen.lines([("info", said)])
