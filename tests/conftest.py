"""Shared pytest fixtures."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import Clock
from tests.postgres import FAST, PostgresServer
from tests.sshd import Fleet, SshHome, SshServer

# journal leaves SIGHUP ignored where it was ignored when it started (`nohup journal run plan
# &`), and an ignored signal is inherited: a suite started under nohup would have every
# journal it starts ignore the SIGHUP that the tests of a dropped session send.
signal.signal(signal.SIGHUP, signal.SIG_DFL)
# The same for SIGINT: a shell starts a background job (`make test &`, a CI runner's job) with
# SIGINT ignored, every journal the tests start would inherit that, and the tests of Ctrl-C
# would wait 30 s for a journal that never hears it. Python's own handler is not inherited.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The tests start journal as a process more than a thousand times; each start would compile
# every module again without the bytecode cache (0.27 s of a 0.7 s `journal status`).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


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


#: The loopback addresses of the `fleet` fixture's sshds (apart from `sshd_fleet`'s).
FLEET_ADDRESSES = [f"127.0.0.{i}" for i in range(11, 16)]
#: The host of the fleet whose target env holds the other torch (index into the fleet).
FLEET_ODD = 2


@pytest.fixture(scope="session")
def standin_envs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two target venvs made by real uv from the demo's stand-in wheels, offline: ``cu128``
    (torch 2.10.0+cu128, numpy 2.4.2) and ``cu130`` (torch 2.12.0.dev20260226+cu130, numpy
    2.4.1, nvidia-nccl-cu13 2.28.9); each value is the venv's python."""
    from journal.demo.run import find_uv
    from journal.demo.wheels import build_indexes

    root = tmp_path_factory.mktemp("standin-envs")
    indexes = build_indexes(root / "indexes")
    uv = find_uv()
    env = {**os.environ, "UV_CACHE_DIR": str(root / "uv-cache"), "UV_NO_CONFIG": "1"}
    env["UV_PYTHON_DOWNLOADS"] = "never"
    pythons = {}
    for variant in ("cu128", "cu130"):
        venv = root / f"env-{variant}"
        python = venv / "bin" / "python3"
        for cmd in (
            [uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
            [uv, "pip", "install", "--quiet", "--python", str(python), "torch", "numpy"]
            + ["--index-url", indexes[variant].as_uri()],
        ):
            subprocess.run(cmd, env=env, check=True, capture_output=True)
        pythons[variant] = python
    return pythons


@pytest.fixture(scope="session")
def fleet(standin_envs: dict[str, Path]) -> Iterator[Fleet]:
    """Five real sshds on 127.0.0.11-15, hosts ``gpu-1`` … ``gpu-5`` of one client HOME;
    every host's target python has the cu128 stand-in torch except ``fleet.odd`` (gpu-3),
    whose env holds the cu130 nightly stand-in."""
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(SshServer(a)) for a in FLEET_ADDRESSES]
        pythons = [
            str(standin_envs["cu130" if i == FLEET_ODD else "cu128"]) for i in range(len(servers))
        ]
        built = Fleet(servers, pythons, FLEET_ODD)
        yield built
        built.cleanup()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One real PostgreSQL server on 127.0.0.1, for the whole session (started when a test
    first asks for it; run as the `postgres` user under root)."""
    with PostgresServer("127.0.0.1", settings=FAST) as server:
        yield server


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> Iterator[str]:
    """A fresh, empty database on the session's PostgreSQL server, dropped after the test."""
    url = postgres.create_database()
    yield url
    postgres.drop_database(url)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database on each backend in turn, as `--db` takes it: an SQLite file's path,
    then a PostgreSQL URL (``postgresql+psycopg://journal@127.0.0.1:PORT/NAME``)."""
    if request.param == "sqlite":
        return str(tmp_path / "journal.db")
    return request.getfixturevalue("postgres_url")


@pytest.fixture(scope="session")
def demo_journal(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """`journal demo` run once for the session (real uv, stand-in wheels): its database and
    runbook. Nobody changes them: a test that records in the journal works on a copy
    (:func:`copy_demo`)."""
    from tests.helpers import journal, text

    folder = tmp_path_factory.mktemp("session-demo") / "demo"
    made = journal("demo", str(folder))
    assert made.returncode == 0, text(made.stderr)
    return folder / "journal.db", folder / "runbook.toml"


def copy_demo(demo: tuple[Path, Path], folder: Path) -> Path:
    """A copy of the session's demo database in ``folder`` (its runbook is shared, read-only)."""
    import shutil

    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "journal.db"
    shutil.copy(demo[0], db)
    return db


#: A real `journal run` transcript from an H200 host: its stack check, clean.
STACK_CHECK = Path(__file__).parent / "data" / "transcripts" / "h200-clean-stack-check.txt"


def demo_with_transcript(demo: tuple[Path, Path], folder: Path) -> Path:
    """A copy of the session's demo database in ``folder`` with the real H200 stack check
    imported as host ``gpu-box``."""
    from tests.helpers import journal, text

    db = copy_demo(demo, folder)
    done = journal(
        "import", "transcript", str(STACK_CHECK), "--host", "gpu-box", db=db, runbook=demo[1]
    )
    assert done.returncode == 0, text(done.stderr)
    return db


#: Above this machine's pid_max: no process has it.
DEAD_PID = 2**22 + 17


def crash_runs(host: str, step: str, never: str, when: str) -> list[object]:
    """The runs a crash and a paste leave: ``crash-lost`` of ``step`` on ``host`` (its recorder
    died mid-run), ``crash-never`` of step ``never`` (died before it launched), and ``placed``,
    a pasted ``nvidia-smi`` on ``gpu-box`` dated ``when`` among the steps."""
    from journal.events import StepFinished, StepStarted

    return [
        StepStarted(
            "crash-lost", step, host, "local", "sleep 600", pid=DEAD_PID, machine="nowhere"
        ),
        StepStarted(
            "crash-never",
            never,
            host,
            "local",
            "true",
            pid=DEAD_PID,
            machine="nowhere",
            launch_marked=True,
        ),  # fmt: skip
        StepStarted(
            "placed", "nvidia-smi", "gpu-box", "imported", "nvidia-smi", imported=True, at=when
        ),
        StepFinished("placed", "gpu-box", "succeeded", 0, 0.5),
    ]


#: What each marker stands for: the fixtures that start that component (see pyproject.toml).
MARKED_BY = {
    "ssh": {"sshd", "sshd_fleet", "_ssh_home_session", "ssh_home", "fleet"},
    "postgres": {"postgres", "postgres_url"},
    "browser": {"chromium", "browser", "page"},
}
#: Modules that build wheels, venvs or huge inputs: seconds a test.
SLOW_MODULES = {
    "test_packaging",
    "test_pitfalls_properties",
    "test_demo",
    "test_snapshot_fingerprint",
}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test by the real components it starts, so `-m "not browser"` and the like
    pick a part of the suite: ssh, postgres, browser, slow. A test that uses a module-scoped
    fixture joins its module's xdist group (``--dist loadgroup``): one worker makes the
    module's fixtures once, where tests spread over three workers made them three times."""
    from tests.grouping import group_by_module_fixtures

    group_by_module_fixtures(config, items)
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in MARKED_BY.items():
            if names & fixtures:
                item.add_marker(marker)
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("store_url") == "postgresql":
            item.add_marker("postgres")
        if item.module is not None and item.module.__name__.rsplit(".", 1)[-1] in SLOW_MODULES:
            item.add_marker("slow")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The recorder's clock, moved by hand: ``clock.now += 0.3``."""
    import types

    from journal import recorder

    fake = Clock()
    monkeypatch.setattr(recorder, "time", types.SimpleNamespace(monotonic=fake.monotonic))
    return fake


def crashed_demo(demo: tuple[Path, Path], folder: Path, retried: bool = False) -> Path:
    """:func:`demo_with_transcript` with the :func:`crash_runs` of its first run's step and
    host appended (the pasted command dated in the middle of the steps); ``retried``: first a
    failed try of that step, then its retry that succeeded (the first try is what `rollback
    --to before:STEP` names)."""
    from journal.events import StepFinished, StepStarted
    from journal.store import EventStore

    path = demo_with_transcript(demo, folder)
    store = EventStore(str(path))
    try:
        name = next(iter(store.read())).journal
        opened = [r for r in store.read(name) if r.event.type == "StepStarted"]
        first = opened[0].event
        host, step = first.host_name, first.step
        tries = [
            StepStarted("try-1", step, host, "local", "false", pid=DEAD_PID, machine="x"),
            StepFinished("try-1", host, "failed", 1, 0.1),
            StepStarted("try-2", step, host, "local", "true", pid=DEAD_PID, machine="x"),
            StepFinished("try-2", host, "succeeded", 0, 0.1),
        ]
        crashed = crash_runs(host, step, "other", opened[len(opened) // 2].ts)
        store.append(name, [*(tries if retried else []), *crashed])
    finally:
        store.close()
    return path
