"""Each pitfall's resolution rule against near misses: a later fact that nearly matches the
rule ("Resolved by any of:" in `python -m journal.pitfalls`, from
journal.pitfalls.resolution.rules_of) leaves the finding open, and the real match resolves it
with a sentence saying what showed the condition gone.

Near misses are the ways a user's next step can look like the fix without being it: the same
step run again but failing, or printing the same condition again; an install of another
version or from another index; a probe that could not read what the finding is about (torch
not importable, NVML or nvcc unavailable); a snapshot with the package back but lower; a
`pip check` that failed or never ran; a figure of another series, or outside the threshold.

Every case is one journal on one host (gpu-box), built with tests/test_lifecycle.py's builders
from real wordings (the detector modules' docstrings, tests/data/). Parametrize ids are
``PITFALL:what-the-later-fact-is``. The first run of this file found seven rules that
resolved on a near miss or missed their own match (printed pairs of driver-too-old,
toolkit-mismatch and nccl-skew taken for gone by a rerun printing them again, a no-op rerun
clearing a skewed flashinfer snapshot, an imported `pip check` that never ran, a `+cpu` torch
taken for the replaced CUDA build back, numpy back at 2 after a flip that also brought
opencv); those rules were mended and the cases below hold them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from journal.pitfalls import judge
from journal.pitfalls.base import Finding
from journal.pitfalls.subjects import from_transcript
from journal.reading.bench import Figure
from journal.reading.subject import Run, Subject
from journal.service.findings import judged
from journal.transcript import step_name
from tests.test_judgement import _cpu_env
from tests.test_lifecycle import INSTALL, NEW, OLD, h200_env, mismatched, of, run, snap

DATA = Path(__file__).parent / "data"
TRANSCRIPTS = DATA / "transcripts"
SMI = (DATA / "h200" / "nvidia-smi.txt").read_text()

Fact = Run | Figure


@dataclass(frozen=True)
class Case:
    """One finding (``id``, about the run ``at`` of the runs ``found`` builds) and the later
    facts ``later`` builds, offered to it in order. Builders make fresh runs for each test."""

    id: str
    found: Callable[[], list[Fact]]
    at: str
    later: Callable[[], list[Fact]]


def _judged(facts: list[Fact]) -> list[Finding]:
    runs = [f for f in facts if isinstance(f, Run)]
    figures = [f for f in facts if isinstance(f, Figure)]
    return judged(Subject("journal", runs, "rules", metrics=figures))


def _the_finding(case: Case, facts: list[Fact]) -> Finding:
    (one,) = [f for f in of(_judged(facts), case.id) if f.run == case.at]
    return one


def _near(case: Case) -> None:
    assert _the_finding(case, [*case.found()]).state == "open"  # the finding, before
    one = _the_finding(case, [*case.found(), *case.later()])
    assert one.state == "open", one.resolved_by


def _match(case: Case, why: str) -> None:
    later = case.later()
    one = _the_finding(case, [*case.found(), *later])
    assert one.state == "resolved", case.id
    assert one.resolved_by is not None and one.resolved_by.event == later[-1].event
    assert why in one.resolved_by.why


# --- inputs -----------------------------------------------------------------------------------


def pasted(name: str, id: str) -> tuple[str, str]:
    """The command and output of a transcript's first command with finding ``id``."""
    subject = from_transcript((TRANSCRIPTS / name).read_text(), name)
    found = next(f for f in judge(subject) if f.id == id)
    command = next(r for r in subject.runs if r.key == found.run)
    return command.command, command.text


def alone(event: int, env: dict[str, Any]) -> Run:
    """`journal run probe torch-env` on its own, as the journal's projection gives it."""
    return Run(
        key=f"probe-{event}",
        step="probe torch-env",
        host="gpu-box",
        command="journal run probe torch-env",
        event=event,
        probes={"torch-env": env},
        probe_events={"torch-env": event},
    )


def on(host: str, fact: Run) -> Run:
    fact.host = host
    return fact


def no_torch() -> dict[str, Any]:
    """The H200 probe of a python where torch is not installed (the probe's own words)."""
    env = h200_env()
    reason = {"unavailable": "torch is not installed in this python"}
    env["torch"] = {
        k: dict(reason)
        for k in (
            "version",
            "cuda",
            "cudnn",
            "nccl",
            "cuda_available",
            "device_count",
            "arch_list",
            "devices",
        )
    }
    env["nccl"] = dict(reason)
    return env


def unread(probe: str, phase: str | None, event: int, error: str) -> dict[str, Any]:
    return {"probe": probe, "phase": phase, "error": error, "event": event}


# --- install rules: noop-install, variant-not-switched -----------------------------------------

UV_FAILED = (
    "error: Request failed after 3 retries\n"
    "  Caused by: Failed to fetch: `https://download.pytorch.org/whl/nightly/cu130/torch/`\n"
)


def _noop() -> list[Run]:
    return [
        run("install-torch", INSTALL, OLD, OLD, event=10, output="Audited 3 packages in 12ms\n")
    ]


def _reinstall(event: int, **kw: Any) -> Run:
    return run("reinstall-torch", INSTALL + " --reinstall", event=event, **kw)


INSTALL_MISSES = {
    "same-request-failed": lambda: [
        _reinstall(100, before=OLD, after=OLD, exit_code=2, output=UV_FAILED)
    ],
    "same-request-a-noop-again": lambda: [
        run("install-again", INSTALL, OLD, OLD, event=100, output="Checked 3 packages in 9ms\n")
    ],
}
INSTALL_FIX = (
    lambda: [_reinstall(200, before=OLD, after=NEW)],
    "reinstall-torch on gpu-box asked for it again and installed torch 2.10.0+cu128 -> "
    "2.12.0.dev20260226+cu130: the cu130 build asked for",
)


# --- snapshot rules: downgrade-cascade, torch-replaced -----------------------------------------

CASCADE_BEFORE = snap(torch="2.10.0+cu128", numpy="2.4.2", pillow="12.1.1")
CASCADE_AFTER = snap(torch=NEW["torch"]["version"], numpy="2.4.1", pillow="12.1.0")


def _cascade() -> list[Run]:
    swap = INSTALL + " --reinstall"
    return [run("swap", swap, CASCADE_BEFORE, CASCADE_AFTER, event=10)]


def _pin(key: str, command: str, **versions: str) -> Run:
    return run(key, command, CASCADE_AFTER, {**CASCADE_AFTER, **snap(**versions)}, event=100)


CASCADE_MISSES = {
    "only-one-package-back": lambda: [_pin("pin", "uv pip install numpy==2.4.2", numpy="2.4.2")],
    "back-but-lower": lambda: [
        _pin("reqs", "uv pip install -r requirements.txt", numpy="2.3.5", pillow="12.1.1")
    ],
    "package-removed": lambda: [
        run(
            "drop",
            "uv pip uninstall numpy",
            CASCADE_AFTER,
            {k: v for k, v in CASCADE_AFTER.items() if k != "numpy"},
            event=100,
        )
    ],
    "back-on-another-host": lambda: [
        on(
            "other-box",
            _pin(
                "pin", "uv pip install numpy==2.4.2 pillow==12.1.1", numpy="2.4.2", pillow="12.1.1"
            ),
        )
    ],
}

NIGHTLY = "2.12.0.dev20260226+cu130"
PULLED = snap(torch="2.9.1", sglang="0.5.9")


def _replaced() -> list[Run]:
    return [run("install-sglang", "uv pip install sglang", snap(torch=NIGHTLY), PULLED, event=10)]


def _torch_now(key: str, command: str, version: str, event: int = 100) -> Run:
    return run(key, command, PULLED, {**PULLED, **snap(torch=version)}, event=event)


REPLACED_MISSES = {
    "an-older-nightly-back": lambda: [
        _torch_now(
            "nightly",
            "uv pip install --pre torch==2.12.0.dev20260220+cu130 "
            "--index-url https://download.pytorch.org/whl/nightly/cu130",
            "2.12.0.dev20260220+cu130",
        )
    ],
    "the-same-install-again": lambda: [
        run("install-sglang-2", "uv pip install sglang", PULLED, PULLED, event=100)
    ],
    "torch-back-on-another-host": lambda: [
        on("other-box", _torch_now("restore", f"uv pip install torch=={NIGHTLY}", NIGHTLY))
    ],
}


# --- pip check and reruns: dependency-conflict, rollback-incomplete, masked-exit ---------------

RESOLVER = (
    "ERROR: pip's dependency resolver does not currently take into account all the packages "
    "that are installed. This behaviour is the source of the following dependency conflicts.\n"
    "sglang 0.5.9 requires torch==2.9.1, but you have torch 2.12.0.dev20260226+cu130 which is "
    "incompatible.\n"
    "Successfully installed sglang-0.5.9\n"
)
PIP_CHECK_BROKEN = (
    "sglang 0.5.9 has requirement torch==2.9.1, but you have torch 2.12.0.dev20260226+cu130.\n"
)


def _conflict() -> list[Run]:
    return [run("install-sglang", "pip install sglang==0.5.9", event=10, output=RESOLVER)]


def _imported(key: str, command: str, output: str, event: int) -> Run:
    """A command of an imported transcript: no exit status, the step named after it."""
    found = run(
        key, command, step=step_name(command), event=event, status="imported", output=output
    )
    found.exit_code, found.imported = None, True
    return found


CONFLICT_MISSES = {
    "pip-check-failed": lambda: [
        run("check", "pip check", event=100, exit_code=1, output=PIP_CHECK_BROKEN)
    ],
    "pip-check-masked-by-or-true": lambda: [
        run("check", "pip check || true", event=100, output=PIP_CHECK_BROKEN)
    ],
    "pip-check-could-not-run": lambda: [
        run(
            "check",
            "python -m pip check",
            event=100,
            exit_code=1,
            output="/usr/bin/python: No module named pip\n",
        )
    ],
    "same-step-again-still-conflicting": lambda: [
        run(
            "install-sglang-2",
            "pip install sglang==0.5.9",
            step="install-sglang",
            event=100,
            output=RESOLVER,
        )
    ],
    "pip-check-on-another-host": lambda: [
        on(
            "other-box",
            run("check", "pip check", event=100, output="No broken requirements found.\n"),
        )
    ],
}

TARGET = {"torch": "2.10.0+cu128", "numpy": "2.4.2"}


def _rollback(key: str, after: dict, *, event: int, exit_code: int = 0, output: str = "") -> Run:
    back = run(
        key,
        "journal rollback --to before:swap --host gpu-box",
        CASCADE_AFTER,
        after,
        event=event,
        step="rollback",
        exit_code=exit_code,
        output=output,
    )
    back.rollback = {
        "to": "before:swap",
        "run": "swap",
        "phase": "before",
        "event": 5,
        "packages": dict(TARGET),
    }
    return back


SHORT = snap(torch="2.10.0+cu128", numpy="2.4.1")
REACHED = snap(torch="2.10.0+cu128", numpy="2.4.2")


def _incomplete() -> list[Run]:
    return [_rollback("rollback-1", SHORT, event=10)]


ROLLBACK_MISSES = {
    "same-rollback-short-again": lambda: [_rollback("rollback-2", SHORT, event=100)],
    "same-rollback-failed": lambda: [
        _rollback(
            "rollback-2",
            SHORT,
            event=100,
            exit_code=1,
            output="ERROR: Could not install packages due to an OSError: [Errno 28] No space "
            "left on device\n",
        )
    ],
    "another-step-went-through": lambda: [run("verify", "python -c 'import numpy'", event=100)],
}

BUILD = "pip install flash-attn --no-build-isolation 2>&1 | tail -3"
BUILD_FAILED = (
    "ERROR: Failed building wheel for flash-attn\n"
    "Failed to build flash-attn\n"
    "ERROR: Could not build wheels for flash-attn, which is required to install "
    "pyproject.toml-based projects\n"
)


def _masked() -> list[Run]:
    return [run("build", BUILD, event=10, output=BUILD_FAILED)]


MASKED_MISSES = {
    "same-step-again-printing-the-error": lambda: [
        run("build-2", BUILD, step="build", event=100, output=BUILD_FAILED)
    ],
    "same-step-with-pipefail-failed": lambda: [
        run(
            "build-2",
            "set -o pipefail; " + BUILD,
            step="build",
            event=100,
            exit_code=1,
            output=BUILD_FAILED,
        )
    ],
    "another-step-went-through": lambda: [run("verify", "python -c 'import torch'", event=100)],
}


# --- cpu-torch --------------------------------------------------------------------------------

LOOK = "python -c 'import torch; print(torch.__version__, torch.version.cuda)'"
NO_MODULE = (
    "Traceback (most recent call last):\n"
    '  File "<string>", line 1, in <module>\n'
    "ModuleNotFoundError: No module named 'torch'\n"
)


def _cpu_at_a_print() -> list[Run]:
    """torch 2.13.0+cpu printed by a check, on a host whose nvidia-smi shows an H200."""
    return [
        run("smi", "nvidia-smi", event=5, output=SMI),
        run("look", LOOK, event=10, output="2.13.0+cpu None\n"),
    ]


CPU_MISSES = {
    "same-print-step-printing-the-same": lambda: [
        run("look-2", LOOK, step="look", event=100, output="2.13.0+cpu None\n")
    ],
    "a-probe-showing-the-same-cpu-build": lambda: [
        run("verify", event=100, env=_cpu_env(gpus=True))
    ],
    "a-probe-where-torch-is-not-installed": lambda: [run("verify", event=100, env=no_torch())],
    "same-print-step-torch-not-importable": lambda: [
        run("look-2", LOOK, step="look", event=100, env=no_torch(), exit_code=1, output=NO_MODULE)
    ],
}


# --- probe-based rules: arch-unsupported, driver-too-old, toolkit-mismatch, nccl-skew ----------


def blackwell(arch_list: list[str] | None = None) -> dict[str, Any]:
    """The H200 probe as an RTX PRO 6000 Blackwell (sm_120) host shows it."""
    env = h200_env()
    for device in env["torch"]["devices"] + env["nvml"]["devices"]:
        device.update(name="NVIDIA RTX PRO 6000 Blackwell Server Edition", capability="12.0")
    env["torch"]["arch_list"] = arch_list or ["sm_50", "sm_80", "sm_86", "sm_90"]
    return env


def blackwell_no_torch() -> dict[str, Any]:
    """Blackwell, with torch failing at import (NVML still lists the GPU)."""
    env = blackwell()
    why = {
        "unavailable": "import torch failed: ImportError: libcudnn.so.9: cannot open shared "
        "object file: No such file or directory"
    }
    for key in ("cuda_available", "device_count", "arch_list", "devices"):
        env["torch"][key] = dict(why)
    return env


ARCH_MISSES = {
    "a-probe-where-torch-failed-at-import": lambda: [
        run("verify", event=100, env=blackwell_no_torch())
    ],
    "a-probe-of-another-torch-still-without-sm_120": lambda: [
        run("verify", event=100, env=blackwell(["sm_50", "sm_60", "sm_70", "sm_75", "sm_80"]))
    ],
}
ARCH_FIX = blackwell(["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"])

NAME = "python -c 'import torch; print(torch.cuda.get_device_name())'"
ARCH_WARNED = (
    "/home/ubuntu/venv/lib/python3.11/site-packages/torch/cuda/__init__.py:235: UserWarning:\n"
    "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current "
    "PyTorch installation.\n"
    "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 "
    "sm_86 sm_90.\n"
    "If you want to use the NVIDIA GeForce RTX 5090 GPU with PyTorch, please check the "
    "instructions at https://pytorch.org/get-started/locally/\n"
    "\n"
    "  warnings.warn(\n"
    "NVIDIA GeForce RTX 5090\n"
)


def old_driver(cuda: str = "12.4", driver: str = "550.54.15") -> dict[str, Any]:
    env = h200_env()
    env["nvml"].update(cuda_driver=cuda, driver=driver)
    env["cuda_driver"], env["driver"] = cuda, driver
    return env


def no_nvml() -> dict[str, Any]:
    env = old_driver()
    env["nvml"] = {
        "unavailable": "pynvml (nvidia-ml-py) is not installed in this python; nvidia-smi is "
        "not on PATH"
    }
    return env


DRIVER_MISSES = {
    "a-probe-where-nvml-is-unavailable": lambda: [run("verify", event=100, env=no_nvml())],
    "a-probe-where-torch-is-not-installed": lambda: [run("verify", event=100, env=no_torch())],
    "a-probe-of-a-driver-still-a-minor-behind": lambda: [
        run("verify", event=100, env=old_driver("12.8", "570.86.10"))
    ],
}

AVAILABLE = "python -c 'import torch; print(torch.cuda.is_available())'"
TOO_OLD = (
    "/opt/venv/lib/python3.12/site-packages/torch/cuda/__init__.py:182: UserWarning: CUDA "
    "initialization: The NVIDIA driver on your system is too old (found version 12040). Please "
    "update your GPU driver by downloading and installing a new version from the URL: "
    "http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to "
    "install a PyTorch version that has been compiled with your version of the CUDA driver. "
    "(Triggered internally at /pytorch/c10/cuda/CUDAFunctions.cpp:119.)\n"
    "  return torch._C._cuda_getDeviceCount() > 0\n"
    "False\n"
)


def nvcc_failed() -> dict[str, Any]:
    env = mismatched()
    env["nvcc"] = {
        "unavailable": "/usr/local/cuda-12.8/bin/nvcc --version failed: [Errno 13] Permission "
        "denied: '/usr/local/cuda-12.8/bin/nvcc'"
    }
    return env


def mismatched_no_torch() -> dict[str, Any]:
    env = no_torch()
    env["nvcc"] = mismatched()["nvcc"]
    env["cuda_home"] = "/usr/local/cuda-12.8"
    return env


TOOLKIT_MISSES = {
    "a-probe-whose-nvcc-failed": lambda: [run("verify", event=100, env=nvcc_failed())],
    "a-probe-where-torch-is-not-installed": lambda: [
        run("verify", event=100, env=mismatched_no_torch())
    ],
}


def nccl_unread() -> dict[str, Any]:
    """The H200 probe where torch's NCCL could not be read (import failed, no wheel library)."""
    env = h200_env()
    why = {"unavailable": "import torch failed: OSError: libnccl.so.2: cannot open shared object"}
    env["torch"]["nccl"] = dict(why)
    env["nccl"] = dict(why)
    env["nccl_library"] = {"unavailable": "no nvidia-nccl wheel library in this env"}
    env["packages"].pop("nvidia-nccl-cu13")
    return env


def system_unread() -> dict[str, Any]:
    """The H200 probe of an older journal: no system side recorded at all."""
    env = h200_env()
    del env["system_nccl"], env["env"]
    return env


def nccl_aligned() -> dict[str, Any]:
    env = h200_env()
    env["system_nccl"] = {"NCCL_VERSION": "2.28.9-1", "libraries": []}
    env["env"]["NCCL_VERSION"] = "2.28.9-1"
    return env


SKEW_MISSES = {
    "a-probe-that-could-not-read-torchs-nccl": lambda: [
        run("verify", event=100, env=nccl_unread())
    ],
    "a-probe-without-the-systems-side": lambda: [run("verify", event=100, env=system_unread())],
}


def _probe(env: Callable[[], dict[str, Any]]) -> Callable[[], list[Run]]:
    return lambda: [run("check", event=10, env=env())]


# --- output findings, resolved by the same step run again ----------------------------------------


def _step(name: str, id: str, key: str = "serve", exit_code: int = 1) -> Callable[[], list[Run]]:
    command, output = pasted(name, id)
    return lambda: [run(key, command, event=10, exit_code=exit_code, output=output)]


def _again(name: str, id: str, *, exit_code: int, output: str | None = None, key: str = "serve"):
    command, text = pasted(name, id)
    return lambda: [
        run(
            f"{key}-2",
            command,
            step=key,
            event=100,
            exit_code=exit_code,
            output=text if output is None else output,
        )
    ]


OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 139.81 GiB of which 1.12 GiB is free.\n"
)


# --- numpy-abi --------------------------------------------------------------------------------

NUMPY_TWO = snap(numpy="2.4.6", torch="2.11.0+cu130")
NUMPY_ONE = snap(numpy="1.26.4", torch="2.11.0+cu130", **{"opencv-python": "4.8.0.76"})
CHECK = "python -c 'import torch, numpy; torch.from_numpy(numpy.zeros(1))'"


def _flip() -> list[Run]:
    opencv = "pip install opencv-python==4.8.0.76"
    return [run("opencv", opencv, NUMPY_TWO, NUMPY_ONE, event=10)]


def _pinned_down() -> list[Run]:
    down = "pip install numpy==1.26.4"
    return [run("pin-old-numpy", down, snap(numpy="2.4.6"), snap(numpy="1.26.4"), event=10)]


FLIP_MISSES = {
    "an-import-of-numpy-alone": lambda: [
        run(
            "look",
            "python -c 'import numpy; print(numpy.__version__)'",
            event=100,
            output="1.26.4\n",
        )
    ],
    "the-import-check-failed": lambda: [
        run(
            "verify",
            CHECK,
            event=100,
            exit_code=1,
            output=(
                "Traceback (most recent call last):\n"
                '  File "<string>", line 1, in <module>\n'
                "RuntimeError: Numpy is not available\n"
            ),
        )
    ],
    "a-snapshot-with-numpy-still-1": lambda: [
        run(
            "pin",
            "pip install numpy==1.26.3",
            NUMPY_ONE,
            {**NUMPY_ONE, **snap(numpy="1.26.3")},
            event=100,
        )
    ],
}
MESSAGE_MISSES = {
    "same-step-printing-it-again": _again(
        "runtime-numpy-abi.txt", "numpy-abi", exit_code=1, key="main"
    ),
    "an-import-check-without-torch": lambda: [
        run("look", "python -c 'import numpy; numpy.zeros(1)'", event=100)
    ],
}


# --- nccl-changed -----------------------------------------------------------------------------


def allreduce(key: str, busbw: float, nccl: str, *, event: int, mib: str = "1024") -> Figure:
    """A built-in allreduce figure as the H200 pair recorded it (tests/data/h200/bench)."""
    labels = {"mib": mib, "gpus": "2", "nccl": nccl, "benchmark": "allreduce"}
    return Figure("allreduce_busbw", busbw, "GB/s", labels, key, event, "gpu-box")


def _nccl_old() -> dict[str, Any]:
    env = h200_env()
    env["torch"]["nccl"] = env["nccl"] = "2.22.3"
    return env


def _nccl_swap() -> list[Run]:
    return [
        run("verify-old", event=10, env=_nccl_old()),
        run("swap", INSTALL + " --reinstall", OLD, NEW, event=20, env=h200_env()),
    ]


def _nccl_rollback(phase: str, after: dict, *, event: int = 100) -> Run:
    back = run(
        "rollback",
        f"journal rollback --to {phase}:swap --host gpu-box",
        NEW,
        after,
        event=event,
    )
    packages = OLD if phase == "before" else NEW
    back.rollback = {
        "to": f"{phase}:swap",
        "run": "swap",
        "phase": phase,
        "event": 20,
        "packages": {k: v["version"] for k, v in packages.items()},
    }
    return back


def _nccl_found() -> list[Fact]:
    """The allreduce measured under NCCL 2.22.3 (the baseline), then the swap to 2.28.9."""
    return [allreduce("allreduce-old", 319.2, "2.22.3", event=5), *_nccl_swap()]


NCCL_MISSES = {
    "a-figure-of-another-series": lambda: [
        allreduce("allreduce-64", 319.0, "2.28.9", event=100, mib="64")
    ],
    "a-figure-outside-the-threshold": lambda: [
        allreduce("allreduce-after", 300.0, "2.28.9", event=100)
    ],
    "a-rollback-to-the-set-after-the-change": lambda: [_nccl_rollback("after", NEW)],
    "a-rollback-that-did-not-reach-before": lambda: [_nccl_rollback("before", NEW)],
}


# --- throughput-regression, bench-invalid -----------------------------------------------------


def serving(key: str, tok_s: float, *, event: int, concurrency: int = 1, failed: int = 0) -> Run:
    return run(
        key,
        f"python -m sglang.bench_serving --backend sglang --max-concurrency {concurrency} "
        "--num-prompts 32",
        output=(
            "============ Serving Benchmark Result ============\n"
            f"Successful requests:                     {32 - failed}\n"
            + (f"Failed requests:                         {failed}\n" if failed else "")
            + f"Output token throughput (tok/s):         {tok_s}\n"
            "==================================================\n"
        ),
        event=event,
        status="imported",
    )


def _regression() -> list[Run]:
    return [serving("b1", 90.0, event=10), serving("b2", 54.1, event=20)]


THROUGHPUT_MISSES = {
    "a-figure-of-another-series": lambda: [serving("b3", 150.0, event=100, concurrency=8)],
    "a-figure-outside-the-threshold": lambda: [serving("b3", 85.0, event=100)],
    "a-figure-of-a-benchmark-with-failed-requests": lambda: [
        serving("b3", 96.1, event=100, failed=4)
    ],
}

VLLM_SERVE = (
    "vllm bench serve --model meta-llama/Llama-3.1-8B-Instruct --dataset-name random "
    "--random-input-len 1024 --random-output-len 256 --num-prompts 100 --max-concurrency 16"
)
ALL_FAILED = (DATA / "bench" / "vllm-bench-serve-all-failed.txt").read_text()
SERVED = (DATA / "bench" / "vllm-bench-serve.txt").read_text()


def _invalid() -> list[Run]:
    return [run("bench", VLLM_SERVE, event=10, output=ALL_FAILED)]


INVALID_MISSES = {
    "same-step-failing-requests-again": lambda: [
        run("bench-2", VLLM_SERVE, step="bench", event=100, output=ALL_FAILED)
    ],
    "same-step-failed": lambda: [
        run(
            "bench-2",
            VLLM_SERVE,
            step="bench",
            event=100,
            exit_code=1,
            output="ConnectionRefusedError: [Errno 111] Connection refused\n",
        )
    ],
}


# --- snapshot-failed --------------------------------------------------------------------------

REFUSED = "Traceback (most recent call last):\n  ...\nPermissionError: [Errno 13] Permission denied"


def _read(
    key: str,
    *,
    event: int,
    snapshotted: tuple[str, ...] = ("before", "after"),
    misses: list[dict[str, Any]] | None = None,
    env: dict[str, Any] | None = None,
) -> Run:
    out = run(
        key,
        "uv pip install numpy==2.4.6",
        snap(numpy="2.4.5"),
        snap(numpy="2.4.6") if "after" in snapshotted else None,
        event=event,
        env=env,
    )
    out.snapshotted = snapshotted
    out.unread = misses or []
    return out


def _snapshot_failed() -> list[Run]:
    miss = unread("packages", "after", 11, REFUSED)
    return [_read("install-numpy", event=10, snapshotted=("before",), misses=[miss])]


SNAPSHOT_MISSES = {
    "a-later-snapshot-that-failed-again": lambda: [
        _read(
            "install-numpy-2",
            event=100,
            snapshotted=("before",),
            misses=[unread("packages", "after", 101, REFUSED)],
        )
    ],
    "a-probe-but-no-snapshot": lambda: [run("verify", event=100, env=h200_env())],
    "a-snapshot-on-another-host": lambda: [on("other-box", _read("install-numpy-2", event=100))],
}


def _probe_failed() -> list[Run]:
    miss = unread("torch-env", "after", 11, "the probe timed out after 120 s")
    return [_read("install-numpy", event=10, misses=[miss])]


PROBE_FAILED_MISSES = {
    "a-later-run-with-snapshots-but-no-probe": lambda: [_read("install-numpy-2", event=100)],
    "the-same-probe-failing-again": lambda: [
        _read(
            "install-numpy-2",
            event=100,
            misses=[unread("torch-env", "after", 101, "the probe timed out after 120 s")],
        )
    ],
}


# --- step-interrupted -------------------------------------------------------------------------


def _interrupted() -> list[Run]:
    cut = run("install-1", step="install", event=10, exit_code=130, status="interrupted")
    cut.signal, cut.reason = "SIGINT", "interrupted (Ctrl-C)"
    return [cut]


INTERRUPTED_MISSES = {
    "same-step-timed-out": lambda: [
        run("install-2", step="install", event=100, exit_code=None, status="timed-out")
    ],
    "same-step-lost": lambda: [
        run("install-2", step="install", event=100, exit_code=None, status="lost")
    ],
    "same-step-killed": lambda: [
        run("install-2", step="install", event=100, exit_code=137, output="Killed\n")
    ],
    "another-step-went-through": lambda: [run("verify", event=100)],
}

FLASH = "pip install flash-attn --no-build-isolation"


def _interrupted_import() -> list[Run]:
    return [_imported("cmd-1", FLASH, "Building wheel for flash-attn (setup.py) ... |\n^C\n", 10)]


IMPORTED_INTERRUPTED_MISSES = {
    "another-command-of-the-same-name": lambda: [
        _imported(
            "cmd-2", "pip install flash-attn", "Successfully installed flash-attn-2.8.3\n", 100
        )
    ],
}


# --- unverified-change ------------------------------------------------------------------------


def _unverified() -> list[Run]:
    return [run("swap", INSTALL + " --reinstall", OLD, NEW, event=10)]


def _packages_alone(event: int) -> Run:
    return Run(
        key=f"probe-{event}",
        step="probe packages",
        host="gpu-box",
        command="journal run probe packages",
        event=event,
        snapshotted=("probe",),
    )


def _probe_unread(event: int) -> Run:
    return Run(
        key=f"probe-{event}",
        step="probe torch-env",
        host="gpu-box",
        command="journal run probe torch-env",
        event=event,
        unread=[unread("torch-env", None, event, "the probe timed out after 120 s")],
    )


UNVERIFIED_MISSES = {
    "a-probe-in-a-step-that-changed-packages-again": lambda: [
        run(
            "add-vision",
            "uv pip install torchvision",
            NEW,
            {**NEW, **snap(torchvision="0.27.0")},
            event=100,
            env=h200_env(),
        )
    ],
    "a-packages-snapshot-on-its-own": lambda: [_packages_alone(100)],
    "a-probe-that-could-not-be-read": lambda: [_probe_unread(100)],
}


# --- the cases --------------------------------------------------------------------------------


def _cases(id: str, found: Callable[[], list[Run]], at: str, misses: dict) -> list[Any]:
    return [
        pytest.param(Case(id, found, at, later), id=f"{id}:{name}")
        for name, later in misses.items()
    ]


def _printed_rerun(name: str, id: str) -> list[Any]:
    """The commands of a transcript as journal steps, and the step its finding is about run
    again printing exactly the same."""
    subject = from_transcript((TRANSCRIPTS / name).read_text(), name)
    found = next(f for f in judge(subject) if f.id == id)
    source = {r.key: r for r in subject.runs}

    def steps() -> list[Run]:
        return [
            run(r.key, r.command, event=10 * (i + 1), output=r.text)
            for i, r in enumerate(subject.runs)
        ]

    def again() -> list[Fact]:
        r = source[found.run]
        return [run(f"{r.key}-again", r.command, step=r.key, event=100, output=r.text)]

    return [
        pytest.param(
            Case(id, steps, found.run, again),
            id=f"{id}:printed-pair-step-again-printing-the-same-{name.removesuffix('.txt')}",
        )
    ]


FLASHINFER_BEFORE = snap(**{"flashinfer-python": "0.6.13", "flashinfer-cubin": "0.6.13"})
FLASHINFER_SKEWED = snap(**{"flashinfer-python": "0.6.14", "flashinfer-cubin": "0.6.13"})
FLASHINFER_FIXED = snap(**{"flashinfer-python": "0.6.14", "flashinfer-cubin": "0.6.14"})
UPGRADE = "uv pip install -U flashinfer-python"


def _skewed_snapshot() -> list[Run]:
    return [run("upgrade", UPGRADE, FLASHINFER_BEFORE, FLASHINFER_SKEWED, event=10)]


NEAR_MISSES = [
    *_cases("noop-install", _noop, "install-torch", INSTALL_MISSES),
    *_cases("variant-not-switched", _noop, "install-torch", INSTALL_MISSES),
    *_cases("downgrade-cascade", _cascade, "swap", CASCADE_MISSES),
    *_cases("torch-replaced", _replaced, "install-sglang", REPLACED_MISSES),
    pytest.param(
        Case(
            "torch-replaced",
            _replaced,
            "install-sglang",
            lambda: [
                _torch_now(
                    "cpu",
                    "uv pip install torch==2.13.0+cpu --index-url "
                    "https://download.pytorch.org/whl/cpu",
                    "2.13.0+cpu",
                )
            ],
        ),
        id="torch-replaced:a-cpu-build-of-a-higher-version",
    ),
    *_cases("dependency-conflict", _conflict, "install-sglang", CONFLICT_MISSES),
    pytest.param(
        Case(
            "dependency-conflict",
            _conflict,
            "install-sglang",
            lambda: [
                _imported(
                    "cmd-2", "python -m pip check", "/usr/bin/python: No module named pip\n", 100
                )
            ],
        ),
        id="dependency-conflict:imported-pip-check-that-never-ran",
    ),
    *_cases("rollback-incomplete", _incomplete, "rollback-1", ROLLBACK_MISSES),
    *_cases("masked-exit", _masked, "build", MASKED_MISSES),
    *_cases("cpu-torch", _cpu_at_a_print, "look", CPU_MISSES),
    *_cases("arch-unsupported", _probe(blackwell), "check", ARCH_MISSES),
    *_cases(
        "arch-unsupported",
        lambda: [run("name", NAME, event=10, output=ARCH_WARNED)],
        "name",
        {
            "same-step-printing-the-warning-again": lambda: [
                run("name-2", NAME, step="name", event=100, output=ARCH_WARNED)
            ],
            "a-probe-where-torch-failed-at-import": lambda: [
                run("verify", event=100, env=blackwell_no_torch())
            ],
        },
    ),
    *_cases(
        "no-kernel-image",
        _step("runtime-h200-no-kernel-image.txt", "no-kernel-image"),
        "serve",
        {
            "same-step-failing-the-same": _again(
                "runtime-h200-no-kernel-image.txt", "no-kernel-image", exit_code=1
            ),
            "same-step-exit-0-printing-it-again": _again(
                "runtime-h200-no-kernel-image.txt", "no-kernel-image", exit_code=0
            ),
            "same-step-failing-otherwise": _again(
                "runtime-h200-no-kernel-image.txt", "no-kernel-image", exit_code=1, output=OOM
            ),
        },
    ),
    *_cases("driver-too-old", _probe(old_driver), "check", DRIVER_MISSES),
    *_cases(
        "driver-too-old",
        lambda: [run("available", AVAILABLE, event=10, output=TOO_OLD)],
        "available",
        {
            "same-step-warning-again": lambda: [
                run("available-2", AVAILABLE, step="available", event=100, output=TOO_OLD)
            ],
            "a-probe-where-nvml-is-unavailable": lambda: [run("verify", event=100, env=no_nvml())],
        },
    ),
    *_printed_rerun("pub-driver-too-old-v100-cross.txt", "driver-too-old"),
    *_cases("toolkit-mismatch", _probe(mismatched), "check", TOOLKIT_MISSES),
    *_cases(
        "toolkit-mismatch",
        _step("runtime-h200-toolkit-mismatch.txt", "toolkit-mismatch", key="build-ext"),
        "build-ext",
        {
            "same-step-refused-again": _again(
                "runtime-h200-toolkit-mismatch.txt",
                "toolkit-mismatch",
                exit_code=1,
                key="build-ext",
            ),
        },
    ),
    *_printed_rerun("pub-toolkit-mismatch-powershell-collect-env.txt", "toolkit-mismatch"),
    *_cases(
        "abi-mismatch",
        _step("runtime-abi-sgl-kernel.txt", "abi-mismatch"),
        "serve",
        {
            "same-step-failing-the-same": _again(
                "runtime-abi-sgl-kernel.txt", "abi-mismatch", exit_code=1
            ),
            "same-step-failing-otherwise": _again(
                "runtime-abi-sgl-kernel.txt", "abi-mismatch", exit_code=1, output=OOM
            ),
        },
    ),
    *_cases(
        "abi-mismatch",
        _step("pub-abi-xformers-info-cpu-torch.txt", "abi-mismatch", exit_code=0),
        "serve",
        {
            "same-step-exit-0-warning-again": _again(
                "pub-abi-xformers-info-cpu-torch.txt", "abi-mismatch", exit_code=0
            ),
        },
    ),
    *_cases("numpy-abi", _flip, "opencv", FLIP_MISSES),
    *_cases(
        "numpy-abi",
        _step("runtime-numpy-abi.txt", "numpy-abi", key="main"),
        "main",
        MESSAGE_MISSES,
    ),
    *_cases("nccl-changed", _nccl_found, "swap", NCCL_MISSES),
    *_cases("nccl-skew", _probe(h200_env), "check", SKEW_MISSES),
    *_printed_rerun("h200-nccl-skew-printed.txt", "nccl-skew"),
    *_cases(
        "version-guard",
        _step("runtime-flashinfer-cubin.txt", "version-guard"),
        "serve",
        {
            "same-step-refused-again": _again(
                "runtime-flashinfer-cubin.txt", "version-guard", exit_code=1
            ),
            "another-step-went-through": lambda: [run("verify", event=100)],
        },
    ),
    pytest.param(
        Case(
            "version-guard",
            _skewed_snapshot,
            "upgrade",
            lambda: [
                run(
                    "upgrade-2",
                    UPGRADE,
                    FLASHINFER_SKEWED,
                    FLASHINFER_SKEWED,
                    step="upgrade",
                    event=100,
                    output="Audited 1 package in 4ms\n",
                )
            ],
        ),
        id="version-guard:same-step-a-noop-its-snapshot-still-skewed",
    ),
    *_cases("throughput-regression", _regression, "b2", THROUGHPUT_MISSES),
    *_cases("bench-invalid", _invalid, "bench", INVALID_MISSES),
    *_cases("snapshot-failed", _snapshot_failed, "install-numpy", SNAPSHOT_MISSES),
    *_cases("snapshot-failed", _probe_failed, "install-numpy", PROBE_FAILED_MISSES),
    *_cases("step-interrupted", _interrupted, "install-1", INTERRUPTED_MISSES),
    *_cases("step-interrupted", _interrupted_import, "cmd-1", IMPORTED_INTERRUPTED_MISSES),
    *_cases("unverified-change", _unverified, "swap", UNVERIFIED_MISSES),
]


def _fix(
    id: str,
    found: Callable[[], list[Fact]],
    at: str,
    name: str,
    later: Callable[[], list[Fact]],
    why: str,
) -> Any:
    return pytest.param(Case(id, found, at, later), why, id=f"{id}:{name}")


MATCHES = [
    _fix("noop-install", _noop, "install-torch", "same-request-reinstalled", *INSTALL_FIX),
    _fix("variant-not-switched", _noop, "install-torch", "same-request-reinstalled", *INSTALL_FIX),
    _fix(
        "downgrade-cascade",
        _cascade,
        "swap",
        "every-package-back",
        lambda: [
            _pin(
                "pin", "uv pip install numpy==2.4.2 pillow==12.1.1", numpy="2.4.2", pillow="12.1.1"
            )
        ],
        "after pin on gpu-box: numpy 2.4.2, pillow 12.1.1 again",
    ),
    _fix(
        "downgrade-cascade",
        _cascade,
        "swap",
        "back-and-above",
        lambda: [_pin("upgrade", "uv pip install -U numpy pillow", numpy="2.4.3", pillow="12.1.1")],
        "after upgrade on gpu-box: numpy 2.4.3, pillow 12.1.1 again",
    ),
    _fix(
        "torch-replaced",
        _replaced,
        "install-sglang",
        "the-nightly-back",
        lambda: [
            _torch_now(
                "restore",
                f"uv pip install torch=={NIGHTLY} --index-url "
                "https://download.pytorch.org/whl/nightly/cu130",
                NIGHTLY,
            )
        ],
        f"after restore on gpu-box: torch {NIGHTLY} again",
    ),
    _fix(
        "dependency-conflict",
        _conflict,
        "install-sglang",
        "a-clean-pip-check",
        lambda: [run("check", "pip check", event=200, output="No broken requirements found.\n")],
        "`pip check` on gpu-box found no broken requirement",
    ),
    _fix(
        "dependency-conflict",
        _conflict,
        "install-sglang",
        "an-imported-clean-uv-pip-check",
        lambda: [
            _imported(
                "cmd-2",
                "uv pip check",
                "Checked 187 packages in 4ms\nAll installed packages are compatible\n",
                200,
            )
        ],
        "`uv pip check` on gpu-box found no broken requirement",
    ),
    _fix(
        "dependency-conflict",
        _conflict,
        "install-sglang",
        "same-step-again-without-it",
        lambda: [
            run(
                "install-sglang-2",
                "pip install sglang==0.5.9",
                step="install-sglang",
                event=200,
                output="Successfully installed sglang-0.5.9\n",
            )
        ],
        "install-sglang ran again on gpu-box and went through without dependency-conflict",
    ),
    _fix(
        "rollback-incomplete",
        _incomplete,
        "rollback-1",
        "same-rollback-reached",
        lambda: [_rollback("rollback-2", REACHED, event=200)],
        "rollback ran again on gpu-box and went through without rollback-incomplete",
    ),
    _fix(
        "masked-exit",
        _masked,
        "build",
        "same-step-built",
        lambda: [
            run(
                "build-2",
                BUILD,
                step="build",
                event=200,
                output="Successfully installed flash-attn-2.8.3\n",
            )
        ],
        "build ran again on gpu-box and went through without masked-exit",
    ),
    _fix(
        "cpu-torch",
        _cpu_at_a_print,
        "look",
        "a-probe-of-the-cuda-build",
        lambda: [run("verify", event=200, env=h200_env())],
        "the torch-env probe after verify on gpu-box no longer shows it",
    ),
    _fix(
        "cpu-torch",
        _cpu_at_a_print,
        "look",
        "a-probe-on-its-own-of-the-cuda-build",
        lambda: [alone(200, h200_env())],
        "the torch-env probe on its own on gpu-box no longer shows it",
    ),
    _fix(
        "cpu-torch",
        _cpu_at_a_print,
        "look",
        "same-print-step-printing-a-cuda-build",
        lambda: [run("look-2", LOOK, step="look", event=200, output="2.11.0+cu130 13.0\n")],
        "look ran again on gpu-box and went through without cpu-torch",
    ),
    _fix(
        "arch-unsupported",
        _probe(blackwell),
        "check",
        "a-probe-of-a-torch-with-sm_120",
        lambda: [run("verify", event=200, env=ARCH_FIX)],
        "the torch-env probe after verify on gpu-box no longer shows it",
    ),
    _fix(
        "arch-unsupported",
        lambda: [run("name", NAME, event=10, output=ARCH_WARNED)],
        "name",
        "same-step-without-the-warning",
        lambda: [run("name-2", NAME, step="name", event=200, output="NVIDIA GeForce RTX 5090\n")],
        "name ran again on gpu-box and went through without arch-unsupported",
    ),
    _fix(
        "no-kernel-image",
        _step("runtime-h200-no-kernel-image.txt", "no-kernel-image"),
        "serve",
        "same-step-went-through",
        _again(
            "runtime-h200-no-kernel-image.txt",
            "no-kernel-image",
            exit_code=0,
            output="tensor([1., 1., 1., 1.], device='cuda:0')\n",
        ),
        "serve ran again on gpu-box and went through without no-kernel-image",
    ),
    _fix(
        "driver-too-old",
        _probe(old_driver),
        "check",
        "a-probe-of-a-new-enough-driver",
        lambda: [run("verify", event=200, env=h200_env())],
        "the torch-env probe after verify on gpu-box no longer shows it",
    ),
    _fix(
        "driver-too-old",
        lambda: [run("available", AVAILABLE, event=10, output=TOO_OLD)],
        "available",
        "same-step-cuda-available",
        lambda: [run("available-2", AVAILABLE, step="available", event=200, output="True\n")],
        "available ran again on gpu-box and went through without driver-too-old",
    ),
    _fix(
        "toolkit-mismatch",
        _probe(mismatched),
        "check",
        "a-probe-of-a-matching-nvcc",
        lambda: [alone(200, h200_env())],
        "the torch-env probe on its own on gpu-box no longer shows it",
    ),
    _fix(
        "toolkit-mismatch",
        _step("runtime-h200-toolkit-mismatch.txt", "toolkit-mismatch", key="build-ext"),
        "build-ext",
        "same-step-built",
        _again(
            "runtime-h200-toolkit-mismatch.txt",
            "toolkit-mismatch",
            exit_code=0,
            key="build-ext",
            output="running build_ext\ncopying build/lib.linux-x86_64-"
            "cpython-312/sm80_only.cpython-312-x86_64-linux-gnu.so -> \n",
        ),
        "build-ext ran again on gpu-box and went through without toolkit-mismatch",
    ),
    _fix(
        "abi-mismatch",
        _step("runtime-abi-sgl-kernel.txt", "abi-mismatch"),
        "serve",
        "same-step-imported-it",
        _again("runtime-abi-sgl-kernel.txt", "abi-mismatch", exit_code=0, output=""),
        "serve ran again on gpu-box and went through without abi-mismatch",
    ),
    _fix(
        "numpy-abi",
        _flip,
        "opencv",
        "a-passing-import-check",
        lambda: [run("verify", CHECK, event=200)],
        "verify on gpu-box imported numpy, torch without complaint",
    ),
    _fix(
        "numpy-abi",
        _pinned_down,
        "pin-old-numpy",
        "numpy-2-back",
        lambda: [
            run(
                "numpy-2",
                "pip install 'numpy>=2'",
                snap(numpy="1.26.4"),
                snap(numpy="2.4.6"),
                event=200,
            )
        ],
        "after numpy-2 on gpu-box: numpy 2.4.6, the major it had before",
    ),
    pytest.param(
        Case(
            "numpy-abi",
            _flip,
            "opencv",
            lambda: [
                run(
                    "numpy-2",
                    "pip install 'numpy>=2'",
                    NUMPY_ONE,
                    {**NUMPY_ONE, **snap(numpy="2.4.6")},
                    event=200,
                )
            ],
        ),
        "after numpy-2 on gpu-box: numpy 2.4.6, the major it had before",
        id="numpy-abi:numpy-2-back-after-a-flip-that-pulled-another-package",
    ),
    _fix(
        "numpy-abi",
        _step("runtime-numpy-abi.txt", "numpy-abi", key="main"),
        "main",
        "a-passing-import-check",
        lambda: [run("verify", CHECK, event=200)],
        "verify on gpu-box imported numpy, torch without complaint",
    ),
    _fix(
        "nccl-changed",
        _nccl_found,
        "swap",
        "an-allreduce-back-at-its-baseline",
        lambda: [allreduce("allreduce-back", 316.0, "2.28.9", event=200)],
        "under the new NCCL was 316.00 GB/s, -1.0% against its baseline of 319.20 GB/s before "
        "the change",
    ),
    _fix(
        "nccl-changed",
        _nccl_found,
        "swap",
        "a-rollback-to-before-the-change",
        lambda: [_nccl_rollback("before", OLD, event=200)],
        "the rollback on gpu-box to before:swap reached it",
    ),
    _fix(
        "nccl-skew",
        _probe(h200_env),
        "check",
        "a-probe-of-aligned-nccls",
        lambda: [run("verify", event=200, env=nccl_aligned())],
        "the torch-env probe after verify on gpu-box no longer shows it",
    ),
    _fix(
        "version-guard",
        _step("runtime-flashinfer-cubin.txt", "version-guard"),
        "serve",
        "same-step-went-through",
        _again(
            "runtime-flashinfer-cubin.txt",
            "version-guard",
            exit_code=0,
            output="INFO:     Uvicorn running on http://0.0.0.0:8000\n",
        ),
        "serve ran again on gpu-box and went through without version-guard",
    ),
    _fix(
        "version-guard",
        _skewed_snapshot,
        "upgrade",
        "same-step-aligning-the-cubin",
        lambda: [
            run(
                "upgrade-2",
                UPGRADE + " flashinfer-cubin",
                FLASHINFER_SKEWED,
                FLASHINFER_FIXED,
                step="upgrade",
                event=200,
            )
        ],
        "after upgrade on gpu-box: flashinfer's wheels at 0.6.14",
    ),
    _fix(
        "throughput-regression",
        _regression,
        "b2",
        "a-figure-back-within-5-percent",
        lambda: [serving("b3", 86.0, event=200)],
        "Output token throughput was back to 86.00 tok/s (+59.0% against 54.10 tok/s; the "
        "reference was 90.00 tok/s)",
    ),
    _fix(
        "bench-invalid",
        _invalid,
        "bench",
        "same-step-every-request-succeeded",
        lambda: [run("bench-2", VLLM_SERVE, step="bench", event=200, output=SERVED)],
        "bench ran again on gpu-box and went through without bench-invalid",
    ),
    _fix(
        "snapshot-failed",
        _snapshot_failed,
        "install-numpy",
        "a-later-snapshot-read",
        lambda: [_read("install-numpy-2", event=200)],
        "a packages snapshot read the env of gpu-box again in install-numpy-2 (install-numpy-2)"
        "; install-numpy (run install-numpy) itself stays unjudged",
    ),
    _fix(
        "snapshot-failed",
        _snapshot_failed,
        "install-numpy",
        "a-packages-snapshot-on-its-own",
        lambda: [_packages_alone(200)],
        "a packages snapshot read the env of gpu-box again on its own",
    ),
    _fix(
        "snapshot-failed",
        _probe_failed,
        "install-numpy",
        "the-probe-read-on-its-own",
        lambda: [alone(200, h200_env())],
        "the torch-env probe read the env of gpu-box again on its own",
    ),
    _fix(
        "step-interrupted",
        _interrupted,
        "install-1",
        "same-step-to-the-end",
        lambda: [run("install-2", step="install", event=200)],
        "install ran again on gpu-box and went through without step-interrupted",
    ),
    _fix(
        "step-interrupted",
        _interrupted_import,
        "cmd-1",
        "the-same-command-to-the-end",
        lambda: [_imported("cmd-2", FLASH, "Successfully installed flash-attn-2.8.3\n", 200)],
        "pip-install-flash-attn ran again on gpu-box and went through without step-interrupted",
    ),
    _fix(
        "unverified-change",
        _unverified,
        "swap",
        "a-probe-on-its-own",
        lambda: [alone(200, h200_env())],
        "the torch-env probe ran on its own on gpu-box",
    ),
    _fix(
        "unverified-change",
        _unverified,
        "swap",
        "a-probe-in-a-step-that-changed-nothing",
        lambda: [run("verify", event=200, env=h200_env())],
        "the torch-env probe ran after verify on gpu-box",
    ),
]


@pytest.mark.parametrize("case", NEAR_MISSES)
def test_a_near_miss_resolves_nothing(case: Case) -> None:
    _near(case)


@pytest.mark.parametrize(("case", "why"), MATCHES)
def test_the_real_match_resolves_and_says_why(case: Case, why: str) -> None:
    _match(case, why)


def test_every_pitfall_of_the_catalogue_has_near_misses_and_a_match() -> None:
    from journal.pitfalls import detectors

    ids = {module.ID for module in detectors()}
    missed = {p.values[0].id for p in NEAR_MISSES}
    matched = {p.values[0].id for p in MATCHES}
    assert ids - missed == set() and ids - matched == set()


def test_a_near_miss_then_the_real_match_is_resolved_by_the_match() -> None:
    """The near misses before the fix change nothing: the fix is what resolves (cpu-torch,
    the known case: the print step again, then an unreadable probe, then the CUDA probe)."""
    runs = [
        *_cpu_at_a_print(),
        run("look-2", LOOK, step="look", event=100, output="2.13.0+cpu None\n"),
        run("verify", event=110, env=no_torch()),
        run("verify-2", step="verify", event=120, env=h200_env()),
    ]
    (one,) = of(_judged(runs), "cpu-torch")
    assert one.run == "look" and one.state == "resolved"
    assert one.resolved_by is not None and one.resolved_by.run == "verify-2"
