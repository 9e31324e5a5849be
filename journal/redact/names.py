"""Secrets by their name: the variables whose values are secrets (``HF_TOKEN``,
``DB_PASSWORD``), the stored keys whose values are (:func:`secret_value`), and the patterns
that mask what follows a secret-like name in text: ``NAME=value``, YAML's ``name: value``,
quoted keys of JSON and dicts (``"password": "…"``).

A name's value is left when it cannot be a secret by its form: a version under a name that
distributions have (``tiktoken==0.14.0``, ``"google-auth": "2.38.0"``), a literal, an object,
a measurement after a label of words (``Time to first token: 35.2 ms``); see
:mod:`journal.redact` for the whole list."""

from __future__ import annotations

import re

from journal.redact.spans import (
    DQ,
    ESCAPED_DQ,
    ESCAPED_SQ,
    FRESH,
    MASK_B,
    SQ,
    VALUE,
    Pattern,
    Span,
)
from journal.versions import is_version

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
_ENV_VALUE = re.compile(VALUE)
_DICT_VALUE = re.compile(
    ESCAPED_DQ + rb"|" + ESCAPED_SQ + rb"|" + DQ + rb"|" + SQ + rb"|[^\s,;}\])\"'\\]+"
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


#: One pattern per key word: a secret-like name, then its separator, then its value.
NAMED = [
    Pattern(
        "env-assignment",
        re.compile(
            rb"(?P<keyword>" + word + rb")" + after + rb"(?P<close>\\?[\"'])?[ \t]*"
            rb"(?P<sep>=>|=(?!=)|:(?!:))[ \t]*" + FRESH
        ),
        gates=b"=:",
        fold=True,
        span=_named,
    )
    for word, after in _KEYWORDS
]

