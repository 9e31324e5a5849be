"""NumPy's major version changed under compiled modules built for the other one.

A module compiled against NumPy 1.x (an older torch or torchvision, opencv, numexpr, pandas of
its time) cannot run on NumPy 2: numpy says `A module that was compiled using NumPy 1.x cannot be
run in NumPy 2.0.0 as it may crash.`, the import fails with `AttributeError: _ARRAY_API not
found` / `ImportError: numpy.core.multiarray failed to import`, or torch imports but warns
`Failed to initialize NumPy: _ARRAY_API not found` and every `torch.from_numpy` fails. Going
back from 2 to 1 breaks modules built for 2 (`module compiled against ABI version 0x2000000 but
this version of numpy is 0x1000009`). An install that resolves a new torch often moves numpy
across the major version without being asked.

A step whose package diff (or whose uv / pip output) shows numpy changing major version is a
warning; the messages above, printed, are an error. A flip that puts numpy back at the major
version it had before the host's previous flip, with nothing else installed in between, is no
new finding (the modules there were built for it), and neither is a `journal rollback` that
reached its target set (a set recorded before).

The flip is resolved by numpy back at the major version it had before it (a rollback, or a
pin), by a rollback to a set recorded before its run, or by a passing import check of the stack
after it: a command that imports numpy and torch (and the module an error named) and went
through without any of the messages above or torch's `Failed to initialize NumPy`, such as the
advice's `python -c 'import torch, numpy; torch.from_numpy(numpy.zeros(1))'`. The printed
messages are resolved by the same import check, or by the step run again without them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls import runtime as rt
from journal.pitfalls.base import Finding, finding
from journal.pitfalls.rollback_incomplete import reached
from journal.reading.subject import Evidence, Run, Subject
from journal.runs import IMPORTED, SUCCEEDED
from journal.versions import parse_version

ID = "numpy-abi"
ORDER = 36
#: Also resolved by a rollback to a set recorded before the finding's run (see ``resolves``).
RESOLVED_BY = ("rolled-back",)

MESSAGES = re.compile(
    r"A module that was compiled using NumPy (?P<built>\d+)\.x cannot be run in\s+"
    r"NumPy (?P<running>\d+\.\d+\.\d+\S*)"
    r"|_ARRAY_API not found"
    r"|numpy\.?_?core\.multiarray failed to import"
    r"|module compiled against (?:API|ABI) version 0x[0-9a-fA-F]+ but this version of numpy "
    r"is 0x[0-9a-fA-F]+"
)
NEEDLES = ("compiled using NumPy", "_ARRAY_API", "multiarray failed", "module compiled against")
#: uv's ` - numpy==1.26.4` / ` + numpy==2.1.0`, pip's `Found existing installation: numpy 1.26.4`
#: and `Successfully installed … numpy-2.1.0 …`.
UV_LINE = re.compile(r"^ (?P<sign>[-+]) numpy==(?P<version>\S+)\s*$", re.M)
PIP_OLD = re.compile(r"Found existing installation: numpy (?P<version>\S+)")
PIP_NEW = re.compile(r"^Successfully installed .*?\bnumpy-(?P<version>\d\S*)", re.M)
FRAME = re.compile(r'File "(?P<path>[^"]+)", line \d+')
#: torch's warning when its numpy bridge fails to load (torch imports, from_numpy does not)
TORCH_WARNS = "Failed to initialize NumPy"
#: The modules a command imports: `import torch, numpy`, `from numpy import zeros`.
IMPORTS = re.compile(r"\bimport[ \t]+([\w., \t]+)|\bfrom[ \t]+([\w.]+)[ \t]+import\b")


def _major(version: str | None) -> int | None:
    return parse_version(version).major if version else None


def _flip_in_output(run: Run) -> tuple[str, str, list[Evidence]] | None:
    uv = run.grep(UV_LINE, "numpy==", limit=4)
    old = [(m.group("version"), e) for m, e in uv if m.group("sign") == "-"]
    new = [(m.group("version"), e) for m, e in uv if m.group("sign") == "+"]
    if not (old and new):
        old = [(m.group("version"), e) for m, e in run.grep(PIP_OLD, "numpy ", limit=1)]
        new = [(m.group("version"), e) for m, e in run.grep(PIP_NEW, "numpy-", limit=1)]
    if old and new and _major(old[0][0]) != _major(new[0][0]):
        return old[0][0], new[0][0], [old[0][1], new[0][1]]
    return None


def _flip(run: Run) -> tuple[str, str, list[Evidence]] | None:
    if run.diff is not None:
        change = run.diff.get("numpy")
        if change and change.before and change.after:
            if _major(change.before) != _major(change.after):
                return (
                    change.before,
                    change.after,
                    [
                        Evidence(
                            f"package snapshots: numpy {change.before} -> {change.after}",
                            None,
                            run.event,
                            run.key,
                        )
                    ],
                )
        return None
    return _flip_in_output(run)


def _module(run: Run, start: int) -> str | None:
    """The package that was being imported when the message came (the traceback after it)."""
    found = None
    for match in FRAME.finditer(run.text, start, start + 20_000):
        package = rt.site_package(match.group("path"))
        if package and package.split("_")[0] != "numpy":
            found = package
        elif package:
            break
    return found


def detect(subject: Subject) -> Iterator[Finding]:
    history = _History()
    for run in subject.runs:
        messages = run.grep(MESSAGES, *NEEDLES, limit=3)
        if messages:
            match, line = messages[0]
            running = match.group("running")
            module = _module(run, match.start())
            if match.group("built"):
                title = (
                    f"a module compiled for NumPy {match.group('built')}.x was imported under "
                    f"NumPy {running}"
                )
            elif "_ARRAY_API" in match.group(0):
                title = f"a module compiled for NumPy 1.x was imported under NumPy 2: {line.text}"
            else:
                title = f"a compiled module does not match the installed NumPy: {line.text}"
            if module:
                title += f" (while importing `{module}`)"
            yield finding(
                ID,
                "error",
                title,
                "install the NumPy the compiled modules were built for (`pip install 'numpy<2'` "
                "for modules built for 1.x), or upgrade the module that was being imported "
                + (f"(`{module}`, or what it imports) " if module else "")
                + "to a build made for the installed NumPy; check with "
                "`python -c 'import torch, numpy; torch.from_numpy(numpy.zeros(1))'`",
                [e for _, e in messages],
                run,
                kind="error",
                module=module,
            )
            history.saw(run, _flip(run))
            continue
        flip = _flip(run)
        back = history.flipped_back(run, flip)
        history.saw(run, flip)
        if flip and not back:
            before, after, evidence = flip
            yield finding(
                ID,
                "warning",
                f"numpy went from {before} to {after}: a new major version, which modules "
                f"compiled for NumPy {_major(before)}.x cannot run under",
                f"if anything compiled (torch, torchvision, opencv, the serving stack) was built "
                f"for NumPy {_major(before)}.x, pin numpy back (`numpy=={before}`, or "
                f"`'numpy<{(_major(before) or 0) + 1}'` in the same install) or upgrade those "
                "modules; check with `python -c 'import torch, numpy; "
                "torch.from_numpy(numpy.zeros(1))'`",
                [run.command_evidence(), *evidence],
                run,
                kind="flip",
                major=_major(before),
            )


class _History:
    """Per host, the last numpy flip and whether anything else was installed since: a flip
    back to the major numpy had before it, with nothing installed in between, undoes it."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[str, str]] = {}  # host -> (before, after) of its last flip
        self.moved: dict[str, bool] = {}  # host -> something else changed since

    def flipped_back(self, run: Run, flip: tuple[str, str, list[Evidence]] | None) -> bool:
        if flip is None:
            return False
        if reached(run):
            return True  # a rollback put back a set recorded before: judged when it was
        last = self.last.get(run.host)
        return (
            last is not None
            and not self.moved.get(run.host)
            and _major(flip[1]) == _major(last[0])
            and _major(flip[0]) == _major(last[1])
        )

    def saw(self, run: Run, flip: tuple[str, str, list[Evidence]] | None) -> None:
        if flip is not None:
            self.last[run.host] = (flip[0], flip[1])
            self.moved[run.host] = _others_changed(run)
        elif run.host in self.last and _others_changed(run):
            self.moved[run.host] = True


def _others_changed(run: Run) -> bool:
    """Whether ``run`` changed a package other than numpy (an install without snapshots
    counts as one)."""
    if run.diff is not None:
        return any(c.key != "numpy" for c in run.diff.changes)
    return "install" in run.command and run.after is None


def _imports(command: str) -> set[str]:
    found: set[str] = set()
    for match in IMPORTS.finditer(command):
        names = match.group(1) or match.group(2) or ""
        for name in re.split(r"[,\s]+", names):
            if name and name != "as":
                found.add(name.split(".")[0])
    return found


def import_check(found: Finding, later: Run) -> str | None:
    """``later`` imported numpy and torch (and the module an error named) and went through
    without numpy's or torch's complaint: the stack runs on the numpy it has."""
    if later.exit_code not in (0, None) or later.status not in (SUCCEEDED, IMPORTED):
        return None
    names = _imports(later.command)
    module = found.facts.get("module")
    wanted = {"torch"} | ({module.split(".")[0]} if module else set())
    if not wanted <= names or ("numpy" not in names and "from_numpy" not in later.command):
        return None
    if later.has(TORCH_WARNS) or later.grep(MESSAGES, *NEEDLES, limit=1):
        return None
    wanted.add("numpy")
    return f"{later.step} on {later.host} imported {', '.join(sorted(wanted))} without complaint"


def resolves(found: Finding, later: Run, ids: frozenset[str]) -> str | None:
    """numpy back at the major version it had before the flip (a later snapshot), a passing
    import check of numpy with torch, or (for printed messages) the step run again without
    them."""
    from journal.pitfalls.resolution import rerun

    major = found.facts.get("major")
    if found.facts.get("kind") == "flip" and later.after is not None and major is not None:
        # even where that flip back is a finding of its own (modules installed with the first
        # flip, built for its major): this one's modules have their numpy again
        entry = later.after.get("numpy") or {}
        version = entry.get("version")
        if isinstance(version, str) and _major(version) == major:
            return f"after {later.step} on {later.host}: numpy {version}, the major it had before"
    if ID in ids:
        return None
    checked = import_check(found, later)
    if checked:
        return checked
    if found.facts.get("kind") != "flip":
        return rerun(found, later, ids)
    return None


resolves.needs = lambda later: bool(later.after is not None or later.command)  # type: ignore[attr-defined]
