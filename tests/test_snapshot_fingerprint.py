"""The packages probe reads no distribution while the env's fingerprint holds, and reads them
all again as soon as an install changed the env (real venv, real uv, a wheel built here)."""

from __future__ import annotations

import json
import os
import subprocess
from importlib import resources
from pathlib import Path
from typing import Any

from journal.demo.wheels import StandIn, build_wheel
from tests.helpers import uv_binary

SCRIPT = resources.files("journal.probes.scripts").joinpath("packages.py").read_text()


def probe(python: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(python), "-c", SCRIPT, *args], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def test_the_fingerprint_holds_until_an_install_changes_the_env(tmp_path: Path) -> None:
    uv = uv_binary()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "VIRTUAL_ENV"))}
    venv = tmp_path / "env"
    subprocess.run([uv, "venv", "--quiet", str(venv)], check=True, env=env)
    python = venv / "bin" / "python"
    first = probe(python)
    assert isinstance(first["packages"], dict) and len(first["fingerprint"]) == 32
    same = probe(python, first["fingerprint"])
    assert same["unchanged"] is True and "packages" not in same
    assert same["fingerprint"] == first["fingerprint"]
    tabulate = StandIn("tabulate", "0.9.0", files={"tabulate.py": "VERSION = '0.9.0'\n"})
    wheel = tmp_path / "tabulate-0.9.0-py3-none-any.whl"
    wheel.write_bytes(build_wheel(tabulate))
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", str(python), str(wheel)], check=True, env=env
    )
    after = probe(python, first["fingerprint"])
    assert "unchanged" not in after and after["fingerprint"] != first["fingerprint"]
    assert after["packages"]["tabulate"]["version"] == "0.9.0"
    # a reinstall at the same version rewrites the metadata folder: not the same env either
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--reinstall", "--python", str(python), str(wheel)],
        check=True,
        env=env,
    )
    assert "packages" in probe(python, after["fingerprint"])
