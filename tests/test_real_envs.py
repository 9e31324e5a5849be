"""A proving ground of real ML envs: what journal records and judges when real uv and real pip
change a venv made from the registries (tests/realenv.py: the CPU torch wheel, numpy 2 under
scipy and pillow, and packages named like secrets: tiktoken, google-auth, tokenizers,
secretstorage, keyring, python-jose, passlib, tokenize-rt, pykeepass).

Each test has its own venv and journal, and runs journal as a user does (`journal run step`
on a `local` host whose python is the venv's); what it checks is what the user would see:
`journal show`, the run's web page, `journal lint`, the recorded snapshots, and the env itself
(`pip list`). uv reads PyPI (its downloads cached between runs); pip reads a wheel folder
given in the host's env (`PIP_NO_INDEX`, `PIP_FIND_LINKS`), as on a host without an index.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from journal.demo.run import MATMUL
from journal.events import PackagesSnapshotted
from journal.store import EventStore
from tests.helpers import journal, text, uv_binary
from tests.realenv import Wheelhouse, installed, pip_list, tool_env, wheelhouse

pytestmark = pytest.mark.slow

NAME = "real-env"
#: torchvision 0.29.0 pins torch==2.14.0; the env holds torch 2.13.0+cpu.
TORCHVISION = "torchvision==0.29.0"
#: The verdict line of `journal run step` and `journal rollback`: `… (run 1a23…)`.
RUN_ID = re.compile(rb"\(run ([0-9a-f]+)\)")
#: What `journal run step` says of a package snapshot it could not read.
SNAPSHOT_FAILED = re.compile(r"packages snapshot \(\w+\) on \S+ failed")


@pytest.fixture(scope="session")
def house() -> Wheelhouse:
    return wheelhouse()


@pytest.fixture(scope="session")
def older() -> Wheelhouse:
    """The numpy 1 that pip takes the env down to, as a wheel folder."""
    return wheelhouse(("numpy==1.26.4",), venv=False)


def _path_without_uv() -> str:
    """PATH without the folders that hold a uv, so that a rollback falls back to pip."""
    return os.pathsep.join(
        d
        for d in os.environ.get("PATH", "").split(os.pathsep)
        if d and not (Path(d) / "uv").exists()
    )


@dataclass
class Host:
    """A real venv and a journal whose one host (`box`, local) upgrades it."""

    folder: Path
    python: Path
    uv: str
    env: dict[str, str]
    said: str = ""  # what the last `run` printed on stderr

    @property
    def db(self) -> Path:
        return self.folder / "journal.db"

    @property
    def runbook(self) -> Path:
        return self.folder / "runbook.toml"

    def journal(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return journal(*args, db=self.db, runbook=self.runbook, env=self.env, timeout=300)

    def run(self, *args: str) -> dict:
        """`journal run step NAME` or `journal rollback …`, which must succeed; the run it
        made as `journal show --format json` gives it (its findings too)."""
        done = self.journal(*args)
        self.said = text(done.stderr)
        assert done.returncode == 0, self.said
        assert not SNAPSHOT_FAILED.search(self.said), self.said
        assert "rollback-incomplete" not in self.said
        return self.show(RUN_ID.findall(done.stderr)[-1].decode())

    def show(self, run: str) -> dict:
        done = self.journal("show", run, "--format", "json")
        assert done.returncode == 0, text(done.stderr)
        return json.loads(done.stdout)

    def snapshots(self, run: str) -> dict[str, dict[str, dict]]:
        """The package snapshots the journal recorded around ``run``, by phase."""
        store = EventStore(str(self.db))
        try:
            return {
                r.event.phase: r.event.packages
                for r in store.read(NAME)
                if isinstance(r.event, PackagesSnapshotted) and r.event.run == run
            }
        finally:
            store.close()


#: Makes a host: its steps as name -> command (``{py}``, ``{uv}``: the venv's python and uv).
Make = Callable[..., Host]


@pytest.fixture
def real_host(house: Wheelhouse, tmp_path: Path, request: pytest.FixtureRequest) -> Make:
    """Makes a fresh venv of the wheelhouse's set and a runbook with the given steps; the
    host names uv for rollbacks unless ``uv=False`` (then PATH holds none either, so that
    pip rolls back); ``host_env`` is added to the host's env. With ``ssh=True`` the host is
    reached through the real sshd on 127.0.0.1 (tests/conftest.py) instead of `local`."""

    def make(
        steps: dict[str, str],
        uv: bool = True,
        host_env: dict[str, str] | None = None,
        ssh: bool = False,
        extra: str = "",
    ) -> Host:
        python = house.venv(tmp_path / "ml-env")
        env = tool_env() if uv else tool_env(PATH=_path_without_uv())
        transport = "local"
        if ssh:
            server, home = request.getfixturevalue("sshd"), request.getfixturevalue("ssh_home")
            env.update(HOME=home.env()["HOME"])
            env.pop("SSH_AUTH_SOCK", None)
            transport = server.alias
        host = Host(tmp_path, python, uv_binary(), env)
        shared = ("UV_CACHE_DIR", "UV_NO_CONFIG", "UV_PYTHON_DOWNLOADS", "PIP_CACHE_DIR")
        values = {**{k: env[k] for k in shared}, **(host_env or {})}
        table = ", ".join(f'{k} = "{v}"' for k, v in values.items())
        lines = [
            f'[journal]\nname = "{NAME}"\n',
            f'[hosts.box]\nssh = "{transport}"\npython = "{python}"\nenv = {{ {table} }}',
        ]
        if uv:
            lines.append(f'uv = "{host.uv}"')
        for name, command in steps.items():
            run = command.format(py=python, uv=host.uv)
            lines.append(f"\n[[steps]]\nname = \"{name}\"\nrun = '''{run}'''")
        host.runbook.write_text("\n".join(lines) + "\n" + extra)
        return host

    return make


def _found(run: dict) -> dict[str, dict]:
    """The run's findings by pitfall id."""
    return {f["id"]: f for f in run["findings"]}


def _changes(run: dict) -> dict[str, tuple[str | None, str | None, str]]:
    """The run's package diff by name: (before, after, kind)."""
    assert run["packages"] is not None, f"no diff: {[p['error'] for p in run['probes']]}"
    return {c["name"]: (c["before"], c["after"], c["kind"]) for c in run["packages"]}


def test_a_snapshot_of_a_real_ml_env_records_every_package_as_pip_lists_it(
    real_host: Make,
) -> None:
    host = real_host({"look": "{py} -c 'import numpy, tiktoken; print(numpy.__version__)'"})
    listed = pip_list(host.python)
    # the names that hold secrets' words are there, so the comparison below covers them
    assert listed["tiktoken"] == "0.14.0" and listed["google-auth"] == "2.63.0"
    assert {"SecretStorage", "keyring", "python-jose", "passlib", "pykeepass"} <= set(listed)
    assert listed["torch"] == "2.13.0+cpu" and listed["numpy"] == "2.2.6"
    done = host.journal("run", "step", "look")
    assert done.returncode == 0, text(done.stderr)
    assert not SNAPSHOT_FAILED.search(text(done.stderr)), text(done.stderr)
    run = host.show(RUN_ID.findall(done.stderr)[-1].decode())
    assert run["output_tail"] == ["2.2.6"]
    assert not [p for p in run["probes"] if p["error"]]  # no snapshot that could not be read
    snapshots = host.snapshots(run["run"])
    assert sorted(snapshots) == ["after", "before"]
    for entries in snapshots.values():
        assert {e["name"]: e["version"] for e in entries.values()} == listed
    assert run["packages"] == []  # both read, nothing changed
    assert "[REDACTED]" not in json.dumps(run)
    assert "packages: no change" in text(host.journal("show", run["run"]).stdout)


def test_uv_takes_numpy_down_a_major_under_scipy_and_pillow(real_host: Make) -> None:
    host = real_host({"numpy-1": "{uv} pip install --python {py} numpy==1.26.4"})
    run = host.run("run", "step", "numpy-1")
    assert _changes(run) == {"numpy": ("2.2.6", "1.26.4", "downgraded")}
    assert " - numpy==2.2.6" in run["output_tail"] and " + numpy==1.26.4" in run["output_tail"]
    assert installed(host.python)["numpy"] == "1.26.4"
    found = _found(run)
    # numpy was named: no cascade; its major version flipped under compiled modules
    assert "downgrade-cascade" not in found
    assert found["numpy-abi"]["severity"] == "warning"
    assert "numpy went from 2.2.6 to 1.26.4" in found["numpy-abi"]["title"]
    # the run's page shows the change in its package table
    from journal.web import create_app

    client = create_app({"DB": str(host.db), "TESTING": True}).test_client()
    page = client.get(f"/j/{NAME}/run/{run['run']}").get_data(as_text=True)
    rows = re.findall(r'<tr class="change [^>]*data-package="([^"]+)"[^>]*>(.*?)</tr>', page, re.S)
    assert [name for name, _ in rows] == ["numpy"], page
    cells = dict(re.findall(r'<td class="(\w+)">([^<]*)</td>', rows[0][1]))
    assert (cells["before"], cells["after"], cells["kind"]) == ("2.2.6", "1.26.4", "downgraded")


def test_a_scipy_pin_drags_numpy_down_unnamed_and_a_rollback_puts_both_back(
    real_host: Make,
) -> None:
    host = real_host({"pin-scipy": "{uv} pip install --python {py} scipy==1.11.4"})
    run = host.run("run", "step", "pin-scipy")
    assert _changes(run) == {
        "numpy": ("2.2.6", "1.26.4", "downgraded"),
        "scipy": ("1.15.3", "1.11.4", "downgraded"),
    }
    found = _found(run)
    cascade = found["downgrade-cascade"]
    assert cascade["severity"] == "error"  # numpy went down a major
    title = cascade["title"]
    assert "numpy 2.2.6 → 1.26.4" in title and "(package snapshots)" in title
    assert "scipy" not in title.split("downgraded", 1)[1]  # scipy was named
    assert "numpy==2.2.6" in cascade["advice"]
    assert found["numpy-abi"]["severity"] == "warning"

    back = host.run("rollback", "--to", "before:pin-scipy")
    # uv's default index is PyPI: the recorded install named no other
    assert re.search(r"numpy==2\.2\.6 +\(now 1\.26\.4\) from the host's default index", host.said)
    now = installed(host.python)
    assert (now["numpy"], now["scipy"]) == ("2.2.6", "1.15.3")
    assert back["rollback"]["to"] == "before:pin-scipy"
    assert _changes(back) == {
        "numpy": ("1.26.4", "2.2.6", "upgraded"),
        "scipy": ("1.11.4", "1.15.3", "upgraded"),
    }
    assert "rollback-incomplete" not in _found(back)
    assert _found(host.show(run["run"]))["downgrade-cascade"]["state"] == "resolved"


def test_pip_takes_numpy_down_and_pip_rolls_it_back_from_the_default_index(
    real_host: Make, house: Wheelhouse, older: Wheelhouse
) -> None:
    folders = f"{house.wheels} {older.wheels}"
    host = real_host(
        {"numpy-1": "{py} -m pip install numpy==1.26.4"},
        uv=False,
        host_env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": folders},
    )
    run = host.run("run", "step", "numpy-1")
    assert _changes(run) == {"numpy": ("2.2.6", "1.26.4", "downgraded")}
    assert "Successfully installed numpy-1.26.4" in run["output_tail"]
    found = _found(run)
    assert "downgrade-cascade" not in found
    assert found["numpy-abi"]["severity"] == "warning"

    back = host.run("rollback", "--to", "before:numpy-1")
    # the plan it printed: numpy from the host's default index (its pip config: the folders)
    assert re.search(r"numpy==2\.2\.6 +\(now 1\.26\.4\) from the host's default index", host.said)
    assert installed(host.python)["numpy"] == "2.2.6"
    assert " -m pip install" in back["command"] and "numpy==2.2.6" in back["command"]
    assert _changes(back) == {"numpy": ("1.26.4", "2.2.6", "upgraded")}
    assert "rollback-incomplete" not in _found(back)
    # numpy back at its major is no new numpy-abi, and the first one is resolved by it
    assert "numpy-abi" not in _found(back)
    first = _found(host.show(run["run"]))["numpy-abi"]
    assert first["state"] == "resolved" and first["resolved_by"]["run"] == back["run"]


def test_a_passing_import_check_resolves_numpy_abi_and_a_rollback_leaves_none_open(
    real_host: Make, older: Wheelhouse, house: Wheelhouse
) -> None:
    """The reported session, over the real sshd: numpy taken down a major, the advice's
    import check run and passing, then `journal rollback --to before:STEP`: no numpy-abi stays
    open."""
    check = "{py} -c 'import torch, numpy; print(torch.from_numpy(numpy.zeros(1)))'"
    folders = f"{house.wheels} {older.wheels}"
    host = real_host(
        {"pin-old-numpy": "{py} -m pip install numpy==1.26.4", "verify": check},
        uv=False,
        host_env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": folders},
        ssh=True,
    )
    pin = host.run("run", "step", "pin-old-numpy")
    assert _found(pin)["numpy-abi"]["severity"] == "warning"
    verify = host.run("run", "step", "verify")
    assert any("tensor([0.]" in line for line in verify["output_tail"])
    first = _found(host.show(pin["run"]))["numpy-abi"]
    assert first["state"] == "resolved" and first["resolved_by"]["run"] == verify["run"]
    assert "imported numpy, torch without complaint" in first["resolved_by"]["why"]
    back = host.run("rollback", "--to", "before:pin-old-numpy")
    assert installed(host.python)["numpy"] == "2.2.6"
    assert not {"numpy-abi", "rollback-incomplete"} & set(_found(back))
    listed = host.journal("pitfalls", "--format", "json")
    assert listed.returncode == 0, text(listed.stderr)
    still = [f for f in json.loads(listed.stdout)["findings"] if f["id"] == "numpy-abi"]
    assert still == []


#: Code asking a CPU torch for CUDA: `AssertionError: Torch not compiled with CUDA enabled`.
ASK_CUDA = "{py} -c 'import torch; torch.zeros(1).cuda()'"


def _pitfalls(host: Host) -> list[dict]:
    """Every finding of the journal (`journal pitfalls --all --format json`)."""
    listed = host.journal("pitfalls", "--all", "--format", "json")
    assert listed.returncode in (0, 1), text(listed.stderr)
    return json.loads(listed.stdout)["findings"]


def test_a_cpu_torch_on_a_host_with_no_gpu_is_no_finding_however_often_seen(
    real_host: Make,
) -> None:
    """torch 2.13.0+cpu on a host with no GPU (over the real sshd), where nothing asked for
    CUDA: the probe, `pip freeze` and a print all show the CPU build, and none of them is a
    cpu-torch. Code then asking for CUDA makes one, the looks its evidence, and its advice is
    no CUDA wheel for a host without GPUs."""
    host = real_host(
        {
            "freeze": "{py} -m pip freeze",
            "look": "{py} -c 'import torch; print(torch.__version__, torch.version.cuda)'",
            "ask-cuda": ASK_CUDA,
        },
        ssh=True,
    )
    freeze = host.run("run", "step", "freeze")
    assert any("torch==2.13.0+cpu" in line for line in freeze["output_tail"])
    look = host.run("run", "step", "look")
    assert any("2.13.0+cpu None" in line for line in look["output_tail"])
    probed = host.journal("run", "probe", "torch-env")
    assert probed.returncode == 0, text(probed.stderr)
    listed = host.journal("pitfalls", "--all", "--format", "json")
    assert listed.returncode == 0, text(listed.stderr)
    ids = [f["id"] for f in json.loads(listed.stdout)["findings"]]
    assert "cpu-torch" not in ids, ids
    asked = host.journal("run", "step", "ask-cuda")
    assert asked.returncode == 1, text(asked.stderr)
    again = host.journal("run", "step", "look")  # one more look at the same build
    assert again.returncode == 0, text(again.stderr)
    (one,) = [f for f in _pitfalls(host) if f["id"] == "cpu-torch"]
    assert one["state"] == "open" and one["severity"] == "warning"
    assert "the code asked for CUDA, on a host with no GPU in sight" in one["title"]
    evidence = " ".join(e["text"] for e in one["evidence"])
    assert "torch==2.13.0+cpu" in evidence and "Torch not compiled with CUDA enabled" in evidence
    assert "/whl/cu" not in one["advice"] and "/whl/cpu" in one["advice"]


def test_no_cpu_torch_where_the_cpu_build_was_asked_for(real_host: Make, house: Wheelhouse) -> None:
    """The CPU build pinned (`torch==2.13.0+cpu`, pip from a wheel folder, over the real
    sshd): code asking it for CUDA fails, and that is the code's mistake, not the install's."""
    host = real_host(
        {"pin-cpu": "{py} -m pip install torch==2.13.0+cpu", "ask-cuda": ASK_CUDA},
        uv=False,
        host_env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(house.wheels)},
        ssh=True,
    )
    pin = host.run("run", "step", "pin-cpu")
    satisfied = "Requirement already satisfied: torch==2.13.0+cpu"
    assert any(satisfied in line for line in pin["output_tail"])
    assert host.journal("run", "step", "ask-cuda").returncode == 1
    assert host.journal("run", "probe", "torch-env").returncode == 0
    ids = [f["id"] for f in _pitfalls(host)]
    assert not {"cpu-torch", "noop-install"} & set(ids), ids


def test_a_noop_is_not_resolved_by_a_pin_to_another_version_only_by_the_request_again(
    real_host: Make, house: Wheelhouse, older: Wheelhouse
) -> None:
    """Over the real sshd: `uv pip install numpy` audits and changes nothing (numpy 2.2.6 is
    there); `pip install numpy==1.26.4` asked for something else and leaves the no-op open;
    `pip install --upgrade numpy`, the bare request again, took and resolves it."""
    folders = f"{house.wheels} {older.wheels}"
    host = real_host(
        {
            "numpy": "{uv} pip install --python {py} numpy",
            "pin-old-numpy": "{py} -m pip install numpy==1.26.4",
            "numpy-again": "{py} -m pip install --upgrade numpy",
        },
        host_env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": folders},
        ssh=True,
    )
    noop = host.run("run", "step", "numpy")
    assert any(re.match(r"(Audited|Checked) 1 package", line) for line in noop["output_tail"])
    assert _found(noop)["noop-install"]["severity"] == "info"
    host.run("run", "step", "pin-old-numpy")
    assert _found(host.show(noop["run"]))["noop-install"]["state"] == "open"
    again = host.run("run", "step", "numpy-again")
    assert _changes(again)["numpy"] == ("1.26.4", "2.2.6", "upgraded")
    first = _found(host.show(noop["run"]))["noop-install"]
    assert first["state"] == "resolved" and first["resolved_by"]["run"] == again["run"]
    assert "numpy 1.26.4 -> 2.2.6, as asked for" in first["resolved_by"]["why"]


#: The demo's pure-Python benchmark (CPU time), `{py}` its python: NCCL cannot move it.
CPU_BENCH = """
[benchmarks.cpu-matmul]
run = '''{py} -c "{matmul}"'''
parser = "regex"
pattern = 'matmul n=\\d+ sample \\d+: (?P<matmul_mflops>[0-9.]+) MFLOP/s'
units = {{ matmul_mflops = "MFLOP/s" }}
"""
#: What a check of NCCL prints, read here from the installed `nvidia-nccl-cu13` (a CPU torch
#: loads none), with the NCCL_* tuning of the host.
NCCL_LOOK = (
    "{py} -c \"import importlib.metadata as m; print('NCCL:', m.version('nvidia-nccl-cu13'))\""
    " && env | grep '^NCCL_'"
)


def _nccl_wheels(folder: Path) -> Path:
    """Two `nvidia-nccl-cu13` wheels built here (the real ones are 200 MB of CUDA library)."""
    from journal.demo.wheels import _plain, build_wheel

    folder.mkdir()
    for version in ("2.27.7", "2.28.9"):
        wheel = _plain("nvidia-nccl-cu13", "nvidia.nccl", version)
        (folder / wheel.filename).write_bytes(build_wheel(wheel))
    return folder


def test_nccl_changed_stays_open_after_a_cpu_benchmark_and_a_fallen_allreduce(
    real_host: Make, tmp_path: Path
) -> None:
    """Over the real sshd, pip taking nvidia-nccl-cu13 2.27.7 -> 2.28.9 on a host with
    NCCL_ALGO tuned: the pure-Python benchmark after it resolves nothing, an allreduce 39.9%
    below its baseline neither; one back within 5% of it does."""
    host = real_host(
        {
            "nccl-old": "{py} -m pip install nvidia-nccl-cu13==2.27.7",
            "look": NCCL_LOOK,
            "nccl-new": "{py} -m pip install nvidia-nccl-cu13==2.28.9",
        },
        uv=False,
        host_env={
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(_nccl_wheels(tmp_path / "nccl-wheels")),
            "NCCL_ALGO": "Ring",
        },
        ssh=True,
        extra=CPU_BENCH.format(py=tmp_path / "ml-env" / "bin" / "python", matmul=MATMUL),
    )
    allreduce = ("allreduce_busbw", "--unit", "GB/s", "--host", "box", "--label", "size=1GiB")

    def record(value: str, *labels: str) -> None:
        done = host.journal("record", "metric", allreduce[0], value, *allreduce[1:], *labels)
        assert done.returncode == 0, text(done.stderr)

    def bench(phase: str) -> None:
        done = host.journal("run", "bench", "cpu-matmul", "--label", f"phase={phase}")
        assert done.returncode == 0, text(done.stderr)

    host.run("run", "step", "nccl-old")
    host.run("run", "step", "look")
    bench("before")
    record("360.0", "--label", "phase=before")
    change = host.run("run", "step", "nccl-new")
    assert _changes(change)["nvidia-nccl-cu13"] == ("2.27.7", "2.28.9", "upgraded")
    host.run("run", "step", "look")

    def changed() -> dict:
        (one,) = [f for f in _pitfalls(host) if f["id"] == "nccl-changed"]
        return one

    found = changed()
    assert found["state"] == "open" and found["severity"] == "warning"
    assert "2.27.7" in found["title"] and "2.28.9" in found["title"]
    bench("after")
    assert changed()["state"] == "open"  # a CPU matmul says nothing about NCCL
    record("216.4", "--label", "phase=after")  # -39.9%
    assert changed()["state"] == "open"
    record("357.0", "--label", "phase=after")  # -0.8%
    done = changed()
    assert done["state"] == "resolved", done
    assert "357" in done["resolved_by"]["why"] and "360" in done["resolved_by"]["why"]


def test_a_reinstall_of_tiktoken_is_recorded_as_uv_printed_it(real_host: Make) -> None:
    command = "{uv} pip install --python {py} --reinstall tiktoken==0.14.0"
    host = real_host({"reinstall": command})
    run = host.run("run", "step", "reinstall")
    assert run["command"] == command.format(py=host.python, uv=host.uv)
    assert " ~ tiktoken==0.14.0" in run["output_tail"]
    changed = _changes(run)
    assert changed["tiktoken"] == ("0.14.0", "0.14.0", "reinstalled")
    # every package uv reinstalled (tiktoken and its requirements), and nothing else
    said = {m[1] for m in (re.match(r" ~ (\S+)==", line) for line in run["output_tail"]) if m}
    assert set(changed) == said and {kind for _, _, kind in changed.values()} == {"reinstalled"}
    assert not {"noop-install", "downgrade-cascade", "torch-replaced"} & set(_found(run))


def test_a_dry_run_that_would_replace_torch_replaces_nothing(real_host: Make) -> None:
    """uv reads only metadata: it says it would swap torch 2.13.0+cpu for the 2.14.0 that
    torchvision 0.29.0 pins, and downloads no CUDA wheel. The snapshots show that nothing
    changed, so torch-replaced, which judges from them, says nothing (it has no word for a
    plan that would have replaced torch)."""
    host = real_host({"try": f"{{uv}} pip install --python {{py}} --dry-run {TORCHVISION}"})
    run = host.run("run", "step", "try")
    out = run["output_tail"]
    assert "Would uninstall 1 package" in out
    assert " - torch==2.13.0+cpu" in out and " + torch==2.14.0" in out
    assert run["packages"] == []
    assert installed(host.python)["torch"] == "2.13.0+cpu"
    assert not {"torch-replaced", "downgrade-cascade", "numpy-abi"} & set(_found(run))


def test_a_sync_without_torch_removes_it_and_torch_replaced_says_so(
    real_host: Make, tmp_path: Path
) -> None:
    """`uv pip sync` of a requirements file written where torch was not installed takes torch
    (and whatever else the file lacks) away; the command never named torch."""
    wanted = tmp_path / "requirements.txt"
    wanted.write_text("numpy==2.2.6\npillow==11.3.0\ntiktoken==0.14.0\n")
    host = real_host({"sync": "{uv} pip sync --python {py} " + str(wanted)})
    run = host.run("run", "step", "sync")
    removed = {name for name, (_, _, kind) in _changes(run).items() if kind == "removed"}
    assert {"torch", "scipy"} <= removed
    assert "torch" not in installed(host.python)
    replaced = _found(run)["torch-replaced"]
    assert "removed torch 2.13.0+cpu without naming torch" in replaced["title"]
    assert replaced["severity"] == "error"
    assert "torch==2.13.0+cpu" in replaced["advice"]


def test_lint_does_not_take_a_real_dry_run_for_a_replacement(real_host: Make) -> None:
    """The same dry run's output pasted as a transcript: no snapshots, only uv's lines, which
    say what it would do."""
    host = real_host({})
    command = f"{host.uv} pip install --python {host.python} --dry-run {TORCHVISION}"
    done = subprocess.run(
        ["bash", "-c", command], env=host.env, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0 or " - torch==2.13.0+cpu" not in done.stdout + done.stderr:
        pytest.fail(f"uv planned no replacement of torch:\n{done.stdout}{done.stderr}")
    transcript = host.folder / "session.txt"
    transcript.write_text(f"user@gpu-box:~$ {command}\n{done.stdout}{done.stderr}")
    lint = journal("lint", str(transcript), "--format", "json", env=host.env)
    if lint.returncode not in (0, 1):
        pytest.fail(text(lint.stderr))
    claims = [
        f"{f['id']}: {f['title']}"
        for f in json.loads(lint.stdout)["findings"]
        if f["id"] in ("torch-replaced", "unverified-change", "downgrade-cascade", "numpy-abi")
        and "would" not in f["title"]
    ]
    assert claims == []
