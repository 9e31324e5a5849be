"""Install pitfalls judged on real installer output: noop-install, variant-not-switched,
downgrade-cascade, torch-replaced, dependency-conflict and unverified-change.

Everything the detectors read here was printed by the real tools, run by these tests: uv (the
version in journal's env, which says `Checked N packages`, and `uv==0.10.9` from PyPI, which
says `Audited N packages`), pip (`python -m pip install --no-index --find-links DIR`), `pip
check` and `uv pip check`, against stand-in wheels built here (journal.demo.wheels): a
`2.10.0+cu128` torch stack, a `2.12.0.dev20260226+cu130` nightly that pins numpy and pillow
one patch lower (as the seed's nightly index did), and an `sglang 0.5.9` that pins
`torch==2.9.1` (as sglang 0.5.9 does). Journals are made by `journal run plan` / `run step` on
a `local` host; transcripts are assembled from the commands and what they printed.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal.demo.wheels import StandIn, build_index, build_indexes, build_wheel, index_packages
from journal.pitfalls import catalogue, judge
from journal.pitfalls.base import Finding
from journal.pitfalls.subjects import from_transcript
from journal.projections.packages import diff_packages, normalize
from journal.reading.installs import named
from journal.reading.subject import Run, Subject
from journal.service.findings import judged
from journal.terminal import clean
from tests.helpers import journal, text, uv_binary

DATA = Path(__file__).parent / "data" / "transcripts"
NIGHTLY = "2.12.0.dev20260226+cu130"
OWNED = ("downgrade-cascade", "torch-replaced", "dependency-conflict", "unverified-change")
ID_DOWN, ID_UNV = "downgrade-cascade", "unverified-change"
#: The ids these tests judge; other detectors (nccl-changed, ...) may add their own findings.
IDS = {"noop-install", "variant-not-switched", *OWNED}


def _clean_env(**extra: str) -> dict[str, str]:
    """The environment without user config of pip or uv, so that output is the tools' own."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "UV_")) and k not in ("VIRTUAL_ENV", "PYTHONPATH")
    }
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        UV_NO_CONFIG="1",
        UV_PYTHON_DOWNLOADS="never",
        **extra,
    )
    return env


@dataclass
class Session:
    """Commands run through bash, written down as a terminal transcript (`$ cmd`, output)."""

    env: dict[str, str]
    cwd: Path
    lines: list[str] = field(default_factory=list)

    def run(self, command: str, shown: str | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["bash", "-c", command],
            env=self.env,
            cwd=self.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=120,
        )
        self.lines.append(f"user@gpu-box:~$ {shown or command}")
        self.lines.extend(done.stdout.rstrip("\n").split("\n") if done.stdout.strip() else [])
        return done

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


@dataclass
class World:
    """Wheels and indexes built once for the module, and the tools that install them."""

    root: Path
    cu128: str  # file:// simple index of the old stack
    cu130: str  # file:// simple index of the nightly stack
    apps: str  # file:// simple index holding sglang 0.5.9 (pins torch==2.9.1) and torch 2.9.1
    wheels: Path  # every wheel, flat, for pip --find-links
    uv: str
    uv_old: str  # uv 0.10.9, from PyPI
    env: dict[str, str]

    def venv(self, name: str, *packages: str, index: str | None = None) -> Path:
        """A venv made by uv holding ``packages`` (from the cu128 index by default)."""
        folder = self.root / name
        subprocess.run(
            [self.uv, "venv", "--quiet", "--python", sys.executable, str(folder)],
            env=self.env,
            check=True,
            capture_output=True,
        )
        python = folder / "bin" / "python"
        if packages:
            subprocess.run(
                [self.uv, "pip", "install", "--quiet", "--python", str(python), *packages]
                + ["--index-url", index or self.cu128],
                env=self.env,
                check=True,
                capture_output=True,
            )
        return python


def _apps() -> list[StandIn]:
    """sglang 0.5.9 pinning torch==2.9.1 (the release, CUDA 12.8, NCCL 2.27.5), and tabulate."""
    old = index_packages()["cu128"][0]  # the torch 2.10.0+cu128 stand-in
    files = {
        path: body.replace("2.10.0+cu128", "2.9.1").replace("(2, 22, 3)", "(2, 27, 5)")
        for path, body in old.files.items()
    }
    return [
        StandIn("sglang", "0.5.9", ("torch==2.9.1",), {"sglang/__init__.py": "VERSION = 1\n"}),
        StandIn("torch", "2.9.1", (), files),
        StandIn("tabulate", "0.9.0", (), {"tabulate.py": "VERSION = 1\n"}),
        # an extension still built for NumPy 1.x: installing it takes numpy down a major
        StandIn("legacy-ext", "1.0", ("numpy<2",), {"legacy_ext.py": "VERSION = 1\n"}),
        StandIn("numpy", "1.26.4", (), {"numpy/__init__.py": "__version__ = '1.26.4'\n"}),
    ]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("install-pitfalls")
    indexes = build_indexes(root / "indexes")
    apps = build_index(root / "indexes" / "apps" / "simple", _apps())
    wheels = root / "wheels"
    wheels.mkdir()
    for dist in [*index_packages()["cu128"], *index_packages()["cu130"], *_apps()]:
        (wheels / dist.filename).write_bytes(build_wheel(dist))
    env = _clean_env(UV_CACHE_DIR=str(root / "uv-cache"))
    tools = root / "uv-0.10.9"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tools)], check=True)
    got = subprocess.run(
        [uv_binary(), "pip", "install", "--quiet", "--python", str(tools / "bin" / "python")]
        + ["uv==0.10.9", "--index-url", "https://pypi.org/simple"],
        env={k: v for k, v in env.items() if k != "UV_CACHE_DIR"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    # PyPI is one of the registries CI reaches: an old uv that cannot be had is a failure.
    assert got.returncode == 0, f"uv==0.10.9 could not be installed from PyPI: {got.stderr}"
    uv_old = str(tools / "bin" / "uv")
    return World(
        root,
        indexes["cu128"].as_uri(),
        indexes["cu130"].as_uri(),
        apps.as_uri(),
        wheels,
        uv_binary(),
        uv_old,
        env,
    )


def _by(findings: list[Finding] | list[dict], key: str = "id") -> dict:
    out: dict = {}
    for f in findings:
        value = f[key] if isinstance(f, dict) else getattr(f, key)
        out.setdefault(value, []).append(f)
    return out


def _lint(transcript: str) -> list[Finding]:
    return judge(from_transcript(transcript, "test"))


def _journal(*runs: Run) -> Subject:
    return Subject("journal", list(runs), "test")


# --- a real journal: uv on a local host -----------------------------------------------------

RUNBOOK = """\
[journal]
name = "install-pitfalls"

[hosts.uvbox]
ssh = "local"
python = "{py}"

[hosts.pipbox]
ssh = "local"
python = "{pip_py}"

[probes.torch-env]
import_torch = true

[[steps]]
name = "install-torch"
hosts = ["uvbox"]
run = '''{uv} pip install --python {py} torch --index-url {cu130}'''

[[steps]]
name = "verify-torch"
hosts = ["uvbox"]
run = '''{py} -c "import torch; print(torch.__version__)"'''
probes = ["torch-env"]

[[steps]]
name = "reinstall-torch"
hosts = ["uvbox"]
run = '''{uv} pip install --python {py} torch --index-url {cu130} --reinstall'''

[[steps]]
name = "verify-again"
hosts = ["uvbox"]
run = '''{py} -c "import torch; print(torch.__version__)"'''
probes = ["torch-env"]

[[steps]]
name = "install-sglang"
hosts = ["uvbox"]
run = '''{uv} pip install --python {py} sglang --index-url {apps}'''

[[steps]]
name = "pin-numpy"
hosts = ["uvbox"]
run = '''{uv} pip install --python {py} numpy==2.4.2 --index-url {cu128}'''

[[steps]]
name = "verify-last"
hosts = ["uvbox"]
run = "true"
probes = ["torch-env"]

[[steps]]
name = "pip-torch-again"
hosts = ["pipbox"]
run = '''{pip_py} -m pip install --no-index --find-links {wheels} torch'''

[[steps]]
name = "pip-nightly"
hosts = ["pipbox"]
run = '''{pip_py} -m pip install --no-index --find-links {wheels} torch=={nightly}'''
probes = ["torch-env"]

[[steps]]
name = "pip-check"
hosts = ["pipbox"]
run = '''{pip_py} -m pip check'''

[[steps]]
name = "uv-pip-check"
hosts = ["pipbox"]
run = '''{uv} pip check --python {pip_py}'''
"""


@pytest.fixture(scope="module")
def pip_python(world: World) -> Path:
    """A venv with pip (python -m venv) holding torch 2.9.1 and sglang 0.5.9."""
    folder = world.root / "pip-env"
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, env=world.env)
    python = folder / "bin" / "python"
    session = Session(world.env, world.root)
    done = session.run(f"{python} -m pip install --no-index --find-links {world.wheels} sglang")
    assert done.returncode == 0, done.stdout
    (world.root / "pip-setup.txt").write_text(session.text())
    return python


@dataclass
class Journal:
    db: Path
    runbook: Path
    findings: list[dict]


@pytest.fixture(scope="module")
def uv_journal(world: World, pip_python: Path) -> Journal:
    """The runbook above run for real: `journal run plan` then the two failing checks."""
    py = world.venv("uv-env", "torch", "numpy", "pillow")
    folder = world.root / "journal"
    folder.mkdir()
    runbook = folder / "runbook.toml"
    runbook.write_text(
        RUNBOOK.format(
            uv=world.uv,
            py=py,
            pip_py=pip_python,
            cu130=world.cu130,
            cu128=world.cu128,
            apps=world.apps,
            wheels=world.wheels,
            nightly=NIGHTLY,
        )
    )
    db = folder / "journal.db"
    plan = journal("run", "plan", db=db, runbook=runbook, env=world.env)
    assert plan.returncode == 1, text(plan.stderr)  # pip check fails, as it should
    last = journal("run", "step", "uv-pip-check", db=db, runbook=runbook, env=world.env)
    assert last.returncode == 1, text(last.stderr)
    result = journal("pitfalls", "--all", "--format", "json", db=db, runbook=runbook)
    assert result.returncode == 0, text(result.stderr)
    return Journal(db, runbook, json.loads(result.stdout)["findings"])


def _of(found: list[dict], step: str) -> dict[str, dict]:
    """The findings of ``step`` among the ids judged here, by id."""
    return {f["id"]: f for f in found if f["step"] == step and f["id"] in IDS}


def test_a_noop_uv_install_is_flagged_and_confirmed_by_the_snapshots(uv_journal: Journal) -> None:
    step = _of(uv_journal.findings, "install-torch")
    assert set(step) == {"noop-install", "variant-not-switched"}
    noop = step["noop-install"]
    assert noop["severity"] == "error"
    assert any(e["text"].startswith("Checked 1 package in ") for e in noop["evidence"])
    assert "--reinstall" in noop["advice"]
    variant = step["variant-not-switched"]
    assert variant["severity"] == "error"
    assert "torch 2.10.0+cu128" in variant["title"]
    for f in uv_journal.findings:
        assert set(f) >= {"id", "severity", "title", "advice", "evidence"}
        for ev in f["evidence"]:
            assert set(ev) >= {"line", "text", "event"} and isinstance(ev["event"], int)


def test_a_reinstall_that_downgrades_numpy_is_a_downgrade_cascade(uv_journal: Journal) -> None:
    step = _of(uv_journal.findings, "reinstall-torch")
    assert "noop-install" not in step  # it did switch
    assert set(step) - {"variant-not-switched", ID_UNV} == {"downgrade-cascade"}
    assert step[ID_UNV]["state"] == "resolved"  # verify-again probed after it
    found = step["downgrade-cascade"]
    assert found["severity"] == "warning"
    assert "numpy 2.4.2 → 2.4.1" in found["title"] and "pillow 12.1.1 → 12.1.0" in found["title"]
    assert "torch" not in found["title"].split("downgraded")[1]
    texts = [e["text"] for e in found["evidence"]]
    assert "package snapshots: numpy 2.4.2 -> 2.4.1 (downgraded)" in texts
    lines = {e["text"]: e["line"] for e in found["evidence"]}
    assert lines[" - numpy==2.4.2"] + 1 == lines[" + numpy==2.4.1"]  # uv's own lines, numbered
    assert "--reinstall-package torch" in found["advice"]
    assert "numpy==2.4.2 pillow==12.1.1" in found["advice"]


def test_a_reinstall_that_switched_the_variant_is_not_flagged_later(uv_journal: Journal) -> None:
    assert "variant-not-switched" not in _of(uv_journal.findings, "reinstall-torch")


def test_a_framework_that_pins_torch_replaces_it(uv_journal: Journal, world: World) -> None:
    step = _of(uv_journal.findings, "install-sglang")
    found = step["torch-replaced"]
    assert found["severity"] == "error"
    assert f"replaced torch {NIGHTLY} with 2.9.1" in found["title"]
    assert "`uv pip install sglang`" in found["title"]
    texts = [e["text"] for e in found["evidence"]]
    assert f" - torch=={NIGHTLY}" in texts and " + torch==2.9.1" in texts
    assert "--override" in found["advice"]
    assert f"`uv pip install torch=={NIGHTLY} --index-url {world.cu130}`" in found["advice"]
    assert "downgrade-cascade" not in step  # torch's own downgrade is torch-replaced's


def test_an_upgrade_of_what_was_named_is_no_pitfall(uv_journal: Journal) -> None:
    pinned = _of(uv_journal.findings, "pin-numpy")
    assert set(pinned) <= {ID_UNV} and pinned[ID_UNV]["state"] == "resolved"
    assert _of(uv_journal.findings, "verify-last") == {}


def test_a_change_is_unverified_until_a_probe_runs_before_the_next_change(
    uv_journal: Journal,
) -> None:
    unverified = {f["step"]: f for f in uv_journal.findings if f["id"] == "unverified-change"}
    # reinstall-torch was followed by verify-again (a probe), pin-numpy by verify-last: each
    # resolved by that probe; pip-nightly probes in its own step.
    assert unverified["reinstall-torch"]["state"] == "resolved"
    assert unverified["reinstall-torch"]["resolved_by"]["step"] == "verify-again"
    assert unverified["pin-numpy"]["resolved_by"]["step"] == "verify-last"
    assert "pip-nightly" not in unverified
    found = unverified["install-sglang"]
    assert found["severity"] == "warning"
    assert "no probe ran before pin-numpy changed packages again" in found["title"]
    assert "journal run probe torch-env --host uvbox" in found["advice"]
    # install-sglang's change was never probed alone, but verify-last probed what followed
    assert found["resolved_by"]["step"] == "verify-last"


def test_pip_reports_a_conflict_and_exits_0_and_pip_check_fails(uv_journal: Journal) -> None:
    nightly = _of(uv_journal.findings, "pip-nightly")["dependency-conflict"]
    assert nightly["severity"] == "warning"
    assert nightly["title"].startswith("pip's resolver reports 1 broken requirement")
    texts = [e["text"] for e in nightly["evidence"]]
    assert texts[1].startswith("ERROR: pip's dependency resolver does not currently take")
    assert (
        f"sglang 0.5.9 requires torch==2.9.1, but you have torch {NIGHTLY} which is incompatible."
        in texts
    )
    check = _of(uv_journal.findings, "pip-check")["dependency-conflict"]
    assert check["title"].startswith("`pip check` reports 1 broken requirement (exit status 1)")
    assert any(
        e["text"] == f"sglang 0.5.9 has requirement torch==2.9.1, but you have torch {NIGHTLY}."
        for e in check["evidence"]
    )
    uvcheck = _of(uv_journal.findings, "uv-pip-check")["dependency-conflict"]
    assert uvcheck["title"].startswith("`uv pip check` reports 1 broken requirement")
    assert any(
        e["text"] == f"The package `sglang` requires `torch==2.9.1`, but `{NIGHTLY}` is installed"
        for e in uvcheck["evidence"]
    )


def test_pip_saying_requirement_already_satisfied_is_a_noop(uv_journal: Journal) -> None:
    noop = _of(uv_journal.findings, "pip-torch-again")["noop-install"]
    assert noop["severity"] == "error"
    assert any(
        e["text"].startswith("Requirement already satisfied: torch in ") for e in noop["evidence"]
    )
    assert "--force-reinstall" in noop["advice"]


def test_the_journal_findings_read_well_in_the_terminal(uv_journal: Journal) -> None:
    listing = journal("pitfalls", db=uv_journal.db, runbook=uv_journal.runbook)
    out = text(listing.stdout)
    assert "WARNING downgrade-cascade  reinstall-torch on uvbox" in out
    assert "ERROR   torch-replaced  install-sglang on uvbox" in out


# --- transcripts of real uv sessions (the current uv, and uv 0.10.9) --------------------------


def _check_lines(path: Path, findings: list[dict]) -> None:
    """Every evidence line number points at that very line of the transcript file."""
    lines = path.read_text().split("\n")
    for f in findings:
        for ev in f["evidence"]:
            if ev["line"] is not None:
                assert lines[ev["line"] - 1] == ev["text"], (f["id"], ev)


@pytest.fixture(scope="module", params=["current", "0.10.9"])
def uv_session(request: pytest.FixtureRequest, world: World) -> tuple[str, Path]:
    """A session with one uv: the no-op, the probe, the reinstall, sglang over the nightly."""
    uv = world.uv if request.param == "current" else world.uv_old
    py = world.venv(f"uv-session-{request.param}", "torch", "numpy", "pillow")
    show = f"{py} -c \"import torch; print('torch:', torch.__version__)\""
    session = Session(world.env, world.root)
    session.run(f"{uv} --version")
    session.run(f"{uv} pip install --python {py} torch --index-url {world.cu130}")
    session.run(show)
    session.run(f"{uv} pip install --python {py} torch --index-url {world.cu130} --reinstall")
    session.run(show)
    session.run(f"{uv} pip install --python {py} sglang --index-url {world.apps}")
    session.run(f"{uv} pip install --python {py} numpy==2.4.2 --index-url {world.cu128}")
    session.run(f"{uv} pip install --python {py} legacy-ext --index-url {world.apps}")
    path = world.root / f"uv-{request.param}.txt"
    path.write_text(session.text())
    return request.param, path


def test_lint_judges_a_real_uv_session(uv_session: tuple[str, Path]) -> None:
    version, path = uv_session
    transcript = path.read_text()
    noop_word = "Checked" if version == "current" else "Audited"
    assert f"{noop_word} 1 package in " in transcript
    result = journal("lint", str(path), "--format", "json")
    assert result.returncode == 1, text(result.stderr)
    found = json.loads(result.stdout)["findings"]
    _check_lines(path, found)
    for f in found:
        assert set(f) >= {"id", "severity", "title", "advice", "evidence"}
        assert all(set(ev) == {"line", "text"} for ev in f["evidence"])
    assert {f["id"] for f in found} >= {
        "noop-install",
        "variant-not-switched",
        "downgrade-cascade",
        "torch-replaced",
    }
    judged = _lint(transcript)
    assert [f.to_dict(with_event=False) for f in judged] == [
        {k: v for k, v in f.items() if k != "file"} for f in found
    ]

    def at(index: int) -> dict[str, dict]:
        """Findings of the index-th command (0-based), by id, among the ids judged here
        (unverified-change is asserted on its own below)."""
        return {
            f.id: f.to_dict(with_event=False)
            for f in judged
            if f.run == f"cmd-{index + 1}" and f.id in IDS - {ID_UNV}
        }

    # a change checked by the next command is verified; one the next install changes again,
    # or the last change of the session, is not
    unverified = {f.run for f in judged if f.id == ID_UNV}
    assert "cmd-4" not in unverified  # the reinstall, followed by its check
    assert {"cmd-6", "cmd-8"} <= unverified  # sglang over torch; legacy-ext, the last

    noop = at(1)
    assert set(noop) == {"noop-install", "variant-not-switched"}
    assert noop["noop-install"]["severity"] == "warning"  # no snapshots: the output alone
    assert any(
        e["text"].startswith(f"{noop_word} 1 package") for e in noop["noop-install"]["evidence"]
    )
    assert any(e["text"] == "torch: 2.10.0+cu128" for e in noop["variant-not-switched"]["evidence"])
    reinstall = at(3)
    assert set(reinstall) == {"downgrade-cascade"}  # switched, and the next probe says cu130
    assert reinstall["downgrade-cascade"]["severity"] == "warning"
    assert "numpy 2.4.2 → 2.4.1" in reinstall["downgrade-cascade"]["title"]
    assert set(at(4)) == set()
    sglang = at(5)
    assert set(sglang) == {"torch-replaced"}
    assert sglang["torch-replaced"]["severity"] == "error"
    assert f"replaced torch {NIGHTLY} with 2.9.1" in sglang["torch-replaced"]["title"]
    assert set(at(6)) == set()  # numpy==2.4.2: an upgrade of what was named
    legacy = at(7)["downgrade-cascade"]
    assert legacy["severity"] == "error"  # numpy 2 -> 1: a major version down
    assert "numpy 2.4.2 → 1.26.4" in legacy["title"]


# --- a transcript of a real pip session -------------------------------------------------------


@pytest.fixture(scope="module")
def pip_session(world: World) -> tuple[Session, Path]:
    """pip into a fresh venv: a clean install, a no-op, sglang over torch, the nightly over
    sglang's pin (pip's resolver ERROR, exit 0), the checks, a missing requirement, a fix."""
    folder = world.root / "pip-session-env"
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, env=world.env)
    py = folder / "bin" / "python"
    pip = f"{py} -m pip install --no-index --find-links {world.wheels}"
    session = Session(world.env, world.root)
    commands = [
        f"{pip} torch==2.10.0+cu128 numpy pillow",  # 1 clean install
        f"{pip} torch",  # 2 Requirement already satisfied
        f"{pip} sglang",  # 3 replaces torch 2.10.0+cu128 with 2.9.1
        f"{pip} torch=={NIGHTLY}",  # 4 resolver ERROR; numpy and pillow go down
        f"{py} -m pip check",  # 5
        f"{world.uv} pip check --python {py}",  # 6
        f"{py} -m pip uninstall -y numpy",  # 7
        f"{py} -m pip check",  # 8 requires numpy==2.4.1, which is not installed
        f"{world.uv} pip check --python {py}",  # 9
        f"{pip} torch==2.9.1 numpy==2.4.1",  # 10 named: back to what sglang wants
        f"{py} -m pip check",  # 11 No broken requirements found.
        f"{world.uv} pip check --python {py}",  # 12 All installed packages are compatible
    ]
    codes = [session.run(c).returncode for c in commands]
    assert codes == [0, 0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 0], session.text()
    path = world.root / "pip-session.txt"
    path.write_text(session.text())
    return session, path


def test_pip_wording_is_judged_from_the_output_alone(pip_session: tuple[Session, Path]) -> None:
    session, path = pip_session
    transcript = session.text()
    assert (
        "ERROR: pip's dependency resolver does not currently take into account all the packages "
        "that are installed. This behaviour is the source of the following dependency conflicts."
        in transcript
    )
    assert "No broken requirements found." in transcript
    assert "All installed packages are compatible" in transcript
    judged = _lint(transcript)

    def at(number: int) -> dict[str, Finding]:
        return {f.id: f for f in judged if f.run == f"cmd-{number}" and f.id in IDS - {ID_UNV}}

    assert at(1) == {}  # a clean install
    noop = at(2)["noop-install"]
    assert noop.severity == "warning"
    assert noop.evidence[1].text.startswith("Requirement already satisfied: torch in ")
    replaced = at(3)["torch-replaced"]
    assert replaced.severity == "error"
    assert replaced.title == (
        "`pip install sglang` replaced torch 2.10.0+cu128 with 2.9.1 without naming torch "
        "(pulled in by sglang)"
    )
    texts = [e.text for e in replaced.evidence]
    assert "    Found existing installation: torch 2.10.0+cu128" in texts
    assert "--no-deps" in replaced.advice and "torch==2.10.0+cu128" in replaced.advice
    first = session.lines[0].split("$ ", 1)[1]  # the install that pinned torch==2.10.0+cu128
    assert f"put torch 2.10.0+cu128 back: run `{first}` again" in replaced.advice
    nightly = at(4)
    assert set(nightly) == {"dependency-conflict", "downgrade-cascade"}
    conflict = nightly["dependency-conflict"]
    assert conflict.severity == "warning"
    assert conflict.title == (
        "pip's resolver reports 1 broken requirement (pip exits 0 after it): sglang 0.5.9 "
        f"needs torch==2.9.1, has torch {NIGHTLY}"
    )
    cascade = nightly["downgrade-cascade"]
    assert "numpy 2.4.2 → 2.4.1" in cascade.title and "pillow 12.1.1 → 12.1.0" in cascade.title
    assert any(e.text == "    Found existing installation: numpy 2.4.2" for e in cascade.evidence)
    assert any(e.text.startswith("Successfully installed numpy-2.4.1") for e in cascade.evidence)
    assert at(5)["dependency-conflict"].title.startswith("`pip check` reports 1 broken")
    assert at(6)["dependency-conflict"].title.startswith("`uv pip check` reports 1 broken")
    assert at(7) == {}  # pip uninstall numpy: asked for
    missing = at(8)["dependency-conflict"]
    assert missing.severity == "error"  # a requirement that is not installed at all
    # pip check names only the project (`torch … requires numpy, which is not installed.`)
    assert missing.title.startswith("`pip check` reports 2 broken requirements: ")
    assert f"torch {NIGHTLY} needs numpy, which is not installed" in missing.title
    assert "install what is missing (`numpy`)" in missing.advice
    uv_missing = at(9)["dependency-conflict"]
    assert uv_missing.severity == "error"
    assert any(
        e.text == "The package `torch` requires `numpy==2.4.1`, but it's not installed"
        for e in uv_missing.evidence
    )
    assert at(10) == {}  # torch==2.9.1 named: no torch-replaced, no downgrade-cascade
    assert at(11) == {} and at(12) == {}  # checks that pass


def test_lint_and_import_of_the_pip_session(
    pip_session: tuple[Session, Path], world: World, tmp_path: Path
) -> None:
    _, path = pip_session
    result = journal("lint", str(path), "--format", "json")
    assert result.returncode == 1
    found = json.loads(result.stdout)["findings"]
    _check_lines(path, found)
    ids = {f["id"] for f in found}
    assert ids >= {"noop-install", "torch-replaced", "downgrade-cascade", "dependency-conflict"}
    assert "unverified-change" in ids  # changes no later command checked
    # imported into a journal, the runs have no snapshots: the output decides there too
    runbook = tmp_path / "runbook.toml"
    runbook.write_text('[journal]\nname = "imported"\n\n[hosts.gpu-box]\nssh = "local"\n')
    db = tmp_path / "journal.db"
    imported = journal(
        "import", "transcript", str(path), "--host", "gpu-box", db=db, runbook=runbook
    )
    assert imported.returncode == 0, text(imported.stderr)
    listed = journal("pitfalls", "--all", "--format", "json", db=db, runbook=runbook)
    assert listed.returncode == 0, text(listed.stderr)
    in_journal = json.loads(listed.stdout)["findings"]
    # imported runs have no snapshots and no probes: unverified-change is lint's alone
    assert sorted(f["id"] for f in in_journal if f["id"] in IDS) == sorted(
        f["id"] for f in found if f["id"] in IDS - {ID_UNV}
    )
    for f in in_journal:
        assert all(isinstance(e["event"], int) for e in f["evidence"])


# --- near misses and edges, on the real data types ---------------------------------------------


def _snap(**versions: str) -> dict[str, dict[str, str]]:
    return {normalize(k): {"name": k, "version": v} for k, v in versions.items()}


def _run(
    key: str,
    command: str,
    before: dict | None = None,
    after: dict | None = None,
    *,
    event: int,
    probes: tuple[str, ...] = (),
    text: str = "",
    exit_code: int = 0,
    expectations: tuple = (),
) -> Run:
    return Run(
        key=key,
        step=key,
        host="gpu-box",
        command=command,
        text=text,
        exit_code=exit_code,
        status="succeeded" if exit_code == 0 else "failed",
        event=event,
        diff=diff_packages(before, after) if before is not None and after is not None else None,
        before=before,
        after=after,
        probes={p: {"ok": True} for p in probes},
        probe_events={p: event + 1 for p in probes},
        expectations=list(expectations),
    )


def _ids(subject: Subject, wanted: str) -> list[Finding]:
    return [f for f in judge(subject) if f.id == wanted]


def followed(subject: Subject, wanted: str) -> list[Finding]:
    """The findings of ``wanted`` with their lifecycle, as `journal pitfalls --all` shows them."""
    return [f for f in judged(subject) if f.id == wanted]


def test_named_reads_files_options_and_uninstalls() -> None:
    wheel = (
        "https://download.pytorch.org/whl/cu128/"
        "torch-2.9.1%2Bcu128-cp311-cp311-manylinux_2_28_x86_64.whl"
    )
    assert "torch" in named(f"pip install {wheel} sglang")
    assert "torch" in named("pip install ./dist/torch-2.9.1+cu128-cp311-cp311-linux_x86_64.whl")
    assert "torch" in named("uv pip install sglang --reinstall-package torch")
    assert "torch" in named("uv pip install sglang -P torch")
    assert "flash-attn" in named('pip install "git+https://github.com/x/y.git#egg=flash_attn"')
    both = named("pip uninstall -y torch torchvision && pip install sglang")
    assert {"torch", "torchvision", "sglang"} <= both.names
    files = named("pip install -r requirements.txt -c constraints.txt sglang")
    assert files.files == ("requirements.txt", "constraints.txt") and "torch" not in files
    assert named("uv pip sync requirements.txt").files == ("requirements.txt",)
    assert named("pip install -e 'python[all]'").names == frozenset()  # a project, not a name


def test_a_downgrade_a_requirements_file_may_ask_for_is_less_certain() -> None:
    before, after = _snap(numpy="2.4.2", torch="2.10.0"), _snap(numpy="1.26.4", torch="2.10.0")
    plain = _ids(_journal(_run("a", "pip install legacy-ext", before, after, event=1)), ID_DOWN)
    assert [f.severity for f in plain] == ["error"]  # a major version went down
    pinned = _ids(
        _journal(_run("a", "pip install -r requirements.txt", before, after, event=1)), ID_DOWN
    )
    assert [f.severity for f in pinned] == ["warning"]
    assert "requirements.txt" in pinned[0].advice
    up = _snap(numpy="2.4.3", torch="2.10.0")
    assert _ids(_journal(_run("a", "pip install legacy-ext", before, up, event=1)), ID_DOWN) == []
    named_down = _run("a", "pip install numpy==1.26.4", before, after, event=1)
    assert _ids(_journal(named_down), ID_DOWN) == []


def test_torch_replaced_needs_a_torch_that_was_there(world: World, pip_python: Path) -> None:
    # real pip output: sglang into an empty env brings torch 2.9.1, replacing nothing
    setup = (world.root / "pip-setup.txt").read_text()
    assert "Successfully installed sglang-0.5.9 torch-2.9.1" in setup
    assert "Attempting uninstall" not in setup
    assert [f for f in _lint(setup) if f.id in IDS - {ID_UNV}] == []
    # the same last line pasted alone cannot say whether a torch was there: a warning
    tail = "$ pip install sglang\nSuccessfully installed sglang-0.5.9 torch-2.9.1\n"
    found = [f for f in _lint(tail) if f.id == "torch-replaced"]
    assert [f.severity for f in found] == ["warning"]
    assert "installed torch 2.9.1 without naming it" in found[0].title
    # in a journal: torch new, or torch reinstalled at the same version, is no replacement
    empty, with_torch = _snap(), _snap(torch="2.9.1", sglang="0.5.9")
    fresh = _run("a", "pip install sglang", empty, with_torch, event=1)
    assert _ids(_journal(fresh), "torch-replaced") == []
    again = _run("a", "pip install --force-reinstall sglang", with_torch, with_torch, event=1)
    assert _ids(_journal(again), "torch-replaced") == []


def test_unverified_change_counts_probes_expectations_and_the_next_change() -> None:
    a, b = _snap(torch="2.10.0"), _snap(torch="2.10.0", tabulate="0.9.0")
    c = _snap(torch="2.12.0", tabulate="0.9.0")
    small = _ids(_journal(_run("add-tabulate", "pip install tabulate", a, b, event=1)), ID_UNV)
    assert [f.severity for f in small] == ["info"]  # nothing probes judge changed
    assert "no probe has run on gpu-box since" in small[0].title
    expected = _run("a", "pip install tabulate", a, b, event=1, expectations=("checked",))
    assert _ids(_journal(expected), ID_UNV) == []
    # a later step that probes but changed packages itself does not vouch for the earlier one
    first = _run("add-tabulate", "pip install tabulate", a, b, event=1)
    second = _run("torch", "pip install torch==2.12.0", b, c, event=10, probes=("torch-env",))
    found = _ids(_journal(first, second), ID_UNV)
    assert [f.step for f in found] == ["add-tabulate"]
    assert "no probe ran before torch changed packages again" in found[0].title
    # a later step that changed nothing and probed resolves it
    check = _run("verify", "true", c, c, event=10, probes=("torch-env",))
    found = followed(_journal(first, check), ID_UNV)
    assert [(f.state, f.resolved_by.step if f.resolved_by else None) for f in found] == [
        ("resolved", "verify")
    ]
    # transcripts have no probes to miss
    assert _ids(Subject("transcript", [first]), ID_UNV) == []


def test_a_standalone_probe_verifies_a_change(world: World, tmp_path: Path) -> None:
    py = world.venv("standalone", "torch")
    runbook = tmp_path / "runbook.toml"
    runbook.write_text(
        f'[journal]\nname = "standalone"\n\n[hosts.box]\nssh = "local"\npython = "{py}"\n\n'
        '[probes.torch-env]\nimport_torch = true\n\n[[steps]]\nname = "add-tabulate"\n'
        f"run = '''{world.uv} pip install --python {py} tabulate --index-url {world.apps}'''\n"
    )
    db = tmp_path / "journal.db"
    step = journal("run", "step", "add-tabulate", db=db, runbook=runbook, env=world.env)
    assert step.returncode == 0, text(step.stderr)
    before = json.loads(
        journal("pitfalls", "--all", "--format", "json", db=db, runbook=runbook).stdout
    )
    assert [f["id"] for f in before["findings"]] == ["unverified-change"]
    probe = journal("run", "probe", "torch-env", "--host", "box", db=db, runbook=runbook)
    assert probe.returncode == 0, text(probe.stderr)
    after = json.loads(
        journal("pitfalls", "--all", "--format", "json", db=db, runbook=runbook).stdout
    )
    unverified = [f for f in after["findings"] if f["id"] == ID_UNV]
    assert [(f["state"], f["resolved_by"]["kind"]) for f in unverified] == [("resolved", "probe")]
    assert "the torch-env probe ran on its own on box" in unverified[0]["resolved_by"]["why"]
    still = json.loads(journal("pitfalls", "--format", "json", db=db, runbook=runbook).stdout)
    assert [f["id"] for f in still["findings"] if f["id"] == ID_UNV] == []  # open ones only


def test_a_failed_check_without_known_wording_and_one_that_never_ran() -> None:
    odd = _run("check", "python -m pip check", text="foo 1.0 wants bar\n", exit_code=1, event=1)
    found = _ids(_journal(odd), "dependency-conflict")
    assert [f.severity for f in found] == ["warning"]
    assert found[0].title == "`pip check` reports dependency conflicts (exit status 1)"
    assert [e.text for e in found[0].evidence][1:] == ["foo 1.0 wants bar"]
    broken = _run(
        "check",
        "python -m pip check",
        text="/usr/bin/python: No module named pip\n",
        exit_code=1,
        event=1,
    )
    assert _ids(_journal(broken), "dependency-conflict") == []
    fine = _run("check", "pip check", text="No broken requirements found.\n", event=1)
    assert _ids(_journal(fine), "dependency-conflict") == []


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list(" -+~=.\n$#abcnptuy0129`:,")), max_size=400))
def test_the_install_detectors_take_any_text(noise: str) -> None:
    transcript = "$ pip install sglang\n" + noise + "\n$ uv pip check\n" + noise
    subject = from_transcript(transcript)
    for module in (catalogue()[i] for i in OWNED):
        for found in module.detect(subject):
            assert found.severity in ("info", "warning", "error")


def test_huge_lines_are_judged_in_bounded_time() -> None:
    lines = [
        "$ uv pip install sglang",
        " - torch==" + "1." * 500_000 + "0",
        "x 1 requires " + "y, but you have " * 100_000,
        "Successfully installed " + "a-1 " * 200_000,
        "$ pip check",
        "ERROR: pip's dependency resolver does not currently take into account" + "z" * 10**6,
    ]
    subject = from_transcript("\n".join(lines))
    for module in (catalogue()[i] for i in OWNED):  # completes: no catastrophic backtracking
        list(module.detect(subject))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "install-uv-0.10.9.txt",
            {
                2: {"noop-install", "variant-not-switched"},
                4: {"downgrade-cascade"},  # checked by the next command
                6: {"torch-replaced", ID_UNV},  # the next install changes numpy unchecked
                7: {ID_UNV},
                8: {"downgrade-cascade", ID_UNV},  # the session ends without a check
            },
        ),
        (
            "install-pip.txt",
            {
                1: {ID_UNV},  # the next install comes before any check
                2: {"noop-install"},
                3: {"torch-replaced", ID_UNV},
                4: {"dependency-conflict", "downgrade-cascade"},  # pip check follows
                5: {"dependency-conflict"},
                6: {"dependency-conflict"},
                8: {"dependency-conflict"},
                9: {"dependency-conflict"},
            },
        ),
    ],
)
def test_the_captured_transcripts(name: str, expected: dict[int, set[str]]) -> None:
    """The sessions above, captured once (tests/data/transcripts), judged the same way."""
    path = DATA / name
    subject = from_transcript(path.read_text(), name)
    judged = judge(subject)
    got = {
        n: {f.id for f in judged if f.run == f"cmd-{n}" and f.id in IDS}
        for n in range(1, len(subject.runs) + 1)
    }
    assert got == {n: expected.get(n, set()) for n in got}
    result = journal("lint", str(path), "--format", "json")
    assert result.returncode == 1
    found = json.loads(result.stdout)["findings"]
    _check_lines(path, found)
    assert sorted(f["id"] for f in found if f["id"] in IDS) == sorted(
        f.id for f in judged if f.id in IDS
    )


# --- recorded step output in colour, and checks printing several values on a line ------------

#: The seed's one-line check: three values on one line.
CHECK = "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version())"
TERMINAL_RUNBOOK = """\
[journal]
name = "terminal"

[hosts.uvbox]
ssh = "local"
python = "{py}"

[[steps]]
name = "check-before"
hosts = ["uvbox"]
run = '''{py} -c "{check}"'''
env = {{ NCCL_ALGO = "Ring", NCCL_PROTO = "Simple" }}

[[steps]]
name = "install-torch"
hosts = ["uvbox"]
run = '''{uv} pip install{color} --python {py} torch --index-url {cu130}'''

[[steps]]
name = "reinstall-torch"
hosts = ["uvbox"]
run = '''{uv} pip install{color} --python {py} torch --index-url {cu130} --reinstall'''

[[steps]]
name = "check-after"
hosts = ["uvbox"]
run = '''{py} -c "{check}"'''
env = {{ NCCL_ALGO = "Ring", NCCL_PROTO = "Simple" }}

[[steps]]
name = "install-sglang"
hosts = ["uvbox"]
run = '''{uv} pip install{color} --python {py} sglang --index-url {apps}'''
"""


def _terminal_journal(world: World, folder: Path, color: str) -> tuple[Path, list[dict]]:
    py = world.venv(f"{folder.name}-env", "torch", "numpy", "pillow")
    folder.mkdir()
    runbook = folder / "runbook.toml"
    runbook.write_text(
        TERMINAL_RUNBOOK.format(
            uv=world.uv, py=py, cu130=world.cu130, apps=world.apps, color=color, check=CHECK
        )
    )
    db = folder / "journal.db"
    done = journal("run", "plan", db=db, runbook=runbook, env={**world.env, "FORCE_COLOR": "1"})
    assert done.returncode in (0, 1), text(done.stderr)
    listed = journal("pitfalls", "--all", "--format", "json", db=db, runbook=runbook)
    assert listed.returncode == 0, text(listed.stderr)
    return db, json.loads(listed.stdout)["findings"]


def test_a_step_that_forces_colour_is_judged_as_a_plain_one(world: World) -> None:
    """uv with `--color always` (and FORCE_COLOR for everything) writes SGR codes around every
    `+`/`-`, name and version; the store keeps those bytes, the detectors read through them."""
    plain_db, plain = _terminal_journal(world, world.root / "terminal-plain", "")
    color_db, colored = _terminal_journal(world, world.root / "terminal-color", " --color always")
    with sqlite3.connect(color_db) as db:
        rows = db.execute("SELECT payload FROM events WHERE type = 'OutputChunk'").fetchall()
    raw = "".join(json.loads(payload)["data"] for (payload,) in rows)
    assert "\x1b[32m" in raw  # the colours are in the record, byte for byte

    def same(words: str) -> str:  # the flag, the venv's folder, run ids and timings aside
        words = words.replace(" --color always", "").replace("terminal-color", "terminal-plain")
        return re.sub(r" in [\d.]+m?s\b|\(run [0-9a-f]+\)", "…", words)

    def shape(found: list[dict]) -> list[tuple]:
        return sorted(
            (
                f["id"],
                f["step"],
                f["severity"],
                same(f["title"]),
                tuple(sorted(same(e["text"]) for e in f["evidence"])),
            )
            for f in found
        )

    assert shape(colored) == shape(plain)
    # each evidence line number names that line of the step's output as it was recorded
    outputs: dict[str, str] = {}
    for (payload,) in rows:
        chunk = json.loads(payload)
        outputs[chunk["run"]] = outputs.get(chunk["run"], "") + chunk["data"]
    checked = 0
    for f in colored:
        for e in f["evidence"]:
            if e["line"] is not None and e["run"] in outputs:
                recorded = outputs[e["run"]].split("\n")[e["line"] - 1]
                assert "\x1b[" in recorded or "\r" in recorded or e["text"] == recorded
                assert clean(recorded).strip() == e["text"].strip()
                checked += 1
    assert checked >= 5
    by_step = {(f["step"], f["id"]) for f in colored}
    assert {
        ("install-torch", "noop-install"),
        ("install-torch", "variant-not-switched"),
        ("reinstall-torch", "downgrade-cascade"),
        ("reinstall-torch", "nccl-changed"),
        ("install-sglang", "torch-replaced"),
    } <= by_step
    # NCCL read from a line of three values, printed by the check of each side of the change
    nccl = next(f for f in colored if f["id"] == "nccl-changed")
    assert "from 2.22.3 to 2.28.9" in nccl["title"] and "NCCL_ALGO, NCCL_PROTO" in nccl["title"]
    assert nccl["severity"] == "warning"
    shown = [e["text"] for e in nccl["evidence"]]
    assert "2.10.0+cu128 12.8 (2, 22, 3)" in shown
    assert f"{NIGHTLY} 13.0 (2, 28, 9)" in shown
