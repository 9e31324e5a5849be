"""What recording a playbook costs: 32 hosts × 10 tasks over 32 real sshds, without a
callback, with journal's, and with ARA's.

Each host is a real sshd on its own loopback address (127.0.2.1 …); the playbook's tasks are
`command` tasks that print a few lines (the shape of checks and service steps; no task changes
packages, so journal takes no snapshot and both callbacks record the same runs). Ansible runs
with 32 forks and ControlPersist. The script prints the wall time of `ansible-playbook` in
each case (the best of ``--repeat`` runs), its ratio to the run without a callback, and the
peak RSS of the `ansible-playbook` process tree (where a callback lives).

ARA (``pip install ara[server]``, its default local SQLite under a temporary ``ARA_BASE_DIR``)
is installed with the same ansible-core into a venv of its own under ``.bench-cache/ara``
(from the package registry, once); ``--no-ara`` leaves it out.

Run: ``.venv/bin/python bench/ansible.py [--hosts 32] [--tasks 10] [--repeat 2]`` (a few
minutes; the first run also installs ARA).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from journal.ansible import plugin_dir  # noqa: E402
from tests.sshd import SshHome, SshServer  # noqa: E402

ARA_VENV = ROOT / ".bench-cache" / "ara"
TASK = (
    "    - name: Check step {n}\n"
    "      ansible.builtin.command: printf 'check {n} on %s\\nline two\\nline three\\n' "
    "{{{{ inventory_hostname }}}}\n"
)


def ara_python() -> Path:
    """A venv with ansible-core (the version journal's venv has) and ARA, made once."""
    python = ARA_VENV / "bin" / "python"
    if not (ARA_VENV / "bin" / "ara-manage").exists():
        from importlib.metadata import version

        subprocess.run([sys.executable, "-m", "venv", str(ARA_VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet",
             f"ansible-core=={version('ansible-core')}", "ara[server]"],
            check=True,
        )  # fmt: skip
    return python


def files(folder: Path, servers: list[SshServer], home: SshHome, tasks: int) -> None:
    inventory = "[fleet]\n" + "".join(
        f"h{i:02d} ansible_host={s.alias}\n" for i, s in enumerate(servers, 1)
    )
    inventory += (
        f"\n[fleet:vars]\nansible_python_interpreter={sys.executable}\n"
        f"ansible_ssh_common_args='-F {home.config_path}'\n"
    )
    (folder / "inventory.ini").write_text(inventory)
    body = "".join(TASK.format(n=n) for n in range(1, tasks + 1))
    (folder / "play.yml").write_text(
        f"- name: Checks\n  hosts: fleet\n  gather_facts: false\n  tasks:\n{body}"
    )


def play(folder: Path, env: dict[str, str], playbook_bin: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB, the process tree) of one `ansible-playbook` run."""
    cmd = [playbook_bin, "-f", "32", "-i", str(folder / "inventory.ini"), str(folder / "play.yml")]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        took = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        said = out.read().decode("utf-8", "replace")
    if code:
        raise SystemExit(f"{' '.join(cmd)} failed ({code}):\n{said[-3000:]}")
    return took, usage.ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=32)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--no-ara", action="store_true")
    args = parser.parse_args()
    here = Path(sys.executable).parent
    cases: list[tuple[str, str, dict[str, str]]] = []
    folder = Path(tempfile.mkdtemp(prefix="journal-bench-ansible-"))
    print(f"{args.hosts} hosts × {args.tasks} tasks, {os.cpu_count()} CPUs here")
    try:
        with contextlib.ExitStack() as stack:
            servers = [
                stack.enter_context(SshServer(f"127.0.2.{1 + i}")) for i in range(args.hosts)
            ]
            home = SshHome(servers)
            stack.callback(home.cleanup)
            files(folder, servers, home, args.tasks)
            base = {
                **home.env(),
                "ANSIBLE_HOST_KEY_CHECKING": "False",
                "ANSIBLE_LOCAL_TEMP": str(folder / "ansible-local"),
                "ANSIBLE_NOCOLOR": "1",
            }
            playbook = str(here / "ansible-playbook")
            cases.append(("no callback", playbook, base))
            cases.append(
                (
                    "journal",
                    playbook,
                    {
                        **base,
                        "ANSIBLE_CALLBACK_PLUGINS": str(plugin_dir()),
                        "ANSIBLE_CALLBACKS_ENABLED": "journal",
                        "JOURNAL_DB": str(folder / "journal.db"),
                        "JOURNAL_NAME": "bench",
                    },
                )
            )
            if not args.no_ara:
                ara = ara_python()
                plugins = subprocess.run(
                    [str(ara), "-m", "ara.setup.callback_plugins"],
                    capture_output=True, text=True, check=True,
                ).stdout.strip()  # fmt: skip
                cases.append(
                    (
                        "ARA",
                        str(ara.parent / "ansible-playbook"),
                        {
                            **base,
                            "ANSIBLE_CALLBACK_PLUGINS": plugins,
                            "ANSIBLE_CALLBACKS_ENABLED": "ara_default",
                            "ARA_API_CLIENT": "offline",
                            "ARA_BASE_DIR": str(folder / "ara"),
                        },
                    )
                )
            play(folder, base, playbook)  # ControlPersist sockets and caches, not timed
            results = {}
            for _ in range(args.repeat):
                for name, binary, env in cases:
                    took, rss = play(folder, env, binary)
                    best = results.get(name, (float("inf"), 0.0))
                    results[name] = (min(best[0], took), max(best[1], rss))
            bare = results["no callback"][0]
            print(f"{'':>14}{'wall (best)':>13}{'ratio':>8}{'peak RSS':>11}")
            for name, (took, rss) in results.items():
                print(f"{name:>14}{took:>12.1f}s{took / bare:>7.2f}×{rss:>8.0f} MB")
            runs = subprocess.run(
                [sys.executable, "-m", "journal", "--db", str(folder / "journal.db"),
                 "status", "--format", "json"],
                capture_output=True, text=True,
            )  # fmt: skip
            print(f"journal's record: {'ok' if runs.returncode in (0, 1) else runs.stderr}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
