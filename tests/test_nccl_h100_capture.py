"""The NCCL readings of a real one-GPU H100 capture (tests/data/h100/nccl/, made by its
capture.sh through the device tool; no kind of two GPUs was lent): NCCL_DEBUG=INFO's banner as
the image's torch printed it, under NCCL's own choice and two tunings, the torch-env probe of the
same python, and the built-in allreduce on one GPU.

Read by the same code as a recorded run's output: the version each run actually loaded, equal to
the probe's; a tuned run after an NCCL change is a warning that names the change; the built-in
allreduce on one GPU is skipped, never failed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from journal.benchmarks.parsers import parse
from journal.pitfalls.nccl_changed import probe_nccl
from tests.test_pitfalls_nccl_bench import VERIFY, transcript_findings

CAPTURE = Path(__file__).parent / "data" / "h100" / "nccl"
RUNS = {
    "default": "",
    "ring-simple": "NCCL_ALGO=Ring NCCL_PROTO=Simple ",
    "tree-ll": "NCCL_ALGO=Tree NCCL_PROTO=LL ",
}


def _printed(name: str) -> str:
    text = (CAPTURE / f"allreduce-{name}.txt").read_text()
    return text[: text.rindex("rc=")]  # the capture's own exit-status line


def test_the_capture_is_of_one_gpu_and_its_probe_reads_torchs_nccl() -> None:
    probe = json.loads((CAPTURE / "torch-env.json").read_text())
    assert probe["torch"]["version"] == "2.11.0+cu130" and probe["torch"]["device_count"] == 1
    assert probe_nccl(probe) == (2, 28, 9)
    for name in RUNS:
        text = _printed(name)
        banner = re.findall(r"^\S+ \[0\] NCCL INFO NCCL version (\S+)$", text, re.M)
        assert banner == ["2.28.9+cuda13.0"], name  # the NCCL this run loaded
        assert "NCCL_NVLS_ENABLE set by environment to 0." in text


@pytest.mark.parametrize("name", list(RUNS))
def test_a_tuned_run_after_an_nccl_upgrade_names_the_change(name: str) -> None:
    """NCCL 2.22.3 before (a check printing torch.cuda.nccl.version()); the cu130 torch
    installed; then the real run's banner: nccl-changed, a warning (NCCL_NVLS_ENABLE=0, the
    machine's, is tuning too) whose advice names every variable set to re-evaluate, its
    evidence the real banner line."""
    tuning = RUNS[name]
    exported = f"$ export {tuning.strip()}\n" if tuning else ""
    session = (
        exported + VERIFY + "torch: 2.10.0+cu128\nNCCL: (2, 22, 3)\n"
        "$ pip install -U torch --index-url https://download.pytorch.org/whl/cu130\n"
        "Successfully installed nvidia-nccl-cu13-2.28.9 torch-2.11.0+cu130\n"
        f"$ NCCL_DEBUG=INFO NCCL_NVLS_ENABLE=0 {tuning}python3 one_rank.py\n" + _printed(name)
    )
    (found,) = transcript_findings(session, "nccl-changed")
    assert found.severity == "warning"
    assert "2.22.3 to 2.28.9" in found.title
    named = re.findall(r"NCCL_[A-Z_]+", found.advice.split(" under ")[0])
    assert named == sorted(["NCCL_NVLS_ENABLE", *re.findall(r"NCCL_[A-Z]+", tuning)])
    lines = session.splitlines()
    cited = [lines[e.line - 1] for e in found.evidence if e.line]
    assert any("NCCL INFO NCCL version 2.28.9+cuda13.0" in line for line in cited), cited


def test_the_builtin_allreduce_on_one_gpu_is_skipped_with_its_reason() -> None:
    text = (CAPTURE / "builtin-allreduce.txt").read_text()
    result = parse("builtin", text[: text.rindex("rc=")])
    assert result.figures == [] and not result.errors
    assert result.skipped == ["allreduce_busbw: needs 2 or more GPUs, found 1"]
