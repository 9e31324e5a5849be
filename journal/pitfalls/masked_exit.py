"""A failure hidden by a pipe: the command printed an error, but its status is the last stage's.

A shell pipeline exits with the status of its last command. `pip install … 2>&1 | tail -5`,
`make 2>&1 | tee build.log` or `python build.py | grep -v warning` therefore exit 0 when the
install, the build or the script failed, as long as `tail`, `tee` or `grep` did not: the step
is recorded as succeeded, `journal run plan` goes on to the next step, and the only trace of
the failure is an `ERROR:`, `error:`, `Traceback (most recent call last)` or `FAILED` line in
the output. `set -o pipefail` (or `bash -o pipefail -c '…'`) makes the pipeline fail when any
stage fails.

Where the exit status 0 was recorded (a step run by the journal) the masking is certain: an
error. A transcript, pasted or imported, has no exit status, so the error line under a pipe
without pipefail is the whole evidence: a warning. Pipelines that only read
(`cat log | grep ERROR`), or that search for the error words themselves, are not judged.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

from journal.pitfalls.base import Finding, finding
from journal.reading.subject import Evidence, Run, Subject

ID = "masked-exit"
ORDER = 20

#: Error lines of installers, compilers, Python and build tools.
ERROR_LINE = re.compile(
    r"^(?:"
    r"[ \t]*ERROR(?::|[ \t])(?![ \t]*pip's dependency resolver)"  # pip, loggers (not the
    # resolver warning pip prints with exit 0: that is dependency-conflict)
    r"|[ \t]*(?:Error|error|fatal error)(?:\[[\w-]+\])?:[ \t]"  # uv, cargo, `Error: …`
    r"|[^\n]*?:\d+(?::\d+)?:[ \t](?:fatal[ \t])?error:[ \t]"  # gcc/clang file:line:col: error:
    r"|[^\n]*?\(\d+\):[ \t](?:catastrophic[ \t])?error:[ \t]"  # nvcc file.cu(12): error:
    r"|Traceback \(most recent call last\):"
    r"|[^\n]*?\bFAILED\b"  # pytest, CMake, `BUILD FAILED`
    r"|make(?:\[\d+\])?:[ \t]\*\*\*[^\n]*?Error[ \t]\d+"
    r"|ninja: build stopped: subcommand failed"
    r")[^\n]*",
    re.M,
)
ERROR_NEEDLES = ("ERROR", "rror:", "Traceback", "FAILED", "*** ", "subcommand failed")

#: `set -o pipefail`, `set -euo pipefail`, `bash -o pipefail -c …`, or a script that reads
#: ${PIPESTATUS[…]} itself.
PIPEFAIL = re.compile(r"-[A-Za-z]*o\s+pipefail\b|\bPIPESTATUS\b")

#: Programs whose status means nothing in a pipeline's first stages: they only read.
READERS = frozenset(
    "cat zcat bzcat xzcat less more echo printf journalctl dmesg ls find ps env history "
    "head tail".split()
)
#: Programs that search; when they search for error words, error lines are the point.
SEARCHERS = frozenset("grep egrep fgrep rg ag ack awk gawk sed jq".split())
ERROR_WORDS = ("error", "fail", "traceback", "exception")
#: Words before the program that do not change what runs.
PREFIXES = frozenset("sudo time nohup env exec command builtin nice ionice stdbuf".split())


@dataclass(frozen=True)
class Pipeline:
    """A pipeline of a shell command: where it starts, and its stages' text."""

    start: int
    stages: tuple[str, ...]


def pipelines(command: str) -> list[Pipeline]:
    """The pipelines of two or more stages in ``command``: split at ``;``, ``&&``, ``||``,
    ``&`` and newlines outside quotes, ``$( )``, ``( )`` and ``{ }``; ``|&`` is a pipe too,
    while ``2>&1``, ``&>`` and ``>|`` are redirections."""
    found: list[Pipeline] = []
    stages: list[str] = []
    start = stage_start = 0
    quote: str | None = None
    depth = 0
    i, n = 0, len(command)

    def close_stage(end: int) -> None:
        text = command[stage_start:end].strip()
        if text:
            stages.append(text)

    def close_pipeline(end: int) -> None:
        close_stage(end)
        if len(stages) > 1:
            found.append(Pipeline(start, tuple(stages)))
        stages.clear()

    while i < n:
        c = command[i]
        nxt = command[i + 1] if i + 1 < n else ""
        prev = command[i - 1] if i else ""
        if quote:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = None
            i += 1
            continue
        if c == "\\":
            i += 2
            continue
        if c in "'\"`":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        elif c == "{" and (not nxt or nxt.isspace()) and (not prev or prev in " \t\n;&|("):
            depth += 1
        elif c == "}" and depth and (prev.isspace() or prev == ";"):
            depth -= 1
        elif depth == 0:
            if c == "#" and (not prev or prev.isspace()):
                end = command.find("\n", i)
                i = n if end == -1 else end
                continue
            if c == "|" and nxt == "|" or c == "&" and nxt == "&":
                close_pipeline(i)
                start = stage_start = i + 2
                i += 2
                continue
            if c == "|" and prev != ">":
                close_stage(i)
                stage_start = i + 2 if nxt == "&" else i + 1
                i = stage_start
                continue
            if c == "&" and prev not in ("<", ">") and nxt != ">" or c in ";\n":
                close_pipeline(i)
                start = stage_start = i + 1
        i += 1
    close_pipeline(n)
    return found


def program(stage: str) -> str:
    """The program a stage runs: `python` of `CUDA_HOME=/x sudo python -c …`."""
    try:
        words = shlex.split(stage)
    except ValueError:
        words = stage.split()
    skip_value = False
    for word in words:
        if skip_value:
            skip_value = False
            continue
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word) or word.startswith("-"):
            continue
        base = word.rsplit("/", 1)[-1]
        if base in PREFIXES:
            continue
        if base == "timeout":
            skip_value = True
            continue
        return base
    return stage.split(maxsplit=1)[0] if stage.split() else stage


def _masking(command: str) -> Pipeline | None:
    """The first pipeline whose status can hide a failure of its earlier stages."""
    for pipe in pipelines(command):
        if PIPEFAIL.search(command[: pipe.start + len(pipe.stages[0])]):
            continue
        programs = [program(s) for s in pipe.stages]
        if all(p in READERS for p in programs[:-1]):
            continue
        if any(
            p in SEARCHERS and any(w in s.lower() for w in ERROR_WORDS)
            for p, s in zip(programs, pipe.stages, strict=True)
        ):
            continue
        return pipe
    return None


def detect(subject: Subject) -> Iterator[Finding]:
    for run in subject.runs:
        if run.exit_code not in (None, 0):
            continue  # failed visibly
        if run.exit_code is None and subject.journal and not run.imported:
            continue  # never finished
        if "|" not in run.command:
            continue
        pipe = _masking(run.command)
        if pipe is None:
            continue
        errors = run.grep(ERROR_LINE, *ERROR_NEEDLES, limit=3)
        if not errors:
            continue
        yield _finding(run, pipe, [line for _, line in errors])


def _finding(run: Run, pipe: Pipeline, errors: list[Evidence]) -> Finding:
    producer = next((s for s in pipe.stages[:-1] if program(s) not in READERS), pipe.stages[0])
    last = pipe.stages[-1]
    first_error = errors[0].text.strip()
    if len(first_error) > 120:
        first_error = first_error[:117] + "..."
    status = (
        "exit 0: the step was recorded as succeeded"
        if run.exit_code == 0
        else "a transcript has no exit status, but the pipe's would be its last stage's"
    )
    at = f" (line {errors[0].line})" if errors[0].line is not None else ""
    return finding(
        ID,
        "error" if run.exit_code == 0 else "warning",
        f"`{program(producer)}` printed `{first_error}`, but the status of the pipeline is "
        f"that of its last stage `{last}` ({status})",
        f"run it as `set -o pipefail; {run.command}` (or `bash -o pipefail -c '…'`), so that a "
        f"failure of `{program(producer)}` fails the step; deal with the error{at} first, then "
        "run the step again",
        [run.command_evidence(), *errors],
        run,
    )
