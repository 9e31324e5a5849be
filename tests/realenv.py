"""Real ML envs from the registries, for the tests that judge what real installers did.

A wheelhouse is built once (``pip download`` of :data:`REQUIREMENTS` and everything they need,
from PyPI and the CPU torch wheel that lies on this machine's disk, which the machine-wide pip
config reaches) and kept between test runs in the test cache (``~/.cache/journal-tests/`` or
$JOURNAL_TEST_CACHE), under a file lock, keyed by a hash of the requirement list and the
interpreter. A wheelhouse whose marker or wheels are missing is built again.

Beside it lies a base venv made from it by ``uv pip install --no-index`` with its bytecode
compiled (a first ``import torch`` compiles some 1,100 modules otherwise: seconds on every
fresh venv, and a rollback's torch-env probe imports torch). Each test gets its own venv: a
copy of the base whose files are hard links (``cp -al``, 1 to 1.5 s for its 28,665 files; a
full copy where the cache is on another file system). Installers never write into an
installed file: they remove it and write a new one, so a test that changes its venv leaves
the base and the other copies as they were. The base is made ``--relocatable``: its scripts
and activation find the copy they are in.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import parse_wheel_filename

from tests.helpers import uv_binary
from tests.torch_venv import cache_dir

#: What a real ML host holds: the CPU torch wheel on this machine's disk, numpy 2 under scipy
#: and pillow, and packages whose names hold words of secrets (`tiktoken` and `google-auth`
#: end like a secret's key; the others hold `token`, `secret`, `key`, `pass`, `jose`).
REQUIREMENTS = (
    "torch==2.13.0+cpu",
    "numpy==2.2.6",
    "scipy==1.15.3",
    "pillow==11.3.0",
    "tiktoken==0.14.0",
    "tokenizers==0.23.3",
    "google-auth==2.63.0",
    "secretstorage==3.5.0",
    "keyring==25.7.0",
    "python-jose==3.5.0",
    "passlib==1.7.4",
    "tokenize-rt==6.2.0",
    "pykeepass==4.2.0",
    # pip itself, so that `python -m pip` works in the env as on a host
    "pip==26.3",
)
#: Imported once after the build, so that a wheelhouse that installs but cannot run is no cache.
IMPORTS = "import numpy, scipy.linalg, PIL.Image, torch, tiktoken, tokenizers, jose, keyring"
MARKER = "ready.json"


def uv_cache() -> Path:
    """uv's cache for these tests (kept between runs): the venvs' files are linked from it."""
    return cache_dir() / "uv-cache"


def pip_cache() -> Path:
    """pip's cache for these tests (kept between runs)."""
    return cache_dir() / "pip-cache"


def tool_env(**extra: str) -> dict[str, str]:
    """This process's environment for running uv and pip: their caches under the test cache,
    no user config of uv, no interpreter downloads, no outer venv; the machine's pip config
    (its local indexes) stays."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env = {k: v for k, v in env.items() if not k.startswith("UV_")}
    env.update(
        UV_CACHE_DIR=str(uv_cache()),
        UV_NO_CONFIG="1",
        UV_PYTHON_DOWNLOADS="never",
        PIP_CACHE_DIR=str(pip_cache()),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PIP_NO_INPUT="1",
        **extra,
    )
    return env


@dataclass(frozen=True)
class Wheelhouse:
    """Every wheel of a requirement set, flat, the exact pins they make, and (unless made
    without) a base venv holding exactly them."""

    folder: Path
    pins: tuple[str, ...]

    @property
    def wheels(self) -> Path:
        return self.folder / "wheels"

    @property
    def base(self) -> Path:
        return self.folder / "base"

    def venv(self, dest: Path) -> Path:
        """A venv of its own at ``dest``, holding what the base holds; its python."""
        linked = subprocess.run(["cp", "-al", str(self.base), str(dest)], capture_output=True)
        if linked.returncode != 0:  # another file system: copy
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(self.base, dest, symlinks=True)
        return dest / "bin" / "python"


def _run(cmd: list[str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, env=tool_env(), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{cmd} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _key(requirements: tuple[str, ...], venv: bool) -> str:
    made = json.dumps([sys.base_prefix, sys.implementation.cache_tag, list(requirements), venv])
    return hashlib.sha256(made.encode()).hexdigest()[:16]


def _ready(folder: Path, venv: bool) -> tuple[str, ...] | None:
    """The pins of a complete wheelhouse at ``folder``, or None (missing, cut short, broken:
    a wheel gone or changed, the base venv gone or no longer running)."""
    try:
        marker = json.loads((folder / MARKER).read_text())
        wheels, pins = marker["wheels"], tuple(marker["pins"])
        if any((folder / "wheels" / n).stat().st_size != size for n, size in wheels.items()):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if venv:
        python = folder / "base" / "bin" / "python"
        check = [str(python), "-c", "import numpy"]
        if not python.exists() or subprocess.run(check, capture_output=True).returncode != 0:
            return None
    return pins


def _build(folder: Path, requirements: tuple[str, ...], venv: bool) -> tuple[str, ...]:
    """Download the set into ``folder`` (made anew), make the base venv and check that it
    imports, and write the marker last."""
    shutil.rmtree(folder, ignore_errors=True)
    wheels = folder / "wheels"
    wheels.mkdir(parents=True)
    # PyPI and the machine's torch wheel are what CI reaches: a set that cannot be had fails.
    _run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary", ":all:"]
        + ["--dest", str(wheels), *requirements]
    )
    files = sorted(p for p in wheels.iterdir() if p.name.endswith(".whl"))
    pins = []
    for path in files:
        name, version, _, _ = parse_wheel_filename(path.name)
        pins.append(f"{name}=={version}")
    if venv:
        uv, base = uv_binary(), folder / "base"
        _run([uv, "venv", "--quiet", "--relocatable", "--python", sys.executable, str(base)])
        _run(
            [uv, "pip", "install", "--quiet", "--compile-bytecode", "--no-index"]
            + ["--python", str(base / "bin" / "python"), "--find-links", str(wheels), *pins]
        )
        _run([str(base / "bin" / "python"), "-c", IMPORTS])
    marker = {"requirements": list(requirements), "pins": pins}
    marker["wheels"] = {p.name: p.stat().st_size for p in files}
    (folder / MARKER).write_text(json.dumps(marker, indent=1))
    return tuple(pins)


def wheelhouse(requirements: tuple[str, ...] = REQUIREMENTS, venv: bool = True) -> Wheelhouse:
    """The wheelhouse of ``requirements`` (with a base venv unless not ``venv``), built if
    missing or broken (one builder at a time: other test processes wait on the lock, then
    find it made)."""
    folder = cache_dir() / f"realenv-{_key(requirements, venv)}"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".realenv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pins = _ready(folder, venv) or _build(folder, requirements, venv)
    return Wheelhouse(folder, pins)


def pip_list(python: Path) -> dict[str, str]:
    """``python -m pip list --format json`` of a venv: each distribution's name as pip shows
    it (its metadata's Name) and version."""
    done = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json"],
        env=tool_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return {p["name"]: p["version"] for p in json.loads(done.stdout)}


def installed(python: Path) -> dict[str, str]:
    """What a venv holds, read by its own python (for a venv that may have lost its pip):
    normalised name -> version."""
    script = (
        "import json, re, importlib.metadata as m; print(json.dumps({re.sub(r'[-_.]+', '-', "
        "d.metadata['Name']).lower(): d.version for d in m.distributions()}))"
    )
    done = subprocess.run([str(python), "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
