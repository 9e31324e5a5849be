"""`journal rollback` on the demo's stand-in wheels with real uv, real pip and a real sshd.

The session's `journal demo` (tests/conftest.py) is the starting point; each test works on its
own copy of the demo folder (the target env is changed by a rollback), its runbook pointed at
the copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from journal.demo.run import find_uv
from journal.events import ProbeRecorded, StepStarted
from journal.store import EventStore
from tests.helpers import journal, no_traceback, text
from tests.sshd import SshHome, SshServer

JOURNAL = "cuda13-demo"
#: The stack the demo's env held before its upgrade (its cu128 stand-in index has it).
OLD = {
    "numpy": "2.4.2",
    "pillow": "12.1.1",
    "torch": "2.10.0+cu128",
    "torchaudio": "2.10.0+cu128",
    "torchvision": "0.25.0+cu128",
}


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's env without the machine's own pip settings (a find-links folder)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    return {**env, **(extra or {})}


@pytest.fixture(scope="module")
def demo_folder(demo_journal: tuple[Path, Path]) -> Path:
    """The session's `journal demo` folder (its plan ran reinstall-torch: the cu130 nightly
    stack), which every test copies before changing anything."""
    return demo_journal[0].parent


class Demo:
    """A copy of the demo folder: its database, runbook, target env and indexes."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.db = folder / "journal.db"
        self.runbook = folder / "runbook.toml"
        self.python = folder / "ml-env" / "bin" / "python3"
        self.cu128 = (folder / "indexes" / "cu128" / "simple").as_uri()
        self.env = env

    def run(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return journal(*args, db=self.db, runbook=self.runbook, env=self.env)

    def packages(self) -> dict[str, str]:
        """What the target env holds now, read outside the journal."""
        script = (
            "import json, importlib.metadata as m; print(json.dumps({d.metadata['Name'].lower()"
            ": d.version for d in m.distributions()}))"
        )
        done = subprocess.run(
            [str(self.python), "-c", script], capture_output=True, check=True, cwd=self.folder
        )
        return json.loads(done.stdout)

    def events(self) -> list:
        store = EventStore(str(self.db))
        try:
            return list(store.read(JOURNAL))
        finally:
            store.close()

    def uv(self, *args: str) -> None:
        """uv run by hand on the target env, as someone at the host would."""
        env = {**clean_env(), "UV_CACHE_DIR": str(self.folder / "uv-cache"), "UV_NO_CONFIG": "1"}
        subprocess.run([find_uv(), *args], env=env, check=True, capture_output=True)


def copy_demo(
    source: Path,
    folder: Path,
    *,
    uv: bool = True,
    ssh: str | None = None,
    host_env: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    more: str = "",
) -> Demo:
    """A copy of the demo in ``folder``: its host's default index is the cu128 stand-in one
    (the demo's runbook gives uv's, as a real host has PyPI or a mirror; pip's is added), the
    demo's uv in the runbook unless not ``uv``, another ssh target, more host env, and
    ``more`` runbook text."""
    shutil.copytree(source, folder, symlinks=True)
    demo = Demo(folder, clean_env(env))
    host = {"PIP_INDEX_URL": demo.cu128, **(host_env or {})}
    extra = ", ".join(f'{k} = "{v}"' for k, v in host.items())
    runbook = demo.runbook.read_text().replace(str(source), str(folder))
    assert f'UV_INDEX_URL = "{demo.cu128}"' in runbook and f'uv = "{find_uv()}"' in runbook
    runbook = runbook.replace("env = { UV_CACHE_DIR", f"env = {{ {extra}, UV_CACHE_DIR", 1)
    if not uv:
        runbook = runbook.replace(f'uv = "{find_uv()}"\n', "", 1)
    if ssh:
        runbook = runbook.replace('ssh = "local"', f'ssh = "{ssh}"', 1)
    demo.runbook.write_text(runbook + more)
    return demo


def assert_rolled_back(demo: Demo, result: subprocess.CompletedProcess[bytes]) -> StepStarted:
    """The env holds the old stack again, recorded as a rollback run whose probe read the old
    NCCL; its StepStarted."""
    assert result.returncode == 0, text(result.stderr)
    now = demo.packages()
    assert {name: now.get(name) for name in OLD} == OLD
    assert "nvidia-nccl-cu13" not in now
    records = demo.events()
    started = [r.event for r in records if isinstance(r.event, StepStarted)][-1]
    assert started.step == "rollback"
    assert started.rollback is not None
    assert (
        started.rollback["to"] == "before:install-torch" and started.rollback["phase"] == "before"
    )
    assert {k: started.rollback["packages"][k] for k in OLD} == OLD
    probes = [
        r.event
        for r in records
        if isinstance(r.event, ProbeRecorded)
        and r.event.run == started.run
        and r.event.probe == "torch-env"
    ]
    assert probes and probes[-1].result is not None
    assert probes[-1].result["torch"]["version"] == "2.10.0+cu128"
    assert "2.22.3" in json.dumps(probes[-1].result["nccl"])
    assert b"rollback-incomplete" not in result.stderr
    return started


def assert_shown_as_a_rollback(demo: Demo, started: StepStarted) -> None:
    """The log, show, JSON, the web pages and the postmortem show the rollback as what it is,
    linking the run whose packages it put back; the web offers each step's way back."""
    target = started.rollback["run"]  # type: ignore[index]
    count = len(started.rollback["packages"])  # type: ignore[index]
    said = f"rollback to before:install-torch: the {count} packages before run {target}"
    log = text(demo.run("log").stdout)  # runs by the first 8 characters of their ids
    heading = next(line for line in log.splitlines() if line.endswith(f"run {started.run[:8]}"))
    assert "] rollback on local: succeeded" in heading
    assert said.replace(target, target[:8]) in log.split(heading, 1)[1].split("\n")[2]
    assert said in text(demo.run("show", started.run).stdout)
    items = json.loads(demo.run("log", "--format", "json").stdout)["items"]
    item = next(i for i in items if i.get("run") == started.run)
    assert item["rollback"]["to"] == "before:install-torch" and item["rollback"]["run"] == target
    # the postmortem: a rollback row linking its target's page
    base = "https://journal.example:8443/ui"
    out = demo.folder / "pm.md"
    done = demo.run("export", "postmortem", "-o", str(out), "--base-url", base)
    assert done.returncode in (0, 1), text(done.stderr)
    link = f"[`{target[:8]}`]({base}/j/{JOURNAL}/run/{target})"
    assert f"rollback to `before:install-torch` (the packages before run {link})" in (
        out.read_text()
    )
    # the web: the timeline tags it and links the target; its page says what it put back
    from journal.web import create_app

    client = create_app({"DB": str(demo.db), "TESTING": True}).test_client()
    page = client.get(f"/j/{JOURNAL}").get_data(as_text=True)
    if 'class="story pending"' in page:  # a first page shown from the stored timeline
        page = client.get(f"/j/{JOURNAL}").get_data(as_text=True)
    item_html = page.split(f'id="run-{started.run}"', 1)[1].split("</li>", 1)[0]
    assert '<span class="tag rollback">rollback</span>' in item_html
    assert f'href="/j/{JOURNAL}/run/{target}">before:install-torch</a>' in item_html
    own = client.get(f"/j/{JOURNAL}/run/{started.run}").get_data(as_text=True)
    assert "<dt>rolls back to</dt>" in own and f'href="/j/{JOURNAL}/run/{target}"' in own
    # every step run here offers the command that puts its host back before it, to copy
    offered = client.get(f"/j/{JOURNAL}/run/{target}").get_data(as_text=True)
    assert (
        '<code id="rollback-command">journal rollback --to before:install-torch --host local'
        "</code>" in offered
    )
    assert 'data-copy="rollback-command"' in offered
    imported = next(i["run"] for i in items if i.get("imported"))
    assert "rollback-command" not in client.get(f"/j/{JOURNAL}/run/{imported}").get_data(
        as_text=True
    )


def test_rollback_before_install_torch_with_uv_restores_the_old_stack(
    demo_folder: Path, tmp_path: Path
) -> None:
    demo = copy_demo(demo_folder, tmp_path / "demo")
    assert demo.packages()["torch"] == "2.12.0.dev20260226+cu130"
    result = demo.run("rollback", "--to", "before:install-torch")
    started = assert_rolled_back(demo, result)
    assert f"{find_uv()} pip uninstall --python" in started.command
    assert (
        "--reinstall-package torch" in started.command and "torch==2.10.0+cu128" in started.command
    )
    assert b"rollback on local succeeded" in result.stderr
    assert_shown_as_a_rollback(demo, started)
    # rolled back, the same rollback has nothing left to do (and says so, recorded)
    again = demo.run("rollback", "--to", "before:install-torch", "--dry-run", "--format", "json")
    plan = json.loads(again.stdout)["hosts"][0]
    assert (plan["install"], plan["remove"]) == ([], [])
    # forward again: the cu130 wheels come from the index the run that brought them used
    forward = demo.run("rollback", "--to", "reinstall-torch", "--dry-run", "--format", "json")
    assert forward.returncode == 0, text(forward.stderr)
    plan = json.loads(forward.stdout)["hosts"][0]
    runs = {e.step: e.run for e in (r.event for r in demo.events()) if isinstance(e, StepStarted)}
    sources = {i["name"]: i["source"] for i in plan["install"]}
    assert sources["torch"]["kind"] == "recorded"
    assert sources["torch"]["run"] == runs["reinstall-torch"]
    assert sources["torch"]["options"][0][0] == "index-url"
    assert sources["torch"]["options"][0][1].endswith("/indexes/cu130/simple")
    assert {i["pin"] for i in plan["install"]} >= {
        "torch==2.12.0.dev20260226+cu130",
        "nvidia-nccl-cu13==2.28.9",
        "numpy==2.4.1",
    }
    # named by its run (a unique start of its id): the same target, the same sources
    by_run = demo.run("rollback", "--to", runs["reinstall-torch"][:12], "--dry-run", "--format",
                      "json")  # fmt: skip
    assert by_run.returncode == 0, text(by_run.stderr)
    assert json.loads(by_run.stdout)["hosts"][0]["install"] == plan["install"]


def test_rollback_with_pip_when_the_host_has_no_uv(demo_folder: Path, tmp_path: Path) -> None:
    # no uv key and no uv on the host's PATH: the env's own pip (installed by hand here,
    # after the plan ran, from the wheel Python bundles) does the rollback
    demo = copy_demo(demo_folder, tmp_path / "demo", uv=False, host_env={"PATH": "/usr/bin:/bin"})
    import ensurepip

    wheel = next((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))
    demo.uv("pip", "install", "--quiet", "--python", str(demo.python), str(wheel))
    plan = demo.run("rollback", "--to", "before:install-torch", "--dry-run", "--format", "json")
    assert plan.returncode == 0, text(plan.stderr)
    hosts = json.loads(plan.stdout)["hosts"]
    assert hosts[0]["installer"] == "pip"
    assert [k["name"] for k in hosts[0]["kept"]] == ["pip"]  # the target had no pip
    result = demo.run("rollback", "--to", "before:install-torch")
    started = assert_rolled_back(demo, result)
    assert " -m pip uninstall -y nvidia-nccl-cu13 && " in started.command
    assert " -m pip install --no-deps --force-reinstall " in started.command
    assert "pip" in demo.packages()  # never removed
    # installed from a wheel file, pip's snapshot says where from (PEP 610's direct_url.json)
    from journal.events import PackagesSnapshotted

    snapshot = [r.event for r in demo.events() if isinstance(r.event, PackagesSnapshotted)][-1]
    assert snapshot.packages["pip"]["direct_url"]["url"] == wheel.resolve().as_uri()
    assert "archive_info" in snapshot.packages["pip"]["direct_url"]


def test_rollback_over_ssh(
    demo_folder: Path, tmp_path: Path, sshd: SshServer, ssh_home: SshHome
) -> None:
    demo = copy_demo(demo_folder, tmp_path / "demo", ssh=sshd.alias, env=ssh_home.env())
    result = demo.run("rollback", "--to", "before:install-torch")
    started = assert_rolled_back(demo, result)
    assert started.target.endswith(f"@{sshd.address}:{sshd.port}")


def test_dry_run_prints_the_plan_and_records_nothing(demo_folder: Path, tmp_path: Path) -> None:
    demo = copy_demo(demo_folder, tmp_path / "demo")
    count = len(demo.events())
    before = demo.packages()
    shown = demo.run("rollback", "--to", "before:install-torch", "--dry-run")
    assert shown.returncode == 0, text(shown.stderr)
    out = text(shown.stdout)
    assert "rollback of local to before:install-torch: the packages before install-torch" in out
    assert (
        "torch==2.10.0+cu128  (now 2.12.0.dev20260226+cu130) from the host's default index" in out
    )
    assert "remove 1:\n    nvidia-nccl-cu13 2.28.9" in out
    assert "nothing was run or recorded" in text(shown.stderr)
    result = demo.run("rollback", "--to", "before:install-torch", "--dry-run", "--format", "json")
    assert result.returncode == 0, text(result.stderr)
    doc = json.loads(result.stdout)
    assert (doc["journal"], doc["to"]) == (JOURNAL, "before:install-torch")
    (plan,) = doc["hosts"]
    runs = [e for e in (r.event for r in demo.events()) if isinstance(e, StepStarted)]
    install_torch = [e.run for e in runs if e.step == "install-torch"][-1]
    assert plan["target"]["run"] == install_torch and plan["target"]["phase"] == "before"
    assert {k: plan["target"]["packages"][k] for k in OLD} == OLD
    assert plan["installer"] == "uv" and plan["uv"] == find_uv()
    assert {i["name"]: i["version"] for i in plan["install"]} == OLD
    assert {i["source"]["kind"] for i in plan["install"]} == {"default"}
    assert plan["remove"] == [{"name": "nvidia-nccl-cu13", "version": "2.28.9"}]
    assert plan["command"].startswith(f"{find_uv()} pip uninstall --python ")
    assert len(demo.events()) == count  # recorded nothing
    assert demo.packages() == before  # and changed nothing
    bad = demo.run("rollback", "--to", "before:install-torch", "--format", "json")
    assert bad.returncode == 2 and no_traceback(bad) and b"--dry-run" in bad.stderr
    # without the runbook's uv, the one the host's PATH finds
    uv = Path(find_uv())
    runbook = demo.runbook.read_text().replace(f'uv = "{uv}"\n', "")
    path = f'env = {{ PATH = "{uv.parent}:/usr/bin:/bin", '
    demo.runbook.write_text(runbook.replace("env = { ", path, 1))
    found = demo.run("rollback", "--to", "before:install-torch", "--dry-run", "--format", "json")
    assert found.returncode == 0, text(found.stderr)
    assert json.loads(found.stdout)["hosts"][0]["uv"] == str(uv)
    assert len(demo.events()) == count
    # a package another installer put there is named: conda's list will be wrong after
    (installer,) = demo.folder.glob("ml-env/lib/python*/site-packages/numpy-*.dist-info/INSTALLER")
    installer.write_text("conda\n")
    noted = demo.run("rollback", "--to", "before:install-torch", "--dry-run")
    assert "note: conda installed numpy 2.4.1; the rollback replaces it with uv's" in text(
        noted.stdout
    )
    noted = demo.run("rollback", "--to", "before:install-torch", "--dry-run", "--format", "json")
    foreign = json.loads(noted.stdout)["hosts"][0]["foreign"]
    assert foreign == [{"name": "numpy", "version": "2.4.1", "installer": "conda"}]


def test_a_wheel_gone_from_every_source_fails_at_planning(
    demo_folder: Path, tmp_path: Path
) -> None:
    demo = copy_demo(demo_folder, tmp_path / "demo")
    shutil.rmtree(demo.folder / "indexes" / "cu128" / "simple" / "torchaudio")
    count, before = len(demo.events()), demo.packages()
    result = demo.run("rollback", "--to", "before:install-torch")
    assert result.returncode == 2 and no_traceback(result)
    said = " ".join(text(result.stderr).split())
    assert "torchaudio 2.10.0+cu128 of the target set" in said
    assert "available from no source: tried the host's default index" in said
    assert len(demo.events()) == count and demo.packages() == before


def test_an_interrupted_rollback_run_again_converges(demo_folder: Path, tmp_path: Path) -> None:
    demo = copy_demo(demo_folder, tmp_path / "demo")
    # half of the rollback done (by hand, or by a rollback stopped half-way): the NCCL gone,
    # torch back, the rest still new
    py = str(demo.python)
    demo.uv("pip", "uninstall", "--python", py, "nvidia-nccl-cu13")
    demo.uv("pip", "install", "--python", py, "--no-deps", "torch==2.10.0+cu128", "-i", demo.cu128)
    plan = demo.run("rollback", "--to", "before:install-torch", "--dry-run", "--format", "json")
    hosts = json.loads(plan.stdout)["hosts"]
    assert sorted(i["name"] for i in hosts[0]["install"]) == [
        "numpy",
        "pillow",
        "torchaudio",
        "torchvision",
    ]
    assert hosts[0]["remove"] == [] and "torch" in hosts[0]["unchanged"]
    assert_rolled_back(demo, demo.run("rollback", "--to", "before:install-torch"))


def test_rollback_incomplete_when_a_shadowing_copy_hides_the_installed_one(
    demo_folder: Path, tmp_path: Path
) -> None:
    # numpy 2.4.1's metadata on PYTHONPATH, ahead of the env's site-packages: the rollback
    # installs numpy 2.4.2 into the env, yet python still finds 2.4.1 first
    shadow = tmp_path / "shadow" / "numpy-2.4.1.dist-info"
    shadow.mkdir(parents=True)
    (shadow / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 2.4.1\n")
    demo = copy_demo(demo_folder, tmp_path / "demo", host_env={"PYTHONPATH": str(shadow.parent)})
    result = demo.run("rollback", "--to", "before:install-torch")
    assert result.returncode == 1, text(result.stderr)
    said = " ".join(text(result.stderr).split())
    assert "rollback-incomplete (error) on local" in said
    assert "numpy 2.4.1 (the target: 2.4.2)" in said
    pitfalls = demo.run("pitfalls", "--format", "json")
    found = [f for f in json.loads(pitfalls.stdout)["findings"] if f["id"] == "rollback-incomplete"]
    assert len(found) == 1 and found[0]["severity"] == "error"
    # once the shadow is gone, the same rollback reaches its target and resolves it
    shutil.rmtree(shadow.parent)
    again = demo.run("rollback", "--to", "before:install-torch")
    assert again.returncode == 0, text(again.stderr)
    pitfalls = demo.run("pitfalls", "--format", "json")
    assert not [
        f for f in json.loads(pitfalls.stdout)["findings"] if f["id"] == "rollback-incomplete"
    ]


FLAKY = """
[[steps]]
name = "flaky"
run = '''{uv} pip uninstall --python {py} {package}; test -f {flag}'''
"""


def flaky_demo(demo_folder: Path, tmp_path: Path) -> tuple[Demo, Path]:
    """A demo copy whose runbook has step ``flaky`` (it removes the NCCL, then fails unless
    the flag file is there) and step ``steady`` (it removes pillow, the same way)."""
    demo = copy_demo(demo_folder, tmp_path / "demo")
    flag = tmp_path / "flag"
    steps = FLAKY.format(uv=find_uv(), py=demo.python, package="nvidia-nccl-cu13", flag=flag)
    steady = FLAKY.format(uv=find_uv(), py=demo.python, package="pillow", flag=flag)
    demo.runbook.write_text(demo.runbook.read_text() + steps + steady.replace("flaky", "steady"))
    return demo, flag


def tries(demo: Demo, step: str) -> list[str]:
    return [e.run for e in (r.event for r in demo.events()) if getattr(e, "step", "") == step]


def test_a_retried_failure_rolls_back_to_before_the_first_try(
    demo_folder: Path, tmp_path: Path
) -> None:
    demo, flag = flaky_demo(demo_folder, tmp_path)
    assert demo.run("run", "step", "flaky").returncode == 1  # the NCCL gone, then failed
    assert demo.run("run", "step", "flaky").returncode == 1  # failed again
    flag.touch()
    assert demo.run("run", "step", "flaky").returncode == 0
    plan = demo.run("rollback", "--to", "before:flaky", "--dry-run", "--format", "json")
    assert plan.returncode == 0, text(plan.stderr)
    target = json.loads(plan.stdout)["hosts"][0]["target"]
    assert target["run"] == tries(demo, "flaky")[0]
    assert target["packages"]["nvidia-nccl-cu13"] == "2.28.9"


def test_before_a_step_after_another_step_is_before_its_latest_try(
    demo_folder: Path, tmp_path: Path
) -> None:
    demo, flag = flaky_demo(demo_folder, tmp_path)
    assert demo.run("run", "step", "flaky").returncode == 1  # the NCCL gone, then failed
    flag.touch()
    assert demo.run("run", "step", "steady").returncode == 0  # another step between
    assert demo.run("run", "step", "flaky").returncode == 0
    plan = demo.run("rollback", "--to", "before:flaky", "--dry-run", "--format", "json")
    target = json.loads(plan.stdout)["hosts"][0]["target"]
    assert target["run"] == tries(demo, "flaky")[-1]
    assert "nvidia-nccl-cu13" not in target["packages"] and "pillow" not in target["packages"]


def test_targets_that_name_nothing_are_bad_input(demo_folder: Path, tmp_path: Path) -> None:
    spare = '\n[hosts.spare]\nssh = "local"\npython = "' + sys.executable + '"\n'
    demo = copy_demo(demo_folder, tmp_path / "demo")
    text_ = demo.runbook.read_text()
    demo.runbook.write_text(text_.replace("\n[probes.torch-env]", spare + "\n[probes.torch-env]"))
    count = len(demo.events())
    for args, said in (
        (["--to", "before:install-torch", "--host", "spare"], "install-torch never ran on spare"),
        (["--to", "no-such-thing"], "no step run 'no-such-thing'"),
        (["--to", "before:"], "names no step"),
        (["--to", "install-torch", "--host", "gpu-box"], "no host named 'gpu-box'"),
        (["--to", "backup-env", "--rolling", "0"], "--rolling 0"),
    ):
        result = demo.run("rollback", *args)
        assert result.returncode == 2 and no_traceback(result), (args, text(result.stderr))
        assert said in " ".join(text(result.stderr).split()), (args, text(result.stderr))
    assert len(demo.events()) == count


# -- the parts, without a host ------------------------------------------------------------------


def _timeline(runs: list[tuple[str, str, dict | None, dict | None, bool]]):  # type: ignore[no-untyped-def]
    """A timeline of step runs on host ``h``: (run id, command, before, after, imported)."""
    from journal.events import PackagesSnapshotted, StepFinished
    from journal.mapper import Recorded
    from journal.projections.timeline import project

    records, seq = [], 0

    def add(event) -> None:  # type: ignore[no-untyped-def]
        nonlocal seq
        seq += 1
        records.append(Recorded(seq, "j", f"2026-12-01T10:00:{seq:02d}Z", event, ""))

    for run, command, before, after, imported in runs:
        add(StepStarted(run, "s", "h", "local", command, imported=imported))
        for phase, packages in (("before", before), ("after", after)):
            if packages is not None:
                add(PackagesSnapshotted("h", phase, "py", packages, 0.1, run))
        add(StepFinished(run, "h", "succeeded", 0, 1.0))
    return project("j", records)


def _snap(**versions: str) -> dict:
    return {name: {"name": name, "version": v} for name, v in versions.items()}


def test_sources_are_the_recorded_installs_that_brought_the_version_newest_first() -> None:
    from journal.service.rollback_sources import Installs, sources_for
    from journal.service.rollback_target import Target

    old, new = _snap(torch="2.9.0+cu126"), _snap(torch="2.10.0+cu128")
    timeline = _timeline(
        [
            # brought it: its index options, each kind kept, in order
            ("r1", "uv pip install torch -i A --extra-index-url B -f C", old, new, False),
            # ran while it was already there: brought nothing
            ("r2", "pip install torch --index-url D", new, new, False),
            # an imported command pinning that very version
            ("r3", "pip install torch==2.10.0+cu128 --index-url E", None, None, True),
            # a secret masked out of the URL: no use
            ("r4", "pip install torch==2.10.0+cu128 -i https://[REDACTED]@x/", None, None, True),
            # another version
            ("r5", "pip install torch==2.8.0 --index-url F", None, None, True),
        ]
    )
    entry = {"name": "torch", "version": "2.10.0+cu128"}
    entry["direct_url"] = {"url": "file:///w/torch.whl", "archive_info": {}}
    target = Target("h", "before:x", "r9", "x", "before", "", {"torch": entry})
    sources = sources_for(Installs.of(timeline), target, "torch")
    found = [(s.kind, s.options, s.run, s.url) for s in sources]
    assert found == [
        ("recorded", (("index-url", "E"),), "r3", None),
        (
            "recorded",
            (("index-url", "A"), ("extra-index-url", "B"), ("find-links", "C")),
            "r1",
            None,
        ),
        ("direct-url", (), None, "file:///w/torch.whl"),
        ("default", (), None, None),
    ]


def test_the_plan_command_per_installer() -> None:
    from journal.service.rollback_plan import HostPlan, Install, Source
    from journal.service.rollback_target import Target

    cu128 = Source("recorded", (("index-url", "file:///i/cu128"),), run="r1")
    target = Target("h", "before:x", "r1", "x", "before", "", {})
    installs = [
        Install("torch", "torch", "2.10.0+cu128", "2.12.0+cu130", cu128),
        Install("numpy", "numpy", "2.4.2", "2.4.1", Source("default")),
    ]
    remove = [("nvidia-nccl-cu13", "2.28.9")]
    uv = HostPlan("h", target, "uv", "/u/uv", "~/env/bin/python", installs, remove, [], [])
    assert uv.command() == (
        "/u/uv pip uninstall --python ~/env/bin/python nvidia-nccl-cu13"
        " && /u/uv pip install --python ~/env/bin/python --no-deps --reinstall-package torch"
        " torch==2.10.0+cu128 --index-url file:///i/cu128"
        " && /u/uv pip install --python ~/env/bin/python --no-deps --reinstall-package numpy"
        " numpy==2.4.2"
    )
    pip = HostPlan("h", target, "pip", None, "/e b/python", installs, remove, [], [])
    assert pip.command() == (
        "'/e b/python' -m pip uninstall -y nvidia-nccl-cu13"
        " && '/e b/python' -m pip install --no-deps --force-reinstall torch==2.10.0+cu128"
        " --index-url file:///i/cu128"
        " && '/e b/python' -m pip install --no-deps --force-reinstall numpy==2.4.2"
    )


def test_rollback_incomplete_names_what_differs() -> None:
    from journal.pitfalls.rollback_incomplete import differences

    target = {"torch": "2.10.0+cu128", "numpy": "2.4.2", "pillow": "12.1.1"}
    after = _snap(torch="2.10.0+cu130", pillow="12.1.1", pip="24.0", **{"nvidia-nccl-cu13": "2"})
    assert differences(target, after) == [
        "numpy missing (the target: 2.4.2)",
        "nvidia-nccl-cu13 2 (not in the target)",
        "torch 2.10.0+cu130 (the target: 2.10.0+cu128)",
    ]
    assert differences({"a": "1.0"}, _snap(a="1.0.0", pip="1")) == []


def test_a_step_started_without_the_rollback_field_still_loads() -> None:
    from journal.mapper import from_row

    event = from_row(
        "StepStarted",
        1,
        {"run": "r", "step": "s", "host_name": "h", "target": "local", "command": "true"},
    )
    assert isinstance(event, StepStarted) and event.rollback is None


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ('"bin/uv"', "relative to no folder"),
        ('""', "must not be empty"),
        ("3", "expected a string"),
    ],
)
def test_the_runbook_uv_key_is_checked(tmp_path: Path, value: str, said: str) -> None:
    from journal.errors import BadInput
    from journal.runbook import parse

    text_ = f'[journal]\nname = "j"\n[hosts.h]\nssh = "local"\nuv = {value}\n'
    with pytest.raises(BadInput, match=said):
        parse(text_, tmp_path / "runbook.toml")
    ok = parse(text_.replace(value, '"~/.local/bin/uv"'), tmp_path / "runbook.toml")
    assert ok.hosts["h"].uv == "~/.local/bin/uv"


def test_a_fleet_rolls_each_host_back_to_its_own_set(demo_folder: Path, tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    demo = copy_demo(demo_folder, folder, host_env={"PY": str(folder / "ml-env/bin/python3")})
    # a second host whose env has its own history: pillow gone before the fleet's step
    py2 = folder / "ml-env2" / "bin" / "python3"
    shutil.copytree(folder / "ml-env", folder / "ml-env2", symlinks=True)
    demo.uv("pip", "uninstall", "--python", str(py2), "pillow")
    cu130 = (folder / "indexes" / "cu130" / "simple").as_uri()
    demo.runbook.write_text(
        demo.runbook.read_text().replace(
            "\n[probes.torch-env]",
            f'\n[hosts.second]\nssh = "local"\npython = "{py2}"\nuv = "{find_uv()}"\n'
            f'env = {{ PY = "{py2}", UV_INDEX_URL = "{cu130}", UV_CACHE_DIR = '
            f'"{folder}/uv-cache", UV_NO_CONFIG = "1" }}\n\n[probes.torch-env]',
        )
        + f"""
[[steps]]
name = "drop-nccl"
run = '''{find_uv()} pip uninstall --python "$PY" nvidia-nccl-cu13'''
"""
    )
    assert demo.run("run", "step", "drop-nccl", "--all-hosts").returncode == 0
    result = demo.run("rollback", "--to", "before:drop-nccl", "--rolling", "1")
    assert result.returncode == 0, text(result.stderr)
    started = [r.event for r in demo.events() if isinstance(r.event, StepStarted)]
    rollbacks = {e.host_name: e for e in started if e.step == "rollback"}
    assert set(rollbacks) == {"local", "second"}
    assert rollbacks["local"].rollback["packages"]["pillow"] == "12.1.0"
    assert "pillow" not in rollbacks["second"].rollback["packages"]  # its own recorded set
    assert demo.packages()["nvidia-nccl-cu13"] == "2.28.9"
    second = Demo(folder, demo.env)
    second.python = py2
    assert second.packages()["nvidia-nccl-cu13"] == "2.28.9"
    assert "pillow" not in second.packages()


SHIM = """#!/bin/sh
# the host's uv, which does {action} once, at the rollback's install (after its uninstall)
case " $* " in
*" pip install "*)
    case " $* " in *" --dry-run "*) ;; *)
        if [ ! -e {done} ]; then
            touch {done}
            {action}
        fi
    esac
esac
exec {uv} "$@"
"""
KILL = 'while [ ! -s {pid} ]; do sleep 0.05; done; kill -9 "$(cat {pid})"; exit 1'
FAIL = "echo 'error: the index went away' >&2; exit 3"


def shimmed(demo_folder: Path, tmp_path: Path, action: str) -> Demo:
    """A demo copy whose host's uv is a shim over the real one doing ``action`` once."""
    shim = tmp_path / "uv"
    shim.write_text(SHIM.format(done=tmp_path / "done", action=action, uv=find_uv()))
    shim.chmod(0o755)
    demo = copy_demo(demo_folder, tmp_path / "demo")
    runbook = demo.runbook.read_text()
    demo.runbook.write_text(runbook.replace(f'uv = "{find_uv()}"', f'uv = "{shim}"'))
    return demo


def test_a_failed_rollback_exits_1_and_is_incomplete(demo_folder: Path, tmp_path: Path) -> None:
    demo = shimmed(demo_folder, tmp_path, FAIL)
    result = demo.run("rollback", "--to", "before:install-torch")
    assert result.returncode == 1, text(result.stderr)  # not uv's 3
    said = " ".join(text(result.stderr).split())
    assert "rollback on local failed, exit 3" in said
    assert "rollback-incomplete (error) on local" in said
    assert "torch 2.12.0.dev20260226+cu130 (the target: 2.10.0+cu128)" in said
    assert_rolled_back(demo, demo.run("rollback", "--to", "before:install-torch"))


def test_a_rollback_whose_journal_was_killed_half_way_converges(
    demo_folder: Path, tmp_path: Path
) -> None:
    pid = tmp_path / "journal.pid"
    demo = shimmed(demo_folder, tmp_path, KILL.format(pid=pid))
    cmd = [sys.executable, "-m", "journal", "--db", str(demo.db), "--runbook", str(demo.runbook)]
    proc = subprocess.Popen(
        [*cmd, "rollback", "--to", "before:install-torch"],
        env=demo.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    pid.write_text(str(proc.pid))
    assert proc.wait(timeout=120) == -9  # killed after the uninstall, before the install
    now = demo.packages()
    assert "nvidia-nccl-cu13" not in now and now["torch"] == "2.12.0.dev20260226+cu130"
    first = [r.event for r in demo.events() if isinstance(r.event, StepStarted)][-1].run
    # run again: the lost run is recorded to its end, then the rest is planned and done
    result = demo.run("rollback", "--to", "before:install-torch")
    assert_rolled_back(demo, result)
    from journal.events import StepFinished

    ends = {r.event.run: r.event for r in demo.events() if isinstance(r.event, StepFinished)}
    assert ends[first].status == "failed" and ends[first].exit_code == 1
