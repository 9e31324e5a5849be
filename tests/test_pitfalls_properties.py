"""Property tests: the transcript parser, `from_transcript` and every detector (`judge`) take
any input — arbitrary bytes, text built from the fragments detectors look for, single lines of
5 MB, tens of thousands of prompts, inputs made to make regexes backtrack — without crashing,
with findings that are well formed, and in bounded time.

Examples are derandomised and no example database is written, so a run is reproducible and
leaves nothing behind; time bounds are hypothesis deadlines (per example) or, for the few big
inputs, a measured budget far above what a linear pass needs.
"""

from __future__ import annotations

import multiprocessing
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal.pitfalls import SEVERITIES, catalogue, detectors, judge
from journal.pitfalls.base import Finding
from journal.pitfalls.subjects import from_transcript
from journal.reading.subject import Subject
from journal.terminal import clean
from journal.transcript import parse, prompt

QUICK = settings(
    max_examples=80,
    deadline=timedelta(seconds=2),
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: What detectors and the parser look for, to be shuffled into odd transcripts.
FRAGMENTS = [
    "$ ",
    "# ",
    "user@gpu-box:~$ ",
    "(venv) ubuntu@h200:~/work$ ",
    "[root@node1 ~]# ",
    "ubuntu@MacBook-Pro ~ % ",
    "ubuntu@gpu-box ~/src [1]> ",
    "(venv) PS C:\\Users\\me> ",
    "(base) C:\\Users\\me>",
    "➜  ~ ",
    "╰─❯ ",
    "gpu-box% ",
    ">>> ",
    "uv pip install torch torchvision --index-url https://download.pytorch.org/whl/nightly/cu130",
    "pip install -U torch==2.12.0+cu130",
    "python3 -m sglang.bench_serving --num-prompts 32 --output-file x.jsonl",
    "vllm bench serve --num-prompts 200",
    "./build/all_reduce_perf -b 8 -e 8G -f 2 -g 8",
    "export NCCL_ALGO=Ring NCCL_PROTO=Simple",
    "python3 -c \"import torch; print('NCCL:', torch.cuda.nccl.version())\"",
    "Checked 3 packages in 29ms",
    "Audited 3 packages in 1ms",
    " + torch==2.12.0.dev20260226+cu130",
    " - torch==2.10.0+cu128",
    " + nvidia-nccl-cu13==2.28.9",
    "Successfully installed nvidia-nccl-cu13-2.28.9 torch-2.11.0+cu130",
    "Requirement already satisfied: torch in ./venv",
    "torch: 2.10.0+cu128",
    "CUDA: 12.8",
    "NCCL: (2, 22, 3)",
    "NCCL: (2, 28, 9)",
    "(2, 28, 9)",
    "gpu-box:1:1 [0] NCCL INFO NCCL version 2.28.9+cuda13.0",
    "NCCL_VERSION=2.28.3-1",
    "/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3",
    "ii  libnccl2  2.28.3-1+cuda13.0  amd64",
    "============ Serving Benchmark Result ============",
    "Successful requests:                     28        ",
    "Failed requests:                         3         ",
    "Output token throughput (tok/s):         54.10     ",
    "Output token throughput (tok/s):         90.00     ",
    "Request throughput (req/s):              0.18      ",
    "Throughput: 20.41 requests/s, 26122.88 total tokens/s, 5224.58 output tokens/s",
    "# Out of bounds values : 3 FAILED",
    "# Out of bounds values : 0 OK",
    "# Avg bus bandwidth    : 232.167 ",
    "^C",
    "^CTraceback (most recent call last):",
    "KeyboardInterrupt",
    "Killed",
    "bash: line 1: 4242 Killed                  python3 build.py",
    "Connection to 10.0.0.5 closed by remote host.",
    "client_loop: send disconnect: Broken pipe",
    "ERROR: pip's dependency resolver does not currently take into account all the packages",
    "undefined symbol: _ZN3c104cuda9SetDeviceEi",
    "no kernel image is available for execution on the device",
    "NVIDIA H200 with CUDA capability sm_90 is not compatible with the current PyTorch "
    "installation.",
    "The NVIDIA driver on your system is too old (found version 12040).",
    "A module that was compiled using NumPy 1.x cannot be run in NumPy 2.0.0 as it may crash.",
    "flashinfer-cubin version (0.5.2) does not match flashinfer version (0.5.3)",
    "Torch not compiled with CUDA enabled",
    "| tail -n 20",
    "\t",
    "\r",
    "\x00",
    "\x1b[31m",
    "é€𝄞",
]


def check(subject: Subject, findings: list[Finding], lines: int) -> None:
    """Every finding is well formed: a known id and severity, text, and evidence lines that
    exist in the transcript."""
    ids = set(catalogue())
    runs = {run.key for run in subject.runs}
    for found in findings:
        assert found.id in ids
        assert found.severity in SEVERITIES
        assert found.title and found.advice
        assert found.run is None or found.run in runs
        for evidence in found.evidence:
            assert isinstance(evidence.text, str)
            if evidence.line is not None:
                assert 1 <= evidence.line <= lines, (found.id, evidence)
        found.to_dict(with_event=False)


def judged(text: str) -> list[Finding]:
    subject = from_transcript(text, "t")
    commands = parse(clean(text))  # prompts are read as the terminal shows them
    assert len(subject.runs) == len(commands)
    assert [c.line for c in commands] == sorted(c.line for c in commands)
    findings = judge(subject)
    check(subject, findings, text.count("\n") + 1)
    return findings


@QUICK
@given(st.binary(max_size=3000))
def test_arbitrary_bytes(data: bytes) -> None:
    judged(data.decode("utf-8", "replace"))


@QUICK
@given(st.text(max_size=3000))
def test_arbitrary_text(text: str) -> None:
    judged(text)


@QUICK
@given(
    st.lists(
        st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=40)),
        max_size=120,
    ),
    st.sampled_from(["\n", "\r\n", "", " "]),
)
def test_transcripts_made_of_what_detectors_look_for(pieces: list[str], joiner: str) -> None:
    judged(joiner.join(pieces))


@QUICK
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=60))
def test_every_line_a_fragment_after_prompts(pieces: list[str]) -> None:
    lines = []
    for index, piece in enumerate(pieces):
        lines.append(f"$ {piece}" if index % 3 == 0 else piece)
    judged("\n".join(lines) + "\n")


FIVE_MB = 5_000_000
#: Seconds after which a detector over 20,000 commands is taken for hung: a linear pass takes
#: well under one, a quadratic one minutes. A guard against hangs, not a timing (bench/
#: pitfalls.py measures the speed), so it is far from what load could reach.
BUDGET_S = 30.0

#: Single lines of 5 MB, and inputs shaped to make the parser's or detectors' regexes backtrack.
HUGE = {
    "plain": "$ cat log\n" + "x" * FIVE_MB,
    "a prompt of 5 MB": "$ " + "a" * FIVE_MB,
    "user@host prompt of 5 MB": "user@gpu-box:~$ " + "b" * FIVE_MB,
    "spaces": "$ cat log\n" + " " * FIVE_MB + "x",
    "tabs and no newline": "$ cat log\n" + "\t" * FIVE_MB,
    "open parentheses": "$ cat log\n" + "(" * FIVE_MB,
    "user@ repeated": "user@" * (FIVE_MB // 5),
    "(venv) repeated": "(venv) " * (FIVE_MB // 7) + "$ ls",
    "# repeated": "# " * (FIVE_MB // 2),
    "NCCL: repeated": "$ python3 -c 'import torch; torch.cuda.nccl.version()'\n"
    + "NCCL: (2, 28, " * (FIVE_MB // 14),
    "NCCL version repeated": "$ torchrun x.py\n" + "NCCL version 2." * (FIVE_MB // 15),
    "digits and dots": "$ cat\n" + "1." * (FIVE_MB // 2),
    "throughput labels": "$ python3 -m sglang.bench_serving\n"
    + "Output token throughput (tok/s): " * (FIVE_MB // 33),
    "Successful requests": "$ vllm bench serve\n" + "Successful requests: " * (FIVE_MB // 21),
    "Out of bounds": "$ ./all_reduce_perf\n" + "# Out of bounds values : " * (FIVE_MB // 25),
    "equals": "$ x\n" + "=" * FIVE_MB,
    "NCCL_ exports": "$ export " + "NCCL_ALGO=Ring " * (FIVE_MB // 15),
    "a 5 MB command of options": "$ uv pip install " + "--index-url x " * (FIVE_MB // 14),
    "Connection to": "$ ssh h\n" + "Connection to " * (FIVE_MB // 14),
    "^C everywhere": "$ pip install x\n" + "^C" * (FIVE_MB // 2),
    "short lines": "$ cat\n" + "|\n" * (FIVE_MB // 2),
    "carriage returns": "$ cat\n" + "\r" * FIVE_MB,
    "plus lines": "$ uv pip install torch\n" + " + torch==2.12.0+cu130\n" * (FIVE_MB // 23),
}


@pytest.mark.parametrize("name", sorted(HUGE))
def test_huge_lines_are_judged_in_bounded_time(name: str) -> None:
    judged(HUGE[name])  # completes (bench/pitfalls.py times it)


@QUICK
@given(
    st.sampled_from(
        [
            "(",
            "((venv) ",
            "user@",
            "u@h:",
            "[u@h ",
            "u@h:~/" + "a" * 50,
            "u@h ~ ",
            "PS C:\\",
            "C:\\a\\",
            "(e) PS ",
            "➜  ",
            "~/",
            ">",
            "%",
            "$",
            "#",
            " ",
            "@",
            ":",
        ]
    ),
    st.integers(min_value=1, max_value=4100),
    st.sampled_from(["", "$ ls", "# ls", "]$ ls", " $", "\n", "% ls", "> ls", ">ls", " [1]> ls"]),
)
def test_prompt_lines_that_almost_match(piece: str, count: int, tail: str) -> None:
    line = (piece * count)[:4100] + tail
    prompt(line)
    judged(line)


def _detect_in_child(module_id: str, subject: Subject) -> None:
    list(catalogue()[module_id].detect(subject))


def test_many_prompts_are_judged_in_linear_time() -> None:
    """Twenty thousand commands (a long session, or an import of one), each detector run in a
    forked child with a budget, so that one that rescans the whole transcript for every
    command (quadratic) fails here in seconds instead of hanging the suite."""
    body = (
        "$ uv pip install torch --index-url https://download.pytorch.org/whl/cu130\n"
        "Checked 1 package in 1ms\n"
        "$ python3 -m sglang.bench_serving --num-prompts 32\n"
        "Output token throughput (tok/s):         90.00\n"
        "$ pip install x\n^C\n"
        "$ echo x\nx\n"
    )
    subject = from_transcript(body * 5_000, "many")
    assert len(subject.runs) == 20_000
    fork = multiprocessing.get_context("fork")
    slow = []
    for module in detectors():
        child = fork.Process(target=_detect_in_child, args=(module.ID, subject))
        child.start()
        child.join(BUDGET_S)
        if child.is_alive():
            child.kill()
            child.join()
            slow.append(module.ID)
        else:
            assert child.exitcode == 0, f"{module.ID} failed on 20,000 commands"
    assert not slow, f"detectors slower than {BUDGET_S} s on 20,000 commands: {slow}"
