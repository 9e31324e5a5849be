"""Benchmark output parsers: a benchmark's recorded output text -> figures, and why they may
not be trusted. Pure functions; the runbook names one with ``parser = "…"``.

``parse(parser, text, patterns=, units=, command=)`` returns a :class:`ParseResult`: the
:class:`Parsed` figures in order of the text, each with the line it was read from, and the
:class:`Problem` lines that make them untrustworthy. Where one output holds several summaries
(a sweep, a script running the benchmark twice), each figure is labelled ``summary`` = "1",
"2", … in order; with a single summary there is no such label. ``units`` (name -> unit)
gives or overrides a figure's unit for every parser; ``command`` (the benchmark's shell
command) tells how many requests were asked for and which nccl-tests binary ran.

Metric names, per parser:

- ``sglang`` and ``vllm``, the serving summary (sglang ``bench_serving``, ``vllm bench
  serve``) and sglang ``bench_offline_throughput``'s: every line with a number, named after
  its label in snake_case, with ``_ms`` / ``_s`` for times. ``request_throughput`` (req/s),
  ``input_token_throughput``, ``output_token_throughput``, ``total_token_throughput`` (tok/s;
  also from vLLM's older ``Total Token throughput`` and ``Total throughput``),
  ``peak_output_token_throughput``, ``last_generation_throughput`` (tok/s),
  ``successful_requests``, ``failed_requests``, ``total_input_tokens``,
  ``total_generated_tokens``, ``peak_concurrent_requests``, ``concurrency`` (no unit),
  ``benchmark_duration_s`` (s), the latencies ``{mean,median,max,pNN}_{ttft,tpot,itl,
  e2e_latency}_ms`` (ms; vLLM's ``E2EL`` is read as ``e2e_latency``, its ``P99.9`` as
  ``p99_9``), sglang's speculative ``accept_length``, vLLM's ``acceptance_rate`` (%),
  ``acceptance_length``, ``drafts``, ``draft_tokens``, ``accepted_tokens`` and
  ``position_acceptance_rate`` (%, label ``position``). The lines that repeat settings
  (backend, request rate, max concurrency) are not figures.
- ``sglang`` ``bench_one_batch`` (the batches after ``Benchmark ...``, not the warm-up):
  ``prefill_latency_s``, ``median_decode_latency_s``, ``total_latency_s`` (s),
  ``prefill_throughput``, ``median_decode_throughput``, ``overall_throughput`` (tok/s), label
  ``batch_size``.
- ``vllm`` ``bench throughput``: ``requests_per_s`` (req/s), ``total_tokens_per_s``,
  ``output_tokens_per_s`` (tok/s); ``bench latency``: ``avg_latency_s``, ``std_latency_s``,
  ``p10_latency_s`` … ``p99_latency_s`` (s).
- ``nccl-tests``: ``busbw`` and ``algbw`` (GB/s) per row, labels ``size`` (bytes),
  ``placement`` (``out-of-place`` / ``in-place``), ``type`` / ``redop`` where the table mixes
  several; ``avg_bus_bandwidth`` (GB/s). Label ``op`` (``all_reduce_perf``) where the output or
  the command names the test.
- ``llama-bench``: ``tokens_per_s`` (tok/s), labels ``test``, ``model`` and the columns that
  vary between rows; the ``±`` standard deviation is dropped (see llama.py).
- ``regex``: each named group of each match, named after the group. The patterns run on RE2
  (linear time) where it takes them, else on ``re`` within a time limit; one past it reads
  nothing and says why in ``ParseResult.errors`` (see :mod:`journal.userregex`).
- ``builtin``: the ``metric`` of each JSON line (``matmul_bf16``, ``memcpy_d2d``,
  ``allreduce_busbw``), its unit and labels; a skipped one (the host cannot run it) goes to
  ``ParseResult.skipped``, one that could not be measured (the env is broken) to ``errors``.

Problems: ``Failed requests: N`` with N > 0, ``All requests failed``, fewer ``Successful
requests`` than ``--num-prompts`` in the command (or none at all); nccl-tests ``# Out of bounds
values : N FAILED``, a row with a non-zero ``#wrong``, an ``Avg bus bandwidth`` marked FAILED
(under ``NCCL_TESTS_MIN_BW``), a table with no footer (the test did not finish).

Big outputs are scanned with ``str.find`` for anchor strings; regexes run only on the lines
found (the ``regex`` parser's own patterns excepted).
"""

from __future__ import annotations

from journal.benchmarks.parsers._text import (
    NUMBER,
    Parsed,
    ParserError,
    ParseResult,
    Problem,
    Text,
    assemble,
)
from journal.benchmarks.parsers.generic import builtin, compile_patterns, regex
from journal.benchmarks.parsers.llama import llama_bench
from journal.benchmarks.parsers.nccl import NCCL_BUSBW, NCCL_OOB, nccl_tests
from journal.benchmarks.parsers.serving import (
    _NUMBER,
    ALL_FAILED,
    FAILED,
    NUM_PROMPTS,
    SERVING_LINE,
    SERVING_METRICS,
    SUCCESSFUL,
    VLLM_THROUGHPUT,
    one_batch,
    serving,
    vllm_latency,
    vllm_throughput,
)
from journal.terminal import clean

__all__ = [
    "ALL_FAILED",
    "FAILED",
    "NCCL_BUSBW",
    "NCCL_OOB",
    "NUMBER",
    "NUM_PROMPTS",
    "PARSERS",
    "SERVING_LINE",
    "SERVING_METRICS",
    "SUCCESSFUL",
    "VLLM_THROUGHPUT",
    "_NUMBER",
    "ParseResult",
    "Parsed",
    "ParserError",
    "Problem",
    "compile_patterns",
    "parse",
]

PARSERS: tuple[str, ...] = ("sglang", "vllm", "nccl-tests", "llama-bench", "regex", "builtin")


def parse(
    parser: str,
    text: str,
    *,
    patterns: list[str] | None = None,
    units: dict[str, str] | None = None,
    command: str = "",
) -> ParseResult:
    """The figures and problems ``parser`` reads in ``text``, a benchmark's output.

    ParserError for an unknown parser, for the regex parser without usable ``patterns``, and
    for patterns given to another parser. Output with no figures gives an empty result.
    """
    if parser not in PARSERS:
        raise ParserError(f"unknown parser {parser!r}: the parsers are {', '.join(PARSERS)}")
    if parser != "regex" and patterns:
        raise ParserError(f"only the regex parser takes patterns, not {parser}")
    doc = Text(clean(text))  # a summary printed in colour reads as the plain one
    problems = []
    skipped: list[str] = []
    errors: list[str] = []
    if parser == "regex":
        if patterns is None:
            raise ParserError(
                "the regex parser needs patterns, e.g. "
                "'Throughput: (?P<tokens_per_s>[0-9.]+) tok/s'"
            )
        groups, errors = regex(doc, patterns, units or {})
    elif parser == "builtin":
        groups, skipped, errors = builtin(doc)
    elif parser == "nccl-tests":
        groups, problems = nccl_tests(doc, command)
    elif parser == "llama-bench":
        groups = llama_bench(doc)
    else:
        groups, problems = serving(doc, command)
        if parser == "sglang":
            groups += one_batch(doc)
        else:
            groups += vllm_throughput(doc) + vllm_latency(doc)
    result = assemble(doc, groups, problems, units)
    result.skipped = skipped
    result.errors = errors
    return result
