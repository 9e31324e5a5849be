"""The suite's own scheduling (tests/grouping.py): tests sharing a module-scoped fixture run on
one xdist worker, so that the fixture is made once. pytest 9.2 with pytest-xdist 3.8 silently
stopped grouping (pytest-dev/pytest-xdist#1386): minutes more of a suite, every test green."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent

CONFTEST = """
import pytest
from tests.grouping import group_by_module_fixtures

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    group_by_module_fixtures(config, items)
"""

MODULE = """
import os
import pytest

@pytest.fixture(scope="module")
def made():
    return os.environ["PYTEST_XDIST_WORKER"]

@pytest.mark.parametrize("i", range(4))
def test_shares_the_module_fixture(made, i):
    assert made == os.environ["PYTEST_XDIST_WORKER"]

@pytest.mark.parametrize("i", range(4))
def test_alone(i):
    pass
"""


def test_tests_sharing_a_module_fixture_run_on_one_worker_and_the_rest_spread(
    tmp_path: Path,
) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for name in ("test_one.py", "test_two.py"):
        (tmp_path / name).write_text(MODULE)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "xdist", "-p", "no:cacheprovider", "-n", "2"]
        + ["--dist", "loadgroup", "-v", "--rootdir", str(tmp_path), str(tmp_path)]
        # its own temporary folder: pytest's default one would remove this suite's older ones
        + ["--basetemp", str(tmp_path / "inner")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    shared: dict[str, set[str]] = {}
    alone: list[str] = []
    for line in done.stdout.splitlines():
        if " PASSED " in line:
            worker, test = line.split()[0], line.split(" PASSED ")[1]
            if "test_shares" in test:
                shared.setdefault(test.split("::")[0], set()).add(worker)
            else:
                alone.append(test)
    assert set(shared) == {"test_one.py", "test_two.py"}, done.stdout[-3000:]
    assert all(len(w) == 1 for w in shared.values()), shared
    # the others carry no group (which worker takes them is the scheduler's: under load one
    # worker may take them all, and a test of where they ran failed CI once)
    assert len(alone) == 8 and not any("@" in test for test in alone), alone
