"""Package diffs: real uv runs against wheels built here, snapshotted by the real probe.

Each scenario creates a venv with real ``uv``, installs a baseline from a PEP 503 index this
module writes (wheels from journal's demo wheel builder), runs one real uv command between two
runs of the real ``packages`` probe script (by the venv's own python, as on a host), and checks
that :func:`diff_packages` says exactly what uv did.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import journal
from journal.demo.wheels import StandIn, build_index
from journal.events import NoteAdded, PackagesSnapshotted
from journal.projections.packages import (
    KINDS,
    PackageChange,
    PackageDiff,
    diff_packages,
    diffs_by_run,
)
from journal.store import EventStore
from tests.helpers import run_checked, uv_binary

PROBE = Path(journal.__file__).parent / "probes" / "scripts" / "packages.py"

BASELINE = ["alpha==1.0", "beta==2.0", "gamma==3.0+cu128", "delta==0.1", "epsilon==1.0+cu128"]

#: uv's answer when it had nothing to do: "Audited N packages" before 0.10.10, "Checked" since.
NOTHING_TO_DO = re.compile(r"^(Audited|Checked) 1 package\b", re.MULTILINE)
#: uv's lines for what it installed (+), uninstalled (-) or reinstalled (~).
INSTALL_LINE = re.compile(r"^ [-+~] \S+==\S+$", re.MULTILINE)


def _dist(name: str, version: str, *requires: str) -> StandIn:
    module = name.replace("-", "_")
    return StandIn(
        name, version, requires, {f"{module}/__init__.py": f"__version__ = {version!r}\n"}
    )


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A file:// PEP 503 index with two versions or variants of most packages."""
    simple = tmp_path_factory.mktemp("index") / "simple"
    build_index(
        simple,
        [
            _dist("alpha", "1.0"),
            _dist("alpha", "1.1"),
            _dist("beta", "2.0"),
            _dist("beta", "1.9"),
            _dist("gamma", "3.0+cu128"),
            _dist("gamma", "3.0+cu130"),
            _dist("delta", "0.1"),
            _dist("epsilon", "1.0+cu128"),
            _dist("epsilon", "1.1+cu130"),
            _dist("Zeta_Pkg", "0.5"),
            # Like the cu130 torch nightly that pinned numpy down: installing omega
            # downgrades beta, which nobody asked for.
            _dist("omega", "2.0", "beta==1.9"),
        ],
    )
    return simple.as_uri()


@pytest.fixture(scope="module")
def uv_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Environment for uv runs: a private cache shared by the module, no user configuration."""
    env = dict(os.environ)
    env.update(
        UV_CACHE_DIR=str(tmp_path_factory.mktemp("uv-cache")),
        UV_NO_CONFIG="1",
        UV_PYTHON_DOWNLOADS="never",
    )
    for key in (
        "UV_INDEX_URL",
        "UV_EXTRA_INDEX_URL",
        "UV_INDEX",
        "UV_DEFAULT_INDEX",
        "UV_FIND_LINKS",
        "UV_LINK_MODE",
        "VIRTUAL_ENV",
    ):
        env.pop(key, None)
    return env


@dataclass
class Venv:
    """A real venv made by uv, with the baseline installed, and a way to run steps on it."""

    python: Path
    index: str
    env: dict[str, str]

    def uv(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run ``uv pip ARGS`` against this venv (``install`` gets the test index)."""
        extra = ["--index-url", self.index] if args[0] == "install" else []
        return run_checked(
            [uv_binary(), "pip", *args, "--python", str(self.python), *extra], self.env
        )

    def snapshot(self) -> dict[str, Any]:
        """The real ``packages`` probe's JSON, as the venv's python prints it."""
        return json.loads(run_checked([str(self.python), str(PROBE)], self.env).stdout)

    def step(self, *args: str) -> tuple[PackageDiff, str]:
        """Snapshot, run ``uv pip ARGS``, snapshot again: the diff and what uv printed."""
        before = self.snapshot()["packages"]
        done = self.uv(*args)
        after = self.snapshot()["packages"]
        return diff_packages(before, after), done.stderr


@pytest.fixture()
def venv(tmp_path: Path, index: str, uv_env: dict[str, str]) -> Venv:
    """A fresh venv holding the baseline: alpha 1.0, beta 2.0, gamma 3.0+cu128, delta 0.1,
    epsilon 1.0+cu128."""
    target = tmp_path / "venv"
    run_checked([uv_binary(), "venv", "--python", sys.executable, str(target)], uv_env)
    made = Venv(target / "bin" / "python", index, uv_env)
    made.uv("install", *BASELINE)
    return made


# ---------------------------------------------------------------------------------------------
# Real uv runs


def test_upgrade_is_one_change(venv: Venv) -> None:
    diff, _ = venv.step("install", "alpha==1.1")
    assert diff.changes == [PackageChange("alpha", "1.0", "1.1", "upgraded")]
    assert diff.upgraded == diff.changes
    assert not diff.variant_switched and not diff.empty
    assert diff.names() == ["alpha"]


def test_downgrade_is_one_change(venv: Venv) -> None:
    diff, _ = venv.step("install", "beta==1.9")
    assert diff.changes == [PackageChange("beta", "2.0", "1.9", "downgraded")]
    assert diff.downgraded == diff.changes


def test_reinstall_at_the_same_version_is_seen_through_the_install_time(venv: Venv) -> None:
    before = venv.snapshot()["packages"]
    done = venv.uv("install", "--reinstall", "delta==0.1")
    after = venv.snapshot()["packages"]
    assert " ~ delta==0.1" in done.stderr.splitlines()  # uv's own word for it
    assert before["delta"]["version"] == after["delta"]["version"] == "0.1"
    assert before["delta"]["installed"] != after["delta"]["installed"]
    diff = diff_packages(before, after)
    assert diff.changes == [PackageChange("delta", "0.1", "0.1", "reinstalled")]
    assert diff.reinstalled == diff.changes
    assert not diff.variant_switched


def test_a_pin_with_the_local_version_switches_the_variant(venv: Venv) -> None:
    diff, printed = venv.step("install", "gamma==3.0+cu130")
    # No --reinstall needed when the pin names the local version: uv swaps it.
    assert INSTALL_LINE.findall(printed) == [" - gamma==3.0+cu128", " + gamma==3.0+cu130"]
    change = PackageChange("gamma", "3.0+cu128", "3.0+cu130", "variant-switched")
    assert diff.changes == [change]
    assert diff.variant_switched == [change]
    assert (change.before_variant, change.after_variant) == ("cu128", "cu130")
    assert not diff.upgraded and not diff.downgraded


def test_the_seed_pitfall_a_public_pin_changes_nothing_until_reinstall(venv: Venv) -> None:
    # The seed's trap: cu130 is on the index, but 3.0+cu128 already satisfies "gamma==3.0".
    for request in ("gamma", "gamma==3.0"):
        diff, printed = venv.step("install", request)
        assert NOTHING_TO_DO.search(printed), printed
        assert diff.empty, diff
    # --reinstall makes uv choose again, and it takes the highest local version.
    diff, printed = venv.step("install", "--reinstall", "gamma==3.0")
    assert INSTALL_LINE.findall(printed) == [" - gamma==3.0+cu128", " + gamma==3.0+cu130"]
    assert diff.changes == [PackageChange("gamma", "3.0+cu128", "3.0+cu130", "variant-switched")]


def test_upgrade_and_variant_switch_at_once(venv: Venv) -> None:
    diff, _ = venv.step("install", "epsilon==1.1+cu130")
    (change,) = diff.changes
    assert change == PackageChange("epsilon", "1.0+cu128", "1.1+cu130", "upgraded")
    assert change.variant_switched
    assert diff.upgraded == diff.variant_switched == [change]


def test_a_noop_install_is_an_empty_diff(venv: Venv) -> None:
    diff, printed = venv.step("install", "alpha")
    assert NOTHING_TO_DO.search(printed), printed
    assert not INSTALL_LINE.findall(printed)
    assert diff.empty and diff.changes == [] and diff.names() == []
    assert diff.to_dict()["empty"] is True


def test_remove_then_add(venv: Venv) -> None:
    start = venv.snapshot()["packages"]
    removed, _ = venv.step("uninstall", "delta")
    assert removed.changes == [PackageChange("delta", "0.1", None, "removed")]
    assert removed.removed == removed.changes
    added, _ = venv.step("install", "zeta-pkg")
    # The display name is the one in the wheel's metadata; matching is on the normalised key.
    assert added.changes == [PackageChange("Zeta_Pkg", None, "0.5", "added")]
    assert added.added == added.changes and added.changes[0].key == "zeta-pkg"
    assert added.get("ZETA.pkg") == added.changes[0]
    both = diff_packages(start, venv.snapshot()["packages"])
    assert [(c.name, c.kind) for c in both.changes] == [("delta", "removed"), ("Zeta_Pkg", "added")]


def test_a_dependency_downgraded_by_another_install(venv: Venv) -> None:
    diff, _ = venv.step("install", "omega")
    assert diff.changes == [
        PackageChange("beta", "2.0", "1.9", "downgraded"),
        PackageChange("omega", None, "2.0", "added"),
    ]


def test_diffs_by_run_pairs_recorded_snapshots(venv: Venv, tmp_path: Path) -> None:
    """Snapshots of real uv runs, stored in a real journal and read back, paired per run."""
    store = EventStore(str(tmp_path / "journal.db"))
    try:

        def record(phase: str, run: str | None, host: str = "local") -> None:
            probe = venv.snapshot()
            event = PackagesSnapshotted(
                host, phase, probe["python"], probe["packages"], probe["seconds"], run
            )
            store.append("j", [event])

        record("before", "run-1")
        venv.uv("install", "alpha==1.1")
        record("after", "run-1")
        store.append("j", [NoteAdded("upgraded alpha", tags=["lesson"])])
        record("probe", None)
        record("before", "run-2")
        venv.uv("install", "alpha==1.1")  # nothing to do
        record("after", "run-2")
        record("before", "run-3")  # its step died: no after snapshot
        venv.uv("install", "beta==1.9")

        diffs = diffs_by_run(store.read("j"))
    finally:
        store.close()
    assert list(diffs) == ["run-1", "run-2"]
    assert diffs["run-1"].changes == [PackageChange("alpha", "1.0", "1.1", "upgraded")]
    assert (diffs["run-1"].host, diffs["run-1"].run) == ("local", "run-1")
    assert diffs["run-2"].empty


# ---------------------------------------------------------------------------------------------
# diff_packages on plain snapshots


def entry(
    name: str, version: str, installed: int | None = 1, installer: str | None = "uv"
) -> dict[str, Any]:
    return {"name": name, "version": version, "installer": installer, "installed": installed}


def snap(*entries: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {re.sub(r"[-_.]+", "-", e["name"]).lower(): e for e in entries}


def test_the_seed_upgrade() -> None:
    before = snap(
        entry("torch", "2.10.0+cu128"),
        entry("numpy", "2.4.2"),
        entry("Pillow", "12.1.1"),
        entry("typing_extensions", "4.12.2"),
    )
    after = snap(
        entry("torch", "2.12.0.dev20260226+cu130", installed=2),
        entry("numpy", "2.4.1", installed=2),
        entry("pillow", "12.1.0", installed=2),
        entry("nvidia-nccl-cu13", "2.28.9", installed=2),
        entry("typing_extensions", "4.12.2"),
    )
    diff = diff_packages(before, after)
    torch = PackageChange("torch", "2.10.0+cu128", "2.12.0.dev20260226+cu130", "upgraded")
    assert diff.changes == [
        PackageChange("numpy", "2.4.2", "2.4.1", "downgraded"),
        PackageChange("nvidia-nccl-cu13", None, "2.28.9", "added"),
        PackageChange("pillow", "12.1.1", "12.1.0", "downgraded"),  # the later name
        torch,
    ]
    assert diff.variant_switched == [torch] and diff.upgraded == [torch]
    data = diff.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["counts"] == {
        "added": 1,
        "removed": 0,
        "upgraded": 1,
        "downgraded": 2,
        "reinstalled": 0,
        "variant-switched": 0,
        "variant_switched": 1,
    }
    assert data["changes"][3] == {
        "name": "torch",
        "key": "torch",
        "before": "2.10.0+cu128",
        "after": "2.12.0.dev20260226+cu130",
        "kind": "upgraded",
        "variant_switched": True,
        "before_variant": "cu128",
        "after_variant": "cu130",
    }


@pytest.mark.parametrize(
    ("old", "new", "kind", "switched"),
    [
        ("2.4.2", "2.4.1", "downgraded", False),
        ("1.0rc1", "1.0", "upgraded", False),
        ("1.0", "1.0.post1", "upgraded", False),
        ("2.12.0.dev20260226", "2.12.0a1", "upgraded", False),
        ("1.9", "1.10", "upgraded", False),
        ("2.10.0+cu128", "2.10.0+cu130", "variant-switched", True),
        ("2.10.0+cu130", "2.10.0+cu128", "variant-switched", True),
        ("2.13.0", "2.13.0+cpu", "variant-switched", True),
        ("2.13.0+cpu", "2.13.0", "variant-switched", True),
        ("2.13.0+cpu", "2.12.0+cu130", "downgraded", True),
        ("1.0", "1.0.0", "reinstalled", False),  # one version to PEP 440, written anew
    ],
)
def test_kinds_follow_pep_440(old: str, new: str, kind: str, switched: bool) -> None:
    (change,) = diff_packages(snap(entry("p", old)), snap(entry("p", new))).changes
    assert (change.kind, change.variant_switched) == (kind, switched)
    assert change.kind in KINDS


def test_names_are_matched_normalised_and_shown_as_the_snapshot_writes_them() -> None:
    # A snapshot keyed by display names (not the probe's normalised keys) still compares.
    before = {"Zope.Interface": entry("Zope.Interface", "6.0"), "PyYAML": entry("PyYAML", "6.0")}
    after = snap(entry("zope_interface", "7.0"), entry("pyyaml", "6.0"))
    diff = diff_packages(before, after)
    assert diff.changes == [PackageChange("zope_interface", "6.0", "7.0", "upgraded")]
    assert diff.get("ZOPE-interface") == diff.changes[0] and diff.get("pyyaml") is None
    removed = diff_packages(before, {})
    assert removed.names() == ["PyYAML", "Zope.Interface"]  # sorted by normalised name
    assert {c.key for c in removed.changes} == {"pyyaml", "zope-interface"}


def test_shadowed_copies_do_not_count() -> None:
    # The probe keeps the copy that imports first and lists the others under "shadowed".
    before = snap({**entry("numpy", "2.4.2"), "shadowed": ["1.26.4"]})
    after = snap(entry("numpy", "2.4.2"))
    assert diff_packages(before, after).empty
    # Two spellings of one name in one snapshot: the first is the one that counts.
    twice = {"numpy": entry("numpy", "2.4.2"), "NumPy": entry("NumPy", "1.26.4")}
    assert diff_packages(twice, after).empty


def test_reinstall_needs_a_reading_on_both_sides() -> None:
    same = entry("delta", "0.1", installed=5)
    for old, new in [
        (entry("delta", "0.1", installed=None), same),
        (same, entry("delta", "0.1", installed=None)),
        (entry("delta", "0.1", None, None), entry("delta", "0.1", None, None)),
        ({"name": "delta", "version": "0.1"}, {"name": "delta", "version": "0.1"}),
        (same, dict(same)),
    ]:
        assert diff_packages(snap(old), snap(new)).empty, (old, new)
    for old, new in [
        (same, entry("delta", "0.1", installed=6)),
        (entry("delta", "0.1", None, "pip"), entry("delta", "0.1", None, "uv")),
    ]:
        (change,) = diff_packages(snap(old), snap(new)).changes
        assert change == PackageChange("delta", "0.1", "0.1", "reinstalled")


def test_odd_entries_do_not_break_the_diff() -> None:
    before = {"weird": {"version": "not a version"}, "gone": {"name": "gone"}}
    after = {"weird": {"version": "still not one"}, "new": {"version": "1.0"}}
    diff = diff_packages(before, after)
    assert [(c.name, c.before, c.after) for c in diff.changes] == [
        ("gone", "", None),
        ("new", None, "1.0"),
        ("weird", "not a version", "still not one"),
    ]
    assert diff_packages({}, {}).empty
