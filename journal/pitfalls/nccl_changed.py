"""The NCCL that torch loads changed between two looks at it.

A torch upgrade brings its own NCCL: the seed's swap to the cu130 nightly pulled in
`nvidia-nccl-cu13==2.28.9`, and NCCL jumped from 2.22.3. A new NCCL changes the collective
algorithms and protocols it picks, its defaults and its bugs, so multi-GPU throughput can move
either way; the `NCCL_ALGO`, `NCCL_PROTO`, `NCCL_CROSS_NIC` (and other `NCCL_*`) values tuned
for the old one may now hold the new one back, or break it. The versions are read from the
`torch-env` probe (`nccl`), and from output: `NCCL: (2, 28, 9)` (a check printing
`torch.cuda.nccl.version()`, alone or among other values on the line, as in
`2.10.0+cu128 12.8 (2, 22, 3)` printed by `print(torch.__version__, torch.version.cuda,
torch.cuda.nccl.version())`, or a `>>>` session's answer), `NCCL version 2.28.9+cuda13.0` (the
banner of `NCCL_DEBUG=INFO`).
The finding is about the step that changed it (the one that changed the `nvidia-nccl-*`
package or torch between the two looks). It is a warning when `NCCL_*` tuning variables are
set on that host, information otherwise. A `journal rollback` that reached its target set puts
back an NCCL recorded before, and is no new finding.

It is resolved only by a figure that exercises NCCL on that host (the built-in `allreduce`,
nccl-tests' bus or algorithm bandwidth, or a serving benchmark labelled with a parallelism
above 1: `tp`, `dp`, `pp`, `ep`, `world_size`, `gpus`, e.g. `--label tp=8`) back within 5% of
its baseline (the same series measured on the host before the change: its median where the
benchmark printed repeated samples), by a rollback to a set recorded before the change, or by
an acknowledgement. Without a baseline, only an acknowledgement closes it: a figure measured
after the change alone cannot tell whether it fell.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from journal.benchmarks.parsers.nccl import nccl_triple
from journal.pitfalls.base import Finding, finding
from journal.pitfalls.resolution import plain, within
from journal.pitfalls.rollback_incomplete import reached
from journal.reading import printed
from journal.reading.bench import (
    DISPLAY,
    Figure,
    figure_key,
    figures,
    grep_lines,
    lines_with,
    per_subject,
    probe_source,
    run_name,
)
from journal.reading.commands import install_requests
from journal.reading.subject import Evidence, Run, Subject

ID = "nccl-changed"
ORDER = 70
#: Judges a run by what came after it too (the ledger revisits recent runs).
LOOKS_AHEAD = True
#: Resolved by an NCCL figure back at its baseline (``resolves_figure``) or a rollback.
RESOLVED_BY = ("rolled-back",)
#: How far an NCCL figure may stay from its baseline and still show the change harmless.
THRESHOLD = 0.05
#: Labels that say how many GPUs a serving benchmark spread over (NCCL between them when > 1).
PARALLEL = frozenset(
    {"tp", "tp_size", "tensor_parallel_size", "dp", "dp_size", "pp", "pp_size", "ep"}
    | {"ep_size", "world_size", "gpus", "num_gpus", "ngpus", "nproc_per_node"}
)

#: `NCCL: (2, 28, 9)`, `nccl version = (2, 22, 3)`
OUT_TUPLE = re.compile(
    r"\b(?:NCCL|nccl|Nccl)(?: version)?[ \t]*[:=][ \t]*"
    r"\([ \t]*(\d+),[ \t]*(\d+),[ \t]*(\d+)[ \t]*\)"
)
#: `NCCL: 2.28.9`, `NCCL version: 2.28.9`
OUT_DOTTED = re.compile(r"\b(?:NCCL|nccl)(?: version)?[ \t]*[:=][ \t]*(\d+)\.(\d+)\.(\d+)\b")
#: `NCCL INFO NCCL version 2.28.9+cuda13.0` (NCCL_DEBUG=INFO), `NCCL version 2.22.3+cuda12.6`
BANNER = re.compile(r"\bNCCL version (\d+)\.(\d+)\.(\d+)(?:\+cuda[\d.]+)?")
#: `(2, 28, 9)` alone: printed by a command that asked `torch.cuda.nccl.version()`, or the
#: answer on the line after `>>> torch.cuda.nccl.version()` in a Python session
BARE_TUPLE = re.compile(r"^[ \t]*\((\d+),[ \t]*(\d+),[ \t]*(\d+)\)[ \t]*$", re.M)
#: commands whose NCCL is not torch's (nccl-tests binaries load the NCCL they were built with)
NOT_TORCH = re.compile(r"_perf(?:_mpi)?\b")

NCCL_PACKAGE = re.compile(r"^nvidia-nccl(?:-cu\d+)?$")
UV_NCCL = re.compile(r"^ [-+~] nvidia-nccl[\w-]*==\S+", re.M)
PIP_NCCL = re.compile(r"^Successfully installed .*\bnvidia-nccl-\S+", re.M)
UV_TORCH = re.compile(r"^ [-+~] torch==\S+", re.M)
PIP_TORCH = re.compile(r"^Successfully installed .*\btorch-\d\S*", re.M)

#: NCCL_* variables that tune nothing: versions, debugging, build paths, nccl-tests' own.
NOT_TUNING = re.compile(
    r"^NCCL_(?:VERSION|DEBUG|DEBUG_SUBSYS|DEBUG_FILE|HOME|ROOT|ROOT_DIR|INCLUDE_DIR|LIB_DIR"
    r"|LIBRARY|LIBRARIES|TESTS_\w*)$"
)
EXPORTED = re.compile(r"(?:^|[\s;&|(])(?:export[ \t]+)?(NCCL_[A-Z0-9_]+)=(\"[^\"]*\"|'[^']*'|\S*)")
PRINTED = re.compile(r"^[ \t]*(?:export[ \t]+|declare -x[ \t]+)?(NCCL_[A-Z0-9_]+)=(.*)$", re.M)
SET_BY_ENV = re.compile(r"\b(NCCL_[A-Z0-9_]+) set by environment to (\S+)")


@dataclass(frozen=True)
class Seen:
    """One look at the NCCL torch loads: its version, the run, and the line that shows it."""

    version: tuple[int, int, int]
    run: Run
    evidence: Evidence
    source: str  # "output" or "probe"

    @property
    def text(self) -> str:
        return ".".join(str(p) for p in self.version)


def parse_version(value: object) -> tuple[int, int, int] | None:
    """(2, 28, 9) for "2.28.9", "2.28.3-1", "2.28.9+cuda13.0" or "2.28.9.post1"."""
    if not isinstance(value, str):
        return None
    match = re.match(r"^\s*(\d+)\.(\d+)\.(\d+)", value)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None


def probe_nccl(result: dict | None) -> tuple[int, int, int] | None:
    """The NCCL torch loads, as the torch-env probe reports it."""
    if not isinstance(result, dict):
        return None
    found = parse_version(result.get("nccl"))
    if found is None and isinstance(result.get("torch"), dict):
        found = parse_version(result["torch"].get("nccl"))
    return found


def nccl_lines(subject: Subject) -> dict[str, list[tuple[int, int]]]:
    """Run key -> the lines of its output that mention NCCL (`NCCL`, `nccl`, `Nccl`, `libnccl`,
    `NCCL_ALGO=`), found in one pass per run for nccl-changed and nccl-skew."""
    return per_subject(
        subject,
        "nccl-lines",
        lambda: {run.key: lines_with(run, "CCL", "ccl") for run in subject.runs},
    )


def output_versions(
    run: Run, spans: list[tuple[int, int]] | None = None, limit: int = 50
) -> list[tuple[tuple[int, int, int], Evidence]]:
    """The versions of torch's NCCL that the run printed, in order (``spans``: the lines that
    mention NCCL, when already found)."""
    text = run.text
    if spans is None:
        spans = lines_with(run, "CCL", "ccl")
    found: list[tuple[int, tuple[int, int, int], int]] = []
    patterns = [OUT_TUPLE, OUT_DOTTED]
    if not NOT_TORCH.search(run.command):
        patterns.append(BANNER)
    asked = 0
    for start, end in spans:
        if len(found) >= limit:
            break
        for pattern in patterns:
            match = pattern.search(text, start, end)
            if match:
                found.append((start, _triple(match), match.start()))
                break
        if asked < limit and text.find("nccl.version()", start, end) != -1 and end < len(text):
            asked += 1  # `>>> torch.cuda.nccl.version()`, the answer on the next line
            after = text.find("\n", end + 1)
            match = BARE_TUPLE.match(text, end + 1, after if after != -1 else len(text))
            if match:
                found.append((end + 1, _triple(match), match.start(1)))
    if "nccl.version()" in run.command:
        for match, _ in grep_lines(run, BARE_TUPLE, "(", limit=limit):
            found.append((match.start(), _triple(match), match.start(1)))
    for fact in printed.facts(run):  # `2.10.0+cu128 12.8 (2, 22, 3)`, a >>> session's answer
        triple = nccl_triple(fact.value) if fact.name == "torch.nccl" else None
        if triple is not None:
            found.append((text.rfind("\n", 0, fact.pos) + 1, triple, fact.pos))
    out = []
    seen: set[int] = set()
    for start, version, pos in sorted(found):
        if start not in seen:
            seen.add(start)
            out.append((version, run.line_at(pos)))
    return out


def _triple(match: re.Match[str]) -> tuple[int, int, int]:
    return (int(match.group(1)), int(match.group(2)), int(match.group(3)))


def observations(run: Run, spans: list[tuple[int, int]] | None = None) -> list[Seen]:
    """Every look at torch's NCCL in a run: its output first, then the probe after it."""
    seen = [Seen(v, run, line, "output") for v, line in output_versions(run, spans)]
    result = run.probe("torch-env")
    version = probe_nccl(result)
    if version is not None:
        event = run.probe_events.get("torch-env", run.event)
        text = ".".join(map(str, version))
        seen.append(
            Seen(
                version,
                run,
                Evidence(f"{probe_source(run)}: torch's NCCL {text}", None, event, run.key),
                "probe",
            )
        )
    return seen


def _changer(run: Run) -> tuple[int, list[Evidence]]:
    """How surely ``run`` changed torch's NCCL (3: the NCCL package or library path, 2:
    torch, 0: neither), with the evidence."""
    if run.diff is not None:
        nccl = [c for c in run.diff.changes if NCCL_PACKAGE.match(c.key)]
        if nccl:
            return 3, [_change_evidence(run, c) for c in nccl]
    if re.search(r"\b(?:LD_LIBRARY_PATH|LD_PRELOAD)=\S*nccl", run.command, re.I):
        return 3, [run.command_evidence()]
    lines = grep_lines(run, UV_NCCL, "nvidia-nccl", limit=4) + grep_lines(
        run, PIP_NCCL, "nvidia-nccl", limit=2
    )
    if lines:
        return 3, [line for _, line in lines]
    requests = install_requests(run.command)
    if any(NCCL_PACKAGE.match(name) for r in requests for name in r.names()):
        return 3, [run.command_evidence()]
    if run.diff is not None:
        torch = run.diff.get("torch")
        if torch is not None:
            return 2, [_change_evidence(run, torch)]
    lines = grep_lines(run, UV_TORCH, "torch==", limit=2) + grep_lines(
        run, PIP_TORCH, "torch-", limit=1
    )
    if lines:
        return 2, [line for _, line in lines]
    if any("torch" in r.names() for r in requests):
        return 1, [run.command_evidence()]
    return 0, []


def _change_evidence(run: Run, change: object) -> Evidence:
    name = getattr(change, "name", "?")
    before, after = getattr(change, "before", None), getattr(change, "after", None)
    kind = getattr(change, "kind", "changed")
    text = f"{name} {before or '(absent)'} → {after or '(removed)'} ({kind}) in {run.step}"
    return Evidence(text, None, run.event, run.key)


def tuning(subject: Subject, host: str, probes: list[Seen]) -> dict[str, Evidence]:
    """The NCCL_* tuning variables set on ``host``: in probes' environments, steps' env, and
    what the transcript exported or printed (`export NCCL_ALGO=Ring`, `NCCL_PROTO=Simple`)."""
    found: dict[str, Evidence] = {}
    spans = nccl_lines(subject)

    def add(name: str, value: str, evidence: Evidence) -> None:
        if not NOT_TUNING.match(name) and name not in found:
            found[name] = evidence

    for seen in probes:
        env = (seen.run.probe("torch-env") or {}).get("env")
        if seen.source == "probe" and isinstance(env, dict):
            for name, value in sorted(env.items()):
                if isinstance(name, str) and name.startswith("NCCL_"):
                    add(
                        name,
                        str(value),
                        Evidence(
                            f"{name}={value} (in the torch-env probe's environment)",
                            None,
                            seen.evidence.event,
                            seen.run.key,
                        ),
                    )
    for run in subject.runs:
        if run.host != host:
            continue
        for name, value in sorted(run.env.items()):
            if name.startswith("NCCL_"):
                add(
                    name,
                    value,
                    Evidence(f"{name}={value} (env of {run.step})", None, run.event, run.key),
                )
        if "NCCL_" in run.command:
            for match in EXPORTED.finditer(run.command[:20_000]):
                add(match.group(1), match.group(2), run.command_evidence())
        hits = 0
        for start, end in spans[run.key]:
            match = PRINTED.match(run.text, start, end) or SET_BY_ENV.search(run.text, start, end)
            if match:
                add(match.group(1), match.group(2), run.line_at(match.start()))
                hits += 1
                if hits >= 20:
                    break
    return found


def _label(version: tuple[int, int, int]) -> str:
    return ".".join(str(p) for p in version)


def detect(subject: Subject) -> Iterator[Finding]:
    last: dict[str, Seen] = {}
    order = {id(run): i for i, run in enumerate(subject.runs)}
    spans = nccl_lines(subject)
    for run in subject.runs:
        for seen in observations(run, spans[run.key]):
            before = last.get(run.host)
            last[run.host] = seen
            if before is None or before.version == seen.version:
                continue
            found = _finding(subject, before, seen, order)
            if found is not None:
                yield found


def _finding(subject: Subject, before: Seen, after: Seen, order: dict[int, int]) -> Finding | None:
    """The finding about the change between two looks (None where a rollback that reached
    its target made it: it put back an NCCL recorded before, judged when it was)."""
    host = after.run.host
    start, end = order[id(before.run)], order[id(after.run)]
    candidates = [r for r in subject.runs[start + 1 : end + 1] if r.host == host] or [after.run]
    best, changer, changed = 0, after.run, []
    for run in candidates:
        score, evidence = _changer(run)
        if score >= best and score > 0:
            best, changer, changed = score, run, evidence
    if reached(changer):
        return None
    spans = nccl_lines(subject)
    looks_before = [
        s for s in observations(before.run, spans[before.run.key]) if s.version == before.version
    ]
    looks_after = [
        s for s in observations(after.run, spans[after.run.key]) if s.version == after.version
    ]
    variables = tuning(subject, host, looks_before + looks_after)
    old, new = _label(before.version), _label(after.version)
    direction = "upgraded" if after.version > before.version else "downgraded"
    if best:
        where = f" with {run_name(subject, changer)}"
    else:
        where = f" between {run_name(subject, before.run)} and {run_name(subject, after.run)}"
    title = f"the NCCL torch loads changed from {old} to {new} ({direction}){where}"
    evidence = [s.evidence for s in looks_before[-2:]] + changed[:4]
    evidence += [s.evidence for s in looks_after[:2]]
    if variables:
        names = sorted(variables)
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        title += f"; {shown} {'was' if len(names) == 1 else 'were'} tuned for NCCL {old}"
        evidence += [variables[n] for n in names[:8]]
        advice = (
            f"re-evaluate {shown} under NCCL {new}: run nccl-tests (`all_reduce_perf -b 8 -e 8G "
            "-f 2 -g <gpus>`) and your throughput benchmark with them unset and with them set, "
            f"and keep only those that still help; NCCL {new} picks its own algorithms and "
            "protocols, which a value tuned for the old one may now override for the worse"
        )
        severity = "warning"
    else:
        advice = (
            f"measure again: run nccl-tests (`all_reduce_perf -b 8 -e 8G -f 2 -g <gpus>`) and "
            f"your throughput benchmark under NCCL {new} and compare with the figures taken "
            f"under {old}; read the NCCL release notes between the two versions"
        )
        severity = "info"
    baselines = _baselines(subject, changer)
    if not baselines:
        advice += (
            "; no figure that exercises NCCL was recorded on this host before the change, so "
            "none can show it harmless now: acknowledge this finding once you have measured"
        )
    return finding(ID, severity, title, advice, _unique(evidence), changer, baselines=baselines)


def exercises_nccl(figure: Figure) -> bool:
    """Whether a figure measured NCCL: the built-in allreduce, nccl-tests' bandwidths, or a
    benchmark labelled with a parallelism above 1."""
    name = figure.name.lower()
    if "busbw" in name or "algbw" in name or "bus_bandwidth" in name:
        return True
    for key, value in figure.labels.items():
        if str(key).lower() in PARALLEL:
            try:
                if int(str(value)) > 1:
                    return True
            except ValueError:
                continue
    return False


def _baselines(subject: Subject, changer: Run) -> list[list[Any]]:
    """[series, baseline, direction] for each NCCL figure series measured on the changer's
    host before it: the median of the series' latest set (the repeated samples of one run,
    :func:`journal.projections.verdict.sets`)."""
    from statistics import median

    from journal.projections.verdict import sets

    order = {run.key: i for i, run in enumerate(subject.runs)}
    until = order.get(changer.key, len(order))
    points: dict[Any, list[tuple[int, Figure]]] = {}
    for figure, block in figures(subject):
        if figure.host != changer.host or figure.invalid or (block and block.problems()):
            continue
        if figure.event is not None and changer.event is not None:
            at, limit = figure.event, changer.event  # a recorded figure: by its event
        else:
            at, limit = order.get(figure.run or "", until), until  # pasted: its command's place
        if at < limit and exercises_nccl(figure):
            points.setdefault(figure_key(figure), []).append((at, figure))
    out = []
    for key, found in points.items():
        latest = sets(f for _, f in sorted(found, key=lambda p: p[0]))[-1]
        out.append([plain(key), median(f.value for f in latest), latest[0].direction])
    return out


def resolves_figure(found: Finding, figure: Figure) -> str | None:
    """A figure exercising NCCL on the host, of a series measured before the change, back
    within 5% of that baseline (no lower for a bandwidth, no higher for a latency)."""
    if not exercises_nccl(figure):
        return None
    key = plain(figure_key(figure))
    for series, baseline, direction in found.facts.get("baselines") or []:
        if series != key or not baseline:
            continue
        if not within(figure.value, baseline, direction, THRESHOLD):
            return None
        change = (figure.value - baseline) / baseline
        unit = f" {figure.unit}" if figure.unit else ""
        shown = DISPLAY.get(figure.name, figure.name)
        return (
            f"{shown} under the new NCCL was {figure.value:,.2f}{unit}, {change:+.1%} against "
            f"its baseline of {baseline:,.2f}{unit} before the change"
        )
    return None


def _unique(evidence: list[Evidence]) -> list[Evidence]:
    out, seen = [], set()
    for e in evidence:
        key = (e.text, e.line, e.event, e.run)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out
