"""Bad input that once slipped through: each a one-paragraph message, exit 2, nothing
recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import journal, no_traceback, text, write_runbook

HEAD = '[journal]\nname = "bad"\n\n[hosts.here]\nssh = "local"\n\n'


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_timeout_must_be_a_finite_number_of_seconds(tmp_path: Path, value: str) -> None:
    rb = write_runbook(tmp_path, HEAD + f'[[steps]]\nname = "s"\nrun = "true"\ntimeout = {value}\n')
    db = tmp_path / "journal.db"
    done = journal("run", "step", "s", db=db, runbook=rb)
    assert done.returncode == 2 and no_traceback(done)
    assert "steps[0].timeout" in text(done.stderr) or "timeout" in text(done.stderr)
    assert not db.exists()  # nothing recorded


def test_a_name_ending_in_a_newline_is_refused(tmp_path: Path) -> None:
    rb = write_runbook(tmp_path, HEAD + '[[steps]]\nname = "s\\n"\nrun = "true"\n')
    done = journal("run", "step", "s", db=tmp_path / "journal.db", runbook=rb)
    assert done.returncode == 2 and no_traceback(done)
    assert "is not a usable name" in text(done.stderr)
