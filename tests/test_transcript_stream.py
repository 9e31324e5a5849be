"""A long pasted session is read a line at a time: `journal lint` and `journal import
transcript` see a command's first and last megabytes (the evidence at its true line), and the
import records every byte of it as chunks of a recorded step's size."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

from journal.reading.window import HEAD_BYTES, TAIL_BYTES
from journal.recorder import MAX_CHUNK
from tests.helpers import JOURNAL, journal, no_traceback, text, write_runbook

RUNBOOK = """[journal]
name = "pasted"

[hosts.gpu-box]
ssh = "local"
"""
ERROR = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
#: lines of build output between the prompt and the error: more than the head and tail kept
FILLER = (HEAD_BYTES + TAIL_BYTES) // 40 + 50_000


def _session(tmp_path: Path) -> tuple[Path, list[str], int]:
    """A session: a long build whose last line but one is the error, then torch's version."""
    out = [f"[{i:07d}/{FILLER}] Building CUDA object csrc/kernel_{i}.cu.o" for i in range(FILLER)]
    out += [ERROR, "ninja: build stopped: subcommand failed."]
    path = tmp_path / "session.txt"
    lines = ["ana@gpu-box:~$ python setup.py develop", *out, "", ""]
    lines += ["ana@gpu-box:~$ python -c 'import torch; print(torch.__version__)'", "2.9.0+cu128"]
    path.write_text("\n".join(lines) + "\n")
    return path, out, 2 + FILLER  # the error's line: after the prompt and the filler


def test_a_long_session_is_judged_at_its_true_lines_and_imported_whole(tmp_path: Path) -> None:
    path, output, error_line = _session(tmp_path)
    assert path.stat().st_size > HEAD_BYTES + TAIL_BYTES
    linted = journal("lint", str(path), "--format", "json")
    assert linted.returncode == 1, text(linted.stderr)
    (found,) = [f for f in json.loads(linted.stdout)["findings"] if f["id"] == "no-kernel-image"]
    assert found["evidence"] == [{"line": error_line, "text": ERROR}]
    assert found["step"] == "python-setup.py" and found["host"] == "gpu-box"
    # the same session on standard input (spooled: it is read twice)
    piped = subprocess.run(
        [*JOURNAL, "lint", "-", "--format", "json"], input=path.read_bytes(), capture_output=True
    )
    assert json.loads(piped.stdout)["findings"] == [
        dict(f, file="<stdin>") for f in json.loads(linted.stdout)["findings"]
    ]

    db, runbook = tmp_path / "journal.db", write_runbook(tmp_path, RUNBOOK)
    imported = journal(
        "import", "transcript", str(path), "--host", "gpu-box", db=db, runbook=runbook
    )
    assert imported.returncode == 0, text(imported.stderr)
    assert "imported 2 commands" in text(imported.stdout)
    with sqlite3.connect(db) as conn:
        sizes = [n for (n,) in conn.execute("select length(payload) from events")]
    assert max(sizes) < 2 * MAX_CHUNK < sum(sizes) / 20  # no event holds the whole output
    with sqlite3.connect(db) as conn:
        (run,) = conn.execute("select run_id from events where type = 'StepStarted' limit 1")
    shown = journal("show", run[0], "--output", db=db)
    assert "\n".join(output) in text(shown.stdout)  # every line, byte for byte, in order
    pitfalls = json.loads(journal("pitfalls", "--format", "json", db=db).stdout)["findings"]
    (kernel,) = [f for f in pitfalls if f["id"] == "no-kernel-image"]
    assert [e["line"] for e in kernel["evidence"]] == [error_line - 1]  # of the run's output
    assert [e["text"] for e in kernel["evidence"]] == [ERROR]


def test_a_transcript_that_cannot_be_read_is_refused_and_nothing_is_recorded(
    tmp_path: Path,
) -> None:
    db, runbook = tmp_path / "journal.db", write_runbook(tmp_path, RUNBOOK)
    (tmp_path / "sub").mkdir()
    (tmp_path / "prose.txt").write_text("no prompt here\njust words\n")
    cases = [
        (tmp_path / "missing.txt", "no such transcript file"),
        (runbook.parent / "sub", "is a folder, not a transcript file"),
        (tmp_path / "missing", "no such transcript file"),
        (tmp_path / "prose.txt", "no commands found"),
    ]
    for path, said in cases:
        result = journal(
            "import", "transcript", str(path), "--host", "gpu-box", db=db, runbook=runbook
        )
        err = text(result.stderr)
        assert result.returncode == 2 and said in err and no_traceback(result), err
        assert err.count("\n") == 1
    if db.exists():
        with sqlite3.connect(db) as conn:
            assert conn.execute("select count(*) from events").fetchone() == (0,)
