"""The built-in GPU benchmarks' output, as they printed it on real H200 hosts
(tests/data/h200/bench/, captured with its capture.sh through the device tool)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

BENCH = Path(__file__).parent / "data" / "h200" / "bench"


def figures(name: str) -> dict[str, dict]:
    found = {}
    for line in (BENCH / name).read_text().splitlines():
        if line.startswith("{"):
            record = json.loads(line)
            found[record["metric"]] = record
    return found


@pytest.mark.parametrize("name", ["h200x1.txt", "h200x2.txt"])
def test_matmul_and_memcpy_printed_plausible_h200_figures(name: str) -> None:
    found = figures(name)
    matmul, memcpy = found["matmul_bf16"], found["memcpy_d2d"]
    assert matmul["unit"] == "TFLOP/s" and 600 < matmul["value"] < 990  # datasheet ceiling
    assert memcpy["unit"] == "GB/s" and 3000 < memcpy["value"] < 9600  # 2 x 4.8 TB/s
    assert matmul["labels"]["gpu"] == "NVIDIA H200"


def test_allreduce_needs_two_gpus_and_says_so_with_one() -> None:
    one = figures("h200x1.txt")["allreduce_busbw"]
    assert one["value"] is None and "needs 2 or more GPUs, found 1" in one["skipped"]
    two = figures("h200x2.txt")["allreduce_busbw"]
    assert two["labels"] == {"mib": "1024", "gpus": "2", "nccl": "2.28.9"}
    assert 50 < two["value"] < 900  # NVLink-class bus bandwidth, GB/s
