"""The runtime pitfalls: masked-exit, cpu-torch, arch-unsupported, no-kernel-image,
driver-too-old, toolkit-mismatch, abi-mismatch, numpy-abi and version-guard.

Real output wherever it can be made here: pipelines run through bash (in transcripts and in a
real journal with `journal run step`), a real CPU torch (tests/torch_venv.py) next to the real
`nvidia-smi` of an H200 (tests/data/h200/), a real `undefined symbol` from the dynamic loader,
real uv installs of stand-in numpy and flashinfer wheels snapshotted by the real probe, and two
transcripts captured on a lent H200 (tests/data/transcripts/runtime-h200-*.txt: a kernel built
for sm_80 only, and torch's refusal of a CUDA 12.8 toolkit). The probe-based verdicts start
from the H200's real `torch-env` capture, changed in the one field each case is about. The
GPU-only messages that cannot be produced here are transcripts built around the exact wording
of public issues; each transcript file and each test names its issue.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from journal.demo.wheels import StandIn, build_index
from journal.pitfalls import judge
from journal.pitfalls import runtime as rt
from journal.pitfalls.arch_unsupported import covers
from journal.pitfalls.base import Finding
from journal.pitfalls.masked_exit import pipelines, program
from journal.pitfalls.subjects import from_transcript
from journal.reading.subject import Run, Subject
from tests.helpers import journal, no_traceback, text, write_runbook
from tests.torch_venv import torch_venv

RUNTIME = {
    "masked-exit",
    "cpu-torch",
    "arch-unsupported",
    "no-kernel-image",
    "driver-too-old",
    "toolkit-mismatch",
    "abi-mismatch",
    "numpy-abi",
    "version-guard",
}
DATA = Path(__file__).parent / "data"
H200 = DATA / "h200"
TRANSCRIPTS = DATA / "transcripts"
SMI = (H200 / "nvidia-smi.txt").read_text()

#: The arch list of the cu126 wheels, as torch printed it in pytorch/pytorch#167244.
CU126_ARCHS = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
BLACKWELL = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def h200_env(name: str = "torch-env.json") -> dict[str, Any]:
    """The torch-env probe as it ran on a lent H200 (torch 2.11.0+cu130, driver 580)."""
    return json.loads((H200 / name).read_text())


def runtime(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.id in RUNTIME]


def probed(env: dict[str, Any], host: str = "h200") -> list[Finding]:
    """The runtime findings of a journal holding one probe run with ``env`` as torch-env."""
    run = Run(
        key="run-1",
        step="probe",
        host=host,
        command="journal run probe torch-env",
        exit_code=0,
        status="succeeded",
        event=41,
        probes={"torch-env": env},
        probe_events={"torch-env": 42},
    )
    return runtime(judge(Subject("journal", [run], "runtime")))


def linted(transcript: str) -> list[Finding]:
    return runtime(judge(from_transcript(transcript, "t.txt")))


def one(findings: list[Finding], id: str) -> Finding:
    matching = [f for f in findings if f.id == id]
    assert len(matching) == 1, [(f.id, f.title) for f in findings]
    return matching[0]


def session(*commands: tuple[str, str]) -> str:
    """A transcript: each (command, output) as `$ command` and its output."""
    return "".join(f"$ {cmd}\n{out.rstrip()}\n" for cmd, out in commands)


def bash(
    command: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Run ``command`` with bash, as a terminal would: its exit status and what it printed."""
    done = subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    return done.returncode, done.stdout + done.stderr


def with_devices(env: dict[str, Any], name: str, capability: str) -> dict[str, Any]:
    """``env`` with its one GPU renamed and given another compute capability."""
    env = copy.deepcopy(env)
    for device in env["torch"]["devices"] + env["nvml"]["devices"]:
        device.update(name=name, capability=capability)
    env["gpu_name"], env["capability"] = name, capability
    return env


# --- the real H200 probe: a healthy stack, nothing to say -------------------------------------


@pytest.mark.parametrize(
    "capture", ["torch-env.json", "torch-env-import.json", "torch-env-no-pynvml.json"]
)
def test_the_real_h200_probe_gives_no_runtime_finding(capture: str) -> None:
    assert probed(h200_env(capture)) == []


def test_the_real_h200_session_gives_no_runtime_finding() -> None:
    """nvidia-smi, collect_env and the arch list as the H200 printed them (tests/data/h200)."""
    transcript = session(
        ("nvidia-smi", SMI),
        ("python3 -m torch.utils.collect_env", (H200 / "collect_env.txt").read_text()),
        (
            'python3 -c "import torch; print(torch._C._cuda_getArchFlags()); '
            'print(torch.cuda.get_arch_list())"',
            (H200 / "torch-arch.txt").read_text(),
        ),
    )
    assert linted(transcript) == []


# --- masked-exit ------------------------------------------------------------------------------

FAILING = (
    f"{shlex.quote(sys.executable)} -c "
    + shlex.quote("import sys; print('ERROR: boom', file=sys.stderr); sys.exit(1)")
    + " 2>&1 | tail -5"
)


def test_masked_exit_a_real_pipeline_exits_0_and_is_flagged() -> None:
    status, output = bash(FAILING)
    assert status == 0 and "ERROR: boom" in output  # bash took tail's status
    found = one(linted(session((FAILING, output))), "masked-exit")
    assert found.severity == "warning"  # a transcript has no exit status to be sure of
    assert "`python" in found.title and "tail -5" in found.title
    assert [e.text for e in found.evidence][1:] == ["ERROR: boom"]
    assert found.evidence[1].line == 2
    assert "set -o pipefail" in found.advice


@pytest.mark.parametrize(
    "command",
    [
        f"set -o pipefail; {FAILING}",
        f"set -euo pipefail\n{FAILING}",
        f"bash -o pipefail -c {shlex.quote(FAILING)}",
    ],
    ids=["set-o-pipefail", "set-euo-pipefail", "bash-o-pipefail"],
)
def test_masked_exit_near_miss_pipefail_makes_the_failure_visible(command: str) -> None:
    status, output = bash(command)
    assert status == 1 and "ERROR: boom" in output
    assert linted(session((command, output))) == []


@pytest.mark.parametrize(
    "command",
    [
        f"{shlex.quote(sys.executable)} -c 'print(\"all good\")' 2>&1 | tail -5",
        "printf 'ok\\nERROR: disk full\\n' > build.log; cat build.log | tail -1",
        "printf 'ERROR: disk full\\n' > build.log; grep -n ERROR build.log | head -3",
    ],
    ids=["no-error", "only-reading", "searching-for-errors"],
)
def test_masked_exit_near_misses(command: str, tmp_path: Path) -> None:
    status, output = bash(command, cwd=tmp_path)
    assert status == 0
    assert linted(session((command, output))) == []


def test_masked_exit_finds_the_pipes_a_shell_sees() -> None:
    assert [p.stages for p in pipelines("pip install x 2>&1 | tail -5")] == [
        ("pip install x 2>&1", "tail -5")
    ]
    assert [p.stages for p in pipelines("make |& tee log && echo done || echo failed")] == [
        ("make", "tee log")
    ]
    assert pipelines("echo 'a | b' \"c|d\" $(ls | wc -l) a || b; x &> y & z") == []
    assert pipelines("echo a # | not a pipe") == []
    assert [p.stages for p in pipelines("{ make; make install; } 2>&1 | tee log")] == [
        ("{ make; make install; } 2>&1", "tee log")
    ]
    assert program("CUDA_HOME=/usr/local/cuda sudo -E timeout 60 python setup.py") == "python"


# --- cpu-torch --------------------------------------------------------------------------------

CPU_CHECK = (
    "import torch\n"
    "print('torch:', torch.__version__)\n"
    "print('CUDA:', torch.version.cuda)\n"
    "print('available:', torch.cuda.is_available())\n"
    "torch.zeros(1).cuda()\n"
)


@pytest.fixture(scope="module")
def cpu_torch_output() -> tuple[str, str]:
    """(command, output) of a real CPU torch asked for CUDA."""
    python = torch_venv()
    command = f"{python} -c {shlex.quote(CPU_CHECK)}"
    status, output = bash(command)
    assert status == 1, output
    return command, output


def test_cpu_torch_on_a_host_with_gpus_is_an_error(cpu_torch_output: tuple[str, str]) -> None:
    """The real CPU torch's answers, in one session with the real H200 nvidia-smi."""
    command, output = cpu_torch_output
    assert "torch: 2.13.0+cpu" in output
    assert "AssertionError: Torch not compiled with CUDA enabled" in output
    found = linted(session(("nvidia-smi", SMI), (command, output)))
    cpu = one(found, "cpu-torch")
    assert cpu.severity == "error"
    assert cpu.title == "torch 2.13.0+cpu is a CPU build, on a host with 1 GPU (NVIDIA H200)"
    texts = [e.text for e in cpu.evidence]
    assert "AssertionError: Torch not compiled with CUDA enabled" in texts
    assert "torch: 2.13.0+cpu" in texts
    assert any("NVIDIA H200" in t for t in texts)
    # nvidia-smi says CUDA 13.0: the advice names the wheel index for it.
    assert "https://download.pytorch.org/whl/cu130" in cpu.advice
    # torch's own "Failed to initialize NumPy: No module named 'numpy'" is not numpy-abi.
    assert "Failed to initialize NumPy: No module named 'numpy'" in output
    assert [f.id for f in found] == ["cpu-torch"]


def test_cpu_torch_without_gpu_evidence_is_weaker(cpu_torch_output: tuple[str, str]) -> None:
    command, output = cpu_torch_output
    asked = one(linted(session((command, output))), "cpu-torch")
    assert asked.severity == "warning"  # something asked for CUDA, no GPU is known
    # the version alone, with no GPU in sight and nothing asking for CUDA: what the host runs
    printed = output.split("Traceback")[0]
    assert "+cpu" in printed
    assert [f for f in linted(session((command, printed))) if f.id == "cpu-torch"] == []


def test_cpu_torch_from_the_probe() -> None:
    env = h200_env()
    env["torch"].update(version="2.13.0+cpu", cuda=None)
    found = one(probed(env), "cpu-torch")
    assert found.severity == "error"
    assert found.title == "torch 2.13.0+cpu is a CPU build, on a host with 1 GPU (NVIDIA H200)"
    assert found.evidence[0].event == 42 and found.evidence[0].line is None
    # Without NVML the host's GPUs are unknown, and nothing asked for CUDA: no finding.
    env["nvml"] = {"unavailable": "NVML cannot start: Driver Not Loaded"}
    assert [f for f in probed(env) if f.id == "cpu-torch"] == []


def test_cpu_torch_near_miss_the_cuda_build() -> None:
    transcript = session(
        ("nvidia-smi", SMI),
        (
            'python3 -c "import torch; print(torch.__version__, torch.version.cuda)"',
            "2.11.0+cu130 13.0",
        ),
    )
    assert linted(transcript) == []


# --- arch-unsupported -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arch", "capability", "covered"),
    [
        ("sm_90", (9, 0), True),
        ("sm_80", (8, 6), True),  # SASS runs on later minors of its major
        ("sm_86", (8, 0), False),  # never on earlier ones
        ("sm_90", (10, 0), False),  # nor on another major
        ("sm_90a", (9, 0), True),
        ("sm_90a", (9, 1), False),  # arch-specific: that capability only
        ("sm_100f", (10, 3), True),  # family-specific: the family from that minor on
        ("sm_100f", (12, 0), False),
        ("sm_120", (12, 1), True),
        ("compute_90", (12, 0), True),  # PTX: the driver compiles it for any later GPU
        ("compute_90", (8, 9), False),
        ("compute_90a", (10, 0), False),
        ("nonsense", (9, 0), False),
    ],
)
def test_which_architectures_cover_a_capability(
    arch: str, capability: tuple[int, int], covered: bool
) -> None:
    assert covers(arch, capability) is covered


def test_arch_unsupported_from_the_probe() -> None:
    """The H200 capture with a Blackwell GPU (12.0) and the cu126 arch list."""
    env = with_devices(h200_env(), BLACKWELL, "12.0")
    env["torch"]["arch_list"] = CU126_ARCHS
    found = one(probed(env), "arch-unsupported")
    assert found.severity == "error"
    assert found.title == (
        f"{BLACKWELL} (sm_120) is not among the architectures torch 2.11.0+cu130 was built for "
        "(sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90)"
    )
    # The driver (CUDA 13.0) runs the cu130 wheels, which carry sm_120.
    assert "https://download.pytorch.org/whl/cu130" in found.advice
    assert "CUDA 12.8 or newer" in found.advice


@pytest.mark.parametrize(
    ("name", "capability", "archs"),
    [
        (BLACKWELL, "12.0", None),  # the real cu130 list has sm_120
        ("NVIDIA L40S", "8.9", CU126_ARCHS),  # sm_86 SASS runs on 8.9
        ("NVIDIA H200", "9.0", ["sm_80", "sm_90a"]),
    ],
)
def test_arch_unsupported_near_misses(name: str, capability: str, archs: list[str] | None) -> None:
    env = with_devices(h200_env(), name, capability)
    if archs is not None:
        env["torch"]["arch_list"] = archs
    assert probed(env) == []


# --- driver-too-old ---------------------------------------------------------------------------


def test_driver_too_old_from_the_probe() -> None:
    env = h200_env()
    env["nvml"].update(cuda_driver="12.4", driver="550.54.15")
    found = one(probed(env), "driver-too-old")
    assert found.severity == "error"
    assert found.title == (
        "torch 2.11.0+cu130 has CUDA 13.0; the driver 550.54.15 supports CUDA 12.4: "
        "torch cannot use the GPUs"
    )
    assert "580.65.06 or newer" in found.advice
    assert "https://download.pytorch.org/whl/cu124" in found.advice


def test_driver_a_newer_minor_is_a_warning() -> None:
    env = h200_env()
    env["torch"].update(version="2.9.1+cu129", cuda="12.9")
    env["nvml"].update(cuda_driver="12.8", driver="570.124.06")
    assert one(probed(env), "driver-too-old").severity == "warning"


def test_driver_near_miss_an_older_torch_cuda_on_a_newer_driver() -> None:
    env = h200_env()
    env["torch"].update(version="2.10.0+cu128", cuda="12.8")
    # nvcc 13.0 is now another toolkit than torch's 12.8, but the driver (13.0) is fine.
    assert [f.id for f in probed(env)] == ["toolkit-mismatch"]


# --- toolkit-mismatch -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nvcc", "home", "severity", "seen"),
    [
        (
            {"path": "/usr/local/cuda/bin/nvcc", "release": "12.8", "version": "12.8.93"},
            None,
            "warning",
            "nvcc 12.8.93 (/usr/local/cuda/bin/nvcc) is CUDA 12.8",
        ),
        (
            {"path": "/usr/local/cuda/bin/nvcc", "release": "13.1", "version": "13.1.80"},
            None,
            "info",
            "nvcc 13.1.80",
        ),
        (
            {"unavailable": "no nvcc in CUDA_HOME/bin or on PATH"},
            "/usr/local/cuda-12.8",
            "warning",
            "CUDA_HOME /usr/local/cuda-12.8 is CUDA 12.8",
        ),
    ],
    ids=["other-major", "other-minor", "cuda-home-only"],
)
def test_toolkit_mismatch_from_the_probe(
    nvcc: dict[str, str], home: str | None, severity: str, seen: str
) -> None:
    env = h200_env()
    env["nvcc"] = nvcc
    if home:
        env["cuda_home"] = home
    found = one(probed(env), "toolkit-mismatch")
    assert found.severity == severity
    assert seen in found.title and "torch 2.11.0+cu130 has CUDA 13.0" in found.title


def test_toolkit_near_miss_no_nvcc_and_an_unversioned_cuda_home() -> None:
    env = h200_env()
    env["nvcc"] = {"unavailable": "no nvcc in CUDA_HOME/bin or on PATH"}
    assert probed(env) == []


# --- the transcripts: real H200 captures and the wording of public issues ---------------------

#: File -> the runtime findings (id, severity) it must give, in order.
EXPECTED = {
    # Captured on a lent H200: an extension built for sm_80 only; torch 2.11 raises
    # torch.AcceleratorError.
    "runtime-h200-no-kernel-image.txt": [("no-kernel-image", "error")],
    # Captured on a lent H200: torch 2.11 refusing a CUDA 12.8 nvcc (unformatted), then its
    # warning for 13.1.
    "runtime-h200-toolkit-mismatch.txt": [
        ("toolkit-mismatch", "error"),
        ("toolkit-mismatch", "info"),
    ],
    # pytorch/pytorch#167244: sm_120 on a cu124 nightly, then the first kernel.
    "runtime-arch-sm120.txt": [("arch-unsupported", "error"), ("no-kernel-image", "error")],
    # pytorch/pytorch#149845: RTX 5090 D.
    "runtime-no-kernel-image.txt": [("no-kernel-image", "error")],
    # lllyasviel/Fooocus#1313, pytorch/pytorch#4546, nagadomi/nunif#702.
    "runtime-driver-too-old.txt": [("driver-too-old", "error")] * 3,
    # pytorch/pytorch#73047: cpp_extension's formatted refusal.
    "runtime-toolkit-mismatch.txt": [("toolkit-mismatch", "error")],
    # sgl-project/sglang#13948 (c10:: symbol) and sgl-project/sglang#8131 (driver symbol).
    "runtime-abi-sgl-kernel.txt": [("abi-mismatch", "error")] * 2,
    # pytorch/pytorch#135013 and NVIDIA/Model-Optimizer#87.
    "runtime-numpy-abi.txt": [("numpy-abi", "error")] * 2,
    # flashinfer-ai/flashinfer#3044 wording, vllm-project/vllm#49804 versions.
    "runtime-flashinfer-cubin.txt": [("version-guard", "error")],
    # sglang's assert_pkg_version as verl-project/verl#1832 reported it.
    "runtime-sgl-kernel-minimum.txt": [("version-guard", "error")],
}


@pytest.fixture(scope="module")
def lint_json() -> tuple[int, dict[str, list[dict[str, Any]]]]:
    """`journal lint --format json` of every runtime transcript, in one call."""
    files = sorted(TRANSCRIPTS.glob("runtime-*.txt"))
    assert {f.name for f in files} == set(EXPECTED)
    result = journal("lint", "--format", "json", *map(str, files))
    assert no_traceback(result), text(result.stderr)
    by_file: dict[str, list[dict[str, Any]]] = {f.name: [] for f in files}
    for found in json.loads(result.stdout)["findings"]:
        by_file[Path(found["file"]).name].append(found)
    return result.returncode, by_file


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_transcripts_give_their_findings(
    name: str, lint_json: tuple[int, dict[str, list[dict[str, Any]]]]
) -> None:
    status, by_file = lint_json
    assert status == 1  # errors were found
    found = [(f["id"], f["severity"]) for f in by_file[name] if f["id"] in RUNTIME]
    assert found == EXPECTED[name]
    for f in by_file[name]:
        assert f["evidence"] and all(e["line"] for e in f["evidence"] if e["text"][:2] != "$ ")


def findings_of(name: str) -> list[Finding]:
    return linted((TRANSCRIPTS / name).read_text())


def test_no_kernel_image_on_the_h200_names_the_build() -> None:
    found = one(findings_of("runtime-h200-no-kernel-image.txt"), "no-kernel-image")
    assert found.title.startswith(
        "a kernel built for TORCH_CUDA_ARCH_LIST=8.0 has no machine code for this GPU "
        "(sm_90, NVIDIA H200): torch.AcceleratorError: CUDA error: no kernel image"
    )
    assert 'TORCH_CUDA_ARCH_LIST="9.0"' in found.advice


def test_toolkit_mismatch_reads_torch_2_11s_unformatted_refusal() -> None:
    refused, warned = findings_of("runtime-h200-toolkit-mismatch.txt")
    assert "found CUDA 12.8" in refused.title and "built with CUDA 13.0" in refused.title
    assert refused.evidence[0].text.startswith("RuntimeError: ('The detected CUDA version (%s)")
    assert "CUDA 13.1 while torch has CUDA 13.0" in warned.title
    classic = one(findings_of("runtime-toolkit-mismatch.txt"), "toolkit-mismatch")
    assert "found CUDA 10.1" in classic.title and "CUDA 11.3" in classic.title
    assert [e.text for e in classic.evidence] == [
        "The detected CUDA version (10.1) mismatches the version that was used to compile",
        "PyTorch (11.3). Please make sure to use the same CUDA versions.",
    ]


def test_arch_unsupported_from_torchs_warning() -> None:
    """pytorch/pytorch#167244: RTX 5090 (sm_120) under a cu124 nightly."""
    found = one(findings_of("runtime-arch-sm120.txt"), "arch-unsupported")
    assert found.title == (
        "NVIDIA GeForce RTX 5090 (sm_120) is not supported by this torch build "
        "(it has sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90)"
    )
    assert [e.line for e in found.evidence] == [8, 9]


def test_driver_too_old_decodes_the_found_version() -> None:
    """lllyasviel/Fooocus#1313 (11040 = 11.4), pytorch/pytorch#4546 (9010 = 9.1)."""
    new, old, short = findings_of("runtime-driver-too-old.txt")
    assert "supports only CUDA 11.4 (found version 11040)" in new.title
    assert "supports only CUDA 9.1 (found version 9010)" in old.title
    assert "no current torch wheel is built for CUDA 11.4" in new.advice
    assert short.title.endswith(
        "CUDA error: CUDA driver version is insufficient for CUDA runtime version"
    )


def test_driver_near_miss_the_banner_alone() -> None:
    assert linted(session(("nvidia-smi", SMI))) == []


def test_abi_mismatch_tells_torch_symbols_from_driver_symbols() -> None:
    """sgl-project/sglang#13948 and sgl-project/sglang#8131."""
    torch_abi, driver = findings_of("runtime-abi-sgl-kernel.txt")
    assert torch_abi.title == (
        "`sgl_kernel` was built against another torch: `common_ops.abi3.so` misses the torch "
        "C++ symbol `_ZNK3c106SymInt6sym_neERKS0_`"
    )
    assert "cuGreenCtxStreamCreate" in driver.title and "driver" in driver.advice


def test_numpy_abi_from_numpys_guard() -> None:
    """pytorch/pytorch#135013 and NVIDIA/Model-Optimizer#87."""
    first, second = findings_of("runtime-numpy-abi.txt")
    assert first.title == (
        "a module compiled for NumPy 1.x was imported under NumPy 2.1.0 (while importing `torch`)"
    )
    assert "numpy<2" in first.advice
    assert second.title == "a module compiled for NumPy 1.x was imported under NumPy 2.1.2"
    assert [e.text for e in second.evidence][-1] == "AttributeError: _ARRAY_API not found"


def test_version_guards_name_both_versions() -> None:
    cubin = one(findings_of("runtime-flashinfer-cubin.txt"), "version-guard")
    assert cubin.title == (
        "flashinfer refused to load: flashinfer-cubin 0.6.13 does not match flashinfer 0.6.14"
    )
    assert "flashinfer-cubin==0.6.14" in cubin.advice
    kernel = one(findings_of("runtime-sgl-kernel-minimum.txt"), "version-guard")
    assert kernel.title == "sgl-kernel 0.0.9.post2 is older than the 0.1.1 the server requires"
    assert "'sgl-kernel>=0.1.1'" in kernel.advice


def test_version_guard_and_numpy_abi_near_misses_in_install_output() -> None:
    transcript = session(
        (
            "uv pip install flashinfer-python==0.6.14 flashinfer-cubin==0.6.14 numpy==2.4.1",
            "Resolved 3 packages in 12ms\n"
            "Uninstalled 3 packages in 4ms\n"
            "Installed 3 packages in 9ms\n"
            " - flashinfer-cubin==0.6.13\n"
            " + flashinfer-cubin==0.6.14\n"
            " - flashinfer-python==0.6.13\n"
            " + flashinfer-python==0.6.14\n"
            " - numpy==2.4.2\n"
            " + numpy==2.4.1",
        ),
    )
    assert linted(transcript) == []


@pytest.mark.parametrize(
    "output",
    [
        " - numpy==1.26.4\n + numpy==2.2.0",
        "  Attempting uninstall: numpy\n    Found existing installation: numpy 1.26.4\n"
        "    Uninstalling numpy-1.26.4:\n      Successfully uninstalled numpy-1.26.4\n"
        "Successfully installed numpy-2.1.0 torch-2.4.0",
    ],
    ids=["uv", "pip"],
)
def test_numpy_abi_a_major_flip_in_install_output(output: str) -> None:
    found = one(linted(session(("pip install -U torch", output))), "numpy-abi")
    assert found.severity == "warning"
    assert found.title.startswith("numpy went from 1.26.4 to 2.")


# --- abi-mismatch: a real `undefined symbol` from the dynamic loader ---------------------------


def test_abi_mismatch_real_undefined_symbol(tmp_path: Path) -> None:
    """An extension linked against `c10::cuda::SetDevice(signed char)` (the symbol of
    agentica-project/rllm#8) in a python without it: the loader's own ImportError."""
    package = tmp_path / "site-packages" / "sgl_kernel"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    source = tmp_path / "common_ops.c"
    source.write_text(
        "extern void _ZN3c104cuda9SetDeviceEa(signed char);\n"
        "void PyInit_common_ops(void) { _ZN3c104cuda9SetDeviceEa(0); }\n"
    )
    library = package / "common_ops.abi3.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    command = f"{shlex.quote(sys.executable)} -c 'import sgl_kernel.common_ops'"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site-packages")}
    status, output = bash(command, env=env)
    assert status == 1
    assert f"ImportError: {library}: undefined symbol: _ZN3c104cuda9SetDeviceEa" in output
    found = one(linted(session((command, output))), "abi-mismatch")
    assert found.severity == "error"
    assert found.title.startswith("`sgl_kernel` was built against another torch")
    assert "_ZN3c104cuda9SetDeviceEa" in found.title

    # Near miss: a library that is missing is not a symbol that is missing.
    (tmp_path / "needed.c").write_text("void needed(void) {}\n")
    needed = tmp_path / "libneeded.so"
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(needed), str(tmp_path / "needed.c")], check=True
    )
    source.write_text("extern void needed(void);\nvoid PyInit_common_ops(void) { needed(); }\n")
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(library), str(source), f"-L{tmp_path}", "-lneeded"],
        check=True,
    )
    needed.unlink()
    status, output = bash(command, env=env)
    assert status == 1 and "libneeded.so: cannot open shared object file" in output
    assert linted(session((command, output))) == []


# Extensions refusing another torch in their own words (wording from the sources that print it:
# xformers/_cpp_lib.py, torchvision/extension.py, torch_scatter/__init__.py; versions from the
# issue threads named).
XFORMERS_REFUSAL = (
    "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:\n"
    "    PyTorch {built} with CUDA {cuda} (you have {have})\n"
    "    Python  3.10.11 (you have 3.10.11)\n"
    "  Please reinstall xformers (see https://github.com/facebookresearch/xformers#installing-"
    "xformers)\n"
    "  Memory-efficient attention, SwiGLU, sparse and more won't be available.\n"
    "  Set XFORMERS_MORE_DETAILS=1 for more details"
)


@pytest.mark.parametrize(
    ("built", "cuda", "have", "shown"),
    [
        # invoke-ai/InvokeAI#6590: another torch and another CUDA
        ("2.1.2+cu121", "1201", "2.0.1+cu118", "torch 2.1.2+cu121 (CUDA 12.1)"),
        # facebookresearch/xformers#800: the same release, another CUDA variant
        ("2.1.0+cu121", "1201", "2.1.0+cu118", "torch 2.1.0+cu121 (CUDA 12.1)"),
        # open-mmlab/PIA#30: the CPU build of the same release
        ("2.1.2+cu121", "1201", "2.1.2+cpu", "torch 2.1.2+cu121 (CUDA 12.1)"),
    ],
)
def test_abi_mismatch_from_xformers_own_refusal(
    built: str, cuda: str, have: str, shown: str
) -> None:
    output = XFORMERS_REFUSAL.format(built=built, cuda=cuda, have=have)
    found = one(linted(session(("python -m xformers.info", output))), "abi-mismatch")
    assert found.severity == "warning"  # xFormers goes on without its kernels
    assert found.title.startswith(f"`xformers` was built for {shown} and this env has torch {have}")
    assert [e.line for e in found.evidence] == [2, 3]  # the refusal and the versions
    if have.endswith("+cpu"):
        assert "CPU build" in found.title and "no kernels for a CPU build" in found.advice
    else:
        assert f"release built for torch {have}" in found.advice


def test_abi_mismatch_xformers_near_misses() -> None:
    """The same torch on both sides (Vchitect/SEINE#21: a Mac, `2.0.1` built with CUDA 11.6,
    2.0.1 installed) failed for another reason; a module that only names xFormers is silent."""
    same = XFORMERS_REFUSAL.format(built="2.0.1", cuda="1106", have="2.0.1")
    assert linted(session(("python sample.py", same))) == []
    assert linted(session(("pip show xformers", "Name: xformers\nVersion: 0.0.28.post3"))) == []
    # its other wording, without versions, is still a refusal
    older = (
        "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for a "
        "different version of PyTorch or Python."
    )
    assert one(linted(session(("python x.py", older))), "abi-mismatch").severity == "warning"


@pytest.mark.parametrize(
    ("output", "package", "ext", "torch"),
    [
        (  # acheong08/Diffusion-ColabUI#108, wrapped by a rich traceback
            "RuntimeError: Detected that PyTorch and torchvision were compiled with different\n"
            "CUDA versions. PyTorch has CUDA Version=11.7 and torchvision has CUDA \n"
            "Version=11.8. Please reinstall the torchvision that matches your PyTorch \n"
            "install.",
            "torchvision",
            "11.8",
            "11.7",
        ),
        (  # deforum/deforum-stable-diffusion#348, the "major" wording of newer torchvision
            "RuntimeError: Detected that PyTorch and torchvision were compiled with different "
            "CUDA major versions. PyTorch has CUDA Version=12.1 and torchvision has CUDA "
            "Version=11.8. Please reinstall the torchvision that matches your PyTorch install.",
            "torchvision",
            "11.8",
            "12.1",
        ),
        (  # rusty1s/pytorch_scatter#237
            "RuntimeError: Detected that PyTorch and torch_scatter were compiled with different "
            "CUDA versions. PyTorch has CUDA version 10.1 and torch_scatter has CUDA version "
            "10.2. Please reinstall the torch_scatter that matches your PyTorch install.",
            "torch_scatter",
            "10.2",
            "10.1",
        ),
    ],
)
def test_abi_mismatch_from_a_cuda_version_check(
    output: str, package: str, ext: str, torch: str
) -> None:
    found = one(linted(session(("python -c 'import torch_geometric'", output))), "abi-mismatch")
    assert found.severity == "error"
    assert found.title == (
        f"`{package}` was built for CUDA {ext} and torch for CUDA {torch}: `{package}` refuses "
        "to load"
    )
    assert f"cu{torch.replace('.', '')}" in found.advice


def test_abi_mismatch_from_torchvisions_own_words() -> None:
    """torchvision's `_C` built for another torch: its raise (wrapped as in
    Engineer-of-Stuff/stable-diffusion-paperspace#111) and the missing operator torch reports
    (captured here: torchvision 0.20.1 under torch 2.13.0+cpu, term-zsh-macos-*.txt)."""
    ops = (
        "RuntimeError: Couldn't load custom C++ ops. \n"
        "This can happen if your PyTorch and torchvision versions are incompatible, or if you had "
        "errors while compiling torchvision from source."
    )
    found = one(linted(session(("python launch.py", ops))), "abi-mismatch")
    assert found.title == "`torchvision` was built for another torch: its C++ ops do not load"
    nms = "RuntimeError: operator torchvision::nms does not exist"
    found = one(linted(session(("python -c 'import torchvision'", nms))), "abi-mismatch")
    assert "`torchvision::nms` was never registered" in found.title
    # near miss: the source line a traceback quotes is not the error it raises
    quoted = '        "Couldn\'t load custom C++ ops. This can happen if your PyTorch and "'
    assert linted(session(("python x.py", quoted))) == []


def test_abi_mismatch_is_one_finding_per_package_and_command() -> None:
    """XFORMERS_MORE_DETAILS=1 prints the loader's `undefined symbol` too: one finding for
    xformers, from the loader's own line; torchvision in the same output is another."""
    output = "\n".join(
        [
            "OSError: /venv/lib/python3.11/site-packages/xformers/_C.so: undefined symbol: "
            "_ZN3c1017RegisterOperatorsD1Ev",
            XFORMERS_REFUSAL.format(built="2.5.1+cu121", cuda="1201", have="2.6.0+cu124"),
            "RuntimeError: operator torchvision::nms does not exist",
        ]
    )
    found = [f for f in linted(session(("python serve.py", output))) if f.id == "abi-mismatch"]
    assert [f.title.split(" ")[0] for f in found] == ["`xformers`", "`torchvision`"]
    assert "undefined" not in found[1].title and found[0].severity == "error"


# --- a real journal: bash, uv, snapshots and probes -------------------------------------------

JOURNAL = "runtime"


def _stand_in(name: str, version: str) -> StandIn:
    module = name.replace("-", "_")
    return StandIn(name, version, (), {f"{module}/__init__.py": f"__version__ = {version!r}\n"})


def _uv() -> str:
    found = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
    assert found, "uv is needed (on PATH or beside sys.executable)"
    return found


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One journal on the `local` host whose target python is a fresh uv venv: each step run
    once with `journal run step`, then `journal pitfalls --format json`."""
    root = tmp_path_factory.mktemp("runtime-journal")
    env = {k: v for k, v in os.environ.items() if k not in ("JOURNAL_DB", "JOURNAL_RUNBOOK")}
    env.update(UV_NO_CONFIG="1", UV_PYTHON_DOWNLOADS="never", UV_CACHE_DIR=str(root / "uv-cache"))
    env.pop("VIRTUAL_ENV", None)
    uv = _uv()
    subprocess.run(
        [uv, "venv", "--python", sys.executable, str(root / "venv")],
        env=env,
        check=True,
        capture_output=True,
    )
    python = root / "venv" / "bin" / "python"
    index = build_index(
        root / "index" / "simple",
        [
            _stand_in("numpy", "1.26.4"),
            _stand_in("numpy", "2.4.2"),
            _stand_in("numpy", "2.4.1"),
            _stand_in("flashinfer-python", "0.5.3"),
            _stand_in("flashinfer-cubin", "0.5.2"),
            _stand_in("flashinfer-cubin", "0.5.3"),
        ],
    ).as_uri()
    old_driver = h200_env()
    old_driver["nvml"].update(cuda_driver="12.4", driver="550.54.15")
    (root / "old-driver.json").write_text(json.dumps(old_driver))

    def install(*packages: str) -> str:
        return " ".join(
            [
                shlex.quote(uv),
                "pip",
                "install",
                "--python",
                shlex.quote(str(python)),
                "--index-url",
                index,
                *packages,
            ]
        )

    steps = {
        "masked": (FAILING, False, []),
        "pipefail": (f"set -o pipefail; {FAILING}", False, []),
        "numpy-1": (install("numpy==1.26.4"), True, []),
        "numpy-2": (install("numpy==2.4.2"), True, []),
        "numpy-patch": (install("numpy==2.4.1"), True, []),
        "flashinfer-skew": (
            install("flashinfer-python==0.5.3", "flashinfer-cubin==0.5.2"),
            True,
            [],
        ),
        "flashinfer-match": (install("flashinfer-cubin==0.5.3"), True, []),
        "h200": ("true", False, ["h200"]),
        "old-driver": ("true", False, ["h200-old-driver"]),
    }
    parts = [
        f'[journal]\nname = "{JOURNAL}"\n',
        f'[hosts.here]\nssh = "local"\npython = {json.dumps(str(python))}\n',
        f"[probes.h200]\nrun = {json.dumps('cat ' + shlex.quote(str(H200 / 'torch-env.json')))}\n"
        "json = true\n",
        "[probes.h200-old-driver]\n"
        f"run = {json.dumps('cat ' + shlex.quote(str(root / 'old-driver.json')))}\njson = true\n",
    ]
    for name, (command, snapshots, probes) in steps.items():
        parts.append(
            f"[[steps]]\nname = {json.dumps(name)}\nrun = {json.dumps(command)}\n"
            f"probes = {json.dumps(probes)}\nsnapshots = {'true' if snapshots else 'false'}\n"
        )
    write_runbook(root, "\n".join(parts))

    def cli(*args: str) -> subprocess.CompletedProcess[bytes]:
        done = journal(
            *args, db=root / "journal.db", runbook=root / "runbook.toml", env=env, cwd=root
        )
        assert no_traceback(done), text(done.stderr)
        return done

    ran = {name: cli("run", "step", name) for name in steps}
    listed = cli("pitfalls", "--all", "--format", "json")
    assert listed.returncode == 0, text(listed.stderr)
    by_step: dict[str, list[dict[str, Any]]] = {name: [] for name in steps}
    for found in json.loads(listed.stdout)["findings"]:
        if found["id"] in RUNTIME:
            by_step[found["step"]].append(found)
    return {"ran": ran, "by_step": by_step}


JOURNAL_EXPECTED = {
    "masked": [("masked-exit", "error")],
    "pipefail": [],
    "numpy-1": [],
    "numpy-2": [("numpy-abi", "warning")],
    "numpy-patch": [],
    "flashinfer-skew": [("version-guard", "warning")],
    "flashinfer-match": [],
    "h200": [],
    "old-driver": [("driver-too-old", "error")],
}


@pytest.mark.parametrize("step", sorted(JOURNAL_EXPECTED))
def test_journal_steps_give_their_findings(step: str, recorded: dict[str, Any]) -> None:
    found = [(f["id"], f["severity"]) for f in recorded["by_step"][step]]
    assert found == JOURNAL_EXPECTED[step]


def test_journal_masked_step_succeeded_and_said_so(recorded: dict[str, Any]) -> None:
    masked, pipefail = recorded["ran"]["masked"], recorded["ran"]["pipefail"]
    assert masked.returncode == 0 and pipefail.returncode == 1
    # The run-time verdict, printed as the step ended.
    assert "pitfall masked-exit (error)" in text(masked.stderr)
    (found,) = recorded["by_step"]["masked"]
    assert "exit 0: the step was recorded as succeeded" in found["title"]
    assert found["evidence"][1]["text"] == "ERROR: boom"
    assert found["evidence"][1]["event"] is not None


def test_journal_findings_point_at_snapshots_and_probes(recorded: dict[str, Any]) -> None:
    (flip,) = recorded["by_step"]["numpy-2"]
    assert flip["title"].startswith("numpy went from 1.26.4 to 2.4.2")
    assert flip["evidence"][1]["text"] == "package snapshots: numpy 1.26.4 -> 2.4.2"
    (skew,) = recorded["by_step"]["flashinfer-skew"]
    assert skew["title"].startswith("flashinfer-cubin 0.5.2 is left beside flashinfer-python 0.5.3")
    (driver,) = recorded["by_step"]["old-driver"]
    assert driver["evidence"][0]["text"].startswith(
        "torch-env probe: torch 2.11.0+cu130 has CUDA 13.0"
    )
    assert driver["evidence"][0]["event"] is not None


def test_helpers_know_the_gpus_by_name() -> None:
    assert rt.capability_from_name("NVIDIA H200") == (9, 0)
    assert rt.capability_from_name(BLACKWELL) == (12, 0)
    assert rt.capability_from_name("NVIDIA GeForce RTX 4090") == (8, 9)
    assert rt.capability_from_name("Some Future GPU") is None
    assert rt.wheel_variant((12, 4)) == "cu124" and rt.wheel_variant((11, 4)) is None


def probe_runs(envs: list[dict]) -> list[Run]:
    """One step run a probe of host h200 followed for each torch-env result, in order."""
    return [
        Run(
            key=f"run-{i}",
            step=f"step-{i}",
            host="h200",
            command="true",
            exit_code=0,
            probes={"torch-env": env},
            probe_events={"torch-env": i},
        )
        for i, env in enumerate(envs, 1)
    ]


def test_a_condition_every_probe_shows_is_reported_where_it_appeared() -> None:
    """Four probes of one host: broken, broken again, fixed, broken again."""
    broken = h200_env()
    broken["nvml"].update(cuda_driver="12.4", driver="550.54.15")
    broken["nvcc"] = {"path": "/usr/local/cuda/bin/nvcc", "release": "12.8", "version": "12.8.93"}
    broken = with_devices(broken, BLACKWELL, "12.0")
    broken["torch"]["arch_list"] = CU126_ARCHS
    runs = probe_runs([broken, broken, h200_env(), broken])
    found = runtime(judge(Subject("journal", runs, "runtime")))
    assert Counter(f.step for f in found) == {"step-1": 3, "step-4": 3}
    assert {f.id for f in found} == {"arch-unsupported", "driver-too-old", "toolkit-mismatch"}


def test_masked_exit_in_an_imported_transcript(tmp_path: Path) -> None:
    """`journal import transcript` records commands without exit status: a warning there."""
    status, output = bash(FAILING)
    path = tmp_path / "session.txt"
    path.write_text(session((FAILING, output)))
    env = {k: v for k, v in os.environ.items() if k not in ("JOURNAL_DB", "JOURNAL_RUNBOOK")}
    db = tmp_path / "journal.db"
    for args in (
        ("--journal", "by-hand", "import", "transcript", str(path), "--host", "gpu-box"),
        ("--journal", "by-hand", "pitfalls", "--all", "--format", "json"),
    ):
        done = journal(*args, db=db, env=env, cwd=tmp_path)
        assert done.returncode == 0 and no_traceback(done), text(done.stderr)
    found = [f for f in json.loads(done.stdout)["findings"] if f["id"] in RUNTIME]
    assert [(f["id"], f["severity"], f["host"]) for f in found] == [
        ("masked-exit", "warning", "gpu-box")
    ]


def test_cpu_torch_from_probes_is_reported_once() -> None:
    env = h200_env()
    env["torch"].update(version="2.13.0+cpu", cuda=None)
    runs = probe_runs([env, env])
    found = runtime(judge(Subject("journal", runs, "runtime")))
    assert [(f.id, f.step) for f in found] == [("cpu-torch", "step-1")]
