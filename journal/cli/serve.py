"""`journal serve`: the web UI on waitress, loopback unless a token guards it.

Waitress is a production WSGI server of pure Python (no C extension, no fork: it runs
wherever journal does, Windows included), kept by the Pylons project; Werkzeug's own server
is for development. Its requests are answered by a fixed pool of :data:`THREADS` threads: a
live stream (a running step's page) holds one while it is open, so the pool is sized for a
team's browsers, each with a few live pages, and the requests of the others besides.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import socket
import sys

from journal.cli.context import Context
from journal.errors import BadInput

#: Threads answering requests (a live stream holds one while its page is open).
THREADS = 48
#: Seconds a connection may stay silent before it is closed (a live stream beats sooner).
CHANNEL_TIMEOUT_S = 300


def is_loopback(bind: str) -> bool:
    """Whether ``bind`` only listens on this machine (127.0.0.0/8, ::1, localhost)."""
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket, bound here so that a taken port is bad input (exit 2) with one
    line, where the server would raise its own error."""
    from werkzeug.serving import get_sockaddr, select_address_family

    family = select_address_family(host, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(get_sockaddr(host, port, family))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        busy = " (another server has it: give another --port, or --port 0 for any free one)"
        said = busy if exc.errno == errno.EADDRINUSE else ""
        raise BadInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}{said}") from None
    return sock


def serve(ctx: Context, args: argparse.Namespace) -> int:
    bind, port = args.bind, args.port
    token = args.token or os.environ.get("JOURNAL_TOKEN") or None
    if not is_loopback(bind) and not token:
        raise BadInput(
            f"--bind {bind} would let other machines read the journal: give --token T (or set "
            "JOURNAL_TOKEN) so that every request must carry it, or bind 127.0.0.1"
        )
    if not 0 <= port <= 65535:
        raise BadInput(f"--port {port} is out of range (0-65535)")
    ctx.require_db()
    from waitress.server import create_server

    from journal.web import create_app
    from journal.web.security import AccessLog
    from journal.web.state import warm

    host = bind.strip("[]")
    app = create_app({"DB": ctx.db, "TOKEN": token, "BIND": host})
    listener = _listen(host, port)
    server = create_server(
        AccessLog(app, token, sys.stderr),  # the token never in the access log
        sockets=[listener],
        threads=THREADS,
        ident="journal",
        channel_timeout=CHANNEL_TIMEOUT_S,
        asyncore_use_poll=True,  # no select() limit on open connections
    )
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{listener.getsockname()[1]}/"
    from journal.store.engine import shown

    print(f"journal: serving {shown(ctx.db)} at {url}" + (f"?token={token}" if token else ""))
    print("journal: Ctrl-C stops it", flush=True)
    warm(app)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    print("journal: stopped", file=sys.stderr)
    return 0
