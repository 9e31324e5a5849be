"""Benchmark figures for the throughput detectors: read from benchmark output, or recorded.

Two sources give a :class:`Figure`:

- the output of a run that printed a benchmark summary: sglang ``bench_serving`` and vLLM
  ``bench serve`` (``Output token throughput (tok/s):  54.10``, ``Successful requests:``,
  ``Failed requests:``), vLLM ``bench throughput`` (``Throughput: 12.34 requests/s, 5678.90
  total tokens/s, 1234.56 output tokens/s``) and nccl-tests (``# Avg bus bandwidth    : 232.167``,
  ``# Out of bounds values : 0 OK``; without the ``#`` before 2.0, or under mpirun's
  ``[1,0]<stdout>:``);
- ``Subject.metrics``: figures recorded as events (``journal run bench``, ``journal record
  metric``), which a later version fills with :class:`Figure` objects.

A figure read from output is keyed by its metric, the benchmark command with its volatile
options taken out (:func:`bench_key`), and its place among the summaries the run printed; a
recorded figure by its name and labels. Figures of one key are compared in order, per host.
"""

from __future__ import annotations

import bisect
import re
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

# The summary lines are read by the same regexes as `journal run bench` reads them with.
from journal.benchmarks.parsers import (
    _NUMBER,  # noqa: F401 (importable from here, as before)
    ALL_FAILED,
    FAILED,
    NCCL_BUSBW,
    NCCL_OOB,
    NUM_PROMPTS,
    SERVING_LINE,
    SERVING_METRICS,
    SUCCESSFUL,
    VLLM_THROUGHPUT,
)
from journal.projections.metrics import NOT_IDENTITY, direction, higher_is_better
from journal.reading.commands import shell_pieces
from journal.reading.subject import Evidence, Run, Subject

T = TypeVar("T")


@dataclass(frozen=True)
class Figure:
    """One measured figure: ``name`` (``output_token_throughput``), ``value``, ``unit``
    (``tok/s``), ``labels`` (what identifies the workload), the step run and event it came
    from, and where known its host, the line that shows it and why it cannot be trusted."""

    name: str
    value: float
    unit: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    run: str | None = None
    event: int | None = None
    host: str | None = None
    evidence: Evidence | None = None

    invalid: str | None = None  # why a recorded figure cannot be trusted

    @property
    def higher_is_better(self) -> bool:
        """Throughputs and bandwidths (a rate: ``…/s``); latencies and counts are not."""
        return higher_is_better(self.name, self.unit)

    @property
    def direction(self) -> str:
        """``higher`` (rates, bandwidths, ``accept_length``), ``lower`` (latencies) or
        ``count`` (``successful_requests``): see :func:`journal.projections.metrics.direction`."""
        return direction(self.name, self.unit)


#: Metric display names, for titles.
DISPLAY = {
    "request_throughput": "Request throughput",
    "input_token_throughput": "Input token throughput",
    "output_token_throughput": "Output token throughput",
    "total_token_throughput": "Total token throughput",
    "output_tokens_per_s": "Output throughput",
    "total_tokens_per_s": "Total throughput",
    "requests_per_s": "Request throughput",
    "avg_bus_bandwidth": "nccl-tests average bus bandwidth",
    "allreduce_busbw": "All-reduce bus bandwidth",
    "busbw": "nccl-tests bus bandwidth",
    "algbw": "nccl-tests algorithm bandwidth",
    "accept_length": "Accept length",
    "acceptance_length": "Acceptance length",
    "acceptance_rate": "Acceptance rate",
}


@dataclass
class Block:
    """One benchmark summary printed by a run: its figures and what says whether they hold."""

    run: Run
    tool: str  # "bench_serving", "vllm-throughput" or "nccl-tests"
    index: int  # its place among the run's summaries of this tool
    figures: list[Figure] = field(default_factory=list)
    successful: tuple[int, Evidence] | None = None
    failed: tuple[int, Evidence] | None = None
    all_failed: Evidence | None = None
    out_of_bounds: tuple[int, str, Evidence] | None = None
    asked: int | None = None  # --num-prompts of the command

    def problems(self) -> list[tuple[str, list[Evidence]]]:
        """Why this summary's figures cannot be trusted: (reason, evidence) pairs."""
        found: list[tuple[str, list[Evidence]]] = []
        if self.out_of_bounds and self.out_of_bounds[0] > 0:
            count, _, line = self.out_of_bounds
            found.append(
                (
                    f"{count} wrong value{'s' if count != 1 else ''} "
                    f"(`{line.text.strip()}`): the collective returned wrong results",
                    [line],
                )
            )
        if self.all_failed is not None:
            found.append(("every request of the benchmark failed", [self.all_failed]))
        if self.failed and self.failed[0] > 0:
            count, line = self.failed
            found.append(
                (f"{count} request{'s' if count != 1 else ''} of the benchmark failed", [line])
            )
        if self.successful is not None and self.asked is not None:
            done, line = self.successful
            if done < self.asked and not (self.failed and self.failed[0] > 0):
                found.append(
                    (
                        f"only {done} of the {self.asked} requests asked (--num-prompts "
                        f"{self.asked}) succeeded",
                        [line],
                    )
                )
        elif self.successful is not None and self.successful[0] == 0 and not self.all_failed:
            found.append(("no request of the benchmark succeeded", [self.successful[1]]))
        return found


#: Lines holding a needle beyond which grep_lines stops collecting (a log of millions).
MAX_LINES = 100_000


def lines_with(run: Run, *needles: str) -> list[tuple[int, int]]:
    """(start, end) of every line of the output that holds one of ``needles``, in order,
    found with ``str.find`` (at most MAX_LINES of them)."""
    text = run.text
    spans: set[tuple[int, int]] = set()
    for needle in needles:
        pos = text.find(needle)
        while pos != -1 and len(spans) < MAX_LINES:
            start = text.rfind("\n", 0, pos) + 1
            end = text.find("\n", pos)
            if end == -1:
                end = len(text)
            spans.add((start, end))
            pos = text.find(needle, end)
    return sorted(spans)


def grep_lines(
    run: Run, pattern: re.Pattern[str], *needles: str, limit: int = 20
) -> list[tuple[re.Match[str], Evidence]]:
    """Like ``Run.grep``, for a pattern that matches within one line: the text is scanned with
    ``str.find`` for the needles and the pattern tried only on the lines that hold one, which
    on a big output is many times faster than letting the regex scan it all."""
    found: list[tuple[re.Match[str], Evidence]] = []
    for start, end in lines_with(run, *needles):
        for match in pattern.finditer(run.text, start, end):
            found.append((match, run.line_at(match.start())))
            if len(found) >= limit:
                return found
    return found


def _headers(text: str) -> list[int]:
    """Where each `== Serving Benchmark Result ==` line starts."""
    found, pos = [], text.find(" Serving Benchmark Result ")
    while pos != -1:
        found.append(text.rfind("\n", 0, pos) + 1)
        pos = text.find(" Serving Benchmark Result ", pos + 1)
    return found


_CACHE: dict[int, tuple[weakref.ref[Subject], dict[str, Any]]] = {}


def per_subject(subject: Subject, name: str, compute: Callable[[], T]) -> T:
    """``compute()`` once per subject and ``name``: what several detectors read (benchmark
    summaries, NCCL lines) is found in one pass over the output, not one per detector."""
    key = id(subject)
    entry = _CACHE.get(key)
    if entry is None or entry[0]() is not subject:
        entry = (weakref.ref(subject, lambda _ref, key=key: _CACHE.pop(key, None)), {})
        _CACHE[key] = entry
    if name not in entry[1]:
        entry[1][name] = compute()
    return entry[1][name]


def subject_blocks(subject: Subject) -> dict[str, list[Block]]:
    """Every run's benchmark summaries (run key -> blocks)."""
    return per_subject(subject, "blocks", lambda: {run.key: blocks(run) for run in subject.runs})


def _block_of(headers: list[int], pos: int) -> int:
    return max(bisect.bisect_right(headers, pos) - 1, 0)


def blocks(run: Run) -> list[Block]:
    """The benchmark summaries ``run`` printed, in order of tool and place."""
    found: list[Block] = []
    keys: list[str] = []

    def key_of() -> str:
        if not keys:
            keys.append(bench_key(run.command))
        return keys[0]

    if not run.has("hroughput", "bandwidth"):
        return found  # every summary holds one of these: most runs are done after 2 scans
    if run.has("requests:", " throughput ("):
        headers = _headers(run.text)
        serving: dict[int, Block] = {}

        def block(pos: int) -> Block:
            index = _block_of(headers, pos)
            if index not in serving:
                serving[index] = Block(run, "bench_serving", index, asked=_asked(run.command))
            return serving[index]

        for match, line in grep_lines(run, SERVING_LINE, "throughput (", limit=400):
            name, unit = SERVING_METRICS[match.group(1)]
            b = block(match.start())
            b.figures.append(_figure(run, name, float(match.group(2)), unit, key_of(), b, line))
        for match, line in grep_lines(run, SUCCESSFUL, "Successful requests:", limit=100):
            block(match.start()).successful = (int(match.group(1)), line)
        for match, line in grep_lines(run, FAILED, "Failed requests:", limit=100):
            block(match.start()).failed = (int(match.group(1)), line)
        for match, line in grep_lines(run, ALL_FAILED, "All requests failed", limit=1):
            block(match.start()).all_failed = line
        found.extend(serving[i] for i in sorted(serving))
    for index, (match, line) in enumerate(
        grep_lines(run, VLLM_THROUGHPUT, "Throughput: ", limit=100)
    ):
        b = Block(run, "vllm-throughput", index)
        b.figures.append(
            _figure(run, "requests_per_s", float(match.group(1)), "req/s", key_of(), b, line)
        )
        b.figures.append(
            _figure(run, "total_tokens_per_s", float(match.group(2)), "tok/s", key_of(), b, line)
        )
        if match.group(3) is not None:
            b.figures.append(
                _figure(
                    run, "output_tokens_per_s", float(match.group(3)), "tok/s", key_of(), b, line
                )
            )
        found.append(b)
    if run.has("Out of bounds values", "Avg bus bandwidth"):
        oob = grep_lines(run, NCCL_OOB, "Out of bounds values", limit=100)
        busbw = grep_lines(run, NCCL_BUSBW, "Avg bus bandwidth", limit=100)
        # nccl-tests prints the two lines together, once per test binary run.
        for index in range(max(len(oob), len(busbw))):
            b = Block(run, "nccl-tests", index)
            if index < len(oob):
                match, line = oob[index]
                b.out_of_bounds = (int(match.group(1)), match.group(2), line)
            if index < len(busbw):
                match, line = busbw[index]
                b.figures.append(
                    _figure(
                        run, "avg_bus_bandwidth", float(match.group(1)), "GB/s", key_of(), b, line
                    )
                )
            found.append(b)
    return found


def _asked(command: str) -> int | None:
    found = NUM_PROMPTS.findall(command)
    return int(found[-1]) if len(set(found)) == 1 else None


def _figure(
    run: Run, name: str, value: float, unit: str, key: str, block: Block, line: Evidence
) -> Figure:
    return Figure(
        name,
        value,
        unit,
        {"command": key, "summary": f"{block.tool}#{block.index + 1}"},
        run.key,
        line.event,
        run.host,
        line,
    )


def run_name(subject: Subject, run: Run, width: int = 72) -> str:
    """How a title names a run: the step's name in a journal, the command in a transcript
    (whose "steps" are only the commands' first words)."""
    if subject.journal and not run.imported:
        return run.step
    command = " ".join(run.command.split())
    return f"`{command if len(command) <= width else command[: width - 1] + '…'}`"


def probe_source(run: Run) -> str:
    """How evidence names where a probe result came from: after a step, or run on its own."""
    if not run.text and run.command.startswith("journal run probe"):
        return "torch-env probe (run on its own)"
    return f"torch-env probe after {run.step}"


# --- the benchmark command, normalised -------------------------------------------------------

#: Options whose value changes from run to run without changing the workload.
VOLATILE_VALUE = {
    "--output-file",
    "--result-filename",
    "--result-dir",
    "--log-level",
    "--host",
    "--port",
    "--base-url",
    "--label",
    "--metadata",
    "-F",
    "--output-file-path",
    "--profile-dir",
    "--output-json",
}
#: Flags that change only what is written or shown.
VOLATILE_FLAG = {
    "--output-details",
    "--save-result",
    "--save-detailed",
    "--disable-tqdm",
    "--append-result",
    "--disable-stream-output",
}
BENCH_MARKERS = re.compile(
    r"bench_serving|bench[ _]serve|benchmark_serving|bench[ _]throughput|benchmark_throughput"
    r"|_perf\b|llama-bench|bench_one_batch|bench_offline"
)
_REDIRECT = re.compile(r"^(?:\d*>>?|&>>?|\d*<|\d*>&\d*)(.*)$")


def bench_key(command: str) -> str:
    """The benchmark command as a key: the piece that runs the benchmark, its program by base
    name (``python3.12`` → ``python``), its options sorted, and without redirections or the
    options that name output files, the server's address or log levels."""
    if len(command) > 20_000:
        command = command[:20_000]
    pieces = shell_pieces(command)
    chosen = next((p for p in pieces if BENCH_MARKERS.search(" ".join(p))), None)
    if chosen is None:
        chosen = pieces[0] if pieces else []
    words: list[str] = []
    skip = False
    for word in chosen:
        if skip:
            skip = False
            continue
        redirect = _REDIRECT.match(word)
        if redirect and word[:1] in "0123456789&><":
            skip = not redirect.group(1)  # `> file` takes the next word
            continue
        words.append(word)
    env = sorted(w for w in words if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w))
    rest = [w for w in words if w not in env]
    program: list[str] = []
    options: list[tuple[str, str]] = []
    index = 0
    while index < len(rest):
        word = rest[index]
        if word.startswith("-") and len(word) > 1:
            name, eq, value = word.partition("=")
            name = name.replace("_", "-") if name.startswith("--") else name
            if name in VOLATILE_FLAG:
                index += 1
                continue
            if not eq and index + 1 < len(rest) and not rest[index + 1].startswith("-"):
                value = rest[index + 1]
                index += 1
            if name not in VOLATILE_VALUE:
                if name == "-m":
                    program.append(f"-m {value}")
                else:
                    options.append((name, value))
        else:
            base = word.rsplit("/", 1)[-1] if not program else word
            program.append(re.sub(r"^python\d*(?:\.\d+)?$", "python", base))
        index += 1
    return " ".join([*env, *program, *(f"{n} {v}".rstrip() for n, v in sorted(options))]).strip()


# --- every figure of a subject ---------------------------------------------------------------


def recorded_figures(subject: Subject) -> list[Figure]:
    """The figures recorded as events (``MetricRecorded``, see pitfalls.subjects)."""
    return [item for item in subject.metrics or [] if isinstance(item, Figure)]


def figures(subject: Subject) -> Iterator[tuple[Figure, Block | None]]:
    """Every figure of the subject in order, with the summary it was read from (None for a
    recorded one). A run whose figures were recorded as events is not read again."""
    recorded = recorded_figures(subject)
    read = subject_blocks(subject)
    recorded_runs = {f.run for f in recorded if f.run}
    by_run: dict[str | None, list[Figure]] = {}
    for f in recorded:
        by_run.setdefault(f.run, []).append(f)
    for run in subject.runs:
        if run.key in recorded_runs:
            for f in by_run.pop(run.key, []):
                yield (f if f.host else _with_host(f, run.host)), None
            continue
        for b in read[run.key]:
            for f in b.figures:
                yield f, b
    for rest in by_run.values():  # recorded outside any step run
        for f in rest:
            yield f, None


def _with_host(f: Figure, host: str) -> Figure:
    from dataclasses import replace

    return replace(f, host=host)


def figure_key(f: Figure) -> tuple[Any, ...]:
    """What makes two figures comparable: the metric, its labels but the phase (``before`` and
    ``after`` measure one workload at two times), the host."""
    labels = ((str(k), str(v)) for k, v in f.labels.items() if k not in NOT_IDENTITY)
    return (f.name, tuple(sorted(labels)), f.host)
