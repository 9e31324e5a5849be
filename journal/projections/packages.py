"""Package diffs: what a step run did to the distributions of a host's target python.

The `packages` probe snapshots the env before and after every step run (``PackagesSnapshotted``,
``phase`` ``before`` / ``after``); :func:`diff_packages` compares two snapshots and
:func:`diffs_by_run` pairs them up per step run. A snapshot maps the normalised (PEP 503) name
to ``{"name", "version", "installer", "installed"}``, ``installed`` being the dist-info folder's
mtime in nanoseconds: a reinstall at the same version changes only that.

The answer is what the seed upgrade needed after every step: did torch really move from
``2.10.0+cu128`` to ``2.12.0.dev20260226+cu130`` (an upgrade *and* a variant switch), what was
downgraded without being asked (numpy 2.4.2 → 2.4.1), what appeared (``nvidia-nccl-cu13``), and
did an install that said ``Checked 3 packages`` change anything at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from journal.events import PackagesSnapshotted
from journal.mapper import Recorded
from journal.versions import canonical_name, local_variant, parse_version

ChangeKind = Literal[
    "added", "removed", "upgraded", "downgraded", "reinstalled", "variant-switched"
]

#: Every kind of change, in the order views list them.
KINDS: tuple[ChangeKind, ...] = (
    "added",
    "removed",
    "upgraded",
    "downgraded",
    "reinstalled",
    "variant-switched",
)


#: A distribution name as PEP 503 compares it (``Nvidia_NCCL.cu13`` is ``nvidia-nccl-cu13``).
normalize = canonical_name


def _local_key(version: str) -> str | None:
    """The local part of ``version`` (``cu130``) as PEP 440 compares it, or None."""
    parsed = parse_version(version).parsed
    if parsed is not None:
        return parsed.local
    variant = local_variant(version)
    return variant.lower() if variant else None


@dataclass(frozen=True)
class PackageChange:
    """One distribution that a step run added, removed, moved or reinstalled.

    ``name`` is the display name from the snapshot (the later one when both have it);
    ``before`` / ``after`` are the versions, None where the package was absent. ``kind`` is one
    of :data:`KINDS`: ``variant-switched`` means the same public version with another local
    part (``2.10.0+cu128`` → ``2.10.0+cu130``); a change of both is ``upgraded`` or
    ``downgraded`` with :attr:`variant_switched` also true.
    """

    name: str
    before: str | None
    after: str | None
    kind: ChangeKind

    @property
    def key(self) -> str:
        """The normalised name, for matching against what a command asked for."""
        return normalize(self.name)

    @property
    def variant_switched(self) -> bool:
        """Whether the local part (``cu128`` → ``cu130``, ``cpu`` → none) changed."""
        if self.before is None or self.after is None:
            return False
        return _local_key(self.before) != _local_key(self.after)

    @property
    def before_variant(self) -> str | None:
        """The local part of the version before (``cu128``), if any."""
        return local_variant(self.before)

    @property
    def after_variant(self) -> str | None:
        """The local part of the version after (``cu130``), if any."""
        return local_variant(self.after)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form, for exports and templates."""
        return {
            "name": self.name,
            "key": self.key,
            "before": self.before,
            "after": self.after,
            "kind": self.kind,
            "variant_switched": self.variant_switched,
            "before_variant": self.before_variant,
            "after_variant": self.after_variant,
        }


@dataclass(frozen=True)
class PackageDiff:
    """Everything that changed between two package snapshots, one change per package.

    ``changes`` is sorted by (normalised) name; packages that did not change are not in it.
    ``host`` and ``run`` say which step run it belongs to when :func:`diffs_by_run` made it.
    """

    changes: list[PackageChange] = field(default_factory=list)
    host: str | None = None
    run: str | None = None

    def _of(self, kind: ChangeKind) -> list[PackageChange]:
        return [change for change in self.changes if change.kind == kind]

    @property
    def added(self) -> list[PackageChange]:
        """Packages that were not there before."""
        return self._of("added")

    @property
    def removed(self) -> list[PackageChange]:
        """Packages that are gone."""
        return self._of("removed")

    @property
    def upgraded(self) -> list[PackageChange]:
        """Packages now at a newer version (PEP 440 order), whatever their variant."""
        return self._of("upgraded")

    @property
    def downgraded(self) -> list[PackageChange]:
        """Packages now at an older version (PEP 440 order), whatever their variant."""
        return self._of("downgraded")

    @property
    def reinstalled(self) -> list[PackageChange]:
        """Packages installed again at the very same version."""
        return self._of("reinstalled")

    @property
    def variant_switched(self) -> list[PackageChange]:
        """Packages whose local part changed, at the same public version or not."""
        return [change for change in self.changes if change.variant_switched]

    @property
    def empty(self) -> bool:
        """True when nothing changed at all (not even a reinstall)."""
        return not self.changes

    def names(self) -> list[str]:
        """Display names of the changed packages, in order."""
        return [change.name for change in self.changes]

    def get(self, name: str) -> PackageChange | None:
        """The change of package ``name`` (any spelling), or None if it did not change."""
        key = normalize(name)
        return next((change for change in self.changes if change.key == key), None)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready form: the changes, a count per kind, and the run it belongs to."""
        counts = {kind: 0 for kind in KINDS}
        for change in self.changes:
            counts[change.kind] += 1
        return {
            "host": self.host,
            "run": self.run,
            "empty": self.empty,
            "counts": {**counts, "variant_switched": len(self.variant_switched)},
            "changes": [change.to_dict() for change in self.changes],
        }


def _entries(snapshot: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The snapshot's entries keyed by normalised name; the first of two spellings wins.

    Keys are normalised again so that a snapshot keyed by display names compares too; the
    first entry of a name is kept, as the probe keeps the copy that imports first on sys.path
    (the others are listed under its ``shadowed`` and do not count).
    """
    entries: dict[str, Mapping[str, Any]] = {}
    for key, entry in snapshot.items():
        entries.setdefault(normalize(key), entry)
    return entries


def _version(entry: Mapping[str, Any]) -> str:
    version = entry.get("version")
    return "" if version is None else str(version).strip()


def _reinstalled(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether the same version was installed again: its install time or installer differ.

    Where a snapshot lacks ``installed`` (an older probe, an unreadable folder), or
    ``installer``, that reading says nothing; no reading at all means no change.
    """
    for field_name in ("installed", "installer"):
        old, new = before.get(field_name), after.get(field_name)
        if old is not None and new is not None and old != new:
            return True
    return False


def _kind(
    before: Mapping[str, Any], after: Mapping[str, Any], old: str, new: str
) -> ChangeKind | None:
    """How a package present in both snapshots changed, or None if it did not."""
    if old == new:  # the common case, decided without parsing
        return "reinstalled" if _reinstalled(before, after) else None
    old_version, new_version = parse_version(old), parse_version(new)
    if old_version == new_version:
        # Equal as PEP 440 sees them (1.0 and 1.0.0 are one version): a different text can
        # only come from installing it again.
        return "reinstalled" if old != new or _reinstalled(before, after) else None
    if parse_version(old_version.public) == parse_version(new_version.public):
        return "variant-switched"
    return "upgraded" if new_version > old_version else "downgraded"


def diff_packages(before: Mapping[str, Any], after: Mapping[str, Any]) -> PackageDiff:
    """Compare two ``packages`` snapshots (normalised name → entry) and say what changed.

    Packages are matched on their normalised name (``Pillow`` is ``pillow``); versions are
    ordered as PEP 440 orders them. A package at the same version whose ``installed`` time
    (or installer) changed was ``reinstalled``; a package whose public version stayed and whose
    local part changed was ``variant-switched``.
    """
    if before == after:  # most steps change nothing: decided at C speed
        return PackageDiff([])
    old_entries, new_entries = _entries(before), _entries(after)
    changes: list[PackageChange] = []
    for key in sorted(old_entries.keys() | new_entries.keys()):
        old, new = old_entries.get(key), new_entries.get(key)
        if old is None and new is not None:
            changes.append(PackageChange(new.get("name") or key, None, _version(new), "added"))
        elif new is None and old is not None:
            changes.append(PackageChange(old.get("name") or key, _version(old), None, "removed"))
        elif old is not None and new is not None:
            old_version, new_version = _version(old), _version(new)
            kind = _kind(old, new, old_version, new_version)
            if kind is not None:
                name = new.get("name") or old.get("name") or key
                changes.append(PackageChange(name, old_version, new_version, kind))
    return PackageDiff(changes)


def diffs_by_run(records: Iterable[Recorded]) -> dict[str, PackageDiff]:
    """The package diff of every step run that has both its ``before`` and ``after`` snapshot.

    A fold over recorded events in journal order: other events, and snapshots taken by
    `journal run probe packages` (no run), are ignored. A run whose ``after`` snapshot never
    came (interrupted, connection lost) has no diff. Snapshots are paired on the run and its
    host; should one be recorded twice, the later one counts.
    """
    before: dict[tuple[str, str], PackagesSnapshotted] = {}
    after: dict[tuple[str, str], PackagesSnapshotted] = {}
    for record in records:
        event = record.event
        if not isinstance(event, PackagesSnapshotted) or event.run is None:
            continue
        side = {"before": before, "after": after}.get(event.phase)
        if side is not None:
            side[(event.run, event.host_name)] = event
    diffs: dict[str, PackageDiff] = {}
    for (run, host), first in before.items():
        last = after.get((run, host))
        if last is None:
            continue
        diff = diff_packages(first.packages, last.packages)
        diffs[run] = PackageDiff(diff.changes, host=host, run=run)
    return diffs


def change_text(change: PackageChange) -> str:
    """``torch 2.10.0+cu128 -> 2.12.0.dev20260226+cu130 (upgraded, variant switched)``."""
    kind = change.kind
    if change.variant_switched and kind != "variant-switched":
        kind += ", variant switched"
    if change.before is None:
        return f"+ {change.name} {change.after} ({kind})"
    if change.after is None:
        return f"- {change.name} {change.before} ({kind})"
    return f"{change.name} {change.before} -> {change.after} ({kind})"
