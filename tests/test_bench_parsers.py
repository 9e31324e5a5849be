"""Benchmark output parsers (journal.benchmarks.parsers): figures, their lines, and problems.

The samples under tests/data/bench follow the tools' own print statements (tests/data/bench/
SOURCES.md names each source); tests/data/h200/bench holds real H200 captures of the built-in
benchmarks, and tests/data/transcripts/bench-*.txt real-format sessions of several runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from journal.benchmarks.parsers import (
    PARSERS,
    Parsed,
    ParserError,
    ParseResult,
    Problem,
    compile_patterns,
    parse,
)

DATA = Path(__file__).parent / "data"
BENCH = DATA / "bench"


def sample(name: str) -> str:
    return (BENCH / name).read_text()


def by_name(result: ParseResult) -> dict[str, Parsed]:
    """The figures of a single-summary result by name (each name once)."""
    names = [f.name for f in result.figures]
    assert len(names) == len(set(names)), names
    return {f.name: f for f in result.figures}


def line_of(text: str, number: int) -> str:
    return text.split("\n")[number - 1]


# --- sglang ----------------------------------------------------------------------------------


def test_sglang_bench_serving_summary_gives_each_figure_with_its_line() -> None:
    text = sample("sglang-bench-serving.txt")
    result = parse("sglang", text, command="python3 -m sglang.bench_serving --num-prompts 200")
    figures = by_name(result)
    assert figures["output_token_throughput"] == Parsed(
        "output_token_throughput",
        1329.18,
        "tok/s",
        {},
        18,
        "Output token throughput (tok/s):         1329.18   ",
    )
    expected = {
        "successful_requests": (200, None, 11),
        "benchmark_duration_s": (38.52, "s", 12),
        "total_generated_tokens_retokenized": (51187, None, 15),
        "request_throughput": (5.19, "req/s", 16),
        "input_token_throughput": (5316.72, "tok/s", 17),
        "total_token_throughput": (6645.90, "tok/s", 19),
        "concurrency": (15.87, None, 20),
        "mean_e2e_latency_ms": (3056.41, "ms", 22),
        "median_e2e_latency_ms": (3041.27, "ms", 23),
        "mean_ttft_ms": (145.32, "ms", 25),
        "median_ttft_ms": (128.77, "ms", 26),
        "p99_ttft_ms": (412.06, "ms", 27),
        "mean_itl_ms": (11.42, "ms", 29),
        "median_itl_ms": (10.96, "ms", 30),
        "p95_itl_ms": (13.85, "ms", 31),
        "p99_itl_ms": (28.31, "ms", 32),
        "max_itl_ms": (96.40, "ms", 33),
    }
    for name, (value, unit, line) in expected.items():
        f = figures[name]
        assert (f.value, f.unit, f.line, f.labels) == (value, unit, line, {}), name
        assert f.text == line_of(text, line)
    # the settings it repeats (backend, request rate, max concurrency) are not figures
    assert not {"backend", "max_request_concurrency", "traffic_request_rate"} & set(figures)
    assert "accept_length" not in figures
    assert result.problems == []
    assert result.skipped == []


def test_sglang_eagle_accept_length_and_fewer_requests_done_than_asked() -> None:
    text = sample("sglang-bench-serving-eagle.txt")
    figures = by_name(parse("sglang", text))
    assert (figures["accept_length"].value, figures["accept_length"].unit) == (3.02, None)
    assert figures["accept_length"].text.startswith("Accept length:")
    assert figures["output_token_throughput"].value == 96.1

    # sglang prints no failed-requests line: 32 done of 40 asked is how a failure shows
    result = parse("sglang", text, command="python3 -m sglang.bench_serving --num-prompt 40")
    assert result.problems == [
        Problem(
            "only 32 of the 40 requests asked (--num-prompts 40) succeeded",
            11,
            "Successful requests:                     32        ",
        )
    ]
    assert parse("sglang", text, command="--num-prompts 32").problems == []


def test_sglang_bench_one_batch_leaves_the_warmup_out() -> None:
    text = sample("sglang-bench-one-batch.txt")
    result = parse("sglang", text)
    got = [(f.name, f.value, f.unit, f.labels, f.line) for f in result.figures]
    one = {"batch_size": "1", "summary": "1"}
    sixteen = {"batch_size": "16", "summary": "2"}
    assert got == [
        ("prefill_latency_s", 0.03512, "s", one, 12),
        ("prefill_throughput", 29157.18, "tok/s", one, 12),
        ("median_decode_latency_s", 0.0061, "s", one, 18),
        ("median_decode_throughput", 163.93, "tok/s", one, 18),
        ("total_latency_s", 0.127, "s", one, 19),
        ("overall_throughput", 8213.55, "tok/s", one, 19),
        ("prefill_latency_s", 0.41236, "s", sixteen, 20),
        ("prefill_throughput", 39732.27, "tok/s", sixteen, 20),
        ("median_decode_latency_s", 0.0073, "s", sixteen, 26),
        ("median_decode_throughput", 2191.78, "tok/s", sixteen, 26),
        ("total_latency_s", 0.522, "s", sixteen, 27),
        ("overall_throughput", 31879.84, "tok/s", sixteen, 27),
    ]
    assert result.figures[0].text == "Prefill. latency: 0.03512 s, throughput:  29157.18 token/s"
    assert result.problems == []


def test_sglang_offline_throughput_block() -> None:
    text = sample("sglang-bench-offline-throughput.txt")
    result = parse(
        "sglang", text, command="python3 -m sglang.bench_offline_throughput --num-prompts 1000"
    )
    figures = by_name(result)
    assert [f.name for f in result.figures] == [
        "successful_requests",
        "benchmark_duration_s",
        "total_input_tokens",
        "total_generated_tokens",
        "request_throughput",
        "input_token_throughput",
        "output_token_throughput",
        "total_token_throughput",
    ]
    f = figures["output_token_throughput"]
    assert (f.value, f.unit, f.line) == (3721.14, "tok/s", 14)
    assert f.text == "Output token throughput (tok/s):         3721.14   "
    assert result.problems == []


def test_summary_lines_without_their_header_are_still_read() -> None:
    """A log cut by grep keeps the throughput and request lines, not the header."""
    lines = sample("sglang-bench-serving.txt").splitlines()
    text = "\n".join(lines[10:19])  # Successful requests … Total token throughput
    figures = by_name(parse("sglang", text, command="--num-prompts 250"))
    assert set(figures) == {
        "successful_requests",
        "request_throughput",
        "input_token_throughput",
        "output_token_throughput",
        "total_token_throughput",
    }
    assert (figures["output_token_throughput"].value, figures["output_token_throughput"].line) == (
        1329.18,
        8,
    )
    result = parse("sglang", text, command="--num-prompts 250")
    assert [p.reason for p in result.problems] == [
        "only 200 of the 250 requests asked (--num-prompts 250) succeeded"
    ]


# --- vLLM ------------------------------------------------------------------------------------


def test_vllm_bench_serve_percentiles_and_speculative_decoding() -> None:
    text = sample("vllm-bench-serve.txt")
    result = parse("vllm", text, command="vllm bench serve --num-prompts 500")
    assert result.problems == []
    plain = [f for f in result.figures if f.name != "position_acceptance_rate"]
    figures = {f.name: f for f in plain}
    assert len(figures) == len(plain)
    expected = {
        "failed_requests": (0, None, 13),
        "request_throughput": (8.01, "req/s", 18),
        "output_token_throughput": (2050.30, "tok/s", 19),
        "peak_output_token_throughput": (2496.0, "tok/s", 20),
        "peak_concurrent_requests": (32.0, None, 21),
        "total_token_throughput": (10251.48, "tok/s", 22),
        "p50_ttft_ms": (198.42, "ms", 26),
        "p99_tpot_ms": (19.96, "ms", 32),
        "mean_itl_ms": (13.87, "ms", 34),
        "mean_e2e_latency_ms": (3880.61, "ms", 39),  # `Mean E2EL (ms)`
        "p99_e2e_latency_ms": (4705.92, "ms", 42),
        "acceptance_rate": (71.25, "%", 44),
        "acceptance_length": (3.14, None, 45),
        "accepted_tokens": (87133, None, 48),
    }
    for name, (value, unit, line) in expected.items():
        f = figures[name]
        assert (f.value, f.unit, f.line, f.text) == (value, unit, line, line_of(text, line)), name
    assert "maximum_request_concurrency" not in figures
    positions = [
        (f.value, f.labels, f.line) for f in result.figures if f.name == "position_acceptance_rate"
    ]
    assert positions == [
        (85.12, {"position": "0"}, 50),
        (70.40, {"position": "1"}, 51),
        (58.23, {"position": "2"}, 52),
    ]


def test_vllm_bench_serve_where_every_request_failed() -> None:
    text = sample("vllm-bench-serve-all-failed.txt")
    result = parse("vllm", text, command="vllm bench serve --num-prompts 100")
    assert result.problems == [
        Problem("every request of the benchmark failed", 10, line_of(text, 10)),
        Problem(
            "100 requests of the benchmark failed",
            15,
            "Failed requests:                         100       ",
        ),
    ]
    assert "UserWarning: All requests failed" in result.problems[0].text
    assert by_name(result)["output_token_throughput"].value == 0.0


def test_several_summaries_are_told_apart_and_failed_requests_found() -> None:
    text = (DATA / "transcripts" / "bench-vllm-serve.txt").read_text()
    result = parse("vllm", text)
    outputs = [
        (f.value, f.labels, f.line) for f in result.figures if f.name == "output_token_throughput"
    ]
    assert outputs == [
        (1240.55, {"summary": "1"}, 15),
        (1102.40, {"summary": "2"}, 38),
        (1201.10, {"summary": "3"}, 61),
    ]
    throughput = [
        (f.name, f.value, f.labels, f.line)
        for f in result.figures
        if f.name.endswith("_per_s") and f.labels["summary"] == "4"
    ]
    assert throughput == [
        ("requests_per_s", 20.41, {"summary": "4"}, 71),
        ("total_tokens_per_s", 26122.88, {"summary": "4"}, 71),
        ("output_tokens_per_s", 5224.58, {"summary": "4"}, 71),
    ]
    assert {f.labels["summary"] for f in result.figures} == {"1", "2", "3", "4", "5", "6"}
    assert result.problems == [
        Problem(
            "13 requests of the benchmark failed",
            32,
            "Failed requests:                         13        ",
        )
    ]


def test_vllm_bench_throughput() -> None:
    text = sample("vllm-bench-throughput.txt")
    result = parse("vllm", text)
    line = "Throughput: 25.24 requests/s, 32312.87 total tokens/s, 6462.57 output tokens/s"
    assert result.figures == [
        Parsed("requests_per_s", 25.24, "req/s", {}, 4, line),
        Parsed("total_tokens_per_s", 32312.87, "tok/s", {}, 4, line),
        Parsed("output_tokens_per_s", 6462.57, "tok/s", {}, 4, line),
    ]
    assert result.problems == []


def test_vllm_bench_latency() -> None:
    text = sample("vllm-bench-latency.txt")
    result = parse("vllm", text)
    got = [(f.name, f.value, f.unit, f.line) for f in result.figures]
    assert got == [
        ("avg_latency_s", 1.3094466666666666, "s", 5),
        ("std_latency_s", 0.004798731313818474, "s", 6),
        ("p10_latency_s", 1.3058299999999998, "s", 7),
        ("p25_latency_s", 1.306775, "s", 8),
        ("p50_latency_s", 1.3087, "s", 9),
        ("p75_latency_s", 1.310625, "s", 10),
        ("p90_latency_s", 1.3121999999999998, "s", 11),
        ("p99_latency_s", 1.3266129999999998, "s", 12),
    ]
    assert result.figures[0].text == "Avg latency: 1.3094466666666666 seconds"


# --- nccl-tests ------------------------------------------------------------------------------


def test_nccl_tests_table_gives_busbw_and_algbw_per_size_and_placement() -> None:
    text = sample("nccl-tests-all-reduce.txt")
    result = parse("nccl-tests", text)
    assert result.problems == []
    rows = [f for f in result.figures if f.name in ("busbw", "algbw")]
    assert len(rows) == 25 * 4  # 8 B … 128 MB, two placements, two figures
    assert {f.labels["size"] for f in rows} == {str(8 << i) for i in range(25)}
    line = (
        "   134217728      33554432     float     sum      -1   516.60  259.81  454.66       0"
        "   522.80  256.73  449.27       0"
    )
    assert [f for f in result.figures if f.line == 42] == [
        Parsed(
            "busbw",
            454.66,
            "GB/s",
            {"size": "134217728", "placement": "out-of-place", "op": "all_reduce_perf"},
            42,
            line,
        ),
        Parsed(
            "algbw",
            259.81,
            "GB/s",
            {"size": "134217728", "placement": "out-of-place", "op": "all_reduce_perf"},
            42,
            line,
        ),
        Parsed(
            "busbw",
            449.27,
            "GB/s",
            {"size": "134217728", "placement": "in-place", "op": "all_reduce_perf"},
            42,
            line,
        ),
        Parsed(
            "algbw",
            256.73,
            "GB/s",
            {"size": "134217728", "placement": "in-place", "op": "all_reduce_perf"},
            42,
            line,
        ),
    ]
    assert result.figures[-1] == Parsed(
        "avg_bus_bandwidth",
        97.8987,
        "GB/s",
        {"op": "all_reduce_perf"},
        44,
        "# Avg bus bandwidth    : 97.8987 ",
    )


def test_nccl_tests_wrong_values_are_problems() -> None:
    text = sample("nccl-tests-all-reduce-wrong.txt")
    result = parse("nccl-tests", text, command="./build/all_reduce_perf -b 1M -e 1G -f 2 -g 8")
    assert result.problems == [
        Problem(
            "nccl-tests found 2 wrong values at size 268435456 B (2 out-of-place): the "
            "collective returned wrong results",
            24,
            line_of(text, 24),
        ),
        Problem(
            "nccl-tests found 2 wrong values (`# Out of bounds values : 2 FAILED`)",
            27,
            "# Out of bounds values : 2 FAILED",
        ),
    ]
    # this older nccl-tests prints no test name: the command's names the op
    avg = result.figures[-1]
    assert (avg.name, avg.value, avg.labels, avg.line) == (
        "avg_bus_bandwidth",
        341.169,
        {"op": "all_reduce_perf"},
        28,
    )
    # with no command and no name in the output, there is no op label
    bare = parse("nccl-tests", text)
    assert all("op" not in f.labels for f in bare.figures)
    assert len(bare.figures) == 11 * 4 + 1


def test_nccl_tests_several_runs_in_a_session() -> None:
    text = (DATA / "transcripts" / "bench-nccl-tests.txt").read_text()
    result = parse("nccl-tests", text)
    averages = [
        (f.value, f.labels, f.line) for f in result.figures if f.name == "avg_bus_bandwidth"
    ]
    assert averages == [
        (177.364, {"op": "all_reduce_perf", "summary": "1"}, 48),
        (177.364, {"op": "all_reduce_perf", "summary": "2"}, 98),
        (175.651, {"op": "all_reduce_perf", "summary": "3"}, 148),
        (131.901, {"op": "all_reduce_perf", "summary": "4"}, 198),
    ]
    assert [(p.reason, p.line) for p in result.problems] == [
        (
            "nccl-tests found 6 wrong values at size 1073741824 B (3 out-of-place and 3 "
            "in-place): the collective returned wrong results",
            93,
        ),
        ("nccl-tests found 6 wrong values (`# Out of bounds values : 6 FAILED`)", 97),
    ]


def test_nccl_tests_under_mpirun_tagged_output() -> None:
    """`mpirun --tag-output` puts `[1,0]<stdout>:` before every line."""
    text = sample("nccl-tests-all-reduce.txt")
    tagged = "\n".join(f"[1,0]<stdout>:{line}" for line in text.split("\n"))
    plain, mpi = parse("nccl-tests", text), parse("nccl-tests", tagged)
    assert [(f.name, f.value, f.labels, f.line) for f in mpi.figures] == [
        (f.name, f.value, f.labels, f.line) for f in plain.figures
    ]
    assert mpi.figures[-1].text == "[1,0]<stdout>:# Avg bus bandwidth    : 97.8987 "


def test_nccl_tests_cut_short_is_a_problem() -> None:
    lines = sample("nccl-tests-all-reduce.txt").split("\n")
    text = "\n".join(lines[:30])  # killed after the 32 KB row
    result = parse("nccl-tests", text)
    assert len([f for f in result.figures if f.name == "busbw"]) == 2 * 13
    assert "avg_bus_bandwidth" not in {f.name for f in result.figures}
    assert result.problems == [
        Problem(
            "nccl-tests did not finish: no `# Out of bounds values` line follows its table",
            16,
            line_of(text, 16),
        )
    ]


def test_nccl_tests_footer_alone_still_gives_the_average() -> None:
    """`… | tail -3` keeps the footer lines only."""
    text = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 232.167 \n#\n"
    result = parse("nccl-tests", text, command="./build/all_gather_perf -b 8 -e 1G -f 2 -g 8")
    assert result.figures == [
        Parsed(
            "avg_bus_bandwidth",
            232.167,
            "GB/s",
            {"op": "all_gather_perf"},
            2,
            "# Avg bus bandwidth    : 232.167 ",
        )
    ]
    assert result.problems == []


#: nccl-tests before 2.0 (NVIDIA/nccl-tests src/common.cu until "Resync all tests with test code
#: from NCCL 2.4", 2019) print header, table and footer without the `#`; the lines of
#: NVIDIA/nccl-tests#37 as the poster pasted them.
OLD_LAYOUT = """\
                                             out-of-place                       in-place
       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error
        (B)    (elements)             (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
  4294967296     134217728   float    29122  129.05  129.05  1e+00    29169  128.84  128.84  1e+00
 Out of bounds values : 2 FAILED
 Avg bus bandwidth    : 128.942
"""


def test_nccl_tests_older_layout_without_the_hash_reads_as_the_hash_layout() -> None:
    command = "all_gather_perf -g 8 -b 4294967296 -e 4294967296 -n 100"
    old = parse("nccl-tests", OLD_LAYOUT, command=command)
    assert [(f.name, f.value, f.labels, f.line) for f in old.figures] == [
        (
            "busbw",
            129.05,
            {"size": "4294967296", "placement": "out-of-place", "op": "all_gather_perf"},
            4,
        ),
        (
            "algbw",
            129.05,
            {"size": "4294967296", "placement": "out-of-place", "op": "all_gather_perf"},
            4,
        ),
        (
            "busbw",
            128.84,
            {"size": "4294967296", "placement": "in-place", "op": "all_gather_perf"},
            4,
        ),
        (
            "algbw",
            128.84,
            {"size": "4294967296", "placement": "in-place", "op": "all_gather_perf"},
            4,
        ),
        ("avg_bus_bandwidth", 128.942, {"op": "all_gather_perf"}, 6),
    ]
    assert [(p.reason, p.line) for p in old.problems] == [
        ("nccl-tests found 2 wrong values (`Out of bounds values : 2 FAILED`)", 5)
    ]
    # the same output with the `#` of the newer releases gives the same figures and problems
    hashed = "\n".join(
        f"#{line}" if not line.lstrip()[:1].isdigit() else line
        for line in OLD_LAYOUT.split("\n")
        if line
    )
    new = parse("nccl-tests", hashed + "\n", command=command)
    assert [(f.name, f.value, f.labels) for f in new.figures] == [
        (f.name, f.value, f.labels) for f in old.figures
    ]
    assert len(new.problems) == 1 and new.problems[0].line == 5


def test_nccl_tests_older_layout_near_misses() -> None:
    """A sentence naming the columns is no table header, and a footer word inside a line of
    prose is no footer."""
    text = (
        "the size and busbw columns are explained in doc/PERFORMANCE.md\n"
        "see the Out of bounds values : 2 FAILED line of the issue\n"
    )
    result = parse("nccl-tests", text)
    assert result.figures == [] and result.problems == []


# --- llama-bench -----------------------------------------------------------------------------


def test_llama_bench_markdown_table() -> None:
    text = sample("llama-bench.txt")
    result = parse("llama-bench", text)
    model = "qwen2 7B Q4_K - Medium"
    assert [(f.name, f.value, f.unit, f.labels, f.line) for f in result.figures] == [
        ("tokens_per_s", 11234.56, "tok/s", {"model": model, "fa": "0", "test": "pp512"}, 5),
        ("tokens_per_s", 178.43, "tok/s", {"model": model, "fa": "0", "test": "tg128"}, 6),
        ("tokens_per_s", 12876.31, "tok/s", {"model": model, "fa": "1", "test": "pp512"}, 7),
        ("tokens_per_s", 186.02, "tok/s", {"model": model, "fa": "1", "test": "tg128"}, 8),
    ]
    assert result.figures[0].text == line_of(text, 5)
    # the ± standard deviation is no figure (it would read as a throughput)
    assert 51.02 not in {f.value for f in result.figures}
    assert result.problems == []


# --- builtin ---------------------------------------------------------------------------------


def test_builtin_on_two_h200s() -> None:
    text = (DATA / "h200" / "bench" / "h200x2.txt").read_text()
    result = parse("builtin", text)
    assert [(f.name, f.value, f.unit, f.labels, f.line) for f in result.figures] == [
        ("matmul_bf16", 762.635, "TFLOP/s", {"size": "8192", "gpu": "NVIDIA H200"}, 2),
        ("memcpy_d2d", 4238.042, "GB/s", {"mib": "4096", "gpu": "NVIDIA H200"}, 4),
        ("allreduce_busbw", 319.157, "GB/s", {"mib": "1024", "gpus": "2", "nccl": "2.28.9"}, 6),
    ]
    assert result.figures[2].text == line_of(text, 6)
    assert result.problems == [] and result.skipped == []


def test_builtin_skip_on_one_h200_is_no_figure_and_no_problem() -> None:
    text = (DATA / "h200" / "bench" / "h200x1.txt").read_text()
    result = parse("builtin", text)
    assert [(f.name, f.value) for f in result.figures] == [
        ("matmul_bf16", 776.36),
        ("memcpy_d2d", 4250.793),
    ]
    assert result.skipped == ["allreduce_busbw: needs 2 or more GPUs, found 1"]
    assert result.problems == []


def test_builtin_on_an_h200_whose_gpu_torch_cannot_see_is_an_error_not_a_skip() -> None:
    # h200x1-hidden.txt: gpu.py on a one-GPU H200 with CUDA_VISIBLE_DEVICES= (torch sees no
    # GPU while /dev/nvidia0 is there: what a CPU build of torch on a GPU host looks like),
    # then allreduce as it is: the first is a broken env (the run fails), the second a host
    # that cannot run it (the run is skipped).
    text = (DATA / "h200" / "bench" / "h200x1-hidden.txt").read_text()
    result = parse("builtin", text)
    assert result.figures == []
    assert result.errors == [
        "matmul_bf16: torch 2.11.0+cu130 sees no CUDA device, but the host has 1 NVIDIA GPU(s) "
        "(/dev/nvidia0): a CPU build of torch, a driver it cannot use, or CUDA_VISIBLE_DEVICES "
        "hiding them"
    ]
    assert result.skipped == ["allreduce_busbw: needs 2 or more GPUs, found 1"]


# --- regex -----------------------------------------------------------------------------------


def test_regex_named_groups_become_figures_with_units() -> None:
    text = "warming up\nstep 1: 812.5 img/s, loss nan\nstep 2: 820.25 img/s, loss 0.75\ndone\n"
    result = parse(
        "regex",
        text,
        patterns=[r"step \d+: (?P<images_per_s>[0-9.]+) img/s", r"loss (?P<loss>\S+)$"],
        units={"images_per_s": "img/s"},
    )
    assert result.figures == [
        Parsed("images_per_s", 812.5, "img/s", {}, 2, "step 1: 812.5 img/s, loss nan"),
        Parsed("images_per_s", 820.25, "img/s", {}, 3, "step 2: 820.25 img/s, loss 0.75"),
        Parsed("loss", 0.75, None, {}, 3, "step 2: 820.25 img/s, loss 0.75"),
    ]  # `loss nan` is not a number: skipped, no error


def test_units_override_for_any_parser() -> None:
    result = parse("llama-bench", sample("llama-bench.txt"), units={"tokens_per_s": "t/s"})
    assert {f.unit for f in result.figures} == {"t/s"}


@pytest.mark.parametrize(
    ("patterns", "message"),
    [
        (
            ["Throughput: (?P<tps>[0-9.]+"],
            "is not a valid regex: missing ), unterminated subpattern",
        ),
        (["Throughput: ([0-9.]+) tok/s"], "has no named group"),
        ([], "needs at least one pattern"),
    ],
)
def test_bad_patterns_say_what_is_wrong(patterns: list[str], message: str) -> None:
    with pytest.raises(ParserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        compile_patterns(patterns)
    with pytest.raises(ParserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse("regex", "Throughput: 1.0 tok/s", patterns=patterns)


def test_bad_pattern_message_names_the_pattern() -> None:
    with pytest.raises(ParserError) as caught:
        compile_patterns(["ok: (?P<a>\\d+)", "tok/s: ([0-9.]+)"])
    assert "'tok/s: ([0-9.]+)'" in str(caught.value)
    assert "(?P<" in str(caught.value)  # says how to name a group


def test_regex_parser_needs_patterns_and_others_refuse_them() -> None:
    with pytest.raises(ParserError, match="regex parser needs patterns"):
        parse("regex", "x")
    with pytest.raises(ParserError, match="only the regex parser takes patterns"):
        parse("vllm", "x", patterns=["(?P<a>1)"])


# --- the interface ---------------------------------------------------------------------------


def test_unknown_parser_names_the_known_ones() -> None:
    with pytest.raises(ParserError) as caught:
        parse("sglang-serving", "Output token throughput (tok/s):  54.10")
    message = str(caught.value)
    assert "'sglang-serving'" in message
    for name in PARSERS:
        assert name in message


def test_output_without_figures_gives_an_empty_result() -> None:
    text = sample("llama-bench.txt")
    for parser in ("sglang", "vllm", "nccl-tests", "builtin"):
        assert parse(parser, text) == ParseResult([], [], [])
    assert parse("llama-bench", "") == ParseResult([], [], [])


def test_line_numbers_hold_deep_in_a_big_log() -> None:
    """The figures of a summary after 200,000 lines of server log keep their line numbers."""
    noise = "".join(f"INFO 03-02 14:21:07 [scheduler.py:312] step {i}\n" for i in range(200_000))
    text = noise + sample("vllm-bench-serve.txt")
    figures = {f.name: f for f in parse("vllm", text).figures}
    assert figures["output_token_throughput"].line == 200_000 + 19
    assert figures["mean_e2e_latency_ms"].line == 200_000 + 39


def test_nccl_tests_min_bandwidth_failed_and_validation_off() -> None:
    """`NCCL_TESTS_MIN_BW=400` marks the average FAILED; `-c 0` prints `N/A` for #wrong."""
    lines = sample("nccl-tests-all-reduce.txt").split("\n")
    row = (
        "   134217728      33554432     float     sum      -1   516.60  259.81  454.66    N/A"
        "   522.80  256.73  449.27    N/A"
    )
    footer = "# Avg bus bandwidth    : 97.8987 FAILED"
    text = "\n".join([*lines[:17], row, "# Out of bounds values : 0 OK", footer, "#", ""])
    result = parse("nccl-tests", text)
    assert [(f.name, f.value, f.labels["placement"]) for f in result.figures[:4]] == [
        ("busbw", 454.66, "out-of-place"),
        ("algbw", 259.81, "out-of-place"),
        ("busbw", 449.27, "in-place"),
        ("algbw", 256.73, "in-place"),
    ]
    assert result.problems == [
        Problem(
            "the average bus bandwidth is below the NCCL_TESTS_MIN_BW the run was given",
            20,
            footer,
        )
    ]
