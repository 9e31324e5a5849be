"""Removing secrets from commands, env values and output before anything is written.

What was removed is recorded as ``{"kind": ..., "where": ...}``, never the value itself.

Recognised, besides the runbook's ``redact`` values and the values of secret-named variables:

- ``NAME=value`` and ``NAME: value`` for secret-like names (``HF_TOKEN=…``, ``AccountKey=…``,
  ``aws_secret_access_key = …``), and YAML's ``password: the rest of the line``;
- quoted keys of JSON, Python dicts, YAML and Ruby/PHP hashes (``"password": "…"``,
  ``'api_key': '…'``, ``\\"token\\": \\"…\\"`` inside a JSON string, ``"pin_password": 1234``);
- flags: ``--password X``, ``--hf-token=X``, ``--api-key X``, and ``-pPASS`` on the MySQL and
  MariaDB clients' command lines;
- ``Authorization:`` and ``X-Api-Key:`` headers, a ``Bearer``/``Basic`` credential after
  ``Authorization`` and a long one after ``Bearer``; ``user:password@`` in URLs;
- private key blocks (each line between ``-----BEGIN … PRIVATE KEY-----`` and its END line;
  to the end when there is none), PuTTY key files' private lines;
- token shapes, after the detect-secrets project's list: Hugging Face, GitHub, GitLab, OpenAI,
  Slack tokens and webhooks, AWS key ids, Google API keys, Stripe, npm, PyPI, Twilio, SendGrid,
  Square, Mailchimp, Discord and Telegram bot tokens, Shopify, JWTs.

Evidence is never masked: the output of an upgrade is what the journal is for. What a
secret-like name or flag is followed by is left when it cannot be a secret *by its form*:

- ``==`` and ``::`` after a name compare or qualify, they do not assign: ``tiktoken==0.14.0``
  (pip freeze, uv's ``+ tiktoken==0.14.0``) is a requirement, as ``>=``, ``~=``, ``!=`` and
  ``<=`` already are (none is an assignment's ``=``);
- a version under a name that distributions have: a secret word that is no part of an
  identifier on its own, being glued to the word before it or after a ``-`` or ``.``
  (``tiktoken``, ``oauth``, ``google-auth``, ``eks-token``), followed by a PEP 440 version
  with a dot (``"tiktoken": "0.14.0"``, conda's ``tiktoken=0.14.0=pypi_0``). Where the word
  is an identifier's own part (``HF_TOKEN``, ``db_password``, ``sessionToken``, ``password``)
  every value is masked, a version's shape too, and a glued name's value that is no version
  is still masked (``authtoken: 2abc…``);
- a literal (``true``, ``false``, ``null``, ``None``: ``api_key=None,`` in a printed config),
  an object (``"tiktoken": {…}``: its members are judged by their own keys), and an unquoted
  number with a fraction after a quoted key (``"time_to_first_token": 35.2``: a measurement;
  a whole number, a PIN, is masked);
- a figure after a label of words (a word and a blank before the name on its line, then
  ``:``): a number with a fraction or a unit (``Time to first token: 35.2 ms``); a bare whole
  number there (``Your token: 123456``) is masked, as is anything after a one-word key;
- what follows a flag after a blank but is not its value: the next option (or ``-``), an
  English function word or a noun naming an option (``the --password flag is deprecated``,
  ``use --api-key to set it``), a placeholder (``<password>``, argparse's metavar: the flag's
  name in capitals, ``--api-key API_KEY``), a variable's reference (``--token $HF_TOKEN``).
  After ``=``, or quoted, it is the value, whatever it says.

Those exceptions hang on the whole of a value; where output still being printed may be cut
(:meth:`Redactor.safe_cut`) the patterns are matched without them, so a cut never splits what
could still become a secret. Structured results (a probe's JSON, a parser's figures) are parsed
from the output as printed, then redacted field by field (:meth:`Redactor.value`), never
redacted as text first: the names and versions of packages are data.

Secrets are found in what a terminal shows (:func:`shown`: the escape sequences of
:data:`journal.terminal.ESCAPE` removed, as the detectors' clean view removes them; each ``\r``
redraw read as a line of its own) and masked in the bytes as printed, however the sequences
interleave with them (``\x1b[32mghp_…\x1b[0m``, ``\x1b[33mpassword\x1b[0m: …``, a token split
by a colour code, ``jq -C``'s keys and values, ``grep --color`` splitting ``HF_TOKEN``): the
secret's characters are replaced, the sequences kept, so colours still render; the text of
OSC and DCS strings (a title, a hyperlink's address) is redacted on its own. A token shape
follows any character that cannot be part of it, a colour code's ``m`` and a letter glued
before ``ghp_`` included; a letter before it counts only for prefixes that end ordinary words
(``sk-``: ``task-``, ``disk-``; see :data:`_SHAPES`).

Each pattern is led by a literal (a keyword, a token's prefix, a separator), so the regex engine
finds its candidates at memchr speed; case-insensitive ones are matched against the lowercased
bytes. Coloured output's view costs a few more passes at that speed (:func:`_shown`), and a
mask is put back among the escape sequences of its own lines only (:func:`_unshown`).
:meth:`Redactor.tail` and :meth:`Redactor.safe_cut` tell a recorder where output still being
printed may be cut without splitting a secret or an escape sequence (:mod:`journal.recorder`).
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from journal.terminal import ESCAPE
from journal.versions import is_version

MASK = "[REDACTED]"
MASK_B = MASK.encode()

#: Variable names whose values are secrets: HF_TOKEN, WANDB_API_KEY, DB_PASSWORD, …
SECRET_NAME = re.compile(
    r"(?i)(TOKEN|PASSWORD|PASSWD|PASSPHRASE|SECRET|_KEY|APIKEY|ACCOUNTKEY|CREDENTIALS?|_PASS"
    r"|_PWD)$"
)

#: Keys of stored dicts (probe results, labels, expectations) whose string value is a secret.
_KEY_WORDS = (
    r"(?:token|password|passwd|passphrase|secret|api[_-]?key|_key|accountkey|credentials?"
    r"|auth|authorization|_pass|_pwd)"
)
SECRET_KEY = re.compile(r"(?i)^[A-Za-z0-9_.-]*" + _KEY_WORDS + "$")

#: The secret word a :data:`SECRET_KEY` name ends with.
_KEY_WORD = re.compile(r"(?i)" + _KEY_WORDS + "$")
#: Keys whose mapping is keyed by distribution names (a package snapshot's ``packages``,
#: torch-env's ``packages``): those keys are data, never a secret-named field.
NAME_MAPS = frozenset({"packages"})

#: Secret values shorter than this are not searched for in output: too many false hits.
MIN_VALUE_LENGTH = 6

# Value shapes. A quoted value keeps its escapes; a bare one ends at a blank or a delimiter.
_DQ = rb'"(?:[^"\\\r\n]|\\.)*"'
_SQ = rb"'(?:[^'\\\r\n]|\\.)*'"
_ESCAPED_DQ = rb'\\"(?:[^"\\\r\n]|\\[^"\r\n])*\\"'  # \"…\" in a JSON string's JSON
_ESCAPED_SQ = rb"\\'(?:[^'\\\r\n]|\\[^'\r\n])*\\'"
_BARE = rb"[^\s\"';&|]+"
#: An assignment's or a flag's value.
_VALUE = rb"(?P<v>" + _DQ + rb"|" + _SQ + rb"|" + _BARE + rb")"
#: Not masked again (each pattern's match is looked for in data that earlier ones masked).
_FRESH = rb"(?!\\?[\"']?\[redacted\])"
_FRESH_CASED = rb"(?!\\?[\"']?\[REDACTED\])"
#: Before a token's prefix, by default: no letter, digit or underscore (``\b`` of the shapes'
#: regexes, written as a look-behind after the literal so that it leads).
_WORD = rb"[A-Za-z0-9_]"


class Span(NamedTuple):
    """What a pattern masks: ``data[start:end]`` becomes ``replacement``; ``lead`` to
    ``stop`` is all that it was recognised by (a key's name, a flag, a URL's ``@``)."""

    start: int
    end: int
    replacement: bytes
    kind: str
    lead: int
    stop: int = 0


#: What finds a pattern's spans: (the data as matched, lowercased for a case-insensitive
#: pattern; the match; the data as printed; strict), or None to leave the match. ``strict``
#: (where a cut may go, :meth:`Redactor.safe_cut`) drops the exceptions that hang on what
#: the value is: its end may not have been printed yet.
SpanOf = Callable[[bytes, re.Match[bytes], bytes, bool], "Span | None"]


class _Pattern(NamedTuple):
    kind: str
    #: led by a literal, with a group ``v`` (the value masked) or masking the whole match
    regex: re.Pattern[bytes]
    #: bytes of which the data must hold at least one to look further (found at memchr speed)
    gates: bytes = b""
    #: matched against the lowercased data (the spans are the same: only A-Z change)
    fold: bool = False
    #: lowercase words of which the data must hold one, for regexes not led by one of them
    needles: tuple[bytes, ...] = ()
    #: what to mask for a match, or None to leave it (default: group ``v``, or the match)
    span: SpanOf | None = None


def _token(prefix: bytes, rest: bytes, after: bytes | None = _WORD) -> re.Pattern[bytes]:
    """A token shape: ``prefix`` not preceded by a character of the class ``after`` (None:
    preceded by anything), then ``rest``."""
    if after is None:
        return re.compile(re.escape(prefix) + rest)
    return re.compile(re.escape(prefix) + rb"(?<!" + after + re.escape(prefix) + rb")" + rest)


# --- secret-named keys: NAME=value, name: value (YAML), "name": "value" (JSON, dicts) ---

#: key words (lowercase literals) and what must follow each to make a secret-like name
_KEYWORDS = (
    (b"token", b""),
    (b"pass", rb"(?:word|wd|phrase|(?<=_pass))"),
    (b"secret", b""),
    (b"key", rb"(?:(?<=_key)|(?<=apikey)|(?<=api-key)|(?<=accountkey))"),
    (b"credential", b"s?"),
    (b"auth", b"(?:orization)?"),
    (b"_pwd", b""),
)
_KEY_CHAR = re.compile(rb"[a-z0-9_.-]")
_YAML_LEAD = re.compile(rb"[ \t]*(?:-[ \t]+)?[\"']?[a-z0-9_.-]*")
_ENV_VALUE = re.compile(_VALUE)
_DICT_VALUE = re.compile(
    _ESCAPED_DQ + rb"|" + _ESCAPED_SQ + rb"|" + _DQ + rb"|" + _SQ + rb"|[^\s,;}\])\"'\\]+"
)
_QUOTES = (b'\\"', b"\\'", b'"', b"'")
_LITERALS = (b"true", b"false", b"null", b"none")


#: A version number: PEP 440 with a dot in its release (``0.14.0``, ``2.11.0+cu130``), and
#: conda's ``=build`` after it (``0.14.0=pypi_0``).
_VERSION_START = re.compile(rb"v?\d+\.\d")
_CONDA_BUILD = re.compile(rb"[a-z0-9_.+]+", re.IGNORECASE)
#: A measurement: a number with a fraction, or with a unit after it (``35.2 ms``, ``3 ms``).
_MEASURE = re.compile(
    rb"\d+(?P<frac>\.\d+)?(?:e[+-]?\d+)?(?:[ \t]*(?P<unit>(?:[mun]|\xc2\xb5)?s|min|%"
    rb"|[kmgt]?i?b(?:/s)?|tok(?:en)?s?/s|req(?:uest)?s?/s|it/s))?(?![a-z0-9_./])"
)


#: A number with a fraction, unquoted (JSON's, a dict's): a measurement, no credential.
_FRACTION = re.compile(rb"-?\d+\.\d+(?:e[+-]?\d+)?")


def _versionish(value: bytes) -> bool:
    """Whether ``value`` is a version number (as packages are pinned and listed)."""
    if not _VERSION_START.match(value):
        return False
    version, _, build = value.partition(b"=")
    if build and not _CONDA_BUILD.fullmatch(build):
        return False
    return is_version(version.decode("ascii", "replace"))


def _identifier_part(name: bytes, word: int) -> bool:
    """Whether the secret word at ``word`` of ``name`` (as printed) is a part of an
    identifier on its own: the name's beginning, after ``_`` (``HF_TOKEN``, ``db_password``,
    ``_key``), or a camelCase part (``sessionToken``). Otherwise (``tiktoken``, ``oauth``,
    ``google-auth``, ``eks-token``) the name is one that distributions have."""
    if word == 0 or name[word : word + 1] == b"_" or name[word - 1 : word] == b"_":
        return True
    return name[word - 1 : word].islower() and name[word : word + 1].isupper()


def secret_value(key: str, value: str) -> bool:
    """Whether ``value``, stored under ``key``, is a secret by its key's name: ``key`` is
    secret-named (:data:`SECRET_KEY`), unless it is named as distributions are (see
    :func:`_identifier_part`) and ``value`` is a version (``"tiktoken": "0.14.0"``)."""
    found = _KEY_WORD.search(key) if SECRET_KEY.match(key) else None
    if found is None:
        return False
    encoded = key.encode("utf-8", "surrogateescape")
    start = len(encoded) - len(found.group().encode("utf-8", "surrogateescape"))
    return _identifier_part(encoded, start) or not _versionish(value.encode("utf-8", "replace"))


def _phrase(data: bytes, line: int, name: int) -> bool:
    """Whether the name at ``name`` ends a label of several words (``Time to first token``):
    a word and a blank before it on its line."""
    before = data[line:name]
    return before[-1:] in (b" ", b"\t") and before.rstrip()[-1:].isalpha()


def _measured(data: bytes, at: int) -> bool:
    found = _MEASURE.match(data, at)
    return found is not None and bool(found.group("frac") or found.group("unit"))


def _named(data: bytes, m: re.Match[bytes], printed: bytes, strict: bool) -> Span | None:
    """A value after a secret-like name, in its form: quoted key (JSON, a dict), YAML line,
    or assignment; evidence (a version under a distribution's name, a literal, a figure after
    a label of words, an object) left."""
    rest, lead = m.end(), m.start()
    line = max(data.rfind(b"\n", 0, lead), data.rfind(b"\r", 0, lead)) + 1
    name = lead
    while name > line and _KEY_CHAR.match(data, name - 1):
        name -= 1
    # a version under a distribution's name: "tiktoken": "0.14.0", google-auth=2.38.0
    loose = not strict and not _identifier_part(printed[name:rest], lead - name)
    if m.group("close"):
        # the name must be all of a quoted key: "db_password", 'HF_TOKEN', \"token\"
        lead = name
        if lead == line or data[lead - 1 : lead] not in (b'"', b"'"):
            return None
        lead -= 1
        value = _DICT_VALUE.match(data, rest)
        if value is None or value.group().startswith(b"{"):
            return None  # an object: its members are judged by their own keys
        text = value.group()
        for quote in _QUOTES:
            if len(text) >= 2 * len(quote) and text.startswith(quote) and text.endswith(quote):
                if loose and _versionish(text[len(quote) : -len(quote)]):
                    return None
                return Span(value.start(), value.end(), quote + MASK_B + quote, "quoted-key", lead)
        if not _yaml(data, m, line, lead):
            if text in _LITERALS or _FRACTION.fullmatch(text) or (loose and _versionish(text)):
                return None  # "has_token": true, "time_to_first_token": 35.2 are no secrets
            # a number: masked as a string in the key's quotes, so that JSON stays JSON
            quote = (
                data[lead - 1 : lead + 1]
                if data[lead - 1 : lead] == b"\\"
                else data[lead : lead + 1]
            )
            return Span(value.start(), value.end(), quote + MASK_B + quote, "quoted-key", lead)
    elif m.group("keyword") == b"auth":
        return None  # Authorization: the header's own pattern
    elif not _yaml(data, m, line, lead):
        value = _ENV_VALUE.match(data, rest)
        if value is None:
            return None
        if not strict:
            text = value.group()
            if text.rstrip(b",;)]}") in _LITERALS or (loose and _versionish(text)):
                return None  # api_key=None, in a printed config; conda's tiktoken=0.14.0=pypi_0
            if m.group("sep") == b":" and _phrase(data, line, name) and _measured(data, rest):
                return None  # Time to first token: 35.2 ms
        return Span(rest, value.end(), MASK_B, "env-assignment", lead)
    # YAML's ``name: value``: the value is the rest of the line
    end = len(data)
    for stop in (b"\n", b"\r"):
        found = data.find(stop, rest)
        if 0 <= found < end:
            end = found
    while end > rest and data[end - 1 : end] in (b" ", b"\t"):
        end -= 1
    if not strict:
        text = data[rest:end]
        if text in _LITERALS or text.startswith(b"{") or (loose and _versionish(text)):
            return None
        if m.group("close") and _FRACTION.fullmatch(text.rstrip(b",")):
            return None  # indented JSON: "time_to_first_token": 35.2,
    return Span(rest, end, MASK_B, "yaml-key", lead) if end > rest else None


def _yaml(data: bytes, m: re.Match[bytes], line: int, lead: int) -> bool:
    """Whether the name matched is a YAML key: first on its line (after indentation and a
    list's ``-``), followed by ``: `` and an unquoted value."""
    rest = m.end()
    return (
        m.group("sep") == b":"
        and data[rest - 1 : rest] in (b" ", b"\t")
        and data[rest : rest + 1] not in (b'"', b"'")
        and lead - line < 256
        and _YAML_LEAD.fullmatch(data, line, lead) is not None
    )


_NAMED = [
    _Pattern(
        "env-assignment",
        re.compile(
            rb"(?P<keyword>" + word + rb")" + after + rb"(?P<close>\\?[\"'])?[ \t]*"
            rb"(?P<sep>=>|=(?!=)|:(?!:))[ \t]*" + _FRESH
        ),
        gates=b"=:",
        fold=True,
        span=_named,
    )
    for word, after in _KEYWORDS
]


# --- private keys: each line of the block masked, so that lines keep their numbers ---


def _lines(data: bytes, m: re.Match[bytes], printed: bytes, strict: bool) -> Span | None:
    start, end = m.span("v")
    body = re.sub(rb"[^\r\n]+", MASK_B, data[start:end])
    return Span(start, end, body, "private-key", m.start())


_PEM = rb"[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = re.compile(rb"-----END " + _PEM)
_BLOCKS = [
    _Pattern(
        "private-key",
        re.compile(rb"-----BEGIN " + _PEM + rb"(?P<v>[\s\S]*?)(?:-----END " + _PEM + rb"|\Z)"),
        span=_lines,
    ),
    _Pattern(
        "private-key",
        re.compile(rb"Private-Lines:[ \t]*\d+\r?\n(?P<v>(?:[A-Za-z0-9+/=]+(?:\r?\n|\Z))+)"),
        span=_lines,
    ),
]


# --- flags, headers, URLs ---

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


_FLAGS_AND_HEADERS = [
    _Pattern(
        "cli-flag",
        re.compile(
            rb"--(?<!---)(?P<flag>(?:[a-z0-9]+-)*(?:password|passwd|passphrase|token|api-?key"
            rb"|secret|secret-key|access-key|auth))(?P<eq>=|[ \t]+)" + _FRESH + _VALUE
        ),
        gates=b"-",
        fold=True,
        span=_flag,
    ),
    _Pattern(
        # the MySQL and MariaDB clients take the password glued to -p (-P is the port)
        "cli-flag",
        re.compile(
            rb"(?i:mysql|mariadb)(?:dump|admin|import|check|show|pump|-dump|-admin)?\b"
            rb"[^\r\n]*?[ \t]-p" + _FRESH_CASED + _VALUE
        ),
        gates=b"-",
        needles=(b"mysql", b"mariadb"),
    ),
    _Pattern(
        "authorization-header",
        re.compile(rb"authorization[ \t]*:[ \t]*" + _FRESH + rb"(?P<v>[^\r\n\"']+)"),
        gates=b":",
        fold=True,
    ),
    _Pattern(
        "authorization-header",
        re.compile(
            rb"authorization\b[^\r\n]{0,64}?\b(?:bearer|basic|token|digest)[ \t]+"
            + _FRESH
            + rb"(?P<v>[a-z0-9._~+/=-]+)"
        ),
        fold=True,
    ),
    _Pattern(
        "bearer-token",
        re.compile(rb"bearer[ \t]+" + _FRESH + rb"(?P<v>[a-z0-9._~+/-]{20,}=*)"),
        fold=True,
    ),
    _Pattern(
        "url-password",
        re.compile(rb"://[^/\s:@\"']+:" + _FRESH_CASED + rb"(?P<v>[^/\s@\"']+)@"),
        gates=b":",
    ),
    _Pattern(
        "slack-webhook",
        re.compile(rb"https://hooks\.slack\.com/(?:services|workflows)/(?P<v>[A-Za-z0-9_/]+)"),
        gates=b"/",
    ),
]


# --- token shapes ---


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


def _shape(prefix: bytes, rest: bytes, gates: bytes = b"", after: bytes | None = _WORD) -> _Pattern:
    return _Pattern("token-shape", _token(prefix, rest, after), gates=gates)


#: What may stand before a token shape, shape by shape. A token follows any character that
#: cannot be part of it: a blank, a quote, ``=``, and a colour code, which redaction reads
#: removed (:func:`shown`). A letter glued before a prefix is what tells apart an ordinary
#: word from a token only where the prefix ends ordinary words: ``sk-`` and ``sk_live_``
#: (``task-``, ``disk-``, ``risk_live_``), ``rk_live_`` (``work_live_``), ``pypi-``
#: (``testpypi-``, ``mypypi-``), an AWS key id's ``A`` in a run of capitals and digits, and
#: the two-letter ``AC``, ``SK`` and ``SG.`` (``MAC…``, ``TASK…``, ``MSG.``). No word ends in
#: ``ghp``, ``github_pat``, ``glpat``, ``xoxb``, ``shpat``, ``npm`` followed by ``_`` and
#: 36 letters and digits, nor in ``AIza``, ``sq0csp``, ``eyJ``: those are masked glued to
#: anything (``xghp_…``, ``tokenghp_…``); ``hf_`` glued to anything but ``_`` (``load_hf_…``
#: in an identifier). Shapes whose body may hold another's prefix (``github_pat_``'s and
#: GitLab's ``_``, a JWT's) come first, so that the longer token is masked whole.
_LETTER_OR_DIGIT = rb"[A-Za-z0-9]"
_SHAPES = [
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
    _Pattern(  # Mailchimp: 32 hex digits then the data centre, found by its -usNN
        "token-shape",
        re.compile(rb"-us[0-9]{1,2}(?![A-Za-z0-9])"),
        gates=b"-",
        span=_before(re.compile(rb"[0-9a-f]"), range(32, 33)),
    ),
    _shape(b"AC", rb"[0-9a-f]{32}(?![A-Za-z0-9_])"),  # Twilio
    _shape(b"SK", rb"[0-9a-f]{32}(?![A-Za-z0-9_])"),
    _Pattern(  # Discord bot tokens, found by their middle part
        "token-shape",
        re.compile(rb"\." + _TOKEN_CHARS + rb"{6}\." + _TOKEN_CHARS + rb"{27,}"),
        gates=b".",
        span=_before(re.compile(_TOKEN_CHARS), range(24, 27), b"MN"),
    ),
    _Pattern(  # Telegram bot tokens, found by the colon after the bot's id
        "token-shape",
        re.compile(rb":" + _TOKEN_CHARS + rb"{35}(?![A-Za-z0-9_-])"),
        gates=b":",
        span=_before(re.compile(rb"[0-9]"), range(8, 11)),
    ),
]

# Blocks first (their lines hold anything), then names, flags and headers, then shapes.
_PATTERNS: list[_Pattern] = [*_BLOCKS, *_NAMED, *_FLAGS_AND_HEADERS, *_SHAPES]

#: Each pattern with the set of its gate bytes, and all gate bytes (each as a 1-byte string).
_GATED = [(p, frozenset(p.gates[i : i + 1] for i in range(len(p.gates)))) for p in _PATTERNS]
_GATE_BYTES = sorted(frozenset().union(*(gates for _, gates in _GATED)))

#: Words after which the rest of a line may still become (part of) a secret: each pattern
#: whose match may hold a blank is led by one of them, or starts just before one.
_TRIGGERS = (
    b"pass",
    b"token",
    b"secret",
    b"key",
    b"credential",
    b"auth",
    b"_pwd",
    b"bearer",
    b"mysql",
    b"mariadb",
    b"-----begin",
    b"private-lines",
)
#: How far before its trigger word a match may start (``"MY_LONG_NAME_TOKEN"``).
_TRIGGER_REACH = 256
#: A match straddling a cut is looked for this far either side of it: a longer one is no secret.
WINDOW = 16 * 1024


@dataclass
class Redactor:
    """Redacts known secret values (the runbook's ``redact`` list, secret-named env values)
    and anything shaped like a secret."""

    values: list[bytes] = field(default_factory=list)

    @classmethod
    def for_run(
        cls,
        listed: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Redactor:
        """A redactor knowing the listed values and the values of secret-named variables in
        the step's env and in journal's own environment (a command may echo ``$HF_TOKEN``)."""
        found: set[str] = {v for v in listed if v}
        for source in (env or {}, os.environ if environ is None else environ):
            for name, value in source.items():
                if SECRET_NAME.search(name) and len(value) >= MIN_VALUE_LENGTH:
                    found.add(value)
        # Longest first, so a value containing another is masked whole.
        return cls(sorted((v.encode() for v in found), key=len, reverse=True))

    def bytes(self, data: bytes, where: str) -> tuple[bytes, list[dict[str, Any]]]:
        """``data`` with secrets masked, and what was masked where.

        Secrets are looked for in what a terminal shows of ``data`` (:func:`shown`: its
        colours, cursor moves and other escape sequences removed), and masked in ``data`` as
        printed, however the sequences interleave with them: the secret's characters are
        replaced, the escape sequences kept where they were (after the mask for those within
        the secret), so that colours still render. The text of OSC and DCS strings (a
        window's title, a hyperlink's address), which a terminal does not show but the
        bytes hold, is redacted on its own."""
        if not _escaped(data):
            out, listed, counts, _ = self._scan(data, None)
            return out, _found(listed, counts, where)
        view, strings = _shown(data)
        masked, listed, counts, pieces = self._scan(view, [])
        out = _unshown(data, view, masked, pieces) if pieces else data
        if strings:
            out = self._string_sequences(out, listed, counts)
        return out, _found(listed, counts, where)

    def _scan(
        self, data: bytes, pieces: list[tuple[int, int, int, int]] | None
    ) -> tuple[bytes, dict[bytes, int], dict[str, int], list[tuple[int, int, int, int]]]:
        """``data`` masked; how many times each known value and each kind was masked; and,
        when ``pieces`` is a list (empty), what of ``data`` each mask replaced (see
        :func:`_compose`)."""
        listed: dict[bytes, int] = {}
        for value in self.values:
            if value in data:
                listed[value] = data.count(value)
                if pieces is not None:
                    pieces = _compose(pieces, _occurrences(data, value))
                data = data.replace(value, MASK_B)
        counts: dict[str, int] = {}
        lower: bytes | None = None
        present = _gates_in(data)  # looked for once: a mask brings none in
        for pattern, gates in _GATED:
            if gates and gates.isdisjoint(present):
                continue
            if pattern.fold or pattern.needles:
                lower = data.lower() if lower is None else lower
                if pattern.needles and not any(n in lower for n in pattern.needles):
                    continue
            spans = _spans(pattern, data, lower)
            if spans:
                if pieces is not None:
                    pieces = _compose(pieces, [(a, b, len(mask)) for a, b, mask, *_ in spans])
                data = _masked(data, spans, counts)
                lower = None
        return data, listed, counts, pieces or []

    def _string_sequences(
        self, data: bytes, listed: dict[bytes, int], counts: dict[str, int]
    ) -> bytes:
        """``data`` with the text of its OSC, DCS, SOS, PM and APC strings redacted (each on
        its own), the counts added to ``listed`` and ``counts``."""
        out: list[bytes] = []
        last = 0
        for m in _STRING_ESCAPE.finditer(data):
            start = m.start() + 2
            masked, more, kinds, _ = self._scan(m.group()[2:], None)
            if not more and not kinds:
                continue
            out += [data[last:start], masked]
            last = m.end()
            for value, n in more.items():
                listed[value] = listed.get(value, 0) + n
            for kind, n in kinds.items():
                counts[kind] = counts.get(kind, 0) + n
        if not out:
            return data
        out.append(data[last:])
        return b"".join(out)

    def text(self, value: str, where: str) -> tuple[str, list[dict[str, Any]]]:
        """A string with secrets masked, and what was masked where."""
        data, found = self.bytes(value.encode("utf-8", "surrogateescape"), where)
        return data.decode("utf-8", "surrogateescape"), found

    def value(self, value: Any, where: str, key: str | None = None) -> Any:
        """A stored value (a string, or a dict or list of them, as events carry: a probe's
        parsed JSON) with secrets masked field by field: strings and keys as :meth:`text`
        does, and the string under a secret-named key (``password``, ``HF_TOKEN``,
        ``api_key``) whole, unless it is a version under a distribution's name
        (:func:`secret_value`). The keys of a mapping under ``packages`` are distribution
        names, data: none of them makes its value a secret (``tiktoken``).

        The strings are first looked at together, one per line: when that text holds no
        secret, none of them does (each pattern is read within a line, and a line's end
        stands where a string's end does), so a 500-package snapshot costs one pass, not
        thousands; otherwise each string is redacted on its own, each distinct one once."""
        strings: list[str] = []
        _strings(value, strings)
        if isinstance(key, str):
            strings.append(key)
        joined = "\n".join(strings).encode("utf-8", "surrogateescape")
        clean = not self.bytes(joined, where)[1]
        return self._value(value, where, key, None if clean else {})

    def _value(self, value: Any, where: str, key: str | None, seen: dict[str, str] | None) -> Any:
        """:meth:`value`'s walk; ``seen`` is None when no string holds a secret, else the
        strings redacted so far."""
        if isinstance(value, str):
            if key is not None and value and value != MASK and secret_value(key, value):
                return MASK
            return self._text(value, where, seen)
        if isinstance(value, int):
            # a whole number under a secret-named key ("pin_password": 1234), as in the text;
            # True and False are no secrets, nor a float (a measurement)
            is_secret = key is not None and not isinstance(value, bool)
            return MASK if is_secret and secret_value(key, str(value)) else value
        if isinstance(value, dict):
            names = key in NAME_MAPS
            return {
                self._text(k, where, seen) if isinstance(k, str) else k: self._value(
                    v, where, k if isinstance(k, str) and not names else None, seen
                )
                for k, v in value.items()
            }
        if isinstance(value, list):
            return [self._value(v, where, None, seen) for v in value]
        if isinstance(value, tuple):
            return tuple(self._value(v, where, None, seen) for v in value)
        return value

    def _text(self, value: str, where: str, seen: dict[str, str] | None) -> str:
        if seen is None or not value:
            return value
        if value not in seen:
            seen[value] = self.text(value, where)[0]
        return seen[value]

    def env(
        self, env: Mapping[str, str], where: str
    ) -> tuple[dict[str, str], list[dict[str, Any]]]:
        """An env mapping with secret-named values replaced whole and other values redacted."""
        out: dict[str, str] = {}
        found: list[dict[str, Any]] = []
        for name, value in env.items():
            if SECRET_NAME.search(name):
                out[name] = MASK
                found.append({"kind": "secret-variable", "where": f"{where}.{name}", "count": 1})
            else:
                out[name], more = self.text(value, f"{where}.{name}")
                found.extend(more)
        return out, found

    def tail(self, data: bytes, start: int = 0) -> int:
        """Where the part of ``data[start:]`` (a line not ended yet) that could still become
        (part of) a secret as more is printed begins: its last word (a token's shape holds no
        blank), the word of the first trigger word in it (``password``, ``token``, ``key``,
        ``Authorization``, ``mysql``, ``-----BEGIN``: the value after one may hold blanks),
        the word before that too when the trigger's name is followed by ``:`` or ``=`` or
        ends the line so far (a label's words tell evidence from a secret: ``Time to first
        token: 35.2 ms``), or the beginning of a known value that the line ends with. Read on
        what a terminal shows (:func:`shown`); the escape sequences just before the part
        held are held with it, so no cut splits one."""
        if not _escaped(data, start):
            return start + self._hold(data[start:])
        layout = _Layout(data, start, len(data))
        return layout.before(self._hold(layout.view(data)))

    def _hold(self, line: bytes) -> int:
        """:meth:`tail` on a line as a terminal shows it: the offset in ``line``."""
        hold = max(line.rfind(b" "), line.rfind(b"\t")) + 1
        lower = line.lower()
        for word in _TRIGGERS:
            at = lower.find(word, 0, hold + len(word) - 1)
            if at >= 0:
                before = _blank_before(line, at)
                if _NAME_END.match(lower, at + len(word)):
                    words = len(line[:before].rstrip(b" \t"))
                    if words:
                        before = _blank_before(line, words)
                hold = min(hold, max(before, at - _TRIGGER_REACH))
        for value in self.values:
            hold = min(hold, len(line) - _prefix_at_end(line, value))
        return hold

    def safe_cut(self, data: bytes, cut: int, floor: int) -> int:
        """``cut`` moved back to the start of any secret in ``data`` (a known value, a
        pattern's match) that straddles it, looked for ``WINDOW`` bytes either side; never
        below ``floor`` (``floor`` itself when a secret straddling the cut starts there or
        before). Read on what a terminal shows (:func:`shown`): a cut is never inside an
        escape sequence, and one before a secret leaves the sequences before it with it."""
        lo = max(floor, cut - WINDOW)
        hi = min(len(data), cut + WINDOW)
        ahead = data.rfind(b"\x1b", floor, lo)
        if ahead >= 0 and ESCAPE_BYTES.match(data, ahead).end() > lo:  # type: ignore[union-attr]
            lo = ahead  # the window begins inside an escape sequence: at its beginning
        if not _escaped(data, lo, hi):
            at = cut - lo
            moved = self._straddled(data[lo:hi], at)
            if moved == at:
                return cut
            return max(floor, lo + moved)
        layout = _Layout(data, lo, hi)
        at = layout.shown_before(cut)
        if at >= layout.size or cut != layout.raw_at(at):
            cut = layout.before(at)  # among the escape sequences before a character: before them
        moved = self._straddled(layout.view(data), at)
        if moved == at:
            return cut
        return max(floor, layout.before(moved))

    def _straddled(self, window: bytes, at: int) -> int:
        """Where in ``window`` a cut at ``at`` must move back to so that it splits no
        secret (:meth:`safe_cut`); ``at`` itself when none straddles it."""
        lower = window.lower()
        for _ in range(8):  # moving back may land inside another secret
            moved = at
            for value in self.values:
                first = window.find(value, max(0, at - len(value) + 1), at + len(value) - 1)
                if 0 <= first < moved:
                    moved = first
            present = _gates_in(window)
            for pattern, gates in _GATED:
                if gates and gates.isdisjoint(present):
                    continue
                for span in _spans(pattern, window, lower, strict=True):
                    # from the word of the name or flag the value is recognised by to the
                    # value's end: a cut before the name's keyword (``secret_|key=…``) would
                    # leave a name that is not recognised (``key=…``, ``token=…``)
                    start = _word_start(window, span.lead)
                    if start < at < span.stop:
                        moved = min(moved, start)
            if moved == at or moved <= 0:
                return moved
            at = moved
        return at


# --- what a terminal shows: secrets found there, masked in the bytes as printed ---

#: :data:`journal.terminal.ESCAPE` in bytes (the 8-bit CSI is U+009B's UTF-8, not a byte of
#: another character's): CSI (colours, cursor moves, erase), OSC, DCS/SOS/PM/APC strings and
#: the short escapes. None of them holds a newline.
ESCAPE_BYTES = re.compile(ESCAPE.pattern.replace(r"\x9b", r"\xc2\x9b").encode("ascii"))
#: The text of the string sequences (OSC, DCS, SOS, PM, APC), as :data:`ESCAPE_BYTES` ends it.
_STRING_ESCAPE = re.compile(rb"\x1b(?:\][^\x07\x1b\n]*|[PX^_][^\x1b\n]*)")
#: The second byte of the string sequences (OSC, DCS, SOS, PM, APC).
_STRING_KINDS = frozenset(b"]PX^_")
#: Bytes that no escape sequence but a string holds: one absent from the data marks where a
#: sequence was removed, so that what is left of two never joins into a third.
_MARKS = (b"\x00", b"\x01", b"\x02", b"\x03", b"\x04")
#: Distinct sequences removed one kind at a time at most (a 24-bit colour gradient has
#: thousands: the regular expression, once, is faster then).
_KINDS = 48


def shown(data: bytes) -> bytes:
    """``data`` as a terminal shows it, as redaction reads it: every escape sequence of
    :data:`journal.terminal.ESCAPE` removed (colours, cursor moves, titles, hyperlinks),
    everything else kept, ``\\r`` included (each ``\\r`` redraw is read as a line of its
    own, so a secret is found on the line that showed it and on those it overwrote)."""
    return _shown(data)[0] if _escaped(data) else data


def _escaped(data: bytes, start: int = 0, end: int | None = None) -> bool:
    """Whether ``data[start:end]`` holds an escape sequence's first byte (ESC, the 8-bit CSI)."""
    end = len(data) if end is None else end
    return data.find(b"\x1b", start, end) >= 0 or _csi8(data, start, end)


def _csi8(data: bytes, start: int = 0, end: int | None = None) -> bool:
    """Whether ``data[start:end]`` holds the 8-bit CSI (U+009B's UTF-8), its last byte looked
    for first (a one-byte search is at memchr speed, a two-byte one much slower)."""
    end = len(data) if end is None else end
    at = data.find(b"\x9b", start, end)
    return at >= 0 and data.find(b"\xc2\x9b", max(start, at - 1), end) >= 0


def _shown(data: bytes) -> tuple[bytes, bool]:
    """:func:`shown`, and whether ``data`` holds string sequences (OSC, DCS …).

    Exactly ``ESCAPE_BYTES.sub(b"", data)``, but coloured output (a few kinds of sequence
    repeated: uv's and pip's lines) costs a few passes at memchr speed, not a regular
    expression's match per sequence: each kind of self-contained sequence is replaced, all
    its occurrences at once, by as many mark bytes, which no sequence holds (so the rest of
    two never reads as a third), and the marks are deleted at the end. Anything else (a
    string, a lone ESC, the 8-bit CSI, many kinds) is left to the regular expression."""
    mark = next((m for m in _MARKS if m not in data), None)
    if mark is not None and not _csi8(data):
        work, pos = data, 0
        for _ in range(_KINDS):
            at = work.find(b"\x1b", pos)
            if at < 0:
                return work.translate(None, mark), False
            # a sequence that reads the same wherever its bytes are (a CSI with its final
            # byte, a short escape), not a string (it ends where a later ESC is), a lone ESC
            # or an ESC [ whose CSI never ended (both prefixes of others)
            seq = ESCAPE_BYTES.match(work, at).group()  # type: ignore[union-attr]
            if len(seq) < 2 or seq[1] in _STRING_KINDS or seq == b"\x1b[":
                break
            work = work.replace(seq, mark * len(seq))  # in place: the same length
            pos = at + len(seq)
    return ESCAPE_BYTES.sub(b"", data), _STRING_ESCAPE.search(data) is not None


class _Layout:
    """Where the text of ``raw[lo:hi]`` lies between its escape sequences: its run ``k`` of
    characters is ``raw[r[k] : r[k] + n[k]]``, ``view[v[k] : v[k] + n[k]]`` of what a
    terminal shows of that part (:func:`shown`)."""

    __slots__ = ("lo", "n", "r", "size", "v")

    def __init__(self, raw: bytes, lo: int, hi: int) -> None:
        self.lo = lo
        self.v: list[int] = []
        self.r: list[int] = []
        self.n: list[int] = []
        pos, size = lo, 0
        for m in ESCAPE_BYTES.finditer(raw, lo, hi):
            if m.start() > pos:
                self._run(size, pos, m.start() - pos)
                size += m.start() - pos
            pos = m.end()
        if hi > pos:
            self._run(size, pos, hi - pos)
            size += hi - pos
        self.size = size

    def _run(self, v: int, r: int, n: int) -> None:
        self.v.append(v)
        self.r.append(r)
        self.n.append(n)

    def view(self, raw: bytes) -> bytes:
        return b"".join(raw[r : r + n] for r, n in zip(self.r, self.n, strict=True))

    def raw_at(self, at: int) -> int:
        """Where character ``at`` of the view (``0 <= at < size``) is in the raw bytes."""
        k = bisect_right(self.v, at) - 1
        return self.r[k] + at - self.v[k]

    def before(self, at: int) -> int:
        """Where in the raw bytes a cut before character ``at`` of the view goes: just after
        the character before it, every escape sequence between the two left after the cut."""
        at = min(at, self.size)
        return self.lo if at <= 0 else self.raw_at(at - 1) + 1

    def shown_before(self, pos: int) -> int:
        """How many characters of the view come before raw position ``pos``."""
        k = bisect_right(self.r, pos) - 1
        return 0 if k < 0 else self.v[k] + min(pos - self.r[k], self.n[k])

    def escapes(self, raw: bytes, start: int, end: int) -> bytes:
        """The escape sequences between the characters of ``raw[start:end]`` (both ends
        characters of the view), in their order."""
        first = bisect_right(self.r, start) - 1
        last = bisect_right(self.r, end - 1) - 1
        r, n = self.r, self.n
        return b"".join(raw[r[k] + n[k] : r[k + 1]] for k in range(first, last))


def _compose(
    pieces: list[tuple[int, int, int, int]], spans: list[tuple[int, int, int]]
) -> list[tuple[int, int, int, int]]:
    """What each mask of the data replaced, kept through one more pass of masking.

    ``pieces`` are ``(start, end, orig_start, orig_end)``: ``data[start:end]`` (in order,
    apart) replaced ``orig[orig_start:orig_end]`` of the data first masked, the rest of
    ``data`` being ``orig`` as it was; ``spans`` are ``(start, end, size)``: ``data[start:end]``
    replaced by ``size`` bytes now (in order, apart). A span overlapping a piece takes it
    whole. One pass over both."""
    out: list[tuple[int, int, int, int]] = []
    i = 0
    offset = 0  # orig - data, after the pieces passed
    shift = 0  # new data - data, after the spans passed
    for start, end, size in spans:
        while i < len(pieces) and pieces[i][1] <= start:
            cs, ce, os_, oe = pieces[i]
            out.append((cs + shift, ce + shift, os_, oe))
            offset = oe - ce
            i += 1
        first, last, orig_start = start, end, start + offset
        while i < len(pieces) and pieces[i][0] < end:
            cs, ce, os_, oe = pieces[i]
            if cs < first:
                first, orig_start = cs, os_
            last = max(last, ce)
            offset = oe - ce
            i += 1
        new = first + shift
        out.append((new, new + (start - first) + size + (last - end), orig_start, last + offset))
        shift += size - (end - start)
    out += [(cs + shift, ce + shift, os_, oe) for cs, ce, os_, oe in pieces[i:]]
    return out


def _occurrences(data: bytes, value: bytes) -> list[tuple[int, int, int]]:
    """Where ``data.replace(value, MASK_B)`` replaces, as spans for :func:`_compose`."""
    out = []
    at = data.find(value)
    while at >= 0:
        out.append((at, at + len(value), len(MASK_B)))
        at = data.find(value, at + len(value))
    return out


def _unshown(
    raw: bytes, view: bytes, masked: bytes, pieces: list[tuple[int, int, int, int]]
) -> bytes:
    """``raw`` with the masks of its view put in: each piece's characters (``view[os:oe]``,
    found in ``raw`` between its escape sequences) replaced by the mask
    (``masked[cs:ce]``), the sequences among them kept after it, the rest of ``raw`` as it
    was. The view has the raw bytes' newlines (no escape sequence holds one), so each piece
    is looked for on its own lines only: the cost is that of the lines that hold a mask."""
    out: list[bytes] = []
    last = 0
    vline = rline = 0  # where the line of the current piece starts, in the view and the raw
    layout: _Layout | None = None
    for cs, ce, start, end in pieces:
        while (nl := view.find(b"\n", vline, start)) >= 0:
            vline, rline = nl + 1, raw.find(b"\n", rline) + 1
        if layout is None or layout.lo != rline or end - vline > layout.size:
            layout = _Layout(raw, rline, _line_end_after(raw, view, vline, rline, end - 1))
        first = layout.raw_at(start - vline)
        stop = layout.raw_at(end - 1 - vline) + 1
        out += [raw[last:first], masked[cs:ce], layout.escapes(raw, first, stop)]
        last = stop
    out.append(raw[last:])
    return b"".join(out)


def _line_end_after(raw: bytes, view: bytes, vline: int, rline: int, at: int) -> int:
    """The end (after its newline) in ``raw`` of the line holding character ``at`` of the
    view, counting lines from the one starting at ``vline`` (``rline`` in ``raw``)."""
    end = view.find(b"\n", at)
    lines = view.count(b"\n", vline, len(view) if end < 0 else end)
    for _ in range(lines):
        rline = raw.find(b"\n", rline) + 1
    if end < 0:
        return len(raw)
    return raw.find(b"\n", rline) + 1


def _found(listed: dict[bytes, int], counts: dict[str, int], where: str) -> list[dict[str, Any]]:
    """What was masked where, as events record it: never the value."""
    found = [{"kind": "listed-value", "where": where, "count": n} for n in listed.values()]
    return found + [{"kind": kind, "where": where, "count": n} for kind, n in counts.items()]


#: After a trigger word: the rest of its name, then ``:`` or ``=`` (or nothing yet).
_NAME_END = re.compile(rb"[a-z0-9_.-]*(?:\\?[\"'])?[ \t]*(?:[:=]|\Z)")


def _blank_before(line: bytes, at: int) -> int:
    """Where the word holding ``line[at]`` begins (after a blank)."""
    return max(line.rfind(b" ", 0, at), line.rfind(b"\t", 0, at)) + 1


def _strings(value: Any, into: list[str]) -> None:
    """Every string in a stored value, its mappings' keys included."""
    if isinstance(value, str):
        into.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(k, str):
                into.append(k)
            _strings(v, into)
    elif isinstance(value, list | tuple):
        for v in value:
            _strings(v, into)


def open_block(data: bytes, end: int) -> int | None:
    """Where the line begins of a private key block that ``data[:end]`` opens and does not
    end (its END line not printed yet); None when there is none. Read on what a terminal
    shows (:func:`shown`): a block printed in colour is held too."""
    if _escaped(data, 0, end):
        begin = data.rfind(b"BEGIN", 0, end)
        if begin < 0:
            return None
        line = max(data.rfind(b"\n", 0, begin), data.rfind(b"\r", 0, begin)) + 1
        view = shown(data[line:end])
        return None if _open_block(view, len(view)) is None else line
    return _open_block(data, end)


def _open_block(data: bytes, end: int) -> int | None:
    begin = data.rfind(b"-----BEGIN ", 0, end)
    if begin < 0:
        return None
    line_end = data.find(b"\n", begin, end)
    if data.find(b"PRIVATE KEY", begin, line_end if line_end >= 0 else end) < 0:
        return None
    if _PEM_END.search(data, begin, end):
        return None
    return max(data.rfind(b"\n", 0, begin), data.rfind(b"\r", 0, begin)) + 1


def _word_start(data: bytes, at: int) -> int:
    """Where the word holding byte ``at`` begins (after a blank or a line's end)."""
    return max(data.rfind(sep, 0, at) for sep in (b"\n", b"\r", b" ", b"\t")) + 1


def _gates_in(data: bytes) -> frozenset[bytes]:
    """The gate bytes that ``data`` holds (a pattern none of whose gates is there cannot
    match)."""
    return frozenset(g for g in _GATE_BYTES if g in data)


def _spans(pattern: _Pattern, data: bytes, lower: bytes | None, strict: bool = False) -> list[Span]:
    """What ``pattern`` masks in ``data``, in order; ``strict``: all that could be a secret
    once the rest of its value is printed (no evidence left out by what the value is)."""
    subject = lower if pattern.fold and lower is not None else data
    if pattern.fold and lower is None:
        subject = data.lower()
    out: list[Span] = []
    for m in pattern.regex.finditer(subject):
        if pattern.span is not None:
            found = pattern.span(subject, m, data, strict)
            if found is None:
                continue
        elif "v" in pattern.regex.groupindex:
            found = Span(*m.span("v"), MASK_B, pattern.kind, m.start())
        else:
            found = Span(*m.span(), MASK_B, pattern.kind, m.start())
        if not out or found.start >= out[-1].end:
            out.append(found._replace(stop=max(found.end, m.end())))
    return out


def _masked(data: bytes, spans: list[Span], counts: dict[str, int]) -> bytes:
    pieces = []
    last = 0
    for start, end, replacement, kind, _, _ in spans:
        pieces += [data[last:start], replacement]
        last = end
        counts[kind] = counts.get(kind, 0) + 1
    pieces.append(data[last:])
    return b"".join(pieces)


def _prefix_at_end(line: bytes, value: bytes) -> int:
    """The length of the longest beginning of ``value`` (short of all of it) that ``line``
    ends with; 0 for none."""
    first = value[:1]
    at = line.find(first, max(0, len(line) - len(value) + 1))
    while at >= 0:
        if value.startswith(line[at:]):
            return len(line) - at
        at = line.find(first, at + 1)
    return 0
