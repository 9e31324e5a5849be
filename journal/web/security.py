"""What keeps the UI safe to leave running: the token, CSRF tokens on POST, the
Content-Security-Policy, and error pages that never show a traceback.

- With a ``TOKEN`` every request must carry it: ``Authorization: Bearer T``, the cookie set
  by opening any URL once with ``?token=T`` (which then redirects to the URL without it, so
  the token does not stay in the address bar or history), or ``?token=T`` itself.
- A POST carries the session's CSRF token (form field ``csrf_token`` or header
  ``X-CSRF-Token``); the session is Flask's signed cookie, its key random per server start.
- Without a token the server answers only to loopback host names (localhost, 127.0.0.1,
  ::1, the address it is bound to), so a web page that rebinds its own name to 127.0.0.1
  cannot read the journal through the user's browser.
- Scripts come only from the app itself (no inline script or handler anywhere), styles too.
- The access log never holds the token: :class:`AccessLog` writes ``token=[REDACTED]`` for
  the query of a request that carried it (and the token itself wherever it shows).
"""

from __future__ import annotations

import hmac
import re
import secrets
import time
from typing import Any
from urllib.parse import quote, quote_plus, urlencode

from flask import Flask, Response, abort, current_app, redirect, render_template, request, session
from werkzeug.exceptions import HTTPException, InternalServerError

TOKEN_COOKIE = "journal_token"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}

CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


def _same(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def host_name(host: str) -> str:
    """The name of a Host header without its port (``[::1]:5000`` -> ``::1``)."""
    if host.startswith("["):
        return host[1:].partition("]")[0].lower()
    return host.rpartition(":")[0].lower() if host.count(":") == 1 else host.lower()


def check_host() -> None:
    """Without a token, refuse a Host header that is not a name of this machine's loopback."""
    if current_app.config.get("TOKEN"):
        return
    allowed = {*LOOPBACK_NAMES, str(current_app.config.get("BIND", "")).lower()}
    if host_name(request.host) not in allowed:
        abort(400, "this journal server answers only to localhost (it has no --token)")


def check_token() -> Response | None:
    """Refuse a request without the server's token (when it has one)."""
    token = current_app.config.get("TOKEN")
    if not token:
        return None
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer ") and _same(header[7:].strip(), token):
        return None
    if _same(request.cookies.get(TOKEN_COOKIE), token):
        return None
    if _same(request.args.get("token"), token):
        if request.method != "GET":
            return None
        rest = [(k, v) for k, values in request.args.lists() for v in values if k != "token"]
        target = request.path + (f"?{urlencode(rest)}" if rest else "")
        response = redirect(target, 303)
        response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict")
        return response
    abort(401, "this journal server needs its token: open the URL `journal serve` printed")


def csrf_token() -> str:
    """This session's CSRF token (made on first use)."""
    if CSRF_FIELD not in session:
        session[CSRF_FIELD] = secrets.token_urlsafe(32)
    return session[CSRF_FIELD]


def check_csrf() -> None:
    """Refuse a state-changing request whose CSRF token is missing or not the session's."""
    if request.method not in UNSAFE_METHODS:
        return
    expected = session.get(CSRF_FIELD)
    given = request.form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER)
    if not expected or not _same(given, expected):
        abort(400, "the form's CSRF token is missing or wrong: reload the page and try again")


def secure_headers(response: Response) -> Response:
    # A page with a policy of its own (the postmortem's HTML, styles inline) keeps it.
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    # The same URL answers with a fragment to htmx and a page to a browser: keep caches apart.
    response.vary.add("HX-Request")
    return response


def error_page(exc: HTTPException) -> tuple[str, int]:
    """A plain page for any HTTP error; internal errors say nothing of their cause."""
    code = exc.code or 500
    if code >= 500:
        original = getattr(exc, "original_exception", None)
        if original is not None:
            current_app.logger.error("internal error on %s", request.path, exc_info=original)
        message = "Something went wrong on the server; the server's log says what."
        return render_template("errors/error.html", code=code, name=exc.name, message=message), 500
    return render_template(
        "errors/error.html", code=code, name=exc.name, message=exc.description
    ), code


def internal_error(exc: Exception) -> tuple[str, int]:
    if isinstance(exc, HTTPException):
        return error_page(exc)
    wrapped = InternalServerError()
    wrapped.original_exception = exc
    return error_page(wrapped)


def init_app(app: Flask) -> None:
    app.before_request(check_host)
    app.before_request(check_token)
    app.before_request(check_csrf)
    app.after_request(secure_headers)
    app.register_error_handler(HTTPException, error_page)
    app.register_error_handler(Exception, internal_error)
    app.jinja_env.globals["csrf_token"] = csrf_token


#: A ``token=`` parameter in a logged request line (its value up to the next parameter).
_TOKEN_PARAM = re.compile(r"([?&;]token=)[^&;\s\"]*")
HIDDEN = "[REDACTED]"


def hide_token(text: str, token: str | None) -> str:
    """``text`` (a line of the access log) without any ``token=`` value, nor ``token``
    itself (as it is, or URL-quoted) wherever else it shows."""
    text = _TOKEN_PARAM.sub(rf"\g<1>{HIDDEN}", text)
    if token:
        forms = {token, quote(token, safe=""), quote_plus(token)}
        for form in sorted(forms, key=len, reverse=True):
            text = text.replace(form, HIDDEN)
    return text


class AccessLog:
    """A WSGI app's access log, a line per request on ``stream`` as common log format writes
    it, with the token hidden (:func:`hide_token`): ``127.0.0.1 - - [04/Dec/2026 17:20:01]
    "GET /?token=[REDACTED] HTTP/1.1" 303 -``. The line is written when the answer starts (a
    live stream's, when it opens)."""

    def __init__(self, app: Any, token: str | None, stream: Any) -> None:
        self.app, self.token, self.stream = app, token, stream

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        def started(status: str, headers: list[tuple[str, str]], *info: Any) -> Any:
            self._log(environ, status.split(" ", 1)[0])
            return start_response(status, headers, *info)

        return self.app(environ, started)

    def _log(self, environ: dict[str, Any], status: str) -> None:
        path = environ.get("PATH_INFO", "") or "/"
        query = environ.get("QUERY_STRING", "")
        target = quote(path.encode("latin-1", "replace"), safe="/;=+,:@&$!~*'()-._")
        target += f"?{query}" if query else ""
        when = time.strftime("%d/%b/%Y %H:%M:%S")
        line = (
            f'{environ.get("REMOTE_ADDR", "-")} - - [{when}] "{environ.get("REQUEST_METHOD")} '
            f'{target} {environ.get("SERVER_PROTOCOL", "HTTP/1.1")}" {status} -'
        )
        try:
            self.stream.write(hide_token(line, self.token) + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass  # a closed stderr loses the log line, never the answer
