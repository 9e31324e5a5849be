"""The supervisor a step runs under: the step's env never appears in a process's argv, and
the script that carries it is gone from the host's disk once the command started; a probe's
env is in no argv either (its script comes on the shell's stdin), locally and over SSH."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import JOURNAL, text, write_runbook
from tests.test_ssh_steps import _wait_for

SECRET = "tok-argv-Qp3Zs8xW"


def _argv_holding(value: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if value.encode() in argv:
                found.append(argv.replace(b"\0", b" ").decode(errors="replace"))
    return found


def test_the_steps_env_is_in_no_argv_and_its_script_removes_itself(tmp_path: Path) -> None:
    marker, go = tmp_path / "pid", tmp_path / "go"
    rb = write_runbook(
        tmp_path,
        '[journal]\nname = "sup"\n\n[hosts.here]\nssh = "local"\n\n[[steps]]\nname = "s"\n'
        f'snapshots = false\nenv = {{ API_TOKEN = "{SECRET}" }}\n'
        f'run = "echo $$ > {marker}; while [ ! -e {go} ]; do sleep 0.05; done; '
        'test -n \\"$API_TOKEN\\" && echo has-token"\n',
    )
    db = tmp_path / "journal.db"
    runs = Path.home() / ".journal" / "runs"
    before = set(runs.iterdir()) if runs.exists() else set()
    proc = subprocess.Popen(
        [*JOURNAL, "--db", str(db), "--runbook", str(rb), "run", "step", "s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for(marker)
        assert _argv_holding(SECRET) == []
        mine = [d for d in runs.iterdir() if d not in before]
        assert mine, "the step's spool folder"
        deadline = time.monotonic() + 10
        while any((d / "script").exists() for d in mine):
            assert time.monotonic() < deadline, "a script is still on disk"
            time.sleep(0.05)
    finally:
        go.write_text("")
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, text(err)
    assert b"has-token" in out  # the command had its env all the same


PROBE_SECRET = "tok-probe-argv-Wm4Rt7"


@pytest.mark.parametrize("over", ["local", "ssh"])
def test_a_probes_env_is_in_no_argv_locally_or_over_ssh(
    tmp_path: Path, over: str, request: pytest.FixtureRequest
) -> None:
    marker, go = tmp_path / "pid", tmp_path / "go"
    env = None
    target = "local"
    if over == "ssh":
        target = request.getfixturevalue("sshd").alias
        env = request.getfixturevalue("ssh_home").env()
    rb = write_runbook(
        tmp_path,
        f'[journal]\nname = "sup"\n\n[hosts.here]\nssh = "{target}"\n'
        f'env = {{ API_TOKEN = "{PROBE_SECRET}" }}\n\n[probes.wait]\njson = true\n'
        f"run = '''echo $$ > {marker}; while [ ! -e {go} ]; do sleep 0.05; done; "
        'test -n "$API_TOKEN" && echo \'{"has": "the token"}\'\'\'\'\n',
    )
    proc = subprocess.Popen(
        [*JOURNAL, "--db", str(tmp_path / "journal.db"), "--runbook", str(rb)]
        + ["run", "probe", "wait", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        _wait_for(marker)
        assert _argv_holding(PROBE_SECRET) == []
    finally:
        go.write_text("")
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, text(err)
    assert b"the token" in out  # the probe had its env all the same
