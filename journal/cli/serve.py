"""`journal serve`: the web UI on Werkzeug's threaded server, loopback unless a token guards it."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import socket
import sys

from journal.cli.context import Context
from journal.errors import BadInput


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
    line, where Werkzeug would print its own message and exit 1."""
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
    from werkzeug.serving import make_server

    from journal.web import create_app
    from journal.web.security import TokenHidingHandler
    from journal.web.state import warm

    host = bind.strip("[]")
    app = create_app({"DB": ctx.db, "TOKEN": token, "BIND": host})
    listener = _listen(host, port)
    server = make_server(
        host,
        port,
        app,
        threaded=True,
        fd=listener.fileno(),
        request_handler=TokenHidingHandler,  # the token never in the access log
    )
    listener.close()  # the server holds its own copy of the socket
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{server.socket.getsockname()[1]}/"
    from journal.store.engine import shown

    print(f"journal: serving {shown(ctx.db)} at {url}" + (f"?token={token}" if token else ""))
    print("journal: Ctrl-C stops it", flush=True)
    warm(app)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    print("journal: stopped", file=sys.stderr)
    return 0
