"""Real OpenSSH servers and client homes for SSH tests.

`SshServer` runs the system `sshd` on a loopback address and a free port,
with its host key, config and authorised keys in a temporary folder.
`SshHome` is a temporary HOME for the client side: a client key that every
given server accepts, an `~/.ssh/config` with one `Host` block per server and
a `known_hosts` that trusts each server's host key.

No mocks: the tests talk SSH to a genuine sshd as the current user.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

SSHD = "/usr/sbin/sshd"
SSH_KEYGEN = "ssh-keygen"
PRIVSEP_DIR = Path("/run/sshd")
START_TIMEOUT_S = 10.0


def current_user() -> str:
    """The login name the tests connect as (root in CI)."""
    return getpass.getuser()


def _keygen(path: Path, comment: str) -> str:
    """Make a fresh passphrase-less ed25519 key at `path`; return the public key line."""
    subprocess.run(
        [SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
    )
    return path.with_name(path.name + ".pub").read_text().strip()


def _free_port(address: str) -> int:
    """A TCP port on `address` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


def _no_whitespace(path: Path) -> str:
    """`path` as text, refused if it would need quoting in an ssh config."""
    text = str(path)
    if any(ch.isspace() for ch in text):
        raise ValueError(f"path with whitespace cannot go into an ssh config: {text!r}")
    return text


class SshServer:
    """A real sshd listening on `address`:`port`, everything kept in a temp folder.

    Use as a context manager, or call `start()` and `stop()`.
    """

    def __init__(self, address: str = "127.0.0.1") -> None:
        self.address = address
        self.alias = "sshd-" + address.replace(".", "-")
        self.port = 0
        self.host_key_pub = ""
        self.dir = Path(tempfile.mkdtemp(prefix=f"journal-{self.alias}-"))
        self.host_key = self.dir / "ssh_host_ed25519_key"
        self.config_path = self.dir / "sshd_config"
        self.authorized_keys = self.dir / "authorized_keys"
        self.pid_file = self.dir / "sshd.pid"
        self.log_path = self.dir / "sshd.log"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> SshServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"SshServer({self.alias} {self.address}:{self.port})"

    def authorize(self, public_key: str) -> None:
        """Let whoever holds the private half of `public_key` log in as the current user."""
        with self.authorized_keys.open("a") as f:
            f.write(public_key.strip() + "\n")

    def _write_config(self) -> None:
        lines = [
            f"ListenAddress {self.address}",
            f"Port {self.port}",
            f"HostKey {_no_whitespace(self.host_key)}",
            f"PidFile {_no_whitespace(self.pid_file)}",
            f"AuthorizedKeysFile {_no_whitespace(self.authorized_keys)}",
            "StrictModes no",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "PermitRootLogin prohibit-password",
            "UsePAM no",
            "AcceptEnv *",
            "Subsystem sftp internal-sftp",
            "LogLevel ERROR",
        ]
        self.config_path.write_text("\n".join(lines) + "\n")

    def start(self) -> None:
        """Make the host key and config, launch sshd, and wait until it accepts connections."""
        if self.process is not None:
            raise RuntimeError(f"{self!r} already started")
        PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        self.host_key_pub = _keygen(self.host_key, f"host-{self.alias}")
        self.authorized_keys.touch()
        self.port = _free_port(self.address)
        self._write_config()
        with self.log_path.open("wb") as log:
            # sshd insists on being started by absolute path (it re-execs itself).
            self.process = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(self.config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_listening()

    def _wait_listening(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                raise RuntimeError(
                    f"sshd on {self.address}:{self.port} exited with {code}:\n{self.log()}"
                )
            try:
                with socket.create_connection((self.address, self.port), timeout=0.5):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"sshd on {self.address}:{self.port} not listening after "
                    f"{START_TIMEOUT_S:.0f}s:\n{self.log()}"
                )
            time.sleep(0.05)

    def log(self) -> str:
        """What sshd wrote to stderr so far (errors only, at LogLevel ERROR)."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        """Terminate sshd, wait for it, and delete its temp folder."""
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def known_hosts_line(self) -> str:
        """This server's entry for a known_hosts file: `[addr]:port ssh-ed25519 AAAA...`."""
        host = self.address if self.port == 22 else f"[{self.address}]:{self.port}"
        key_type, key_b64 = self.host_key_pub.split()[:2]
        return f"{host} {key_type} {key_b64}"


class SshHome:
    """A temporary HOME for SSH clients that can reach every server it is given.

    Holds `.ssh/id_ed25519` (authorised on each server), `.ssh/config` with a
    `Host <alias>` block per server, and `.ssh/known_hosts` trusting each one.
    """

    def __init__(self, servers: Iterable[SshServer]) -> None:
        self.servers = list(servers)
        self.user = current_user()
        self.path = Path(tempfile.mkdtemp(prefix="journal-ssh-home-"))
        self.ssh_dir = self.path / ".ssh"
        self.ssh_dir.mkdir(mode=0o700)
        self.identity_file = self.ssh_dir / "id_ed25519"
        self.config_path = self.ssh_dir / "config"
        self.known_hosts = self.ssh_dir / "known_hosts"
        self.public_key = _keygen(self.identity_file, f"client-{self.user}")
        for server in self.servers:
            server.authorize(self.public_key)
        self.reset()

    def __repr__(self) -> str:
        return f"SshHome({self.path}, {[s.alias for s in self.servers]})"

    def write_config(self) -> None:
        """(Re)write `.ssh/config` with one `Host` block per server."""
        blocks = []
        for s in self.servers:
            blocks.append(
                f"Host {s.alias}\n"
                f"    HostName {s.address}\n"
                f"    Port {s.port}\n"
                f"    User {self.user}\n"
                f"    IdentityFile {_no_whitespace(self.identity_file)}\n"
                f"    IdentitiesOnly yes\n"
                f"    UserKnownHostsFile {_no_whitespace(self.known_hosts)}\n"
            )
        self.config_path.write_text("\n".join(blocks))
        # ssh refuses a config that others can write to.
        self.config_path.chmod(0o600)

    def write_known_hosts(self, servers: Iterable[SshServer] | None = None) -> None:
        """(Re)write `.ssh/known_hosts` trusting `servers` (default: all of them)."""
        chosen = self.servers if servers is None else list(servers)
        self.known_hosts.write_text("".join(s.known_hosts_line() + "\n" for s in chosen))
        self.known_hosts.chmod(0o600)

    def reset(self) -> None:
        """Put config and known_hosts back to trusting every server."""
        self.write_config()
        self.write_known_hosts()

    def forget_host_key(self, server: SshServer) -> None:
        """Drop `server` from known_hosts, as if it had never been seen."""
        keep = [line for line in self._known_hosts_lines() if line != server.known_hosts_line()]
        self.known_hosts.write_text("".join(line + "\n" for line in keep))

    def _known_hosts_lines(self) -> list[str]:
        if not self.known_hosts.exists():
            return []
        return [line for line in self.known_hosts.read_text().splitlines() if line.strip()]

    def env(self) -> dict[str, str]:
        """A copy of os.environ with HOME pointing here (for subprocesses such as the CLI)."""
        env = dict(os.environ)
        env["HOME"] = str(self.path)
        env.pop("SSH_AUTH_SOCK", None)
        return env

    def cleanup(self) -> None:
        """Delete the folder."""
        shutil.rmtree(self.path, ignore_errors=True)


class Fleet:
    """Several real sshds on loopback addresses, a client HOME for them, and one runbook host
    per server (``gpu-1``, ``gpu-2``, …), each with the target python it probes.

    `hosts_toml()` writes their `[hosts.*]` tables, a `[groups]` table and whatever the test
    adds; `env()` is the environment the `journal` CLI runs in (HOME pointing at the client).
    """

    def __init__(self, servers: list[SshServer], pythons: list[str], odd: int) -> None:
        self.servers = servers
        self.home = SshHome(servers)
        self.names = [f"gpu-{i}" for i in range(1, len(servers) + 1)]
        self.pythons = dict(zip(self.names, pythons, strict=True))
        #: The host whose target env differs from the others'.
        self.odd = self.names[odd]

    def __repr__(self) -> str:
        pairs = zip(self.names, self.servers, strict=True)
        return f"Fleet({', '.join(f'{n}={s.address}' for n, s in pairs)})"

    def hosts_toml(self, groups: dict[str, list[str]] | None = None) -> str:
        """The `[hosts.gpu-N]` tables and `[groups]` (default: ``gpu`` = every host,
        ``canary`` = the first two, ``rest`` = the others)."""
        groups = groups or {
            "gpu": self.names,
            "canary": self.names[:2],
            "rest": self.names[2:],
        }
        hosts = "".join(
            f'[hosts.{name}]\nssh = "{server.alias}"\npython = "{self.pythons[name]}"\n\n'
            for name, server in zip(self.names, self.servers, strict=True)
        )
        listed = "".join(f"{group} = {json.dumps(members)}\n" for group, members in groups.items())
        return f"{hosts}[groups]\n{listed}\n"

    def runbook(self, folder: Path, body: str, name: str = "fleet-test") -> Path:
        """Write `folder/runbook.toml`: the journal `name`, the hosts and groups, `body`."""
        path = folder / "runbook.toml"
        path.write_text(f'[journal]\nname = "{name}"\n\n{self.hosts_toml()}{body}')
        return path

    def env(self) -> dict[str, str]:
        return self.home.env()

    def cleanup(self) -> None:
        self.home.cleanup()
