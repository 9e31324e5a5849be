"""The torch-env probe on real torch builds: a CPU torch over SSH here, and the output it
printed on a real H200 host (tests/data/h200/, captured by tests/data/h200/capture.sh)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from journal.events import ProbeRecorded
from journal.probes.scripts.torch_env import parse_smi_csv, parse_smi_header
from journal.probes.summary import summary
from journal.store import EventStore
from tests.helpers import journal, text, write_runbook
from tests.sshd import SshHome, SshServer
from tests.torch_venv import torch_venv

H200 = Path(__file__).parent / "data" / "h200"


def h200(name: str) -> dict:
    return json.loads((H200 / name).read_text())


@pytest.fixture(scope="module")
def torch_python() -> Path:
    return torch_venv()


def _runbook(folder: Path, server: SshServer, python: Path, extra: str = "") -> Path:
    return write_runbook(
        folder,
        f'[journal]\nname = "torch-probe"\n[hosts.box]\nssh = "{server.alias}"\n'
        f'python = "{python}"\n{extra}',
    )


@pytest.mark.parametrize("import_torch", [False, True], ids=["files", "import-torch"])
def test_a_cpu_torch_probed_over_ssh_says_what_it_is(
    tmp_path: Path, sshd: SshServer, ssh_home: SshHome, torch_python: Path, import_torch: bool
) -> None:
    extra = "[probes.torch-env]\nimport_torch = true\n" if import_torch else ""
    rb = _runbook(tmp_path, sshd, torch_python, extra)
    db = tmp_path / "journal.db"
    result = journal("run", "probe", "torch-env", "--json", db=db, runbook=rb, env=ssh_home.env())
    assert result.returncode == 0, text(result.stderr)
    found = json.loads(result.stdout)["box"]
    t = found["torch"]
    assert t["version"] == "2.13.0+cpu"
    assert t["cuda"] is None
    assert t["cuda_available"] is False and t["device_count"] == 0 and t["devices"] == []
    assert found["gpu_count"] == 0
    assert "CPU build" in found["nccl"]["unavailable"]
    # No GPU here: NVML is unavailable, and says why rather than failing the probe.
    assert "pynvml" in found["nvml"]["unavailable"]
    assert "nvidia-smi" in found["nvml"]["unavailable"]
    assert found["executable"] == str(torch_python)
    assert b"torch 2.13.0+cpu (CPU build)" in result.stderr and b"CUDA None" not in result.stderr
    store = EventStore(str(db))
    try:
        probes = [r.event for r in store.read("torch-probe") if isinstance(r.event, ProbeRecorded)]
    finally:
        store.close()
    assert [(p.probe, p.host_name, p.error) for p in probes] == [("torch-env", "box", None)]
    assert probes[0].result == found
    status = journal("status", db=db, runbook=rb, env=ssh_home.env())
    assert b"torch 2.13.0+cpu (CPU build), NCCL ?" in status.stdout, text(status.stdout)


def test_a_step_over_ssh_checks_expectations_on_the_cpu_torch(
    tmp_path: Path, sshd: SshServer, ssh_home: SshHome, torch_python: Path
) -> None:
    steps = (
        '[[steps]]\nname = "check"\nrun = "true"\nprobes = ["torch-env"]\n'
        'expect = { "torch.version" = "*+cpu", "gpu_count" = 0, "packages.torch" = "==2.13.0" }\n'
        '[[steps]]\nname = "want-cuda"\nrun = "true"\nprobes = ["torch-env"]\n'
        'expect = { "torch.version" = "*+cu130" }\n'
    )
    rb = _runbook(tmp_path, sshd, torch_python, steps)
    db = tmp_path / "journal.db"
    ok = journal("run", "step", "check", db=db, runbook=rb, env=ssh_home.env())
    assert ok.returncode == 0, text(ok.stderr)
    bad = journal("run", "step", "want-cuda", db=db, runbook=rb, env=ssh_home.env())
    assert bad.returncode == 1
    assert b"torch.version is 2.13.0+cpu, expected *+cu130" in bad.stderr
    log = journal("log", db=db, runbook=rb, env=ssh_home.env()).stdout
    assert b"[ok  ] expect packages.torch = '==2.13.0' (2.13.0+cpu)" in log
    assert b"[FAIL] expect torch.version = '*+cu130'" in log


# --- real GPU output, captured on an H200 host ---------------------------------------------


def test_nvidia_smi_parsers_read_the_real_h200_output() -> None:
    devices = parse_smi_csv((H200 / "nvidia-smi-query.csv").read_text())
    assert len(devices) == 1
    gpu = devices[0]
    assert (gpu["index"], gpu["name"], gpu["capability"]) == (0, "NVIDIA H200", "9.0")
    assert gpu["memory_total_mib"] == 143771 and gpu["driver"] == "580.159.04"
    assert gpu["uuid"].startswith("GPU-")
    banner = parse_smi_header((H200 / "nvidia-smi.txt").read_text())
    assert banner == {"driver": "580.159.04", "cuda_driver": "13.0"}


def test_the_nvidia_smi_fallback_agreed_with_nvml_on_the_h200() -> None:
    nvml, smi = h200("torch-env.json")["nvml"], h200("torch-env-no-pynvml.json")["nvml"]
    assert (nvml["source"], smi["source"]) == ("pynvml", "nvidia-smi")
    assert (smi["driver"], smi["cuda_driver"]) == (nvml["driver"], nvml["cuda_driver"])
    keep = ("name", "capability", "memory_total_mib")
    assert [{k: d[k] for k in keep} for d in smi["devices"]] == [
        {k: d[k] for k in keep} for d in nvml["devices"]
    ]


def test_without_importing_torch_the_probe_read_what_torch_itself_said_on_the_h200() -> None:
    fast, deep = h200("torch-env.json"), h200("torch-env-import.json")
    for key in ("version", "cuda", "cudnn", "nccl", "arch_list", "cuda_available", "device_count"):
        assert fast["torch"][key] == deep["torch"][key], key
    assert fast["torch"]["arch_list"] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert (H200 / "torch-arch.txt").read_text().startswith("sm_75 sm_80 sm_86 sm_90 sm_100 sm_120")
    assert fast["torch_imported"] is False and "import_torch" in deep["seconds"]
    assert fast["seconds"]["total"] < deep["seconds"]["total"] / 4


def test_the_h200_capture_reports_what_collect_env_does_not() -> None:
    found = h200("torch-env.json")
    assert summary("torch-env", found) == (
        "torch 2.11.0+cu130 (CUDA 13.0), NCCL 2.28.9, driver 580.159.04 (CUDA 13.0), "
        "1 GPU NVIDIA H200 (sm 9.0), nvcc 13.0"
    )
    # The wheel's NCCL is not the system's: what the nccl-skew pitfall will point at.
    assert found["system_nccl"]["NCCL_VERSION"] == "2.28.3-1"
    assert found["system_nccl"]["libraries"][0]["version"] == "2.28.3"
    assert found["env"]["TORCH_CUDA_ARCH_LIST"] == "9.0a"
    assert found["packages"]["nvidia-nccl-cu13"] == "2.28.9"
