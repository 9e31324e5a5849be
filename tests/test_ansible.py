"""Playbooks recorded by journal's Ansible callback plugin: real ``ansible-core`` from the
registry against the real sshds of the tests (three hosts on loopback, each with its own venv
made by real uv from the demo's stand-in wheels, pip seeded), and a fourth inventory host that
nothing answers.

The pip module's real no-op is judged ``noop-install``, an install that takes numpy down
``downgrade-cascade``; a failing task and the unreachable host are recorded as such, the play's
``serial`` batches too, the inventory's groups become the journal's, and the chain verifies.
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

from journal.ansible import plugin_dir
from journal.demo.run import find_uv
from journal.demo.wheels import build_indexes
from journal.events import JournalOpened, StepStarted
from journal.store import EventStore
from tests.helpers import journal, text
from tests.sshd import SshHome, SshServer

ADDRESSES = [f"127.0.0.{i}" for i in range(61, 64)]
NAMES = [f"gpu-{i}" for i in range(1, 4)]
NAME = "ansible-fleet"
ANSIBLE_PLAYBOOK = str(Path(sys.executable).with_name("ansible-playbook"))

PLAYBOOK = """
- name: Upgrade torch
  hosts: gpu
  serial: 2
  gather_facts: false
  tasks:
    - name: Install torch from the cu130 index
      ansible.builtin.pip:
        name: torch
        virtualenv: "{{ venvs }}/env-{{ inventory_hostname }}"
        extra_args: "--index-url {{ cu130 }}"
    - name: Install the cu130 nightly
      ansible.builtin.pip:
        name: "torch==2.12.0.dev20260226+cu130"
        virtualenv: "{{ venvs }}/env-{{ inventory_hostname }}"
        extra_args: "--index-url {{ cu130 }}"
      when: inventory_hostname == "gpu-2"
      vars:
        journal_probe: torch-env
    - name: Check the driver
      ansible.builtin.shell: echo checking on {{ inventory_hostname }}; exit 3
      when: inventory_hostname == "gpu-3"
      ignore_errors: true
"""


class Rig:
    def __init__(self, servers: list[SshServer], root: Path) -> None:
        self.servers, self.root = servers, root
        self.home = SshHome(servers)
        self.indexes = build_indexes(root / "indexes")
        uv = find_uv()
        env = {**os.environ, "UV_CACHE_DIR": str(root / "uv-cache"), "UV_NO_CONFIG": "1"}
        env["UV_PYTHON_DOWNLOADS"] = "never"
        self.pythons = {}
        for name in NAMES:
            venv = root / f"env-{name}"
            python = venv / "bin" / "python"
            for cmd in (
                [uv, "venv", "--quiet", "--seed", "--python", sys.executable, str(venv)],
                [uv, "pip", "install", "--quiet", "--python", str(python), "torch", "numpy"]
                + ["--index-url", self.indexes["cu128"].as_uri()],
            ):
                subprocess.run(cmd, env=env, check=True, capture_output=True)
            self.pythons[name] = python
        inventory = "[gpu]\n" + "".join(
            # no journal_python: the env snapshotted is the pip task's virtualenv, its
            # template ("{{ venvs }}/env-{{ inventory_hostname }}") rendered per host
            f"{name} ansible_host={server.alias}\n"
            for name, server in zip(NAMES, servers, strict=True)
        )
        # a host nothing answers (in the play's group and a group of its own)
        inventory += "gpu-9 ansible_host=127.0.0.69 ansible_port=1\n\n[lost]\ngpu-9\n"
        inventory += (
            f"\n[all:vars]\nansible_python_interpreter={sys.executable}\n"
            # Ansible's ssh reads the client HOME's config (the aliases) as journal does
            f"ansible_ssh_common_args='-F {self.home.config_path}'\n"
            f"venvs={root}\ncu130={self.indexes['cu130'].as_uri()}\n"
        )
        self.inventory = root / "inventory.ini"
        self.inventory.write_text(inventory)
        self.playbook = root / "upgrade.yml"
        self.playbook.write_text(PLAYBOOK)

    def env(self, db: Path, **more: str) -> dict[str, str]:
        return {
            **self.home.env(),
            "ANSIBLE_CALLBACK_PLUGINS": str(plugin_dir()),
            "ANSIBLE_CALLBACKS_ENABLED": "journal",
            "ANSIBLE_HOST_KEY_CHECKING": "False",
            "ANSIBLE_LOCAL_TEMP": str(self.root / "ansible-local"),
            "ANSIBLE_TIMEOUT": "5",
            "ANSIBLE_NOCOLOR": "1",
            "JOURNAL_DB": str(db),
            "JOURNAL_NAME": NAME,
            **more,
        }

    def play(self, db: Path, playbook: Path | None = None, **more: str):  # type: ignore[no-untyped-def]
        return subprocess.run(
            [ANSIBLE_PLAYBOOK, "-i", str(self.inventory), str(playbook or self.playbook)],
            env=self.env(db, **more),
            capture_output=True,
            text=True,
            timeout=600,
        )


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(SshServer(a)) for a in ADDRESSES]
        built = Rig(servers, tmp_path_factory.mktemp("ansible-rig"))
        yield built
        built.home.cleanup()


def _started(db: Path) -> list[StepStarted]:
    store = EventStore(str(db))
    try:
        return [r.event for r in store.read(NAME, types=[StepStarted.type])]
    finally:
        store.close()


def test_a_playbook_is_recorded_task_by_task_and_judged(rig: Rig, tmp_path: Path) -> None:
    db = tmp_path / "journal.db"
    done = rig.play(db)
    said = done.stdout + done.stderr
    assert done.returncode == 4, said  # gpu-9 is unreachable: Ansible says so with 4
    assert "journal: recorded" in said and "task runs in ansible-fleet" in said

    runs = {(e.host_name, e.ansible["task"]): e for e in _started(db)}
    noop = runs[("gpu-1", "Install torch from the cu130 index")]
    assert noop.ansible["playbook"] == "upgrade.yml" and noop.ansible["play"] == "Upgrade torch"
    assert noop.ansible["module"] == "ansible.builtin.pip" and noop.ansible["batch"] == 1
    assert runs[("gpu-3", "Install torch from the cu130 index")].ansible["batch"] == 2
    assert "pip" in noop.command and "install" in noop.command

    findings = json.loads(journal("pitfalls", "--all", "--format", "json", db=db).stdout)
    by = {(f["id"], f["host"]) for f in findings["findings"]}
    for host in NAMES:
        assert ("noop-install", host) in by  # pip said "Requirement already satisfied"
    assert ("downgrade-cascade", "gpu-2") in by  # numpy 2.4.2 -> 2.4.1 beside torch
    assert ("downgrade-cascade", "gpu-1") not in by

    log = json.loads(journal("log", "--format", "json", "--limit", "0", db=db).stdout)
    items = {(i["host"], i["ansible"]["task"]): i for i in log["items"] if i.get("ansible")}
    assert items[("gpu-1", "Install torch from the cu130 index")]["status"] == "no change"
    failing = items[("gpu-3", "Check the driver")]
    assert failing["recorded_status"] == "failed" and failing["exit_code"] == 3
    assert failing["ansible"]["ignore_errors"] is True
    skipped = items[("gpu-1", "Install the cu130 nightly")]
    assert skipped["recorded_status"] == "skipped"
    lost = [i for (h, _), i in items.items() if h == "gpu-9"]
    assert lost and all(i["recorded_status"] == "failed" for i in lost)
    assert all(i["ansible"]["unreachable"] for i in lost)
    assert "unreachable" in lost[0]["reason"]
    upgraded = items[("gpu-2", "Install the cu130 nightly")]
    assert upgraded["packages"] and any(
        p["name"] == "numpy" and p["before"] == "2.4.2" and p["after"] == "2.4.1"
        for p in upgraded["packages"]
    )
    assert [p["probe"] for p in upgraded["probes"]] == ["torch-env"]

    # the output as printed, the status, the groups, the chain
    shown = journal("show", upgraded["run"], db=db)
    assert "ansible: upgrade.yml, play 'Upgrade torch', task 'Install the cu130 nightly'" in (
        text(shown.stdout)
    )
    store = EventStore(str(db))
    try:
        opened = [r.event for r in store.read(NAME, types=[JournalOpened.type])][-1]
    finally:
        store.close()
    assert opened.groups["gpu"] == [*NAMES, "gpu-9"] and opened.groups["lost"] == ["gpu-9"]
    drift = journal("drift", "--format", "json", db=db)
    assert {g["name"] for g in json.loads(drift.stdout)["groups"]} >= {"gpu"}
    assert journal("verify", db=db).returncode == 0
    # the postmortem and the web tell the playbook context
    md = tmp_path / "pm.md"
    assert journal("export", "postmortem", "-o", str(md), db=db).returncode in (0, 1)
    assert "[upgrade.yml: Upgrade torch › Install the cu130 nightly]" in md.read_text()
    from journal.web import create_app

    client = create_app({"DB": str(db), "TESTING": True}).test_client()
    page = client.get(f"/j/{NAME}/run/{upgraded['run']}").get_data(as_text=True)
    assert '<span class="tag ansible">ansible</span>' in page
    assert "task <b>Install the cu130 nightly</b>" in page
    status = text(journal("status", db=db).stdout)
    assert "(no plan: the runs are an Ansible playbook's)" in status


def test_a_journal_that_cannot_be_written_never_fails_the_playbook(
    rig: Rig, tmp_path: Path
) -> None:
    quick = tmp_path / "hello.yml"
    quick.write_text(
        "- hosts: gpu:!lost\n  gather_facts: false\n  tasks:\n"
        "    - name: Say hello\n      ansible.builtin.command: echo hello\n"
    )
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the database's folder should be\n")
    done = rig.play(blocked / "journal.db", quick)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "journal: not recording this playbook" in said
    assert "ok=1" in said and "failed=0" in said
