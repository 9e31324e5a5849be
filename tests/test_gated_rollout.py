"""Gated rollouts on eight real sshds (loopback), each host with its own target venv made by
real uv from the demo's stand-in wheels: `journal run plan --rolling 2 --gate fleet` upgrades
torch cu128 -> cu130 batch by batch, each host's benchmark judged against its own baseline.

The benchmark reads a figure per host from a file the test writes (what the host would
measure); the drain and resume hooks write each host's state to a folder, as a scheduler
would keep it.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from journal.demo.run import find_uv
from journal.demo.wheels import build_indexes
from journal.events import BatchGated, RolloutFinished, RolloutStarted, StepStarted
from journal.store import EventStore
from journal.web import create_app
from tests.helpers import journal, no_traceback, text
from tests.sshd import SshHome, SshServer
from tests.test_notify import Receiver
from tests.test_notify import receiver as receiver  # noqa: F401  (a fixture)

ADDRESSES = [f"127.0.0.{i}" for i in range(41, 49)]
NAMES = [f"gpu-{i}" for i in range(1, 9)]
NAME = "rollout-test"


class Rig:
    """The eight sshds, their client HOME and the stand-in indexes."""

    def __init__(self, servers: list[SshServer], root: Path) -> None:
        self.servers = servers
        self.home = SshHome(servers)
        self.root = root
        self.indexes = build_indexes(root / "indexes")
        self.uv = find_uv()
        self.uv_env = {
            **os.environ,
            "UV_CACHE_DIR": str(root / "uv-cache"),
            "UV_NO_CONFIG": "1",
            "UV_PYTHON_DOWNLOADS": "never",
        }

    def venv(self, path: Path) -> Path:
        """A target venv holding the cu128 stand-in torch (as the hosts had it)."""
        python = path / "bin" / "python3"
        for cmd in (
            [self.uv, "venv", "--quiet", "--python", sys.executable, str(path)],
            [self.uv, "pip", "install", "--quiet", "--python", str(python), "torch", "numpy"]
            + ["--index-url", self.indexes["cu128"].as_uri()],
        ):
            subprocess.run(cmd, env=self.uv_env, check=True, capture_output=True)
        return python


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(SshServer(a)) for a in ADDRESSES]
        built = Rig(servers, tmp_path_factory.mktemp("rollout-rig"))
        yield built
        built.home.cleanup()


class Fleet:
    """One test's eight hosts: a venv each, a figure file each, the hooks' state folder."""

    def __init__(self, rig: Rig, folder: Path, tolerance: str = ">= -5%") -> None:
        self.rig, self.folder = rig, folder
        self.state = folder / "scheduler"
        self.state.mkdir()
        self.pythons = {n: rig.venv(folder / f"env-{n}") for n in NAMES}
        hosts = "".join(
            f'[hosts.{name}]\nssh = "{server.alias}"\npython = "{self.pythons[name]}"\n'
            f'uv = "{rig.uv}"\n'
            f'env = {{ PY = "{self.pythons[name]}", FIG = "{folder / (name + ".fig")}", '
            # the site's mirror: where a rollback finds what no recorded install brought
            f'UV_INDEX_URL = "{rig.indexes["cu128"].as_uri()}", '
            'UV_NO_CONFIG = "1", UV_PYTHON_DOWNLOADS = "never", '
            f'UV_CACHE_DIR = "{rig.root / "uv-cache"}" }}\n\n'
            for name, server in zip(NAMES, rig.servers, strict=True)
        )
        cu128, cu130 = (rig.indexes[v].as_uri() for v in ("cu128", "cu130"))
        self.book = folder / "runbook.toml"
        self.book.write_text(
            f'[journal]\nname = "{NAME}"\ngate = "fleet"\n\n{hosts}'
            f"""
[[steps]]
name = "install-base"
run = "{rig.uv} pip install --python $PY --reinstall torch==2.10.0+cu128 numpy --index-url {cu128}"

[[steps]]
name = "upgrade-torch"
run = "{rig.uv} pip install --python $PY --reinstall-package torch torch --index-url {cu130}"
hosts = {json.dumps(NAMES)}

[benchmarks.serving]
run = "for v in $(cat $FIG); do echo \\"Output token throughput (tok/s): $v\\"; done"
parser = "regex"
pattern = 'Output token throughput \\(tok/s\\): (?P<output_token_throughput>[0-9.]+)'
units = {{ output_token_throughput = "tok/s" }}

[gates.fleet]
probe = "torch-env"
benchmarks = ["serving"]
tolerance = {{ output_token_throughput = "{tolerance}" }}
before_batch = "for h in $(echo {{hosts}} | tr , ' '); do echo drained > {self.state}/$h; done"
after_batch = "for h in $(echo {{hosts}} | tr , ' '); do echo resumed > {self.state}/$h; done"
"""
        )
        self.db = folder / "journal.db"

    def figures(self, values: dict[str, str]) -> None:
        for name in NAMES:
            (self.folder / f"{name}.fig").write_text(values.get(name, "100") + "\n")

    def run(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return journal(*args, db=self.db, runbook=self.book, env=self.rig.home.env(), timeout=600)

    def torch(self, name: str) -> str:
        return subprocess.run(
            [str(self.pythons[name]), "-c", "import torch; print(torch.__version__)"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    def scheduler(self) -> dict[str, str]:
        return {p.name: p.read_text().strip() for p in self.state.iterdir()}

    def events(self, kind: type) -> list:
        store = EventStore(str(self.db))
        try:
            return [r.event for r in store.read(NAME, types=[kind.type])]
        finally:
            store.close()

    def baseline(self) -> None:
        """The figures before the rollout: each host's own, labelled phase=before."""
        done = self.run("run", "bench", "serving", "--all-hosts", "--label", "phase=before")
        assert done.returncode == 0, text(done.stderr)


def test_a_batch_below_its_own_baseline_stops_the_rollout_and_is_rolled_back(
    rig: Rig, tmp_path: Path
) -> None:
    fleet = Fleet(rig, tmp_path)
    fleet.figures({})
    # the hosts' torch came from a recorded install (a rollback finds its source there)
    recorded = fleet.run("run", "step", "install-base", "--all-hosts")
    assert recorded.returncode == 0, text(recorded.stderr)
    fleet.baseline()
    # the third batch (gpu-5, gpu-6) will measure 20% below its baseline after the upgrade
    fleet.figures({"gpu-5": "80", "gpu-6": "80"})
    done = fleet.run("run", "plan", "--rolling", "2", "--on-gate-fail", "rollback")
    said = text(done.stderr)
    assert done.returncode == 1, said
    assert no_traceback(done)
    assert "batch 1 (gpu-1, gpu-2) passed its gate" in said
    assert "batch 3 (gpu-5, gpu-6) FAILED its gate" in said
    assert "gpu-5: output_token_throughput 100 → 80 (-20.0%, worse; gate >= -5%)" in said

    (started,) = fleet.events(RolloutStarted)
    assert started.batches == [NAMES[i : i + 2] for i in range(0, 8, 2)]
    gated = fleet.events(BatchGated)
    assert [(g.batch, g.passed) for g in gated] == [(1, True), (2, True), (3, False)]
    failing = [c for c in gated[2].checks if not c["ok"]]
    assert {c["host"] for c in failing} == {"gpu-5", "gpu-6"}
    assert all(c["check"] == "figure" and c["baseline"] == 100 for c in failing)
    (finished,) = fleet.events(RolloutFinished)
    assert finished.status == "rolled-back" and finished.batch == 3, finished.reason
    assert finished.drained == ["gpu-5", "gpu-6"] and finished.untouched == ["gpu-7", "gpu-8"]

    # the passed batches are upgraded and back in service; the failed one rolled back and
    # left drained; the last never touched
    assert [fleet.torch(n) for n in NAMES[:4]] == ["2.12.0.dev20260226+cu130"] * 4
    assert [fleet.torch(n) for n in ("gpu-5", "gpu-6")] == ["2.10.0+cu128"] * 2
    assert [fleet.torch(n) for n in ("gpu-7", "gpu-8")] == ["2.10.0+cu128"] * 2
    assert fleet.scheduler() == {
        **{n: "resumed" for n in NAMES[:4]},
        "gpu-5": "drained",
        "gpu-6": "drained",
    }
    upgraded = {e.host_name for e in fleet.events(StepStarted) if e.step == "upgrade-torch"}
    assert upgraded == set(NAMES[:6])
    rollbacks = [e for e in fleet.events(StepStarted) if e.rollback is not None]
    assert sorted(e.host_name for e in rollbacks) == ["gpu-5", "gpu-6"]

    # status, the rollout's page and the postmortem tell it
    status = json.loads(fleet.run("status", "--format", "json").stdout)
    assert status["rollout"]["status"] == "rolled-back"
    assert status["rollout"]["drained"] == ["gpu-5", "gpu-6"]
    assert "rollout " in text(fleet.run("status").stdout)
    client = create_app({"DB": str(fleet.db), "TESTING": True}).test_client()
    page = client.get(f"/j/{NAME}/rollout/{started.rollout}").get_data(as_text=True)
    assert 'id="drained">gpu-5, gpu-6' in page
    assert page.count('class="failed" data-host="gpu-5" data-check="figure"') == 1
    # /metrics says what status says
    from prometheus_client.parser import text_string_to_metric_families

    scraped = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(client.get("/metrics").get_data(as_text=True))
        for s in family.samples
        if s.name.startswith("journal_rollout")
    }
    keys = {"journal": NAME, "rollout": started.rollout, "gate": "fleet"}
    for state in ("running", "completed", "stopped", "rolled-back", "interrupted"):
        labels = tuple(sorted({**keys, "status": state}.items()))
        assert scraped[("journal_rollout_status", labels)] == (
            1.0 if state == status["rollout"]["status"] else 0.0
        )
    passed = tuple(sorted({**keys, "state": "passed"}.items()))
    assert scraped[("journal_rollout_batches", passed)] == status["rollout"]["batches_passed"]
    drained = {
        dict(labels)["host"] for (name, labels), v in scraped.items() if name.endswith("drained")
    }
    assert drained == set(status["rollout"]["drained"])
    md = tmp_path / "pm.md"
    assert fleet.run("export", "postmortem", "-o", str(md)).returncode in (0, 1)
    assert "**rolled-back**, 2 of 4 batches" in md.read_text()

    # fixed (the figure back), --resume goes on from batch 3 and completes
    fleet.figures({"gpu-5": "99", "gpu-6": "101"})
    again = fleet.run("run", "plan", "--rolling", "2", "--resume")
    assert again.returncode == 0, text(again.stderr)
    assert [fleet.torch(n) for n in NAMES] == ["2.12.0.dev20260226+cu130"] * 8
    assert set(fleet.scheduler().values()) == {"resumed"}
    assert fleet.events(RolloutFinished)[-1].status == "completed"
    # the rollout's page keeps why it stopped and the gate batch 3 failed before
    page = client.get(f"/j/{NAME}/rollout/{started.rollout}").get_data(as_text=True)
    assert "rolled-back at batch 3: gpu-5: output_token_throughput 100" in page
    earlier = page.split('id="batch-3"', 1)[1].split("</section>", 1)[0]
    assert "its gate at" in earlier and "failed, before <code>--resume</code>" in earlier
    assert "<code>gpu-6</code> figure <code>output_token_throughput</code>" in earlier


def test_figures_within_tolerance_or_their_spread_never_stop_a_rollout(
    rig: Rig, tmp_path: Path
) -> None:
    fleet = Fleet(rig, tmp_path, tolerance=">= -2%")
    # the health command prints a real H200's `nvidia-smi -q`: read, and healthy
    smi = Path(__file__).parent / "data" / "h200" / "nvidia-smi-q.txt"
    fleet.book.write_text(
        fleet.book.read_text().replace(
            'probe = "torch-env"', f'probe = "torch-env"\nhealth = "cat {smi}"'
        )
    )
    # two racks under two schedulers: rack-b's hosts are drained and resumed by its own hooks
    with fleet.book.open("a") as book:
        book.write(
            "\n[gates.fleet.groups.rack-b]\n"
            f"before_batch = \"for h in $(echo {{hosts}} | tr , ' '); do echo b-drained > "
            f'{fleet.state}/$h; done"\n'
            f"after_batch = \"for h in $(echo {{hosts}} | tr , ' '); do echo b-resumed > "
            f'{fleet.state}/$h; done"\n'
            f"\n[groups]\nrack-a = {json.dumps(NAMES[:4])}\nrack-b = {json.dumps(NAMES[4:])}\n"
        )
    # five samples per run; after the upgrade gpu-3's median is 3% lower (beyond -2%), but
    # its samples overlap the baseline's: within the spread, noise, not a regression
    fleet.figures({n: "96 98 100 102 104" for n in NAMES})
    fleet.baseline()
    fleet.figures({**{n: "97 99 100 101 103" for n in NAMES}, "gpu-3": "93 95 97 99 101"})
    done = fleet.run("run", "plan", "--rolling", "2")
    assert done.returncode == 0, text(done.stderr)
    assert "gpu-3: output_token_throughput 100 → 97 (-3.0%, noise; gate >= -2%)" in text(
        done.stderr
    )
    gated = fleet.events(BatchGated)
    assert [g.passed for g in gated] == [True] * 4
    health = [c for g in gated for c in g.checks if c["check"] == "health"]
    assert len(health) == 8 and all(c["ok"] for c in health)
    assert {c["parsed"]["driver"] for c in health} == {"580.159.04"}
    assert all(c["parsed"]["gpus"][0]["name"] == "NVIDIA H200" for c in health)
    assert fleet.events(RolloutFinished)[-1].status == "completed"
    assert fleet.scheduler() == {
        **{n: "resumed" for n in NAMES[:4]},
        **{n: "b-resumed" for n in NAMES[4:]},
    }


def test_a_stack_that_disagrees_stops_the_rollout(
    rig: Rig, tmp_path: Path, receiver: Receiver
) -> None:
    fleet = Fleet(rig, tmp_path)
    fleet.figures({})
    fleet.baseline()
    with fleet.book.open("a") as book:  # on-call hears of a stopped rollout
        book.write(f'\n[notify.oncall]\nurl = "{receiver.url()}"\non = ["gate-failed"]\n')
    # gpu-4's upgrade installs the old torch again: its stack differs from the rollout's
    book = fleet.book.read_text()
    fleet.book.write_text(
        book.replace(
            "[benchmarks.serving]",
            '[[steps]]\nname = "pin-back"\nrun = "test $PY != '
            + str(fleet.pythons["gpu-4"])
            + f" || {rig.uv} pip install --python $PY torch==2.10.0+cu128 --index-url "
            + rig.indexes["cu128"].as_uri()
            + '"\nhosts = ["gpu-4"]\n\n[benchmarks.serving]',
        )
    )
    done = fleet.run("run", "plan", "--rolling", "2")
    assert done.returncode == 1, text(done.stderr)
    gated = fleet.events(BatchGated)
    assert [g.passed for g in gated] == [True, False]
    (stack,) = [c for c in gated[1].checks if c["check"] == "stack" and not c["ok"]]
    assert (
        stack["host"] == "gpu-4"
        and "torch 2.10.0+cu128 where the rollout's hosts" in (stack["reason"])
    )
    assert fleet.events(RolloutFinished)[-1].status == "stopped"
    (told,) = receiver.of("gate-failed")
    assert told["gate"]["status"] == "stopped" and told["gate"]["batch"] == 2
    assert told["gate"]["drained"] == ["gpu-3", "gpu-4"] and "gpu-4:" in told["gate"]["reason"]
    assert fleet.scheduler() == {
        "gpu-1": "resumed",
        "gpu-2": "resumed",
        "gpu-3": "drained",
        "gpu-4": "drained",
    }


def test_bad_gate_input_is_refused_before_anything_is_recorded(rig: Rig, tmp_path: Path) -> None:
    fleet = Fleet(rig, tmp_path)
    for args, said in (
        (["--gate", "nope", "--rolling", "2"], "no gate named 'nope'"),
        (["--gate", "fleet"], "add --rolling N"),
        (["--rolling", "2", "--resume"], "has no rollout to go on with"),
    ):
        done = fleet.run("run", "plan", *args)
        assert done.returncode == 2, (args, text(done.stderr))
        assert said in text(done.stderr) and no_traceback(done)
    assert not fleet.events(RolloutStarted) if fleet.db.exists() else True


GATED = """
[journal]
name = "g"
{journal}
[hosts.a]
ssh = "local"

[[steps]]
name = "s"
run = "true"

[benchmarks.serving]
run = "echo x: 1"
parser = "regex"
pattern = 'x: (?P<x>[0-9]+)'

[gates.fleet]
{gate}
"""


@pytest.mark.parametrize(
    ("gate", "journal_table", "said"),
    [
        (
            'benchmarks = ["serving"]\ntolerance = { x = "-5%" }',
            "",
            "line 19, gates.fleet.tolerance.x: '-5%' is not a tolerance",
        ),
        (
            'benchmarks = ["serving"]\ntolerance = { x = ">= +5%" }',
            "",
            "asks the figure to move up by 5% at least",
        ),
        (
            'benchmarks = ["servng"]\ntolerance = { x = ">= -5%" }',
            "",
            "no benchmark named 'servng' (did you mean 'serving'?)",
        ),
        (
            'tolerance = { x = ">= -5%" }',
            "",
            "judges the figures of the gate's benchmarks, and it has none",
        ),
        ('benchmarks = ["serving"]', "", "judges no figure of them"),
        ('probe = "torch-evn"', "", "no probe named 'torch-evn' (did you mean 'torch-env'?)"),
        ('hooks_host = "b"', "", "gates.fleet.hooks_host: no host named 'b'"),
        ("before_batchh = 'x'", "", "unknown key 'before_batchh' (did you mean 'before_batch'?)"),
        ("", 'gate = "fleat"', "journal.gate: no gate named 'fleat' (did you mean 'fleet'?)"),
        (
            'groups = { nope = { before_batch = "x" } }',
            "",
            "gates.fleet.groups.nope: no group named 'nope': a group's hooks are for a [groups]",
        ),
    ],
)
def test_a_gate_table_is_checked_where_it_is_wrong(
    gate: str, journal_table: str, said: str, tmp_path: Path
) -> None:
    from journal.errors import BadInput
    from journal.runbook import parse

    text_ = GATED.format(gate=gate, journal=journal_table)
    with pytest.raises(BadInput) as raised:
        parse(text_, tmp_path / "runbook.toml")
    assert said in str(raised.value)
    assert str(tmp_path / "runbook.toml") in str(raised.value)


def test_the_health_of_a_real_nvidia_smi_q_and_what_fails_it() -> None:
    from journal.reading.health import nvidia_smi_q

    real = (Path(__file__).parent / "data" / "h200" / "nvidia-smi-q.txt").read_text()
    read = nvidia_smi_q(real)
    assert read is not None and read["problems"] == [] and read["cuda"] == "13.0"
    (gpu,) = read["gpus"]
    assert gpu["bus"] == "00000000:00:06.0" and gpu["ecc_volatile_uncorrectable"] == 0
    pending = real.replace(
        "        Pending                                        : No\n        Remapping",
        "        Pending                                        : Yes\n        Remapping",
    )
    assert pending != real
    assert nvidia_smi_q(pending)["problems"] == [
        "GPU 00000000:00:06.0 (NVIDIA H200): rows awaiting a remap (reset the GPU)"
    ]
    ecc = real.replace(
        "            DRAM Uncorrectable                         : 0\n        Aggregate\n",
        "            DRAM Uncorrectable                         : 2\n        Aggregate\n",
    )
    assert ecc != real
    assert nvidia_smi_q(ecc)["problems"] == [
        "GPU 00000000:00:06.0 (NVIDIA H200): 2 uncorrectable ECC errors since boot"
    ]
    assert nvidia_smi_q("dcgmi diag: Pass\n") is None  # not nvidia-smi -q: its exit status
