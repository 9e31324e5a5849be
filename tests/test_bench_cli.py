"""`journal run bench` and `journal record metric`: benchmarks run on real hosts (local and a
real sshd), their figures recorded as MetricRecorded with labels, line and trust; the runbook's
`[benchmarks.NAME]` tables validated with file, line and key path."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from journal.events import MetricRecorded, StepFinished, StepStarted
from journal.store import EventStore
from tests.helpers import journal, no_traceback, text, write_runbook
from tests.sshd import SshHome, SshServer
from tests.torch_venv import torch_venv

SEED = Path(__file__).parents[1] / "journal" / "demo" / "gpu-session.txt"
H200 = Path(__file__).parent / "data" / "h200" / "bench"


def runbook(folder: Path, benchmarks: str, host: str = 'ssh = "local"', python: str = "") -> Path:
    py = f'python = "{python}"\n' if python else ""
    return write_runbook(
        folder,
        f'[journal]\nname = "bench-test"\n\n[hosts.box]\n{host}\n{py}\n'
        '[[steps]]\nname = "upgrade"\nrun = "echo upgraded"\n\n' + benchmarks,
    )


def recorded(db: Path) -> list:
    store = EventStore(str(db))
    try:
        return list(store.read("bench-test"))
    finally:
        store.close()


def metrics(db: Path) -> list[MetricRecorded]:
    return [r.event for r in recorded(db) if isinstance(r.event, MetricRecorded)]


def cat(path: Path) -> str:
    return f"cat {shlex.quote(str(path))}"


def test_a_regex_benchmark_records_each_named_group_with_labels_and_its_line(
    tmp_path: Path,
) -> None:
    rb = runbook(
        tmp_path,
        """[benchmarks.hash]
run = "echo warming up; echo 'sha256: 812.5 MB/s'; echo 'md5: 1203 MB/s'"
parser = "regex"
pattern = ['sha256: (?P<sha256>[0-9.]+) MB/s', 'md5: (?P<md5>[0-9.]+) MB/s']
units = { sha256 = "MB/s", md5 = "MB/s" }
labels = { size = "1MiB" }
""",
    )
    db = tmp_path / "j.db"
    result = journal(
        "run", "bench", "hash", "--label", "phase=before", "--label", "concurrency=1",
        db=db, runbook=rb,
    )  # fmt: skip
    assert result.returncode == 0, text(result.stderr)
    assert b"sha256: 812.5 MB/s" in result.stdout  # the output is shown live
    assert b"sha256 = 812.50 MB/s" in result.stderr  # and the figures after
    found = {m.name: m for m in metrics(db)}
    assert set(found) == {"sha256", "md5"}
    sha = found["sha256"]
    assert (sha.value, sha.unit, sha.source, sha.invalid) == (812.5, "MB/s", "parsed", None)
    assert sha.labels == {
        "benchmark": "hash",
        "host": "box",
        "size": "1MiB",
        "phase": "before",
        "concurrency": "1",
    }
    assert (sha.line, sha.text) == (2, "sha256: 812.5 MB/s")
    started = [r.event for r in recorded(db) if isinstance(r.event, StepStarted)][0]
    assert (started.step, started.benchmark) == ("hash", "hash")
    assert sha.run == started.run

    # A second run after a step: the terminal compares it with the figure before.
    journal("run", "step", "upgrade", db=db, runbook=rb)
    again = journal("run", "bench", "hash", "--label", "concurrency=1", db=db, runbook=rb)
    assert again.returncode == 0
    assert b"against 812.50 MB/s" in again.stderr, text(again.stderr)
    log = journal("log", db=db, runbook=rb)
    assert b"  sha256 = 812.50 MB/s" in log.stdout, text(log.stdout)  # under its labels


def test_a_benchmark_that_prints_no_figure_fails_and_says_why(tmp_path: Path) -> None:
    rb = runbook(
        tmp_path,
        '[benchmarks.serve]\nrun = "echo server not reachable"\nparser = "sglang"\n',
    )
    db = tmp_path / "j.db"
    result = journal("run", "bench", "serve", db=db, runbook=rb)
    assert result.returncode == 1, text(result.stderr)
    assert b"the sglang parser found no figure in the output" in result.stderr
    finished = [r.event for r in recorded(db) if isinstance(r.event, StepFinished)][-1]
    assert (finished.status, finished.exit_code) == ("failed", 0)
    assert metrics(db) == []


def test_failed_requests_make_figures_untrusted_and_bench_invalid_fires(tmp_path: Path) -> None:
    sample = tmp_path / "serve.txt"
    sample.write_text(
        "============ Serving Benchmark Result ============\n"
        "Successful requests:                     28        \n"
        "Failed requests:                         4         \n"
        "Benchmark duration (s):                  30.00     \n"
        "Request throughput (req/s):              0.93      \n"
        "Output token throughput (tok/s):         240.55    \n"
        "Total token throughput (tok/s):          1200.10   \n"
        "==================================================\n"
    )
    rb = runbook(tmp_path, f'[benchmarks.serve]\nrun = "{cat(sample)}"\nparser = "vllm"\n')
    db = tmp_path / "j.db"
    result = journal("run", "bench", "serve", db=db, runbook=rb)
    assert result.returncode == 0, text(result.stderr)
    output = {m.name: m for m in metrics(db)}["output_token_throughput"]
    assert output.value == 240.55 and "4 requests" in (output.invalid or "")
    assert b"NOT TRUSTED" in result.stderr
    findings = json.loads(
        journal("pitfalls", "--all", "--format", "json", db=db, runbook=rb).stdout
    )
    assert [f["id"] for f in findings["findings"]] == ["bench-invalid"]


def test_a_builtin_benchmark_runs_the_target_python_and_says_when_there_is_no_gpu(
    tmp_path: Path,
) -> None:
    python = torch_venv()  # a real torch 2.13.0+cpu: the script runs, and finds no CUDA device
    rb = runbook(tmp_path, '[benchmarks.mm]\nbuiltin = "matmul"\n', python=str(python))
    db = tmp_path / "j.db"
    result = journal("run", "bench", "mm", db=db, runbook=rb)
    # a host with no GPU cannot run it, and the script says so: skipped, not failed
    assert result.returncode == 0, text(result.stderr)
    assert b"[skip] mm on box skipped" in result.stderr
    assert b"no CUDA device: torch 2.13.0+cpu sees none" in result.stderr
    finished = [r.event for r in recorded(db) if isinstance(r.event, StepFinished)][-1]
    assert (finished.status, finished.reason) == (
        "skipped",
        "matmul_bf16: no CUDA device: torch 2.13.0+cpu sees none",
    )
    started = [r.event for r in recorded(db) if isinstance(r.event, StepStarted)][0]
    assert "built-in benchmark script> matmul" in started.command
    assert "def matmul" not in started.command  # the script is sent, not recorded as the command


def test_builtin_output_captured_on_h200_is_what_a_run_records(tmp_path: Path) -> None:
    # The real output of the built-in benchmarks on an H200 host, printed again by a command:
    # the same parser reads it.
    sample = H200 / "h200x2.txt"
    rb = runbook(
        tmp_path,
        f'[benchmarks.h200]\nrun = "grep \'^{{\' {sample}"\nparser = "regex"\n'
        'pattern = \'"metric": "allreduce_busbw", "value": (?P<allreduce_busbw>[0-9.]+)\'\n'
        'units = { allreduce_busbw = "GB/s" }\n',
    )
    db = tmp_path / "j.db"
    assert journal("run", "bench", "h200", db=db, runbook=rb).returncode == 0
    assert [(m.name, m.value, m.unit) for m in metrics(db)] == [
        ("allreduce_busbw", 319.157, "GB/s")
    ]


def test_record_metric_marks_a_figure_entered_by_hand(tmp_path: Path) -> None:
    rb = runbook(tmp_path, "")
    db = tmp_path / "j.db"
    first = journal(
        "record", "metric", "eagle3_output_tok_s", "90", "--unit", "tok/s",
        "--label", "phase=before", "--host", "box", db=db, runbook=rb,
    )  # fmt: skip
    assert first.returncode == 0, text(first.stderr)
    second = journal(
        "record", "metric", "eagle3_output_tok_s", "54.1", "--unit", "tok/s",
        "--label", "phase=after", "--host", "box", db=db, runbook=rb,
    )  # fmt: skip
    assert b"-39.9% against 90.00 tok/s (phase before \xe2\x86\x92 after)" in second.stdout, text(
        second.stdout
    )
    recorded_ = metrics(db)
    assert [m.value for m in recorded_] == [90.0, 54.1]
    assert {m.source for m in recorded_} == {"manual"}
    assert all(m.author and m.run is None for m in recorded_)
    findings = json.loads(
        journal("pitfalls", "--all", "--format", "json", db=db, runbook=rb).stdout
    )
    regression = [f for f in findings["findings"] if f["id"] == "throughput-regression"]
    assert len(regression) == 1 and "fell 39.9%" in regression[0]["title"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["record", "metric", "tput", "fast"], b"metric value 'fast' is not a number"),
        (["record", "metric", "tput", "nan"], b"not a finite number"),
        (["record", "metric", "t put", "1"], b"metric name 't put' is not usable"),
        (["record", "metric", "tput", "1", "--label", "phase"], b"is not key=value"),
        (["run", "bench", "nope"], b"no benchmark named 'nope'"),
        (["run", "bench", "hash", "--label", "=x"], b"is not key=value"),
    ],
)
def test_bad_input_is_refused_with_exit_2_and_records_nothing(
    tmp_path: Path, args: list[str], message: bytes
) -> None:
    rb = runbook(
        tmp_path,
        '[benchmarks.hash]\nrun = "echo x: 1"\nparser = "regex"\npattern = "x: (?P<x>[0-9]+)"\n',
    )
    db = tmp_path / "j.db"
    journal("note", "before", db=db, runbook=rb)
    before = len(recorded(db))
    result = journal(*args, db=db, runbook=rb)
    assert result.returncode == 2 and no_traceback(result), text(result.stderr)
    assert message in result.stderr, text(result.stderr)
    assert len(recorded(db)) == before


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('[benchmarks.b]\nrun = "x"\nparser = "sglnag"\n', "(did you mean 'sglang'?)"),
        ('[benchmarks.b]\nrun = "x"\n', "benchmarks.b.parser: missing"),
        ('[benchmarks.b]\nrun = "x"\nparser = "regex"\n', "the regex parser needs pattern"),
        (
            '[benchmarks.b]\nrun = "x"\nparser = "regex"\npattern = "x: ([0-9]+)"\n',
            "benchmarks.b.pattern",
        ),
        ('[benchmarks.b]\nbuiltin = "matmull"\n', "(did you mean 'matmul'?)"),
        ('[benchmarks.b]\nbuiltin = "matmul"\nparser = "sglang"\n', "does not apply"),
        ('[benchmarks.b]\nrun = "x"\nparser = "vllm"\nthreads = 3\n', "unknown key 'threads'"),
        ('[benchmarks.upgrade]\nrun = "x"\nparser = "vllm"\n', "a step is also named"),
        ('[benchmarks.b]\nrun = "x"\nparser = "vllm"\nhosts = ["bx"]\n', "(did you mean 'box'?)"),
    ],
)
def test_a_bad_benchmark_table_names_file_line_and_key(
    tmp_path: Path, table: str, message: str
) -> None:
    rb = runbook(tmp_path, table)
    result = journal("run", "bench", "b", db=tmp_path / "j.db", runbook=rb)
    assert result.returncode == 2 and no_traceback(result), text(result.stderr)
    err = text(result.stderr)
    assert f"{rb}, line " in err and message in err, err


def test_a_benchmark_runs_over_ssh_and_its_figures_name_the_host(
    tmp_path: Path, sshd: SshServer, ssh_home: SshHome
) -> None:
    rb = runbook(
        tmp_path,
        '[benchmarks.echo]\nrun = "echo \'rate: 42.5 req/s\'"\nparser = "regex"\n'
        "pattern = 'rate: (?P<rate>[0-9.]+)'\n",
        host=f'ssh = "{sshd.alias}"',
    )
    db = tmp_path / "j.db"
    result = journal("run", "bench", "echo", db=db, runbook=rb, env=ssh_home.env())
    assert result.returncode == 0, text(result.stderr)
    [metric] = metrics(db)
    assert (metric.name, metric.value, metric.host_name) == ("rate", 42.5, "box")
    started = [r.event for r in recorded(db) if isinstance(r.event, StepStarted)][0]
    assert started.target.endswith(f"@{sshd.address}:{sshd.port}")


def test_an_imported_gpu_session_records_its_benchmark_figures(tmp_path: Path) -> None:
    rb = runbook(tmp_path, "")
    db = tmp_path / "j.db"
    result = journal("import", "transcript", str(SEED), "--host", "gpu-box", db=db, runbook=rb)
    assert result.returncode == 0, text(result.stderr)
    output = [m for m in metrics(db) if m.name == "output_token_throughput"]
    assert [m.value for m in output] == [90.0, 54.1, 96.1]
    assert {m.source for m in output} == {"imported"}
    assert {m.labels["benchmark"] for m in output} == {"sglang.bench_serving"}
    assert len({m.labels["command"] for m in output}) == 1  # --output-file aside, one workload
    assert output[0].text and "90.00" in output[0].text


EAGLE = Path(__file__).parent / "data" / "bench" / "sglang-bench-serving-eagle.txt"


def bench_around_upgrade(tmp_path: Path, *after: str) -> tuple[list[dict], list[MetricRecorded]]:
    """sglang bench_serving's EAGLE-3 output (tests/data/bench) recorded before `upgrade`, then
    each of ``after`` recorded after it; the throughput-regression findings and the figures."""
    sample = tmp_path / "serving.txt"
    sample.write_text(EAGLE.read_text())
    rb = runbook(tmp_path, f'[benchmarks.serve]\nrun = "{cat(sample)}"\nparser = "sglang"\n')
    db = tmp_path / "j.db"
    first = journal("run", "bench", "serve", "--label", "phase=before", db=db, runbook=rb)
    assert first.returncode == 0, text(first.stderr)
    assert journal("run", "step", "upgrade", db=db, runbook=rb).returncode == 0
    for output in after:
        sample.write_text(output)
        done = journal("run", "bench", "serve", "--label", "phase=after", db=db, runbook=rb)
        assert done.returncode == 0, text(done.stderr)
    report = journal("pitfalls", "--all", "--format", "json", db=db, runbook=rb)
    found = json.loads(report.stdout)["findings"]
    return [f for f in found if f["id"] == "throughput-regression"], metrics(db)


def changed(lines: dict[str, str]) -> str:
    """The EAGLE-3 output with the value of each line named by its label replaced."""
    out = EAGLE.read_text()
    for label, value in lines.items():
        line = next(x for x in out.splitlines() if x.startswith(label + ":"))
        old = line.split()[-1]
        out = out.replace(line, line.replace(old, value.ljust(len(old))))
    return out


def test_a_drop_of_accept_length_alone_is_a_throughput_regression(tmp_path: Path) -> None:
    # speculative decoding accepting fewer tokens per step: every throughput as before
    found, figures = bench_around_upgrade(tmp_path, changed({"Accept length": "2.60"}))
    assert [f.value for f in figures if f.name == "accept_length"] == [3.02, 2.60]
    assert [(f["severity"], f["title"]) for f in found] == [
        ("warning", "Accept length fell 13.9%: 3.02 → 2.60")
    ]


def test_counts_never_fire_however_far_they_move(tmp_path: Path) -> None:
    # half the requests, tokens and concurrency: how much was measured, not how well
    fewer = changed(
        {
            "Successful requests": "16",
            "Total input tokens": "16384",
            "Total generated tokens": "8192",
            "Concurrency": "0.50",
        }
    )
    found, figures = bench_around_upgrade(tmp_path, fewer)
    done = [f for f in figures if f.name == "successful_requests"]
    assert [(f.value, f.invalid) for f in done] == [(32.0, None), (16.0, None)]
    assert found == []


def test_a_latency_that_rose_fires_and_is_resolved_by_one_back_within_5_percent(
    tmp_path: Path,
) -> None:
    # TTFT half as long again (61.20 → 91.80 ms), then back to 63.00 ms (+2.9% of 61.20)
    found, _ = bench_around_upgrade(
        tmp_path, changed({"Mean TTFT (ms)": "91.80"}), changed({"Mean TTFT (ms)": "63.00"})
    )
    assert [(f["severity"], f["title"]) for f in found] == [
        ("error", "mean_ttft_ms rose 50.0%: 61.20 → 91.80 ms")
    ]
    assert found[0]["state"] == "resolved", found[0]
    assert "mean_ttft_ms was back to 63.00 ms" in found[0]["resolved_by"]["why"]


def test_repeated_samples_within_their_spread_are_noise_and_outside_it_fire(
    tmp_path: Path,
) -> None:
    samples = tmp_path / "samples.txt"
    rb = runbook(
        tmp_path,
        f'[benchmarks.cpu]\nrun = "{cat(samples)}"\nparser = "regex"\n'
        "pattern = 'sample \\d+: (?P<mflops>[0-9.]+) MFLOP/s'\n"
        'units = { mflops = "MFLOP/s" }\n',
    )

    def judged(db: Path, before: list[float], after: list[float]) -> list[dict]:
        for phase, values in (("before", before), ("after", after)):
            samples.write_text("".join(f"sample {i}: {v} MFLOP/s\n" for i, v in enumerate(values)))
            done = journal("run", "bench", "cpu", "--label", f"phase={phase}", db=db, runbook=rb)
            assert done.returncode == 0, text(done.stderr)
            if phase == "before":
                assert journal("run", "step", "upgrade", db=db, runbook=rb).returncode == 0
        report = journal("pitfalls", "--all", "--format", "json", db=db, runbook=rb)
        return [
            f for f in json.loads(report.stdout)["findings"] if f["id"] == "throughput-regression"
        ]

    # medians 70 → 64 (−8.6%), but the spreads (60–74, 58–70) overlap: noise
    assert judged(tmp_path / "noise.db", [60, 69, 70, 72, 74], [58, 62, 64, 66, 70]) == []
    # medians 70 → 60 (−14.3%), spreads 68–72 and 58–62 apart: a regression, one finding
    (fell,) = judged(tmp_path / "fell.db", [68, 69, 70, 71, 72], [58, 59, 60, 61, 62])
    assert fell["title"].startswith("mflops fell 14.3%: 70.00 → 60.00 MFLOP/s"), fell["title"]
