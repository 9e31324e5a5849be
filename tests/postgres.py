"""A real PostgreSQL server for the store's tests and benchmarks.

`PostgresServer` runs Debian's PostgreSQL (``initdb`` and ``pg_ctl`` from
``/usr/lib/postgresql/N/bin``, installed by ``make system-deps``) in a temporary folder,
listening on 127.0.0.1 and a free port, with trust authentication on loopback and a
superuser named ``journal``. Each test gets a database of its own (`create_database`).

The server refuses to run as root, so under root (CI) every server command runs as the
``postgres`` user the Debian package creates; as anyone else it runs as that user. No
mocks: the store talks to a genuine server over TCP.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

SUPERUSER = "journal"
START_TIMEOUT_S = 60
#: For the tests: durability is not what they check, and without fsync a database is
#: created in a few milliseconds instead of a few hundred.
FAST = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


def bindir() -> Path:
    """The folder holding initdb and pg_ctl: Debian's newest, else whatever is on PATH."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    raise RuntimeError(
        "PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin or on PATH); "
        "`make system-deps` installs Debian's postgresql package"
    )


def _free_port(address: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((address, 0))
        return sock.getsockname()[1]


def _reachable(path: Path, uid: int, gid: int) -> bool:
    """Whether the user ``uid`` (group ``gid``) may pass through every folder above ``path``."""
    for folder in path.parents:
        st = folder.stat()
        if st.st_uid == uid and st.st_mode & 0o100:
            continue
        if st.st_gid == gid and st.st_mode & 0o010:
            continue
        if not st.st_mode & 0o001:
            return False
    return True


class PostgresServer:
    """A PostgreSQL server on ``address`` and a free port, its data in a temporary folder.

    Use as a context manager, or call `start()` and `stop()`. ``settings`` are extra
    ``postgresql.conf`` lines (name -> value), e.g. `FAST` for the tests.
    """

    def __init__(self, address: str = "127.0.0.1", settings: dict[str, str] | None = None):
        self.address = address
        self.port = 0
        self.settings = dict(settings or {})
        self.bin = bindir()
        self._as: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self._as = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError(
                    "running as root, and there is no `postgres` user to run the server as "
                    "(Debian's postgresql package creates it: `make system-deps`)"
                ) from None
        self.dir = self._make_dir()
        self.data = self.dir / "data"
        self.log_path = self.dir / "postgres.log"
        self.started = False
        self._serial = 0

    def __enter__(self) -> PostgresServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"PostgresServer({self.address}:{self.port}, {self.dir})"

    def _make_dir(self) -> Path:
        """A fresh folder the server's user owns (and can reach, when that is not us)."""
        folder = Path(tempfile.mkdtemp(prefix="journal-postgres-"))
        if self._as is None:
            return folder
        uid, gid = self._as.pw_uid, self._as.pw_gid
        if not _reachable(folder, uid, gid):
            # TMPDIR is somewhere only root may enter (such as /root/tmp): /tmp is for all.
            shutil.rmtree(folder)
            folder = Path(tempfile.mkdtemp(prefix="journal-postgres-", dir="/tmp"))
        os.chown(folder, uid, gid)
        return folder

    def _run(self, *command: str) -> subprocess.CompletedProcess[str]:
        """Run a server command as the server's user; its output is in the error if it fails."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "LC_"))}
        env.update(LC_ALL="C", HOME=str(self.dir))
        who: dict[str, object] = {}
        if self._as is not None:
            who = {"user": self._as.pw_uid, "group": self._as.pw_gid, "extra_groups": []}
        result = subprocess.run(
            command, cwd=self.dir, env=env, capture_output=True, text=True, **who
        )  # type: ignore[call-overload]
        if result.returncode != 0:
            raise RuntimeError(
                f"{' '.join(command)} failed ({result.returncode}):\n"
                f"{result.stdout}{result.stderr}{self.log()}"
            )
        return result

    def start(self) -> None:
        """initdb, then start the server and wait until it accepts connections."""
        if self.started:
            raise RuntimeError(f"{self!r} already started")
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        )
        self.port = _free_port(self.address)
        conf = {
            "listen_addresses": f"'{self.address}'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.dir}'",
            "max_connections": "200",
            **self.settings,
        }
        with (self.data / "postgresql.conf").open("a") as f:
            f.writelines(f"{name} = {value}\n" for name, value in conf.items())
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log_path),
            "-w",
            "-t",
            str(START_TIMEOUT_S),
            "start",
        )
        self.started = True
        self._wait_listening()

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with socket.create_connection((self.address, self.port), timeout=0.5):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self!r} not listening:\n{self.log()}") from None
                time.sleep(0.05)

    def log(self) -> str:
        """What the server wrote to its log so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except (FileNotFoundError, PermissionError):
            return ""

    def stop(self) -> None:
        """Stop the server (fast shutdown: open sessions are ended) and delete its folder."""
        if self.started:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
            self.started = False
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database: str = "postgres", driver: str = "postgresql+psycopg") -> str:
        """An SQLAlchemy URL for ``database`` (``driver`` "postgresql" gives a libpq URL)."""
        return f"{driver}://{SUPERUSER}@{self.address}:{self.port}/{database}"

    def sql(self, *statements: str, database: str = "postgres") -> None:
        """Run statements with autocommit as the superuser (CREATE DATABASE needs it)."""
        import psycopg

        with psycopg.connect(self.url(database, "postgresql"), autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)  # type: ignore[arg-type]

    def create_database(self, prefix: str = "journal") -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        self._serial += 1
        name = f"{prefix}_{os.getpid()}_{self._serial}"
        self.sql(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, url: str) -> None:
        """Drop the database of ``url``, ending any session still connected to it."""
        name = url.rsplit("/", 1)[1]
        self.sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
