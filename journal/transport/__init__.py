"""Transports run a command on a host and stream its output: SSH (Fabric) or local.

Fabric and paramiko are imported only for an SSH host: a `local` step does not pay for them
(a tenth of a second at every start)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from journal.runbook import Host
from journal.transport.base import AcceptedKey, ConnectFailed, OutputSink, Transport
from journal.transport.local import LocalTransport

if TYPE_CHECKING:
    from journal.transport.ssh import SshTransport

__all__ = [
    "AcceptedKey",
    "ConnectFailed",
    "LocalTransport",
    "OutputSink",
    "SshTransport",
    "Transport",
    "transport_for",
]


def transport_for(host: Host, *, accept_new_host_key: bool = False) -> Transport:
    """The transport for a runbook host (not yet connected)."""
    if host.is_local:
        return LocalTransport()
    from journal.transport.ssh import SshTransport

    user, name, port = host.ssh_parts()
    return SshTransport(
        user, name, port, accept_new_host_key=accept_new_host_key or host.accept_new_host_key
    )


def __getattr__(name: str) -> Any:
    if name == "SshTransport":  # imported when asked for, with Fabric
        from journal.transport.ssh import SshTransport

        return SshTransport
    raise AttributeError(name)
