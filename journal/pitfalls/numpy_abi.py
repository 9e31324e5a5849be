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
warning; the messages above, printed, are an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls import _runtime as rt
from journal.pitfalls.base import Evidence, Finding, Run, Subject, finding
from journal.versions import parse_version

ID = "numpy-abi"
ORDER = 36

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
            )
            continue
        flip = _flip(run)
        if flip:
            before, after, evidence = flip
            yield finding(
                ID,
                "warning",
                f"numpy went from {before} to {after}: a new major version, under modules "
                f"compiled for NumPy {_major(before)}.x",
                f"if anything compiled (torch, torchvision, opencv, the serving stack) was built "
                f"for NumPy {_major(before)}.x, pin numpy back (`numpy=={before}`, or "
                f"`'numpy<{(_major(before) or 0) + 1}'` in the same install) or upgrade those "
                "modules; check with `python -c 'import torch, numpy; "
                "torch.from_numpy(numpy.zeros(1))'`",
                [run.command_evidence(), *evidence],
                run,
            )
