"""The upgrade's story from the command line: the story header of `journal status` and
`journal log`, `no change` runs, findings under their run, compact figures, the log's
filters, `journal show RUN`, `--format json`, `journal lint -` and the exit status of
`journal status`."""

from __future__ import annotations

import json
import os
import pty
import selectors
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import copy_demo
from tests.helpers import JOURNAL, drain_pty, journal, no_traceback, text, write_runbook

TRANSCRIPT = Path(__file__).parent / "data" / "transcripts" / "seed-session.txt"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for name in ("JOURNAL_DB", "JOURNAL_RUNBOOK", "NO_COLOR"):
        env.pop(name, None)
    return env


@pytest.fixture(scope="module")
def demo(demo_journal, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    """A copy of the session's demo (reading it brings its stored projections up to date)."""
    return copy_demo(demo_journal, tmp_path_factory.mktemp("story-demo")), demo_journal[1]


def on_demo(demo: tuple[Path, Path], *args: str) -> subprocess.CompletedProcess[bytes]:
    done = journal(*args, db=demo[0], runbook=demo[1], env=_env())
    assert no_traceback(done), text(done.stderr)
    return done


def run_of(demo: tuple[Path, Path], step: str, host: str = "local") -> str:
    """The id of the (first) run of ``step`` on ``host`` in the demo, from `log --format json`."""
    items = json.loads(on_demo(demo, "log", "--format", "json").stdout)["items"]
    return next(
        i["run"] for i in items if i["kind"] == "run" and (i["step"], i["host"]) == (step, host)
    )


# --- the demo: the story, no change, findings, compact figures ------------------------------


def test_status_tells_the_story(demo: tuple[Path, Path]) -> None:
    done = on_demo(demo, "status")
    out = text(done.stdout)
    head = out.split("journal cuda13-demo: plan")[0]
    assert "story:" in head
    assert "torch 2.10.0+cu128 → 2.12.0.dev20260226+cu130" in head
    assert "findings: open " in head
    # install-torch succeeded but its install changed nothing (noop-install): "no change"
    row = next(line for line in out.splitlines() if " install-torch " in line)
    assert "local: no change" in row
    assert "\x1b[" not in out  # plain when not writing to a terminal
    # exit 1 exactly when an error finding is open (the CPU benchmark's fall may be one)
    found = json.loads(on_demo(demo, "pitfalls", "--format", "json").stdout)["findings"]
    errors = [f["id"] for f in found if f["severity"] == "error"]
    assert done.returncode == (1 if errors else 0)
    for error in errors:
        assert f"open error {error}: " in out


def test_no_change_is_amber_in_a_terminal(demo: tuple[Path, Path]) -> None:
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*JOURNAL, "--db", str(demo[0]), "--runbook", str(demo[1]), "status"],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=_env(),
    )
    os.close(slave)
    seen = drain_pty(master, proc, 60)
    assert b"local: \x1b[33mno change\x1b[0m" in seen, seen


def test_log_has_the_story_findings_under_runs_and_compact_figures(demo: tuple[Path, Path]) -> None:
    done = on_demo(demo, "log")
    assert done.returncode == 0
    out = text(done.stdout)
    lines = out.splitlines()
    assert lines[0] == "story:"
    assert "torch 2.10.0+cu128 → 2.12.0.dev20260226+cu130" in out.split("journal cuda13-demo:")[0]
    install = next(line for line in lines if "] install-torch on local:" in line)
    assert "[NOOP] install-torch on local: no change exit 0" in install
    block = lines[lines.index(install) :]
    assert any(
        line.strip().startswith("finding noop-install (error, resolved): ") for line in block[:6]
    )
    # bench_serving's 20 figures a run: their labels said once, then a short line each
    said = [line for line in lines if "command=python -m sglang.bench_serving" in line]
    assert len(said) == 3, said  # one header per benchmark run
    assert all(line.strip().startswith("metrics on gpu-box (") for line in said)
    assert "                        output_token_throughput = 96.10 tok/s" in lines
    assert max(len(line) for line in lines if line.strip().startswith("metric")) < 300


def test_log_filters(demo: tuple[Path, Path]) -> None:
    by_host = text(on_demo(demo, "log", "--host", "gpu-box").stdout)
    assert "[imported] uv-pip-install" in by_host and " on local:" not in by_host
    assert "note [trigger]" in by_host  # a note about no host stays
    by_step = text(on_demo(demo, "log", "--step", "install-torch").stdout)
    assert "journal cuda13-demo: 1 step run," in by_step
    assert "] install-torch on local: no change" in by_step
    assert "note [" not in by_step and "probe torch-env on" not in by_step
    failed = text(on_demo(demo, "log", "--failed").stdout)
    assert "journal cuda13-demo: 0 step runs," in failed  # every demo run ended well


def test_json_of_status_log_and_show(demo: tuple[Path, Path]) -> None:
    status = json.loads(on_demo(demo, "status", "--format", "json").stdout)
    assert {"journal", "story", "plan", "hosts", "failed", "open_errors", "exit_status"} <= set(
        status
    )
    assert status["failed"] == []
    assert status["exit_status"] == (1 if status["open_errors"] else 0)
    local = next(h for h in status["hosts"] if h["host"] == "local")
    steps = {s["step"]: s["status"] for s in local["steps"]}
    assert steps["install-torch"] == "no change" and steps["reinstall-torch"] == "succeeded"
    torch = next(m for m in status["story"]["hosts"][0]["stack"] if m["what"] == "torch")
    assert (torch["before"], torch["after"]) == ("2.10.0+cu128", "2.12.0.dev20260226+cu130")
    assert set(status["story"]) == {"hosts", "headline", "findings"}

    log = json.loads(on_demo(demo, "log", "--format", "json", "--step", "install-torch").stdout)
    assert set(log) == {"journal", "story", "items", "total"}
    (run,) = log["items"]
    assert run["kind"] == "run" and run["status"] == "no change"
    assert run["recorded_status"] == "succeeded" and run["packages"] == []
    assert {"noop-install", "variant-not-switched"} <= {f["id"] for f in run["findings"]}

    shown = json.loads(on_demo(demo, "show", run["run"], "--format", "json").stdout)
    for key in (
        "run",
        "step",
        "host",
        "command",
        "status",
        "exit_code",
        "duration",
        "probes",
        "expectations",
        "packages",
        "findings",
        "open_errors",
        "output_tail",
        "output_lines",
    ):
        assert key in shown, key
    assert shown["status"] == "no change" and shown["exit_code"] == 0
    assert any("Checked 3 packages" in line for line in shown["output_tail"])


def test_show_a_run_in_full(demo: tuple[Path, Path]) -> None:
    run = run_of(demo, "install-torch")
    done = on_demo(demo, "show", run[:14])  # a unique start will do
    assert done.returncode == 0, text(done.stderr)
    out = text(done.stdout)
    assert f"run {run}: install-torch on local" in out
    assert "status:   no change (succeeded, but changed nothing it was asked to)" in out
    assert "exit:     0" in out and "packages: no change" in out
    assert "ERROR   noop-install" in out and "advice: add `--reinstall`" in out
    assert "output:\n" in out and "Checked 3 packages" in out
    reinstall = text(on_demo(demo, "show", run_of(demo, "reinstall-torch")).stdout)
    assert (
        "torch 2.10.0+cu128 -> 2.12.0.dev20260226+cu130 (upgraded, variant switched)" in reinstall
    )
    verify = text(on_demo(demo, "show", run_of(demo, "verify-torch-again")).stdout)
    assert "probe torch-env: torch 2.12.0.dev20260226+cu130" in verify
    assert "[ok  ] expect torch.cuda = '13.0'" in verify


def test_show_takes_a_step_name_for_its_latest_run(demo: tuple[Path, Path]) -> None:
    by_id = on_demo(demo, "show", run_of(demo, "verify-torch-again"))
    by_step = on_demo(demo, "show", "verify-torch-again")
    assert by_step.returncode == 0, text(by_step.stderr)
    assert by_step.stdout == by_id.stdout


def test_show_refuses_a_run_it_does_not_know(demo: tuple[Path, Path]) -> None:
    run = run_of(demo, "install-torch")
    unknown = on_demo(demo, "show", "nosuchrun")
    assert unknown.returncode == 2
    assert "no step run 'nosuchrun'" in text(unknown.stderr) and "journal log" in text(
        unknown.stderr
    )
    typo = on_demo(demo, "show", run[:-1] + "x")
    assert typo.returncode == 2 and run in text(typo.stderr)  # suggested
    assert run[:6] != run and on_demo(demo, "show", run[:8]).returncode == 0  # a start names it


def test_show_says_a_start_two_runs_share_is_ambiguous(tmp_path: Path) -> None:
    from journal.events import StepFinished, StepStarted
    from journal.store import EventStore

    db = tmp_path / "journal.db"
    store = EventStore(str(db))
    try:
        for run in ("3f9a2c01" + "19a0b2c3d4e", "3f9a2c77" + "19a0b2c3d4f"):
            store.append(
                "two",
                [
                    StepStarted(run, "hello", "box", "local", "echo hello"),
                    StepFinished(run, "box", "succeeded", 0, 0.1),
                ],
            )
    finally:
        store.close()
    ambiguous = journal("show", "3f9a2c", "--journal", "two", db=db)
    assert ambiguous.returncode == 2 and "ambiguous" in text(ambiguous.stderr)
    assert no_traceback(ambiguous)
    assert journal("show", "3f9a2c7", "--journal", "two", db=db).returncode == 0


# --- real runs on the local host: failures, output tails, exit status -----------------------

RUNBOOK = """\
[journal]
name = "story"

[hosts.here]
ssh = "local"

[[steps]]
name = "count"
run = "seq 1 100"
snapshots = false

[[steps]]
name = "flaky"
run = "test -f ok || {{ echo broken >&2; exit 3; }}"
snapshots = false

[benchmarks.serve]
run = "cat rate.txt"
parser = "regex"
pattern = ['tput: (?P<output_token_throughput>[0-9.]+)', 'ttft: (?P<ttft_ms>[0-9.]+)']
units = {{ output_token_throughput = "tok/s", ttft_ms = "ms" }}
"""


@pytest.fixture
def story(tmp_path: Path) -> Path:
    write_runbook(tmp_path, RUNBOOK.replace("{{", "{").replace("}}", "}"))
    assert cli(tmp_path, "run", "step", "count").returncode == 0
    assert cli(tmp_path, "run", "step", "flaky").returncode == 3
    return tmp_path


def cli(folder: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    done = journal(
        *args, db=folder / "journal.db", runbook=folder / "runbook.toml", env=_env(), cwd=folder
    )
    assert no_traceback(done), text(done.stderr)
    return done


def test_status_exits_1_while_the_last_run_of_a_step_failed(story: Path) -> None:
    failing = cli(story, "status")
    assert failing.returncode == 1
    assert "1 failed step run" in text(failing.stderr)
    assert (
        json.loads(cli(story, "status", "--format", "json").stdout)["failed"][0]["step"] == "flaky"
    )
    (story / "ok").write_text("")
    assert cli(story, "run", "step", "flaky").returncode == 0
    fixed = cli(story, "status")
    assert fixed.returncode == 0, text(fixed.stdout)
    # the failure stays in the log, found by --failed
    failed = text(cli(story, "log", "--failed").stdout)
    assert "1 step run," in failed and "[FAIL] flaky on here: failed exit 3" in failed
    assert "count on here" not in failed
    assert "2 step runs," in text(cli(story, "log", "--step", "flaky").stdout)
    assert "3 step runs," in text(cli(story, "log", "--host", "here").stdout)
    # a host the journal does not know is bad input, not an empty timeline
    unknown = cli(story, "log", "--host", "elsewhere")
    assert unknown.returncode == 2 and unknown.stdout == b""
    assert "has no host by that name (did you mean 'here'?)" in text(unknown.stderr)


def test_an_open_error_marks_its_run_and_fails_status_until_acknowledged(story: Path) -> None:
    (story / "ok").write_text("")
    assert cli(story, "run", "step", "flaky").returncode == 0
    for rate in ("tput: 100\nttft: 5\n", "tput: 50\nttft: 9\n"):
        (story / "rate.txt").write_text(rate)
        assert cli(story, "run", "bench", "serve").returncode == 0
    log = text(cli(story, "log").stdout)
    serve = [line for line in log.splitlines() if "] serve on here:" in line]
    assert "open error" not in serve[1]  # newest first
    assert serve[0].endswith("open error: throughput-regression")
    assert "finding throughput-regression (error, open): Output token throughput fell 50.0%" in log
    # the two figures of a run share their labels: said once
    assert log.count("metrics on here (benchmark=serve):") == 2
    assert "                        output_token_throughput = 50.00 tok/s" in log.splitlines()
    assert "Output token throughput (serve) on here: 100.00 → 50.00 → 50.00 tok/s" in log
    status = cli(story, "status")
    assert status.returncode == 1
    assert "open error throughput-regression: serve on here" in text(status.stdout)
    assert "1 open error finding" in text(status.stderr)
    acked = cli(story, "pitfalls", "ack", "throughput-regression", "--note", "noisy box")
    assert acked.returncode == 0, text(acked.stderr)
    assert cli(story, "status").returncode == 0


def test_show_prints_the_output_tail_or_all_of_it(story: Path) -> None:
    items = json.loads(cli(story, "log", "--format", "json").stdout)["items"]
    count = next(i["run"] for i in items if i.get("step") == "count")
    tail = text(cli(story, "show", count).stdout)
    assert "output (last 40 of 100 lines; --full-output for all):" in tail
    shown = tail.split("output (last")[1].splitlines()[1:]
    assert shown == [str(n) for n in range(61, 101)]
    everything = text(cli(story, "show", count, "--output").stdout)
    assert everything.split("output:\n")[1].splitlines() == [str(n) for n in range(1, 101)]
    flaky = next(i["run"] for i in items if i.get("step") == "flaky")
    failed = text(cli(story, "show", flaky).stdout)
    assert "status:   failed" in failed and "exit:     3" in failed and "broken" in failed


def test_lint_reads_a_transcript_from_standard_input(tmp_path: Path) -> None:
    done = subprocess.run(
        [*JOURNAL, "lint", "-", "--format", "json"],
        input=TRANSCRIPT.read_bytes(),
        capture_output=True,
        cwd=tmp_path,
        env=_env(),
        timeout=120,
    )
    assert done.returncode == 1, text(done.stderr)
    found = json.loads(done.stdout)["findings"]
    assert "noop-install" in {f["id"] for f in found}
    assert {f["file"] for f in found} == {"<stdin>"}
    assert not list(tmp_path.iterdir())


def test_log_follow_keeps_to_its_filters(story: Path) -> None:
    base = [*JOURNAL, "--db", str(story / "journal.db"), "--runbook", str(story / "runbook.toml")]
    follower = subprocess.Popen(
        [*base, "log", "--follow", "--step", "count"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=_env(),
        cwd=story,
    )
    assert follower.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(follower.stdout, selectors.EVENT_READ)
    seen = b""
    deadline = time.monotonic() + 30
    while b"-- following" not in seen and time.monotonic() < deadline:
        if selector.select(0.2):
            seen += follower.stdout.read1(65536)
    assert cli(story, "run", "step", "flaky").returncode == 3
    assert cli(story, "run", "step", "count").returncode == 0
    while b"<== count on here" not in seen and time.monotonic() < deadline:
        if selector.select(0.2):
            seen += follower.stdout.read1(65536)
    follower.send_signal(signal.SIGINT)
    rest, err = follower.communicate(timeout=10)
    selector.close()
    live = (seen + rest).split(b"-- following; Ctrl-C to stop --")[1]
    assert b"==> count on here" in live and b"\n100\n" in live, text(live)
    assert b"flaky" not in live and b"broken" not in live
    assert follower.returncode == 0, text(err)


def test_log_output_keeps_to_the_filters_and_json_does_not_follow(story: Path) -> None:
    counted = text(cli(story, "log", "--output", "--step", "count").stdout)
    assert "] count on here: succeeded" in counted and "\n100\n" in counted
    assert "broken" not in counted and "flaky" not in counted
    failed = text(cli(story, "log", "--output", "--failed").stdout)
    assert "[FAIL] flaky on here: failed exit 3" in failed and "broken" in failed
    assert "\n100\n" not in failed
    refused = cli(story, "log", "--format", "json", "--follow")
    assert refused.returncode == 2 and "--follow" in text(refused.stderr)


def test_log_groups_figures_entered_by_hand_one_after_another(story: Path) -> None:
    labels = ["--label", "phase=after", "--label", "model=llama-3-8b", "--host", "here"]
    for name, value, unit in (
        ("output_token_throughput", "96.1", "tok/s"),
        ("ttft_ms", "41", "ms"),
    ):
        figure = cli(story, "record", "metric", name, value, "--unit", unit, *labels)
        assert figure.returncode == 0, text(figure.stderr)
    assert cli(story, "note", "between the figures").returncode == 0
    for name, value in (("output_token_throughput", "90"), ("accept_length", "3.2")):
        assert cli(story, "record", "metric", name, value, *labels).returncode == 0
    alone = ["record", "metric", "itl_ms", "7", "--label", "phase=before", "--host", "here"]
    assert cli(story, *alone).returncode == 0
    lines = text(cli(story, "log").stdout).splitlines()
    at = [i for i, line in enumerate(lines) if "model=llama-3-8b" in line]
    said = [lines[i] for i in at]  # (the two may read alike, to the second)
    # two groups (the note parts them), each naming its shared labels once
    assert len(said) == 2, said
    assert all(
        line.endswith("  metrics entered by hand on here (model=llama-3-8b, phase=after):")
        for line in said
    ), said
    first, second = at  # newest first: the later group, the note, the earlier group
    pad = " " * 22
    assert lines[second + 1 : second + 3] == [
        f"{pad}output_token_throughput = 96.10 tok/s",
        f"{pad}ttft_ms = 41.00 ms",
    ]
    assert "note: between the figures" in lines[second - 1]
    assert lines[first + 1 : first + 3] == [
        f"{pad}output_token_throughput = 90.00",
        f"{pad}accept_length = 3.20",
    ]
    # a figure alone keeps its one line, labels and all
    (single,) = [line for line in lines if "itl_ms" in line]
    assert single.endswith("  metric itl_ms = 7.00 (phase=before) on here [entered by hand]"), (
        single
    )


def test_show_prints_the_end_of_a_line_too_long_to_hold_and_output_prints_it_whole(
    tmp_path: Path,
) -> None:
    write_runbook(
        tmp_path,
        '[journal]\nname = "long"\n\n[hosts.here]\nssh = "local"\n\n[[steps]]\nname = "wide"\n'
        "snapshots = false\n"
        "run = \"head -c 100000 /dev/zero | tr '\\\\0' x; echo END; echo last\"\n",
    )
    assert cli(tmp_path, "run", "step", "wide").returncode == 0
    items = json.loads(cli(tmp_path, "log", "--format", "json").stdout)["items"]
    run = next(i["run"] for i in items if i.get("step") == "wide")
    lines = cli(tmp_path, "show", run).stdout.splitlines()
    tail = lines[lines.index(b"output:") + 1 :]
    cut = 100_003 - 16_384
    assert tail == [f"[… {cut:,} bytes] ".encode() + b"x" * (16_384 - 3) + b"END", b"last"]
    whole = cli(tmp_path, "show", run, "--output").stdout
    assert b"x" * 100_000 + b"END\nlast\n" in whole
