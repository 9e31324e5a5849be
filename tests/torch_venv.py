"""A real CPU torch in a target venv, for probing: built once and kept between test runs.

`pip install torch==2.13.0` takes the CPU wheel that lies on this machine's disk. The venv is
cached outside the repository (`~/.cache/journal-tests/`, or $JOURNAL_TEST_CACHE), never in git.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

TORCH = "2.13.0"


def cache_dir() -> Path:
    root = os.environ.get("JOURNAL_TEST_CACHE") or Path.home() / ".cache" / "journal-tests"
    return Path(root)


def torch_venv() -> Path:
    """The python of a venv holding torch==2.13.0 (CPU), made if missing or broken."""
    folder = cache_dir() / f"torch-{TORCH}-py{sys.version_info[0]}{sys.version_info[1]}"
    python = folder / "bin" / "python"
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        check = [str(python), "-c", f"import torch; assert torch.__version__ == '{TORCH}+cpu'"]
        # the import is checked once, when made (two CPU-seconds a look); then its marker and
        # torch's metadata say the venv is still the one checked
        marker = folder / "journal-tests-ready"
        info = f"lib/python{sys.version_info[0]}.{sys.version_info[1]}/site-packages/"
        info += f"torch-{TORCH}+cpu.dist-info/METADATA"
        if python.exists() and marker.exists() and (folder / info).exists():
            return python
        if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
            marker.touch()
            return python
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(folder)], check=True)
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                f"torch=={TORCH}",
            ],
            check=True,
        )
        subprocess.run(check, check=True)
        marker.touch()
    return python
