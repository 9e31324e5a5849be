"""A package refuses to run with the version of a partner package.

The serving stack pins its kernels tightly and checks at start-up:
- flashinfer compares its optional wheels with itself: `RuntimeError: flashinfer-cubin version
  (0.6.13) does not match flashinfer version (0.6.14). Please install the same version of both
  packages.` (also `flashinfer-jit-cache`), raised at `import flashinfer`;
- SGLang checks its kernel package and flashinfer: `Exception: sgl-kernel is installed with
  version 0.0.9.post2, which is less than the minimum required version 0.1.1.`
  (`sglang-kernel`, `flashinfer_python` likewise), or `… with minimum required version X is not
  installed.`

Upgrading one package of such a pair (the server, or flashinfer-python pulled by it) leaves
the other behind, and the server does not start. `FLASHINFER_DISABLE_VERSION_CHECK=1` and
`SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK=1` only move the failure to the first kernel call.

In a journal, a step whose snapshot after shows flashinfer-cubin or flashinfer-jit-cache at
another version than flashinfer-python is a warning before anything refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls.base import Finding, finding
from journal.reading.subject import Evidence, Run, Subject
from journal.versions import canonical_name, public_version

ID = "version-guard"
ORDER = 72
#: Only its own ``resolves`` (below): a rerun that changed nothing leaves the skew in place.
RESOLVED_BY = ()
#: Environment variables that silence a check without mending what it checks.
SKIPS = ("FLASHINFER_DISABLE_VERSION_CHECK", "SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK")

FLASHINFER = re.compile(
    r"(?P<part>(?:amd-)?flashinfer-(?:cubin|jit-cache)) version \((?P<have>[^)\s]+)\) does not "
    r"match flashinfer version \((?P<want>[^)\s]+)\)"
)
MINIMUM = re.compile(
    r"(?<![\w.-])(?P<pkg>[A-Za-z0-9][\w.-]*) is installed with version (?P<have>[^\s,]+),? "
    r"which is less than the minimum required version (?P<want>\d[^\s]*?)\.?(?=\s|$)",
    re.M,
)
MISSING = re.compile(
    r"(?<![\w.-])(?P<pkg>[A-Za-z0-9][\w.-]*) with minimum required version "
    r"(?P<want>\d[^\s]*?)\.? is not installed"
)
#: flashinfer's optional wheels, which must be at flashinfer-python's version.
PARTS = ("flashinfer-cubin", "flashinfer-jit-cache")


#: The distribution to install for a name as messages spell it (`flashinfer_python`).
_dist = canonical_name


def _snapshot_skew(run: Run) -> tuple[str, str, str, Evidence] | None:
    """(part, its version, flashinfer-python's version, evidence) when a step left
    flashinfer's optional wheels at another version than flashinfer-python."""
    if run.after is None or run.diff is None or run.diff.empty:
        return None
    if not any(run.diff.get(n) for n in ("flashinfer-python", *PARTS)):
        return None
    return _skew_in(run)


def _skew_in(run: Run) -> tuple[str, str, str, Evidence] | None:
    """The skew of flashinfer's wheels in ``run``'s snapshot after, whatever the run did."""
    if run.after is None:
        return None
    main = (run.after.get("flashinfer-python") or {}).get("version")
    if not main:
        return None
    for part in PARTS:
        have = (run.after.get(part) or {}).get("version")
        if have and public_version(have) != public_version(main):
            text = f"after the step: {part} {have}, flashinfer-python {main}"
            return part, have, main, Evidence(text, None, run.event, run.key)
    return None


def detect(subject: Subject) -> Iterator[Finding]:
    for run in subject.runs:
        refused = run.grep(FLASHINFER, "does not match flashinfer version", limit=2)
        if refused:
            match, line = refused[0]
            part, have, want = match.group("part"), match.group("have"), match.group("want")
            yield finding(
                ID,
                "error",
                f"flashinfer refused to load: {part} {have} does not match flashinfer {want}",
                f"install {part} at flashinfer's version: `pip install {part}=={want} "
                f"--index-url https://flashinfer.ai/whl` (jit-cache: the index of torch's CUDA, "
                f"e.g. …/whl/cu130), or `flashinfer install-{part.split('-', 1)[1]}-wheel`; "
                "or uninstall it to JIT-compile instead; setting "
                "FLASHINFER_DISABLE_VERSION_CHECK=1 only moves the crash to the first kernel",
                [e for _, e in refused],
                run,
            )
            continue
        low = run.grep(MINIMUM, "less than the minimum required version", limit=2)
        missing = run.grep(MISSING, "is not installed", limit=2)
        if low or missing:
            match, line = (low or missing)[0]
            pkg, want = match.group("pkg"), match.group("want")
            have = match.group("have") if low else None
            title = (
                f"{pkg} {have} is older than the {want} the server requires"
                if have
                else f"{pkg} (at least {want}) is required but not installed"
            )
            yield finding(
                ID,
                "error",
                title,
                f"install the version the server pins: `pip install '{_dist(pkg)}>={want}'` (the "
                f"exact pin is in the server's requirements, e.g. `{_dist(pkg)}=={want}`), from "
                "the index of torch's CUDA variant; skipping the check "
                "(SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK=1) only defers the failure",
                [e for _, e in (low + missing)[:3]],
                run,
            )
            continue
        skew = _snapshot_skew(run)
        if skew:
            part, have, main, evidence = skew
            yield finding(
                ID,
                "warning",
                f"{part} {have} is left beside flashinfer-python {main}: `import flashinfer` "
                "will refuse to load",
                f"install {part}=={public_version(main)} in the same step (`--index-url "
                "https://flashinfer.ai/whl`), or uninstall it",
                [run.command_evidence(), evidence],
                run,
                kind="snapshot",
            )


def resolves(found: Finding, later: Run, ids: frozenset[str]) -> str | None:
    """The same step (for an imported or interactive command, the same command) went through
    again on the host without the finding, with no version check turned off
    (`FLASHINFER_DISABLE_VERSION_CHECK`, `SGLANG_SKIP_SGL_KERNEL_VERSION_CHECK`) and, where it
    has a package snapshot, flashinfer's wheels at one version in it; or any later snapshot on
    the host with them at one version, for a skew the snapshots showed."""
    from journal.pitfalls.resolution import rerun

    if ID in ids or any(skip in later.command for skip in SKIPS) or _skew_in(later):
        return None
    if later.after is not None and found.facts.get("kind") == "snapshot":
        main = (later.after.get("flashinfer-python") or {}).get("version")
        if main:
            return f"after {later.step} on {later.host}: flashinfer's wheels at {main}"
    return rerun(found, later, ids)


resolves.refused_by = frozenset({"version-guard"})  # type: ignore[attr-defined]
