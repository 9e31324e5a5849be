"""A step started and never finished: interrupted, killed, or cut off with its connection.

A step stopped half-way leaves the host in a state nobody chose: an install that removed the
old torch and had not yet put the new one in place, a build half-written, a command still
running on the host after the SSH connection dropped. In a journal the step run says how it
ended: `interrupted` (stopped by Ctrl-C, or by the SIGTERM or SIGHUP journal itself got: the
signal is named), `lost` (journal was killed or its machine went down while the command ran:
its heartbeat stopped, and the command's fate is unknown), `disk full` (journal stopped the
command itself because the disk under its database was full), `timed-out` (stopped after the
step's timeout), killed by a signal
(exit 137: SIGKILL, often the kernel's out-of-memory killer; 143: SIGTERM), or `failed` with
no exit status because the connection was lost. In a transcript: `^C` near the end of a
command's output, the shell's `Killed`, or ssh's `Connection to … closed by remote host.`,
`client_loop: send disconnect: Broken pipe`. A step that was run again on the same host and
finished afterwards resolves the finding.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from journal.pitfalls.base import Finding, finding
from journal.reading.bench import run_name
from journal.reading.subject import Evidence, Run, Subject

ID = "step-interrupted"
ORDER = 90
#: Resolved by the same step run again to the end.
RESOLVED_BY = ("rerun",)

#: How much of the end of an output is looked at for `^C`, `Killed` and a lost connection.
TAIL = 4096

CTRL_C = re.compile(r"^[ \t]*\^C")
INTERRUPT_LINES = re.compile(
    r"^(?:KeyboardInterrupt|ERROR: Operation cancelled by user|Aborted!?)[ \t]*$"
)
KILLED = re.compile(
    r"^(?:Killed|Terminated)[ \t]*$"
    r"|^\[\d+\][+-]?[ \t]+(?:Killed|Terminated)\b"
    r"|^(?:[\w./-]+: )?(?:line \d+: +)?\d+ (?:Killed|Terminated)\b"
)
CONNECTION = re.compile(
    r"^(?:Connection to \S+ closed by remote host\."
    r"|client_loop: send disconnect: .*"
    r"|packet_write_wait: Connection to .*"
    r"|Write failed: Broken pipe"
    r"|Timeout, server \S+ not responding\."
    r"|ssh: connect to host .* port \d+: Connection (?:timed out|reset).*"
    r"|Connection reset by \S+ port \d+)[ \t]*$"
)
#: Commands that run until they are stopped: their `^C` is how they end, not an interruption.
OPEN_ENDED = re.compile(
    r"(?:^|[\s;&|(/])(?:watch|top|htop|nvtop|less|more|ping|journalctl\s.*-f|tail\s.*-[fF]"
    r"|dmesg\s.*(?:-w|--follow)|nvidia-smi\s.*(?:\s-l|\s-lms|--loop|\sdmon|\spmon)"
    r"|tensorboard|jupyter|python3?\s+-m\s+http\.server"
    r"|sglang\.launch_server|sglang\s+serve|vllm\s+serve|vllm\.entrypoints"
    r"|launch_server|serve\b)",
)


def _tail(run: Run) -> tuple[int, list[str]]:
    """(offset of the tail, its lines) of the run's output."""
    text = run.text
    start = max(0, len(text) - TAIL)
    if start:
        newline = text.find("\n", start)
        start = newline + 1 if newline != -1 else len(text)
    return start, text[start:].split("\n")


def _last_lines(run: Run, count: int) -> list[tuple[int, str]]:
    """The last ``count`` non-blank lines of the output with their offsets."""
    start, lines = _tail(run)
    offsets, pos = [], start
    for line in lines:
        offsets.append((pos, line.rstrip("\r")))
        pos += len(line) + 1
    return [(p, t) for p, t in offsets if t.strip()][-count:]


def _from_output(run: Run) -> tuple[str, int] | None:
    """Why the output says the command did not finish ("ctrl-c", "killed" or "connection"),
    and where."""
    if not run.text:
        return None
    last = _last_lines(run, 12)
    for pos, text in reversed(last):
        if CONNECTION.match(text.strip()):
            return "connection", pos
    for pos, text in last[-3:]:
        if KILLED.match(text.strip()):
            return "killed", pos
    if OPEN_ENDED.search(run.command[:2000]):
        return None
    for pos, text in last:
        if CTRL_C.match(text):
            return "ctrl-c", pos
    if last and INTERRUPT_LINES.match(last[-1][1].strip()):
        return "ctrl-c", last[-1][0]
    return None


def _reason(run: Run) -> str | None:
    reason = getattr(run, "reason", None)
    return reason if isinstance(reason, str) else None


def _from_status(run: Run) -> tuple[str, str] | None:
    """(cause, what happened) for a journal step run that did not finish."""
    reason = _reason(run)
    if run.status == "lost":
        return "lost", reason or "its recorder stopped before the step ended"
    if run.status == "interrupted":
        if reason and re.match(r"interrupted \([^)]+\)", reason):
            return "ctrl-c", reason
        if reason and "recorder" in reason:
            return "recorder", reason
        if reason:
            return "ctrl-c" if "interrupt" in reason.lower() else "recorder", reason
        if run.exit_code is not None:  # the command was stopped and said so: Ctrl-C
            return "ctrl-c", f"interrupted: the command was stopped (exit {run.exit_code})"
        return "recorder", "the step never finished: its recorder stopped"
    if run.status == "timed-out":
        return "timeout", reason or "stopped after the step's timeout"
    if run.status == "disk full" and run.exit_code is not None and run.exit_code > 128:
        # journal's own stop, with the signal it sent: not run (no exit status), no finding
        return "disk-full", reason or "journal stopped it: the disk under its database was full"
    if run.status == "failed" and run.exit_code is None:
        if reason is not None:
            lowered = reason.lower()
            if "connection" in lowered and "lost" in lowered:
                return "connection", reason
            if "killed by a signal" in lowered:
                return "killed", reason
            return None  # could not connect, or the transport broke before the command
        if run.text or run.before is not None:
            return "connection", "the command ended without an exit status"
        return None
    if run.status == "failed" and run.exit_code in (137, 143):
        name = "SIGKILL" if run.exit_code == 137 else "SIGTERM"
        return "killed", reason or f"killed by {name} (exit {run.exit_code})"
    return None


TITLES = {
    "ctrl-c": "{step} was interrupted ({why}) before it finished",
    "recorder": "{step} never finished: journal stopped recording it (killed, or its machine "
    "went down), so how the command ended is unknown",
    "lost": "{step} is lost: journal stopped recording it (killed, or its machine went down) "
    "while the command ran on {host}, which may still be running it or may have ended it",
    "connection": "the connection to {host} was lost while {step} ran: the command may still "
    "be running there, or may have been cut off half-way",
    "timeout": "{step} was stopped after its timeout before it finished",
    "killed": "{step} was killed before it finished",
    "disk-full": "{step} was stopped by journal before it finished: the disk under journal's "
    "database was full, so no more of its output could be recorded",
}
ADVICE = {
    "lost": "do not run it again before you know how it ended: the command ran under its "
    "supervisor on {host}, so `journal attach {run}` records the rest of its output and its "
    "real exit status (for a run recorded before journal had one, look on {host} with `pgrep "
    "-af '<command>'`); then {check}",
    "connection": "log in to {host} and look for the command before anything else (`pgrep -af "
    "'<command>'`): it may still be running; once it has ended, {check} and {again}; run long "
    "steps under tmux or nohup on the host",
    "killed": "find what killed it (`dmesg -T | grep -i -E 'killed process|out of memory'` for "
    "the out-of-memory killer) and fix that (fewer build jobs: MAX_JOBS, a smaller batch); "
    "then {check} and {again}",
    "timeout": "if the step needs longer, raise its `timeout` in the runbook; {check} and {again}",
    "disk-full": "free space on the filesystem of journal's database (`df -h` there; the host's "
    "spool, ~/.journal/runs, if it is the same disk), then {check} and {again}",
}
DEFAULT_ADVICE = (
    "the command may have changed the host half-way: {check} (for an install, also whether the "
    "package imports) and {again}"
)
SEVERITY = {"recorder": "error", "lost": "error", "connection": "error", "killed": "warning"}


def detect(subject: Subject) -> Iterator[Finding]:
    for run in subject.runs:
        evidence: list[Evidence] = [run.command_evidence()]
        host = run.host
        if subject.journal and not run.imported:
            status = _from_status(run)
            if status is None:
                continue
            cause, why = status
            evidence.append(Evidence(why, None, run.event, run.key))
            last = _last_lines(run, 1)
            if last:
                line = run.line_at(last[0][0])
                evidence.append(
                    Evidence(f"last output: {line.text}", line.line, line.event, run.key)
                )
            severity = SEVERITY.get(cause, "warning")
        else:
            seen = _from_output(run)
            if seen is None:
                continue
            cause, pos = seen
            line = run.line_at(pos)
            evidence.append(line)
            severity = "warning"
            named = re.search(
                r"(?:Connection to|server) (\S+?)(?: port \d+)?(?::| closed| not)", line.text
            )
            if named:
                host = named.group(1)
        asked = re.match(r"interrupted \(([^)]+)\)", _reason(run) or "")
        fill = {
            "step": run_name(subject, run),
            "host": host,
            "why": asked.group(1) if asked else "Ctrl-C",
            "run": run.key,
        }
        if subject.journal and not run.imported:
            fill["check"] = f"check what it left (`journal run probe packages --host {run.host}`)"
            fill["again"] = (
                "type it again"
                if run.interactive
                else f"run it again (`journal run step {run.step} --host {run.host}`)"
            )
        else:
            fill["check"] = "check what it left (`uv pip list` / `pip list`, `pip check`)"
            fill["again"] = "run it again"
        title = TITLES[cause].format(**fill)
        advice = ADVICE.get(cause, DEFAULT_ADVICE).format(**fill)
        yield finding(ID, severity, title, advice, evidence, run)
