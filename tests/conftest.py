"""Shared pytest fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sshd import SshHome, SshServer


@pytest.fixture(scope="session")
def sshd() -> Iterator[SshServer]:
    """One real sshd on 127.0.0.1, for the whole session."""
    with SshServer("127.0.0.1") as server:
        yield server


@pytest.fixture(scope="session")
def sshd_fleet(sshd: SshServer) -> Iterator[list[SshServer]]:
    """Three real sshds: the 127.0.0.1 one plus 127.0.0.2 and 127.0.0.3."""
    with SshServer("127.0.0.2") as second, SshServer("127.0.0.3") as third:
        yield [sshd, second, third]


@pytest.fixture(scope="session")
def _ssh_home_session(sshd_fleet: list[SshServer]) -> Iterator[SshHome]:
    home = SshHome(sshd_fleet)
    yield home
    home.cleanup()


@pytest.fixture
def ssh_home(_ssh_home_session: SshHome) -> Iterator[SshHome]:
    """A client HOME that knows and can log in to every server of `sshd_fleet`.

    Shared by the session; its config and known_hosts are restored after each test,
    so a test may call `forget_host_key`.
    """
    yield _ssh_home_session
    _ssh_home_session.reset()
