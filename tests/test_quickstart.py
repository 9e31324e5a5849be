"""The README's quick start, pasted line by line into bash as a newcomer would (journal
installed already; `journal serve`, which runs until Ctrl-C, left out), then its second part
on a real sshd host: only the edits it tells you to make, and it runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.sshd import SshHome, SshServer

ROOT = Path(__file__).resolve().parents[1]


def quick_start() -> tuple[list[str], str]:
    """The quick start's shell lines and its runbook snippet, as the README has them."""
    text = (ROOT / "README.md").read_text()
    start = text.index("## Quick start")
    part = text[start : text.index("\n## ", start + 1)]
    blocks = re.findall(r"```(\w+)\n(.*?)```", part, re.S)
    shell = next(body for kind, body in blocks if kind == "sh")
    toml = next(body for kind, body in blocks if kind == "toml")
    return shell.splitlines(), toml


def paste(lines: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``lines`` typed into one bash, stopping at the first that fails."""
    script = "set -e\n" + "".join(f"{line}\n" for line in lines)
    return subprocess.run(
        ["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_quick_start_runs_here_then_on_a_real_ssh_host(
    tmp_path: Path, sshd: SshServer, ssh_home: SshHome
) -> None:
    lines, snippet = quick_start()
    install, *rest = lines
    assert install.startswith("make install")  # journal is installed: the tests run it
    typed = [line for line in rest if not line.startswith("journal serve")]
    assert len(typed) == len(rest) - 1
    env = {
        **ssh_home.env(),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    env.pop("JOURNAL_DB", None)
    env.pop("JOURNAL_RUNBOOK", None)
    here = paste(typed, tmp_path, env)
    assert here.returncode == 0, here.stdout[-2000:] + here.stderr[-2000:]
    folder = tmp_path / "upgrade"
    assert (folder / "postmortem.md").is_file()
    # every line went through (set -e): the plan, the probe, the note, verify, the export
    assert "first try" in (folder / "postmortem.md").read_text()

    # on a "GPU host": the [hosts.this-machine] table replaced with the README's, naming the
    # sshd and the env's python, and backup-env's python3 with that python, as it says
    book = folder / "runbook.toml"
    text = book.read_text()
    table = re.search(r"^\[hosts\.this-machine\]\n(?:[^\[\n].*\n|\n)*", text, re.M)
    assert table is not None
    host = re.search(r"^\[hosts\.gpu-1\]\n(?:\w.*\n)+", snippet, re.M)
    assert host is not None
    mine = re.sub(r'ssh = "[^"]*"', f'ssh = "{sshd.alias}"', host.group(0))
    mine = re.sub(r'python = "[^"]*"', f'python = "{sys.executable}"', mine)
    text = text.replace(table.group(0), mine + "\n")
    text = text.replace("python3 -m pip freeze", f"{sys.executable} -m pip freeze")
    book.write_text(text)
    there = paste(["journal run plan"], folder, env)
    assert there.returncode == 0, there.stdout[-2000:] + there.stderr[-2000:]
    said = there.stdout + there.stderr
    assert "show-python on gpu-1 succeeded" in said
    assert "this-machine" not in said  # the host replaced, not added to
    status = paste(["journal status"], folder, env).stdout
    assert re.search(r"host gpu-1 \(sshd-[\d-]+\): 2/2 steps done", status), status
