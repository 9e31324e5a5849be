"""Benchmarks: the runbook's ``[benchmarks.NAME]`` tables, run by `journal run bench NAME`.

A benchmark is a shell ``run`` whose output a ``parser`` reads (``sglang``, ``vllm``,
``nccl-tests``, ``llama-bench``, or ``regex`` with named groups in ``pattern``), or a
``builtin`` GPU measurement (``matmul``, ``memcpy``, ``allreduce``) run by the host's target
python with torch. Every figure becomes a ``MetricRecorded`` event. The tables are read into
the :class:`BenchmarkSpec` defined here by :mod:`journal.runbook.benchmarks`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from importlib import resources

#: The built-in GPU benchmarks (each a function of scripts/gpu.py).
BUILTIN = ("matmul", "memcpy", "allreduce")
DEFAULT_TIMEOUT_S = 3600.0
LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class BenchmarkSpec:
    """How to run one benchmark and read its figures."""

    name: str
    parser: str
    run: str | None = None
    builtin: str | None = None
    patterns: list[str] = field(default_factory=list)
    units: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    hosts: list[str] = field(default_factory=list)
    description: str = ""

    def command(self, python: str) -> str:
        """The shell command run on a host whose target python is ``python``."""
        if self.builtin is None:
            assert self.run is not None
            return self.run
        source = resources.files("journal.benchmarks.scripts").joinpath("gpu.py").read_text()
        # Written to a file on the host, not run with `python -c`: allreduce starts one process
        # per GPU with multiprocessing's spawn, which imports the worker from the script's file.
        # The python path stays unquoted so that ~ expands on the host; -u so that each figure
        # arrives as it is measured, with no pty to line-buffer it.
        return (
            'f=$(mktemp "${TMPDIR:-/tmp}/journal-bench-XXXXXX.py") && '
            f'printf "%s" {shlex.quote(source)} > "$f" && '
            f'{python} -u "$f" {self.builtin}; s=$?; rm -f "$f"; exit $s'
        )


def guess_parser(command: str, text: str) -> str | None:
    """Which parser reads a pasted command's output (an imported transcript names none), or
    None when the output holds no benchmark summary."""
    if "vllm" in command and ("Benchmark Result" in text or "Throughput:" in text):
        return "vllm"
    if "Avg latency:" in text and "vllm" in command:
        return "vllm"
    if "Benchmark Result" in text or "bench_one_batch" in command:
        return "sglang"
    if "Avg bus bandwidth" in text or "Out of bounds values" in text:
        return "nccl-tests"
    if "llama-bench" in command or ("| model" in text and "t/s" in text):
        return "llama-bench"
    if "Throughput:" in text and "requests/s" in text:
        return "vllm"
    if '{"metric":' in text:
        return "builtin"
    return None


def parse_label(text: str, where: str = "--label") -> tuple[str, str]:
    """``k=v`` as a (key, value) pair; ValueError with the reason for anything else."""
    key, eq, value = text.partition("=")
    key = key.strip()
    if not eq or not key:
        raise ValueError(f"{where} {text!r} is not key=value (e.g. phase=before)")
    if not LABEL.match(key):
        raise ValueError(
            f"{where} {text!r}: the key {key!r} is not a usable label name "
            "(letters, digits, '_', '.', '-', starting with a letter)"
        )
    return key, value.strip()
