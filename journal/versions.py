"""Package versions and names as the packaging standards read them, leniently.

:mod:`packaging` (PyPA's implementation of PEP 440 and PEP 503) does the reading:
``2.12.0.dev20260226+cu130`` is newer than ``2.10.0+cu128``; a dev release sorts before its
pre-releases, which sort before the release, which sorts before its post-releases; NCCL's
``2.28.3-1`` is ``2.28.3.post1``. What this module adds is leniency, because hosts print
versions the standard rejects (a conda build's ``1.2.3_abc``, ``not installed``):
:func:`parse_version` never raises, and a version that is not PEP 440 still compares, as text,
after every PEP 440 one. The local variant (``cu130``) is split off in one place,
:func:`local_variant`, for text the standard rejects too.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import total_ordering

from packaging.version import InvalidVersion
from packaging.version import Version as Pep440

__all__ = [
    "Version",
    "canonical_name",
    "is_version",
    "local_variant",
    "parse_version",
    "pep440",
    "public_version",
]


@total_ordering
@dataclass(frozen=True, eq=False)
class Version:
    """A version as a host printed it (``text``); ``parsed`` is its PEP 440 reading, if any."""

    text: str
    parsed: Pep440 | None

    @property
    def _key(self) -> tuple:
        return (0, self.parsed) if self.parsed is not None else (1, self.text)

    @property
    def public(self) -> str:
        """The version without its local label, as printed (``2.10.0`` of ``2.10.0+cu128``)."""
        return public_version(self.text)

    @property
    def local(self) -> str | None:
        """The local label as printed (``cu128``), or None."""
        return local_variant(self.text)

    @property
    def release(self) -> tuple[int, ...]:
        """The release numbers (``(2, 12, 0)``); empty for a version PEP 440 rejects."""
        return self.parsed.release if self.parsed is not None else ()

    @property
    def major(self) -> int | None:
        return self.release[0] if self.release else None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self._key == other._key

    def __lt__(self, other: Version) -> bool:
        return self._key < other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __str__(self) -> str:
        return self.text


def pep440(text: str) -> Pep440 | None:
    """``text`` read by PEP 440, or None when the standard rejects it."""
    try:
        return Pep440(text)
    except InvalidVersion:
        return None


@functools.lru_cache(maxsize=65536)
def parse_version(text: str) -> Version:
    """Read ``text``; never raises (a version PEP 440 rejects sorts after all others, as text)."""
    text = text.strip()
    return Version(text, pep440(text))


def is_version(text: str) -> bool:
    """Whether ``text`` is a PEP 440 version (``0.14.0``, ``2.11.0+cu130``, ``1.0rc1``)."""
    return pep440(text) is not None


def local_variant(text: str | None) -> str | None:
    """The local label of a version as printed (``cu130`` of ``2.12.0.dev20260226+cu130``)."""
    if not text or "+" not in text:
        return None
    return text.split("+", 1)[1].strip() or None


def public_version(text: str) -> str:
    """A version without its local label, as printed (``2.12.0.dev20260226``)."""
    return text.split("+", 1)[0].strip()


@functools.lru_cache(maxsize=16384)
def canonical_name(name: str) -> str:
    """A distribution name as PEP 503 compares it (``Nvidia_NCCL.cu13`` is ``nvidia-nccl-cu13``)."""
    # imported here: packaging.utils brings packaging.tags (platform, sysconfig, subprocess,
    # logging), 15 ms of every start of journal, --help's included, that compares no name
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))
