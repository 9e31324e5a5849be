"""Drift: the projection on real probe output captured on an H200 host and on a recorded GPU
journal; `journal drift` and the hosts page on real fleets (four `local` hosts with their own
target venvs and real uv installing stand-in wheels; three real sshds on loopback)."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from journal.demo.run import find_uv
from journal.demo.wheels import build_indexes
from journal.events import (
    Event,
    JournalOpened,
    PackagesSnapshotted,
    ProbeRecorded,
    StepFinished,
    StepStarted,
)
from journal.mapper import Recorded
from journal.projections.drift import EVENT_TYPES, Drift, Row, compare, fold
from journal.store import EventStore
from journal.web import create_app
from tests.helpers import journal, no_traceback, text, write_runbook
from tests.sshd import Fleet

H200 = Path(__file__).parent / "data" / "h200"
TORCH_ENV = json.loads((H200 / "torch-env.json").read_text())
PACKAGES = json.loads((H200 / "packages.json").read_text())["packages"]
OLD, NEW = "2.10.0+cu128", "2.12.0.dev20260226+cu130"


# -- the projection on events built from real H200 output ----------------------------------------


class Recording:
    """Events of one journal as the store would hand them back, in order."""

    def __init__(self, hosts: list[str]) -> None:
        self.records: list[Recorded] = []
        self.runs = 0
        self.add(JournalOpened("gpu-fleet", "/nowhere/runbook.toml", dict.fromkeys(hosts, ""), []))

    def add(self, event: Event) -> int:
        seq = len(self.records) + 1
        ts = f"2026-11-30T10:{seq // 60:02d}:{seq % 60:02d}.000000Z"
        self.records.append(Recorded(seq, "gpu-fleet", ts, event, ""))
        return seq

    def probe(self, host: str, result: dict[str, Any], run: str | None = None) -> int:
        return self.add(ProbeRecorded(host, "torch-env", result, 0.2, None, run))

    def snapshot(self, host: str, packages: dict[str, Any], phase: str = "probe", run=None) -> int:  # type: ignore[no-untyped-def]
        return self.add(
            PackagesSnapshotted(host, phase, "/opt/torch/.venv/bin/python3", packages, 0.1, run)
        )

    def step(
        self,
        step: str,
        host: str,
        after: dict[str, Any] | None = None,
        probe: dict[str, Any] | None = None,
        before: dict[str, Any] | None = None,
        benchmark: str | None = None,
    ) -> str:
        """A step run: snapshots before and after (when given), a torch-env probe after."""
        self.runs += 1
        run = f"run{self.runs:03d}{host}"
        self.add(StepStarted(run, step, host, host, f"do {step}", benchmark=benchmark))
        if before is not None:
            self.snapshot(host, before, "before", run)
        if after is not None:
            self.snapshot(host, after, "after", run)
        if probe is not None:
            self.probe(host, probe, run)
        self.add(StepFinished(run, host, "succeeded", 0, 1.0))
        return run

    def drift(self, groups: dict[str, list[str]] | None = None) -> Drift:
        return compare(fold("gpu-fleet", self.records), groups)


def torch_env(version: str = "2.11.0+cu130", **top: Any) -> dict[str, Any]:
    """The H200's torch-env result with torch's version (and top-level fields) replaced."""
    result = copy.deepcopy(TORCH_ENV)
    result["torch"]["version"] = version
    result.update(top)
    return result


def packages(**versions: str | None) -> dict[str, Any]:
    """The H200's package snapshot with some versions replaced (None: uninstalled)."""
    out = copy.deepcopy(PACKAGES)
    for name, version in versions.items():
        name = name.replace("_", "-")
        if version is None:
            out.pop(name, None)
        else:
            out[name] = {"name": name, "version": version, "installer": "uv", "installed": 0}
    return out


def row(report: Drift, key: str, group: int = 0) -> Row:
    return next(r for r in report.groups[group].rows if r.key == key)


GPUS = ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]


def test_the_host_a_step_changed_differs_since_that_step_run() -> None:
    rec = Recording(GPUS)
    for host in GPUS:
        rec.probe(host, torch_env())
        rec.snapshot(host, packages())
    runs = {}
    for host in GPUS:
        odd = host == "gpu-3"
        runs[host] = rec.step(
            "install-torch",
            host,
            before=packages(),
            after=packages(torch="2.12.0.dev20260226", nvidia_nccl_cu13="2.29.1")
            if odd
            else packages(),
            probe=torch_env(NEW, nccl="2.29.1") if odd else torch_env(),
        )
    report = rec.drift()
    assert [g.name for g in report.groups] == ["all"] and report.drifts
    assert report.groups[0].drifting == ["gpu-3"]
    torch = row(report, "torch.version")
    assert torch.majority == "2.11.0+cu130" and torch.counts == {"2.11.0+cu130": 3, NEW: 1}
    assert torch.odd_hosts == ["gpu-3"]
    since = torch.cells["gpu-3"].since
    assert since is not None and not since.first_seen
    assert [r.run_id for r in since.runs] == [runs["gpu-3"]]
    assert since.seen.kind == "probe" and since.seen.run == runs["gpu-3"]
    # each value says where it was read: the probe after gpu-0's step run
    source = torch.cells["gpu-0"].source
    assert source is not None and source.run == runs["gpu-0"] and source.phase == "after"
    nccl = row(report, "nccl")
    assert nccl.majority == "2.28.9" and nccl.odd_hosts == ["gpu-3"]
    package = row(report, "packages.torch")
    assert package.majority == "2.11.0" and package.odd_hosts == ["gpu-3"]
    assert package.cells["gpu-3"].since.runs[0].run_id == runs["gpu-3"]  # type: ignore[union-attr]
    assert package.cells["gpu-3"].since.seen.phase == "after"  # type: ignore[union-attr]
    # what the real H200 reads, the same on every host, is no drift
    for key, value in (
        ("driver", "580.159.04"),
        ("cuda_driver", "13.0"),
        ("gpu_name", "NVIDIA H200"),
        ("gpu_count", "1"),
        ("torch.cudnn", "91900"),
        ("nvcc.release", "13.0"),
        ("packages.triton", "3.6.0"),
        ("packages.transformers", "5.17.0"),
    ):
        assert row(report, key).majority == value and not row(report, key).differs, key
    shown = [r.key for r in report.groups[0].rows if r.kind == "packages"]
    assert shown[:4] == [
        "packages.torch",
        "packages.torchvision",
        "packages.torchaudio",
        "packages.numpy",
    ]
    assert "packages.vllm" not in shown  # installed on no host: no row


def test_a_host_that_always_differed_differs_since_first_seen_naming_the_others_step() -> None:
    rec = Recording(GPUS)
    for host in GPUS:
        rec.step("probe-stack", host, after=packages(torch=OLD), probe=torch_env(OLD))
    for host in GPUS:
        upgraded = host != "gpu-1"  # gpu-1's install was a no-op
        rec.step(
            "install-torch",
            host,
            before=packages(torch=OLD),
            after=packages(torch=NEW if upgraded else OLD),
            probe=torch_env(NEW if upgraded else OLD),
        )
    torch = row(rec.drift(), "torch.version")
    assert torch.majority == NEW and torch.odd_hosts == ["gpu-1"]
    since = torch.cells["gpu-1"].since
    assert since is not None and since.first_seen and since.runs == ()
    assert torch.majority_steps == ("install-torch",)


def test_a_tie_has_no_majority_and_flags_every_host_of_the_row() -> None:
    rec = Recording(GPUS)
    for host in GPUS:
        rec.probe(host, torch_env(NEW if host in ("gpu-2", "gpu-3") else OLD))
    report = rec.drift()
    torch = row(report, "torch.version")
    assert torch.majority is None and torch.counts == {OLD: 2, NEW: 2}
    assert torch.odd_hosts == GPUS and report.groups[0].drifting == GPUS
    assert all(torch.cells[h].since.first_seen for h in GPUS)  # type: ignore[union-attr]
    # two hosts that differ are a tie too: drift, not a silent pass
    pair = Recording(["a", "b"])
    pair.probe("a", torch_env(OLD))
    pair.probe("b", torch_env(NEW))
    assert pair.drift().drifts and row(pair.drift(), "torch.version").odd_hosts == ["a", "b"]


def test_hosts_compare_within_their_group_and_the_ungrouped_among_themselves() -> None:
    hosts = ["h200-a", "h200-b", "h200-c", "b200-a", "b200-b", "spare"]
    rec = Recording(hosts)
    for host in hosts:
        blackwell = host.startswith("b200")
        rec.probe(
            host, torch_env(gpu_name="NVIDIA B200", capability="10.0") if blackwell else torch_env()
        )
    rec.probe("h200-c", torch_env(driver="575.57.08"))
    groups = {"h200": ["h200-a", "h200-b", "h200-c"], "b200": ["b200-a", "b200-b"]}
    report = rec.drift(groups)
    assert [(g.name, g.hosts) for g in report.groups] == [
        ("h200", ["h200-a", "h200-b", "h200-c"]),
        ("b200", ["b200-a", "b200-b"]),
        ("ungrouped", ["spare"]),
    ]
    assert [g.drifting for g in report.groups] == [["h200-c"], [], []]
    assert row(report, "gpu_name", 1).majority == "NVIDIA B200"
    driver = row(report, "driver")
    assert driver.cells["h200-c"].text == "575.57.08" and driver.majority == "580.159.04"
    # without groups, the B200s are the odd ones of one fleet
    everyone = rec.drift()
    assert [g.name for g in everyone.groups] == ["all"]
    assert row(everyone, "gpu_name").odd_hosts == ["b200-a", "b200-b"]
    assert everyone.groups[0].drifting == ["h200-c", "b200-a", "b200-b"]


def test_a_change_between_readings_names_the_step_runs_in_between_or_none() -> None:
    rec = Recording(GPUS)
    for host in GPUS:
        rec.probe(host, torch_env())
    # gpu-1: two step runs with no reading (snapshots off, no probe), a benchmark, then a probe
    first = rec.step("build-kernel", "gpu-1")
    second = rec.step("patch-sglang", "gpu-1")
    rec.step("eagle3-c1", "gpu-1", benchmark="eagle3-c1")
    rec.probe("gpu-1", torch_env(NEW))
    # gpu-2: changed with no step run at all between its two probes
    rec.probe("gpu-2", torch_env("2.11.0+cu129"))
    torch = row(rec.drift(), "torch.version")
    assert torch.odd_hosts == ["gpu-1", "gpu-2"]
    between = torch.cells["gpu-1"].since
    assert between is not None and [r.run_id for r in between.runs] == [first, second]
    outside = torch.cells["gpu-2"].since
    assert outside is not None and not outside.first_seen and outside.runs == ()
    assert outside.seen.phase == "probe"


def test_a_long_history_keeps_only_the_step_runs_drift_can_name() -> None:
    """A year of runs: the readings keep the runs a stretch names (and those one begun later
    could), not every run, and name the same runs as ever, folded whole or a part at a time."""
    rec = Recording(GPUS)
    for host in GPUS:
        rec.probe(host, torch_env())
    diverged = rec.step("install-torch", "gpu-2", probe=torch_env(NEW))
    for day in range(300):
        for host in GPUS:  # a daily check that reads the stack after it
            rec.step("smoke", host, probe=torch_env(NEW if host == "gpu-2" else "2.11.0+cu130"))
        rec.step(f"tune-{day}", "gpu-0")  # and a run with no reading after it
    in_flight = rec.step("build-kernel", "gpu-1")  # between gpu-1's last reading and the next
    whole = fold("gpu-fleet", rec.records)
    assert len(whole.runs) < 10 and in_flight in whole.runs
    assert whole.run_hosts == ["gpu-2", "gpu-0", "gpu-1", "gpu-3"] and whole.all_hosts() == GPUS
    since = row(compare(whole), "torch.version").cells["gpu-2"].since
    assert since is not None and [r.run_id for r in since.runs] == [diverged]
    # gpu-1 changes after the build: the run in flight between its readings is named
    rec.probe("gpu-1", torch_env("2.11.0+cu129"))
    for cut in (len(rec.records) // 3, len(rec.records) - 1):
        state = fold("gpu-fleet", rec.records[:cut])
        assert fold("gpu-fleet", rec.records, state) == fold("gpu-fleet", rec.records)
    report = compare(fold("gpu-fleet", rec.records))
    since = row(report, "torch.version").cells["gpu-1"].since
    assert since is not None and [r.run_id for r in since.runs] == [in_flight]
    assert since.runs[0].status == "succeeded"


def test_a_reading_that_flips_for_a_year_keeps_its_values_not_its_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host re-imported every day whose torch flips between builds (two imported GPU
    sessions of a year): drift keeps a few stretches per value, not one per flip, and says
    what it said with every stretch kept, whichever value the other hosts agree on."""
    import random

    from journal.projections.drift import readings

    pick = random.Random(29)
    builds = [OLD, NEW, "2.11.0+cu130", "2.11.0+cu129"]
    rec = Recording(GPUS)
    for host in GPUS:
        rec.probe(host, torch_env("2.11.0+cu130"))
    cuts = []
    for day in range(400):
        host = "gpu-3" if day % 5 else pick.choice(GPUS[:3])  # the others move now and then
        if pick.random() < 0.5:
            rec.step(f"reinstall-{day % 7}", host)
        rec.probe(host, torch_env(pick.choice(builds)))
        if day % 37 == 0:
            cuts.append(len(rec.records))
    cuts.append(len(rec.records))
    kept = fold("gpu-fleet", rec.records)
    assert len(kept.by_host["gpu-3"].series["torch.version"]) <= 2 * len(builds) + 2
    assert len(kept.runs) < 40
    with monkeypatch.context() as every:
        every.setattr(readings, "_prune", lambda segments: None)
        wholes = [fold("gpu-fleet", rec.records[:cut]) for cut in cuts]
    assert len(wholes[-1].by_host["gpu-3"].series["torch.version"]) > 200
    for cut, whole in zip(cuts, wholes, strict=True):
        assert compare(fold("gpu-fleet", rec.records[:cut])) == compare(whole)


def test_a_package_installed_later_is_compared_from_the_hosts_first_snapshot() -> None:
    hosts = [*GPUS, "gpu-4"]
    rec = Recording(hosts)
    for host in hosts:
        rec.snapshot(host, packages())
    for host in hosts:
        installed = packages(flashinfer_python="0.6.3") if host != "gpu-0" else packages()
        rec.step("install-flashinfer", host, before=packages(), after=installed)
    flashinfer = row(rec.drift(), "packages.flashinfer-python")
    assert flashinfer.majority == "0.6.3" and flashinfer.odd_hosts == ["gpu-0"]
    assert flashinfer.cells["gpu-0"].text == "not installed"
    assert flashinfer.majority_steps == ("install-flashinfer",)
    # and a host that then removes it diverges after that step run
    removed = rec.step(
        "remove-flashinfer", "gpu-2", before=packages(flashinfer_python="0.6.3"), after=packages()
    )
    flashinfer = row(rec.drift(), "packages.flashinfer-python")
    assert flashinfer.odd_hosts == ["gpu-0", "gpu-2"]
    assert [r.run_id for r in flashinfer.cells["gpu-2"].since.runs] == [removed]  # type: ignore[union-attr]


def test_a_recorded_gpu_journal_reads_as_the_real_h200_and_folds_incrementally(
    tmp_path: Path,
) -> None:
    db = tmp_path / "journal-h200.db"
    shutil.copy(H200 / "bench" / "journal-h200.db", db)  # opening a store may migrate it
    store = EventStore(str(db))
    try:
        records = list(store.read("h200-bench", types=EVENT_TYPES))
    finally:
        store.close()
    whole = fold("h200-bench", records)
    report = compare(whole)
    assert report.groups[0].hosts == ["h200"] and not report.drifts
    assert row(report, "gpu_name").majority == "NVIDIA H200"
    assert row(report, "torch.version").majority == "2.11.0+cu130"
    # folding in two parts gives what folding at once gives (the web extends its readings)
    half = fold("h200-bench", records[: len(records) // 2])
    assert compare(fold("h200-bench", records, half)) == report


# -- `journal drift` and the hosts page on real fleets -------------------------------------------

LOCAL = "drift-local"
LOCAL_HOSTS = ["h1", "h2", "h3", "h4"]


@pytest.fixture(scope="module")
def local_fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four `local` hosts, each with its own target venv holding the cu128 stand-in stack
    (made by real uv); the step install-torch reinstalls torch from the host's TORCH_INDEX,
    which for h4 is the cu130 nightly's. Returns the runbook."""
    root = tmp_path_factory.mktemp("drift-local")
    indexes = build_indexes(root / "indexes")
    uv = find_uv()
    uv_env = {"UV_CACHE_DIR": str(root / "uv-cache"), "UV_NO_CONFIG": "1"}
    uv_env["UV_PYTHON_DOWNLOADS"] = "never"
    hosts = ""
    for host in LOCAL_HOSTS:
        venv = root / f"env-{host}"
        python = venv / "bin" / "python3"
        for cmd in (
            [uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
            [uv, "pip", "install", "--quiet", "--python", str(python)]
            + ["torch", "torchvision", "torchaudio", "numpy", "pillow"]
            + ["--index-url", indexes["cu128"].as_uri()],
        ):
            subprocess.run(cmd, env={**os.environ, **uv_env}, check=True, capture_output=True)
        index = indexes["cu130" if host == "h4" else "cu128"].as_uri()
        env = {**uv_env, "TARGET": str(python), "TORCH_INDEX": index}
        hosts += f'[hosts.{host}]\nssh = "local"\npython = "{python}"\n'
        hosts += f"env = {{ {', '.join(f'{k} = {json.dumps(v)}' for k, v in env.items())} }}\n\n"
    return write_runbook(
        root,
        f"""[journal]
name = "{LOCAL}"

{hosts}[probes.torch-env]
import_torch = true

[[steps]]
name = "install-torch"
run = '''{uv} pip install --python "$TARGET" torch torchvision torchaudio \\
  --index-url "$TORCH_INDEX" --reinstall'''
probes = ["torch-env"]
""",
    )


def run_ids(db: Path, journal_name: str) -> dict[tuple[str, str], str]:
    """(step, host) -> run id."""
    store = EventStore(str(db))
    try:
        return {
            (r.event.step, r.event.host_name): r.event.run
            for r in store.read(journal_name, types=["StepStarted"])
            if isinstance(r.event, StepStarted)
        }
    finally:
        store.close()


def test_drift_on_a_local_fleet_names_the_host_a_step_made_odd(
    local_fleet: Path, tmp_path: Path
) -> None:
    db = tmp_path / "journal.db"
    nothing = journal("drift", db=db, runbook=local_fleet)
    assert nothing.returncode == 2 and no_traceback(nothing), text(nothing.stderr)
    assert not db.exists()  # a read-only command creates no database at a mistyped path
    assert journal("note", "before the upgrade", db=db, runbook=local_fleet).returncode == 0
    empty = journal("drift", db=db, runbook=local_fleet)
    assert empty.returncode == 2 and "nothing to compare" in text(empty.stderr)
    for probe in ("torch-env", "packages"):
        probed = journal("run", "probe", probe, db=db, runbook=local_fleet)
        assert probed.returncode == 0, text(probed.stderr)
    same = journal("drift", db=db, runbook=local_fleet)
    assert same.returncode == 0, text(same.stderr)
    assert "no drift" in text(same.stdout) and " *" not in text(same.stdout)
    assert re.search(rf"  torch +{re.escape(OLD)} +{re.escape(OLD)} ", text(same.stdout))

    step = journal("run", "step", "install-torch", db=db, runbook=local_fleet, timeout=300)
    assert step.returncode == 0, text(step.stderr)
    odd_run = run_ids(db, LOCAL)[("install-torch", "h4")]
    result = journal("drift", db=db, runbook=local_fleet)
    out = text(result.stdout)
    assert result.returncode == 1, out + text(result.stderr)
    since = f"since step install-torch (run {odd_run})"
    assert f"h4: torch {NEW} where 3 of 4 hosts have {OLD}, {since}" in out
    assert f"h4: torch CUDA 13.0 where 3 of 4 hosts have 12.8, {since}" in out
    assert f"h4: NCCL (torch) 2.28.9 where 3 of 4 hosts have 2.22.3, {since}" in out
    assert f"h4: package numpy 2.4.1 where 3 of 4 hosts have 2.4.2, {since}" in out
    assert f"h4: package nvidia-nccl-cu13 2.28.9 where 3 of 4 hosts do not have it, {since}" in out
    assert not re.search(r"^h[123]:", out, re.M)
    assert re.search(
        rf"  torch +{re.escape(OLD)} +(?:{re.escape(OLD)} +){{3}}{re.escape(NEW)} \*", out
    )
    assert out.rstrip().endswith("drift: h4 (in all) differs from the group's majority")

    shaped = journal("drift", "--format", "json", "--group", "all", db=db, runbook=local_fleet)
    assert shaped.returncode == 1
    report = json.loads(shaped.stdout)
    assert report["journal"] == LOCAL and report["drift"] is True
    (group,) = report["groups"]
    assert group["name"] == "all" and group["hosts"] == LOCAL_HOSTS and group["drifting"] == ["h4"]
    torch = next(r for r in group["rows"] if r["key"] == "torch.version")
    assert torch["majority"] == OLD and torch["counts"] == {OLD: 3, NEW: 1} and torch["differs"]
    assert torch["values"]["h4"]["value"] == NEW and torch["values"]["h4"]["differs"] is True
    read = torch["values"]["h1"]["read"]
    assert read["kind"] == "probe" and read["phase"] == "after" and read["seq"] > 0
    assert read["run"] == run_ids(db, LOCAL)[("install-torch", "h1")]
    keys = {d["key"] for d in group["divergences"]}
    assert {"torch.version", "torch.cuda", "nccl", "packages.torch", "packages.numpy"} <= keys
    assert {d["host"] for d in group["divergences"]} == {"h4"}
    first = group["divergences"][0]
    assert first["hosts_with_majority"] == 3 and first["hosts_read"] == 4
    assert first["since"]["first_seen"] is False
    assert first["since"]["runs"] == [
        {
            "run": odd_run,
            "step": "install-torch",
            "ts": first["since"]["runs"][0]["ts"],
            "status": "succeeded",
        }
    ]

    unknown = journal("drift", "--group", "gpu", db=db, runbook=local_fleet)
    assert unknown.returncode == 2 and no_traceback(unknown)
    assert "no group named 'gpu'" in text(unknown.stderr) and "all" in text(unknown.stderr)

    # the hosts page: the same projection, h4 marked in each row it differs, its step linked
    html = create_app({"DB": str(db), "TESTING": True}).test_client().get(f"/j/{LOCAL}/hosts")
    page = html.get_data(as_text=True)
    row_html = re.search(r'<tr class="stack differs" data-row="torch">(.*?)</tr>', page, re.S)
    assert row_html is not None
    assert re.search(
        rf'<td class="majority">{re.escape(OLD)} <span class="muted">\(3 of 4\)', row_html.group(1)
    )
    odd = re.findall(r'<td class="odd" data-host="([\w-]+)"', row_html.group(1))
    assert odd == ["h4"]
    # each value says where it was read (the probe after each host's step run)
    read = re.findall(r'title="read in the torch-env probe, event (\d+), 20', row_html.group(1))
    assert len(read) == 4 and len(set(read)) == 4
    link = f'href="/j/{LOCAL}/run/{odd_run}">install-torch</a>'
    assert link in row_html.group(1)
    assert '<tr class="packages differs" data-row="numpy">' in page
    assert '<tr class="stack" data-row="nvcc">' in page  # the same everywhere: not marked
    assert "1 host differs from the group: h4" in page


def test_drift_over_real_sshds_names_the_host_given_another_env(
    fleet: Fleet, tmp_path: Path
) -> None:
    rb = fleet.runbook(tmp_path, "[probes.torch-env]\nimport_torch = true\n", name="drift-ssh")
    db = tmp_path / "journal.db"
    env = fleet.env()
    for probe in ("torch-env", "packages"):
        probed = journal("run", "probe", probe, db=db, runbook=rb, env=env)
        assert probed.returncode == 0, text(probed.stderr)
    hosts = len(fleet.names)
    result = journal("drift", "--group", "gpu", db=db, runbook=rb, env=env)
    out = text(result.stdout)
    assert result.returncode == 1, out + text(result.stderr)
    odd = fleet.odd
    assert (
        f"{odd}: torch {NEW} where {hosts - 1} of {hosts} hosts have {OLD}, since first seen" in out
    )
    assert f"{odd}: package numpy 2.4.1 where {hosts - 1} of {hosts} hosts have 2.4.2" in out
    assert {line.split(":")[0] for line in out.splitlines() if line.startswith("gpu-")} == {odd}
    # a group without the odd host agrees
    assert odd not in fleet.names[:2]  # the default [groups]' canary
    calm = journal("drift", "--group", "canary", "--format", "json", db=db, runbook=rb, env=env)
    assert calm.returncode == 0, text(calm.stderr)
    assert json.loads(calm.stdout)["drift"] is False
