"""`journal run probe NAME` on the `local` host: custom probes (`json = true` and `capture`),
their failures, the runbook errors that refuse them, and the built-in `packages` and
`torch-env` run by journal's own python (which has pytest and no torch)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from journal.events import Event, PackagesSnapshotted, ProbeRecorded
from journal.store import EventStore
from tests.helpers import journal, no_traceback, text, write_runbook

JOURNAL = "probes"
HEAD = f"""[journal]
name = "{JOURNAL}"

[hosts.here]
ssh = "local"
python = {json.dumps(sys.executable)}
"""

#: What a `json = true` probe prints: the serving stack's versions, as a team might record them.
STACK = {"sglang": "0.5.9", "kernels": {"sgl-kernel": "0.3.21", "flashinfer": "0.6.3"}, "ok": True}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("JOURNAL_DB", "JOURNAL_RUNBOOK"):
        env.pop(name, None)
    return env


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    result = journal(
        *args,
        db=folder / "journal.db",
        runbook=folder / "runbook.toml",
        env=_env(),
        cwd=folder,
    )
    assert no_traceback(result), text(result.stderr)
    return result


def events(folder: Path) -> list[Event]:
    store = EventStore(str(folder / "journal.db"))
    try:
        return [rec.event for rec in store.read(JOURNAL)]
    finally:
        store.close()


def probes_recorded(folder: Path) -> list[ProbeRecorded]:
    return [e for e in events(folder) if isinstance(e, ProbeRecorded)]


def toml(value: Any) -> str:
    return json.dumps(value)


def python_printing(*lines: str) -> str:
    """A shell command in which journal's python prints ``lines``."""
    code = "".join(f"print({line!r})\n" for line in lines)
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


# --- json = true -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "banner", [(), ("loading the env...",)], ids=["json-only", "banner-then-json"]
)
def test_a_json_probe_is_recorded_summarised_and_printed(
    tmp_path: Path, banner: tuple[str, ...]
) -> None:
    command = python_printing(*banner, json.dumps(STACK))
    write_runbook(tmp_path, HEAD + f"\n[probes.stack]\nrun = {toml(command)}\njson = true\n")
    result = cli(tmp_path, "run", "probe", "stack", "--json")
    assert result.returncode == 0, text(result.stderr)
    assert json.loads(result.stdout) == {"here": STACK}
    summary = 'sglang=0.5.9, kernels={"sgl-kernel": "0.3.21", "flashinfer": "0.6.3"}, ok=true'
    assert f"journal: stack on here: {summary}\n" in text(result.stderr)
    (probe,) = probes_recorded(tmp_path)
    assert (probe.host_name, probe.probe, probe.result, probe.error, probe.run) == (
        "here",
        "stack",
        STACK,
        None,
        None,
    )
    assert probe.seconds > 0
    log = text(cli(tmp_path, "log").stdout)
    assert "probe stack on here: " in log


# --- capture ---------------------------------------------------------------------------------


def smi(expect: str = "") -> str:
    """A capture probe reading nvidia-smi's shape of output (one line of it on stderr)."""
    return rf"""
[probes.smi]
run = "printf 'driver 580.159.04\nCUDA Version: 13.0\n'; printf 'GPUs: 8\n' >&2"
{expect}

[probes.smi.capture]
driver = "driver ([\\d.]+)"
cuda = "CUDA Version: ([\\d.]+)"
gpus = "GPUs: (\\d+)"
fabric = "Fabric Manager: (\\w+)"
"""


def test_a_capture_probe_records_each_group_and_marks_what_did_not_match(tmp_path: Path) -> None:
    write_runbook(tmp_path, HEAD + smi())
    plain = cli(tmp_path, "run", "probe", "smi")
    assert plain.returncode == 0, text(plain.stderr)
    assert plain.stdout == b""
    # The field whose regex did not match is unreadable, and says why; the probe still counts.
    missing = {"unavailable": r"the output has no match for /Fabric Manager: (\w+)/"}
    expected = {"driver": "580.159.04", "cuda": "13.0", "gpus": "8", "fabric": missing}
    assert "journal: smi on here: driver=580.159.04, cuda=13.0, gpus=8, fabric=?\n" in text(
        plain.stderr
    )
    as_json = cli(tmp_path, "run", "probe", "smi", "--json")
    assert as_json.returncode == 0, text(as_json.stderr)
    assert json.loads(as_json.stdout) == {"here": expected}
    recorded = probes_recorded(tmp_path)
    assert [(p.probe, p.result, p.error) for p in recorded] == [("smi", expected, None)] * 2


def test_expectations_read_captured_text_and_unmatched_fields(tmp_path: Path) -> None:
    write_runbook(
        tmp_path,
        HEAD + smi('expect = { driver = ">=580", cuda = "13.0", fabric = "Running" }'),
    )
    result = cli(tmp_path, "run", "probe", "smi")
    assert result.returncode == 1, text(result.stderr)
    stderr = text(result.stderr)
    assert "[ok  ] expect driver = '>=580' on here (580.159.04)" in stderr
    assert "[ok  ] expect cuda = '13.0' on here (13.0)" in stderr
    assert (
        r"[FAIL] expect fabric = 'Running' on here - fabric cannot be read: "
        r"the output has no match for /Fabric Manager: (\w+)/"
    ) in stderr
    (probe,) = probes_recorded(tmp_path)
    assert probe.error is None and probe.result is not None


# --- probes that fail ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("table", "error"),
    [
        (
            'run = "echo no GPU here >&2; exit 1"\njson = true',
            "the probe failed with exit status 1: no GPU here",
        ),
        (
            "run = \"echo 'NVIDIA-SMI has failed'\"\njson = true",
            "the probe printed no JSON object (Expecting value: line 1 column 1 (char 0)): "
            "NVIDIA-SMI has failed",
        ),
        (
            'run = "echo [8]"\njson = true',
            "the probe printed no JSON object (expected a JSON object, got list): [8]",
        ),
        (
            'run = "echo driver 580; exit 1"\ncapture = { driver = "driver (\\\\d+)" }',
            "the probe failed with exit status 1: driver 580",
        ),
    ],
    ids=["exit-1", "not-json", "not-an-object", "capture-exit-1"],
)
def test_a_failing_probe_is_recorded_with_its_error_and_exits_1(
    tmp_path: Path, table: str, error: str
) -> None:
    write_runbook(tmp_path, HEAD + f"\n[probes.gpu]\n{table}\n")
    result = cli(tmp_path, "run", "probe", "gpu", "--json")
    assert result.returncode == 1, text(result.stderr)
    assert json.loads(result.stdout) == {"here": None}
    assert f"journal: probe gpu on here failed: {error}\n" in text(result.stderr)
    (probe,) = probes_recorded(tmp_path)
    assert (probe.probe, probe.result, probe.error) == ("gpu", None, error)
    assert f"probe gpu on here: FAILED: {error}" in text(cli(tmp_path, "log").stdout)


# --- runbook errors: exit 2, the line and the key path, nothing recorded ----------------------


def _line_of(runbook: str, needle: str) -> int:
    return 1 + next(i for i, row in enumerate(runbook.splitlines()) if needle in row)


@pytest.mark.parametrize(
    ("table", "needle", "where", "says"),
    [
        (
            '[probes.smi]\nrun = "nvidia-smi"\ncapture = { driver = "driver [\\\\d.]+" }',
            "capture =",
            "probes.smi.capture.driver",
            "the regex needs exactly one group (it has 0)",
        ),
        (
            '[probes.smi]\nrun = "nvidia-smi"\ncapture = { driver = "(driver) ([\\\\d.]+)" }',
            "capture =",
            "probes.smi.capture.driver",
            "the regex needs exactly one group (it has 2)",
        ),
        (
            '[probes.smi]\nrun = "nvidia-smi"\ncapture = { driver = "driver ([\\\\d.]+" }',
            "capture =",
            "probes.smi.capture.driver",
            "not a valid regex: missing ), unterminated subpattern",
        ),
        (
            '[probes.smi]\nrun = "nvidia-smi"\njson = true\ncapture = { driver = "d (.+)" }',
            "[probes.smi]",
            "probes.smi",
            'give either json = true or capture = { field = "regex" }',
        ),
        (
            '[probes.smi]\nrun = "nvidia-smi"',
            "[probes.smi]",
            "probes.smi",
            'give either json = true or capture = { field = "regex" }',
        ),
        (
            '[probes.smi]\nrun = "nvidia-smi"\njson = true\nexpct = { driver = ">=580" }',
            "expct",
            "probes.smi.expct",
            "unknown key (did you mean 'expect'?)",
        ),
        (
            '[probes.torch-env]\ntimeout = 60\nrun = "python -m torch.utils.collect_env"',
            "run =",
            "probes.torch-env.run",
            "torch-env is built in",
        ),
        (
            '[[steps]]\nname = "verify"\nrun = "true"\nprobes = ["packages", "torch-evn"]',
            "probes =",
            "steps[0].probes",
            "no probe named 'torch-evn' (did you mean 'torch-env'?)",
        ),
    ],
    ids=[
        "no-group",
        "two-groups",
        "invalid-regex",
        "json-and-capture",
        "neither",
        "unknown-key",
        "run-on-builtin",
        "unknown-step-probe",
    ],
)
def test_a_bad_probe_in_the_runbook_is_refused_with_line_and_key(
    tmp_path: Path, table: str, needle: str, where: str, says: str
) -> None:
    runbook = HEAD + "\n" + table + "\n"
    write_runbook(tmp_path, runbook)
    result = cli(tmp_path, "run", "probe", "packages")
    assert result.returncode == 2
    message = text(result.stderr)
    assert message.startswith("journal: ") and message.count("\n") == 1
    assert f"runbook.toml, line {_line_of(runbook, needle)}, {where}: " in message
    assert says in message
    assert not (tmp_path / "journal.db").exists()


def test_an_unknown_probe_on_the_command_line_suggests_the_close_one(tmp_path: Path) -> None:
    write_runbook(tmp_path, HEAD)
    result = cli(tmp_path, "run", "probe", "torch-evn")
    assert result.returncode == 2
    assert "no probe named 'torch-evn' (did you mean 'torch-env'?)" in text(result.stderr)
    assert not (tmp_path / "journal.db").exists()


# --- the built-in probes, run by journal's own python ---------------------------------------


def test_run_probe_packages_records_a_snapshot(tmp_path: Path) -> None:
    write_runbook(tmp_path, HEAD)
    result = cli(tmp_path, "run", "probe", "packages", "--json")
    assert result.returncode == 0, text(result.stderr)
    recorded = events(tmp_path)
    (snapshot,) = [e for e in recorded if isinstance(e, PackagesSnapshotted)]
    assert (snapshot.host_name, snapshot.phase, snapshot.run) == ("here", "probe", None)
    assert snapshot.python == sys.executable
    pytest_dist = metadata.distribution("pytest")
    entry = snapshot.packages["pytest"]
    assert (entry["name"], entry["version"]) == ("pytest", pytest_dist.version)
    assert entry["installer"] == (pytest_dist.read_text("INSTALLER") or "").strip()
    assert snapshot.packages["sqlalchemy"]["version"] == metadata.version("sqlalchemy")
    assert snapshot.packages["fabric"]["version"] == metadata.version("fabric")
    assert "torch" not in snapshot.packages
    assert json.loads(result.stdout) == {
        "here": {"executable": sys.executable, "packages": snapshot.packages}
    }
    count = len(snapshot.packages)
    assert f"journal: packages on here: {count} packages in {sys.executable}\n" in text(
        result.stderr
    )


def test_run_probe_torch_env_without_torch_says_why_and_succeeds(tmp_path: Path) -> None:
    write_runbook(tmp_path, HEAD)
    result = cli(tmp_path, "run", "probe", "torch-env")
    assert result.returncode == 0, text(result.stderr)
    (probe,) = probes_recorded(tmp_path)
    assert probe.probe == "torch-env" and probe.error is None and probe.result is not None
    no_torch = {"unavailable": "torch is not installed in this python"}
    assert probe.result["torch"]["version"] == no_torch
    assert probe.result["executable"] == sys.executable
    assert "journal: torch-env on here: torch ? (CUDA ?)" in text(result.stderr)
