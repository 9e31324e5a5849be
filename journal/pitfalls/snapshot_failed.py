"""A package snapshot or a probe could not be read, so what it would have shown is not known.

journal judges a step by what its target python reports before and after it: the package
snapshots (every distribution and its version) and the probes (`torch-env`: torch, its CUDA,
NCCL, the driver). When one of them cannot be read — the python path gone or replaced, a
`sitecustomize.py` or a `.pth` hook that breaks `importlib.metadata` or prints after the
probe's JSON, a probe that timed out — the step still ran, but the verdicts that needed the
reading cannot be made: without both snapshots there is no package diff, so
`downgrade-cascade`, `torch-replaced` and `unverified-change` stay silent and `noop-install`
reads only the output, and `journal rollback` has no package set of that run to go back to;
without the `torch-env` reading, `cpu-torch`, `variant-not-switched`, `arch-unsupported`,
`driver-too-old`, `toolkit-mismatch` and the NCCL checks have nothing to read, and its
expectations fail with nothing read. A run like that must not pass for one that changed
nothing: in one real upgrade every snapshot failed, and an install that took numpy 2.5.2 to
2.3.5 showed as a plain success with no package change. The finding names the reading (before
or after which step, or on its own), the host and the error recorded, and what was not judged.

A warning: what is missing is a reading, not a host known to be broken, but until the env
reads again nothing says the step did no harm. A later snapshot (and, for a probe, the same
probe) that reads on the same host shows its env can be read again and resolves the finding;
the run it was about stays unjudged, since what the env held then was never recorded (run
the step again to judge it). A reading that journal itself stopped (a Ctrl-C or SIGTERM while
it ran) says nothing about the env and is no finding, nor is a run stopped before its command
was launched (`not started`: nothing of it ran).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from journal.pitfalls.base import Finding, finding
from journal.projections.unread import short
from journal.reading.subject import Evidence, Run, Subject

ID = "snapshot-failed"
ORDER = 89
#: Resolved by a later reading of the same kind on the host (this module's ``resolves``).
RESOLVED_BY = ()

#: What the verdicts of a torch-env reading need it for.
TORCH_ENV = (
    "the stack it left (torch, its CUDA, NCCL, the driver), and cpu-torch, "
    "variant-not-switched, arch-unsupported, driver-too-old, toolkit-mismatch, nccl-changed "
    "and nccl-skew from it"
)


def _named(misses: list[dict[str, Any]], run: Run, alone: bool) -> str:
    """What could not be read, in one phrase: ``the packages snapshots before and after
    install-numpy and the torch-env probe after it``."""
    if alone:
        return " and ".join(dict.fromkeys(_what(m, run, alone) for m in misses))
    phases = [m.get("phase") for m in misses if m["probe"] == "packages"]
    parts = []
    if set(phases) == {"before", "after"}:
        parts.append(f"the packages snapshots before and after {run.step}")
    elif phases:
        parts += [_what(m, run, alone) for m in misses if m["probe"] == "packages"]
    parts += [_what(m, run, alone) for m in misses if m["probe"] != "packages"]
    return " and ".join(dict.fromkeys(parts))


def _what(miss: dict[str, Any], run: Run, alone: bool) -> str:
    """``the packages snapshot after install-numpy``, ``the torch-env probe run on its own``."""
    name = "packages snapshot" if miss["probe"] == "packages" else f"{miss['probe']} probe"
    phase = miss.get("phase")
    if alone:
        return f"the {name} {'taken' if miss['probe'] == 'packages' else 'run'} on its own"
    if phase in ("before", "after"):
        return f"the {name} {phase} {run.step}"
    return f"a {name} of {run.step}"


def _not_judged(run: Run, misses: list[dict[str, Any]], alone: bool) -> list[str]:
    """The verdicts the missing readings were needed for, in words."""
    out: list[str] = []
    phases = {m.get("phase") for m in misses if m["probe"] == "packages"}
    if phases and alone:
        out.append("the host's package set now (the story's key packages, `journal drift`)")
    elif phases:
        out.append(
            f"what {run.step} changed (its package diff), and downgrade-cascade, "
            "torch-replaced, unverified-change and noop-install's snapshot check from it"
        )
        if run.rollback and phases & {"after", None}:
            out.append("whether the rollback reached its target (rollback-incomplete)")
        if phases & {"before", None}:
            out.append(f"`journal rollback --to before:{run.step}` to this run")
        if phases & {"after", None}:
            out.append(f"`journal rollback --to {run.key}` (the packages after it)")
    for miss in misses:
        name = miss["probe"]
        if name == "packages":
            continue
        if name == "torch-env":
            out.append(TORCH_ENV + ("" if alone else f", and {run.step}'s torch-env expectations"))
        else:
            out.append(f"what {name} reads, and the expectations on it")
    return list(dict.fromkeys(out))


def _one_line(error: str) -> str:
    """The whole error on one evidence line (a traceback's lines joined by `` / ``)."""
    return " / ".join(" ".join(line.split()) for line in error.splitlines() if line.strip())


def _stopped_by_journal(miss: dict[str, Any]) -> bool:
    """Whether a reading failed because journal was interrupted while it ran (the probe
    runner's `the probe interrupted …`: Ctrl-C, SIGTERM or SIGHUP stopped it)."""
    return str(miss.get("error") or "").startswith("the probe interrupted")


def detect(subject: Subject) -> Iterator[Finding]:
    if not subject.journal:
        return
    for run in subject.runs:
        # a reading journal itself stopped (Ctrl-C, SIGTERM) says nothing of the env, and a
        # run stopped before its command launched changed nothing to judge
        misses = [m for m in run.unread if not _stopped_by_journal(m)]
        if not misses or run.status == "not started":
            continue
        alone = run.key.startswith("probe-")
        named = [_what(m, run, alone) for m in misses]
        what = _named(misses, run, alone)
        reason = short(str(misses[0]["error"]))
        judged = _not_judged(run, misses, alone)
        so = "" if alone else f", so what {run.step} did is not judged"
        title = f"{what} on {run.host} could not be read{so}: {reason}"
        evidence = [] if alone else [run.command_evidence()]
        key = None if alone else run.key  # a probe on its own has no run page to link to
        evidence += [
            Evidence(f"{n} failed: {_one_line(str(m['error']))}", None, m.get("event"), key)
            for n, m in zip(named, misses, strict=True)
        ]
        evidence.append(Evidence("not judged: " + "; ".join(judged), None, run.event, key))
        probe = next((m["probe"] for m in misses if m["probe"] != "packages"), "packages")
        advice = (
            f"find out why the target python of {run.host} cannot be read: `journal run probe "
            f"{probe} --host {run.host}` runs it again and records what it says; on the host, "
            "run that python by hand (a snapshot needs `<python> -c 'import importlib.metadata'` "
            "to work) and look for a path that no longer exists, a `sitecustomize.py` or `.pth` "
            "hook that fails or prints, or a probe that needs more `timeout`. Once it reads "
            "again this finding is resolved, but "
            + (
                "what the host held then stays unknown"
                if alone
                else f"{run.step} (run {run.key}) stays unjudged: run it again (`journal run "
                f"step {run.step} --host {run.host}`) to have its changes recorded and judged"
            )
        )
        yield finding(
            ID,
            "warning",
            title,
            advice,
            evidence,
            run,
            reads=sorted({m["probe"] for m in misses}),
        )


def resolves(found: Finding, later: Run, ids: frozenset[str]) -> str | None:
    """A later run (or a reading on its own) on the host read every kind that had failed:
    a package snapshot for a snapshot, the same probe for a probe."""
    reads: list[str] = found.facts.get("reads") or []
    if not reads or set(reads) & {m["probe"] for m in later.unread}:
        return None  # it could not read them either
    for name in reads:
        if name == "packages" and not later.snapshotted:
            return None
        if name != "packages" and name not in later.probes:
            return None
    what = " and ".join(
        "a packages snapshot" if name == "packages" else f"the {name} probe" for name in reads
    )
    where = "on its own" if later.key.startswith("probe-") else f"in {later.step} ({later.key})"
    if str(found.run or "").startswith("probe-"):
        stays = "; what the host held at the failed reading stays unknown"
    else:
        stays = (
            f"; {found.step} (run {found.run}) itself stays unjudged: what it changed was "
            "never recorded"
        )
    return f"{what} read the env of {later.host} again {where}{stays}"


resolves.needs = lambda later: bool(later.snapshotted or later.probes)  # type: ignore[attr-defined]
