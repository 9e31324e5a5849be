"""Checks that the demo's stand-in wheels and indexes are valid and that real uv installs them."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import sys
import time
import zipfile
from pathlib import Path

import pytest

from journal.demo.wheels import build_indexes
from tests.helpers import run_checked, uv_binary


def _installed(python: Path, env: dict[str, str]) -> dict[str, str]:
    """Distribution name -> version installed in the environment of ``python``."""
    out = run_checked(
        [uv_binary(), "pip", "list", "--python", str(python), "--format", "freeze"], env
    ).stdout
    pairs = (line.split("==", 1) for line in out.splitlines() if "==" in line)
    return {name.lower(): version for name, version in pairs}


@pytest.fixture()
def uv_env(tmp_path: Path) -> dict[str, str]:
    """Environment for uv runs: a private cache and no user or system configuration."""
    env = dict(os.environ)
    env.update(
        UV_CACHE_DIR=str(tmp_path / "uv-cache"), UV_NO_CONFIG="1", UV_PYTHON_DOWNLOADS="never"
    )
    for key in (
        "UV_INDEX_URL",
        "UV_EXTRA_INDEX_URL",
        "UV_INDEX",
        "UV_DEFAULT_INDEX",
        "UV_FIND_LINKS",
        "VIRTUAL_ENV",
    ):
        env.pop(key, None)
    return env


def test_build_is_idempotent(tmp_path: Path) -> None:
    """Building twice gives the same paths and leaves existing files untouched (how long it
    takes is bench/'s to say, not a test's)."""
    first = build_indexes(tmp_path)
    assert set(first) == {"cu128", "cu130"}
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in files}
    time.sleep(0.01)
    second = build_indexes(tmp_path)
    assert second == first
    after = {
        p: (p.stat().st_mtime_ns, p.read_bytes())
        for p in sorted(tmp_path.rglob("*"))
        if p.is_file()
    }
    assert after == before


def test_wheels_are_well_formed(tmp_path: Path) -> None:
    """Every linked wheel exists, matches its #sha256 fragment, and its RECORD is right."""
    indexes = build_indexes(tmp_path)
    assert (indexes["cu128"] / "torch" / "torch-2.10.0+cu128-py3-none-any.whl").is_file()
    assert (indexes["cu130"] / "nvidia-nccl-cu13" / "index.html").is_file()
    wheels = 0
    for simple in indexes.values():
        for page in simple.glob("*/index.html"):
            for href in re.findall(r'href="([^"]+)"', page.read_text()):
                name, _, fragment = href.partition("#sha256=")
                wheel = page.parent / name
                data = wheel.read_bytes()
                assert hashlib.sha256(data).hexdigest() == fragment
                with zipfile.ZipFile(wheel) as archive:
                    records = [n for n in archive.namelist() if n.endswith(".dist-info/RECORD")]
                    assert len(records) == 1
                    wheel_meta = archive.read(records[0].replace("RECORD", "WHEEL")).decode()
                    assert (
                        "Tag: py3-none-any" in wheel_meta and "Root-Is-Purelib: true" in wheel_meta
                    )
                    listed = set()
                    for line in archive.read(records[0]).decode().splitlines():
                        path, digest, size = line.rsplit(",", 2)
                        listed.add(path)
                        if path == records[0]:
                            assert digest == size == ""
                            continue
                        content = archive.read(path)
                        expected = base64.urlsafe_b64encode(
                            hashlib.sha256(content).digest()
                        ).rstrip(b"=")
                        assert digest == "sha256=" + expected.decode()
                        assert int(size) == len(content)
                    assert listed == set(archive.namelist())
                wheels += 1
    assert wheels == 11


def test_real_uv_upgrade_story(tmp_path: Path, uv_env: dict[str, str]) -> None:
    """The upgrade the demo re-enacts: install cu128, no-op install of cu130, then --reinstall."""
    uv = uv_binary()
    indexes = build_indexes(tmp_path / "indexes")
    env_dir = tmp_path / "env"
    run_checked([uv, "venv", "--python", sys.executable, str(env_dir)], uv_env)
    python = env_dir / "bin" / "python"
    old = indexes["cu128"].as_uri()
    new = indexes["cu130"].as_uri()

    run_checked(
        [
            uv,
            "pip",
            "install",
            "--python",
            str(python),
            "torch",
            "torchvision",
            "torchaudio",
            "numpy",
            "pillow",
            "--index-url",
            old,
        ],
        uv_env,
    )
    installed = _installed(python, uv_env)
    assert installed["torch"] == "2.10.0+cu128"
    assert installed["numpy"] == "2.4.2"
    probe = run_checked(
        [
            str(python),
            "-c",
            "import torch; print(torch.__version__, torch.version.cuda, "
            "torch.cuda.nccl.version(), torch.cuda.is_available(), torch.cuda.device_count(), "
            "torch.JOURNAL_STAND_IN)",
        ],
        uv_env,
    )
    assert probe.stdout.strip() == "2.10.0+cu128 12.8 (2, 22, 3) False 0 True"

    same = run_checked(
        [
            uv,
            "pip",
            "install",
            "--python",
            str(python),
            "torch",
            "torchvision",
            "torchaudio",
            "--index-url",
            new,
        ],
        uv_env,
    )
    print("step 2 stderr:\n" + same.stderr)
    assert re.search(r"(Checked|Audited) 3 packages", same.stderr)
    assert _installed(python, uv_env) == installed

    upgrade = run_checked(
        [
            uv,
            "pip",
            "install",
            "--python",
            str(python),
            "torch",
            "torchvision",
            "torchaudio",
            "--index-url",
            new,
            "--reinstall",
        ],
        uv_env,
    )
    print("step 3 stderr:\n" + upgrade.stderr)
    installed = _installed(python, uv_env)
    assert installed["torch"] == "2.12.0.dev20260226+cu130"
    assert installed["torchvision"] == "0.27.0.dev20260226+cu130"
    assert installed["torchaudio"] == "2.11.0.dev20260226+cu130"
    assert installed["numpy"] == "2.4.1"
    assert installed["pillow"] == "12.1.0"
    assert installed["nvidia-nccl-cu13"] == "2.28.9"
    probe = run_checked(
        [
            str(python),
            "-c",
            "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.nccl.version())",
        ],
        uv_env,
    )
    assert probe.stdout.strip() == "2.12.0.dev20260226+cu130 13.0 (2, 28, 9)"
    others = run_checked(
        [
            str(python),
            "-c",
            "import numpy, PIL, torchvision, torchaudio, nvidia.nccl as n; "
            "print(all(m.JOURNAL_STAND_IN for m in (numpy, PIL, torchvision, torchaudio, n)), "
            "numpy.__version__, PIL.__version__, n.__version__)",
        ],
        uv_env,
    )
    assert others.stdout.strip() == "True 2.4.1 12.1.0 2.28.9"
