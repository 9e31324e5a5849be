"""Runs a step on an SSH host through a Fabric ``Connection``, streaming the exact bytes.

Fabric resolves the target (``~/.ssh/config``: HostName, Port, User, IdentityFile, ProxyJump)
and authenticates; the command runs on a session channel of that connection read directly,
because Fabric's runner decodes output lossily, keeps it all in memory and reads 1,000 bytes at
a time. Fabric accepts any host key; here ``known_hosts`` is checked and an unknown key is
refused unless the runbook or the CLI says to accept it, which is then recorded.
"""

from __future__ import annotations

import os
import select
import shlex
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import paramiko
from fabric import Config, Connection

from journal.runs import Outcome, detached
from journal.transport import supervisor
from journal.transport.base import (
    FROM_STDIN,
    POLL_S,
    READ_SIZE,
    AcceptedKey,
    ConnectFailed,
    OutputSink,
    Stopper,
    Transport,
    cut_short,
    not_launched,
    settle,
    shell_script,
)

__all__ = ["AcceptedKey", "SshTransport", "fingerprint"]

CONNECT_TIMEOUT_S = 20
#: How long to wait before each try at opening a dropped connection again.
RECONNECT_WAITS_S = (0.5, 1.0, 2.0, 4.0)


def fingerprint(key: paramiko.PKey) -> str:
    """The ``SHA256:…`` fingerprint OpenSSH shows for a key."""
    return key.fingerprint


class _RejectUnknown(paramiko.MissingHostKeyPolicy):
    def __init__(self, known_hosts: str) -> None:
        self.known_hosts = known_hosts

    def missing_host_key(self, client, hostname, key):  # type: ignore[no-untyped-def]
        raise ConnectFailed(
            f"the host key of {hostname} ({key.get_name()} {fingerprint(key)}) is not in "
            f"{self.known_hosts}; check the fingerprint, then add it with a first `ssh` login, "
            "or accept it on first contact with accept_new_host_key = true for this host in "
            "the runbook or --accept-new-host-key (the journal records that it did)"
        )


class _AcceptNew(paramiko.MissingHostKeyPolicy):
    def __init__(self, known_hosts: str, accepted: list[AcceptedKey]) -> None:
        self.known_hosts = known_hosts
        self.accepted = accepted

    def missing_host_key(self, client, hostname, key):  # type: ignore[no-untyped-def]
        client.get_host_keys().add(hostname, key.get_name(), key)
        path = Path(self.known_hosts).expanduser()
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        with path.open("a") as out:
            out.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        self.accepted.append(AcceptedKey(hostname, key.get_name(), fingerprint(key), str(path)))


class SshTransport(Transport):
    """One SSH host of the runbook: ``user@host[:port]`` or an alias from ``~/.ssh/config``."""

    def __init__(
        self, user: str | None, host: str, port: int | None, *, accept_new_host_key: bool = False
    ) -> None:
        super().__init__()
        self.accept_new_host_key = accept_new_host_key
        config = Config()
        if os.environ.get("JOURNAL_SSH_CONFIG"):
            config = Config(runtime_ssh_path=os.environ["JOURNAL_SSH_CONFIG"])
        # Building the Connection reads ~/.ssh/config (HostName, Port, User) but opens nothing.
        self.conn = Connection(
            host, user=user, port=port, config=config, connect_timeout=CONNECT_TIMEOUT_S
        )

    @property
    def target(self) -> str:
        """``user@host:port`` as resolved through ``~/.ssh/config``."""
        return f"{self.conn.user}@{self.conn.host}:{self.conn.port}"

    def connect(self) -> None:
        """Open the connection, checking the host key against ``known_hosts``."""
        conn = self.conn
        files = str(conn.ssh_config.get("userknownhostsfile", "~/.ssh/known_hosts")).split()
        client = conn.client
        for name in files:
            path = Path(name).expanduser()
            if path.exists():
                client.load_host_keys(str(path))
        known_hosts = files[0]
        if self.accept_new_host_key:
            client.set_missing_host_key_policy(_AcceptNew(known_hosts, self.accepted))
        else:
            client.set_missing_host_key_policy(_RejectUnknown(known_hosts))
        where = f"{conn.user}@{conn.host}:{conn.port}"
        try:
            conn.open()
        except ConnectFailed:
            raise
        except paramiko.BadHostKeyException as exc:
            raise ConnectFailed(
                f"the host key of {where} has CHANGED: it offered {exc.key.get_name()} "
                f"{fingerprint(exc.key)} where {known_hosts} has {fingerprint(exc.expected_key)}; "
                "refusing to connect (the host was reinstalled, or someone is in the middle)"
            ) from None
        except paramiko.AuthenticationException as exc:
            raise ConnectFailed(f"{where} refused our keys: {exc}") from None
        except (TimeoutError, OSError, paramiko.SSHException, EOFError) as exc:
            raise ConnectFailed(f"cannot reach {where}: {exc or type(exc).__name__}") from None

    def close(self) -> None:
        self.conn.close()

    def _signal_remote(self, pidfile: str, sig: str) -> None:
        """Send ``sig`` to the command's whole process group through a second channel."""
        self._run_quietly(f"pgid=$(cat {pidfile} 2>/dev/null) && kill -{sig} -- -$pgid 2>/dev/null")

    def _run_quietly(self, command: str) -> None:
        """Run a short housekeeping command on a second channel, ignoring what it says."""
        try:
            chan = self.conn.create_session()
            chan.exec_command(command)
            chan.recv_exit_status()
            chan.close()
        except (paramiko.SSHException, OSError, EOFError, AttributeError):
            pass  # the connection is gone; nothing more can be sent

    def _direct(self, script: str, sink: OutputSink, stopper: Stopper, run_id: str) -> Outcome:
        pidfile = shlex.quote(f"/tmp/journal-{run_id}.pid")
        # sshd makes the login shell a session leader, so its pid ($$) is the process group of
        # everything the step starts: that is what Ctrl-C and timeouts signal. The script
        # (its env) comes on the channel's stdin, not in the command sshd hands the shell.
        wrapped = f"printf '%s' $$ > {pidfile}\n( {FROM_STDIN} )\nrc=$?\nrm -f {pidfile}\nexit $rc"
        transport = self.conn.transport
        chan = self.conn.create_session()
        chan.exec_command(wrapped)
        chan.sendall(script.encode())
        chan.shutdown_write()
        fd = chan.fileno()

        def send(name: str) -> None:
            self._signal_remote(pidfile, name)

        try:
            while True:
                while chan.recv_ready():
                    sink.feed("stdout", chan.recv(READ_SIZE))
                while chan.recv_stderr_ready():
                    sink.feed("stderr", chan.recv_stderr(READ_SIZE))
                sink.tick()
                if chan.closed or (chan.exit_status_ready() and chan.eof_received):
                    if not chan.recv_ready() and not chan.recv_stderr_ready():
                        break
                    continue
                if not transport.is_active():
                    break
                stopper.check(time.monotonic(), send)
                select.select([fd], [], [], POLL_S)
        except BaseException:
            # the record cannot go on (the store refused a write): stop the command rather
            # than leave it running unrecorded
            send("TERM")
            chan.close()
            raise
        duration = time.monotonic() - stopper.start
        status = chan.exit_status if chan.status_event.is_set() else -1
        chan.close()
        if stopper.stopped and transport.is_active():
            self._run_quietly(f"rm -f {pidfile}")  # the killed wrapper could not remove it
        if status == -1 and not transport.is_active():
            return Outcome(
                "failed",
                None,
                duration,
                None,
                f"the connection to {self.target} was lost after {duration:.1f} s; "
                "the command may still be running there",
            )
        if status == -1 and not stopper.stopped:
            # sshd sent exit-signal (which paramiko does not parse): the shell itself was killed
            return Outcome(
                "failed", None, duration, None, "the remote shell was killed by a signal"
            )
        return stopper.outcome(None if status == -1 else status, duration)

    def _reconnect(self) -> bool:
        """Open the connection again after it dropped; whether it came back."""
        for wait in RECONNECT_WAITS_S:
            time.sleep(wait)
            try:
                self.conn.close()
                self.connect()
                return True
            except (ConnectFailed, paramiko.SSHException, OSError, EOFError):
                continue
        return False

    def run(
        self,
        command: str,
        env: Mapping[str, str],
        cwd: str | None,
        timeout: float | None,
        sink: OutputSink,
        cancel: threading.Event,
        *,
        run_id: str = "step",
        detach: bool = False,
    ) -> Outcome:
        """As :meth:`Transport.run`, with the supervisor started and followed on one channel."""
        stopper = Stopper(cancel, timeout)
        script = shell_script(command, env, cwd)
        return self.follow(
            run_id, sink, stopper, {}, detach=detach, started=time.monotonic(), script=script
        )

    def follow(
        self,
        run_id: str,
        sink: OutputSink,
        stopper: Stopper,
        offsets: Mapping[str, int],
        *,
        detach: bool = False,
        started: float | None = None,
        script: str | None = None,
    ) -> Outcome:
        """See :meth:`Transport.follow`; with ``script``, the run is launched first, on the
        same channel."""
        began = time.monotonic() if started is None else started
        pos = {"stdout": int(offsets.get("stdout", 0)), "stderr": int(offsets.get("stderr", 0))}

        def send(name: str) -> None:
            if not detach or stopper.timed_out:  # a timeout stops even a detachable step
                self._run_quietly(supervisor.signal_group(run_id, name))

        while True:
            transport = self.conn.transport
            if transport is None or not transport.is_active():
                if not self._reconnect():
                    return detached(
                        time.monotonic() - began,
                        f"the connection to {self.target} was lost and could not be opened "
                        f"again; the command goes on there: `journal attach {run_id}` records "
                        "the rest",
                    )
                transport = self.conn.transport
            frames = supervisor.Frames()
            chan = self.conn.create_session()
            if script is not None:
                sent = script.encode()
                chan.exec_command(supervisor.launch_and_follow(run_id, len(sent)))
                try:
                    chan.sendall(sent)
                except (OSError, EOFError, paramiko.SSHException):
                    pass  # the launch ended before it took the whole script: it says why
            else:
                chan.exec_command(supervisor.follow(run_id, pos["stdout"], pos["stderr"]))
            try:
                while frames.rc is None and not frames.gone:
                    while chan.recv_ready():
                        for stream, data in frames.feed(chan.recv(READ_SIZE)):
                            pos[stream] += len(data)
                            sink.feed(stream, data)
                    sink.tick()
                    if frames.rc is not None:
                        settle(sink)  # recorded, all of it: then the spool may go
                        chan.sendall(b"ok\n")  # the loop removes the spool and ends by itself
                        break
                    if frames.gone:
                        break
                    if chan.closed or (chan.exit_status_ready() and not chan.recv_ready()):
                        break  # the loop ended without its last word: the connection went
                    if not transport.is_active():
                        break
                    stopper.check(time.monotonic(), send)
                    if detach and stopper.stopped and not stopper.timed_out:
                        return detached(time.monotonic() - began, _left(run_id))
                    select.select([chan], [], [], POLL_S)
            except BaseException:
                # the record cannot go on (the store refused a write): stop the command
                # rather than leave it running unrecorded
                send("TERM")
                raise
            finally:
                chan.close()
            if script is not None and frames.pid is None and transport.is_active():
                said = _stderr(chan).decode(errors="replace").strip()
                return not_launched(self.target, run_id, said, time.monotonic() - began)
            script = None  # launched; what is left is following
            if frames.gone:
                return Outcome("gone", None, 0.0, None, f"no spool of the run on {self.target}")
            if frames.rc is not None:
                outcome = stopper.outcome(frames.rc, time.monotonic() - began)
                outcome = replace(outcome, ended=frames.ended)
                return cut_short(outcome, self.target) if frames.full else outcome


def _stderr(chan: paramiko.Channel) -> bytes:
    data = b""
    while chan.recv_stderr_ready():
        data += chan.recv_stderr(READ_SIZE)
    return data


def _left(run_id: str) -> str:
    return f"left running on the host; `journal attach {run_id}` records the rest"
