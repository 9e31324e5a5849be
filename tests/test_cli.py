"""The `journal` command line end to end, on the `local` host: real processes, a real database."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

from journal.runbook import load
from tests.helpers import journal, no_traceback, text, write_runbook


def _env() -> dict[str, str]:
    """The user's environment without journal's own variables, so only the flags decide."""
    env = dict(os.environ)
    for name in ("JOURNAL_DB", "JOURNAL_RUNBOOK"):
        env.pop(name, None)
    return env


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """`journal ARGS` run in ``folder`` with its runbook.toml and journal.db."""
    result = journal(
        *args, db=folder / "journal.db", runbook=folder / "runbook.toml", env=_env(), cwd=folder
    )
    assert no_traceback(result), text(result.stderr)
    return result


def _events(db: Path) -> list[tuple[str, dict]]:
    """(type, payload) of every stored event, read straight from the SQLite file."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT type, payload FROM events ORDER BY seq").fetchall()
    conn.close()
    return [(kind, json.loads(payload)) for kind, payload in rows]


def _status_of(status_output: str, step: str) -> str:
    """The state `journal status` shows for ``step`` (on the only host)."""
    for line in status_output.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0].rstrip(".").isdigit() and words[1] == step:
            return words[-1]
    raise AssertionError(f"no line for {step} in:\n{status_output}")


# --- init -----------------------------------------------------------------------------------


def test_init_writes_a_runbook_and_the_database_and_never_overwrites(tmp_path: Path) -> None:
    result = journal("init", "upgrade", env=_env(), cwd=tmp_path)
    assert result.returncode == 0, text(result.stderr)
    folder = tmp_path / "upgrade"
    runbook = load(folder / "runbook.toml")
    assert runbook.name == "upgrade"
    assert runbook.plan and all(h.is_local for h in runbook.hosts.values())
    assert (folder / "journal.db").is_file()
    assert _events(folder / "journal.db") == []  # the journal opens with the first record
    assert not (tmp_path / "journal.db").exists()

    (folder / "runbook.toml").write_text((folder / "runbook.toml").read_text() + "# my own edits\n")
    before = (folder / "runbook.toml").read_bytes()
    again = journal("init", "upgrade", env=_env(), cwd=tmp_path)
    assert again.returncode == 2
    assert no_traceback(again)
    assert "already exists" in text(again.stderr)
    assert "upgrade/runbook.toml" in text(again.stderr)
    assert (folder / "runbook.toml").read_bytes() == before
    assert _events(folder / "journal.db") == []


def test_a_journal_renamed_before_its_first_record_leaves_no_empty_one(tmp_path: Path) -> None:
    """`journal init` in `work` names the journal `work`; renamed in the runbook before
    anything is recorded, only the new name is ever in the database."""
    assert journal("init", "work", env=_env(), cwd=tmp_path).returncode == 0
    folder = tmp_path / "work"
    book = folder / "runbook.toml"
    book.write_text(book.read_text().replace('name = "work"', 'name = "cu130-upgrade"', 1))
    noted = journal("note", "first try", env=_env(), cwd=folder)
    assert noted.returncode == 0, text(noted.stderr)
    kinds = [kind for kind, _ in _events(folder / "journal.db")]
    assert kinds == ["JournalOpened", "NoteAdded"]  # opened by the first record
    listed = journal("log", "--journal", "work", env=_env(), cwd=folder)
    assert listed.returncode == 2 and "cu130-upgrade" in text(listed.stderr)


def test_init_names_the_journal_after_the_folder_and_refuses_a_file(tmp_path: Path) -> None:
    result = journal("init", "My Upgrade 2", env=_env(), cwd=tmp_path)
    assert result.returncode == 0, text(result.stderr)
    assert load(tmp_path / "My Upgrade 2" / "runbook.toml").name == "My-Upgrade-2"

    (tmp_path / "a-file").write_text("x")
    refused = journal("init", "a-file", env=_env(), cwd=tmp_path)
    assert refused.returncode == 2
    assert no_traceback(refused) and "a-file" in text(refused.stderr)
    assert (tmp_path / "a-file").read_text() == "x"


# --- a failing step, the plan, resuming ----------------------------------------------------

PLAN = """\
[journal]
name = "cli-test"

[hosts.here]
ssh = "local"

[[steps]]
name = "first"
run = "touch first.marker"

[[steps]]
name = "flaky"
run = "{flaky}"

[[steps]]
name = "last"
run = "touch last.marker"
"""
FAILING = "echo to-stdout; echo to-stderr >&2; exit 3"


def _markers(folder: Path) -> set[str]:
    found = {p.stem for p in folder.glob("*.marker")}
    for path in folder.glob("*.marker"):
        path.unlink()
    return found


def test_failing_step_then_plan_stops_resumes_and_is_done(tmp_path: Path) -> None:
    write_runbook(tmp_path, PLAN.replace("{flaky}", FAILING))

    # One failing step: its own exit status, both streams echoed apart.
    step = cli(tmp_path, "run", "step", "flaky")
    assert step.returncode == 3, text(step.stderr)
    assert b"to-stdout" in step.stdout and b"to-stdout" not in step.stderr
    assert b"to-stderr" in step.stderr and b"to-stderr" not in step.stdout
    assert "flaky" in text(step.stderr) and "exit 3" in text(step.stderr)

    log = cli(tmp_path, "log", "--output")
    assert log.returncode == 0
    assert b"to-stdout\n" in log.stdout and b"to-stderr\n" in log.stdout
    assert "flaky on here: failed exit 3" in text(log.stdout)
    chunks = [p for kind, p in _events(tmp_path / "journal.db") if kind == "OutputChunk"]
    assert {c["stream"]: c["data"] for c in chunks} == {
        "stdout": "to-stdout\n",
        "stderr": "to-stderr\n",
    }

    status = text(cli(tmp_path, "status").stdout)
    assert _status_of(status, "flaky") == "failed"
    assert _status_of(status, "first") == "pending"
    assert _status_of(status, "last") == "pending"

    # The plan runs `first`, stops at `flaky`, never reaches `last`.
    plan = cli(tmp_path, "run", "plan")
    assert plan.returncode == 3, text(plan.stderr)
    assert _markers(tmp_path) == {"first"}
    assert "stopped at flaky" in text(plan.stderr)

    # Fixed: the plan resumes after what is done.
    write_runbook(tmp_path, PLAN.replace("{flaky}", "echo fixed"))
    plan = cli(tmp_path, "run", "plan")
    assert plan.returncode == 0, text(plan.stderr)
    assert "skip first" in text(plan.stderr)
    assert "skip flaky" not in text(plan.stderr)
    assert b"fixed" in plan.stdout
    assert _markers(tmp_path) == {"last"}
    status = text(cli(tmp_path, "status").stdout)
    assert [_status_of(status, s) for s in ("first", "flaky", "last")] == ["succeeded"] * 3

    # Done: a third run runs nothing and says so.
    plan = cli(tmp_path, "run", "plan")
    assert plan.returncode == 0, text(plan.stderr)
    said = text(plan.stderr)
    assert "the plan is done" in said
    assert all(f"skip {s}" in said for s in ("first", "flaky", "last"))
    assert b"fixed" not in plan.stdout
    assert _markers(tmp_path) == set()

    # --from runs again from a step; --to stops after one.
    plan = cli(tmp_path, "run", "plan", "--from", "flaky")
    assert plan.returncode == 0, text(plan.stderr)
    assert b"fixed" in plan.stdout
    assert _markers(tmp_path) == {"last"}
    plan = cli(tmp_path, "run", "plan", "--from", "first", "--to", "flaky")
    assert plan.returncode == 0, text(plan.stderr)
    assert b"fixed" in plan.stdout
    assert _markers(tmp_path) == {"first"}

    runs = [p["step"] for kind, p in _events(tmp_path / "journal.db") if kind == "StepStarted"]
    assert runs == ["flaky", "first", "flaky", "flaky", "last", "flaky", "last", "first", "flaky"]


def test_to_stops_after_the_named_step_on_a_fresh_plan(tmp_path: Path) -> None:
    write_runbook(tmp_path, PLAN.replace("{flaky}", "echo fixed"))
    plan = cli(tmp_path, "run", "plan", "--to", "first")
    assert plan.returncode == 0, text(plan.stderr)
    assert _markers(tmp_path) == {"first"}
    assert b"fixed" not in plan.stdout
    # Resuming without --to picks up at the next step.
    plan = cli(tmp_path, "run", "plan")
    assert plan.returncode == 0, text(plan.stderr)
    assert "skip first" in text(plan.stderr)
    assert _markers(tmp_path) == {"last"}


# --- notes, verify, rebuild -----------------------------------------------------------------


def test_note_verify_and_rebuild(tmp_path: Path) -> None:
    write_runbook(tmp_path, PLAN.replace("{flaky}", FAILING))
    assert cli(tmp_path, "run", "step", "first").returncode == 0
    assert cli(tmp_path, "run", "step", "flaky").returncode == 3

    note = cli(tmp_path, "note", "swapped to cu130 because of sm_120", "--tag", "lesson")
    assert note.returncode == 0, text(note.stderr)
    log = text(cli(tmp_path, "log").stdout)
    assert "note [lesson]: swapped to cu130 because of sm_120" in log
    assert log.index("note [lesson]") < log.index("flaky on here")  # newest first

    stored = len(_events(tmp_path / "journal.db"))
    verify = cli(tmp_path, "verify")
    assert verify.returncode == 0, text(verify.stderr)
    assert f"{stored} events, hash chain intact" in text(verify.stdout)

    rebuild = cli(tmp_path, "rebuild")
    assert rebuild.returncode == 0, text(rebuild.stderr)
    out = text(rebuild.stdout)
    assert f"cli-test: {stored} events replayed; step runs: 1 failed, 1 succeeded" in out
    assert f"replayed {stored} events" in out
    assert len(_events(tmp_path / "journal.db")) == stored, "rebuild must not append"


def test_reading_commands_refuse_a_missing_database(tmp_path: Path) -> None:
    """A mistyped --db must not be created empty and reported as an intact journal."""
    for args in (("verify",), ("rebuild",)):
        result = journal("--db", "typo.db", *args, env=_env(), cwd=tmp_path)
        assert result.returncode == 2, text(result.stdout + result.stderr)
        assert no_traceback(result)
        assert "no database at typo.db" in text(result.stderr)
        assert "intact" not in text(result.stdout)
    # No runbook and no database here: nothing to show, and nothing created.
    result = journal("status", env=_env(), cwd=tmp_path)
    assert result.returncode == 2
    assert "journal init" in text(result.stderr)
    assert list(tmp_path.iterdir()) == []


# --- timeouts, env and cwd ------------------------------------------------------------------


def test_timeout_stops_the_step_with_124(tmp_path: Path) -> None:
    write_runbook(
        tmp_path,
        '[journal]\nname = "t"\n[hosts.here]\nssh = "local"\n'
        '[[steps]]\nname = "hang"\nrun = "echo started; sleep 30"\ntimeout = 1\n',
    )
    # a step that ran its 30 s out would exit 0: 124 and `timed-out` say the timeout stopped it
    result = cli(tmp_path, "run", "step", "hang")
    assert result.returncode == 124, text(result.stderr)
    assert "timed-out" in text(result.stderr)
    assert b"started" in result.stdout
    finished = [p for kind, p in _events(tmp_path / "journal.db") if kind == "StepFinished"]
    assert [p["status"] for p in finished] == ["timed-out"]
    assert _status_of(text(cli(tmp_path, "status").stdout), "hang") == "timed-out"


def test_step_env_and_cwd(tmp_path: Path) -> None:
    work = tmp_path / "work dir"
    work.mkdir()
    write_runbook(
        tmp_path,
        '[journal]\nname = "e"\n[hosts.here]\nssh = "local"\nenv = { FROM_HOST = "h-value" }\n'
        f'[[steps]]\nname = "show"\nrun = "echo foo=$FOO host=$FROM_HOST; pwd"\n'
        f'env = {{ FOO = "bar baz" }}\ncwd = {json.dumps(str(work))}\n',
    )
    result = cli(tmp_path, "run", "step", "show")
    assert result.returncode == 0, text(result.stderr)
    lines = text(result.stdout).splitlines()
    assert lines[0] == "foo=bar baz host=h-value"
    assert Path(lines[1]).resolve() == work.resolve()
    log = text(cli(tmp_path, "log", "--output").stdout)
    assert f"foo=bar baz host=h-value\n{lines[1]}\n" in log


def test_missing_cwd_fails_the_step(tmp_path: Path) -> None:
    write_runbook(
        tmp_path,
        '[journal]\nname = "e"\n[hosts.here]\nssh = "local"\n'
        f'[[steps]]\nname = "show"\nrun = "touch ran.marker"\n'
        f"cwd = {json.dumps(str(tmp_path / 'nowhere'))}\n",
    )
    result = cli(tmp_path, "run", "step", "show")
    assert result.returncode != 0
    assert not list(tmp_path.rglob("ran.marker"))


# --- secrets --------------------------------------------------------------------------------

HF = "hf_abcdefghijklmnopqrstuvwxyz0123456789"
SECRETS = [HF, "s3cr3t-value", "Bearer abc123", "hunter2"]


def test_secrets_never_reach_the_database(tmp_path: Path) -> None:
    write_runbook(
        tmp_path,
        '[journal]\nname = "s"\nredact = ["s3cr3t-value"]\n[hosts.here]\nssh = "local"\n'
        '[[steps]]\nname = "leaky"\n'
        f'env = {{ HF_TOKEN = "{HF}", PLAIN = "visible" }}\n'
        "run = '''\n"
        "echo token=$HF_TOKEN pw=s3cr3t-value plain=$PLAIN\n"
        "echo 'Authorization: Bearer abc123'\n"
        "echo https://user:hunter2@example.invalid/x >&2\n"
        "echo bare $HF_TOKEN\n"
        "'''\n",
    )
    result = cli(tmp_path, "run", "step", "leaky")
    assert result.returncode == 0, text(result.stderr)

    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("journal.db"))
    assert raw, "no database written"
    for secret in SECRETS:
        assert secret.encode() not in raw, f"{secret!r} is in the database file"
    events = _events(tmp_path / "journal.db")
    everything = json.dumps(events)
    for secret in SECRETS:
        assert secret not in everything

    output = text(cli(tmp_path, "log", "--output").stdout)
    assert "token=[REDACTED] pw=[REDACTED] plain=visible" in output
    assert "Authorization: [REDACTED]" in output
    assert "https://user:[REDACTED]@example.invalid/x" in output
    assert "bare [REDACTED]" in output
    timeline = text(cli(tmp_path, "log").stdout)
    for secret in SECRETS:
        assert secret not in output and secret not in timeline

    (started,) = [p for kind, p in events if kind == "StepStarted"]
    assert started["env"] == {"HF_TOKEN": "[REDACTED]", "PLAIN": "visible"}
    assert "pw=[REDACTED]" in started["command"]
    kinds = {r["kind"] for r in started["redactions"]}
    assert {"secret-variable", "listed-value", "authorization-header", "url-password"} <= kinds
    assert {"env.HF_TOKEN"} <= {r["where"] for r in started["redactions"]}
    chunk_kinds = {
        r["kind"] for kind, p in events if kind == "OutputChunk" for r in p["redactions"]
    }
    assert {"listed-value", "authorization-header", "url-password"} <= chunk_kinds


def test_a_secret_split_across_flushes_is_still_redacted(tmp_path: Path) -> None:
    write_runbook(
        tmp_path,
        '[journal]\nname = "s"\nredact = ["s3cr3t-value"]\n[hosts.here]\nssh = "local"\n'
        '[[steps]]\nname = "slow"\nrun = "printf pw=s3cr3t; sleep 0.5; echo -value"\n',
    )
    assert cli(tmp_path, "run", "step", "slow").returncode == 0
    output = text(cli(tmp_path, "log", "--output").stdout)
    assert "s3cr3t" not in output
