"""Secrets by their shape: tokens whose form gives them away wherever they are printed, after
the detect-secrets project's list: Hugging Face, GitHub, GitLab, OpenAI, Slack, AWS key ids,
Google API keys, Stripe, npm, PyPI, Twilio, SendGrid, Square, Mailchimp, Discord and Telegram
bot tokens, Shopify, JWTs."""

from __future__ import annotations

import re

from journal.redact.spans import MASK_B, Pattern, Span, SpanOf

#: Before a token's prefix, by default: no letter, digit or underscore (``\b`` of the shapes'
#: regexes, written as a look-behind after the literal so that it leads).
_WORD = rb"[A-Za-z0-9_]"


def _token(prefix: bytes, rest: bytes, after: bytes | None = _WORD) -> re.Pattern[bytes]:
    """A token shape: ``prefix`` not preceded by a character of the class ``after`` (None:
    preceded by anything), then ``rest``."""
    if after is None:
        return re.compile(re.escape(prefix) + rest)
    return re.compile(re.escape(prefix) + rb"(?<!" + after + re.escape(prefix) + rb")" + rest)


def _before(run: re.Pattern[bytes], lengths: range, first: bytes = b"") -> SpanOf:
    """A span for a shape found by its middle: the match, plus the run of ``run`` characters
    just before it when its length is in ``lengths`` (and it begins with one of ``first``)."""

    def span(data: bytes, m: re.Match[bytes], printed: bytes, strict: bool) -> Span | None:
        start = m.start()
        limit = max(0, start - lengths.stop)
        while start > limit and run.match(data, start - 1):
            start -= 1
        for length in sorted(lengths, reverse=True):
            at = m.start() - length
            if at >= start and (not first or data[at : at + 1] in first):
                if at == 0 or not _WORD_CHAR.match(data, at - 1) or not first:
                    return Span(at, m.end(), MASK_B, "token-shape", at)
        return None

    return span


_WORD_CHAR = re.compile(_WORD)
_TOKEN_CHARS = rb"[A-Za-z0-9_-]"


def _shape(prefix: bytes, rest: bytes, gates: bytes = b"", after: bytes | None = _WORD) -> Pattern:
    return Pattern("token-shape", _token(prefix, rest, after), gates=gates)


#: What may stand before a token shape, shape by shape. A token follows any character that cannot be
#: part of it: a blank, a quote, ``=``, and a colour code, which redaction reads removed
#: (:func:`~journal.redact.terminal.shown`). A letter glued before a prefix is what tells apart an
#: ordinary word from a token only where the prefix ends ordinary words: ``sk-`` and ``sk_live_``
#: (``task-``, ``disk-``, ``risk_live_``), ``rk_live_`` (``work_live_``), ``pypi-`` (``testpypi-``,
#: ``mypypi-``), an AWS key id's ``A`` in a run of capitals and digits, and the two-letter ``AC``,
#: ``SK`` and ``SG.`` (``MAC…``, ``TASK…``, ``MSG.``). No word ends in ``ghp``, ``github_pat``,
#: ``glpat``, ``xoxb``, ``shpat``, ``npm`` followed by ``_`` and 36 letters and digits, nor in
#: ``AIza``, ``sq0csp``, ``eyJ``: those are masked glued to anything (``xghp_…``, ``tokenghp_…``);
#: ``hf_`` glued to anything but ``_`` (``load_hf_…`` in an identifier). Shapes whose body may hold
#: another's prefix (``github_pat_``'s and GitLab's ``_``, a JWT's) come first, so that the longer
#: token is masked whole.
_LETTER_OR_DIGIT = rb"[A-Za-z0-9]"
SHAPES = [
    _shape(b"github_pat_", rb"[A-Za-z0-9_]{40,}", b"_", after=None),
    _shape(b"sk-", rb"[A-Za-z0-9_-]{32,}", b"-"),
    _shape(b"pypi-", rb"[A-Za-z0-9_-]{50,}", b"-"),
    _shape(b"gl", rb"(?:pat|dt|rt|ptt|ft|soat|cbt|oas)-[A-Za-z0-9_-]{20,}", b"-", after=None),
    # Slack: xoxb-<team>-<bot>-<secret>: digits first (``xoxo-gossip-girl`` is no token)
    _shape(b"xox", rb"[baprseo]-[0-9]+-[A-Za-z0-9-]{8,}", b"-", after=None),
    _shape(b"sq0", rb"(?:atp-[0-9A-Za-z_-]{22}|csp-[0-9A-Za-z_-]{43})", b"-", after=None),
    _shape(
        b"eyJ",
        rb"[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
        b".",
        after=None,
    ),
    _shape(b"SG.", rb"[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}", b"."),
    _shape(b"AIza", rb"[0-9A-Za-z_-]{35}", after=None),  # Google API keys
    _shape(  # AWS access key ids
        b"A", rb"(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[0-9A-Z]{16}", after=rb"[A-Z0-9]"
    ),
    _shape(b"hf_", rb"[A-Za-z0-9]{30,}", b"_", after=rb"_"),
    _shape(b"gh", rb"[pousr]_[A-Za-z0-9]{30,}", b"_", after=None),
    _shape(b"npm_", rb"[A-Za-z0-9]{36}", b"_", after=None),
    _shape(b"sk_live_", rb"[A-Za-z0-9]{20,}", b"_", after=_LETTER_OR_DIGIT),
    _shape(b"rk_live_", rb"[A-Za-z0-9]{20,}", b"_", after=_LETTER_OR_DIGIT),
    _shape(b"shp", rb"(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", b"_", after=None),
    Pattern(  # Mailchimp: 32 hex digits then the data centre, found by its -usNN
        "token-shape",
        re.compile(rb"-us[0-9]{1,2}(?![A-Za-z0-9])"),
        gates=b"-",
        span=_before(re.compile(rb"[0-9a-f]"), range(32, 33)),
    ),
    _shape(b"AC", rb"[0-9a-f]{32}(?![A-Za-z0-9_])"),  # Twilio
    _shape(b"SK", rb"[0-9a-f]{32}(?![A-Za-z0-9_])"),
    Pattern(  # Discord bot tokens, found by their middle part
        "token-shape",
        re.compile(rb"\." + _TOKEN_CHARS + rb"{6}\." + _TOKEN_CHARS + rb"{27,}"),
        gates=b".",
        span=_before(re.compile(_TOKEN_CHARS), range(24, 27), b"MN"),
    ),
    Pattern(  # Telegram bot tokens, found by the colon after the bot's id
        "token-shape",
        re.compile(rb":" + _TOKEN_CHARS + rb"{35}(?![A-Za-z0-9_-])"),
        gates=b":",
        span=_before(re.compile(rb"[0-9]"), range(8, 11)),
    ),
]
