"""Secrets by their context on a command line or in a request: a secret-named flag's value
(``--password X``, ``--hf-token=X``, ``-pPASS`` on the MySQL and MariaDB clients' command
lines), the ``Authorization:`` header and a ``Bearer`` credential, ``user:password@`` in
URLs, and Slack's webhook addresses.

What follows a flag after a blank but is not its value is left: the next option, prose (``the
--password flag is deprecated``), a placeholder (``<password>``, argparse's ``--api-key
API_KEY``), a variable's reference (``--token $HF_TOKEN``)."""

from __future__ import annotations

import re

from journal.redact.spans import FRESH, FRESH_CASED, MASK_B, VALUE, Pattern, Span

#: Words that follow a flag named in a sentence (``the --password flag is deprecated``, ``use
#: --api-key to set it``): English function words and the nouns that name an option. A
#: blank-separated value that is one of them is prose, not the flag's value.
_PROSE = frozenset(
    b"a an the this that these those it its is are was were be been being has have had do does"
    b" did can could will would shall should may might must not no nor and or but if then than"
    b" when where which who while as at by for from in into of on onto to with without via per"
    b" instead also only too so such flag flags option options argument arguments arg args"
    b" parameter parameters param switch setting settings value values field variable env"
    b" environment file deprecated removed ignored required requires needed takes"
    b" expects accepts overrides given passed set unset missing".split()
)
#: A shell variable's reference: the secret's name, its value masked wherever printed.
_REFERENCE = re.compile(rb"\$\{?[a-z_][a-z0-9_]*\}?")


def _flag(data: bytes, m: re.Match[bytes], printed: bytes, strict: bool) -> Span | None:
    """A flag's value, unless what follows the flag after a blank is not one: the next option
    (or ``-``, standard input), a word of prose, a placeholder (``<token>``, the flag's own
    name in capitals as argparse's usage shows it: ``--api-key API_KEY``, ``--hf-token
    [HF_TOKEN]``), a variable's reference (``--token $HF_TOKEN``)."""
    start, end = m.span("v")
    if not strict and m.group("eq") != b"=":
        value = data[start:end]
        # argparse's metavar, in brackets when the value is optional (``[HF_TOKEN]``)
        shown = printed[start:end].rstrip(b".,;:!?)]}").removeprefix(b"[")
        if (
            value.startswith(b"-")
            or value.rstrip(b".,;:!?)]}") in _PROSE
            or (value.startswith(b"<") and value.endswith(b">"))
            or _REFERENCE.fullmatch(value)
            or shown == m.group("flag").upper().replace(b"-", b"_")
        ):
            return None
    return Span(start, end, MASK_B, "cli-flag", m.start())


#: The flag, header and URL patterns, in the order they apply.
FLAGS_AND_HEADERS = [
    Pattern(
        "cli-flag",
        re.compile(
            rb"--(?<!---)(?P<flag>(?:[a-z0-9]+-)*(?:password|passwd|passphrase|token|api-?key"
            rb"|secret|secret-key|access-key|auth))(?P<eq>=|[ \t]+)" + FRESH + VALUE
        ),
        gates=b"-",
        fold=True,
        span=_flag,
    ),
    Pattern(
        # the MySQL and MariaDB clients take the password glued to -p (-P is the port)
        "cli-flag",
        re.compile(
            rb"(?i:mysql|mariadb)(?:dump|admin|import|check|show|pump|-dump|-admin)?\b"
            rb"[^\r\n]*?[ \t]-p" + FRESH_CASED + VALUE
        ),
        gates=b"-",
        needles=(b"mysql", b"mariadb"),
    ),
    Pattern(
        "authorization-header",
        re.compile(rb"authorization[ \t]*:[ \t]*" + FRESH + rb"(?P<v>[^\r\n\"']+)"),
        gates=b":",
        fold=True,
    ),
    Pattern(
        "authorization-header",
        re.compile(
            rb"authorization\b[^\r\n]{0,64}?\b(?:bearer|basic|token|digest)[ \t]+"
            + FRESH
            + rb"(?P<v>[a-z0-9._~+/=-]+)"
        ),
        fold=True,
    ),
    Pattern(
        "bearer-token",
        re.compile(rb"bearer[ \t]+" + FRESH + rb"(?P<v>[a-z0-9._~+/-]{20,}=*)"),
        fold=True,
    ),
    Pattern(
        "url-password",
        re.compile(rb"://[^/\s:@\"']+:" + FRESH_CASED + rb"(?P<v>[^/\s@\"']+)@"),
        gates=b":",
    ),
    Pattern(
        "slack-webhook",
        re.compile(rb"https://hooks\.slack\.com/(?:services|workflows)/(?P<v>[A-Za-z0-9_/]+)"),
        gates=b"/",
    ),
]

