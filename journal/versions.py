"""Package versions as PEP 440 orders them, and the local variant (``+cu130``) apart.

``2.12.0.dev20260226+cu130`` is newer than ``2.10.0+cu128``; ``2.4.1`` is older than ``2.4.2``;
a dev release sorts before its pre-releases, which sort before the release, which sorts before
its post-releases. Versions that are not PEP 440 still compare (as text, after all PEP 440 ones).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from functools import total_ordering

_PEP440 = re.compile(
    r"""^\s*v?
    (?:(?P<epoch>\d+)!)?
    (?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre_l>a|b|c|rc|alpha|beta|pre|preview)[-_.]?(?P<pre_n>\d+)?)?
    (?:-(?P<post_n1>\d+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d+)?)?
    (?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>\d+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    \s*$""",
    re.VERBOSE | re.IGNORECASE,
)

_PRE = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
_INF = float("inf")


@total_ordering
@dataclass(frozen=True, eq=False)
class Version:
    """A parsed version: compare with <, ==; ``public`` and ``local`` are its two halves."""

    text: str
    key: tuple

    @property
    def public(self) -> str:
        return self.text.split("+", 1)[0]

    @property
    def local(self) -> str | None:
        return self.text.split("+", 1)[1] if "+" in self.text else None

    @property
    def release(self) -> tuple[int, ...]:
        match = _PEP440.match(self.text)
        return tuple(int(p) for p in match.group("release").split(".")) if match else ()

    @property
    def major(self) -> int | None:
        return self.release[0] if self.release else None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self.key == other.key

    def __lt__(self, other: Version) -> bool:
        return self.key < other.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __str__(self) -> str:
        return self.text


@functools.lru_cache(maxsize=65536)
def parse_version(text: str) -> Version:
    """Parse ``text``; never raises (a non-PEP 440 version sorts after all others, as text)."""
    match = _PEP440.match(text)
    if not match:
        return Version(text, (1, text))
    release = [int(p) for p in match.group("release").split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()  # 2.4 == 2.4.0
    pre_l, dev_l = match.group("pre_l"), match.group("dev_l")
    post_n = match.group("post_n1") or match.group("post_n2")
    has_post = match.group("post_n1") is not None or match.group("post_l") is not None
    if pre_l:
        pre: tuple = (_PRE[pre_l.lower()], int(match.group("pre_n") or 0))
    elif dev_l and not has_post:
        pre = (-_INF, 0)  # X.devN comes before X.aN
    else:
        pre = (_INF, 0)
    post = (int(post_n or 0),) if has_post else (-_INF,)
    dev = (int(match.group("dev_n") or 0),) if dev_l else (_INF,)
    local = match.group("local")
    local_key: tuple = ()
    if local:
        local_key = tuple(
            (1, int(part), "") if part.isdigit() else (0, 0, part.lower())
            for part in re.split(r"[-_.]", local)
        )
    key = (0, int(match.group("epoch") or 0), tuple(release), pre, post, dev, local_key)
    return Version(text.strip(), key)


def is_version(text: str) -> bool:
    """Whether ``text`` is a PEP 440 version (``0.14.0``, ``2.11.0+cu130``, ``1.0rc1``)."""
    return _PEP440.match(text) is not None


def local_variant(text: str) -> str | None:
    """The local part of a version (``cu130`` of ``2.12.0.dev20260226+cu130``), if any."""
    return text.split("+", 1)[1] if "+" in text else None
