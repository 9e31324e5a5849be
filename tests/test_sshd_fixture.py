"""The real-sshd fixtures work with the OpenSSH client and with Fabric."""

from __future__ import annotations

import subprocess

import fabric
import pytest

from tests.sshd import SshHome, SshServer


def _ssh(home: SshHome, alias: str, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/usr/bin/ssh", "-F", str(home.config_path), "-o", "BatchMode=yes", alias, command],
        env=home.env(),
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize("index", [0, 1, 2])
def test_openssh_client_runs_command(
    ssh_home: SshHome, sshd_fleet: list[SshServer], index: int
) -> None:
    server = sshd_fleet[index]
    result = _ssh(ssh_home, server.alias, "echo hello; echo err >&2; exit 3")
    assert result.stdout == "hello\n", result.stderr
    assert "err" in result.stderr
    assert result.returncode == 3


def test_forgotten_host_key_is_refused_then_restored(
    ssh_home: SshHome, sshd_fleet: list[SshServer]
) -> None:
    server = sshd_fleet[1]
    ssh_home.forget_host_key(server)
    refused = _ssh(ssh_home, server.alias, "true")
    assert refused.returncode == 255
    assert "Host key verification failed" in refused.stderr
    assert _ssh(ssh_home, sshd_fleet[0].alias, "true").returncode == 0
    ssh_home.reset()
    assert _ssh(ssh_home, server.alias, "true").returncode == 0


@pytest.mark.parametrize("index", [0, 1, 2])
def test_fabric_runs_command(ssh_home: SshHome, sshd_fleet: list[SshServer], index: int) -> None:
    server = sshd_fleet[index]
    config = fabric.Config(runtime_ssh_path=str(ssh_home.config_path))
    with fabric.Connection(server.alias, config=config) as conn:
        # in_stream=False: invoke otherwise reads our stdin, which pytest forbids.
        result = conn.run("echo hi", hide=True, in_stream=False)
        assert result.stdout.strip() == "hi"
        assert conn.host == server.address
        assert conn.port == server.port
