"""Expectations through the real command line: a passing and a failing `journal run step` of
each kind of check, on the `local` host, with the exit status, the terminal, `journal log`,
`journal status` and the recorded events.

The facts come from `fake-env`, a custom `json = true` probe printing what `torch-env` prints
on a cu130 host, and from the package snapshots of journal's own python (its pinned packages,
read here with importlib.metadata). Every step runs once, in one module-scoped journal, so the
whole file costs a few dozen CLI calls.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from journal.events import (
    Event,
    ExpectationChecked,
    PackagesSnapshotted,
    ProbeRecorded,
    StepFinished,
    StepStarted,
)
from journal.projections.packages import diffs_by_run
from journal.store import EventStore
from tests.helpers import journal, no_traceback, text, write_runbook

JOURNAL = "expectations"
PYTEST = metadata.version("pytest")
SQLALCHEMY = metadata.version("sqlalchemy")
FABRIC = metadata.version("fabric")

#: What the fake probe reports: torch-env's shape on the seed's upgraded host.
FAKE_ENV = {
    "torch": {"version": "2.12.0.dev20260226+cu130", "cuda": "13.0"},
    "nccl": "2.28.9",
    "gpu_count": 8,
    "cuda_available": True,
}


@dataclass(frozen=True)
class Kind:
    """One kind of expectation: a spec that holds and one that does not, on ``key``."""

    name: str
    key: str
    passing: Any
    failing: Any
    actual: Any  # the value the failing run finds
    failing_key: str | None = None

    @property
    def fail_key(self) -> str:
        return self.failing_key or self.key


KINDS = [
    Kind("glob", "torch.version", "*+cu130", "*+cu128", "2.12.0.dev20260226+cu130"),
    Kind("exact", "torch.cuda", "13.0", "12.8", "13.0"),
    Kind("at-least", "nccl", ">=2.28", ">=2.29", "2.28.9"),
    Kind("below", "nccl", "<2.30", "<2.28", "2.28.9"),
    Kind("equal", "nccl", "==2.28.9", "==2.28.3", "2.28.9"),
    Kind("not-equal", "nccl", "!=2.22.3", "!=2.28.9", "2.28.9"),
    Kind("range", "nccl", ">=2.28,<2.30", ">=2.22,<2.28", "2.28.9"),
    Kind("one-of", "torch.cuda", ["13.0", "13.1"], ["12.8", "12.9"], "13.0"),
    Kind("int", "gpu_count", 8, 1, 8),
    Kind("bool", "cuda_available", True, False, True),
    Kind("package-version", "packages.pytest", PYTEST, "0.0.1", PYTEST),
    Kind("package-pin", "packages.SQLAlchemy", f"=={SQLALCHEMY}", "==1.4.54", SQLALCHEMY),
    Kind(
        "not-installed",
        "packages.torch",
        "not installed",
        "not installed",
        FABRIC,
        failing_key="packages.fabric",
    ),
    Kind(
        "probe-path", "fake-env:torch.version", "*+cu130", "*+cu128", FAKE_ENV["torch"]["version"]
    ),
]

#: Failing steps whose key finds nothing: (step, key, spec, what the reason says).
NOT_FOUND = [
    (
        "unprobed",
        "torch-env:nccl",
        ">=2.28",
        "probe torch-env did not run here (probes run: fake-env)",
    ),
    ("unreported", "gpu_name", "NVIDIA*", "no probe reported gpu_name"),
]


def toml(value: Any) -> str:
    """A key or value in TOML's spelling (JSON's agrees for these)."""
    return json.dumps(value)


def spelled(value: Any) -> str:
    """An expectation or value as journal spells it in events and messages."""
    return value if isinstance(value, str) else json.dumps(value)


def described(spec: Any) -> str:
    """How a failure reason words the expectation."""
    if isinstance(spec, list):
        return "one of " + ", ".join(spelled(item) for item in spec)
    return spelled(spec)


def fake_probe(name: str, expect: str = "") -> str:
    command = f"printf '%s\\n' {shlex.quote(json.dumps(FAKE_ENV))}"
    return f"[probes.{name}]\nrun = {toml(command)}\njson = true\n{expect}\n"


def step(
    name: str,
    expect: dict[str, Any],
    *,
    run: str = "true",
    probes: tuple[str, ...] = ("fake-env",),
    snapshots: bool = True,
) -> str:
    table = ", ".join(f"{toml(k)} = {toml(v)}" for k, v in expect.items())
    lines = [
        "[[steps]]",
        f"name = {toml(name)}",
        f"run = {toml(run)}",
        f"probes = {toml(list(probes))}",
        f"expect = {{ {table} }}",
    ]
    if not snapshots:
        lines.append("snapshots = false")
    return "\n".join(lines) + "\n"


def runbook_text() -> str:
    parts = [
        f'[journal]\nname = "{JOURNAL}"\n',
        f'[hosts.here]\nssh = "local"\npython = {toml(sys.executable)}\n',
        fake_probe("fake-env"),
        fake_probe("fake-env-ok", 'expect = { nccl = ">=2.28", "torch.cuda" = "13.0" }'),
        fake_probe("fake-env-strict", 'expect = { nccl = ">=2.29" }'),
    ]
    for kind in KINDS:
        parts.append(step(f"{kind.name}-pass", {kind.key: kind.passing}))
        parts.append(step(f"{kind.name}-fail", {kind.fail_key: kind.failing}))
    for name, key, spec, _ in NOT_FOUND:
        parts.append(step(name, {key: spec}))
    parts.append(step("exits-3", {"nccl": ">=2.29", "gpu_count": 8}, run="exit 3"))
    parts.append(step("probe-expect-pass", {}, probes=("fake-env-ok",)))
    parts.append(step("probe-expect-fail", {}, probes=("fake-env-strict",)))
    parts.append(step("no-snapshots", {"nccl": ">=2.28"}, snapshots=False))
    return "\n".join(parts)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("JOURNAL_DB", "JOURNAL_RUNBOOK"):
        env.pop(name, None)
    return env


def cli(folder: Path, *args: str, db: str = "journal.db") -> subprocess.CompletedProcess[bytes]:
    result = journal(*args, db=folder / db, runbook=folder / "runbook.toml", env=_env(), cwd=folder)
    assert no_traceback(result), text(result.stderr)
    return result


@dataclass
class Run:
    """One step run as the CLI answered it and as the store recorded it."""

    step: str
    result: subprocess.CompletedProcess[bytes]
    run_id: str = ""
    events: list[Event] = field(default_factory=list)

    @property
    def stderr(self) -> str:
        return text(self.result.stderr)

    def of(self, kind: type) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def finished(self) -> StepFinished:
        (finished,) = self.of(StepFinished)
        return finished


@dataclass
class Journal:
    folder: Path
    runs: dict[str, Run]
    log: str
    status: str
    diffs: dict[str, Any]

    def log_block(self, step: str) -> list[str]:
        """The lines `journal log` shows for a step's run (its line and the indented ones)."""
        lines = self.log.splitlines()
        for index, line in enumerate(lines):
            if f"] {step} on here:" in line:
                block = [line]
                for more in lines[index + 1 :]:
                    if not more.startswith(" " * 22):
                        break
                    block.append(more.strip())
                return block
        raise AssertionError(f"no run of {step} in the log:\n{self.log}")

    def status_of(self, step: str) -> str:
        for line in self.status.splitlines():
            words = line.split()
            if len(words) >= 3 and words[0].rstrip(".").isdigit() and words[1] == step:
                return words[-1]
        raise AssertionError(f"no line for {step} in:\n{self.status}")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Journal]:
    """Every step of the runbook run once with `journal run step`, then log and status."""
    folder = tmp_path_factory.mktemp("expectations")
    write_runbook(folder, runbook_text())
    steps = [f"{k.name}-{outcome}" for k in KINDS for outcome in ("pass", "fail")]
    steps += [name for name, *_ in NOT_FOUND]
    steps += ["exits-3", "probe-expect-pass", "probe-expect-fail", "no-snapshots"]
    runs = {name: Run(name, cli(folder, "run", "step", name)) for name in steps}
    store = EventStore(str(folder / "journal.db"))
    try:
        records = list(store.read(JOURNAL))
    finally:
        store.close()
    by_id: dict[str, Run] = {}
    for rec in records:
        event = rec.event
        if isinstance(event, StepStarted):
            runs[event.step].run_id = event.run
            by_id[event.run] = runs[event.step]
        run_id = getattr(event, "run", None)
        if run_id in by_id:
            by_id[run_id].events.append(event)
    log = cli(folder, "log")
    status = cli(folder, "status")
    # the *-fail steps' runs failed: status says so with exit 1
    assert log.returncode == 0 and status.returncode == 1
    yield Journal(folder, runs, text(log.stdout), text(status.stdout), diffs_by_run(records))


# --- each kind of check, passing and failing ------------------------------------------------


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_a_step_whose_expectation_holds_succeeds(recorded: Journal, kind: Kind) -> None:
    run = recorded.runs[f"{kind.name}-pass"]
    assert run.result.returncode == 0, run.stderr
    assert f"[ok  ] expect {kind.key} = " in run.stderr
    assert "[FAIL]" not in run.stderr
    assert run.finished.status == "succeeded" and run.finished.exit_code == 0
    assert run.finished.reason is None
    (check,) = run.of(ExpectationChecked)
    expected_actual = kind.actual if kind.name != "not-installed" else "not installed"
    assert (check.key, check.expected, check.verdict) == (kind.key, spelled(kind.passing), "pass")
    assert check.actual == expected_actual and check.reason is None
    assert check.host_name == "here" and check.run == run.run_id and check.probe is None
    block = recorded.log_block(f"{kind.name}-pass")
    assert "[ok  ]" in block[0]
    assert f"[ok  ] expect {kind.key} = {spelled(kind.passing)!r} ({spelled(expected_actual)})" in (
        block
    )
    assert recorded.status_of(f"{kind.name}-pass") == "succeeded"


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_a_step_whose_expectation_fails_is_a_failed_step_exit_1(
    recorded: Journal, kind: Kind
) -> None:
    run = recorded.runs[f"{kind.name}-fail"]
    key = kind.fail_key
    assert run.result.returncode == 1, run.stderr
    reason = f"{key} is {spelled(kind.actual)}, expected {described(kind.failing)}"
    # The terminal names the expectation, what was found and what was expected.
    assert f"[FAIL] expect {key} = {spelled(kind.failing)!r} on here - {reason}" in run.stderr
    assert "failed, exit 0 in " in run.stderr
    assert f"expectation failed: {reason}" in run.stderr
    # The command itself succeeded: the step failed on its expectation.
    finished = run.finished
    assert (finished.status, finished.exit_code) == ("failed", 0)
    assert finished.reason == f"expectation failed: {reason}"
    (check,) = run.of(ExpectationChecked)
    assert (check.key, check.expected, check.actual) == (key, spelled(kind.failing), kind.actual)
    assert check.verdict == "fail" and check.reason == reason and check.run == run.run_id
    assert recorded.status_of(f"{kind.name}-fail") == "failed"
    block = recorded.log_block(f"{kind.name}-fail")
    assert "[FAIL]" in block[0] and "failed exit 0" in block[0]
    assert f"[FAIL] expect {key} = {spelled(kind.failing)!r}: {reason}" in block


@pytest.mark.parametrize(("step", "key", "spec", "why"), NOT_FOUND, ids=[n[0] for n in NOT_FOUND])
def test_an_expectation_on_what_no_probe_reported_fails(
    recorded: Journal, step: str, key: str, spec: str, why: str
) -> None:
    run = recorded.runs[step]
    assert run.result.returncode == 1, run.stderr
    assert why in run.stderr
    (check,) = run.of(ExpectationChecked)
    assert (check.key, check.expected, check.actual, check.verdict) == (key, spec, None, "fail")
    assert check.reason is not None and why in check.reason
    assert (run.finished.status, run.finished.exit_code) == ("failed", 0)


# --- when expectations are (not) checked ---------------------------------------------------


def test_a_failing_command_checks_no_expectations(recorded: Journal) -> None:
    run = recorded.runs["exits-3"]
    assert run.result.returncode == 3, run.stderr
    assert (run.finished.status, run.finished.exit_code) == ("failed", 3)
    assert run.of(ExpectationChecked) == []
    assert "expect" not in run.stderr
    assert not any(line.startswith("[") for line in recorded.log_block("exits-3")[1:])
    assert recorded.status_of("exits-3") == "failed"


def test_a_probes_own_expectations_are_checked_after_a_step(recorded: Journal) -> None:
    passed = recorded.runs["probe-expect-pass"]
    assert passed.result.returncode == 0, passed.stderr
    checks = passed.of(ExpectationChecked)
    assert [(c.key, c.verdict, c.probe) for c in checks] == [
        ("nccl", "pass", "fake-env-ok"),
        ("torch.cuda", "pass", "fake-env-ok"),
    ]
    failed = recorded.runs["probe-expect-fail"]
    assert failed.result.returncode == 1, failed.stderr
    reason = "nccl is 2.28.9, expected >=2.29"
    assert f"[FAIL] expect nccl = '>=2.29' on here - {reason}" in failed.stderr
    assert (failed.finished.status, failed.finished.exit_code) == ("failed", 0)
    (check,) = failed.of(ExpectationChecked)
    assert (check.probe, check.verdict, check.actual, check.reason) == (
        "fake-env-strict",
        "fail",
        "2.28.9",
        reason,
    )
    assert recorded.status_of("probe-expect-fail") == "failed"


def test_a_probes_own_expectations_are_checked_by_run_probe(recorded: Journal) -> None:
    folder = recorded.folder
    ok = cli(folder, "run", "probe", "fake-env-ok", db="probe.db")
    assert ok.returncode == 0, text(ok.stderr)
    assert "[ok  ] expect nccl = '>=2.28' on here (2.28.9)" in text(ok.stderr)
    strict = cli(folder, "run", "probe", "fake-env-strict", db="probe.db")
    assert strict.returncode == 1, text(strict.stderr)
    assert "[FAIL] expect nccl = '>=2.29' on here - nccl is 2.28.9, expected >=2.29" in text(
        strict.stderr
    )
    store = EventStore(str(folder / "probe.db"))
    try:
        events = [rec.event for rec in store.read(JOURNAL)]
    finally:
        store.close()
    probes = [e for e in events if isinstance(e, ProbeRecorded)]
    assert [(p.probe, p.result, p.error, p.run) for p in probes] == [
        ("fake-env-ok", FAKE_ENV, None, None),
        ("fake-env-strict", FAKE_ENV, None, None),
    ]
    checks = [e for e in events if isinstance(e, ExpectationChecked)]
    assert [(c.probe, c.key, c.expected, c.actual, c.verdict, c.run) for c in checks] == [
        ("fake-env-ok", "nccl", ">=2.28", "2.28.9", "pass", None),
        ("fake-env-ok", "torch.cuda", "13.0", "13.0", "pass", None),
        ("fake-env-strict", "nccl", ">=2.29", "2.28.9", "fail", None),
    ]
    log = text(cli(folder, "log", db="probe.db").stdout)
    assert "[FAIL] expect nccl = '>=2.29': nccl is 2.28.9, expected >=2.29" in log


# --- snapshots around a step ----------------------------------------------------------------


def test_a_step_without_snapshots_records_none(recorded: Journal) -> None:
    run = recorded.runs["no-snapshots"]
    assert run.result.returncode == 0, run.stderr
    assert run.of(PackagesSnapshotted) == []
    assert run.run_id not in recorded.diffs
    assert not any(line.startswith("packages:") for line in recorded.log_block("no-snapshots"))
    assert [c.verdict for c in run.of(ExpectationChecked)] == ["pass"]


def test_a_step_that_installs_nothing_has_an_empty_package_diff(recorded: Journal) -> None:
    run = recorded.runs["glob-pass"]
    snapshots = run.of(PackagesSnapshotted)
    assert [s.phase for s in snapshots] == ["before", "after"]
    before, after = (s.packages for s in snapshots)
    assert before == after
    assert before["pytest"]["version"] == PYTEST
    assert all(s.python == sys.executable for s in snapshots)
    diff = recorded.diffs[run.run_id]
    assert diff.empty and diff.changes == []
    assert "packages: no change" in recorded.log_block("glob-pass")


# --- bad expectations are refused when the runbook is loaded ----------------------------------


BAD = """[journal]
name = "bad"

[hosts.here]
ssh = "local"

[probes.fake]
run = "echo {}"
json = true
expect = { nccl = PROBE_SPEC }

[[steps]]
name = "install"
run = "true"
expect = { "torch.cuda" = "13.0", nccl = STEP_SPEC }
"""


@pytest.mark.parametrize(
    ("where", "spec", "says"),
    [
        ("steps[0].expect.nccl", ">>2", "'>' is followed by '>2', which is not a version"),
        ("steps[0].expect.nccl", "=>2", "did you mean '>='?"),
        ("probes.fake.expect.nccl", "=>2", "did you mean '>='?"),
    ],
)
def test_a_bad_expectation_is_refused_at_load(
    tmp_path: Path, where: str, spec: str, says: str
) -> None:
    step_spec, probe_spec = (spec, ">=2.28") if where.startswith("steps") else (">=2.28", spec)
    runbook = BAD.replace("STEP_SPEC", toml(step_spec)).replace("PROBE_SPEC", toml(probe_spec))
    write_runbook(tmp_path, runbook)
    line = 1 + next(
        i for i, row in enumerate(runbook.splitlines()) if toml(spec) in row and "expect" in row
    )
    result = cli(tmp_path, "run", "step", "install")
    assert result.returncode == 2
    message = text(result.stderr)
    assert f"runbook.toml, line {line}, {where}: " in message
    assert spec in message and says in message
    assert not (tmp_path / "journal.db").exists()  # bad input records nothing
